//! The local-directory backend: one file per key under the data directory. A write is a
//! temporary file, fsynced, renamed over the final name, and the directory fsynced, so
//! an object acknowledged survives a crash that follows at once.

use super::blobs::{BlobError, BlobFuture, Blobs, ObjectInfo};
use bytes::Bytes;
use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use uuid::Uuid;

pub struct DirBlobs {
    root: PathBuf,
}

impl DirBlobs {
    /// A store rooted at `root` (created if missing; a failure shows at the first write).
    pub fn open(root: impl Into<PathBuf>) -> DirBlobs {
        let root = root.into();
        if let Err(e) = fs::create_dir_all(&root) {
            tracing::error!(dir = %root.display(), error = %e, "cannot create the data directory; writes will fail");
        }
        // Writes that never reached their rename were never acknowledged.
        for dir in [root.clone(), root.join("datasets"), root.join("deltas"), root.join("deleted")] {
            for entry in fs::read_dir(&dir).into_iter().flatten().filter_map(Result::ok) {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with('.') && name.ends_with(".tmp") {
                    let _ = fs::remove_file(entry.path());
                }
            }
        }
        DirBlobs { root }
    }

    fn path(&self, key: &str) -> PathBuf {
        self.root.join(key)
    }
}

fn classify(key: &str, e: io::Error) -> BlobError {
    let key = key.to_string();
    if e.kind() == io::ErrorKind::NotFound {
        BlobError::NotFound { key }
    } else if e.raw_os_error() == Some(libc::ENOSPC) {
        BlobError::OutOfSpace { key, message: e.to_string() }
    } else {
        BlobError::Io { key, message: e.to_string() }
    }
}

/// Runs blocking file work off the async threads.
fn blocking<'a, T: Send + 'static>(
    key: &str,
    work: impl FnOnce() -> Result<T, BlobError> + Send + 'static,
) -> BlobFuture<'a, T> {
    let key = key.to_string();
    Box::pin(async move {
        tokio::task::spawn_blocking(work)
            .await
            .unwrap_or_else(|e| Err(BlobError::Io { key, message: format!("file task failed: {e}") }))
    })
}

pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// A file's version: every write renames a new file over the name, so its inode changes
/// with every version (size and modification time guard against an inode reused).
fn file_tag(m: &fs::Metadata) -> String {
    use std::os::unix::fs::MetadataExt;
    format!("{}-{}-{}.{}", m.ino(), m.size(), m.mtime(), m.mtime_nsec())
}

/// An exclusive advisory lock on a directory (flock), released when dropped.
struct DirLock {
    _held: File,
}

impl DirLock {
    fn exclusive(dir: &Path) -> io::Result<DirLock> {
        use std::os::fd::AsRawFd;
        let f = File::open(dir)?;
        // SAFETY: flock on a descriptor this File owns; it blocks until the lock is ours.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(DirLock { _held: f })
    }
}

/// Writes `bytes` to `path` atomically and durably.
fn write_durably(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().expect("object paths have a parent");
    fs::create_dir_all(dir)?;
    replace_with(
        path,
        bytes,
        |e| e,
        |tmp| {
            fs::rename(tmp, path)?;
            sync_dir(dir)
        },
    )
}

/// Writes `bytes` to a temporary file beside `path`, fsynced, then lets `install` move it
/// into place; the temporary file is removed if anything fails (`io` maps the write's
/// errors to `install`'s).
fn replace_with<E>(
    path: &Path,
    bytes: &[u8],
    io: impl Fn(io::Error) -> E,
    install: impl FnOnce(&Path) -> Result<(), E>,
) -> Result<(), E> {
    let dir = path.parent().expect("object paths have a parent");
    let tmp = dir.join(format!(".{}.tmp", Uuid::new_v4()));
    let result = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        Ok(())
    })()
    .map_err(io)
    .and_then(|()| install(&tmp));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

impl Blobs for DirBlobs {
    fn put<'a>(&'a self, key: &'a str, bytes: Bytes) -> BlobFuture<'a, ()> {
        let path = self.path(key);
        let k = key.to_string();
        blocking(key, move || write_durably(&path, &bytes).map_err(|e| classify(&k, e)))
    }

    fn put_file<'a>(&'a self, key: &'a str, file: &'a Path) -> BlobFuture<'a, ()> {
        let (path, file, k) = (self.path(key), file.to_path_buf(), key.to_string());
        blocking(key, move || {
            let dir = path.parent().expect("object paths have a parent").to_path_buf();
            (|| {
                fs::create_dir_all(&dir)?;
                File::open(&file)?.sync_all()?;
                // The scratch file is on this file system (`scratch_dir`): a rename.
                fs::rename(&file, &path)?;
                sync_dir(&dir)
            })()
            .map_err(|e| classify(&k, e))
        })
    }

    fn put_if<'a>(&'a self, key: &'a str, bytes: Bytes, tag: &'a str) -> BlobFuture<'a, ()> {
        let (path, k, expected) = (self.path(key), key.to_string(), tag.to_string());
        blocking(key, move || {
            let dir = path.parent().expect("object paths have a parent");
            let io = |e: io::Error| classify(&k, e);
            replace_with(&path, &bytes, io, |tmp| {
                // The compare and the rename under one lock on the directory, which every
                // process sharing it takes for conditional writes.
                let lock = DirLock::exclusive(dir).map_err(io)?;
                let current = match fs::metadata(&path) {
                    Ok(m) => Some(file_tag(&m)),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => None,
                    Err(e) => return Err(io(e)),
                };
                if current.as_deref() != Some(expected.as_str()) {
                    return Err(BlobError::Conflict { key: k.clone() });
                }
                fs::rename(tmp, &path).map_err(io)?;
                drop(lock);
                sync_dir(dir).map_err(io)
            })
        })
    }

    fn put_new<'a>(&'a self, key: &'a str, bytes: Bytes) -> BlobFuture<'a, ()> {
        let (path, k) = (self.path(key), key.to_string());
        blocking(key, move || {
            let dir = path.parent().expect("object paths have a parent").to_path_buf();
            fs::create_dir_all(&dir).map_err(|e| classify(&k, e))?;
            let io = |e: io::Error| classify(&k, e);
            replace_with(&path, &bytes, io, |tmp| {
                // A hard link fails if the name is taken: the create-only rename.
                let linked = fs::hard_link(tmp, &path);
                let _ = fs::remove_file(tmp);
                match linked {
                    Ok(()) => sync_dir(&dir).map_err(io),
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(BlobError::Conflict { key: k.clone() }),
                    Err(e) => Err(io(e)),
                }
            })
        })
    }

    fn tag<'a>(&'a self, key: &'a str) -> BlobFuture<'a, Option<String>> {
        let (path, k) = (self.path(key), key.to_string());
        blocking(key, move || match fs::metadata(&path) {
            Ok(m) => Ok(Some(file_tag(&m))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(classify(&k, e)),
        })
    }

    fn get<'a>(&'a self, key: &'a str) -> BlobFuture<'a, Bytes> {
        let (path, k) = (self.path(key), key.to_string());
        blocking(key, move || fs::read(&path).map(Bytes::from).map_err(|e| classify(&k, e)))
    }

    fn get_range<'a>(&'a self, key: &'a str, range: Range<u64>) -> BlobFuture<'a, Bytes> {
        let (path, k) = (self.path(key), key.to_string());
        blocking(key, move || {
            (|| {
                let mut f = File::open(&path)?;
                let size = f.metadata()?.len();
                let (start, end) = (range.start.min(size), range.end.min(size));
                f.seek(SeekFrom::Start(start))?;
                let mut out = vec![0; (end - start) as usize];
                f.read_exact(&mut out)?;
                Ok(Bytes::from(out))
            })()
            .map_err(|e| classify(&k, e))
        })
    }

    fn size<'a>(&'a self, key: &'a str) -> BlobFuture<'a, u64> {
        let (path, k) = (self.path(key), key.to_string());
        blocking(key, move || fs::metadata(&path).map(|m| m.len()).map_err(|e| classify(&k, e)))
    }

    fn delete<'a>(&'a self, key: &'a str) -> BlobFuture<'a, ()> {
        let (path, k) = (self.path(key), key.to_string());
        blocking(key, move || {
            let dir = path.parent().expect("object paths have a parent");
            // Under the directory's lock, as a conditional write compares and renames: a
            // compaction's write over a model cannot land after this delete and bring it back.
            let lock = match DirLock::exclusive(dir) {
                Ok(l) => l,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(classify(&k, e)),
            };
            let removed = fs::remove_file(&path);
            drop(lock);
            match removed {
                Ok(()) => sync_dir(dir).map_err(|e| classify(&k, e)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(classify(&k, e)),
            }
        })
    }

    fn list<'a>(&'a self, dir: &'a str) -> BlobFuture<'a, Vec<ObjectInfo>> {
        let (path, prefix) = (self.path(dir), dir.to_string());
        blocking(dir, move || {
            let entries = match fs::read_dir(&path) {
                Ok(e) => e,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
                Err(e) => return Err(classify(&prefix, e)),
            };
            let mut out = Vec::new();
            for entry in entries.filter_map(Result::ok) {
                let name = entry.file_name().to_string_lossy().into_owned();
                let Ok(meta) = entry.metadata() else { continue };
                if !meta.is_file() {
                    continue;
                }
                if name.starts_with('.') {
                    // A write in progress (or, at start, one that never reached its rename).
                    continue;
                }
                let key = if prefix.is_empty() { name } else { format!("{}/{name}", prefix.trim_end_matches('/')) };
                out.push(ObjectInfo { key, size: meta.len(), modified: meta.modified().ok() });
            }
            out.sort_by(|a, b| a.key.cmp(&b.key));
            Ok(out)
        })
    }

    fn quarantine<'a>(&'a self, key: &'a str) -> BlobFuture<'a, ()> {
        let (path, k) = (self.path(key), key.to_string());
        blocking(key, move || {
            let dir = path.parent().expect("object paths have a parent").join("quarantine");
            (|| {
                fs::create_dir_all(&dir)?;
                fs::rename(&path, dir.join(path.file_name().unwrap_or_default()))
            })()
            .map_err(|e| classify(&k, e))
        })
    }

    fn scratch_dir(&self) -> PathBuf {
        self.root.join("datasets")
    }

    fn is_durable(&self) -> bool {
        true
    }

    fn local_path(&self, key: &str) -> Option<PathBuf> {
        Some(self.path(key))
    }

    fn describe(&self) -> String {
        format!("directory {}", self.root.display())
    }
}

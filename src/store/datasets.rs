//! Where uploaded datasets live: `DATA_DIR/datasets/ID.dataset` (written to a temporary
//! file, fsynced, renamed, directory fsynced, before the 201), or in memory when the
//! service keeps no data directory. The bytes are the stored form of
//! `dataset::format`; this module only moves them.

use crate::dataset::format::{self, Decoded, FormatError};
use crate::dataset::{DatasetInfo, IngestError};
use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use uuid::Uuid;

const EXTENSION: &str = "dataset";

/// The destination an upload is written to while it streams in.
pub enum Sink {
    File(File),
    Memory(Vec<u8>),
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::File(f) => f.write(buf),
            Sink::Memory(v) => v.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::File(f) => f.flush(),
            Sink::Memory(_) => Ok(()),
        }
    }
}

pub enum DatasetStore {
    Dir(PathBuf),
    Memory(Mutex<HashMap<Uuid, Arc<Vec<u8>>>>),
}

impl DatasetStore {
    /// Datasets under `data_dir/datasets`, or in memory when `data_dir` is empty.
    pub fn open(data_dir: &str) -> DatasetStore {
        if data_dir.is_empty() {
            return DatasetStore::Memory(Mutex::default());
        }
        let dir = Path::new(data_dir).join("datasets");
        if let Err(e) = fs::create_dir_all(&dir) {
            tracing::error!(dir = %dir.display(), error = %e, "cannot create the datasets directory; uploads will fail");
        }
        DatasetStore::Dir(dir)
    }

    fn path_of(dir: &Path, id: Uuid) -> PathBuf {
        dir.join(format!("{id}.{EXTENSION}"))
    }

    /// Runs `parse`, which streams an upload into the sink it is given, and keeps the
    /// result durably under the id `parse` assigns. Nothing is kept if it fails.
    pub fn write(
        &self,
        parse: impl FnOnce(Sink) -> Result<(DatasetInfo, Sink), IngestError>,
    ) -> Result<DatasetInfo, IngestError> {
        match self {
            DatasetStore::Memory(map) => {
                let (info, sink) = parse(Sink::Memory(Vec::new()))?;
                let Sink::Memory(bytes) = sink else { unreachable!("the sink given is returned") };
                map.lock().unwrap_or_else(|p| p.into_inner()).insert(info.id, Arc::new(bytes));
                Ok(info)
            }
            DatasetStore::Dir(dir) => {
                let tmp = dir.join(format!(".{}.tmp", Uuid::new_v4()));
                let result = (|| {
                    let file = File::create(&tmp)?;
                    let (info, sink) = parse(Sink::File(file))?;
                    let Sink::File(file) = sink else { unreachable!("the sink given is returned") };
                    file.sync_all()?;
                    fs::rename(&tmp, Self::path_of(dir, info.id))?;
                    super::sync_dir(dir)?;
                    Ok(info)
                })();
                if result.is_err() {
                    let _ = fs::remove_file(&tmp);
                }
                result
            }
        }
    }

    /// Reads a dataset whole, verifying its checksum.
    pub fn read(&self, id: Uuid) -> Result<Decoded, FormatError> {
        match self {
            DatasetStore::Memory(map) => {
                let bytes = map.lock().unwrap_or_else(|p| p.into_inner()).get(&id).cloned();
                let bytes = bytes.ok_or_else(|| FormatError::Io(io::ErrorKind::NotFound.into()))?;
                format::read_dataset(&bytes[..], bytes.len() as u64)
            }
            DatasetStore::Dir(dir) => {
                let file = File::open(Self::path_of(dir, id))?;
                let size = file.metadata()?.len();
                format::read_dataset(io::BufReader::with_capacity(1 << 20, file), size)
            }
        }
    }

    /// Removes a dataset (absent is fine). An open reader keeps its copy.
    pub fn remove(&self, id: Uuid) -> io::Result<()> {
        match self {
            DatasetStore::Memory(map) => {
                map.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
                Ok(())
            }
            DatasetStore::Dir(dir) => match fs::remove_file(Self::path_of(dir, id)) {
                Ok(()) => super::sync_dir(dir),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(e),
            },
        }
    }

    /// The descriptions of every stored dataset, read from each file's trailer (the data
    /// itself is checked when a fit reads it). Files that are not datasets are moved to
    /// `quarantine/`; leftovers of interrupted uploads are removed.
    pub fn load(&self) -> Vec<DatasetInfo> {
        let DatasetStore::Dir(dir) = self else { return Vec::new() };
        let Ok(entries) = fs::read_dir(dir) else { return Vec::new() };
        let mut out = Vec::new();
        for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if name.starts_with('.') && name.ends_with(".tmp") {
                let _ = fs::remove_file(&path);
                continue;
            }
            if path.extension().and_then(|e| e.to_str()) != Some(EXTENSION) || !path.is_file() {
                continue;
            }
            let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_string();
            match read_info(&path) {
                Ok(info) if info.id.to_string() == stem => out.push(info),
                Ok(_) => quarantine(dir, &path, "file name does not match the stored id"),
                Err(e) => quarantine(dir, &path, &e.to_string()),
            }
        }
        out.sort_by_key(|i| (i.created_at_unix_nanos, i.id));
        out
    }
}

fn read_info(path: &Path) -> Result<DatasetInfo, FormatError> {
    let mut f = File::open(path)?;
    let size = f.metadata()?.len();
    let mut want = 4096u64.min(size);
    loop {
        f.seek(SeekFrom::Start(size - want))?;
        let mut tail = vec![0; want as usize];
        f.read_exact(&mut tail)?;
        match format::read_info(&tail, size)? {
            Ok(info) => return Ok(info),
            Err(need) if need > want && need <= size => want = need,
            Err(_) => return Err(FormatError::Corrupt("inconsistent trailer length".into())),
        }
    }
}

fn quarantine(dir: &Path, path: &Path, reason: &str) {
    let target = dir.join("quarantine");
    let _ = fs::create_dir_all(&target);
    let target = target.join(path.file_name().unwrap_or_default());
    let moved = fs::rename(path, &target).is_ok();
    tracing::warn!(file = %path.display(), moved, reason, "quarantined a stored dataset");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::csv::{ingest, CsvOptions};

    #[test]
    fn datasets_survive_a_reopen_and_damage_is_quarantined() {
        let root = std::env::temp_dir().join(format!("mercer-ds-{}", Uuid::new_v4()));
        let store = DatasetStore::open(root.to_str().unwrap());
        let csv = b"a,b,y\n1,2,3\n4,5,6\n";
        let info = store.write(|sink| ingest(&csv[..], sink, CsvOptions::default())).unwrap();
        let failed = store.write(|sink| ingest(&b"a,y\n1,x\nq,1\n"[..], sink, CsvOptions::default()));
        assert!(failed.is_err());
        let reopened = DatasetStore::open(root.to_str().unwrap());
        assert_eq!(reopened.load(), vec![info.clone()], "one dataset, no leftovers of the failed upload");
        let back = reopened.read(info.id).unwrap();
        assert_eq!(back.x.as_matrix().as_slice(), &[1.0, 2.0, 4.0, 5.0]);
        let path = DatasetStore::path_of(&root.join("datasets"), info.id);
        let mut bytes = fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        fs::write(&path, &bytes).unwrap();
        assert!(reopened.load().is_empty());
        assert!(root.join("datasets/quarantine").join(path.file_name().unwrap()).exists());
        reopened.remove(info.id).unwrap();
        assert_eq!(fs::read_dir(root.join("datasets")).unwrap().count(), 1, "only quarantine/ is left");
        fs::remove_dir_all(root).unwrap();
    }
}

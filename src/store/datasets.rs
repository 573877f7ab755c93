//! Uploaded datasets in the store: `datasets/ID.dataset`, the stored form of
//! `dataset::format`. An upload streams into a scratch file beside the store (so that on
//! a directory the final write is a rename), which is then stored whole before the 201.
//! This module only moves the bytes; the format reads and checks them.

use super::blobs::BlobError;
use super::{Store, StoreError, SMALL_CALL};
use crate::dataset::format::{self, Decoded};
use crate::dataset::DatasetInfo;
use std::path::{Path, PathBuf};
use uuid::Uuid;

pub fn dataset_key(id: Uuid) -> String {
    format!("datasets/{id}.dataset")
}

impl Store {
    /// A new scratch file's path for an upload in progress (its directory created).
    pub fn dataset_scratch(&self) -> std::io::Result<PathBuf> {
        let dir = self.blobs.scratch_dir();
        std::fs::create_dir_all(&dir)?;
        Ok(dir.join(format!(".{}.tmp", Uuid::new_v4())))
    }

    /// Stores the dataset written to `file` under `id` (the file is consumed).
    pub async fn save_dataset(&self, id: Uuid, file: &Path) -> Result<(), StoreError> {
        let key = dataset_key(id);
        let size = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
        Ok(self.call("put", &key, super::bulk(size), self.blobs.put_file(&key, file)).await?)
    }

    pub async fn delete_dataset(&self, id: Uuid) -> Result<(), StoreError> {
        let key = dataset_key(id);
        Ok(self.call("delete", &key, SMALL_CALL, self.blobs.delete(&key)).await?)
    }

    /// The ids of every stored dataset.
    pub async fn list_datasets(&self) -> Result<Vec<Uuid>, StoreError> {
        let listed = self.list("datasets").await?;
        Ok(listed
            .iter()
            .filter_map(|o| {
                let name = o.key.rsplit('/').next()?;
                name.strip_suffix(".dataset").and_then(|s| Uuid::parse_str(s).ok())
            })
            .collect())
    }

    /// A dataset's description, read from its trailer (None: no such dataset). A damaged
    /// one is moved to quarantine.
    pub async fn dataset_info(&self, id: Uuid) -> Result<Option<DatasetInfo>, StoreError> {
        let key = dataset_key(id);
        let size = match self.call("head", &key, SMALL_CALL, self.blobs.size(&key)).await {
            Ok(s) => s,
            Err(BlobError::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let mut want = 4096u64.min(size);
        loop {
            let tail = match self.call("get", &key, SMALL_CALL, self.blobs.get_range(&key, size - want..size)).await {
                Ok(t) => t,
                Err(BlobError::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(e.into()),
            };
            let reason = match format::read_info(&tail, size) {
                Ok(Ok(info)) if info.id == id => return Ok(Some(info)),
                Ok(Ok(info)) => format!("the object of {id} holds dataset {}", info.id),
                Ok(Err(need)) if need > want && need <= size => {
                    want = need;
                    continue;
                }
                Ok(Err(_)) => "inconsistent trailer length".into(),
                Err(e) => e.to_string(),
            };
            let moved = self.call("rename", &key, SMALL_CALL, self.blobs.quarantine(&key)).await.is_ok();
            tracing::warn!(key, reason, moved, "quarantined a stored dataset");
            return Ok(None);
        }
    }

    /// Reads a dataset whole, verifying its checksum (None: no such dataset). Blocking:
    /// call from a blocking thread. The object streams in blocks (a file in place, an S3
    /// object by ranged reads of [`READ_BLOCK`]) and is decoded as it arrives: a fit holds
    /// the decoded rows and one block, never the object's bytes whole besides.
    pub fn read_dataset_blocking(&self, id: Uuid) -> Result<Option<Decoded>, StoreError> {
        self.read_dataset_in_blocks(id, READ_BLOCK)
    }

    /// As [`Store::read_dataset_blocking`], an object store's ranged reads `block` bytes each.
    pub(crate) fn read_dataset_in_blocks(&self, id: Uuid, block: u64) -> Result<Option<Decoded>, StoreError> {
        let key = dataset_key(id);
        let corrupt = |e: format::FormatError| StoreError::Corrupt { key: key.clone(), reason: e.to_string() };
        if let Some(path) = self.blobs.local_path(&key) {
            use std::io::{Read, Seek, SeekFrom};
            let io = |e: std::io::Error| StoreError::from(BlobError::Io { key: key.clone(), message: e.to_string() });
            let mut file = match std::fs::File::open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(io(e)),
            };
            let size = file.metadata().map_err(io)?.len();
            let mut want = TAIL_READ.min(size);
            let tail = loop {
                file.seek(SeekFrom::Start(size - want)).map_err(io)?;
                let mut tail = vec![0u8; want as usize];
                file.read_exact(&mut tail).map_err(io)?;
                match format::read_info(&tail, size).map_err(corrupt)? {
                    Err(need) if need > want && need <= size => want = need,
                    _ => break tail,
                }
            };
            file.seek(SeekFrom::Start(0)).map_err(io)?;
            let reader = std::io::BufReader::with_capacity(1 << 20, file);
            return format::read_dataset_streaming(reader, &tail, size).map(Some).map_err(corrupt);
        }
        let size = match self.block_on(self.call("head", &key, SMALL_CALL, self.blobs.size(&key))) {
            Ok(s) => s,
            Err(BlobError::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let mut want = TAIL_READ.min(size);
        let tail = loop {
            let tail = match self.block_on(self.call(
                "get",
                &key,
                SMALL_CALL,
                self.blobs.get_range(&key, size - want..size),
            )) {
                Ok(t) => t,
                Err(BlobError::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(e.into()),
            };
            match format::read_info(&tail, size).map_err(corrupt)? {
                Err(need) if need > want && need <= size => want = need,
                _ => break tail,
            }
        };
        let mut reader = RangeReader {
            store: self,
            key: &key,
            size,
            at: 0,
            step: block.max(1),
            block: bytes::Bytes::new(),
            failed: None,
        };
        let read = format::read_dataset_streaming(&mut reader, &tail, size);
        if let Some(e) = reader.failed.take() {
            return match e {
                BlobError::NotFound { .. } => Ok(None), // deleted while being read
                e => Err(e.into()),
            };
        }
        read.map(Some).map_err(corrupt)
    }
}

/// The first ranged read of a dataset's tail: enough for any trailer but the largest.
const TAIL_READ: u64 = 64 << 10;

/// Bytes per ranged read of a dataset being streamed.
pub const READ_BLOCK: u64 = 8 << 20;

/// An object read in order by ranged GETs (of [`READ_BLOCK`] in service), each under the store's
/// deadlines; a failed read ends the stream (kept in `failed` for the caller).
struct RangeReader<'a> {
    store: &'a Store,
    key: &'a str,
    size: u64,
    at: u64,
    /// Bytes per ranged read.
    step: u64,
    block: bytes::Bytes,
    failed: Option<BlobError>,
}

impl std::io::Read for RangeReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.block.is_empty() {
            if self.at >= self.size {
                return Ok(0);
            }
            let end = (self.at + self.step).min(self.size);
            let range = self.at..end;
            let got = self.store.block_on(self.store.call(
                "get",
                self.key,
                super::bulk(end - range.start),
                self.store.blobs.get_range(self.key, range),
            ));
            match got {
                Ok(b) if b.len() as u64 == end - self.at => {
                    self.at = end;
                    self.block = b;
                }
                Ok(_) => return Err(std::io::Error::other("a ranged read returned another length")),
                Err(e) => {
                    let message = e.to_string();
                    self.failed = Some(e);
                    return Err(std::io::Error::other(message));
                }
            }
        }
        let k = buf.len().min(self.block.len());
        buf[..k].copy_from_slice(&self.block[..k]);
        self.block = self.block.slice(k..);
        Ok(k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::csv::{ingest, CsvOptions};
    use crate::store::dir::DirBlobs;
    use std::sync::Arc;

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn datasets_survive_a_reopen_and_damage_is_quarantined() {
        let root = std::env::temp_dir().join(format!("mercer-ds-{}", Uuid::new_v4()));
        let store = Store::new(Arc::new(DirBlobs::open(&root)));
        let scratch = store.dataset_scratch().unwrap();
        let file = std::fs::File::create(&scratch).unwrap();
        let (info, _) = ingest(&b"a,b,y\n1,2,3\n4,5,6\n"[..], file, CsvOptions::default()).unwrap();
        store.save_dataset(info.id, &scratch).await.unwrap();
        assert!(!scratch.exists(), "the scratch file became the dataset");
        let leftover = store.dataset_scratch().unwrap();
        std::fs::write(&leftover, b"half an upload").unwrap();

        let reopened = Arc::new(Store::new(Arc::new(DirBlobs::open(&root))));
        assert!(!leftover.exists(), "an upload that never finished is removed at start");
        assert_eq!(reopened.list_datasets().await.unwrap(), vec![info.id]);
        assert_eq!(reopened.dataset_info(info.id).await.unwrap(), Some(info.clone()));
        let r = reopened.clone();
        let back = tokio::task::spawn_blocking(move || r.read_dataset_blocking(info.id)).await.unwrap().unwrap();
        assert_eq!(back.unwrap().x.as_matrix().as_slice(), &[1.0, 2.0, 4.0, 5.0]);

        let path = root.join(dataset_key(info.id));
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(reopened.dataset_info(info.id).await.unwrap(), None);
        assert!(root.join("datasets/quarantine").join(path.file_name().unwrap()).exists());
        assert!(reopened.list_datasets().await.unwrap().is_empty());
        std::fs::remove_dir_all(root).unwrap();
    }

    /// An object-store dataset streams in ranged reads and decodes to what the bytes
    /// whole decode to, whatever the block size; a damaged byte anywhere is caught.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn object_datasets_stream_in_blocks() {
        use crate::store::blobs::Blobs;
        use crate::store::object::ObjectBlobs;
        let memory: Arc<dyn object_store::ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let blobs = Arc::new(ObjectBlobs::shared(memory.clone(), "p", std::env::temp_dir()));
        let store = Arc::new(Store::new(blobs.clone()));
        let mut csv = String::from("a,b,y\n");
        for i in 0..3000 {
            csv.push_str(&format!("{},{},{}\n", i as f64 * 0.5, (i % 7) as f64, (i % 3) as f64 - 1.0));
        }
        let scratch = store.dataset_scratch().unwrap();
        let file = std::fs::File::create(&scratch).unwrap();
        let (info, _) = ingest(csv.as_bytes(), file, CsvOptions::default()).unwrap();
        let bytes = std::fs::read(&scratch).unwrap();
        store.save_dataset(info.id, &scratch).await.unwrap();
        let whole = format::read_dataset(&bytes[..], bytes.len() as u64).unwrap();
        for block in [1u64, 977, 1 << 12, READ_BLOCK] {
            let s = store.clone();
            let got = tokio::task::spawn_blocking(move || s.read_dataset_in_blocks(info.id, block)).await.unwrap();
            let got = got.unwrap().expect("the dataset");
            assert_eq!(got.info, whole.info, "block {block}");
            assert_eq!(got.x.as_matrix(), whole.x.as_matrix(), "block {block}");
            assert_eq!(got.y, whole.y, "block {block}");
        }
        // One flipped byte in the x section: the checksum says so.
        let mut damaged = bytes.clone();
        damaged[100] ^= 1;
        blobs.put(&dataset_key(info.id), bytes::Bytes::from(damaged)).await.unwrap();
        let s = store.clone();
        let got = tokio::task::spawn_blocking(move || s.read_dataset_in_blocks(info.id, 4096)).await.unwrap();
        assert!(matches!(got, Err(StoreError::Corrupt { .. })), "{:?}", got.map(|d| d.map(|d| d.info)));
    }
}

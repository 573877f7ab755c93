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
        let listed = self.call("list", "datasets", SMALL_CALL, self.blobs.list("datasets")).await?;
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
    /// call from a blocking thread.
    pub fn read_dataset_blocking(&self, id: Uuid) -> Result<Option<Decoded>, StoreError> {
        let key = dataset_key(id);
        let corrupt = |e: format::FormatError| StoreError::Corrupt { key: key.clone(), reason: e.to_string() };
        if let Some(path) = self.blobs.local_path(&key) {
            // Read in place, as it streams: no copy of the file in memory.
            let file = match std::fs::File::open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(BlobError::Io { key, message: e.to_string() }.into()),
            };
            let size = file.metadata().map_err(|e| BlobError::Io { key: key.clone(), message: e.to_string() })?.len();
            return format::read_dataset(std::io::BufReader::with_capacity(1 << 20, file), size)
                .map(Some)
                .map_err(corrupt);
        }
        let bytes = match self.block_on(self.call("get", &key, super::bulk(1 << 32), self.blobs.get(&key))) {
            Ok(b) => b,
            Err(BlobError::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        format::read_dataset(&bytes[..], bytes.len() as u64).map(Some).map_err(corrupt)
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
}

//! The one storage trait: named byte objects under flat keys. Everything mercer keeps
//! durably (models, datasets) goes through it, so a deployment chooses where by URL
//! alone: a local directory ([`super::dir::DirBlobs`]) or any S3-compatible object store
//! ([`super::object::ObjectBlobs`]), which also gives the in-memory store.
//!
//! Keys are relative paths (`ID.model`, `datasets/ID.dataset`); a backend maps them
//! under its root or prefix. Calls are async because the remote backend is; the
//! directory backend runs its file I/O on blocking threads.

use bytes::Bytes;
use std::future::Future;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::pin::Pin;

pub type BlobFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, BlobError>> + Send + 'a>>;

#[derive(Debug, Clone, thiserror::Error)]
pub enum BlobError {
    #[error("{key}: no such object")]
    NotFound { key: String },
    /// The disk or bucket refused a write for lack of space (507 for the client).
    #[error("{key}: out of space: {message}")]
    OutOfSpace { key: String, message: String },
    /// Network failure, timeout, throttling, a 5xx: the store may come back.
    #[error("the store cannot be reached ({op} {key}): {message}")]
    Unavailable { op: &'static str, key: String, message: String },
    /// A conditional write found the object changed (or gone) since the version it was
    /// conditioned on.
    #[error("{key}: changed since it was read")]
    Conflict { key: String },
    /// A local file operation failed for another reason.
    #[error("{key}: {message}")]
    Io { key: String, message: String },
}

impl BlobError {
    /// Whether the failure says the store itself is down, rather than something about
    /// one object.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, BlobError::Unavailable { .. })
    }
}

/// An object as a listing shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectInfo {
    /// The key relative to the store's root.
    pub key: String,
    pub size: u64,
    /// When it was last written (the backend's clock; None where not known).
    pub modified: Option<std::time::SystemTime>,
}

pub trait Blobs: Send + Sync + 'static {
    /// Stores `bytes` under `key`, replacing any object there. When this returns Ok the
    /// object is durable and readable by every process sharing the store.
    fn put<'a>(&'a self, key: &'a str, bytes: Bytes) -> BlobFuture<'a, ()>;

    /// Stores the content of a local file (large objects: uploaded datasets) under `key`
    /// and removes the file. Same guarantee as [`Blobs::put`].
    fn put_file<'a>(&'a self, key: &'a str, file: &'a Path) -> BlobFuture<'a, ()>;

    /// Stores `bytes` under `key` only if the object there is still the version `tag`
    /// names (compare-and-swap); `Conflict` if it changed or went away meanwhile.
    fn put_if<'a>(&'a self, key: &'a str, bytes: Bytes, tag: &'a str) -> BlobFuture<'a, ()>;

    /// Stores `bytes` under `key` only if no object is there (create-only); `Conflict` if
    /// one is. Same guarantee as [`Blobs::put`]: the online updates' deltas, one key per
    /// version, so that of two writers of one version exactly one lands.
    fn put_new<'a>(&'a self, key: &'a str, bytes: Bytes) -> BlobFuture<'a, ()>;

    /// A tag naming the version of the object now under `key` (None: no object), for
    /// [`Blobs::put_if`]: its ETag, or for a file its identity.
    fn tag<'a>(&'a self, key: &'a str) -> BlobFuture<'a, Option<String>>;

    fn get<'a>(&'a self, key: &'a str) -> BlobFuture<'a, Bytes>;

    /// Bytes `range` of an object (clamped to its end).
    fn get_range<'a>(&'a self, key: &'a str, range: Range<u64>) -> BlobFuture<'a, Bytes>;

    /// An object's size in bytes.
    fn size<'a>(&'a self, key: &'a str) -> BlobFuture<'a, u64>;

    /// Removes an object; absent is fine.
    fn delete<'a>(&'a self, key: &'a str) -> BlobFuture<'a, ()>;

    /// The objects directly under `dir` ("" for the root), not recursing.
    fn list<'a>(&'a self, dir: &'a str) -> BlobFuture<'a, Vec<ObjectInfo>>;

    /// Moves a damaged object aside to `quarantine/` so that it is neither served nor
    /// listed again, and kept for a human to look at.
    fn quarantine<'a>(&'a self, key: &'a str) -> BlobFuture<'a, ()>;

    /// Where a scratch file for an upload in progress should go: on the same file system
    /// as the store when there is one (so that `put_file` is a rename).
    fn scratch_dir(&self) -> PathBuf;

    /// Whether objects outlive the process.
    fn is_durable(&self) -> bool;

    /// The local file behind a key, when the backend is a directory: large objects are
    /// then read in place rather than copied into memory.
    fn local_path(&self, _key: &str) -> Option<PathBuf> {
        None
    }

    /// For logs and /readyz: where the objects are.
    fn describe(&self) -> String;

    /// Drops every pooled connection (called after a call found the store unreachable):
    /// the next call connects afresh, so nothing opened before an outage is reused after
    /// it. Backends without connections do nothing.
    fn reset_connections(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::dir::DirBlobs;
    use crate::store::object::ObjectBlobs;

    /// Both backends' compare-and-swap: a write conditioned on the current version lands
    /// (and changes the version), one conditioned on an older version or on an object
    /// that is gone conflicts and leaves the object as it was.
    #[tokio::test]
    async fn put_if_lands_only_on_the_version_it_names() {
        let dir = std::env::temp_dir().join(format!("mercer-cas-{}", uuid::Uuid::new_v4()));
        let backends: Vec<Box<dyn Blobs>> =
            vec![Box::new(DirBlobs::open(&dir)), Box::new(ObjectBlobs::memory(std::env::temp_dir()))];
        for blobs in backends {
            let what = blobs.describe();
            assert_eq!(blobs.tag("m.model").await.unwrap(), None, "{what}");
            blobs.put("m.model", Bytes::from_static(b"one")).await.unwrap();
            let first = blobs.tag("m.model").await.unwrap().expect("a tag");
            blobs.put_if("m.model", Bytes::from_static(b"two"), &first).await.unwrap();
            let second = blobs.tag("m.model").await.unwrap().expect("a tag");
            assert_ne!(first, second, "{what}: a write makes a new version");
            let stale = blobs.put_if("m.model", Bytes::from_static(b"three"), &first).await.unwrap_err();
            assert!(matches!(stale, BlobError::Conflict { .. }), "{what}: {stale}");
            assert_eq!(&blobs.get("m.model").await.unwrap()[..], b"two", "{what}");
            blobs.delete("m.model").await.unwrap();
            let gone = blobs.put_if("m.model", Bytes::from_static(b"four"), &second).await.unwrap_err();
            assert!(matches!(gone, BlobError::Conflict { .. }), "{what}: {gone}");
            assert!(matches!(blobs.get("m.model").await, Err(BlobError::NotFound { .. })), "{what}");

            blobs.put_new("deltas/m.1", Bytes::from_static(b"first")).await.unwrap();
            let taken = blobs.put_new("deltas/m.1", Bytes::from_static(b"second")).await.unwrap_err();
            assert!(matches!(taken, BlobError::Conflict { .. }), "{what}: {taken}");
            assert_eq!(&blobs.get("deltas/m.1").await.unwrap()[..], b"first", "{what}: the first writer's bytes stay");
            let listed = blobs.list("deltas").await.unwrap();
            assert!(listed.iter().all(|o| o.modified.is_some()), "{what}: listings say when objects were written");
            let listed: Vec<(&str, u64)> = listed.iter().map(|o| (o.key.as_str(), o.size)).collect();
            assert_eq!(listed, vec![("deltas/m.1", 5)], "{what}: no temporary file is left");
            blobs.delete("deltas/m.1").await.unwrap();
            blobs.put_new("deltas/m.1", Bytes::from_static(b"again")).await.unwrap();
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}

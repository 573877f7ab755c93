//! A store for tests of replicas: the object_store crate's in-memory store (through the
//! same backend code as S3) that can be switched off, hung or slowed, or made to fail
//! right after a delta is written (an update stored but never acknowledged).

use bytes::Bytes;
use mercer::store::blobs::{BlobError, BlobFuture, Blobs, ObjectInfo};
use mercer::store::object::ObjectBlobs;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A shared store that can be taken down (every call fails as an unreachable store's),
/// hung (every call waits forever: a store that accepts and never answers) or slow (every
/// call waits a second first); with `down_after_delta`, the next delta written lands and
/// then the store goes down before anything else reaches it.
pub struct Switchable {
    pub inner: ObjectBlobs,
    pub down: AtomicBool,
    pub hung: AtomicBool,
    /// Calls that began while the store hung (each waits until its deadline).
    pub hung_calls: AtomicUsize,
    pub slow: AtomicBool,
    pub down_after_delta: AtomicBool,
    /// Listings of the deltas fail (as an S3 server's 500 does), everything else answers.
    pub deltas_unlisted: AtomicBool,
    /// A server whose conditional writes are not atomic, at its worst: `put_if` writes
    /// whatever the object's version.
    pub unconditional: AtomicBool,
    /// When set, the next `put_if` announces itself on `put_if_reached` and waits for
    /// `put_if_resume` before it writes: a test can act between a conditional write's
    /// check and its write.
    pub hold_put_if: AtomicBool,
    pub put_if_reached: tokio::sync::Notify,
    pub put_if_resume: tokio::sync::Notify,
}

impl Switchable {
    async fn check(&self, op: &'static str, key: &str) -> Result<(), BlobError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(BlobError::Unavailable { op, key: key.into(), message: "connection refused (test)".into() });
        }
        if self.hung.load(Ordering::SeqCst) {
            self.hung_calls.fetch_add(1, Ordering::SeqCst);
            std::future::pending::<()>().await;
        }
        if self.slow.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        Ok(())
    }
}

macro_rules! guarded {
    ($self:ident, $op:literal, $key:expr, $call:expr) => {
        Box::pin(async move {
            $self.check($op, $key).await?;
            $call.await
        })
    };
}

impl Blobs for Switchable {
    fn put<'a>(&'a self, key: &'a str, bytes: Bytes) -> BlobFuture<'a, ()> {
        guarded!(self, "put", key, self.inner.put(key, bytes))
    }
    fn put_file<'a>(&'a self, key: &'a str, file: &'a Path) -> BlobFuture<'a, ()> {
        guarded!(self, "put", key, self.inner.put_file(key, file))
    }
    fn put_if<'a>(&'a self, key: &'a str, bytes: Bytes, tag: &'a str) -> BlobFuture<'a, ()> {
        Box::pin(async move {
            self.check("put", key).await?;
            if self.hold_put_if.swap(false, Ordering::SeqCst) {
                self.put_if_reached.notify_one();
                self.put_if_resume.notified().await;
            }
            if self.unconditional.load(Ordering::SeqCst) {
                return self.inner.put(key, bytes).await;
            }
            self.inner.put_if(key, bytes, tag).await
        })
    }
    fn put_new<'a>(&'a self, key: &'a str, bytes: Bytes) -> BlobFuture<'a, ()> {
        Box::pin(async move {
            self.check("put", key).await?;
            self.inner.put_new(key, bytes).await?;
            if self.down_after_delta.swap(false, Ordering::SeqCst) {
                self.down.store(true, Ordering::SeqCst);
            }
            Ok(())
        })
    }
    fn tag<'a>(&'a self, key: &'a str) -> BlobFuture<'a, Option<String>> {
        guarded!(self, "head", key, self.inner.tag(key))
    }
    fn get<'a>(&'a self, key: &'a str) -> BlobFuture<'a, Bytes> {
        guarded!(self, "get", key, self.inner.get(key))
    }
    fn get_range<'a>(&'a self, key: &'a str, range: Range<u64>) -> BlobFuture<'a, Bytes> {
        guarded!(self, "get", key, self.inner.get_range(key, range))
    }
    fn size<'a>(&'a self, key: &'a str) -> BlobFuture<'a, u64> {
        guarded!(self, "head", key, self.inner.size(key))
    }
    fn delete<'a>(&'a self, key: &'a str) -> BlobFuture<'a, ()> {
        guarded!(self, "delete", key, self.inner.delete(key))
    }
    fn list<'a>(&'a self, dir: &'a str) -> BlobFuture<'a, Vec<ObjectInfo>> {
        if dir.starts_with("deltas") && self.deltas_unlisted.load(Ordering::SeqCst) {
            return Box::pin(async move {
                Err(BlobError::Unavailable { op: "list", key: dir.into(), message: "500 InternalError (test)".into() })
            });
        }
        guarded!(self, "list", dir, self.inner.list(dir))
    }
    fn quarantine<'a>(&'a self, key: &'a str) -> BlobFuture<'a, ()> {
        guarded!(self, "rename", key, self.inner.quarantine(key))
    }
    fn scratch_dir(&self) -> PathBuf {
        self.inner.scratch_dir()
    }
    fn is_durable(&self) -> bool {
        true
    }
    fn describe(&self) -> String {
        "switchable test store".into()
    }
}

pub fn shared_store() -> Arc<Switchable> {
    let memory: Arc<dyn object_store::ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    Arc::new(Switchable {
        inner: ObjectBlobs::shared(memory, "cluster/a", std::env::temp_dir()),
        down: AtomicBool::new(false),
        hung: AtomicBool::new(false),
        hung_calls: AtomicUsize::new(0),
        slow: AtomicBool::new(false),
        down_after_delta: AtomicBool::new(false),
        deltas_unlisted: AtomicBool::new(false),
        unconditional: AtomicBool::new(false),
        hold_put_if: AtomicBool::new(false),
        put_if_reached: tokio::sync::Notify::new(),
        put_if_resume: tokio::sync::Notify::new(),
    })
}

/// A server over `store`, ready.
pub async fn replica(store: &Arc<Switchable>, config: mercer::config::Config) -> super::TestServer {
    let blobs: Arc<dyn Blobs> = store.clone();
    let server =
        mercer::server::start_with_store(config, mercer::store::Store::new(blobs)).await.expect("replica starts");
    let s = super::TestServer {
        url: format!("http://{}", server.addr),
        http: reqwest::Client::new(),
        server: Some(server),
    };
    s.service().wait_ready().await;
    s
}

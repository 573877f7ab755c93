//! The object-store backend: S3 and everything that speaks its API (MinIO, Ceph RGW, R2,
//! GCS interop), through the `object_store` crate, and its in-memory store for a
//! service that keeps nothing on disk (and for tests of replicas sharing one store).
//!
//! object_store's defaults retry for up to three minutes; a fit must hear within 30 s that
//! the store is gone, so requests here have short timeouts and a small retry budget.

use super::blobs::{BlobError, BlobFuture, Blobs, ObjectInfo};
use bytes::Bytes;
use object_store::aws::S3ConditionalPut;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::{
    BackoffConfig, ClientConfigKey, ObjectStore, ObjectStoreExt, PutMode, PutOptions, RetryConfig, UpdateVersion,
    WriteMultipart,
};
use std::io::Read;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// Uploads above this go in parts, a few at a time, read from the file as they go.
const PART_BYTES: usize = 16 << 20;

/// One S3 client (one connection pool).
struct Client {
    store: Arc<dyn ObjectStore>,
    /// Whether the store has answered on it: its pool may then hold connections that a
    /// store restart since has left dead.
    used: AtomicBool,
}

impl Client {
    fn new(store: Arc<dyn ObjectStore>) -> Arc<Client> {
        Arc::new(Client { store, used: AtomicBool::new(false) })
    }
}

/// Whether an error is the store's answer (the call need not be repeated elsewhere).
fn is_answer(e: &object_store::Error) -> bool {
    use object_store::Error::*;
    matches!(
        e,
        NotFound { .. }
            | AlreadyExists { .. }
            | Precondition { .. }
            | NotModified { .. }
            | PermissionDenied { .. }
            | Unauthenticated { .. }
            | NotImplemented { .. }
            | NotSupported { .. }
    )
}

/// Builds the S3 client anew (with an empty connection pool).
type Rebuild = Arc<dyn Fn() -> Result<Arc<dyn ObjectStore>, OpenError> + Send + Sync>;

pub struct ObjectBlobs {
    /// The client; replaced after a failure so that no connection from before it is used
    /// again ([`Blobs::reset_connections`]).
    store: RwLock<Arc<Client>>,
    rebuild: Option<Rebuild>,
    /// Key prefix inside the bucket ("" or ending in '/').
    prefix: String,
    url: String,
    durable: bool,
    scratch: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("MERCER_STORE_URL must look like s3://bucket/prefix; got `{0}`")]
    Url(String),
    #[error("cannot configure the S3 client: {0}")]
    Client(String),
}

impl ObjectBlobs {
    /// The store at `url` (`s3://bucket/prefix`), with credentials, region and endpoint
    /// from the standard AWS_* variables. Nothing is contacted here.
    pub fn s3(url: &str, scratch: PathBuf) -> Result<ObjectBlobs, OpenError> {
        ObjectBlobs::s3_with(url, scratch, &[])
    }

    /// As [`ObjectBlobs::s3`], with settings (object_store's S3 keys: `aws_endpoint`,
    /// `aws_access_key_id`, ...) over the environment's: tests give each replica its own.
    pub fn s3_with(url: &str, scratch: PathBuf, settings: &[(&str, &str)]) -> Result<ObjectBlobs, OpenError> {
        let settings: Vec<(AmazonS3ConfigKey, String)> = settings
            .iter()
            .map(|(k, v)| k.parse().map(|k| (k, v.to_string())).map_err(|e| OpenError::Client(format!("{e}"))))
            .collect::<Result<_, _>>()?;
        let rest = url.strip_prefix("s3://").ok_or_else(|| OpenError::Url(url.into()))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(OpenError::Url(url.into()));
        }
        let retry = RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(1),
                base: 2.0,
            },
            max_retries: 2,
            retry_timeout: Duration::from_secs(8),
        };
        let bucket = bucket.to_string();
        let build = move || -> Result<Arc<dyn ObjectStore>, OpenError> {
            let mut builder = AmazonS3Builder::from_env();
            for (k, v) in &settings {
                builder = builder.with_config(*k, v);
            }
            let store = builder
                .with_bucket_name(&bucket)
                .with_retry(retry.clone())
                .with_config(AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout), "2s")
                // Between two reads of a body: a stalled store is noticed in seconds while a
                // large model still has minutes to stream.
                .with_config(AmazonS3ConfigKey::Client(ClientConfigKey::ReadTimeout), "10s")
                .with_config(AmazonS3ConfigKey::Client(ClientConfigKey::Timeout), "300s")
                // An idle connection is not kept long: a store restarted meanwhile would
                // leave it dead in the pool.
                .with_config(AmazonS3ConfigKey::Client(ClientConfigKey::PoolIdleTimeout), "15s")
                // If-Match on PUT: online updates replace a model only if no one else has.
                .with_conditional_put(S3ConditionalPut::ETagMatch)
                .build()
                .map_err(|e| OpenError::Client(e.to_string()))?;
            Ok(Arc::new(store))
        };
        let store = build()?;
        Ok(ObjectBlobs {
            store: RwLock::new(Client::new(store)),
            rebuild: Some(Arc::new(build)),
            prefix: normalise_prefix(prefix),
            url: url.into(),
            durable: true,
            scratch,
        })
    }

    /// A store in this process's memory: gone when it exits.
    pub fn memory(scratch: PathBuf) -> ObjectBlobs {
        ObjectBlobs { durable: false, ..ObjectBlobs::shared(Arc::new(InMemory::new()), "", scratch) }
    }

    /// Over any object store (tests share one between two services as two replicas).
    pub fn shared(store: Arc<dyn ObjectStore>, prefix: &str, scratch: PathBuf) -> ObjectBlobs {
        ObjectBlobs {
            url: format!("{store}"),
            store: RwLock::new(Client::new(store)),
            rebuild: None,
            prefix: normalise_prefix(prefix),
            durable: true,
            scratch,
        }
    }

    fn current(&self) -> Arc<Client> {
        self.store.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn client(&self) -> Arc<dyn ObjectStore> {
        self.current().store.clone()
    }

    /// A fresh client in place of `old`, unless another call has already replaced it.
    fn replace(&self, old: &Arc<Client>) {
        let Some(rebuild) = &self.rebuild else { return };
        let mut current = self.store.write().unwrap_or_else(|p| p.into_inner());
        if Arc::ptr_eq(&current, old) {
            match rebuild() {
                Ok(fresh) => *current = Client::new(fresh),
                Err(e) => tracing::warn!(error = %e, "cannot rebuild the store client"),
            }
        }
    }

    /// Runs `call` (one that may be repeated: a read, a delete, a whole put) on the
    /// client. If it fails without an answer from the store on a client that has had
    /// answers before, the failure may be a pooled connection that a store restart left
    /// dead (object_store's own retries may draw more of them from the same pool): the
    /// call runs once more on a fresh client before the failure stands. A client that
    /// never had an answer holds no such connection, so a store that is down costs each
    /// call its retries once, not twice.
    async fn repeatable<T, F, Fut>(&self, call: F) -> Result<T, object_store::Error>
    where
        F: Fn(Arc<dyn ObjectStore>) -> Fut,
        Fut: std::future::Future<Output = Result<T, object_store::Error>>,
    {
        let client = self.current();
        let first = call(client.store.clone()).await;
        match &first {
            Err(e) if !is_answer(e) && client.used.load(Ordering::Acquire) && self.rebuild.is_some() => {
                tracing::info!(error = %e, "a store call failed on pooled connections: trying it once on fresh ones");
                self.replace(&client);
                let fresh = self.current();
                let again = call(fresh.store.clone()).await;
                if again.as_ref().err().is_none_or(is_answer) {
                    fresh.used.store(true, Ordering::Release);
                }
                again
            }
            Err(e) if !is_answer(e) => first,
            _ => {
                client.used.store(true, Ordering::Release);
                first
            }
        }
    }

    fn path(&self, key: &str) -> ObjectPath {
        ObjectPath::from(format!("{}{key}", self.prefix))
    }
}

fn normalise_prefix(p: &str) -> String {
    let p = p.trim_matches('/');
    if p.is_empty() {
        String::new()
    } else {
        format!("{p}/")
    }
}

fn classify(op: &'static str, key: &str, e: object_store::Error) -> BlobError {
    let key = key.to_string();
    match e {
        object_store::Error::NotFound { .. } => BlobError::NotFound { key },
        other => BlobError::Unavailable { op, key, message: other.to_string() },
    }
}

impl Blobs for ObjectBlobs {
    fn reset_connections(&self) {
        if let Some(rebuild) = &self.rebuild {
            match rebuild() {
                Ok(fresh) => *self.store.write().unwrap_or_else(|p| p.into_inner()) = Client::new(fresh),
                Err(e) => tracing::warn!(error = %e, "cannot rebuild the store client"),
            }
        }
    }

    fn put<'a>(&'a self, key: &'a str, bytes: Bytes) -> BlobFuture<'a, ()> {
        Box::pin(async move {
            let path = self.path(key);
            self.repeatable(|c| {
                let (path, bytes) = (path.clone(), bytes.clone());
                async move { c.put(&path, bytes.into()).await }
            })
            .await
            .map_err(|e| classify("put", key, e))?;
            Ok(())
        })
    }

    fn put_file<'a>(&'a self, key: &'a str, file: &'a Path) -> BlobFuture<'a, ()> {
        Box::pin(async move {
            let io = |e: std::io::Error| BlobError::Io { key: key.into(), message: e.to_string() };
            let size = std::fs::metadata(file).map_err(io)?.len();
            if size as usize <= PART_BYTES {
                let bytes = std::fs::read(file).map_err(io)?;
                self.put(key, Bytes::from(bytes)).await?;
            } else {
                let upload = self.client().put_multipart(&self.path(key)).await.map_err(|e| classify("put", key, e))?;
                let mut writer = WriteMultipart::new_with_chunk_size(upload, PART_BYTES);
                let mut f = std::fs::File::open(file).map_err(io)?;
                let mut buf = vec![0; PART_BYTES];
                let result = async {
                    loop {
                        writer.wait_for_capacity(4).await.map_err(|e| classify("put", key, e))?;
                        // A 16 MiB read from the local disk: short enough to do here.
                        let n = read_full(&mut f, &mut buf).map_err(io)?;
                        if n == 0 {
                            break;
                        }
                        writer.write(&buf[..n]);
                    }
                    Ok(())
                }
                .await;
                match result {
                    Ok(()) => {
                        writer.finish().await.map_err(|e| classify("put", key, e))?;
                    }
                    Err(e) => {
                        let _ = writer.abort().await;
                        return Err(e);
                    }
                }
            }
            let _ = std::fs::remove_file(file);
            Ok(())
        })
    }

    fn put_if<'a>(&'a self, key: &'a str, bytes: Bytes, tag: &'a str) -> BlobFuture<'a, ()> {
        Box::pin(async move {
            let version = UpdateVersion { e_tag: Some(tag.to_string()), version: None };
            let opts = PutOptions { mode: PutMode::Update(version), ..Default::default() };
            match self.client().put_opts(&self.path(key), bytes.into(), opts).await {
                Ok(_) => Ok(()),
                Err(object_store::Error::Precondition { .. } | object_store::Error::NotFound { .. }) => {
                    Err(BlobError::Conflict { key: key.into() })
                }
                Err(e) => Err(classify("put", key, e)),
            }
        })
    }

    fn put_new<'a>(&'a self, key: &'a str, bytes: Bytes) -> BlobFuture<'a, ()> {
        Box::pin(async move {
            // If-None-Match: * on S3.
            let opts = PutOptions { mode: PutMode::Create, ..Default::default() };
            match self.client().put_opts(&self.path(key), bytes.into(), opts).await {
                Ok(_) => Ok(()),
                Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => {
                    Err(BlobError::Conflict { key: key.into() })
                }
                Err(e) => Err(classify("put", key, e)),
            }
        })
    }

    fn tag<'a>(&'a self, key: &'a str) -> BlobFuture<'a, Option<String>> {
        Box::pin(async move {
            let path = self.path(key);
            match self
                .repeatable(|c| {
                    let path = path.clone();
                    async move { c.head(&path).await }
                })
                .await
            {
                // A store without ETags cannot compare versions: every put_if conflicts.
                Ok(meta) => Ok(Some(meta.e_tag.unwrap_or_default())),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(classify("head", key, e)),
            }
        })
    }

    fn get<'a>(&'a self, key: &'a str) -> BlobFuture<'a, Bytes> {
        Box::pin(async move {
            let path = self.path(key);
            self.repeatable(|c| {
                let path = path.clone();
                async move { c.get(&path).await?.bytes().await }
            })
            .await
            .map_err(|e| classify("get", key, e))
        })
    }

    fn get_range<'a>(&'a self, key: &'a str, range: Range<u64>) -> BlobFuture<'a, Bytes> {
        Box::pin(async move {
            let path = self.path(key);
            let first = self
                .repeatable(|c| {
                    let (path, range) = (path.clone(), range.clone());
                    async move { c.get_range(&path, range).await }
                })
                .await;
            match first {
                Ok(b) => Ok(b),
                // A range past the end is an error for S3; clamp it as a file read does.
                Err(object_store::Error::NotFound { .. }) => Err(BlobError::NotFound { key: key.into() }),
                Err(_) => {
                    let size = self.client().head(&path).await.map_err(|e| classify("head", key, e))?.size;
                    let (start, end) = (range.start.min(size), range.end.min(size));
                    if start == end {
                        return Ok(Bytes::new());
                    }
                    self.client().get_range(&path, start..end).await.map_err(|e| classify("get", key, e))
                }
            }
        })
    }

    fn size<'a>(&'a self, key: &'a str) -> BlobFuture<'a, u64> {
        Box::pin(async move {
            let path = self.path(key);
            let meta = self
                .repeatable(|c| {
                    let path = path.clone();
                    async move { c.head(&path).await }
                })
                .await
                .map_err(|e| classify("head", key, e))?;
            Ok(meta.size)
        })
    }

    fn delete<'a>(&'a self, key: &'a str) -> BlobFuture<'a, ()> {
        Box::pin(async move {
            let path = self.path(key);
            let deleted = self
                .repeatable(|c| {
                    let path = path.clone();
                    async move { c.delete(&path).await }
                })
                .await;
            match deleted {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(classify("delete", key, e)),
            }
        })
    }

    fn list<'a>(&'a self, dir: &'a str) -> BlobFuture<'a, Vec<ObjectInfo>> {
        Box::pin(async move {
            let full = format!("{}{}", self.prefix, dir.trim_matches('/'));
            let under = (!full.trim_matches('/').is_empty()).then(|| ObjectPath::from(full.trim_matches('/')));
            let listed = self
                .repeatable(|c| {
                    let under = under.clone();
                    async move { c.list_with_delimiter(under.as_ref()).await }
                })
                .await
                .map_err(|e| classify("list", dir, e))?;
            let mut out: Vec<ObjectInfo> = listed
                .objects
                .into_iter()
                .filter_map(|m| {
                    let key = m.location.as_ref().strip_prefix(&self.prefix)?.to_string();
                    Some(ObjectInfo { key, size: m.size, modified: Some(m.last_modified.into()) })
                })
                .collect();
            out.sort_by(|a, b| a.key.cmp(&b.key));
            Ok(out)
        })
    }

    fn quarantine<'a>(&'a self, key: &'a str) -> BlobFuture<'a, ()> {
        Box::pin(async move {
            let (dir, name) = key.rsplit_once('/').map_or(("", key), |(d, n)| (d, n));
            let target = if dir.is_empty() { format!("quarantine/{name}") } else { format!("{dir}/quarantine/{name}") };
            self.client().rename(&self.path(key), &self.path(&target)).await.map_err(|e| classify("rename", key, e))
        })
    }

    fn scratch_dir(&self) -> PathBuf {
        self.scratch.clone()
    }

    fn is_durable(&self) -> bool {
        self.durable
    }

    fn describe(&self) -> String {
        self.url.clone()
    }
}

fn read_full(f: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

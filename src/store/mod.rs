//! The durable store: where ready models and uploaded datasets live, one object each,
//! on a local directory or S3-compatible object storage ([`blobs::Blobs`], chosen by
//! `MERCER_STORE_URL`). This module owns the keys, the per-call timeouts and retry
//! budget, and whether the store is up; [`format`] owns the model file, [`datasets`]
//! the dataset objects.
//!
//! A model is `ID.model` under the root (its online updates `deltas/ID.VERSION`, a
//! delete's marker `deleted/ID`), a dataset `datasets/ID.dataset`. Every call has
//! a deadline, so a store that has gone away costs seconds, not minutes: its failures
//! mark the store down (a gauge, /readyz, fits refused with 503) until a call succeeds.

pub mod aliases;
pub mod blobs;
pub mod datasets;
pub mod delta;
pub mod dir;
pub mod format;
pub mod object;
pub mod studies;

use crate::estimator::{FittedModel, ModelKind, StoredFit};
use blobs::{BlobError, BlobFuture, Blobs};
pub use format::ModelHead;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use uuid::Uuid;

/// Deadline of a call that moves little data (a head, a listing, a delete).
pub(crate) const SMALL_CALL: Duration = Duration::from_secs(5);
/// Deadline of a call that moves an object whole: this plus its size at 20 MB/s.
const BULK_CALL: Duration = Duration::from_secs(15);
/// A head is read from this many first bytes, or from as many as it says it needs.
const HEAD_PREFIX: u64 = 8 << 10;

/// Everything needed to bring a ready model back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredModel {
    pub id: Uuid,
    pub name: Option<String>,
    /// JSON text of the client's metadata.
    pub metadata: Option<String>,
    pub created_at_unix_nanos: u128,
    pub n_train: u64,
    pub n_features: u64,
    pub fit: StoredFit,
    /// JSON text of an object with the model's other facts (its origin: dataset and
    /// feature names), so that new facts need no new format version.
    pub extra: String,
    /// JSON text of a seeded sample of the training rows, for plots (format version 5;
    /// empty when none was kept). In the body, not the head: listings never read it.
    pub sample: String,
}

impl StoredModel {
    pub fn created_at(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_nanos(self.created_at_unix_nanos.min(u64::MAX as u128) as u64)
    }
}

/// What GET /models/{id} shows of a ready model, kept in its file's head so that a
/// replica can list a model without reading its arrays.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSummary {
    pub kernel: Value,
    pub params: Value,
    pub n_support: usize,
    pub classes: Option<Value>,
    pub training: Value,
    /// Bytes the fitted state holds once decoded.
    pub memory_bytes: usize,
    /// 1 after the fit, one more after each online update (heads written before online
    /// updates have none: 1).
    #[serde(default = "first_version")]
    pub version: u64,
    /// In a full object's head: the write ids of the newest deltas compactions folded in,
    /// (version, write id), for an appender to learn whether its rows are in (see
    /// [`delta`]). Never shown to clients.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub folded: Vec<(u64, u64)>,
    /// Bytes of deltas written since the full object this version was built on (it may
    /// count deltas a compaction has folded in meanwhile): what starts a compaction.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub delta_bytes: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn first_version() -> u64 {
    1
}

impl ModelSummary {
    pub fn of(fitted: &FittedModel) -> ModelSummary {
        let p = fitted.predictor();
        ModelSummary {
            kernel: p.kernel().to_json(),
            params: p.params_json(),
            n_support: p.n_support(),
            classes: p.classes().map(|c| c.to_json()),
            training: serde_json::to_value(p.report()).expect("a report serialises"),
            memory_bytes: p.memory_bytes(),
            version: 1,
            folded: Vec::new(),
            delta_bytes: 0,
        }
    }
}

impl ModelHead {
    /// The head of `model`, a `kind` whose fitted state `summary` describes.
    pub fn of(model: &StoredModel, kind: ModelKind, summary: &ModelSummary) -> ModelHead {
        ModelHead {
            id: model.id,
            name: model.name.clone(),
            metadata: model.metadata.clone(),
            created_at_unix_nanos: model.created_at_unix_nanos,
            n_train: model.n_train,
            n_features: model.n_features,
            kind: kind.name().into(),
            summary: serde_json::to_string(summary).expect("a summary serialises"),
            extra: model.extra.clone(),
        }
    }

    pub fn created_at(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_nanos(self.created_at_unix_nanos.min(u64::MAX as u128) as u64)
    }

    pub fn summary(&self) -> Result<ModelSummary, String> {
        serde_json::from_str(&self.summary).map_err(|e| format!("bad summary in the head: {e}"))
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Blob(#[from] BlobError),
    #[error("{key}: {reason}")]
    Corrupt { key: String, reason: String },
}

impl StoreError {
    /// Whether the disk or bucket is full (the request gets 507 rather than a generic 5xx).
    pub fn is_out_of_space(&self) -> bool {
        matches!(self, StoreError::Blob(BlobError::OutOfSpace { .. }))
    }

    /// Whether a conditional write lost to another writer.
    pub fn is_conflict(&self) -> bool {
        matches!(self, StoreError::Blob(BlobError::Conflict { .. }))
    }

    /// Whether the store could not be reached (503 with Retry-After: it may come back).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Blob(e) if e.is_unavailable())
    }
}

/// Called after every store call: operation, seconds, and whether the store answered.
pub type Observer = Arc<dyn Fn(&'static str, f64, bool) + Send + Sync>;

/// Whether the store answers, as the last call found.
#[derive(Debug, Clone)]
pub struct Health {
    pub up: bool,
    /// Why it is down.
    pub error: Option<String>,
    /// When a call last found it unreachable (or last answered).
    pub last_try: Instant,
}

/// The key a probe asks for (a head: absent is an answer).
const PROBE_KEY: &str = "mercer-probe";

pub struct Store {
    blobs: Arc<dyn Blobs>,
    observer: OnceLock<Observer>,
    /// How often a listing that has not answered is tried again (see [`Store::list`]).
    hedge: OnceLock<Duration>,
    health: Mutex<Health>,
    /// Held by the one probe of a down store running at a time (see `accepts_writes`).
    probe: tokio::sync::Mutex<()>,
    io: tokio::runtime::Handle,
}

/// A model read whole.
pub struct LoadedModel {
    pub head: ModelHead,
    pub fitted: FittedModel,
    /// As [`StoredModel::sample`].
    pub sample: String,
}

pub fn model_key(id: Uuid) -> String {
    format!("{id}.model")
}

/// A model's full object as a listing shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListedModel {
    pub id: Uuid,
    pub size: u64,
    /// Nanoseconds since the epoch (0: not said).
    pub modified: u64,
}

/// Where deletes leave their markers.
const DELETED_DIR: &str = "deleted";

fn deleted_key(id: Uuid) -> String {
    format!("{DELETED_DIR}/{id}")
}

impl Store {
    pub fn new(blobs: Arc<dyn Blobs>) -> Store {
        Store {
            blobs,
            observer: OnceLock::new(),
            hedge: OnceLock::new(),
            health: Mutex::new(Health { up: true, error: None, last_try: Instant::now() }),
            probe: tokio::sync::Mutex::new(()),
            io: io_handle(),
        }
    }

    /// Tries listings again, on fresh connections, every `every` while no attempt has
    /// answered (once; later calls are ignored). The service sets its refresh interval.
    pub fn hedge_listings(&self, every: Duration) {
        let _ = self.hedge.set(every);
    }

    /// Lists `dir` as one call within the small-call deadline. With a hedge set, the
    /// listing is tried again on fresh connections every hedge interval while no attempt
    /// has answered: an attempt begun while the store hung (accepting and never
    /// answering) waits until the deadline, while one begun after it recovered answers at
    /// once, so that a refresh, and the deletes it would see, is not held back by the
    /// deadline after a hang.
    async fn list(&self, dir: &str) -> Result<Vec<blobs::ObjectInfo>, BlobError> {
        let Some(&hedge) = self.hedge.get() else {
            return self.call("list", dir, SMALL_CALL, self.blobs.list(dir)).await;
        };
        let attempts = async move {
            let mut running = futures_util::stream::FuturesUnordered::new();
            running.push(self.blobs.list(dir));
            loop {
                tokio::select! {
                    Some(answer) = futures_util::StreamExt::next(&mut running) => return answer,
                    _ = tokio::time::sleep(hedge) => {
                        self.blobs.reset_connections();
                        running.push(self.blobs.list(dir));
                    }
                }
            }
        };
        self.call("list", dir, SMALL_CALL, Box::pin(attempts)).await
    }

    /// Sets the function told of every call (once; later calls are ignored).
    pub fn observe(&self, observer: Observer) {
        let _ = self.observer.set(observer);
    }

    pub fn describe(&self) -> String {
        self.blobs.describe()
    }

    /// Whether objects outlive the process (false: in memory only).
    pub fn is_durable(&self) -> bool {
        self.blobs.is_durable()
    }

    pub fn health(&self) -> Health {
        self.health.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Runs a store future to completion from a blocking thread (a fit worker, an
    /// upload): never from the async threads.
    pub fn block_on<F: Future>(&self, f: F) -> F::Output {
        self.io.block_on(f)
    }

    async fn call<T>(
        &self,
        op: &'static str,
        key: &str,
        budget: Duration,
        fut: BlobFuture<'_, T>,
    ) -> Result<T, BlobError> {
        let started = Instant::now();
        let result = match tokio::time::timeout(budget, fut).await {
            Ok(r) => r,
            Err(_) => Err(BlobError::Unavailable {
                op,
                key: key.into(),
                message: format!("no answer within {:.1} s", budget.as_secs_f64()),
            }),
        };
        let answered = !matches!(&result, Err(e) if e.is_unavailable());
        if let Some(observe) = self.observer.get() {
            observe(op, started.elapsed().as_secs_f64(), answered);
        }
        let mut health = self.health.lock().unwrap_or_else(|p| p.into_inner());
        match &result {
            Err(e) if e.is_unavailable() => {
                if health.up {
                    tracing::warn!(store = %self.blobs.describe(), error = %e, "the store is unreachable");
                }
                *health = Health { up: false, error: Some(e.to_string()), last_try: Instant::now() };
                // No connection opened before the failure is used after it: a store that
                // restarts would leave them dead in the pool.
                self.blobs.reset_connections();
            }
            Ok(_) | Err(BlobError::NotFound { .. }) if !health.up => {
                tracing::info!(store = %self.blobs.describe(), "the store answers again");
                *health = Health { up: true, error: None, last_try: Instant::now() };
            }
            _ => {}
        }
        result
    }

    /// Whether work that must end in the store may start: yes while it answers. While it
    /// is down, the request probes it (a head of an absent key, within the small-call
    /// deadline, on connections opened after the failure) and goes ahead if it answers,
    /// so that a store that came back is back on the next request. One probe runs at a
    /// time: a request that finds one running waits for it, and takes its answer if the
    /// store was found down after the request arrived.
    pub async fn accepts_writes(&self) -> bool {
        if self.health().up {
            return true;
        }
        let arrived = Instant::now();
        let _turn = self.probe.lock().await;
        {
            let health = self.health();
            if health.up {
                return true;
            }
            if health.last_try >= arrived {
                return false;
            }
        }
        let _ = self.call("head", PROBE_KEY, SMALL_CALL, self.blobs.tag(PROBE_KEY)).await;
        self.health().up
    }

    /// Writes a model; when this returns Ok, every replica can read it. Returns the
    /// object's size (a listing that shows another has seen another version).
    pub async fn save_model(&self, model: &StoredModel, head: &ModelHead) -> Result<u64, StoreError> {
        let bytes = bytes::Bytes::from(format::encode(model, head));
        let (key, size) = (model_key(model.id), bytes.len() as u64);
        self.call("put", &key, bulk(size), self.blobs.put(&key, bytes)).await?;
        Ok(size)
    }

    /// The tag of the stored version of a model (None: not stored), for
    /// [`Store::replace_model`].
    pub async fn model_tag(&self, id: Uuid) -> Result<Option<String>, StoreError> {
        let key = model_key(id);
        Ok(self.call("head", &key, SMALL_CALL, self.blobs.tag(&key)).await?)
    }

    /// Writes a new version of a model over the stored version `tag` names; a
    /// [`StoreError::is_conflict`] error if another writer replaced or deleted it since.
    pub async fn replace_model(&self, model: &StoredModel, head: &ModelHead, tag: &str) -> Result<u64, StoreError> {
        let bytes = bytes::Bytes::from(format::encode(model, head));
        let (key, size) = (model_key(model.id), bytes.len() as u64);
        self.call("put", &key, bulk(size), self.blobs.put_if(&key, bytes, tag)).await?;
        Ok(size)
    }

    /// Deletes a model: a marker first, then its full object (a model without one is
    /// gone for every replica), then its deltas. The marker is for servers whose
    /// conditional writes are not atomic (s3s-fs checks If-Match, then writes): a
    /// compaction whose write landed after this delete finds the marker when it checks,
    /// right after its write, and takes the write back.
    pub async fn delete_model(&self, id: Uuid) -> Result<(), StoreError> {
        let mark = deleted_key(id);
        self.call("put", &mark, SMALL_CALL, self.blobs.put(&mark, bytes::Bytes::new())).await?;
        let key = model_key(id);
        self.call("delete", &key, SMALL_CALL, self.blobs.delete(&key)).await?;
        self.delete_deltas_of(id, None).await?;
        Ok(())
    }

    /// Removes what a write that landed after model `id`'s delete brought back (a
    /// compaction's full object on a server whose conditional write is not atomic, or a
    /// write the store held through a hang and carried out late): its full object and
    /// deltas, leaving the marker as it is.
    pub async fn take_back(&self, id: Uuid) -> Result<(), StoreError> {
        let key = model_key(id);
        self.call("delete", &key, SMALL_CALL, self.blobs.delete(&key)).await?;
        self.delete_deltas_of(id, None).await?;
        Ok(())
    }

    /// Whether model `id` was deleted (its marker is there).
    pub async fn is_deleted(&self, id: Uuid) -> Result<bool, StoreError> {
        let mark = deleted_key(id);
        Ok(self.call("head", &mark, SMALL_CALL, self.blobs.tag(&mark)).await?.is_some())
    }

    /// Every delete marker: the model's id and when the marker was written.
    pub async fn list_markers(&self) -> Result<Vec<(Uuid, Option<std::time::SystemTime>)>, StoreError> {
        let listed = self.list(DELETED_DIR).await?;
        Ok(listed
            .iter()
            .filter_map(|o| {
                let name = o.key.strip_prefix(DELETED_DIR)?.trim_start_matches('/');
                Uuid::parse_str(name).ok().map(|id| (id, o.modified))
            })
            .collect())
    }

    /// Removes a delete marker (once no write that began before the delete can land).
    pub async fn forget_deleted(&self, id: Uuid) -> Result<(), StoreError> {
        let mark = deleted_key(id);
        Ok(self.call("delete", &mark, SMALL_CALL, self.blobs.delete(&mark)).await?)
    }

    /// Moves a damaged model aside (logged; a failure to move it is logged too).
    pub async fn quarantine_model(&self, id: Uuid, reason: &str) {
        let key = model_key(id);
        let moved = self.call("rename", &key, SMALL_CALL, self.blobs.quarantine(&key)).await;
        tracing::warn!(key, reason, moved = moved.is_ok(), "quarantined a stored model");
    }

    /// Every stored model: its id, its object's size in bytes and when it was last
    /// modified (nanoseconds since the epoch; 0 where the store does not say).
    pub async fn list_models(&self) -> Result<Vec<ListedModel>, StoreError> {
        let listed = self.list("").await?;
        Ok(listed
            .iter()
            .filter_map(|o| {
                let id = o.key.strip_suffix(".model").and_then(|s| Uuid::parse_str(s).ok())?;
                let modified = o
                    .modified
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_nanos().min(u64::MAX as u128) as u64);
                Some(ListedModel { id, size: o.size, modified })
            })
            .collect())
    }

    /// A model's head, read from its first bytes (None: no such model). Files of the
    /// versions before heads are read whole.
    pub async fn model_head(&self, id: Uuid) -> Result<Option<ModelHead>, StoreError> {
        let key = model_key(id);
        let mut want = HEAD_PREFIX;
        loop {
            let prefix = match self.call("get", &key, SMALL_CALL, self.blobs.get_range(&key, 0..want)).await {
                Ok(b) => b,
                Err(BlobError::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(e.into()),
            };
            let corrupt = |reason| StoreError::Corrupt { key: key.clone(), reason };
            match format::decode_prefix(&prefix, None).map_err(corrupt)? {
                format::Prefix::Head(head) if head.id == id => return Ok(Some(head)),
                format::Prefix::Head(head) => {
                    return Err(corrupt(format!("the file of {id} holds model {}", head.id)));
                }
                format::Prefix::Need(n) if (n as u64) > want && (prefix.len() as u64) == want => want = n as u64,
                format::Prefix::Need(_) => return Err(corrupt("truncated head".into())),
                format::Prefix::Legacy => return Ok(self.load_model(id).await?.map(|m| m.head)),
            }
        }
    }

    /// A model read whole, checked and decoded (None: no such model).
    pub async fn load_model(&self, id: Uuid) -> Result<Option<LoadedModel>, StoreError> {
        let key = model_key(id);
        let bytes = if let Some(path) = self.blobs.local_path(&key) {
            let started = Instant::now();
            let read = tokio::task::spawn_blocking(move || std::fs::read(path)).await;
            if let Some(observe) = self.observer.get() {
                observe("get", started.elapsed().as_secs_f64(), true);
            }
            match read {
                Ok(Ok(b)) => bytes::Bytes::from(b),
                Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Ok(Err(e)) => return Err(BlobError::Io { key, message: e.to_string() }.into()),
                Err(e) => return Err(BlobError::Io { key, message: e.to_string() }.into()),
            }
        } else {
            match self.call("get", &key, bulk(1 << 30), self.blobs.get(&key)).await {
                Ok(b) => b,
                Err(BlobError::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(e.into()),
            }
        };
        let k = key.clone();
        let decoded = tokio::task::spawn_blocking(move || decode_model(&bytes, id))
            .await
            .unwrap_or_else(|e| Err(format!("decoding failed: {e}")));
        decoded.map(Some).map_err(|reason| StoreError::Corrupt { key: k, reason })
    }
}

/// Checks, decodes and restores a model file.
pub fn decode_model(bytes: &[u8], id: Uuid) -> Result<LoadedModel, String> {
    let (head, mut model) = format::decode(bytes)?;
    if model.id != id {
        return Err(format!("the file of {id} holds model {}", model.id));
    }
    // The arrays move into the fitted model.
    let fit: StoredFit = std::mem::take(&mut model.fit);
    let fitted = FittedModel::from_stored(fit).map_err(|e| e.to_string())?;
    let head = head.unwrap_or_else(|| ModelHead::of(&model, fitted.kind(), &ModelSummary::of(&fitted)));
    Ok(LoadedModel { head, fitted, sample: std::mem::take(&mut model.sample) })
}

pub(crate) fn bulk(bytes: u64) -> Duration {
    BULK_CALL + Duration::from_secs_f64(bytes as f64 / 20e6)
}

/// The runtime store calls run on: the caller's, or (outside one, e.g. in benchmarks) a
/// small one of the store's own that lives as long as the process.
fn io_handle() -> tokio::runtime::Handle {
    static OWN: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    tokio::runtime::Handle::try_current().unwrap_or_else(|_| {
        OWN.get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("mercer-store")
                .enable_all()
                .build()
                .expect("a runtime for store calls")
        })
        .handle()
        .clone()
    })
}

/// Opens the store a configuration names: `s3://bucket/prefix`, else the data
/// directory, else memory.
pub fn open(store_url: &str, data_dir: &str) -> Result<Store, object::OpenError> {
    let blobs: Arc<dyn Blobs> = if !store_url.is_empty() {
        let scratch = if data_dir.is_empty() { std::env::temp_dir() } else { PathBuf::from(data_dir) };
        Arc::new(object::ObjectBlobs::s3(store_url, scratch)?)
    } else if !data_dir.is_empty() {
        Arc::new(dir::DirBlobs::open(data_dir))
    } else {
        Arc::new(object::ObjectBlobs::memory(std::env::temp_dir()))
    };
    Ok(Store::new(blobs))
}

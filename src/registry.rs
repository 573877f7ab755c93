//! Models by ID: their lifecycle (queued -> training -> ready | failed), what was asked
//! for, what a ready model shows, and the cache of decoded models with its memory
//! accounting.
//!
//! A model's entry is shared (`Arc`) between the registry, the fit job and the requests
//! reading it; its state sits behind its own lock so that a fit finishing never blocks
//! the registry map. Removing an entry cancels its fit. A ready entry holds only its
//! summary: the fitted arrays live in [`ModelCache`], bounded and least recently used
//! first out, and are read back from the store when evicted.

use crate::estimator::{CancelToken, FittedModel, ModelKind, Progress};
use crate::store::{ModelHead, ModelSummary};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Instant, SystemTime};
use uuid::Uuid;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Queued,
    Training,
    Ready,
    Failed,
}

impl Status {
    pub const ALL: [Status; 4] = [Status::Queued, Status::Training, Status::Ready, Status::Failed];

    pub fn name(self) -> &'static str {
        match self {
            Status::Queued => "queued",
            Status::Training => "training",
            Status::Ready => "ready",
            Status::Failed => "failed",
        }
    }
}

/// Why a fit did not produce a model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FailureKind {
    /// The data or parameters make the problem unsolvable (e.g. not positive definite).
    Unprocessable,
    /// A JSON pointer into the training request names the culprit.
    InvalidField { pointer: String },
    /// The server shut down before the fit ran.
    Shutdown,
    /// The fitted model could not be written to the store.
    Storage { out_of_space: bool },
    /// The store could not be reached to write the fitted model.
    StoreUnavailable,
    /// A bug: the fit panicked.
    Internal,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub kind: FailureKind,
    pub detail: String,
}

#[derive(Debug, Clone)]
pub enum ModelState {
    Queued,
    Training,
    Ready(Arc<ModelSummary>),
    Failed(Failure),
}

impl ModelState {
    pub fn status(&self) -> Status {
        match self {
            ModelState::Queued => Status::Queued,
            ModelState::Training => Status::Training,
            ModelState::Ready(_) => Status::Ready,
            ModelState::Failed(_) => Status::Failed,
        }
    }
}

/// Where a model's training rows came from, as far as clients need to know.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Origin {
    /// The uploaded dataset it was fitted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<Uuid>,
    /// The dataset's CSV feature columns: CSV predict bodies are matched by these names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<Vec<String>>,
    /// The dataset's target columns when there are several (a multi-output fit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targets: Option<Vec<String>>,
}

/// One model and everything known about it.
#[derive(Debug)]
pub struct ModelEntry {
    pub id: Uuid,
    pub name: Option<String>,
    pub kind: ModelKind,
    pub metadata: Option<Value>,
    pub created_at: SystemTime,
    pub n_train: usize,
    /// 0 for strings and token lists (numeric rows have at least one feature).
    pub n_features: usize,
    /// The kernel and params as requested (with defaults), shown until the fit is ready.
    pub requested_kernel: Value,
    pub requested_params: Value,
    pub origin: Origin,
    pub cancel: CancelToken,
    /// What the fit reports while it runs, and when it started running.
    pub progress: Progress,
    started: RwLock<Option<Instant>>,
    /// When the entry became ready here (a store listing older than that may miss it).
    ready_at: RwLock<Option<Instant>>,
    state: RwLock<ModelState>,
    /// JSON text of a sample of the training rows (for plots): set by the fit here, or
    /// when the model is read from the store.
    sample: RwLock<Option<Arc<str>>>,
    /// Follows `state`'s status, so that waiters need not poll.
    status_tx: tokio::sync::watch::Sender<Status>,
    /// Size of the stored object of this version (0: not known). An online update grows
    /// the object, so a listing showing another size has seen another version.
    stored_bytes: AtomicU64,
    /// When the stored object was last modified, as a listing showed it (nanoseconds
    /// since the epoch; 0: not seen in a listing since this replica last wrote or read
    /// it). A listing showing another time has seen the object rewritten.
    stored_modified: AtomicU64,
}

impl ModelEntry {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        kind: ModelKind,
        name: Option<String>,
        metadata: Option<Value>,
        n_train: usize,
        n_features: usize,
        requested_kernel: Value,
        requested_params: Value,
    ) -> ModelEntry {
        ModelEntry {
            id: Uuid::new_v4(),
            name,
            kind,
            metadata,
            created_at: SystemTime::now(),
            n_train,
            n_features,
            requested_kernel,
            requested_params,
            origin: Origin::default(),
            cancel: CancelToken::default(),
            progress: Progress::default(),
            started: RwLock::new(None),
            ready_at: RwLock::new(None),
            state: RwLock::new(ModelState::Queued),
            sample: RwLock::new(None),
            status_tx: tokio::sync::watch::Sender::new(Status::Queued),
            stored_bytes: AtomicU64::new(0),
            stored_modified: AtomicU64::new(0),
        }
    }

    /// A ready model as its stored head describes it.
    pub fn restored(head: &ModelHead) -> Result<ModelEntry, String> {
        let kind = ModelKind::from_name(&head.kind).ok_or_else(|| format!("unknown model kind `{}`", head.kind))?;
        let summary = head.summary()?;
        Ok(ModelEntry {
            id: head.id,
            name: head.name.clone(),
            kind,
            metadata: head.metadata.as_deref().and_then(|t| serde_json::from_str(t).ok()),
            created_at: head.created_at(),
            n_train: head.n_train as usize,
            n_features: head.n_features as usize,
            requested_kernel: summary.kernel.clone(),
            requested_params: summary.params.clone(),
            origin: serde_json::from_str(&head.extra).unwrap_or_default(),
            cancel: CancelToken::default(),
            progress: Progress::default(),
            started: RwLock::new(None),
            ready_at: RwLock::new(Some(Instant::now())),
            state: RwLock::new(ModelState::Ready(Arc::new(summary))),
            sample: RwLock::new(None),
            status_tx: tokio::sync::watch::Sender::new(Status::Ready),
            stored_bytes: AtomicU64::new(0),
            stored_modified: AtomicU64::new(0),
        })
    }

    /// The same model at its next version (an online update): `n_train` rows, ready, as
    /// `summary` shows it.
    pub fn next_version(&self, n_train: usize, summary: Arc<ModelSummary>) -> ModelEntry {
        ModelEntry {
            id: self.id,
            name: self.name.clone(),
            kind: self.kind,
            metadata: self.metadata.clone(),
            created_at: self.created_at,
            n_train,
            n_features: self.n_features,
            requested_kernel: self.requested_kernel.clone(),
            requested_params: self.requested_params.clone(),
            origin: self.origin.clone(),
            cancel: CancelToken::default(),
            progress: Progress::default(),
            started: RwLock::new(None),
            ready_at: RwLock::new(Some(Instant::now())),
            state: RwLock::new(ModelState::Ready(summary)),
            sample: RwLock::new(self.sample()),
            status_tx: tokio::sync::watch::Sender::new(Status::Ready),
            stored_bytes: AtomicU64::new(0),
            stored_modified: AtomicU64::new(0),
        }
    }

    pub fn stored_bytes(&self) -> u64 {
        self.stored_bytes.load(Ordering::Acquire)
    }

    pub fn set_stored_bytes(&self, size: u64) {
        self.stored_bytes.store(size, Ordering::Release);
    }

    /// The stored object's modification time as last listed (0: not known).
    pub fn stored_modified(&self) -> u64 {
        self.stored_modified.load(Ordering::Acquire)
    }

    pub fn set_stored_modified(&self, nanos: u64) {
        self.stored_modified.store(nanos, Ordering::Release);
    }

    /// What is known of the stored object (its size and modification time) taken from
    /// `older`: an online update's new version keeps the full object it was built on.
    pub fn keep_stored_of(&self, older: &ModelEntry) {
        self.set_stored_bytes(older.stored_bytes());
        self.set_stored_modified(older.stored_modified());
    }

    /// 1 after the fit (and until it is done), one more after each online update.
    pub fn version(&self) -> u64 {
        self.summary().map_or(1, |s| s.version)
    }

    pub fn state(&self) -> ModelState {
        self.state.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn status(&self) -> Status {
        self.state.read().unwrap_or_else(|p| p.into_inner()).status()
    }

    pub fn set_state(&self, s: ModelState) {
        let status = s.status();
        if status == Status::Training {
            *self.started.write().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        }
        if status == Status::Ready {
            *self.ready_at.write().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        }
        *self.state.write().unwrap_or_else(|p| p.into_inner()) = s;
        self.status_tx.send_replace(status);
    }

    /// How long the fit has been running (None before it starts).
    pub fn running_for(&self) -> Option<std::time::Duration> {
        self.started.read().unwrap_or_else(|p| p.into_inner()).map(|t| t.elapsed())
    }

    /// Waits until the fit has ended (ready or failed) and returns that status.
    pub async fn settled(&self) -> Status {
        let mut rx = self.status_tx.subscribe();
        let settled = rx.wait_for(|s| matches!(s, Status::Ready | Status::Failed)).await;
        // The sender lives as long as `self`, so the wait cannot fail.
        settled.map_or(Status::Failed, |s| *s)
    }

    pub fn sample(&self) -> Option<Arc<str>> {
        self.sample.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn set_sample(&self, json: Arc<str>) {
        *self.sample.write().unwrap_or_else(|p| p.into_inner()) = Some(json);
    }

    /// What a ready model shows (None until ready).
    pub fn summary(&self) -> Option<Arc<ModelSummary>> {
        match &*self.state.read().unwrap_or_else(|p| p.into_inner()) {
            ModelState::Ready(m) => Some(m.clone()),
            _ => None,
        }
    }

    /// When it became ready here.
    pub fn ready_at(&self) -> Option<Instant> {
        *self.ready_at.read().unwrap_or_else(|p| p.into_inner())
    }
}

/// Decoded models by id, at most `limit` bytes of them, least recently used out first.
pub struct ModelCache {
    /// None: unbounded (a service without a durable store has nowhere to read them back).
    limit: Option<usize>,
    inner: Mutex<CacheInner>,
}

struct Cached {
    model: Arc<FittedModel>,
    /// The model version it is.
    version: u64,
    bytes: usize,
    last_use: u64,
}

#[derive(Default)]
struct CacheInner {
    models: HashMap<Uuid, Cached>,
    by_use: BTreeMap<u64, Uuid>,
    clock: u64,
    bytes: usize,
}

impl ModelCache {
    pub fn new(limit: Option<usize>) -> ModelCache {
        ModelCache { limit, inner: Mutex::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CacheInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Model `id` at the version kept, whichever (an older one is brought up to date by
    /// replaying the deltas after it).
    pub fn newest(&self, id: Uuid) -> Option<(u64, Arc<FittedModel>)> {
        let mut c = self.lock();
        c.clock += 1;
        let now = c.clock;
        let (model, version, last) = {
            let slot = c.models.get_mut(&id)?;
            (slot.model.clone(), slot.version, std::mem::replace(&mut slot.last_use, now))
        };
        c.by_use.remove(&last);
        c.by_use.insert(now, id);
        Some((version, model))
    }

    /// Keeps `model` as version `version`, evicting the least recently used to make room.
    /// A model larger than the whole cache, or older than the version kept, is not kept
    /// (false).
    pub fn insert(&self, id: Uuid, version: u64, model: Arc<FittedModel>) -> bool {
        let size = model.predictor().memory_bytes();
        if self.limit.is_some_and(|l| size > l) {
            return false;
        }
        let mut c = self.lock();
        if c.models.get(&id).is_some_and(|old| old.version > version) {
            // A newer version is kept already (a slow reader finishing after an append).
            return false;
        }
        if let Some(old) = c.models.remove(&id) {
            c.bytes -= old.bytes;
            c.by_use.remove(&old.last_use);
        }
        while self.limit.is_some_and(|l| c.bytes + size > l) {
            let Some((_, victim)) = c.by_use.pop_first() else { break };
            if let Some(v) = c.models.remove(&victim) {
                c.bytes -= v.bytes;
            }
        }
        c.clock += 1;
        let now = c.clock;
        c.by_use.insert(now, id);
        c.models.insert(id, Cached { model, version, bytes: size, last_use: now });
        c.bytes += size;
        true
    }

    pub fn remove(&self, id: Uuid) {
        let mut c = self.lock();
        if let Some(old) = c.models.remove(&id) {
            c.bytes -= old.bytes;
            c.by_use.remove(&old.last_use);
        }
    }

    pub fn contains(&self, id: Uuid) -> bool {
        self.lock().models.contains_key(&id)
    }

    /// Bytes held by the decoded models.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    pub fn limit(&self) -> Option<usize> {
        self.limit
    }
}

pub struct Registry {
    models: RwLock<HashMap<Uuid, Arc<ModelEntry>>>,
    pub cache: ModelCache,
}

impl Registry {
    /// `cache_limit`: bytes of decoded models kept (None: all).
    pub fn new(cache_limit: Option<usize>) -> Registry {
        Registry { models: RwLock::default(), cache: ModelCache::new(cache_limit) }
    }

    pub fn insert(&self, entry: Arc<ModelEntry>) {
        self.models.write().unwrap_or_else(|p| p.into_inner()).insert(entry.id, entry);
    }

    /// Inserts `entry` unless its id is taken; returns the entry the registry holds.
    pub fn insert_if_absent(&self, entry: Arc<ModelEntry>) -> Arc<ModelEntry> {
        self.models.write().unwrap_or_else(|p| p.into_inner()).entry(entry.id).or_insert(entry).clone()
    }

    pub fn get(&self, id: Uuid) -> Option<Arc<ModelEntry>> {
        self.models.read().unwrap_or_else(|p| p.into_inner()).get(&id).cloned()
    }

    /// Removes the model and cancels its fit if one is queued or running.
    pub fn remove(&self, id: Uuid) -> Option<Arc<ModelEntry>> {
        let entry = self.models.write().unwrap_or_else(|p| p.into_inner()).remove(&id);
        if let Some(e) = &entry {
            e.cancel.cancel();
        }
        self.cache.remove(id);
        entry
    }

    pub fn contains(&self, id: Uuid) -> bool {
        self.models.read().unwrap_or_else(|p| p.into_inner()).contains_key(&id)
    }

    /// Every model, oldest first.
    pub fn list(&self) -> Vec<Arc<ModelEntry>> {
        let mut all: Vec<_> = self.models.read().unwrap_or_else(|p| p.into_inner()).values().cloned().collect();
        all.sort_by_key(|e| (e.created_at, e.id));
        all
    }

    /// Model counts by status, in `Status::ALL` order.
    pub fn count_by_status(&self) -> [usize; 4] {
        let mut counts = [0; 4];
        for e in self.models.read().unwrap_or_else(|p| p.into_inner()).values() {
            counts[Status::ALL.iter().position(|s| *s == e.status()).unwrap_or(0)] += 1;
        }
        counts
    }

    /// Bytes held by decoded models.
    pub fn memory_bytes(&self) -> usize {
        self.cache.bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry() -> Arc<ModelEntry> {
        Arc::new(ModelEntry::new(ModelKind::KernelRidge, None, None, 3, 1, json!({}), json!({})))
    }

    #[test]
    fn remove_cancels_and_counts_follow_status() {
        let reg = Registry::new(None);
        let (a, b) = (entry(), entry());
        reg.insert(a.clone());
        reg.insert(b.clone());
        b.set_state(ModelState::Failed(Failure { kind: FailureKind::Shutdown, detail: "x".into() }));
        assert_eq!(reg.count_by_status(), [1, 0, 0, 1]);
        let removed = reg.remove(a.id).unwrap();
        assert!(removed.cancel.is_cancelled());
        assert!(!reg.contains(a.id));
        assert_eq!(reg.list().len(), 1);
        assert_eq!(reg.memory_bytes(), 0);
    }
}

//! This process's copy of the store: the models and datasets it knows, found on first use
//! and by listings, forgotten when they are deleted here or elsewhere, and the decoded
//! models read back when the cache let them go.
//!
//! The store is the truth; a [`Replica`] owns the store handle, the registry (its view of
//! the models) and everything that keeps that view honest: what it deleted lately
//! (tombstones, and the markers a delete leaves for other replicas), the aliases as last
//! read, which model is being
//! read, appended to or compacted here, the dataset catalog, and when it last listed the
//! store. The service asks it for a model and tells it what it wrote; it never calls up.
//!
//! - `catalog`: listings, lookups, reading a model back (`fitted`).
//! - `deltas`: a model as its full object plus the deltas of its appends: replay,
//!   versions other replicas appended, compaction.
//! - `tombstones`: what keeps a deleted model deleted on every replica.
//! - `stored`: what the store keeps of an entry (its full object, its plot sample).
//! - `aliases`: the aliases as last read (beside the models, refreshed by the same
//!   listings), and what an alias setting is.

pub mod aliases;
mod catalog;
mod deltas;
pub mod stored;
mod tombstones;

pub use deltas::Compaction;

use crate::dataset::DatasetInfo;
use crate::metrics::Metrics;
use crate::pool::FitPool;
use crate::registry::{Failure, Registry, Status};
use crate::store::{Store, StoreError};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use uuid::Uuid;

/// Why the replica could not give what was asked; the service maps each to its own error.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    #[error("no model with id {0}")]
    NotFound(Uuid),
    #[error("model {id} is {}, not ready", status.name())]
    NotReady { id: Uuid, status: Status },
    /// The model's stored full object is damaged: moved to quarantine, the model forgotten.
    #[error("{}", .0.detail)]
    Damaged(Failure),
    /// A stored delta of the model is damaged (`key`): the model cannot be brought up.
    #[error("{detail}")]
    DamagedDelta { id: Uuid, key: String, detail: String },
    /// The store refused, or answered what cannot be read.
    #[error("{0}")]
    Storage(String),
    /// The store cannot be reached.
    #[error("{detail}")]
    Unavailable { detail: String, retry_after: Duration },
}

/// What the replica is told of the configuration.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// How often the store is listed (`store_refresh_secs`, at least 1 s).
    pub refresh: Duration,
    /// Deltas, and their bytes, since the full object that make an append compact.
    pub compact_deltas: u64,
    pub compact_bytes: u64,
}

/// How busy the process is: fits running in the pool, and heavy predictions (which
/// compete for the same cores). A replay chooses its threads by it.
#[derive(Clone)]
pub struct Busy {
    pub pool: Arc<FitPool>,
    pub heavy: Arc<AtomicUsize>,
}

impl Busy {
    pub fn now(&self) -> usize {
        self.pool.running() + self.heavy.load(Ordering::Acquire)
    }
}

pub struct Replica {
    /// Where models and datasets live (in memory when nothing durable is configured).
    pub store: Store,
    /// The models this replica knows, and the decoded ones it caches.
    pub registry: Registry,
    /// The aliases this replica knows.
    pub aliases: aliases::AliasCache,
    metrics: Arc<Metrics>,
    settings: Settings,
    busy: Busy,
    /// Every stored dataset's description, by id, with when it was seen first.
    dataset_catalog: RwLock<HashMap<Uuid, (DatasetInfo, Instant)>>,
    /// Models and datasets deleted here lately: a listing must not bring them back.
    tombstones: Mutex<HashMap<Uuid, Instant>>,
    /// Serialises appends to and deletes of one model.
    model_locks: Mutex<HashMap<Uuid, Arc<tokio::sync::Mutex<()>>>>,
    /// Per model, the tag of its full object as last read here and an upper bound on
    /// that object's version: an append whose HEAD finds the same tag needs no GET.
    full_objects: Mutex<HashMap<Uuid, (String, u64)>>,
    /// Delete markers to remove, each when its time comes (see `tombstones`).
    pending_markers: Mutex<VecDeque<(Instant, Uuid)>>,
    /// When delete markers were last listed for stale ones (see `tombstones`).
    markers_swept: Mutex<Option<Instant>>,
    /// Models being compacted here (one compaction per model at a time).
    compacting: Mutex<HashSet<Uuid>>,
    /// Damaged deltas a refresh has reported (each is logged and counted once).
    damaged_deltas: Mutex<HashSet<String>>,
    /// One store read per model at a time.
    loading: Mutex<HashMap<Uuid, Arc<tokio::sync::Mutex<()>>>>,
    sync_lock: tokio::sync::Mutex<()>,
    /// When the last listing of the store began.
    last_sync: Mutex<Option<Instant>>,
}

/// A poisoned lock's data is still consistent here (every critical section is a few
/// map operations), so a panic elsewhere must not take the replica down with it.
fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Replica {
    pub fn new(store: Store, registry: Registry, metrics: Arc<Metrics>, settings: Settings, busy: Busy) -> Replica {
        Replica {
            store,
            registry,
            aliases: Default::default(),
            metrics,
            settings,
            busy,
            dataset_catalog: RwLock::default(),
            tombstones: Mutex::default(),
            model_locks: Mutex::default(),
            full_objects: Mutex::default(),
            pending_markers: Mutex::default(),
            markers_swept: Mutex::default(),
            compacting: Mutex::default(),
            damaged_deltas: Mutex::default(),
            loading: Mutex::default(),
            sync_lock: tokio::sync::Mutex::new(()),
            last_sync: Mutex::new(None),
        }
    }

    /// The error a request gets when the store let it down.
    pub fn store_error(&self, e: StoreError) -> ReplicaError {
        self.store_failure("", e)
    }

    /// As [`Replica::store_error`], saying what could not be done (`what`) when the
    /// store answered but refused.
    pub fn store_failure(&self, what: &str, e: StoreError) -> ReplicaError {
        if e.is_unavailable() {
            ReplicaError::Unavailable { detail: e.to_string(), retry_after: self.retry_after() }
        } else if what.is_empty() {
            ReplicaError::Storage(e.to_string())
        } else {
            ReplicaError::Storage(format!("{what}: {e}"))
        }
    }

    /// When to try again while the store is down: the next refresh will have probed it.
    pub fn retry_after(&self) -> Duration {
        self.settings.refresh
    }

    /// The lock that serialises appends to and deletes of model `id`.
    pub fn model_lock(&self, id: Uuid) -> Arc<tokio::sync::Mutex<()>> {
        locked(&self.model_locks).entry(id).or_default().clone()
    }

    /// The tag of model `id`'s full object as last read here, and an upper bound on its
    /// version.
    pub fn full_object(&self, id: Uuid) -> Option<(String, u64)> {
        locked(&self.full_objects).get(&id).cloned()
    }

    /// Remembers the tag of model `id`'s full object and its version.
    pub fn saw_full_object(&self, id: Uuid, tag: String, version: u64) {
        locked(&self.full_objects).insert(id, (tag, version));
    }

    /// The stored datasets' descriptions as known here.
    pub fn datasets(&self) -> std::sync::RwLockReadGuard<'_, HashMap<Uuid, (DatasetInfo, Instant)>> {
        self.dataset_catalog.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The dataset catalog, to change.
    pub fn datasets_mut(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<Uuid, (DatasetInfo, Instant)>> {
        self.dataset_catalog.write().unwrap_or_else(|p| p.into_inner())
    }
}

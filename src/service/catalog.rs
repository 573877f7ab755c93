//! What this replica knows of the store: models and datasets by id, found on first use,
//! listed from the store, forgotten when another replica deletes them; and the decoded
//! models, read back from the store when the cache has let them go.
//!
//! The store is the truth; the registry and the dataset catalog are views of it that a
//! listing refreshes every `store_refresh_secs` (and GET /models at once). A model
//! deleted here is remembered as deleted for a while, so that a listing that started
//! before the delete cannot bring it back.

use super::{Service, ServiceError};
use crate::estimator::FittedModel;
use crate::registry::{Failure, FailureKind, ModelEntry, Status};
use crate::store::delta::ListedDelta;
use crate::store::StoreError;
use futures_util::stream::{self, StreamExt};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};
use uuid::Uuid;

/// Store reads in flight at once when a listing finds many new objects.
const CONCURRENT_READS: usize = 8;

/// A delete marker outlives any write that began before the delete: a model's write has
/// a deadline of 15 s plus its size at 20 MB/s (65 s for 1 GB).
const MARKER_KEEP: Duration = Duration::from_secs(180);

/// A marker this old with no model behind it was left by a process that stopped before
/// removing it. Twice MARKER_KEEP: its age is read on the store's clock.
const STALE_MARKER: Duration = Duration::from_secs(2 * 180);

impl Service {
    /// Reads the store's models and datasets at start (blocking: call off the async
    /// threads), decodes the newest models while the cache has room, then marks the
    /// service ready. Returns how many models were found.
    pub fn load_store(&self) -> usize {
        let started = Instant::now();
        let found = self.store.block_on(async {
            self.sync_store().await;
            self.warm_cache().await
        });
        tracing::info!(
            models = found.0,
            decoded = found.1,
            datasets = self.list_datasets().len(),
            store = %self.store.describe(),
            duration_ms = started.elapsed().as_secs_f64() * 1e3,
            "stored models loaded"
        );
        self.ready.send_replace(true);
        found.0
    }

    /// Decodes stored models, newest first, while they fit in the cache: a restarted
    /// replica answers from memory at once, and damaged files are found now.
    async fn warm_cache(&self) -> (usize, usize) {
        let mut ready: Vec<_> = self.registry.list().into_iter().filter(|e| e.status() == Status::Ready).collect();
        ready.reverse();
        let mut decoded = 0;
        let limit = self.registry.cache.limit().unwrap_or(usize::MAX);
        for entry in &ready {
            let size = entry.summary().map_or(0, |s| s.memory_bytes);
            if self.registry.cache.bytes().saturating_add(size) > limit {
                continue;
            }
            if self.fitted(entry).await.is_ok() {
                decoded += 1;
            }
        }
        (ready.len(), decoded)
    }

    /// Brings the registry and the dataset catalog up to date with the store: objects
    /// that appeared are added (their heads read), objects that went away are dropped.
    /// A store that cannot be reached leaves both as they are.
    pub async fn sync_store(&self) {
        if !self.store.is_durable() {
            // Nothing is written to a memory store: the registry is the only record.
            return;
        }
        let _one_at_a_time = self.sync_lock.lock().await;
        let started = Instant::now();
        *self.last_sync.lock().unwrap_or_else(|p| p.into_inner()) = Some(started);
        self.prune_tombstones();
        self.forget_due_markers().await;
        // The delete markers first: a model another replica deleted is forgotten here even
        // when its full object came back (a write that landed after the delete) or when
        // the listing of the models fails.
        let markers = match self.store.list_markers().await {
            Ok(markers) => {
                self.forget_marked(&markers);
                Some(markers)
            }
            Err(e) => {
                self.sync_failed("delete markers", &e);
                None
            }
        };
        // Deltas before full objects: a delta listed whose model is then not listed
        // belongs to a deleted model (a full object is written before any delta of it).
        let deltas = self.store.list_deltas().await;
        match self.store.list_models().await {
            Ok(ids) => {
                let listed: HashSet<Uuid> = ids.iter().map(|(id, _)| *id).collect();
                let marked: Option<HashSet<Uuid>> = markers.as_ref().map(|m| m.iter().map(|(id, _)| *id).collect());
                self.sync_models(ids, started, marked.as_ref()).await;
                if let Some(markers) = &markers {
                    self.forget_stale_markers(markers, &listed).await;
                }
                match deltas {
                    Ok(deltas) => self.sync_deltas(deltas, &listed).await,
                    Err(e) => self.sync_failed("deltas", &e),
                }
            }
            Err(e) => self.sync_failed("models", &e),
        }
        match self.store.list_datasets().await {
            Ok(ids) => self.sync_datasets(ids, started).await,
            Err(e) => self.sync_failed("datasets", &e),
        }
        self.metrics.store_sync_seconds.observe(started.elapsed().as_secs_f64());
    }

    /// A listing of a refresh that failed: counted, and said at warn (a replica whose
    /// listings fail serves models other replicas deleted until one succeeds).
    fn sync_failed(&self, what: &'static str, e: &StoreError) {
        let labels = crate::metrics::ListingLabels { listing: what.into() };
        self.metrics.store_sync_failures.get_or_create(&labels).inc();
        tracing::warn!(listing = what, error = %e, "a refresh could not list the store");
    }

    /// Forgets the models another replica deleted (their markers listed): every model id
    /// is new, so a marker means deleted whatever else the store shows.
    fn forget_marked(&self, markers: &[(Uuid, Option<std::time::SystemTime>)]) {
        for (id, _) in markers {
            if self.registry.get(*id).is_some_and(|e| e.status() == Status::Ready) {
                tracing::info!(model_id = %id, "model deleted from the store by another replica");
                self.tombstone(*id);
                self.registry.remove(*id);
            }
        }
    }

    /// As [`Service::sync_store`], unless a listing that began after this call did
    /// finish meanwhile: many concurrent GET /models share one listing, and none sees
    /// the store as it was before it asked.
    pub async fn sync_store_if_stale(&self) {
        let asked = Instant::now();
        let _wait_for_the_running_one = self.sync_lock.lock().await;
        let last = *self.last_sync.lock().unwrap_or_else(|p| p.into_inner());
        drop(_wait_for_the_running_one);
        if last.is_none_or(|t| t < asked) {
            self.sync_store().await;
        }
    }

    async fn sync_models(&self, listing: Vec<(Uuid, u64)>, listed_at: Instant, marked: Option<&HashSet<Uuid>>) {
        // A full object listed behind a delete marker came back after the delete: taken
        // back (whichever replica sees it first; deleting twice is harmless).
        let (back, listing): (Vec<_>, Vec<_>) =
            listing.into_iter().partition(|(id, _)| marked.is_some_and(|m| m.contains(id)));
        for (id, _) in back {
            tracing::warn!(model_id = %id, "a deleted model's object is back in the store (a write landed after the delete): removing it");
            if let Err(e) = self.store.take_back(id).await {
                tracing::warn!(model_id = %id, error = %e, "cannot remove a deleted model's object");
            }
        }
        let sizes: HashMap<Uuid, u64> = listing.iter().copied().collect();
        let ids: Vec<Uuid> = listing.into_iter().map(|(id, _)| id).collect();
        let listed: HashSet<Uuid> = ids.iter().copied().collect();
        for entry in self.registry.list() {
            // Ready before the listing began yet not in it: deleted by another replica.
            let gone = entry.status() == Status::Ready
                && !listed.contains(&entry.id)
                && entry.ready_at().is_some_and(|t| t < listed_at);
            if gone {
                tracing::info!(model_id = %entry.id, "model deleted from the store by another replica");
                self.registry.remove(entry.id);
            }
        }
        self.refresh_versions(&sizes).await;
        let unknown: Vec<Uuid> =
            ids.into_iter().filter(|id| !self.registry.contains(*id) && !self.is_tombstoned(*id)).collect();
        let heads: Vec<_> = stream::iter(unknown)
            .map(|id| async move { (id, self.store.model_head(id).await) })
            .buffer_unordered(CONCURRENT_READS)
            .collect()
            .await;
        for (id, head) in heads {
            match head {
                Ok(Some(head)) => {
                    if let Some(entry) = self.adopt(&head) {
                        if entry.stored_bytes() == 0 {
                            entry.set_stored_bytes(sizes.get(&id).copied().unwrap_or(0));
                        }
                    }
                }
                Ok(None) => {}
                Err(StoreError::Corrupt { reason, .. }) => self.store.quarantine_model(id, &reason).await,
                Err(e) => tracing::warn!(model_id = %id, error = %e, "cannot read a stored model's head"),
            }
        }
    }

    /// Ready models whose full object changed size since this replica read it were
    /// compacted (or, by an older build, rewritten whole) by another replica: a newer
    /// version replaces the one here, and the decoded copy is brought up on next use.
    async fn refresh_versions(&self, sizes: &HashMap<Uuid, u64>) {
        let changed: Vec<Arc<ModelEntry>> = self
            .registry
            .list()
            .into_iter()
            .filter(|e| e.status() == Status::Ready && sizes.get(&e.id).is_some_and(|s| *s != e.stored_bytes()))
            .collect();
        let heads: Vec<_> = stream::iter(changed)
            .map(|entry| async move { (self.store.model_head(entry.id).await, entry) })
            .buffer_unordered(CONCURRENT_READS)
            .collect()
            .await;
        for (head, entry) in heads {
            let Ok(Some(head)) = head else { continue };
            let size = sizes.get(&entry.id).copied().unwrap_or(0);
            let stored_version = head.summary().map_or(1, |s| s.version);
            if stored_version <= entry.version() {
                entry.set_stored_bytes(size);
                continue;
            }
            // An append here holds the model's lock and swaps in its own version.
            let lock = self.model_lock(entry.id);
            let Ok(_turn) = lock.try_lock() else { continue };
            if self.registry.get(entry.id).is_none_or(|now| !Arc::ptr_eq(&now, &entry)) {
                continue;
            }
            match ModelEntry::restored(&head) {
                Ok(newer) => {
                    newer.set_stored_bytes(size);
                    tracing::info!(model_id = %entry.id, version = stored_version, "model updated by another replica");
                    self.registry.insert(Arc::new(newer));
                }
                Err(reason) => tracing::warn!(model_id = %entry.id, reason, "cannot read a newer stored version"),
            }
        }
    }

    /// Ready models with deltas newer than the version here were appended to by another
    /// replica: the newest delta's head says what the newest version is, and it replaces
    /// the one here (its decoded model is brought up by replaying on next use). Deltas of
    /// models that are gone are deleted.
    async fn sync_deltas(&self, deltas: Vec<ListedDelta>, listed: &HashSet<Uuid>) {
        let mut newest: HashMap<Uuid, u64> = HashMap::new();
        for d in &deltas {
            let v = newest.entry(d.id).or_default();
            *v = (*v).max(d.version);
        }
        for d in deltas.iter().filter(|d| !listed.contains(&d.id)) {
            match self.store.delete_delta(d.id, d.version).await {
                Ok(()) => tracing::info!(model_id = %d.id, version = d.version, "deleted a delta of a deleted model"),
                Err(e) => tracing::debug!(model_id = %d.id, error = %e, "cannot delete a delta of a deleted model"),
            }
        }
        let stale: Vec<(Arc<ModelEntry>, u64)> = newest
            .into_iter()
            .filter(|(id, _)| listed.contains(id))
            .filter_map(|(id, v)| {
                self.registry.get(id).filter(|e| e.status() == Status::Ready && e.version() < v).map(|e| (e, v))
            })
            .collect();
        let read: Vec<_> = stream::iter(stale)
            .map(|(entry, v)| async move { (self.store.load_delta(entry.id, v).await, entry) })
            .buffer_unordered(CONCURRENT_READS)
            .collect()
            .await;
        for (delta, entry) in read {
            let delta = match delta {
                Ok(Some(d)) => d,
                Ok(None) => continue,
                // This replica keeps serving the version before it, as it must (the
                // versions before a damaged delta are intact): said once, and counted.
                Err(StoreError::Corrupt { key, reason }) => {
                    if self.damaged_deltas.lock().unwrap_or_else(|p| p.into_inner()).insert(key.clone()) {
                        let labels = crate::metrics::ObjectLabels { object: "delta".into() };
                        self.metrics.damaged_objects.get_or_create(&labels).inc();
                        tracing::error!(
                            model_id = %entry.id, key, reason,
                            "a newer version's stored delta is damaged: this replica serves version {} until an \
                             operator repairs or removes it",
                            entry.version()
                        );
                    }
                    continue;
                }
                Err(_) => continue, // the store did not answer: the next refresh tries again
            };
            // An append here holds the model's lock and registers its own version.
            let lock = self.model_lock(entry.id);
            let Ok(_turn) = lock.try_lock() else { continue };
            if self.registry.get(entry.id).is_none_or(|now| now.version() >= delta.head.version) {
                continue;
            }
            match self.entry_of_delta(&entry, &delta) {
                Ok(newer) => {
                    tracing::info!(model_id = %entry.id, version = delta.head.version, "model updated by another replica");
                    self.registry.insert(Arc::new(newer));
                }
                Err(e) => tracing::warn!(model_id = %entry.id, error = %e, "cannot read a newer version's delta"),
            }
        }
    }

    /// Registers a model another replica (or an earlier run) stored.
    fn adopt(&self, head: &crate::store::ModelHead) -> Option<Arc<ModelEntry>> {
        if self.is_tombstoned(head.id) {
            return None;
        }
        match ModelEntry::restored(head) {
            Ok(entry) => Some(self.registry.insert_if_absent(Arc::new(entry))),
            Err(reason) => {
                tracing::warn!(model_id = %head.id, reason, "skipping a stored model this build cannot serve");
                None
            }
        }
    }

    async fn sync_datasets(&self, ids: Vec<Uuid>, listed_at: Instant) {
        let listed: HashSet<Uuid> = ids.iter().copied().collect();
        self.catalog_write().retain(|id, (_, seen)| listed.contains(id) || *seen >= listed_at);
        let unknown: Vec<Uuid> = {
            let catalog = self.catalog_read();
            ids.into_iter().filter(|id| !catalog.contains_key(id) && !self.is_tombstoned(*id)).collect()
        };
        let infos: Vec<_> = stream::iter(unknown)
            .map(|id| async move { (id, self.store.dataset_info(id).await) })
            .buffer_unordered(CONCURRENT_READS)
            .collect()
            .await;
        for (id, info) in infos {
            match info {
                Ok(Some(info)) if !self.is_tombstoned(id) => {
                    self.catalog_write().entry(id).or_insert((info, Instant::now()));
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(dataset_id = %id, error = %e, "cannot read a stored dataset's description"),
            }
        }
    }

    /// The model with this id: known here, or read from the store's head of it.
    pub async fn lookup(&self, id: Uuid) -> Result<Arc<ModelEntry>, ServiceError> {
        if let Some(entry) = self.registry.get(id) {
            return Ok(entry);
        }
        if !self.store.is_durable() || self.is_tombstoned(id) {
            return Err(ServiceError::NotFound(id));
        }
        match self.newest_entry(id, None).await {
            // A damaged head was moved to quarantine: there is no such model any more.
            Err(ServiceError::FitFailed(_)) => Err(ServiceError::NotFound(id)),
            other => other,
        }
    }

    /// A ready model's decoded state: from the cache, or brought up from the store (its
    /// full object and the deltas after it; one read per model however many requests
    /// wait for it).
    pub async fn fitted(&self, entry: &ModelEntry) -> Result<Arc<FittedModel>, ServiceError> {
        Ok(self.fitted_version(entry).await?.1)
    }

    /// As [`Service::fitted`], with the version the model is: `entry`'s, or a newer one
    /// when the store's full object is already newer.
    pub(super) async fn fitted_version(&self, entry: &ModelEntry) -> Result<(u64, Arc<FittedModel>), ServiceError> {
        let (id, want) = (entry.id, entry.version());
        if entry.summary().is_none() {
            return Err(ServiceError::NotReady { id, status: entry.status() });
        }
        // A newer version than asked for serves too: the request began just before an append.
        if let Some((v, m)) = self.registry.cache.newest(id).filter(|(v, _)| *v >= want) {
            return Ok((v, m));
        }
        if !self.store.is_durable() {
            // The cache is the only copy (it never evicts then): an append has replaced
            // this version meanwhile.
            return self.registry.cache.newest(id).ok_or(ServiceError::NotFound(id));
        }
        let gate = self.loading.lock().unwrap_or_else(|p| p.into_inner()).entry(id).or_default().clone();
        let _only_reader = gate.lock().await;
        if let Some((v, m)) = self.registry.cache.newest(id).filter(|(v, _)| *v >= want) {
            return Ok((v, m));
        }
        let started = Instant::now();
        let brought = self.bring_up(entry).await;
        self.loading.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
        match brought {
            Ok(v) => {
                self.keep_version(entry, &v);
                tracing::debug!(model_id = %id, version = v.version, duration_ms = started.elapsed().as_secs_f64() * 1e3, "model read from the store");
                Ok((v.version, v.fitted))
            }
            Err(ServiceError::NotFound(_)) => {
                self.registry.remove(id);
                Err(ServiceError::NotFound(id))
            }
            Err(e) => Err(e),
        }
    }

    /// What a request gets when reading model `id` from the store failed: a damaged full
    /// object is moved to quarantine and the model forgotten (500); a damaged delta is
    /// reported, counted and left for a human (500 `damaged-model`, naming the delta:
    /// the versions before it are intact, and an operator decides); anything else is the
    /// store's usual answer.
    pub(super) async fn read_failure(&self, id: Uuid, e: StoreError) -> ServiceError {
        let damaged = |object: &str| {
            let labels = crate::metrics::ObjectLabels { object: object.into() };
            self.metrics.damaged_objects.get_or_create(&labels).inc();
        };
        match e {
            StoreError::Corrupt { key, reason } if key == crate::store::model_key(id) => {
                damaged("model");
                tracing::error!(model_id = %id, reason, "a stored model is damaged");
                self.store.quarantine_model(id, &reason).await;
                self.registry.remove(id);
                ServiceError::FitFailed(Failure {
                    kind: FailureKind::Internal,
                    detail: format!("the stored model {id} is damaged and was moved to quarantine: {reason}"),
                })
            }
            StoreError::Corrupt { key, reason } => {
                damaged("delta");
                tracing::error!(model_id = %id, key, reason, "a stored delta is damaged");
                let detail = format!(
                    "model {id}: its stored update {key} is damaged ({reason}); the model cannot be brought up to \
                     its newest version until an operator repairs or removes that delta"
                );
                ServiceError::DamagedModel { id, key, detail }
            }
            e => self.store_error(e),
        }
    }

    /// Removes a model everywhere: from the store first (a model whose object could not
    /// be removed would come back), then here; a queued fit is withdrawn, a running one
    /// abandoned.
    pub async fn delete(&self, id: Uuid) -> Result<(), ServiceError> {
        let entry = self.lookup(id).await?;
        // An append in flight finishes (stored and acknowledged) before the delete.
        let lock = self.model_lock(id);
        let _turn = lock.lock().await;
        if self.store.is_durable() {
            self.store.delete_model(id).await.map_err(|e| self.store_failure("cannot delete the stored model", e))?;
            self.forget_marker_later(id);
        }
        self.tombstone(id);
        self.registry.remove(id);
        self.model_locks.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
        if self.pool.withdraw(entry.id) {
            self.metrics.record_fit(entry.kind.name(), "cancelled", 0.0);
        }
        Ok(())
    }

    /// Queues the removal of a delete's marker, once no compaction that began before it
    /// can still be writing (see `Store::delete_model`): the refresh removes it. A
    /// marker queued by a process that stopped first is removed by a later refresh of
    /// any replica, once stale (`forget_stale_markers`).
    fn forget_marker_later(&self, id: Uuid) {
        let mut queue = self.pending_markers.lock().unwrap_or_else(|p| p.into_inner());
        queue.push_back((Instant::now() + MARKER_KEEP, id));
    }

    /// Removes the markers that deletes by processes that stopped first left behind:
    /// older than STALE_MARKER, with no model listed behind them.
    async fn forget_stale_markers(&self, markers: &[(Uuid, Option<std::time::SystemTime>)], listed: &HashSet<Uuid>) {
        let now = std::time::SystemTime::now();
        for &(id, written) in markers {
            let stale = written.is_some_and(|w| now.duration_since(w).is_ok_and(|age| age >= STALE_MARKER));
            if !stale || listed.contains(&id) {
                continue;
            }
            match self.store.forget_deleted(id).await {
                Ok(()) => tracing::info!(model_id = %id, "removed a delete marker a stopped process left behind"),
                Err(e) => tracing::debug!(model_id = %id, error = %e, "cannot remove a delete marker"),
            }
        }
    }

    /// Removes the delete markers whose time has come.
    async fn forget_due_markers(&self) {
        loop {
            let due = {
                let mut queue = self.pending_markers.lock().unwrap_or_else(|p| p.into_inner());
                match queue.front() {
                    Some((at, _)) if *at <= Instant::now() => queue.pop_front(),
                    _ => None,
                }
            };
            let Some((_, id)) = due else { break };
            if let Err(e) = self.store.forget_deleted(id).await {
                tracing::debug!(model_id = %id, error = %e, "cannot remove a delete marker");
            }
        }
    }

    /// The error a request gets when the store let it down.
    pub(super) fn store_error(&self, e: StoreError) -> ServiceError {
        self.store_failure("", e)
    }

    /// As [`Service::store_error`], saying what could not be done (`what`) when the
    /// store answered but refused.
    pub(super) fn store_failure(&self, what: &str, e: StoreError) -> ServiceError {
        if e.is_unavailable() {
            ServiceError::StoreUnavailable { detail: e.to_string(), retry_after: self.store_retry_after() }
        } else if what.is_empty() {
            ServiceError::Storage(e.to_string())
        } else {
            ServiceError::Storage(format!("{what}: {e}"))
        }
    }

    /// When to try again while the store is down: the next refresh will have probed it.
    pub fn store_retry_after(&self) -> Duration {
        Duration::from_secs(self.config.store_refresh_secs.max(1))
    }

    pub(super) fn tombstone(&self, id: Uuid) {
        self.tombstones.lock().unwrap_or_else(|p| p.into_inner()).insert(id, Instant::now());
    }

    pub(super) fn is_tombstoned(&self, id: Uuid) -> bool {
        self.tombstones.lock().unwrap_or_else(|p| p.into_inner()).contains_key(&id)
    }

    /// Deletes are remembered for a few listings: long enough that none that began
    /// before the delete is still running.
    fn prune_tombstones(&self) {
        let keep = Duration::from_secs(self.config.store_refresh_secs.max(1) * 4 + 60);
        self.tombstones.lock().unwrap_or_else(|p| p.into_inner()).retain(|_, at| at.elapsed() < keep);
        // The append lock of a model this replica no longer has (deleted through another
        // replica) goes too, unless someone holds it: one per model ever appended to would
        // otherwise stay for the process's life (the soak's slow memory growth).
        self.model_locks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|id, lock| self.registry.contains(*id) || Arc::strong_count(lock) > 1);
        self.full_objects.lock().unwrap_or_else(|p| p.into_inner()).retain(|id, _| self.registry.contains(*id));
    }

    /// Refreshes from the store every `store_refresh_secs` until the service is dropped.
    pub fn spawn_refresh(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        let period = Duration::from_secs(self.config.store_refresh_secs.max(1));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                let Some(service) = weak.upgrade() else { break };
                service.sync_store().await;
            }
        });
    }
}

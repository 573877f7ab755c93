//! What this replica knows of the store: models and datasets by id, found on first use,
//! listed from the store, forgotten when another replica deletes them; and the decoded
//! models, read back from the store when the cache has let them go.
//!
//! The store is the truth; the registry and the dataset catalog are views of it that a
//! listing refreshes every `store_refresh_secs` (and GET /models at once). What keeps a
//! deleted model deleted is in `tombstones`.

use super::{locked, Replica, ReplicaError};
use crate::estimator::FittedModel;
use crate::registry::{Failure, FailureKind, ModelEntry, Status};
use crate::store::delta::ListedDelta;
use crate::store::{ListedModel, StoreError};
use futures_util::stream::{self, StreamExt};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;
use uuid::Uuid;

/// Store reads in flight at once when a listing finds many new objects.
const CONCURRENT_READS: usize = 8;

impl Replica {
    /// Reads the store's models, datasets and aliases at start (blocking: call off the
    /// async threads), then decodes the newest models while the cache has room. Returns
    /// how many models were found.
    pub fn load(&self) -> usize {
        let started = Instant::now();
        let found = self.store.block_on(async {
            self.sync().await;
            self.warm_cache().await
        });
        tracing::info!(
            models = found.0,
            decoded = found.1,
            datasets = self.datasets().len(),
            store = %self.store.describe(),
            duration_ms = started.elapsed().as_secs_f64() * 1e3,
            "stored models loaded"
        );
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
    /// A store that cannot be reached leaves both as they are. The aliases are listed
    /// last, under the same listing.
    pub async fn sync(&self) {
        if !self.store.is_durable() {
            // Nothing is written to a memory store: the registry is the only record.
            return;
        }
        let _one_at_a_time = self.sync_lock.lock().await;
        let started = Instant::now();
        *locked(&self.last_sync) = Some(started);
        self.prune_tombstones();
        self.forget_due_markers().await;
        // Deltas before full objects: a delta listed whose model is then not listed
        // belongs to a deleted model (a full object is written before any delta of it).
        let deltas = self.store.list_deltas().await;
        match self.store.list_models().await {
            Ok(models) => {
                let listed: HashSet<Uuid> = models.iter().map(|m| m.id).collect();
                self.sync_models(models, started, deltas.as_deref().ok()).await;
                self.forget_stale_markers(&listed).await;
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
        if let Err(e) = self.sync_aliases().await {
            self.sync_failed("aliases", &e);
        }
        self.metrics.store_sync_seconds.observe(started.elapsed().as_secs_f64());
    }

    /// A listing of a refresh that failed: counted, and said at warn (a replica whose
    /// listings fail serves models other replicas deleted until one succeeds).
    pub fn sync_failed(&self, what: &'static str, e: &StoreError) {
        let labels = crate::metrics::ListingLabels { listing: what.into() };
        self.metrics.store_sync_failures.get_or_create(&labels).inc();
        tracing::warn!(listing = what, error = %e, "a refresh could not list the store");
    }

    /// As [`Replica::sync`], unless a listing that began after this call did finish
    /// meanwhile: many concurrent GET /models share one listing, and none sees the store
    /// as it was before it asked.
    pub async fn sync_if_stale(&self) {
        let asked = Instant::now();
        let _wait_for_the_running_one = self.sync_lock.lock().await;
        let last = *locked(&self.last_sync);
        drop(_wait_for_the_running_one);
        if last.is_none_or(|t| t < asked) {
            self.sync().await;
        }
    }

    /// Forgets the models deleted from the store, refreshes those rewritten, and adopts
    /// those new here at their newest version (their full object and the deltas after
    /// it): never at an older one, which a client that saw the newer one here, before
    /// this process restarted, would see as its write undone. Without a listing of the
    /// deltas nothing is adopted (a lookup finds any model meanwhile).
    async fn sync_models(&self, listing: Vec<ListedModel>, listed_at: Instant, deltas: Option<&[ListedDelta]>) {
        let listing: HashMap<Uuid, ListedModel> = listing.into_iter().map(|m| (m.id, m)).collect();
        for entry in self.registry.list() {
            // Ready before the listing began yet not in it: deleted by another replica.
            let gone = entry.status() == Status::Ready
                && !listing.contains_key(&entry.id)
                && entry.ready_at().is_some_and(|t| t < listed_at);
            if gone {
                tracing::info!(model_id = %entry.id, "model deleted from the store by another replica");
                self.registry.remove(entry.id);
            }
        }
        self.refresh_versions(&listing).await;
        let Some(deltas) = deltas else { return };
        let unknown: Vec<Uuid> =
            listing.keys().copied().filter(|id| !self.registry.contains(*id) && !self.is_tombstoned(*id)).collect();
        // Each head read with its delete marker: an object behind one came back after
        // the delete.
        let heads: Vec<_> = stream::iter(unknown)
            .map(|id| async move {
                let (head, deleted) = futures_util::join!(self.store.model_head(id), self.store.is_deleted(id));
                (id, head, deleted)
            })
            .buffer_unordered(CONCURRENT_READS)
            .collect()
            .await;
        for (id, head, deleted) in heads {
            match (head, deleted) {
                (Ok(Some(_)), Ok(true)) => self.take_back(id).await,
                (Ok(Some(head)), Ok(false)) => {
                    let Some(entry) = self.restore(&head) else { continue };
                    let listed = listing.get(&id);
                    entry.set_stored_bytes(listed.map_or(0, |m| m.size));
                    entry.set_stored_modified(listed.map_or(0, |m| m.modified));
                    match self.with_listed_deltas(entry, deltas).await {
                        Ok(newest) => {
                            if !self.is_tombstoned(id) {
                                self.registry.insert_if_absent(newest);
                            }
                        }
                        Err(e) => {
                            tracing::warn!(model_id = %id, error = %e, "cannot read a stored model's newest version")
                        }
                    }
                }
                (Ok(None), _) => {}
                (Err(StoreError::Corrupt { reason, .. }), _) => self.store.quarantine_model(id, &reason).await,
                (Err(e), _) | (_, Err(e)) => {
                    tracing::warn!(model_id = %id, error = %e, "cannot read a stored model's head")
                }
            }
        }
    }

    /// Ready models whose full object a listing shows rewritten since this replica last
    /// saw it (another size or modification time, or not seen in a listing yet). Behind
    /// a delete marker, the object is a write that landed after another replica's
    /// delete: the model is forgotten and the object taken back. Of a newer version
    /// (another replica compacted it), that version replaces the one here, and the
    /// decoded copy is brought up on next use.
    async fn refresh_versions(&self, listing: &HashMap<Uuid, ListedModel>) {
        let changed: Vec<(Arc<ModelEntry>, ListedModel)> = self
            .registry
            .list()
            .into_iter()
            .filter(|e| e.status() == Status::Ready)
            .filter_map(|e| {
                let listed = *listing.get(&e.id)?;
                let rewritten =
                    listed.size != e.stored_bytes() || (listed.modified != 0 && listed.modified != e.stored_modified());
                rewritten.then_some((e, listed))
            })
            .collect();
        let reads: Vec<_> = stream::iter(changed)
            .map(|(entry, listed)| async move {
                let resized = listed.size != entry.stored_bytes();
                let head = async {
                    if resized {
                        Some(self.store.model_head(entry.id).await)
                    } else {
                        None
                    }
                };
                let (head, deleted) = futures_util::join!(head, self.store.is_deleted(entry.id));
                (entry, listed, head, deleted)
            })
            .buffer_unordered(CONCURRENT_READS)
            .collect()
            .await;
        for (entry, listed, head, deleted) in reads {
            match deleted {
                Ok(false) => {}
                Ok(true) => {
                    self.take_back(entry.id).await;
                    continue;
                }
                Err(_) => continue, // the store did not answer: the next refresh asks again
            }
            let head = match head {
                None => {
                    entry.set_stored_modified(listed.modified);
                    continue;
                }
                Some(Ok(Some(head))) => head,
                Some(_) => continue,
            };
            let stored_version = head.summary().map_or(1, |s| s.version);
            if stored_version <= entry.version() {
                entry.set_stored_bytes(listed.size);
                entry.set_stored_modified(listed.modified);
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
                    newer.set_stored_bytes(listed.size);
                    newer.set_stored_modified(listed.modified);
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
                    if locked(&self.damaged_deltas).insert(key.clone()) {
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

    /// The entry of a model another replica (or an earlier run) stored, as its full
    /// object's head says (None: deleted here meanwhile, or a model this build cannot
    /// serve).
    fn restore(&self, head: &crate::store::ModelHead) -> Option<Arc<ModelEntry>> {
        if self.is_tombstoned(head.id) {
            return None;
        }
        match ModelEntry::restored(head) {
            Ok(entry) => Some(Arc::new(entry)),
            Err(reason) => {
                tracing::warn!(model_id = %head.id, reason, "skipping a stored model this build cannot serve");
                None
            }
        }
    }

    async fn sync_datasets(&self, ids: Vec<Uuid>, listed_at: Instant) {
        let listed: HashSet<Uuid> = ids.iter().copied().collect();
        self.datasets_mut().retain(|id, (_, seen)| listed.contains(id) || *seen >= listed_at);
        let unknown: Vec<Uuid> = {
            let catalog = self.datasets();
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
                    self.datasets_mut().entry(id).or_insert((info, Instant::now()));
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(dataset_id = %id, error = %e, "cannot read a stored dataset's description"),
            }
        }
    }

    /// The model with this id: known here, or read from the store's head of it.
    pub async fn lookup(&self, id: Uuid) -> Result<Arc<ModelEntry>, ReplicaError> {
        if let Some(entry) = self.registry.get(id) {
            return Ok(entry);
        }
        if !self.store.is_durable() || self.is_tombstoned(id) {
            return Err(ReplicaError::NotFound(id));
        }
        match self.newest_entry(id, None).await {
            // A damaged head was moved to quarantine: there is no such model any more.
            Err(ReplicaError::Damaged(_)) => Err(ReplicaError::NotFound(id)),
            other => other,
        }
    }

    /// A ready model's decoded state: from the cache, or brought up from the store (its
    /// full object and the deltas after it; one read per model however many requests
    /// wait for it).
    pub async fn fitted(&self, entry: &ModelEntry) -> Result<Arc<FittedModel>, ReplicaError> {
        Ok(self.fitted_version(entry).await?.1)
    }

    /// As [`Replica::fitted`], with the version the model is: `entry`'s, or a newer one
    /// when the store's full object is already newer.
    pub async fn fitted_version(&self, entry: &ModelEntry) -> Result<(u64, Arc<FittedModel>), ReplicaError> {
        let (id, want) = (entry.id, entry.version());
        if entry.summary().is_none() {
            return Err(ReplicaError::NotReady { id, status: entry.status() });
        }
        // A newer version than asked for serves too: the request began just before an append.
        if let Some((v, m)) = self.registry.cache.newest(id).filter(|(v, _)| *v >= want) {
            return Ok((v, m));
        }
        if !self.store.is_durable() {
            // The cache is the only copy (it never evicts then): an append has replaced
            // this version meanwhile.
            return self.registry.cache.newest(id).ok_or(ReplicaError::NotFound(id));
        }
        let gate = locked(&self.loading).entry(id).or_default().clone();
        let _only_reader = gate.lock().await;
        if let Some((v, m)) = self.registry.cache.newest(id).filter(|(v, _)| *v >= want) {
            return Ok((v, m));
        }
        let started = Instant::now();
        let brought = self.bring_up(entry).await;
        locked(&self.loading).remove(&id);
        match brought {
            Ok(v) => {
                self.keep_version(entry, &v);
                tracing::debug!(model_id = %id, version = v.version, duration_ms = started.elapsed().as_secs_f64() * 1e3, "model read from the store");
                Ok((v.version, v.fitted))
            }
            Err(ReplicaError::NotFound(_)) => {
                self.registry.remove(id);
                Err(ReplicaError::NotFound(id))
            }
            Err(e) => Err(e),
        }
    }

    /// What a request gets when reading model `id` from the store failed: a damaged full
    /// object is moved to quarantine and the model forgotten (500); a damaged delta is
    /// reported, counted and left for a human (500 `damaged-model`, naming the delta:
    /// the versions before it are intact, and an operator decides); anything else is the
    /// store's usual answer.
    pub(super) async fn read_failure(&self, id: Uuid, e: StoreError) -> ReplicaError {
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
                ReplicaError::Damaged(Failure {
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
                ReplicaError::DamagedDelta { id, key, detail }
            }
            e => self.store_error(e),
        }
    }
}

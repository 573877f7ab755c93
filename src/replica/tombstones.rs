//! What keeps a deleted model deleted on every replica: a delete leaves a marker in the
//! store for as long as a write that began before it may still land (`MARKER_KEEP`); a
//! full object found behind a marker is such a write and is taken back; a replica
//! remembers its own deletes for a few refreshes (tombstones) so that a listing that
//! began before one cannot bring the model back.

use super::{locked, Replica};
use crate::store::StoreError;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use uuid::Uuid;

/// A delete marker outlives any write that began before the delete: a model's write has
/// a deadline of 15 s plus its size at 20 MB/s (65 s for 1 GB).
const MARKER_KEEP: Duration = Duration::from_secs(180);

/// A marker this old with no model behind it was left by a process that stopped before
/// removing it. Twice MARKER_KEEP: its age is read on the store's clock.
const STALE_MARKER: Duration = Duration::from_secs(2 * 180);

impl Replica {
    /// Deletes model `id` from the store (a durable one: its object, leaving a marker)
    /// and forgets it here. The caller holds the model's lock.
    pub async fn delete_model(&self, id: Uuid) -> Result<(), StoreError> {
        if self.store.is_durable() {
            self.store.delete_model(id).await?;
            self.forget_marker_later(id);
        }
        self.tombstone(id);
        self.registry.remove(id);
        locked(&self.model_locks).remove(&id);
        Ok(())
    }

    /// Queues the removal of a delete's marker, once no compaction that began before it
    /// can still be writing (see `Store::delete_model`): the refresh removes it. A
    /// marker queued by a process that stopped first is removed by a later refresh of
    /// any replica, once stale (`forget_stale_markers`).
    fn forget_marker_later(&self, id: Uuid) {
        let mut queue = locked(&self.pending_markers);
        queue.push_back((Instant::now() + MARKER_KEEP, id));
    }

    /// Removes the markers that deletes by processes that stopped first left behind:
    /// older than STALE_MARKER, with no model listed behind them. At most once per
    /// MARKER_KEEP (one listing of the markers).
    pub(super) async fn forget_stale_markers(&self, listed: &HashSet<Uuid>) {
        {
            let mut last = locked(&self.markers_swept);
            if last.is_some_and(|t| t.elapsed() < MARKER_KEEP) {
                return;
            }
            *last = Some(Instant::now());
        }
        let markers = match self.store.list_markers().await {
            Ok(markers) => markers,
            Err(e) => return self.sync_failed("delete markers", &e),
        };
        let now = std::time::SystemTime::now();
        for (id, written) in markers {
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
    pub(super) async fn forget_due_markers(&self) {
        loop {
            let due = {
                let mut queue = locked(&self.pending_markers);
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

    /// Forgets a model whose full object is back in the store behind its delete marker
    /// (every model id is new, so a marker means deleted, whatever else the store shows),
    /// and removes what came back.
    pub(super) async fn take_back(&self, id: Uuid) {
        tracing::warn!(model_id = %id, "a deleted model's object is back in the store (a write landed after the delete): removing it");
        self.tombstone(id);
        self.registry.remove(id);
        if let Err(e) = self.store.take_back(id).await {
            tracing::warn!(model_id = %id, error = %e, "cannot remove a deleted model's object");
        }
    }

    pub fn tombstone(&self, id: Uuid) {
        locked(&self.tombstones).insert(id, Instant::now());
    }

    pub fn is_tombstoned(&self, id: Uuid) -> bool {
        locked(&self.tombstones).contains_key(&id)
    }

    /// Deletes are remembered for a few listings: long enough that none that began
    /// before the delete is still running.
    pub(super) fn prune_tombstones(&self) {
        let keep = Duration::from_secs(self.settings.refresh.as_secs() * 4 + 60);
        locked(&self.tombstones).retain(|_, at| at.elapsed() < keep);
        // The append lock of a model this replica no longer has (deleted through another
        // replica) goes too, unless someone holds it: one per model ever appended to would
        // otherwise stay for the process's life (the soak's slow memory growth).
        locked(&self.model_locks).retain(|id, lock| self.registry.contains(*id) || Arc::strong_count(lock) > 1);
        locked(&self.full_objects).retain(|id, _| self.registry.contains(*id));
    }
}

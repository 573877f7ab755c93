//! A model in the store is its last full object and the deltas of the online updates
//! since (see [`crate::store::delta`]). This module brings a model up to its newest
//! version (replaying deltas onto a full object, or onto an older version still in the
//! cache), learns of versions other replicas appended, and compacts: it writes a full
//! object of a newer version and deletes the deltas it covers.
//!
//! Replaying deltas is the appends that made them: the same rows through
//! [`FittedModel::append_all`], which grows the factor batch by batch as each append did
//! and solves for the coefficients once (they depend only on the last factor and all the
//! targets), and whose result does not depend on the thread count: a replayed model is
//! the appended one bit for bit.

use super::stored::{grown_sample, stored_model};
use super::{locked, Replica, ReplicaError};
use crate::estimator::FittedModel;
use crate::linalg::Parallelism;
use crate::registry::ModelEntry;
use crate::store::delta::{Delta, ListedDelta};
use crate::store::ModelSummary;
use futures_util::stream::{self, StreamExt};
use std::sync::Arc;
use std::time::Instant;
use uuid::Uuid;

/// Deltas read ahead of the one being replayed.
const READ_AHEAD: usize = 8;

/// Write ids of folded deltas a full object keeps (see [`ModelSummary::folded`]): an
/// appender needs its own only for the moments between its write and its check.
const FOLDED_KEPT: usize = 64;

/// A decoded version of a model and what describes it.
pub(super) struct Version {
    pub version: u64,
    pub fitted: Arc<FittedModel>,
    pub n_train: usize,
    pub summary: Arc<ModelSummary>,
    /// The plot sample at this version (None: not known).
    pub sample: Option<String>,
}

/// Why deltas could not be replayed.
pub(super) enum Replay {
    /// The delta of this version is gone: a compaction folded it into a newer full
    /// object meanwhile (read that instead).
    Gap(u64),
    Failed(ReplicaError),
}

impl From<ReplicaError> for Replay {
    fn from(e: ReplicaError) -> Replay {
        Replay::Failed(e)
    }
}

/// How a compaction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compaction {
    /// A full object of this version was written and the deltas it covers deleted.
    Compacted { version: u64, deltas: usize },
    /// Nothing to do, or another replica (or a delete) got there first.
    Raced,
}

impl Replica {
    /// Applies the deltas after `from` up to version `to`, in order: read a few at a
    /// time (each read is a round trip to the store), then replayed at once.
    pub(super) async fn replay(&self, id: Uuid, from: Version, to: u64) -> Result<Version, Replay> {
        let mut reads = stream::iter(from.version + 1..=to)
            .map(|v| async move { (v, self.store.load_delta(id, v).await) })
            .buffered(READ_AHEAD);
        let mut deltas = Vec::new();
        while let Some((v, read)) = reads.next().await {
            match read {
                Ok(Some(d)) => deltas.push(d),
                Ok(None) => return Err(Replay::Gap(v)),
                Err(e) => return Err(Replay::Failed(self.read_failure(id, e).await)),
            }
        }
        if deltas.is_empty() {
            return Ok(from);
        }
        let count = deltas.len() as u64;
        let busy = self.busy.now();
        let task = tokio::task::spawn_blocking(move || apply(from, deltas, busy));
        let version = match task.await {
            Ok(Ok(v)) => v,
            Ok(Err(detail)) => return Err(Replay::Failed(ReplicaError::Storage(format!("model {id}: {detail}")))),
            Err(_) => return Err(Replay::Failed(ReplicaError::Storage(format!("model {id}: a replay panicked")))),
        };
        self.metrics.deltas_replayed.inc_by(count);
        Ok(version)
    }

    /// Model `entry` at its version, or newer when the store holds a newer full object:
    /// from an older version in the cache plus deltas, else from the full object plus
    /// deltas. The version reached is cached and, when newer than `entry`, registered.
    pub(super) async fn bring_up(&self, entry: &ModelEntry) -> Result<Version, ReplicaError> {
        let (id, want) = (entry.id, entry.version());
        let summary = entry.summary().ok_or(ReplicaError::NotReady { id, status: entry.status() })?;
        if let Some((cached, fitted)) = self.registry.cache.newest(id).filter(|(v, _)| *v < want) {
            let from = Version {
                version: cached,
                fitted,
                // Not known for an older version; every replayed delta says its own.
                n_train: 0,
                summary: summary.clone(),
                sample: entry.sample().map(|s| s.to_string()),
            };
            match self.replay(id, from, want).await {
                Ok(v) => return Ok(v),
                Err(Replay::Gap(_)) => {}
                Err(Replay::Failed(e)) => return Err(e),
            }
        }
        // A compaction may fold and delete the deltas between this read of the full
        // object and the replay: then the newer full object is read.
        let mut missing = 0;
        for _ in 0..3 {
            let loaded = match self.store.load_model(id).await {
                Ok(Some(l)) => l,
                Ok(None) => return Err(ReplicaError::NotFound(id)),
                Err(e) => return Err(self.read_failure(id, e).await),
            };
            let summary = Arc::new(loaded.head.summary().map_err(ReplicaError::Storage)?);
            let from = Version {
                version: summary.version,
                fitted: Arc::new(loaded.fitted),
                n_train: loaded.head.n_train as usize,
                summary,
                sample: (!loaded.sample.is_empty()).then_some(loaded.sample),
            };
            if from.version >= want {
                return Ok(from);
            }
            match self.replay(id, from, want).await {
                Ok(v) => return Ok(v),
                Err(Replay::Gap(v)) => missing = v,
                Err(Replay::Failed(e)) => return Err(e),
            }
        }
        Err(ReplicaError::Storage(format!(
            "model {id}: the update to version {missing} is missing from the store (compacted away while it was read, \
             three times, or lost); retry"
        )))
    }

    /// Registers `v` (reached from `entry`) and caches its model: the registry's entry is
    /// replaced only by a newer version. Returns the entry of `v`.
    pub(super) fn keep_version(&self, entry: &ModelEntry, v: &Version) -> Arc<ModelEntry> {
        let id = entry.id;
        let current = self.registry.get(id);
        let registered = match &current {
            Some(c) if c.version() == v.version => c.clone(),
            _ => {
                let next = Arc::new(entry.next_version(v.n_train, v.summary.clone()));
                next.keep_stored_of(entry);
                if current.as_ref().is_some_and(|c| c.version() < v.version) {
                    self.registry.insert(next.clone());
                }
                next
            }
        };
        if let Some(sample) = &v.sample {
            registered.set_sample(sample.as_str().into());
        }
        // A model deleted meanwhile is served to this request but not kept.
        if current.is_some() {
            self.registry.cache.insert(id, v.version, v.fitted.clone());
        }
        registered
    }

    /// The newest version of model `id` the store holds, from its full object's head and
    /// the deltas after `known` (the entry known here, if any): registered here, and
    /// returned. Its decoded model is brought up on use ([`Replica::fitted`]).
    pub async fn newest_entry(
        &self,
        id: Uuid,
        known: Option<Arc<ModelEntry>>,
    ) -> Result<Arc<ModelEntry>, ReplicaError> {
        let head = match self.store.model_head(id).await {
            Ok(Some(h)) => h,
            Ok(None) => {
                self.registry.remove(id);
                return Err(ReplicaError::NotFound(id));
            }
            Err(e) => return Err(self.read_failure(id, e).await),
        };
        // A full object behind a delete marker is a write that landed after the delete:
        // the model stays deleted (the refresh takes the object back).
        match self.store.is_deleted(id).await {
            Ok(false) => {}
            Ok(true) => {
                self.registry.remove(id);
                return Err(ReplicaError::NotFound(id));
            }
            Err(e) => return Err(self.store_error(e)),
        }
        let base = head.summary().map_or(1, |s| s.version);
        let mut entry = match known {
            Some(k) if k.version() >= base => k,
            _ => Arc::new(ModelEntry::restored(&head).map_err(ReplicaError::Storage)?),
        };
        // The deltas after it, as a listing shows them: one round trip, then one read.
        let listed = match self.store.list_deltas().await {
            Ok(all) => all,
            Err(e) => return Err(self.store_error(e)),
        };
        entry = self.with_listed_deltas(entry, &listed).await?;
        if self.registry.get(id).is_none_or(|c| c.version() < entry.version()) {
            if self.is_tombstoned(id) {
                return Err(ReplicaError::NotFound(id));
            }
            self.registry.insert(entry.clone());
        }
        Ok(self.registry.get(id).unwrap_or(entry))
    }

    /// `entry` brought to the newest version the listed deltas of its model make (those
    /// that follow it without a gap): the newest one's head read, nothing replayed.
    pub(super) async fn with_listed_deltas(
        &self,
        entry: Arc<ModelEntry>,
        listed: &[ListedDelta],
    ) -> Result<Arc<ModelEntry>, ReplicaError> {
        let id = entry.id;
        let mut after: Vec<u64> =
            listed.iter().filter(|d| d.id == id && d.version > entry.version()).map(|d| d.version).collect();
        after.sort_unstable();
        let newest = after.iter().zip(entry.version() + 1..).take_while(|(v, want)| **v == *want).last();
        let Some((&v, _)) = newest else { return Ok(entry) };
        match self.store.load_delta(id, v).await {
            Ok(Some(d)) => Ok(Arc::new(self.entry_of_delta(&entry, &d)?)),
            // Folded into a newer full object meanwhile: the next refresh reads it.
            Ok(None) => Ok(entry),
            Err(e) => Err(self.read_failure(id, e).await),
        }
    }

    /// The entry of the version a delta makes, from an entry of an older version.
    pub(super) fn entry_of_delta(&self, older: &ModelEntry, d: &Delta) -> Result<ModelEntry, ReplicaError> {
        let summary: ModelSummary = serde_json::from_str(&d.head.summary)
            .map_err(|e| ReplicaError::Storage(format!("model {}: a delta's summary: {e}", older.id)))?;
        let next = older.next_version(d.head.n_train as usize, Arc::new(summary));
        next.keep_stored_of(older);
        Ok(next)
    }

    /// Compacts model `entry` in the background when its deltas since the full object
    /// (`base`, the full object's version as last read) reach the configured count or
    /// bytes. One compaction per model at a time here; appends and predictions go on.
    pub fn maybe_compact(self: &Arc<Self>, entry: Arc<ModelEntry>, fitted: Arc<FittedModel>, base: u64) {
        let Some(summary) = entry.summary() else { return };
        let due = summary.version.saturating_sub(base) >= self.settings.compact_deltas.max(1)
            || summary.delta_bytes >= self.settings.compact_bytes;
        if !due || !locked(&self.compacting).insert(entry.id) {
            return;
        }
        let replica = self.clone();
        tokio::spawn(async move {
            let id = entry.id;
            let started = Instant::now();
            let outcome = replica.compact(&entry, fitted).await;
            locked(&replica.compacting).remove(&id);
            let (label, ms) = (outcome_label(&outcome), started.elapsed().as_secs_f64() * 1e3);
            replica.metrics.compactions.get_or_create(&crate::metrics::OutcomeLabels { outcome: label.into() }).inc();
            match outcome {
                Ok(c) => tracing::info!(model_id = %id, outcome = ?c, duration_ms = ms, "deltas compacted"),
                Err(e) => tracing::warn!(model_id = %id, error = %e, duration_ms = ms, "compaction failed"),
            }
        });
    }

    /// Writes a full object of `entry`'s version over the stored one, if that is still
    /// older (a conditional write: a concurrent delete or compaction wins), then deletes
    /// the deltas it covers.
    pub async fn compact(
        self: &Arc<Self>,
        entry: &ModelEntry,
        fitted: Arc<FittedModel>,
    ) -> Result<Compaction, ReplicaError> {
        let id = entry.id;
        let summary = entry.summary().ok_or(ReplicaError::NotReady { id, status: entry.status() })?;
        let version = summary.version;
        // The tag first, then the head: the head is then of that version or a newer one,
        // so a full object found older than `version` is replaced only if still the one
        // the tag names.
        let Some(tag) = self.store.model_tag(id).await.map_err(|e| self.store_error(e))? else {
            return Ok(Compaction::Raced);
        };
        let Some(head) = self.store.model_head(id).await.map_err(|e| self.store_error(e))? else {
            return Ok(Compaction::Raced);
        };
        let stored = head.summary().map_err(ReplicaError::Storage)?;
        if stored.version >= version {
            return Ok(Compaction::Raced);
        }
        let mut folded = stored.folded.clone();
        let mut reads = stream::iter(stored.version + 1..=version)
            .map(|v| async move { (v, self.store.load_delta(id, v).await) })
            .buffered(READ_AHEAD);
        while let Some((v, read)) = reads.next().await {
            match read.map_err(|e| self.store_error(e))? {
                Some(d) => folded.push((v, d.head.write_id)),
                // Deleted: another compaction covered it and replaced the full object.
                None => return Ok(Compaction::Raced),
            }
        }
        let keep_from = folded.len().saturating_sub(FOLDED_KEPT);
        let summary = ModelSummary { folded: folded.split_off(keep_from), delta_bytes: 0, ..summary.as_ref().clone() };
        let (model, head) = stored_model(entry, &fitted, &summary);
        let store_task = {
            let replica = self.clone();
            tokio::task::spawn_blocking(move || {
                replica.store.block_on(replica.store.replace_model(&model, &head, &tag))
            })
        };
        match store_task.await {
            Ok(Ok(size)) => {
                // Deleted meanwhile on a server whose conditional write is not atomic: the
                // write came back from the dead; take it back.
                if self.store.is_deleted(id).await.map_err(|e| self.store_error(e))? {
                    tracing::warn!(model_id = %id, "a compaction landed after a delete: removing it again");
                    self.store.delete_model(id).await.map_err(|e| self.store_error(e))?;
                    return Ok(Compaction::Raced);
                }
                if let Some(now) = self.registry.get(id).filter(|e| e.version() >= version) {
                    now.set_stored_bytes(size);
                    now.set_stored_modified(0);
                }
            }
            Ok(Err(e)) if e.is_conflict() => return Ok(Compaction::Raced),
            Ok(Err(e)) => return Err(self.store_error(e)),
            Err(_) => return Err(ReplicaError::Storage(format!("model {id}: the compaction's write panicked"))),
        }
        // Also any left by an earlier compaction that stopped before this step.
        let deltas = self.store.delete_deltas_of(id, Some(version)).await.map_err(|e| self.store_error(e))?;
        Ok(Compaction::Compacted { version, deltas })
    }
}

fn outcome_label(outcome: &Result<Compaction, ReplicaError>) -> &'static str {
    match outcome {
        Ok(Compaction::Compacted { .. }) => "compacted",
        Ok(Compaction::Raced) => "raced",
        Err(_) => "failed",
    }
}

/// Deltas applied to `from`, in order (on a blocking thread).
fn apply(from: Version, deltas: Vec<Delta>, busy: usize) -> Result<Version, String> {
    let last = deltas.last().expect("deltas to apply").head.clone();
    let mut sample = from.sample;
    let mut batches = Vec::with_capacity(deltas.len());
    for delta in deltas {
        let v = delta.head.version;
        let (new, noise, weights) = delta.rows.restore().map_err(|e| format!("delta {v}: {e}"))?;
        let n_before = (delta.head.n_train as usize)
            .checked_sub(new.x.n())
            .ok_or_else(|| format!("delta {v} says {} rows in all but brings {}", delta.head.n_train, new.x.n()))?;
        sample = sample.as_deref().and_then(|s| grown_sample(s, n_before, &new, v));
        batches.push((new, noise, weights));
    }
    let par = Parallelism::for_problem(last.n_train as usize, busy);
    let fitted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| from.fitted.append_all(&batches, par)))
        .map_err(|_| format!("replaying up to version {} panicked", last.version))?
        .map_err(|e| format!("replaying up to version {}: {e}", last.version))?;
    let summary: ModelSummary =
        serde_json::from_str(&last.summary).map_err(|e| format!("delta {}: summary: {e}", last.version))?;
    Ok(Version {
        version: last.version,
        fitted: Arc::new(fitted),
        n_train: last.n_train as usize,
        summary: Arc::new(summary),
        sample,
    })
}

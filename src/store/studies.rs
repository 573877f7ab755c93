//! Studies in the store: every object is written once and never changed, so that any
//! number of replicas can share a study with create-only writes as their only lock.
//!
//! - `studies/ID.study`: the definition (name, space, direction, seed, initial), JSON;
//! - `studies/ID/SEQ.trial`: trial SEQ (its values, whether the study suggested it),
//!   created with `put_new`: of two replicas handing out SEQ, exactly one lands and the
//!   other takes the next number;
//! - `studies/ID/SEQ.told`: what was told of trial SEQ (values, failed or pruned), also
//!   create-only: a second tell finds it there (409);
//! - `studies/ID/SEQ.STEP.report`: trial SEQ's intermediate value at STEP, create-only (a
//!   second report of a step keeps the first, as Optuna does).
//!
//! Deleting a study removes its definition first, so that every replica answers 404 from
//! then on, then its trials.

use super::blobs::BlobError;
use super::{Store, StoreError, SMALL_CALL};
use bytes::Bytes;
use uuid::Uuid;

pub fn study_key(id: Uuid) -> String {
    format!("studies/{id}.study")
}

fn trials_dir(id: Uuid) -> String {
    format!("studies/{id}")
}

/// SEQ's key with `ext` (`trial` or `told`); zero-padded so that listings sort.
fn trial_key(id: Uuid, seq: u64, ext: &str) -> String {
    format!("studies/{id}/{seq:010}.{ext}")
}

fn report_key(id: Uuid, seq: u64, step: u64) -> String {
    format!("studies/{id}/{seq:010}.{step:010}.report")
}

/// What a study's directory holds: trial numbers with a trial object, those told, and
/// the (trial, step) pairs reported.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Listing {
    pub trials: Vec<u64>,
    pub told: Vec<u64>,
    pub reports: Vec<(u64, u64)>,
}

impl Store {
    /// Stores a new study's definition (create-only).
    pub async fn create_study(&self, id: Uuid, definition: Bytes) -> Result<(), StoreError> {
        let key = study_key(id);
        Ok(self.call("put", &key, SMALL_CALL, self.blobs.put_new(&key, definition)).await?)
    }

    /// A study's definition; None when there is none (never created, or deleted).
    pub async fn study(&self, id: Uuid) -> Result<Option<Bytes>, StoreError> {
        let key = study_key(id);
        match self.call("get", &key, SMALL_CALL, self.blobs.get(&key)).await {
            Ok(b) => Ok(Some(b)),
            Err(BlobError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The ids of every stored study.
    pub async fn list_studies(&self) -> Result<Vec<Uuid>, StoreError> {
        let listed = self.call("list", "studies", SMALL_CALL, self.blobs.list("studies")).await?;
        Ok(listed
            .iter()
            .filter_map(|o| o.key.rsplit('/').next()?.strip_suffix(".study").and_then(|s| Uuid::parse_str(s).ok()))
            .collect())
    }

    /// The trials and tells a study's directory holds now.
    pub async fn study_listing(&self, id: Uuid) -> Result<Listing, StoreError> {
        let dir = trials_dir(id);
        let listed = self.call("list", &dir, SMALL_CALL, self.blobs.list(&dir)).await?;
        let mut out = Listing::default();
        for o in listed {
            let Some(name) = o.key.rsplit('/').next() else { continue };
            let Some((seq, ext)) = name.split_once('.') else { continue };
            let Ok(seq) = seq.parse::<u64>() else { continue };
            match ext {
                "trial" => out.trials.push(seq),
                "told" => out.told.push(seq),
                _ => {
                    if let Some(step) = ext.strip_suffix(".report").and_then(|s| s.parse::<u64>().ok()) {
                        out.reports.push((seq, step));
                    }
                }
            }
        }
        out.trials.sort_unstable();
        out.told.sort_unstable();
        out.reports.sort_unstable();
        Ok(out)
    }

    /// Writes trial `seq` unless one is there: `Ok(false)` when another writer had it.
    pub async fn create_trial(&self, id: Uuid, seq: u64, trial: Bytes) -> Result<bool, StoreError> {
        self.create_once(trial_key(id, seq, "trial"), trial).await
    }

    /// Records what was told of trial `seq` unless something was: `Ok(false)` then.
    pub async fn tell_trial(&self, id: Uuid, seq: u64, told: Bytes) -> Result<bool, StoreError> {
        self.create_once(trial_key(id, seq, "told"), told).await
    }

    /// Records trial `seq`'s value at `step` unless one is there: `Ok(false)` then.
    pub async fn report_trial(&self, id: Uuid, seq: u64, step: u64, report: Bytes) -> Result<bool, StoreError> {
        self.create_once(report_key(id, seq, step), report).await
    }

    /// Trial `seq`'s report at `step`, None when absent.
    pub async fn report_object(&self, id: Uuid, seq: u64, step: u64) -> Result<Option<Bytes>, StoreError> {
        let key = report_key(id, seq, step);
        match self.call("get", &key, SMALL_CALL, self.blobs.get(&key)).await {
            Ok(b) => Ok(Some(b)),
            Err(BlobError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Writes `key` unless an object is there: `Ok(false)` when another writer had it
    /// (the create-only write studies and aliases order their objects by).
    pub(super) async fn create_once(&self, key: String, bytes: Bytes) -> Result<bool, StoreError> {
        match self.call("put", &key, SMALL_CALL, self.blobs.put_new(&key, bytes)).await {
            Ok(()) => Ok(true),
            Err(BlobError::Conflict { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Trial `seq`'s object (`told`: its tell), None when absent.
    pub async fn trial_object(&self, id: Uuid, seq: u64, told: bool) -> Result<Option<Bytes>, StoreError> {
        let key = trial_key(id, seq, if told { "told" } else { "trial" });
        match self.call("get", &key, SMALL_CALL, self.blobs.get(&key)).await {
            Ok(b) => Ok(Some(b)),
            Err(BlobError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Removes a study: its definition first (every replica then answers 404), then its
    /// trials and tells.
    pub async fn delete_study(&self, id: Uuid) -> Result<(), StoreError> {
        let key = study_key(id);
        match self.call("delete", &key, SMALL_CALL, self.blobs.delete(&key)).await {
            Ok(()) | Err(BlobError::NotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        let listing = self.study_listing(id).await?;
        let keys = listing
            .trials
            .iter()
            .map(|&s| trial_key(id, s, "trial"))
            .chain(listing.told.iter().map(|&s| trial_key(id, s, "told")))
            .chain(listing.reports.iter().map(|&(s, step)| report_key(id, s, step)));
        for key in keys {
            match self.call("delete", &key, SMALL_CALL, self.blobs.delete(&key)).await {
                Ok(()) | Err(BlobError::NotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}

//! Studies: Bayesian optimisation of a function the client evaluates, served.
//!
//! A study lives in the store as objects written once (`store/studies.rs`), so that any
//! replica answers for any study and two never hand out one trial id: a trial is created
//! with a create-only write, and a replica that loses the race reads the study again and
//! picks again. Each replica keeps what it has read of a study (objects never change)
//! and the study's surrogate between suggestions (`crate::study`); a request reads only
//! the objects it has not seen. Suggestions are computed on blocking threads.

use super::{Service, ServiceError};
use crate::spec::{FieldError, ObjectReader};
use crate::study::definition::{finite, tell_from_stored, tell_json};
pub use crate::study::definition::{pruner_json, read_tell, Constraint, Definition, Objective, Told};
use crate::study::pareto;
use crate::study::pruner::{self, Other};
use crate::study::{self, State, StudyModel, StudySpace, Trial};
use bytes::Bytes;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;
use uuid::Uuid;

/// Trials one suggest request may ask for.
pub const MAX_SUGGEST: u64 = 64;
/// Times a suggestion is picked again after another replica took its trial id.
const RACES: usize = 32;

/// One trial as a replica knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct TrialRecord {
    pub id: u64,
    pub values: Vec<Value>,
    pub suggested: bool,
    pub created_at: String,
    /// What was told, once told.
    pub told: Option<Told>,
    /// Intermediate values by step.
    pub reports: BTreeMap<u64, f64>,
}

impl TrialRecord {
    /// The told results (objectives, then constraints) of a complete trial.
    pub fn results(&self) -> Option<&[f64]> {
        match &self.told {
            Some(Told::Complete(r)) => Some(r),
            _ => None,
        }
    }

    /// The state as the API names it.
    pub fn state(&self) -> &'static str {
        match self.told {
            None => "pending",
            Some(Told::Complete(_)) => "complete",
            Some(Told::Failed) => "failed",
            Some(Told::Pruned) => "pruned",
        }
    }

    /// The last reported value.
    pub fn last_report(&self) -> Option<f64> {
        self.reports.values().next_back().copied()
    }
}

/// A study as answered: its definition and trials, in id order, and (several objectives)
/// its front, computed on a blocking thread ([`StudyView::summarised`]).
#[derive(Debug, Clone)]
pub struct StudyView {
    pub definition: Definition,
    pub trials: Vec<TrialRecord>,
    pub front: Option<Front>,
}

/// A study's Pareto front (its trials' ids) and the hypervolume it dominates.
#[derive(Debug, Clone)]
pub struct Front {
    pub ids: Vec<u64>,
    pub hypervolume: f64,
    /// In the objectives' order and units.
    pub reference: Option<Vec<f64>>,
    pub derived: bool,
}

impl StudyView {
    /// Whether a complete trial meets the study's constraints.
    pub fn feasible(&self, t: &TrialRecord) -> bool {
        t.results().is_some_and(|r| self.definition.feasible(r))
    }

    /// The complete feasible trials with their objectives oriented "greater is better".
    fn candidates(&self) -> Vec<(&TrialRecord, Vec<f64>)> {
        let d = &self.definition;
        let m = d.objectives.len();
        self.trials
            .iter()
            .filter(|t| self.feasible(t))
            .map(|t| (t, d.oriented(&t.results().expect("complete")[..m])))
            .collect()
    }

    /// The feasible complete trial with the best value (ties to the earlier); None with
    /// several objectives.
    pub fn best(&self) -> Option<&TrialRecord> {
        if self.definition.multi() {
            return None;
        }
        let best =
            self.candidates().into_iter().fold(None, |best: Option<(&TrialRecord, Vec<f64>)>, (t, v)| match best {
                Some(b) if b.1[0] >= v[0] => Some(b),
                _ => Some((t, v)),
            });
        best.map(|b| b.0)
    }

    /// The non-dominated feasible complete trials and their hypervolume (several
    /// objectives only), against the given reference point or one derived from the
    /// trials (their worst values pushed out by a tenth of each range).
    fn compute_front(&self) -> Option<Front> {
        let d = &self.definition;
        if !d.multi() {
            return None;
        }
        let candidates = self.candidates();
        let points: Vec<Vec<f64>> = candidates.iter().map(|c| c.1.clone()).collect();
        let ids = pareto::front(&points).into_iter().map(|i| candidates[i].0.id).collect();
        let (reference, derived) = match &d.reference {
            Some(r) => (Some(r.clone()), false),
            None if points.is_empty() => (None, true),
            None => (Some(d.oriented(&pareto::derived_reference(&points, d.objectives.len()))), true),
        };
        let hypervolume = reference.as_ref().map_or(0.0, |r| pareto::hypervolume(&points, &d.oriented(r)));
        Some(Front { ids, hypervolume, reference, derived })
    }

    /// The view with its front computed (several objectives; O(n f) and more: call it on
    /// a blocking thread).
    pub fn summarised(mut self) -> StudyView {
        self.front = self.compute_front();
        self
    }

    /// A trial by id.
    pub fn trial(&self, id: u64) -> Option<&TrialRecord> {
        self.trials.binary_search_by_key(&id, |t| t.id).ok().map(|i| &self.trials[i])
    }
}

/// What a replica keeps of a study.
#[derive(Debug)]
pub struct Cached {
    definition: Definition,
    trials: BTreeMap<u64, TrialRecord>,
    model: StudyModel,
}

impl Cached {
    fn next_id(&self) -> u64 {
        self.trials.keys().next_back().map_or(0, |k| k + 1)
    }

    fn view(&self) -> StudyView {
        StudyView { definition: self.definition.clone(), trials: self.trials.values().cloned().collect(), front: None }
    }

    fn trials_for_model(&self) -> Vec<Trial> {
        self.trials
            .values()
            .map(|t| Trial {
                values: t.values.clone(),
                suggested: t.suggested,
                state: match &t.told {
                    None => State::Pending,
                    Some(Told::Failed) => State::Failed,
                    Some(Told::Complete(r)) => State::Complete(self.definition.oriented(r)),
                    Some(Told::Pruned) => State::Pruned(t.last_report().map(|v| self.definition.oriented(&[v])[0])),
                },
            })
            .collect()
    }
}

fn trial_bytes(t: &TrialRecord, space: &StudySpace) -> Bytes {
    Bytes::from(
        json!({"id": t.id, "values": space.named(&t.values), "suggested": t.suggested, "created_at": t.created_at})
            .to_string(),
    )
}

impl Service {
    /// Creates a study from a body.
    pub async fn create_study(&self, body: &Value) -> Result<StudyView, ServiceError> {
        let definition = Definition::from_json(Uuid::new_v4(), body, super::now())?;
        let bytes = Bytes::from(definition.to_json().to_string());
        self.replica
            .store
            .create_study(definition.id, bytes)
            .await
            .map_err(|e| self.store_failure("storing the study", e))?;
        self.metrics.studies_created.inc();
        let cached = Cached { definition, trials: BTreeMap::new(), model: StudyModel::default() };
        // No trials yet: the front is empty, cheap to compute here.
        let view = cached.view().summarised();
        self.studies.lock().expect("studies").insert(view.definition.id, Arc::new(tokio::sync::Mutex::new(cached)));
        Ok(view)
    }

    /// Every stored study.
    pub async fn list_studies(&self) -> Result<Vec<StudyView>, ServiceError> {
        let ids = self.replica.store.list_studies().await.map_err(|e| self.store_error(e))?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            match self.study(id).await {
                Ok(v) => out.push(v),
                Err(ServiceError::StudyNotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        out.sort_by(|a, b| a.definition.created_at.cmp(&b.definition.created_at));
        Ok(out)
    }

    /// One study, read afresh.
    pub async fn study(&self, id: Uuid) -> Result<StudyView, ServiceError> {
        let cached = self.fresh_study(id).await?;
        let view = cached.lock().await.view();
        if !view.definition.multi() {
            return Ok(view);
        }
        tokio::task::spawn_blocking(move || view.summarised())
            .await
            .map_err(|_| ServiceError::Storage("the study's front was interrupted".into()))
    }

    pub async fn delete_study(&self, id: Uuid) -> Result<(), ServiceError> {
        if self.replica.store.study(id).await.map_err(|e| self.store_error(e))?.is_none() {
            self.studies.lock().expect("studies").remove(&id);
            return Err(ServiceError::StudyNotFound(id));
        }
        self.replica.store.delete_study(id).await.map_err(|e| self.store_failure("deleting the study", e))?;
        self.studies.lock().expect("studies").remove(&id);
        Ok(())
    }

    /// `count` new trials, pending, each where the study's model says to look next; with
    /// the study's space, which names their values.
    pub async fn suggest(&self, id: Uuid, count: u64) -> Result<(Definition, Vec<TrialRecord>), ServiceError> {
        if !(1..=MAX_SUGGEST).contains(&count) {
            return Err(FieldError::invalid("/count", format!("must be from 1 to {MAX_SUGGEST}; got {count}")).into());
        }
        let started = Instant::now();
        let cached = self.fresh_study(id).await?;
        let mut guard = cached.lock().await;
        let limit = self.config.max_study_trials;
        if guard.trials.len() as u64 + count > limit {
            return Err(FieldError::invalid(
                "/count",
                format!(
                    "the study holds {} trials; {count} more exceed MERCER_MAX_STUDY_TRIALS ({limit})",
                    guard.trials.len()
                ),
            )
            .into());
        }
        let mut out = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let mut races = 0;
            loop {
                let (space, seed, initial, goal) = (
                    guard.definition.space.clone(),
                    guard.definition.seed,
                    guard.definition.initial,
                    guard.definition.goal(),
                );
                let trials = guard.trials_for_model();
                let mut model = std::mem::take(&mut guard.model);
                let (next, model) = tokio::task::spawn_blocking(move || {
                    let next = study::suggest(&space, seed, initial, &goal, &trials, &mut model);
                    (next, model)
                })
                .await
                .map_err(|_| ServiceError::Storage("the suggestion was interrupted".into()))?;
                guard.model = model;
                let Some(next) = next else {
                    return Err(FieldError::invalid("/count", "every setting of this study's space has a trial").into());
                };
                let trial = TrialRecord {
                    id: guard.next_id(),
                    values: next.values,
                    suggested: true,
                    created_at: super::now(),
                    told: None,
                    reports: BTreeMap::new(),
                };
                let bytes = trial_bytes(&trial, &guard.definition.space);
                if self.replica.store.create_trial(id, trial.id, bytes).await.map_err(|e| self.store_error(e))? {
                    guard.trials.insert(trial.id, trial.clone());
                    out.push(trial);
                    break;
                }
                // Another replica took this id: read what it wrote, and pick again.
                races += 1;
                if races >= RACES {
                    return Err(ServiceError::Contended {
                        detail: format!("other replicas kept taking this study's trial ids ({races} tries)"),
                    });
                }
                self.refresh(id, &mut guard).await?;
            }
        }
        self.metrics.study_suggestions.inc_by(out.len() as u64);
        self.metrics.study_suggest_seconds.observe(started.elapsed().as_secs_f64());
        Ok((guard.definition.clone(), out))
    }

    /// Tells trial `trial`'s outcome (results, failed or pruned); with the study's space.
    pub async fn tell(&self, id: Uuid, trial: u64, body: &Value) -> Result<(Definition, TrialRecord), ServiceError> {
        let cached = self.fresh_study(id).await?;
        let mut guard = cached.lock().await;
        let told = read_tell(&guard.definition, body)?;
        let Some(record) = guard.trials.get(&trial).cloned() else {
            return Err(ServiceError::TrialNotFound { study: id, trial });
        };
        if record.told.is_some() {
            return Err(ServiceError::AlreadyTold { trial });
        }
        let bytes = Bytes::from(tell_json(&guard.definition, &told, super::now()).to_string());
        if !self.replica.store.tell_trial(id, trial, bytes).await.map_err(|e| self.store_error(e))? {
            self.refresh(id, &mut guard).await?;
            return Err(ServiceError::AlreadyTold { trial });
        }
        let _ = match told {
            Told::Pruned => self.metrics.study_pruned.inc(),
            _ => self.metrics.study_tells.inc(),
        };
        let record = TrialRecord { told: Some(told), ..record };
        guard.trials.insert(trial, record.clone());
        Ok((guard.definition.clone(), record))
    }

    /// Records trial `trial`'s intermediate value at a step (`{"step", "value"}`) and
    /// answers whether the study's pruner would stop it now. A step reported before keeps
    /// its first value (as Optuna); the decision is made again.
    pub async fn report(&self, id: Uuid, trial: u64, body: &Value) -> Result<(u64, bool), ServiceError> {
        let mut obj = ObjectReader::new(body, "")?;
        let step = obj.u64("step")?.ok_or_else(|| FieldError::shape("/step", "missing field `step`"))?;
        let value = obj.take("value").ok_or_else(|| FieldError::shape("/value", "missing field `value`"))?;
        let value = finite(value, "/value")?;
        obj.finish()?;
        let cached = self.fresh_study(id).await?;
        let mut guard = cached.lock().await;
        if guard.definition.multi() {
            return Err(FieldError::invalid("/step", "a study with several objectives takes no reports").into());
        }
        let Some(record) = guard.trials.get(&trial) else {
            return Err(ServiceError::TrialNotFound { study: id, trial });
        };
        if record.told.is_some() {
            return Err(ServiceError::AlreadyTold { trial });
        }
        if !record.reports.contains_key(&step) {
            let bytes = Bytes::from(json!({"step": step, "value": value, "reported_at": super::now()}).to_string());
            if self.replica.store.report_trial(id, trial, step, bytes).await.map_err(|e| self.store_error(e))? {
                guard.trials.get_mut(&trial).expect("held").reports.insert(step, value);
            } else {
                self.refresh(id, &mut guard).await?;
            }
        }
        self.metrics.study_reports.inc();
        let this = &guard.trials[&trial];
        let others: Vec<Other<'_>> = guard
            .trials
            .values()
            .filter(|t| t.id != trial)
            .map(|t| Other { reports: &t.reports, complete: matches!(t.told, Some(Told::Complete(_))) })
            .collect();
        // The decision at the step reported: later reports (another worker's retry) are
        // not counted.
        let upto: BTreeMap<u64, f64> = this.reports.range(..=step).map(|(k, v)| (*k, *v)).collect();
        let prune = pruner::should_prune(&guard.definition.pruner, &upto, &others, guard.definition.maximize());
        if prune {
            self.metrics.study_prune_advice.inc();
        }
        Ok((step, prune))
    }

    /// Records an evaluation the study did not suggest (a warm start), complete:
    /// `{"values": setting, "value"}` and/or `"results"`; with the study's space.
    pub async fn record_trial(&self, id: Uuid, body: &Value) -> Result<(Definition, TrialRecord), ServiceError> {
        let mut obj = ObjectReader::new(body, "")?;
        let values =
            obj.take("values").cloned().ok_or_else(|| FieldError::shape("/values", "missing field `values`"))?;
        let value = obj.take("value").cloned();
        let results = obj.take("results").cloned();
        obj.finish()?;
        let cached = self.fresh_study(id).await?;
        let mut guard = cached.lock().await;
        let results = guard.definition.read_results(value.as_ref(), results.as_ref(), "/results")?;
        let values = guard.definition.space.values_of(&values)?;
        if guard.trials.len() as u64 >= self.config.max_study_trials {
            return Err(FieldError::invalid("/values", "the study holds MERCER_MAX_STUDY_TRIALS trials").into());
        }
        for _ in 0..RACES {
            let trial = TrialRecord {
                id: guard.next_id(),
                values: values.clone(),
                suggested: false,
                created_at: super::now(),
                told: None,
                reports: BTreeMap::new(),
            };
            let bytes = trial_bytes(&trial, &guard.definition.space);
            if self.replica.store.create_trial(id, trial.id, bytes).await.map_err(|e| self.store_error(e))? {
                let told = Told::Complete(results.clone());
                let bytes = Bytes::from(tell_json(&guard.definition, &told, super::now()).to_string());
                self.replica.store.tell_trial(id, trial.id, bytes).await.map_err(|e| self.store_error(e))?;
                let record = TrialRecord { told: Some(told), ..trial };
                guard.trials.insert(record.id, record.clone());
                self.metrics.study_tells.inc();
                return Ok((guard.definition.clone(), record));
            }
            self.refresh(id, &mut guard).await?;
        }
        Err(ServiceError::Contended { detail: "other replicas kept taking this study's trial ids".into() })
    }

    /// The replica's copy of a study, brought up to date with the store (404 when the
    /// study is gone).
    async fn fresh_study(&self, id: Uuid) -> Result<Arc<tokio::sync::Mutex<Cached>>, ServiceError> {
        let known = self.studies.lock().expect("studies").get(&id).cloned();
        let cached = match known {
            Some(c) => c,
            None => {
                let bytes = self.replica.store.study(id).await.map_err(|e| self.store_error(e))?;
                let Some(bytes) = bytes else { return Err(ServiceError::StudyNotFound(id)) };
                let definition = Definition::from_stored(&bytes)
                    .map_err(|e| ServiceError::Storage(format!("study {id} is damaged in the store: {e}")))?;
                let cached = Arc::new(tokio::sync::Mutex::new(Cached {
                    definition,
                    trials: BTreeMap::new(),
                    model: StudyModel::default(),
                }));
                self.studies.lock().expect("studies").entry(id).or_insert(cached).clone()
            }
        };
        {
            let mut guard = cached.lock().await;
            self.refresh(id, &mut guard).await?;
        }
        Ok(cached)
    }

    /// Reads the trials and tells of study `id` this replica has not seen; 404 when its
    /// definition is gone (deleted through another replica).
    async fn refresh(&self, id: Uuid, cached: &mut Cached) -> Result<(), ServiceError> {
        if self.replica.store.study(id).await.map_err(|e| self.store_error(e))?.is_none() {
            self.studies.lock().expect("studies").remove(&id);
            return Err(ServiceError::StudyNotFound(id));
        }
        let listing = self.replica.store.study_listing(id).await.map_err(|e| self.store_error(e))?;
        let unseen: Vec<u64> = listing.trials.iter().copied().filter(|s| !cached.trials.contains_key(s)).collect();
        for seq in unseen {
            let Some(bytes) = self.replica.store.trial_object(id, seq, false).await.map_err(|e| self.store_error(e))?
            else {
                continue;
            };
            let v: Value = serde_json::from_slice(&bytes).unwrap_or_default();
            let Ok(values) = cached.definition.space.values_of(&v["values"]) else { continue };
            let record = TrialRecord {
                id: seq,
                values,
                suggested: v["suggested"].as_bool().unwrap_or(true),
                created_at: v["created_at"].as_str().unwrap_or_default().to_string(),
                told: None,
                reports: BTreeMap::new(),
            };
            cached.trials.insert(seq, record);
        }
        for seq in listing.told {
            let Some(record) = cached.trials.get(&seq) else { continue };
            if record.told.is_some() {
                continue;
            }
            let Some(bytes) = self.replica.store.trial_object(id, seq, true).await.map_err(|e| self.store_error(e))?
            else {
                continue;
            };
            let v: Value = serde_json::from_slice(&bytes).unwrap_or_default();
            let told = tell_from_stored(&cached.definition, &v);
            if let (Some(told), Some(r)) = (told, cached.trials.get_mut(&seq)) {
                r.told = Some(told);
            }
        }
        for (seq, step) in listing.reports {
            if cached.trials.get(&seq).is_none_or(|r| r.reports.contains_key(&step)) {
                continue;
            }
            let Some(bytes) = self.replica.store.report_object(id, seq, step).await.map_err(|e| self.store_error(e))?
            else {
                continue;
            };
            let v: Value = serde_json::from_slice(&bytes).unwrap_or_default();
            if let (Some(value), Some(r)) = (v["value"].as_f64(), cached.trials.get_mut(&seq)) {
                r.reports.insert(step, value);
            }
        }
        Ok(())
    }
}

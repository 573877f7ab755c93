//! Studies: Bayesian optimisation of a function the client evaluates, served.
//!
//! A study lives in the store as objects written once (`store/studies.rs`), so that any
//! replica answers for any study and two never hand out one trial id: a trial is created
//! with a create-only write, and a replica that loses the race reads the study again and
//! picks again. Each replica keeps what it has read of a study (objects never change)
//! and the study's surrogate between suggestions (`selection::bayes::study`); a request
//! reads only the objects it has not seen. Suggestions are computed on blocking threads.

use super::{Service, ServiceError};
use crate::selection::bayes::study::{self, Model, State, StudySpace, Trial};
use crate::spec::{FieldError, ObjectReader};
use bytes::Bytes;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Instant, SystemTime};
use uuid::Uuid;

/// Trials one suggest request may ask for.
pub const MAX_SUGGEST: u64 = 64;
/// Times a suggestion is picked again after another replica took its trial id.
const RACES: usize = 32;

/// A study's definition, as created.
#[derive(Debug, Clone)]
pub struct Definition {
    pub id: Uuid,
    pub name: Option<String>,
    /// The space as the client wrote it.
    pub space_json: Value,
    pub space: StudySpace,
    pub maximize: bool,
    pub seed: u64,
    pub initial: u64,
    pub created_at: String,
}

impl Definition {
    /// Reads a create body; errors point into it.
    pub fn from_json(id: Uuid, body: &Value) -> Result<Definition, FieldError> {
        let mut obj = ObjectReader::new(body, "")?;
        let name = obj.str("name")?.map(str::to_owned);
        let space_json =
            obj.take("space").cloned().ok_or_else(|| FieldError::shape("/space", "missing field `space`"))?;
        let space = StudySpace::from_json(&space_json)?;
        let maximize = match obj.str("direction")? {
            None | Some("minimize") => false,
            Some("maximize") => true,
            Some(other) => {
                return Err(FieldError::invalid(
                    "/direction",
                    format!("`{other}` is neither \"minimize\" nor \"maximize\""),
                ))
            }
        };
        let seed = obj.u64("seed")?.unwrap_or(0);
        let initial = obj.u64("initial")?.unwrap_or((2 * space.names.len() as u64).max(5));
        if initial == 0 {
            return Err(FieldError::invalid("/initial", "must be at least 1"));
        }
        obj.finish()?;
        let created_at = humantime::format_rfc3339_millis(SystemTime::now()).to_string();
        Ok(Definition { id, name, space_json, space, maximize, seed, initial, created_at })
    }

    fn to_json(&self) -> Value {
        json!({
            "id": self.id, "name": self.name, "space": self.space_json,
            "direction": if self.maximize { "maximize" } else { "minimize" },
            "seed": self.seed, "initial": self.initial, "created_at": self.created_at,
        })
    }

    fn from_stored(bytes: &[u8]) -> Result<Definition, String> {
        let v: Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        let id = v["id"].as_str().and_then(|s| Uuid::parse_str(s).ok()).ok_or("no id")?;
        let mut d = Definition::from_json(id, &json!({
            "name": v["name"], "space": v["space"], "direction": v["direction"], "seed": v["seed"], "initial": v["initial"],
        }))
        .map_err(|e| e.to_string())?;
        d.created_at = v["created_at"].as_str().unwrap_or_default().to_string();
        Ok(d)
    }

    /// A value as the model sees it: greater is better.
    fn modelled(&self, value: f64) -> f64 {
        if self.maximize {
            value
        } else {
            -value
        }
    }
}

/// One trial as a replica knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct TrialRecord {
    pub id: u64,
    pub values: Vec<Value>,
    pub suggested: bool,
    pub created_at: String,
    /// The told value (None: failed), once told.
    pub told: Option<Option<f64>>,
}

/// A study as answered: its definition and trials, in id order.
#[derive(Debug, Clone)]
pub struct StudyView {
    pub definition: Definition,
    pub trials: Vec<TrialRecord>,
}

impl StudyView {
    /// The complete trial with the best value (ties to the earlier).
    pub fn best(&self) -> Option<&TrialRecord> {
        let d = &self.definition;
        self.trials.iter().filter(|t| matches!(t.told, Some(Some(_)))).fold(None, |best: Option<&TrialRecord>, t| {
            let v = d.modelled(t.told.flatten().expect("complete"));
            match best {
                Some(b) if d.modelled(b.told.flatten().expect("complete")) >= v => Some(b),
                _ => Some(t),
            }
        })
    }
}

/// What a replica keeps of a study.
#[derive(Debug)]
pub struct Cached {
    definition: Definition,
    trials: BTreeMap<u64, TrialRecord>,
    model: Model,
}

impl Cached {
    fn next_id(&self) -> u64 {
        self.trials.keys().next_back().map_or(0, |k| k + 1)
    }

    fn view(&self) -> StudyView {
        StudyView { definition: self.definition.clone(), trials: self.trials.values().cloned().collect() }
    }

    fn trials_for_model(&self) -> Vec<Trial> {
        self.trials
            .values()
            .map(|t| Trial {
                values: t.values.clone(),
                suggested: t.suggested,
                state: match t.told {
                    None => State::Pending,
                    Some(None) => State::Failed,
                    Some(Some(v)) => State::Complete(self.definition.modelled(v)),
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

fn now() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

impl Service {
    /// Creates a study from a body.
    pub async fn create_study(&self, body: &Value) -> Result<StudyView, ServiceError> {
        let definition = Definition::from_json(Uuid::new_v4(), body)?;
        let bytes = Bytes::from(definition.to_json().to_string());
        self.store.create_study(definition.id, bytes).await.map_err(|e| self.store_failure("storing the study", e))?;
        self.metrics.studies_created.inc();
        let cached = Cached { definition, trials: BTreeMap::new(), model: Model::default() };
        let view = cached.view();
        self.studies.lock().expect("studies").insert(view.definition.id, Arc::new(tokio::sync::Mutex::new(cached)));
        Ok(view)
    }

    /// Every stored study.
    pub async fn list_studies(&self) -> Result<Vec<StudyView>, ServiceError> {
        let ids = self.store.list_studies().await.map_err(|e| self.store_error(e))?;
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
        let guard = cached.lock().await;
        Ok(guard.view())
    }

    pub async fn delete_study(&self, id: Uuid) -> Result<(), ServiceError> {
        if self.store.study(id).await.map_err(|e| self.store_error(e))?.is_none() {
            self.studies.lock().expect("studies").remove(&id);
            return Err(ServiceError::StudyNotFound(id));
        }
        self.store.delete_study(id).await.map_err(|e| self.store_failure("deleting the study", e))?;
        self.studies.lock().expect("studies").remove(&id);
        Ok(())
    }

    /// `count` new trials, pending, each where the study's model says to look next; with
    /// the study's space, which names their values.
    pub async fn suggest(&self, id: Uuid, count: u64) -> Result<(StudySpace, Vec<TrialRecord>), ServiceError> {
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
                let (space, seed, initial) =
                    (guard.definition.space.clone(), guard.definition.seed, guard.definition.initial);
                let trials = guard.trials_for_model();
                let mut model = std::mem::take(&mut guard.model);
                let (next, model) = tokio::task::spawn_blocking(move || {
                    let next = study::suggest(&space, seed, initial, &trials, &mut model);
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
                    created_at: now(),
                    told: None,
                };
                let bytes = trial_bytes(&trial, &guard.definition.space);
                if self.store.create_trial(id, trial.id, bytes).await.map_err(|e| self.store_error(e))? {
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
        Ok((guard.definition.space.clone(), out))
    }

    /// Tells trial `trial`'s outcome: `{"value": number}` or `{"state": "failed"}`; with the
    /// study's space.
    pub async fn tell(&self, id: Uuid, trial: u64, body: &Value) -> Result<(StudySpace, TrialRecord), ServiceError> {
        let told = read_tell(body)?;
        let cached = self.fresh_study(id).await?;
        let mut guard = cached.lock().await;
        let Some(record) = guard.trials.get(&trial).cloned() else {
            return Err(ServiceError::TrialNotFound { study: id, trial });
        };
        if record.told.is_some() {
            return Err(ServiceError::AlreadyTold { trial });
        }
        let bytes = Bytes::from(tell_json(told).to_string());
        if !self.store.tell_trial(id, trial, bytes).await.map_err(|e| self.store_error(e))? {
            self.refresh(id, &mut guard).await?;
            return Err(ServiceError::AlreadyTold { trial });
        }
        let record = TrialRecord { told: Some(told), ..record };
        guard.trials.insert(trial, record.clone());
        self.metrics.study_tells.inc();
        Ok((guard.definition.space.clone(), record))
    }

    /// Records an evaluation the study did not suggest (a warm start), complete; with the
    /// study's space.
    pub async fn record_trial(&self, id: Uuid, body: &Value) -> Result<(StudySpace, TrialRecord), ServiceError> {
        let mut obj = ObjectReader::new(body, "")?;
        let values =
            obj.take("values").cloned().ok_or_else(|| FieldError::shape("/values", "missing field `values`"))?;
        let value = obj.take("value").cloned().ok_or_else(|| FieldError::shape("/value", "missing field `value`"))?;
        obj.finish()?;
        let value = finite(&value)?;
        let cached = self.fresh_study(id).await?;
        let mut guard = cached.lock().await;
        let values = guard.definition.space.values_of(&values)?;
        if guard.trials.len() as u64 >= self.config.max_study_trials {
            return Err(FieldError::invalid("/values", "the study holds MERCER_MAX_STUDY_TRIALS trials").into());
        }
        for _ in 0..RACES {
            let trial = TrialRecord {
                id: guard.next_id(),
                values: values.clone(),
                suggested: false,
                created_at: now(),
                told: None,
            };
            let bytes = trial_bytes(&trial, &guard.definition.space);
            if self.store.create_trial(id, trial.id, bytes).await.map_err(|e| self.store_error(e))? {
                let told = Bytes::from(tell_json(Some(value)).to_string());
                self.store.tell_trial(id, trial.id, told).await.map_err(|e| self.store_error(e))?;
                let record = TrialRecord { told: Some(Some(value)), ..trial };
                guard.trials.insert(record.id, record.clone());
                self.metrics.study_tells.inc();
                return Ok((guard.definition.space.clone(), record));
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
                let bytes = self.store.study(id).await.map_err(|e| self.store_error(e))?;
                let Some(bytes) = bytes else { return Err(ServiceError::StudyNotFound(id)) };
                let definition = Definition::from_stored(&bytes)
                    .map_err(|e| ServiceError::Storage(format!("study {id} is damaged in the store: {e}")))?;
                let cached = Arc::new(tokio::sync::Mutex::new(Cached {
                    definition,
                    trials: BTreeMap::new(),
                    model: Model::default(),
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
        if self.store.study(id).await.map_err(|e| self.store_error(e))?.is_none() {
            self.studies.lock().expect("studies").remove(&id);
            return Err(ServiceError::StudyNotFound(id));
        }
        let listing = self.store.study_listing(id).await.map_err(|e| self.store_error(e))?;
        let unseen: Vec<u64> = listing.trials.iter().copied().filter(|s| !cached.trials.contains_key(s)).collect();
        for seq in unseen {
            let Some(bytes) = self.store.trial_object(id, seq, false).await.map_err(|e| self.store_error(e))? else {
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
            };
            cached.trials.insert(seq, record);
        }
        for seq in listing.told {
            let Some(record) = cached.trials.get(&seq) else { continue };
            if record.told.is_some() {
                continue;
            }
            let Some(bytes) = self.store.trial_object(id, seq, true).await.map_err(|e| self.store_error(e))? else {
                continue;
            };
            let v: Value = serde_json::from_slice(&bytes).unwrap_or_default();
            let told = match v["state"].as_str() {
                Some("failed") => Some(None),
                _ => v["value"].as_f64().map(Some),
            };
            if let (Some(told), Some(r)) = (told, cached.trials.get_mut(&seq)) {
                r.told = Some(told);
            }
        }
        Ok(())
    }
}

/// `{"value": number}` (Some) or `{"state": "failed"}` (None).
fn read_tell(body: &Value) -> Result<Option<f64>, FieldError> {
    let mut obj = ObjectReader::new(body, "")?;
    let state = obj.str("state")?.map(str::to_owned);
    let value = obj.take("value").cloned();
    obj.finish()?;
    match (state.as_deref(), value) {
        (Some("failed"), None) => Ok(None),
        (Some("failed"), Some(_)) => Err(FieldError::invalid("/value", "a failed trial has no value")),
        (Some("complete") | None, Some(v)) => finite(&v).map(Some),
        (Some("complete") | None, None) => {
            Err(FieldError::invalid("/value", "missing: tell a value, or state \"failed\""))
        }
        (Some(other), _) => {
            Err(FieldError::invalid("/state", format!("`{other}` is neither \"complete\" nor \"failed\"")))
        }
    }
}

fn finite(v: &Value) -> Result<f64, FieldError> {
    match v.as_f64() {
        Some(x) if x.is_finite() => Ok(x),
        _ => Err(FieldError::invalid("/value", format!("must be a finite number, not {v}"))),
    }
}

fn tell_json(told: Option<f64>) -> Value {
    match told {
        Some(v) => json!({"state": "complete", "value": v, "told_at": now()}),
        None => json!({"state": "failed", "told_at": now()}),
    }
}

//! Online updates (POST /models/{id}/observations): rows appended to a ready exact
//! Gaussian process or kernel ridge model, stored, then swapped in whole.
//!
//! Appends to one model are serialised: here by a per-model lock (which DELETE takes
//! too), across replicas by the store: each version's delta is written create-only, so
//! of two replicas appending the same version one lands and the other redoes its append
//! on top of it. Nothing is acknowledged before its delta is stored (a small object: the
//! full model is rewritten only by compaction, see `crate::replica`), and a prediction holds one
//! version for its whole run.

use super::training::failure_of;
use super::{Service, ServiceError};
use crate::dataset::rows::{to_points, Row, RowShape};
use crate::estimator::online::AppendError;
use crate::estimator::StoredAppend;
use crate::estimator::{FittedModel, ModelKind, Outputs, Target, TrainingSet};
use crate::linalg::Parallelism;
use crate::registry::{Failure, FailureKind, ModelEntry};
use crate::replica::stored::grown_sample;
use crate::spec::FieldError;
use crate::store::delta::{Delta, DeltaHead};
use crate::store::ModelSummary;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use uuid::Uuid;

/// Times an append is redone after losing a conditional write to another replica.
const MAX_ATTEMPTS: usize = 5;

impl Service {
    /// Appends rows `x`, `y` to model `id` and returns its next version.
    pub async fn append_observations(
        self: &Arc<Self>,
        id: Uuid,
        x: Vec<Row>,
        y: Vec<Target>,
        extras: RowExtras,
    ) -> Result<Arc<ModelEntry>, ServiceError> {
        let entry = self.lookup(id).await?;
        check_appendable(&entry)?;
        if entry.summary().is_none() {
            return Err(ServiceError::NotReady { id, status: entry.status() });
        }
        if self.replica.store.is_durable() {
            self.store_admission().await?;
        }
        let lock = self.replica.model_lock(id);
        let _turn = lock.lock().await;
        // The newest version known here (an append may have finished while this waited).
        let mut entry = self.replica.registry.get(id).ok_or(ServiceError::NotFound(id))?;
        for attempt in 1..=MAX_ATTEMPTS {
            let (version, fitted) = self.replica.fitted_version(&entry).await?;
            if version != entry.version() {
                // A newer version than this replica's entry said (the store's full object).
                entry = self.replica.registry.get(id).ok_or(ServiceError::NotFound(id))?;
                continue;
            }
            let new = self.check_observations(&fitted, &x, &y)?;
            let (noise, weights) = row_extras(&fitted, &extras, new.x.n())?;
            self.check_grown_size(&entry, new.x.n())?;
            let slot = self.heavy_predict_slots.acquire().await.map_err(|_| ServiceError::Draining)?;
            let (service, from) = (self.clone(), entry.clone());
            let task = tokio::task::spawn_blocking(move || {
                service.grow(&from, &fitted, &new, (noise.as_deref(), weights.as_deref()))
            });
            let grown = match task.await {
                Ok(g) => g?,
                Err(_) => return Err(internal_append_failure(id)),
            };
            drop(slot);
            match self.commit(&entry, grown).await? {
                Committed::Stored(next) => return Ok(next),
                Committed::Taken => {
                    tracing::info!(model_id = %id, attempt, "another replica appended first: redoing the append on its version");
                    entry = self.replica.newest_entry(id, Some(entry)).await?;
                }
            }
        }
        Err(ServiceError::Contended {
            detail: format!(
                "model {id} was changed by other writers {MAX_ATTEMPTS} times while these rows were being appended; retry"
            ),
        })
    }

    /// The grown model's row count and working memory against the limits of a fit.
    fn check_grown_size(&self, entry: &ModelEntry, k: usize) -> Result<(), ServiceError> {
        let n = entry.n_train + k;
        if n > self.config.max_train_rows {
            return Err(ServiceError::TooLarge {
                detail: format!(
                    "the model would grow to {n} training rows, over the limit of {} (MERCER_MAX_TRAIN_ROWS)",
                    self.config.max_train_rows
                ),
            });
        }
        // The old and the grown factor are held at once.
        let need = (2 * n * n * 8) as u64;
        let limit = self.config.effective_max_fit_bytes();
        if need > limit {
            return Err(ServiceError::TooLarge {
                detail: format!(
                    "growing this model to {n} rows needs an estimated {need} bytes of working memory, \
                     over the limit of {limit} bytes (MERCER_MAX_FIT_BYTES)"
                ),
            });
        }
        Ok(())
    }

    /// On a blocking thread: the grown model, its entry, and the delta that stores it.
    fn grow(
        &self,
        entry: &ModelEntry,
        fitted: &FittedModel,
        new: &TrainingSet,
        (noise, weights): (Option<&[f64]>, Option<&[f64]>),
    ) -> Result<Grown, ServiceError> {
        let started = Instant::now();
        let busy = self.pool.running() + self.heavy_predicts.fetch_add(1, Ordering::AcqRel);
        let par = Parallelism::for_problem(entry.n_train + new.x.n(), busy);
        let grown = catch_unwind(AssertUnwindSafe(|| fitted.append_with(new, noise, weights, par)));
        self.heavy_predicts.fetch_sub(1, Ordering::AcqRel);
        let grown = match grown {
            Ok(Ok(g)) => g,
            Ok(Err(AppendError::Unsupported(detail))) => return Err(FieldError::invalid("/model", detail).into()),
            Ok(Err(AppendError::Fit(e))) => return Err(ServiceError::FitFailed(failure_of(e))),
            Err(_) => return Err(internal_append_failure(entry.id)),
        };
        let rows = StoredAppend::of(new, noise, weights);
        let before = entry.summary().map_or(0, |s| s.delta_bytes);
        let summary = Arc::new(ModelSummary {
            version: entry.version() + 1,
            delta_bytes: before + crate::store::delta::rows_bytes(&rows),
            ..ModelSummary::of(&grown)
        });
        let next = entry.next_version(entry.n_train + new.x.n(), summary.clone());
        next.keep_stored_of(entry);
        if let Some(sample) = entry.sample().and_then(|s| grown_sample(&s, entry.n_train, new, summary.version)) {
            next.set_sample(sample.into());
        }
        let delta = Delta {
            head: DeltaHead {
                id: entry.id,
                version: summary.version,
                write_id: rand_u64(),
                n_train: next.n_train as u64,
                summary: serde_json::to_string(summary.as_ref()).expect("a summary serialises"),
            },
            rows,
        };
        Ok(Grown { next, fitted: Arc::new(grown), delta, rows: new.x.n(), started })
    }

    /// Stores an append as its delta and makes it the version here. `Taken`: another
    /// writer stored this version first (nothing of this one stands).
    async fn commit(self: &Arc<Self>, entry: &ModelEntry, grown: Grown) -> Result<Committed, ServiceError> {
        let (id, version) = (entry.id, grown.delta.head.version);
        let computed_ms = grown.started.elapsed().as_secs_f64() * 1e3;
        let mut base = version;
        if self.replica.store.is_durable() {
            match self.replica.store.create_delta(&grown.delta).await {
                Ok(_) => {}
                Err(e) if e.is_conflict() => return Ok(Committed::Taken),
                Err(e) => return Err(self.store_failure("cannot store the update", e)),
            }
            // The full object says whether the delta counts: it must still be there (a
            // delete takes it first) and older than the delta, unless a compaction has
            // already folded this very delta in (see `store::delta`). Its tag is enough
            // while it is the object last read here; a HEAD, where a GET costs more.
            let deleted = || async {
                let _ = self.replica.store.delete_delta(id, version).await;
                self.replica.registry.remove(id);
                ServiceError::NotFound(id)
            };
            let tag = match self.replica.store.model_tag(id).await {
                Ok(Some(t)) => t,
                Ok(None) => return Err(deleted().await),
                Err(e) => return Err(self.store_failure("cannot confirm the stored update", e)),
            };
            let known = self.replica.full_object(id);
            match known {
                Some((t, v)) if t == tag && v < version => base = v,
                _ => {
                    let head = match self.replica.store.model_head(id).await {
                        Ok(Some(h)) => h,
                        Ok(None) => return Err(deleted().await),
                        Err(e) => return Err(self.store_failure("cannot confirm the stored update", e)),
                    };
                    let stored = head.summary().map_err(ServiceError::Storage)?;
                    base = stored.version;
                    // Read after the tag, the head is of that object or a newer one: its
                    // version bounds the tagged object's.
                    self.replica.saw_full_object(id, tag, base);
                    if base >= version && !stored.folded.contains(&(version, grown.delta.head.write_id)) {
                        if stored.folded.first().is_none_or(|(oldest, _)| *oldest > version) {
                            return Err(ServiceError::Contended {
                                detail: format!(
                                    "model {id} was compacted past version {version} while this update was stored, \
                                     and whether it is in cannot be told; read the model before retrying"
                                ),
                            });
                        }
                        // Written after a compaction had covered this version and freed its key.
                        let _ = self.replica.store.delete_delta(id, version).await;
                        return Ok(Committed::Taken);
                    }
                }
            }
        }
        let next = Arc::new(grown.next);
        // The cache first: a request that finds the new entry must find its model.
        self.replica.registry.cache.insert(id, version, grown.fitted.clone());
        self.replica.registry.insert(next.clone());
        let seconds = grown.started.elapsed().as_secs_f64();
        self.metrics.record_append(entry.kind.name(), grown.rows, seconds);
        tracing::info!(
            model_id = %id,
            rows = grown.rows,
            n_train = next.n_train,
            version,
            computed_ms,
            duration_ms = seconds * 1e3,
            "observations appended"
        );
        if self.replica.store.is_durable() {
            self.replica.maybe_compact(next.clone(), grown.fitted, base);
        }
        Ok(Committed::Stored(next))
    }
}

/// An append computed, not yet stored.
struct Grown {
    next: ModelEntry,
    fitted: Arc<FittedModel>,
    delta: Delta,
    rows: usize,
    started: Instant,
}

enum Committed {
    /// The next version, stored and in the registry.
    Stored(Arc<ModelEntry>),
    /// Another writer stored this version first.
    Taken,
}

/// A random 64-bit number (a delta's write id).
fn rand_u64() -> u64 {
    let bytes = Uuid::new_v4().into_bytes();
    u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"))
}

/// Only the kinds that take appends (exact Gaussian processes and kernel ridge) take
/// rows: 422 at /model otherwise, checked before readiness (a fit still running may show
/// only what was asked for).
fn check_appendable(entry: &ModelEntry) -> Result<(), ServiceError> {
    if !entry.kind.can().appends {
        return Err(FieldError::invalid(
            "/model",
            format!(
                "online updates apply to {} models, not {}",
                ModelKind::names_that(|c| c.appends),
                entry.kind.name()
            ),
        )
        .into());
    }
    let approximation = match entry.summary() {
        Some(s) => s.training.get("approximation").and_then(|v| v.as_str()).map(str::to_owned),
        None => entry.requested_params.get("approximation").and_then(|v| v.as_str()).map(str::to_owned),
    };
    if entry.requested_kernel.get("type").is_some_and(|t| t == "precomputed") {
        // New rows would need their kernel values against each other and every old row.
        return Err(FieldError::invalid(
            "/model",
            format!(
                "online updates need kernel values between the new rows; this {} uses a precomputed kernel",
                entry.kind.name()
            ),
        )
        .into());
    }
    if approximation.as_deref() == Some("nystrom") {
        return Err(FieldError::invalid(
            "/model",
            format!("online updates need an exact model; this {} uses approximation nystrom", entry.kind.name()),
        )
        .into());
    }
    Ok(())
}

impl Service {
    /// Checks an append's rows against a fitted model and returns them as a training set
    /// (as [`Service::check_query`] does for a prediction's).
    pub fn check_observations(
        &self,
        fitted: &FittedModel,
        x: &[Row],
        y: &[Target],
    ) -> Result<TrainingSet, ServiceError> {
        self.check_row_chars(x)?;
        observations(fitted, x, y)
    }

    /// Checks an append's per-row extras against a fitted model: the new rows' noise and
    /// sample weights, each where the model has them per row.
    pub fn check_row_extras(
        &self,
        fitted: &FittedModel,
        extras: &RowExtras,
        rows: usize,
    ) -> Result<PerRow, ServiceError> {
        row_extras(fitted, extras, rows)
    }
}

/// What an append may carry per row beyond x and y.
#[derive(Debug, Clone, Default)]
pub struct RowExtras {
    pub noise: Option<Vec<f64>>,
    pub sample_weight: Option<Vec<f64>>,
}

/// The new rows' noise variances and sample weights: each given exactly when the model
/// has it per row, one non-negative number per new row.
fn row_extras(fitted: &FittedModel, extras: &RowExtras, rows: usize) -> Result<PerRow, ServiceError> {
    let noise = per_row(extras.noise.as_deref(), fitted.has_row_noise(), rows, "/noise", "a noise variance")?;
    let weights = per_row(
        extras.sample_weight.as_deref(),
        fitted.has_sample_weight(),
        rows,
        "/sample_weight",
        "a sample weight",
    )?;
    if weights.as_ref().is_some_and(|w| w.iter().all(|v| *v == 0.0)) {
        return Err(FieldError::invalid("/sample_weight", "every new row's weight is 0: nothing to append").into());
    }
    Ok((noise, weights))
}

/// The new rows' noise and weights.
pub type PerRow = (Option<Vec<f64>>, Option<Vec<f64>>);

fn per_row(
    given: Option<&[f64]>,
    model_has: bool,
    rows: usize,
    at: &str,
    what: &str,
) -> Result<Option<Vec<f64>>, ServiceError> {
    match (given, model_has) {
        (None, false) => Ok(None),
        (Some(_), false) => {
            Err(FieldError::invalid(at, format!("this model was fitted without {what} per row: leave it out")).into())
        }
        (None, true) => Err(FieldError::invalid(
            at,
            format!("missing: this model has {what} per training row, so the new rows need theirs"),
        )
        .into()),
        (Some(v), true) => {
            if v.len() != rows {
                return Err(FieldError::invalid(at, format!("has {} entries but x has {rows} rows", v.len())).into());
            }
            if let Some(i) = v.iter().position(|s| !(s.is_finite() && *s >= 0.0)) {
                return Err(FieldError::invalid(format!("{at}/{i}"), "must be a non-negative number").into());
            }
            Ok(Some(v.to_vec()))
        }
    }
}

/// The request's rows as a training set for `fitted`, checked as a fit's would be.
fn observations(fitted: &FittedModel, x: &[Row], y: &[Target]) -> Result<TrainingSet, ServiceError> {
    if x.is_empty() {
        return Err(FieldError::invalid("/x", "must contain at least one row").into());
    }
    let shape = RowShape { kind: fitted.predictor().row_kind(), d: fitted.predictor().n_features() };
    let points = to_points(x, Some(shape))?;
    if y.len() != x.len() {
        return Err(FieldError::invalid("/y", format!("has {} entries but x has {} rows", y.len(), x.len())).into());
    }
    let (y, outputs) = super::training::regression_targets(y)?;
    let model = fitted.outputs();
    if outputs != model {
        let want = match model {
            Outputs::Single => "one number per row, as the model was fitted".to_string(),
            Outputs::Multi(t) => format!("one list of {t} numbers per row, as the model was fitted"),
        };
        return Err(FieldError::invalid("/y", format!("must take the model's shape: {want}")).into());
    }
    Ok(TrainingSet { x: points, y, outputs })
}

fn internal_append_failure(id: Uuid) -> ServiceError {
    tracing::error!(model_id = %id, "append panicked");
    ServiceError::FitFailed(Failure {
        kind: FailureKind::Internal,
        detail: "the update failed with an internal error".into(),
    })
}

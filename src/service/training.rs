//! Training: a request checked into a model spec and a training set (rows sent inline
//! or read from a stored dataset), its fit queued on the pool and run there, the fitted
//! model stored before it is reported ready.

use super::{Service, ServiceError, TrainInput, TrainOutcome, TrainSource, ValidTraining};
use crate::dataset::rows::to_points;
use crate::estimator::{
    ClassLabels, ClassificationSet, FitContext, FitError, ModelKind, ModelSpec, Outputs, Target, Task, TrainingData,
    TrainingSet,
};
use crate::kernel::{default_kernel, Kernel};
use crate::linalg::{LinalgError, Parallelism};
use crate::pool::{Job, SubmitError};
use crate::registry::{Failure, FailureKind, ModelEntry, ModelState, Origin};
use crate::replica::stored::{sample_json, stored_model};
use crate::spec::FieldError;
use crate::store::{ModelSummary, StoreError};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use uuid::Uuid;

impl Service {
    /// Checks a training request and turns it into a model spec and a training set.
    /// Errors name the offending field with a pointer into the request. Reads the named
    /// dataset when there is one (blocking: call off the async threads for datasets).
    pub fn validate_training(&self, input: &TrainInput) -> Result<ValidTraining, ServiceError> {
        let kind = ModelKind::from_name(&input.model).ok_or_else(|| {
            let names: Vec<_> = ModelKind::ALL.iter().map(|k| k.name()).collect();
            FieldError::invalid(
                "/model",
                format!("unknown model `{}`; expected one of {}", input.model, names.join(", ")),
            )
        })?;
        // The points, each row's target, and where they came from.
        enum Ys<'a> {
            Sent(&'a [Target]),
            /// No `y` in the body.
            Absent,
            Stored(crate::dataset::Targets),
        }
        let (x, ys, origin) = match &input.source {
            TrainSource::Rows { x, y } => {
                let n = x.len();
                if n == 0 {
                    return Err(FieldError::invalid("/x", "must contain at least one row").into());
                }
                self.check_train_rows(n)?;
                self.check_row_chars(x)?;
                let x = to_points(x, None)?;
                match y {
                    Some(y) if y.len() != n => {
                        return Err(
                            FieldError::invalid("/y", format!("has {} entries but x has {n} rows", y.len())).into()
                        )
                    }
                    Some(y) => (x, Ys::Sent(y), Origin::default()),
                    None => (x, Ys::Absent, Origin::default()),
                }
            }
            TrainSource::Dataset(id) => {
                let (id, stored) = self.read_dataset_for_fit(id)?;
                self.check_train_rows(stored.x.n())?;
                let origin = Origin { dataset: Some(id), features: stored.info.features, targets: stored.info.targets };
                (stored.x, Ys::Stored(stored.y), origin)
            }
        };
        let (n, d) = (x.n(), x.d());
        let mut labels = None;
        let data = match (kind.task(), ys) {
            (Task::Novelty | Task::Transform, Ys::Sent(_)) => {
                return Err(FieldError::invalid("/y", format!("{} takes no targets: leave `y` out", kind.name())).into())
            }
            // A dataset's target column is not used by models without targets; it only
            // labels the rows of the plot sample (the page colours an embedding by it).
            (Task::Novelty | Task::Transform, ys) => {
                if let Ys::Stored(t) = ys {
                    labels = Some(t);
                }
                TrainingData::Unlabelled(x)
            }
            (_, Ys::Absent) => return Err(FieldError::shape("/y", "missing field `y`").into()),
            (_, Ys::Stored(crate::dataset::Targets::None)) => {
                return Err(FieldError::invalid(
                    "/dataset",
                    format!(
                        "the dataset has no target (uploaded with `?target=` empty, or without `y`); {} needs one: \
                         upload the rows with their target, or fit one_class_svm or kernel_pca",
                        kind.name()
                    ),
                )
                .into())
            }
            (_, Ys::Sent(y)) if matches!(y.first(), Some(Target::Row(_))) && !kind.can().several_outputs => {
                return Err(FieldError::invalid(
                    "/y",
                    format!(
                        "{} takes one target per row; a 2-D y (several outputs) is for {}",
                        kind.name(),
                        ModelKind::names_that(|c| c.several_outputs)
                    ),
                )
                .into())
            }
            (Task::Regression, Ys::Sent(y)) => {
                let (y, outputs) = regression_targets(y)?;
                TrainingData::Regression(TrainingSet { x, y, outputs })
            }
            (Task::Regression, Ys::Stored(crate::dataset::Targets::Numeric(y))) => {
                TrainingData::Regression(TrainingSet::new(x, y))
            }
            (_, Ys::Stored(crate::dataset::Targets::Multi { t, .. })) if !kind.can().several_outputs => {
                return Err(FieldError::invalid(
                    "/dataset",
                    format!(
                        "the dataset has {t} targets per row; {} takes one (several outputs are for {})",
                        kind.name(),
                        ModelKind::names_that(|c| c.several_outputs)
                    ),
                )
                .into())
            }
            (Task::Regression, Ys::Stored(crate::dataset::Targets::Multi { t, values })) => {
                TrainingData::Regression(TrainingSet::multi(x, values, t))
            }
            (Task::Regression, Ys::Stored(_)) => {
                return Err(FieldError::invalid(
                    "/dataset",
                    format!("the dataset's target holds class labels; {} needs numbers", kind.name()),
                )
                .into())
            }
            (Task::Classification, ys) => {
                let (classes, y) = match ys {
                    Ys::Sent(y) => ClassLabels::encode(y)?,
                    Ys::Stored(t) => ClassLabels::encode(&t.to_targets())?,
                    Ys::Absent => unreachable!("handled above"),
                };
                TrainingData::Classification(ClassificationSet { x, y, classes })
            }
        };
        let mut data = data;
        if input.precomputed_kernel() {
            *data.x_mut() = crate::kernel::precomputed_training_rows(data.x())?;
        }
        if let Some(search) = &input.search {
            // Several outputs are scored by the mean over outputs (selection::scoring).
            return self.plan_search(kind, input, search, data, origin);
        }
        let kernel = match &input.kernel {
            None => default_kernel(),
            Some(v) => Kernel::from_json(v).map_err(|e| e.under("/kernel"))?,
        };
        let mut spec = ModelSpec::from_json(kind, kernel, input.params.as_ref())?;
        let limits = self.limits();
        let limit = limits.max_fit_bytes;
        spec.admit(&data, limits)?;
        let need = spec.fit_memory_estimate(n, d) as u64;
        if need > limit {
            return Err(ServiceError::TooLarge {
                detail: format!(
                    "this fit needs an estimated {need} bytes of working memory (n = {n}), \
                     over the limit of {limit} bytes (MERCER_MAX_FIT_BYTES)"
                ),
            });
        }
        Ok(ValidTraining { spec, data, origin, search: None, labels })
    }

    fn check_train_rows(&self, n: usize) -> Result<(), ServiceError> {
        if n > self.config.max_train_rows {
            return Err(ServiceError::TooLarge {
                detail: format!(
                    "{n} training rows exceed the limit of {} (MERCER_MAX_TRAIN_ROWS)",
                    self.config.max_train_rows
                ),
            });
        }
        Ok(())
    }

    /// Validates, registers and queues a fit; with `wait`, waits for it (up to
    /// `fit_wait_secs`, then answers `Accepted`).
    pub async fn train(self: &Arc<Self>, input: TrainInput, wait: bool) -> Result<TrainOutcome, ServiceError> {
        if self.is_draining() {
            return Err(ServiceError::Draining);
        }
        self.store_admission().await?;
        let (valid, input) = if matches!(input.source, TrainSource::Dataset(_)) || input.precomputed_kernel() {
            // Reading a stored dataset is file I/O and decoding, checking a precomputed
            // kernel matrix n^2 work: not on the async threads.
            let service = self.clone();
            tokio::task::spawn_blocking(move || (service.validate_training(&input), input))
                .await
                .map_err(|_| ServiceError::Storage("reading the dataset was interrupted".into()))?
        } else {
            (self.validate_training(&input), input)
        };
        let ValidTraining { spec, data, origin, search, labels } = valid?;
        // The rows now live in `data`; the request's copy must not outlive this point,
        // as a synchronous fit can hold this function for minutes.
        let (name, metadata) = input.into_labels();
        let (kernel, params) = match &search {
            Some(job) => (job.kernel.clone(), job.params.clone()),
            None => (spec.kernel().to_json(), spec.params_json()),
        };
        let mut entry = ModelEntry::new(spec.kind(), name, metadata, data.x().n(), data.x().d(), kernel, params);
        entry.origin = origin;
        let entry = Arc::new(entry);
        let (done_tx, done_rx) = oneshot::channel::<()>();
        let job = {
            let service = self.clone();
            let entry = entry.clone();
            Job::new(entry.id, move |run| {
                service.run_fit(&entry, &spec, &data, labels.as_ref(), search.as_deref(), run.others_running)
            })
            .on_done(move || {
                let _ = done_tx.send(());
            })
        };
        self.replica.registry.insert(entry.clone());
        if let Err(e) = self.pool.try_submit(job) {
            self.replica.registry.remove(entry.id);
            return Err(match e {
                SubmitError::QueueFull => ServiceError::QueueFull { retry_after: self.pool.retry_after() },
                SubmitError::Closed => ServiceError::Draining,
            });
        }
        if !wait {
            return Ok(TrainOutcome::Accepted(entry));
        }
        match tokio::time::timeout(Duration::from_secs(self.config.fit_wait_secs), done_rx).await {
            Err(_) => Ok(TrainOutcome::Accepted(entry)),
            // The job was dropped unrun: the pool closed for shutdown.
            Ok(Err(_)) => Err(ServiceError::Draining),
            Ok(Ok(())) => match entry.state() {
                ModelState::Ready(_) if !entry.cancel.is_cancelled() => Ok(TrainOutcome::Ready(entry)),
                ModelState::Failed(f) => {
                    // The client learns of the failure in this answer and never got the
                    // id, so a failed synchronous fit leaves nothing behind.
                    self.replica.registry.remove(entry.id);
                    Err(ServiceError::FitFailed(f))
                }
                _ => Err(ServiceError::NotFound(entry.id)),
            },
        }
    }

    /// Runs on a pool worker: one fit, its state transitions, metrics and logs.
    fn run_fit(
        &self,
        entry: &ModelEntry,
        spec: &ModelSpec,
        data: &TrainingData,
        labels: Option<&crate::dataset::Targets>,
        search: Option<&super::SearchJob>,
        others_running: usize,
    ) {
        let model = entry.kind.name();
        if entry.cancel.is_cancelled() {
            self.metrics.record_fit(model, "cancelled", 0.0);
            return;
        }
        entry.set_state(ModelState::Training);
        let busy = others_running + self.heavy_predicts.load(Ordering::Relaxed);
        let ctx = FitContext {
            par: Parallelism::for_problem(data.x().n(), busy),
            cancel: entry.cancel.clone(),
            progress: entry.progress.clone(),
            memory: Some(self.config.effective_max_fit_bytes()),
        };
        ctx.progress.phase("fit");
        let started = Instant::now();
        let result = catch_unwind(AssertUnwindSafe(|| match search {
            None => spec.fit(data, &ctx),
            Some(job) => self.search_and_fit(job, data, &ctx, busy),
        }));
        let secs = started.elapsed().as_secs_f64();
        let (n, d) = (data.x().n(), data.x().d());
        let outcome = match result {
            Ok(Ok(_)) | Ok(Err(FitError::Cancelled)) if entry.cancel.is_cancelled() => "cancelled",
            Ok(Ok(mut fitted)) => {
                fitted.predictor_mut().report_mut().duration_ms = secs * 1e3;
                // Durable before ready: 201 is sent only once the model is stored.
                let summary = Arc::new(ModelSummary::of(&fitted));
                entry.set_sample(sample_json(data, labels).into());
                match self.persist(entry, &fitted, &summary) {
                    Ok(()) => {
                        self.replica.registry.cache.insert(entry.id, 1, Arc::new(fitted));
                        entry.set_state(ModelState::Ready(summary));
                        if entry.cancel.is_cancelled() {
                            // Deleted while being written: the file must not outlive it.
                            self.unpersist(entry.id);
                        }
                        "ready"
                    }
                    Err(e) => {
                        tracing::error!(model_id = %entry.id, error = %e, "cannot store the fitted model");
                        let kind = if e.is_unavailable() {
                            FailureKind::StoreUnavailable
                        } else {
                            FailureKind::Storage { out_of_space: e.is_out_of_space() }
                        };
                        entry.set_state(ModelState::Failed(Failure {
                            kind,
                            detail: format!("the model was fitted but could not be stored: {e}"),
                        }));
                        "failed"
                    }
                }
            }
            Ok(Err(FitError::Cancelled)) => "cancelled",
            Ok(Err(e)) => {
                entry.set_state(ModelState::Failed(failure_of(e)));
                "failed"
            }
            Err(panic) => {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into());
                tracing::error!(model_id = %entry.id, model, panic = %what, "fit panicked");
                entry.set_state(ModelState::Failed(Failure {
                    kind: FailureKind::Internal,
                    detail: "the fit failed with an internal error".into(),
                }));
                "failed"
            }
        };
        self.metrics.record_fit(model, outcome, secs);
        tracing::info!(model_id = %entry.id, model, n, d, duration_ms = secs * 1e3, outcome, par = ?ctx.par, "fit finished");
    }

    /// Writes a fitted model to the store (blocking: a fit worker waits for the PUT).
    fn persist(
        &self,
        entry: &ModelEntry,
        fitted: &crate::estimator::FittedModel,
        summary: &ModelSummary,
    ) -> Result<(), StoreError> {
        if !self.replica.store.is_durable() {
            // The registry's cache, which never evicts then, is the only copy.
            return Ok(());
        }
        let (model, head) = stored_model(entry, fitted, summary);
        let size = self.replica.store.block_on(self.replica.store.save_model(&model, &head))?;
        entry.set_stored_bytes(size);
        Ok(())
    }

    fn unpersist(&self, id: Uuid) {
        if let Err(e) = self.replica.store.block_on(self.replica.store.delete_model(id)) {
            tracing::error!(model_id = %id, error = %e, "cannot remove a stored model");
        }
    }
}

/// A regression request's targets as numbers: a label is malformed at /y/i.
pub(super) fn regression_targets(y: &[Target]) -> Result<(Vec<f64>, Outputs), FieldError> {
    let number = |i: usize, t: &Target| match t {
        Target::Number(v) => Ok(*v),
        _ => Err(FieldError::shape(format!("/y/{i}"), "expected a number: this is a regression model")),
    };
    let Some(Target::Row(first)) = y.first() else {
        let values = y.iter().enumerate().map(|(i, t)| number(i, t)).collect::<Result<Vec<f64>, _>>()?;
        return Ok((values, Outputs::Single));
    };
    // A 2-D y: n rows of t numbers, stored n x t column-major.
    let t = first.len();
    if t == 0 {
        return Err(FieldError::invalid("/y/0", "a row of a 2-D y needs at least one number (one per output)"));
    }
    let n = y.len();
    let mut out = vec![0.0; n * t];
    for (i, row) in y.iter().enumerate() {
        let Target::Row(row) = row else {
            return Err(FieldError::shape(format!("/y/{i}"), format!("expected a list of {t} numbers, as y[0]")));
        };
        if row.len() != t {
            return Err(FieldError::invalid(
                format!("/y/{i}"),
                format!("has {} numbers but y[0] has {t}: every row needs one number per output", row.len()),
            ));
        }
        for (k, v) in row.iter().enumerate() {
            out[k * n + i] = *v;
        }
    }
    Ok((out, Outputs::Multi(t)))
}

pub(super) fn failure_of(e: FitError) -> Failure {
    match e {
        FitError::Factorisation(LinalgError::NotPositiveDefinite { .. }) => Failure {
            kind: FailureKind::Unprocessable,
            detail: format!("{e}; the kernel matrix plus noise cannot be factorised: increase the noise (or lambda) or check the kernel"),
        },
        FitError::Invalid(field) => Failure { kind: FailureKind::InvalidField { pointer: field.pointer.clone() }, detail: field.message },
        FitError::Optimisation(_) | FitError::Search(_) => {
            Failure { kind: FailureKind::Unprocessable, detail: e.to_string() }
        }
        FitError::Cancelled | FitError::Factorisation(LinalgError::Interrupted) => {
            Failure { kind: FailureKind::Shutdown, detail: "the fit was cancelled".into() }
        }
    }
}

//! Predictions: a ready model's answer to query rows (JSON or CSV), checked against the
//! model, run inline, batched with concurrent requests or on a blocking thread by size;
//! the Open Inference Protocol's infer shares it.

use super::aliases::{AliasHit, Primary, Served};
use super::{batch, Service, ServiceError};
use crate::dataset::rows::{to_points, Row, RowShape};
use crate::estimator::{FittedModel, PredictOptions, Prediction};
use crate::kernel::{Points, RowKind};
use crate::linalg::Parallelism;
use crate::registry::{Failure, FailureKind, ModelEntry};
use crate::spec::FieldError;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use uuid::Uuid;

/// A model's answer to query rows, and which version of the model gave it.
pub struct Answer {
    pub fitted: Arc<FittedModel>,
    pub prediction: Prediction,
    /// The model's version that answered (its version when the request came, or a newer
    /// one an append made meanwhile).
    pub version: u64,
}

impl Service {
    /// Predicts `x` with a ready model. Trivial predictions run inline; other small ones
    /// are batched with concurrent requests to the model (`batch`); large ones run on a
    /// blocking thread, at most one per core at a time.
    pub async fn predict(
        self: &Arc<Self>,
        served: &Served,
        rows: QueryRows,
        opts: PredictOptions,
    ) -> Result<(Answer, Option<Vec<String>>), ServiceError> {
        let entry = self.lookup(served.model).await?;
        if entry.kind.can().transform {
            return Err(FieldError::invalid(
                "/model",
                format!("a {} model does not predict: POST its rows to /models/{{id}}/transform", entry.kind.name()),
            )
            .into());
        }
        // A multi-output model fitted from a dataset names its outputs by its target
        // columns (the CSV answer's column names).
        let targets = entry.origin.targets.clone();
        Ok((self.answer(entry, rows, opts, served.alias.as_ref()).await?, targets))
    }

    /// Predicts with any model, or transforms with a kernel PCA (its answer's
    /// `embedding`): the Open Inference Protocol serves both.
    pub async fn infer(
        self: &Arc<Self>,
        served: &Served,
        rows: QueryRows,
        opts: PredictOptions,
    ) -> Result<Answer, ServiceError> {
        let entry = self.lookup(served.model).await?;
        self.answer(entry, rows, opts, served.alias.as_ref()).await
    }

    /// The model's answer to `rows`, wherever it is best computed; through an alias with
    /// a shadow, the shadow then predicts the same rows on a task of its own.
    pub(super) async fn answer(
        self: &Arc<Self>,
        entry: Arc<ModelEntry>,
        rows: QueryRows,
        opts: PredictOptions,
        alias: Option<&AliasHit>,
    ) -> Result<Answer, ServiceError> {
        let (version, fitted) = self.replica.fitted_version(&entry).await?;
        check_predict_options(&fitted, &opts)?;
        let points = self.query_points(&entry, &fitted, rows, &opts).await?;
        let Some((name, shadow)) = alias.and_then(|a| Some((a.name.as_str(), a.shadow?))) else {
            return self.compute(&entry, version, fitted, points, opts).await;
        };
        let answer = self.compute(&entry, version, fitted, points.clone(), opts).await?;
        let primary = Primary { fitted: answer.fitted.clone(), prediction: answer.prediction.clone() };
        self.spawn_shadow(name, shadow, points, opts, primary);
        Ok(answer)
    }

    /// A model's answer to points made for another model of the same feature count (an
    /// alias's shadow): checked against this one, then computed.
    pub(super) async fn answer_points(
        self: &Arc<Self>,
        entry: &ModelEntry,
        points: Points,
        opts: PredictOptions,
    ) -> Result<Answer, ServiceError> {
        let (version, fitted) = self.replica.fitted_version(entry).await?;
        check_predict_options(&fitted, &opts)?;
        if fitted.predictor().row_kind() != points.kind() {
            return Err(FieldError::invalid("/x", "this model takes rows of another kind").into());
        }
        self.compute(entry, version, fitted, points, opts).await
    }

    /// A model's answer to checked query points: inline, batched, or on a blocking
    /// thread by its cost.
    pub(super) async fn compute(
        self: &Arc<Self>,
        entry: &ModelEntry,
        version: u64,
        fitted: Arc<FittedModel>,
        points: Points,
        opts: PredictOptions,
    ) -> Result<Answer, ServiceError> {
        let id = entry.id;
        let m = points.n();
        let started = Instant::now();
        let cost = fitted.predictor().predict_cost(m, &opts);
        let small = cost <= self.config.predict_inline_max_flops;
        // Any prediction of a few rows is batched (a large model's most of all: its rows
        // share one pass over the factor), unless batching is off.
        let batched = self.config.batch_delay_us > 0
            && cost > batch::BATCH_MIN_FLOPS
            && !opts.covariance
            && m <= batch::MAX_BATCH_ROWS;
        let prediction = if batched {
            match self.batcher.predict(id, fitted.clone(), points, opts).await {
                Some(p) => p,
                None => return Err(internal_predict_failure(id)),
            }
        } else if small {
            fitted.predictor().predict(&points, &opts, Parallelism::Sequential)
        } else {
            let n = fitted.predictor().n_support();
            let fitted = fitted.clone();
            self.run_heavy(id, n.max(m), move |par| fitted.predictor().predict(&points, &opts, par)).await?
        };
        if !prediction.is_finite() {
            // JSON would carry a null where the contract promises a number.
            return Err(FieldError::invalid(
                "/x",
                "the prediction overflows for these inputs (values this far out exceed f64's range)",
            )
            .into());
        }
        self.metrics.record_predict(entry.kind.name(), m, started.elapsed().as_secs_f64());
        Ok(Answer { fitted, prediction, version })
    }

    /// The query rows of a predict-like request as points of the model's kind: JSON rows
    /// checked against it, or a CSV body parsed (large ones off the async threads).
    pub(super) async fn query_points(
        &self,
        entry: &ModelEntry,
        fitted: &FittedModel,
        rows: QueryRows,
        opts: &PredictOptions,
    ) -> Result<Points, ServiceError> {
        Ok(match rows {
            QueryRows::Json(x) => self.check_query(fitted, &x, opts)?,
            QueryRows::Csv(_) if fitted.predictor().row_kind() != RowKind::Numeric => {
                return Err(FieldError::invalid(
                    "/x",
                    format!("this model takes {}: send them as JSON", fitted.predictor().row_kind().describe()),
                )
                .into())
            }
            QueryRows::Csv(text) => {
                let features = entry.origin.features.clone();
                let d = fitted.predictor().n_features();
                // Large bodies are parsed off the async threads, as JSON ones are.
                let small = text.len() <= 256 << 10;
                let parse = move || crate::dataset::csv::read_query(&text, features.as_deref(), d);
                let parsed = if small {
                    parse()
                } else {
                    tokio::task::spawn_blocking(parse).await.map_err(|_| ServiceError::Draining)?
                };
                parsed?
            }
        })
    }

    /// Checks a predict request's rows and options against a fitted model and returns the
    /// query points.
    pub fn check_query(&self, fitted: &FittedModel, x: &[Row], opts: &PredictOptions) -> Result<Points, ServiceError> {
        if x.is_empty() {
            return Err(FieldError::invalid("/x", "must contain at least one row").into());
        }
        self.check_row_chars(x)?;
        let shape = RowShape { kind: fitted.predictor().row_kind(), d: fitted.predictor().n_features() };
        if fitted.predictor().support().indexed().is_some() {
            // A precomputed kernel's query width is the training set's size, not a
            // feature count: a wrong one is wrong for the whole of x.
            if let Some(Row::Numbers(first)) = x.first().filter(|r| matches!(r, Row::Numbers(v) if v.len() != shape.d))
            {
                return Err(FieldError::invalid(
                    "/x",
                    format!(
                        "rows of a precomputed kernel hold k(query, training row) for each of the {} training rows, not {}",
                        shape.d,
                        first.len()
                    ),
                )
                .into());
            }
        }
        let points = to_points(x, Some(shape))?;
        if fitted.kind().can().posterior && opts.covariance && x.len() > self.config.max_covariance_rows {
            return Err(FieldError::invalid(
                "/covariance",
                format!("the covariance is limited to {} query rows; got {}", self.config.max_covariance_rows, x.len()),
            )
            .into());
        }
        Ok(points)
    }
}

/// A predict request's query rows as sent.
#[derive(Debug)]
pub enum QueryRows {
    Json(Vec<Row>),
    /// A CSV body (header row; columns by name for models fitted on a CSV dataset), as
    /// received: no copy of it is made.
    Csv(bytes::Bytes),
}

/// A Gaussian process with a noise per training row knows no noise for a new row; a
/// variational GP without the Gaussian likelihood has no joint covariance.
pub(super) fn check_predict_options(fitted: &FittedModel, opts: &PredictOptions) -> Result<(), ServiceError> {
    if opts.covariance {
        if let Some(why) = fitted.posterior_refused() {
            return Err(FieldError::invalid("/covariance", why).into());
        }
    }
    if opts.include_noise && fitted.has_row_noise() {
        return Err(FieldError::invalid(
            "/include_noise",
            "this model has a noise variance per training row; a new row's noise is unknown",
        )
        .into());
    }
    Ok(())
}

/// A predict that panicked: logged, and answered as an internal failure.
impl Service {
    /// Heavy prediction-side work off the async threads (a large predict, posterior
    /// draws, an inverse transform): one of the heavy slots, counted in the busy figure
    /// that fits, appends and shadows read while it runs, on the parallelism that figure
    /// allows for a problem of `size` rows. A panic answers as a failed prediction of
    /// model `id`. Every such path goes through here.
    pub async fn run_heavy<T: Send + 'static>(
        self: &Arc<Self>,
        id: Uuid,
        size: usize,
        work: impl FnOnce(Parallelism) -> T + Send + 'static,
    ) -> Result<T, ServiceError> {
        let _permit = self.heavy_predict_slots.acquire().await.map_err(|_| ServiceError::Draining)?;
        let service = self.clone();
        let task = tokio::task::spawn_blocking(move || {
            let busy = service.pool.running() + service.heavy_predicts.fetch_add(1, Ordering::AcqRel);
            let out = catch_unwind(AssertUnwindSafe(|| work(Parallelism::for_problem(size, busy))));
            service.heavy_predicts.fetch_sub(1, Ordering::AcqRel);
            out
        });
        match task.await {
            Ok(Ok(out)) => Ok(out),
            _ => Err(internal_predict_failure(id)),
        }
    }

    /// Predictions and other heavy work running on blocking threads now.
    pub fn heavy_running(&self) -> usize {
        self.heavy_predicts.load(Ordering::Acquire)
    }
}

pub(super) fn internal_predict_failure(id: Uuid) -> ServiceError {
    tracing::error!(model_id = %id, "predict panicked");
    ServiceError::FitFailed(Failure {
        kind: FailureKind::Internal,
        detail: "the prediction failed with an internal error".into(),
    })
}

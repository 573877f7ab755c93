//! Draws from a Gaussian process's joint predictive distribution at query rows
//! (`POST /models/{id}/posterior_samples`): the predictive covariance and its factor are
//! m^2 n and m^3 work, so both run on a blocking thread under the heavy-predict limit.

use super::{QueryRows, Service, ServiceError};
use crate::estimator::gaussian_process::posterior::{self, Draws, MAX_DRAWN};
use crate::estimator::{ModelKind, PredictOptions};
use crate::spec::FieldError;
use std::sync::Arc;
use uuid::Uuid;

/// What a request asks of the draws.
#[derive(Debug, Clone, Copy)]
pub struct SampleOptions {
    pub n_samples: u64,
    pub seed: u64,
    pub include_noise: bool,
}

impl Service {
    /// n_samples joint draws at the query rows.
    pub async fn posterior_samples(
        self: &Arc<Self>,
        id: Uuid,
        rows: QueryRows,
        opts: SampleOptions,
    ) -> Result<Draws, ServiceError> {
        let entry = self.lookup(id).await?;
        if !entry.kind.can().posterior {
            return Err(FieldError::invalid(
                "/model",
                format!(
                    "posterior samples are a {}'s; this model is a {}",
                    ModelKind::names_that(|c| c.posterior),
                    entry.kind.name()
                ),
            )
            .into());
        }
        if opts.n_samples == 0 {
            return Err(FieldError::invalid("/n_samples", "must be at least 1").into());
        }
        let fitted = self.fitted(&entry).await?;
        if let Some(why) = fitted.posterior_refused() {
            return Err(FieldError::invalid("/model", format!("no posterior samples: {why}")).into());
        }
        let predict = PredictOptions {
            variance: false,
            covariance: true,
            include_noise: opts.include_noise,
            probabilities: false,
        };
        super::predict::check_predict_options(&fitted, &predict)?;
        // Rows are counted before the covariance limit applies, so parse without it.
        let rows_only = PredictOptions { covariance: false, ..predict };
        let points = self.query_points(&entry, &fitted, rows, &rows_only).await?;
        let m = points.n();
        if m > self.config.max_covariance_rows {
            return Err(FieldError::invalid(
                "/x",
                format!(
                    "joint draws need the {m} x {m} predictive covariance; it is limited to {} query rows \
                     (MERCER_MAX_COVARIANCE_ROWS)",
                    self.config.max_covariance_rows
                ),
            )
            .into());
        }
        let t = fitted.outputs().t() as u64;
        if (m as u64).saturating_mul(t).saturating_mul(opts.n_samples) > MAX_DRAWN {
            let outputs = if t > 1 { format!(" x {t} outputs") } else { String::new() };
            return Err(FieldError::invalid(
                "/n_samples",
                format!(
                    "{m} rows{outputs} x {} draws exceed the {MAX_DRAWN} numbers one request may draw",
                    opts.n_samples
                ),
            )
            .into());
        }
        let n_samples = opts.n_samples as usize;
        let started = std::time::Instant::now();
        let n = fitted.predictor().n_support();
        let drawn = self
            .run_heavy(id, n.max(m), move |par| {
                let p = fitted.predictor().predict(&points, &predict, par);
                posterior::draw_prediction(&p, n_samples, opts.seed, par)
            })
            .await?;
        let samples = drawn.map_err(|e| {
            ServiceError::from(FieldError::invalid(
                "/x",
                format!("the predictive covariance at these rows cannot be factorised even with jitter: {e}"),
            ))
        })?;
        if !samples.all_finite() {
            return Err(FieldError::invalid("/x", "the draws overflow for these inputs").into());
        }
        self.metrics.record_predict(entry.kind.name(), m, started.elapsed().as_secs_f64());
        Ok(samples)
    }
}

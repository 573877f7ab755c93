//! A fitted Gaussian process: predictions (mean, variance, covariance), online
//! appends and the stored state.

use super::GaussianProcess;
use crate::estimator::online::{self, AppendError};
use crate::estimator::{weighted_columns, PredictOptions, Prediction, Predictor, TrainingReport, TrainingSet};
use crate::kernel::Points;
use crate::linalg::{self, Cholesky, Parallelism};
use nalgebra::DMatrix;

#[derive(Debug, Clone)]
pub struct GaussianProcessModel {
    pub(super) spec: GaussianProcess,
    pub(super) x: Points,
    pub(super) alpha: Vec<f64>,
    pub(super) chol: Cholesky,
    /// The training targets as given (None for models stored before online updates).
    pub(super) y: Option<Vec<f64>>,
    /// y was fitted as (y - y_mean) / y_std.
    pub(super) y_mean: f64,
    pub(super) y_std: f64,
    pub(super) report: TrainingReport,
}

impl GaussianProcessModel {
    pub fn alpha(&self) -> &[f64] {
        &self.alpha
    }

    pub(in crate::estimator) fn store_into(&self, s: &mut crate::estimator::StoredFit) {
        s.put_points(&self.x);
        s.alpha = self.alpha.clone();
        s.factor = crate::linalg::copy_of(self.chol.l().as_slice());
        s.jitter = self.chol.jitter();
        s.y_mean = self.y_mean;
        s.y_std = self.y_std;
        if let Some(y) = &self.y {
            s.arrays.push(("y".into(), y.clone()));
        }
    }

    pub(in crate::estimator) fn restore(
        spec: GaussianProcess,
        x: Points,
        alpha: Vec<f64>,
        chol: Cholesky,
        y: Option<Vec<f64>>,
        (y_mean, y_std): (f64, f64),
        report: TrainingReport,
    ) -> GaussianProcessModel {
        GaussianProcessModel { spec, x, alpha, chol, y, y_mean, y_std, report }
    }

    /// This model with `new` rows appended (see [`crate::estimator::online`]); `noise`, the new
    /// rows' noise variances, exactly when the model has a noise per row.
    pub fn append(
        &self,
        new: &TrainingSet,
        noise: Option<&[f64]>,
        par: Parallelism,
    ) -> Result<GaussianProcessModel, AppendError> {
        let y = self.y.as_deref().ok_or_else(AppendError::without_targets)?;
        let mut spec = self.spec.clone();
        match (&self.spec.noise_rows, noise) {
            (Some(old), Some(more)) if more.len() == new.x.n() => spec.noise_rows = Some([&old[..], more].concat()),
            (None, None) => {}
            _ => {
                return Err(AppendError::Unsupported(
                    "the new rows' noise must be given exactly when the model has a noise per row".into(),
                ))
            }
        }
        let data = online::grown_set(&self.x, y, new);
        let chol = online::grown_factor(
            &spec.kernel,
            &|i| spec.noise_at(i),
            None,
            Some(&self.chol),
            &self.x,
            &new.x,
            &data.x,
            par,
        )?;
        Ok(spec.with_factor(chol, data, self.report.clone(), par)?)
    }

    /// Whether the model has a noise variance per training row.
    pub fn has_row_noise(&self) -> bool {
        self.spec.noise_rows.is_some()
    }

    pub fn log_marginal_likelihood(&self) -> f64 {
        self.report.log_marginal_likelihood.unwrap_or(f64::NAN)
    }

    /// Variance added at prediction points with `include_noise`, in the units of y.
    fn noise_in_y_units(&self) -> f64 {
        self.spec.noise.value * self.y_std * self.y_std
    }
}

impl Predictor for GaussianProcessModel {
    fn predict(&self, x: &Points, opts: &PredictOptions, par: Parallelism) -> Prediction {
        let scale2 = self.y_std * self.y_std;
        let extra = if opts.include_noise { self.noise_in_y_units() } else { 0.0 };
        let kernel = &self.spec.kernel;
        if opts.covariance {
            // The covariance needs every query at once; the caller bounds m.
            let mut v = kernel.cross(&self.x, x, par);
            let values = self.mean_of(&v);
            self.chol.solve_l_in_place(&mut v, par);
            let mut cov = kernel.gram(x, par);
            linalg::sub_at_a(&mut cov, &v, par);
            cov *= scale2;
            for i in 0..cov.nrows() {
                cov[(i, i)] = cov[(i, i)].max(0.0) + extra;
            }
            let variance = opts.variance.then(|| cov.diagonal().iter().copied().collect());
            return Prediction { values, variance, covariance: Some(cov), ..Default::default() };
        }
        let block = crate::estimator::predict_block_rows(self.x.n());
        let mut values = Vec::with_capacity(x.n());
        let mut variance = opts.variance.then(|| Vec::with_capacity(x.n()));
        for start in (0..x.n()).step_by(block) {
            let q = x.slice(start, block.min(x.n() - start));
            let mut v = kernel.cross(&self.x, &q, par);
            values.extend(self.mean_of(&v));
            if let Some(var) = variance.as_mut() {
                // The mean-only path never pays for the solve.
                self.chol.solve_l_in_place(&mut v, par);
                let prior = kernel.diag(&q);
                var.extend(
                    v.column_iter()
                        .zip(prior.iter())
                        .map(|(col, kxx)| (kxx - col.norm_squared()).max(0.0) * scale2 + extra),
                );
            }
        }
        Prediction { values, variance, ..Default::default() }
    }

    crate::estimator::spec_and_report_accessors!();

    fn n_support(&self) -> usize {
        self.x.n()
    }

    fn support(&self) -> &Points {
        &self.x
    }

    fn memory_bytes(&self) -> usize {
        let y = self.y.as_ref().map_or(0, Vec::len);
        self.x.memory_bytes() + (self.alpha.len() + y) * 8 + self.chol.n() * self.chol.n() * 8
    }

    fn predict_cost(&self, m: usize, opts: &PredictOptions) -> f64 {
        let n = self.x.n() as f64;
        let m = m as f64;
        let mut cost = m * n * (self.kernel().pair_cost(&self.x) + 2.0);
        if opts.variance || opts.covariance {
            cost += m * n * n;
        }
        if opts.covariance {
            cost += m * m * n;
        }
        cost
    }
}

impl GaussianProcessModel {
    fn mean_of(&self, cross: &DMatrix<f64>) -> Vec<f64> {
        weighted_columns(cross, &self.alpha).into_iter().map(|f| f * self.y_std + self.y_mean).collect()
    }
}

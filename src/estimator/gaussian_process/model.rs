//! A fitted Gaussian process: predictions (mean, variance, covariance), online
//! appends and the stored state.

use super::GaussianProcess;
use crate::estimator::coefficients;
use crate::estimator::online::{self, AppendError, Extra};
use crate::estimator::targets::outputs::{gp_prediction, mean_rows, Normalisation};
use crate::estimator::{
    AppendRows, Coefficients, Fitted, ModelKind, Online, Outputs, PredictOptions, Prediction, Predictor,
    TrainingReport, TrainingSet,
};
use crate::kernel::Points;
use crate::linalg::{self, Cholesky, Parallelism};
use nalgebra::DMatrix;

#[derive(Debug, Clone)]
pub struct GaussianProcessModel {
    pub(super) spec: GaussianProcess,
    pub(super) x: Points,
    /// n x t column-major, one column per output.
    pub(super) alpha: Vec<f64>,
    pub(super) chol: Cholesky,
    /// The training targets as given, n x t (None for models stored before online
    /// updates).
    pub(super) y: Option<Vec<f64>>,
    pub(super) outputs: Outputs,
    /// z = L^-1 y_n for the normalised targets y_n, n x t (alpha = L^-T z): an append
    /// solves only its new rows (empty for models stored before online updates).
    pub(super) z: Vec<f64>,
    /// y was fitted as (y - mean) / std, per output.
    pub(super) norm: Normalisation,
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
        self.outputs.store(s);
        self.norm.store(self.outputs, s);
        if !self.z.is_empty() {
            s.arrays.push(("z".into(), self.z.clone()));
        }
        if let Some(y) = &self.y {
            s.arrays.push(("y".into(), y.clone()));
        }
    }

    /// A stored model; `z` when the file has it, else solved from the targets (files
    /// written before it was kept).
    #[allow(clippy::too_many_arguments)]
    pub(in crate::estimator) fn restore(
        spec: GaussianProcess,
        x: Points,
        alpha: Vec<f64>,
        chol: Cholesky,
        y: Option<Vec<f64>>,
        z: Option<Vec<f64>>,
        (outputs, norm): (Outputs, Normalisation),
        report: TrainingReport,
    ) -> GaussianProcessModel {
        let z = match (z, &y) {
            (Some(z), _) => z,
            (None, Some(y)) => {
                let mut z = norm.apply_to(y, x.n());
                chol.forward_columns_in_place(&mut z, Parallelism::Sequential);
                z.as_slice().to_vec()
            }
            (None, None) => Vec::new(),
        };
        GaussianProcessModel { spec, x, alpha, chol, y, outputs, z, norm, report }
    }

    /// This model with `new` rows appended (see [`crate::estimator::online`]); `noise`, the new
    /// rows' noise variances, exactly when the model has a noise per row.
    pub fn append(
        &self,
        new: &TrainingSet,
        noise: Option<&[f64]>,
        par: Parallelism,
    ) -> Result<GaussianProcessModel, AppendError> {
        self.append_all(&[(new, noise)], par)
    }

    /// As [`GaussianProcessModel::append`] once per batch, in order, bit for bit, with the
    /// coefficients solved once at the end: they depend only on the last factor and all
    /// the targets, while each factor grows from the one before.
    pub fn append_all(
        &self,
        batches: &[(&TrainingSet, Option<&[f64]>)],
        par: Parallelism,
    ) -> Result<GaussianProcessModel, AppendError> {
        let y = self.y.as_deref().ok_or_else(AppendError::without_targets)?;
        let mut spec = self.spec.clone();
        // z = L^-1 y is kept only while the targets are used as given: under normalize_y
        // every row's normalised target moves with each append.
        let kept = (!spec.normalize_y).then(|| DMatrix::from_column_slice(self.x.n(), self.outputs.t(), &self.z));
        let state = (&self.x, y, self.outputs);
        let grown =
            online::grow_all(state, (Some(&self.chol), kept.as_ref()), batches, par, |new, noise, old, all, chol| {
                match (&spec.noise_rows, noise) {
                    (Some(rows), Some(more)) if more.len() == new.x.n() => {
                        spec.noise_rows = Some([&rows[..], more].concat())
                    }
                    (None, None) => {}
                    _ => {
                        return Err(AppendError::Unsupported(
                            "the new rows' noise must be given exactly when the model has a noise per row".into(),
                        ))
                    }
                }
                let (factor, extended) =
                    online::grown_factor(&spec.kernel, &|i| spec.noise_at(i), None, chol, old, &new.x, &all.x, par)?;
                Ok((factor, extended, (!spec.normalize_y).then(|| all.y_matrix())))
            })?;
        let Some(g) = grown else { return Ok(self.clone()) };
        Ok(spec.with_factor(g.chol, g.data, self.report.clone(), g.z, par)?)
    }

    /// Whether the model has a noise variance per training row.
    pub fn has_row_noise(&self) -> bool {
        self.spec.noise_rows.is_some()
    }

    pub fn log_marginal_likelihood(&self) -> f64 {
        self.report.log_marginal_likelihood.unwrap_or(f64::NAN)
    }

    /// The model's output axis.
    pub fn outputs(&self) -> Outputs {
        self.outputs
    }
}

impl Predictor for GaussianProcessModel {
    fn predict(&self, x: &Points, opts: &PredictOptions, par: Parallelism) -> Prediction {
        let extra = if opts.include_noise { self.spec.noise.value } else { 0.0 };
        let kernel = &self.spec.kernel;
        let t = self.outputs.t();
        if opts.covariance {
            // The covariance needs every query at once; the caller bounds m.
            let mut v = kernel.cross(&self.x, x, par);
            let mean = mean_rows(&v, &self.alpha, t);
            self.chol.solve_l_in_place(&mut v, par);
            let mut cov = kernel.gram(x, par);
            linalg::sub_at_a(&mut cov, &v, par);
            return gp_prediction(self.outputs, &self.norm, mean, opts.variance, Some(cov), None, extra);
        }
        let block = crate::estimator::predict_block_rows(self.x.n());
        let mut mean = Vec::with_capacity(x.n() * t);
        let mut variance = opts.variance.then(|| Vec::with_capacity(x.n()));
        for start in (0..x.n()).step_by(block) {
            let q = x.slice(start, block.min(x.n() - start));
            let mut v = kernel.cross(&self.x, &q, par);
            mean.extend(mean_rows(&v, &self.alpha, t));
            if let Some(var) = variance.as_mut() {
                // The mean-only path never pays for the solve. Each row's solve in an
                // order of its own: the same bits alone or batched (linalg::ordered).
                linalg::solve_lower_ordered(self.chol.l(), &mut v, par);
                let prior = kernel.diag(&q);
                var.extend(v.column_iter().zip(prior.iter()).map(|(col, kxx)| kxx - col.norm_squared()));
            }
        }
        gp_prediction(self.outputs, &self.norm, mean, opts.variance, None, variance, extra)
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
        self.x.memory_bytes() + (self.alpha.len() + y + self.z.len()) * 8 + self.chol.n() * self.chol.n() * 8
    }

    fn predict_cost(&self, m: usize, opts: &PredictOptions) -> f64 {
        let n = self.x.n() as f64;
        let m = m as f64;
        let mut cost = m * n * (self.kernel().pair_cost(&self.x) + 2.0 * self.outputs.t() as f64);
        if opts.variance || opts.covariance {
            cost += m * n * n;
        }
        if opts.covariance {
            cost += m * m * n;
        }
        cost
    }
}

impl Fitted for GaussianProcessModel {
    crate::estimator::fitted_basics!();

    fn kind(&self) -> ModelKind {
        ModelKind::GaussianProcess
    }

    fn outputs(&self) -> Outputs {
        self.outputs
    }

    fn online(&self) -> Option<&dyn Online> {
        Some(self)
    }

    fn coefficients(&self) -> Option<Coefficients> {
        Some(coefficients::dual(&self.alpha, self.x.n(), self.outputs, &self.report))
    }

    fn has_row_noise(&self) -> bool {
        GaussianProcessModel::has_row_noise(self)
    }
}

impl Online for GaussianProcessModel {
    fn append(
        &self,
        new: &TrainingSet,
        noise: Option<&[f64]>,
        weights: Option<&[f64]>,
        par: Parallelism,
    ) -> Result<Box<dyn Fitted>, AppendError> {
        Ok(Box::new(GaussianProcessModel::append(self, new, Extra::Noise.pick(noise, weights)?, par)?))
    }

    fn append_all(&self, batches: &[AppendRows], par: Parallelism) -> Result<Box<dyn Fitted>, AppendError> {
        Ok(Box::new(GaussianProcessModel::append_all(self, &Extra::Noise.batches(batches)?, par)?))
    }
}

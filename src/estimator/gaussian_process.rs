//! Gaussian-process regression with fixed hyperparameters (Rasmussen & Williams, Alg. 2.1).
//!
//! Fit: L = chol(K + noise I), alpha = L^T \ (L \ y), log marginal likelihood
//! -1/2 y^T alpha - sum log L_ii - n/2 log 2 pi. Predict: mean K*^T alpha; variance
//! k(x*, x*) - |v|^2 with V = L \ K* (one blocked triangular solve for all queries),
//! clipped at 0. Matches scikit-learn's `GaussianProcessRegressor(optimizer=None)` with
//! `alpha = noise`, including `normalize_y` (centre, divide by the ddof-0 std).

use super::{
    regularised_gram, weighted_columns, Estimator, FitContext, FitError, PredictOptions, Prediction, Predictor,
    TrainingReport, TrainingSet,
};
use crate::kernel::hyper::Hyper;
use crate::kernel::{Kernel, Points};
use crate::linalg::{self, Cholesky, Parallelism};
use crate::spec::{FieldError, ObjectReader};
use nalgebra::{DMatrix, DVector};
use serde_json::{json, Value};

/// Default bounds of `params.noise` when it is optimised.
pub const NOISE_BOUNDS: (f64, f64) = (1e-10, 1e5);

/// Checked parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct GaussianProcess {
    pub kernel: Kernel,
    /// Variance added to the diagonal of K (scikit-learn's `alpha`), >= 0.
    pub noise: Hyper,
    pub normalize_y: bool,
    pub optimize: bool,
    pub restarts: u64,
    pub seed: u64,
}

impl GaussianProcess {
    pub fn from_json(kernel: Kernel, params: &Value, path: &str) -> Result<GaussianProcess, FieldError> {
        let mut obj = ObjectReader::new(params, path)?;
        let noise_ptr = obj.pointer("noise");
        let noise = match obj.take("noise") {
            None => Hyper::new(1e-10),
            Some(v) => {
                let h = Hyper::<f64>::read(v, &noise_ptr)?;
                if h.value < 0.0 {
                    let at = if v.is_object() { format!("{noise_ptr}/value") } else { noise_ptr };
                    return Err(FieldError::invalid(at, "must not be negative"));
                }
                h
            }
        };
        let normalize_y = obj.bool("normalize_y")?.unwrap_or(false);
        let optimize = obj.bool("optimize")?.unwrap_or(false);
        let restarts = obj.u64("restarts")?.unwrap_or(0);
        let seed = obj.u64("seed")?.unwrap_or(0);
        if optimize {
            return Err(FieldError::invalid(
                obj.pointer("optimize"),
                "hyperparameter optimisation is not available in this version; fit with fixed hyperparameters",
            ));
        }
        obj.finish()?;
        Ok(GaussianProcess { kernel, noise, normalize_y, optimize, restarts, seed })
    }

    pub fn params_json(&self) -> Value {
        json!({
            "noise": self.noise.to_json(),
            "normalize_y": self.normalize_y,
            "optimize": self.optimize,
            "restarts": self.restarts,
            "seed": self.seed,
        })
    }
}

#[derive(Debug, Clone)]
pub struct GaussianProcessModel {
    spec: GaussianProcess,
    x: Points,
    alpha: Vec<f64>,
    chol: Cholesky,
    /// y was fitted as (y - y_mean) / y_std.
    y_mean: f64,
    y_std: f64,
    report: TrainingReport,
}

impl GaussianProcessModel {
    pub fn alpha(&self) -> &[f64] {
        &self.alpha
    }

    pub fn log_marginal_likelihood(&self) -> f64 {
        self.report.log_marginal_likelihood.unwrap_or(f64::NAN)
    }

    /// Variance added at prediction points with `include_noise`, in the units of y.
    fn noise_in_y_units(&self) -> f64 {
        self.spec.noise.value * self.y_std * self.y_std
    }
}

/// Mean and ddof-0 standard deviation of y, with scikit-learn's rule that a zero
/// standard deviation becomes 1 (a constant target must not divide by zero).
fn normalisation(y: &[f64]) -> (f64, f64) {
    let n = y.len() as f64;
    let mean = y.iter().sum::<f64>() / n;
    let var = y.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    let std = var.sqrt();
    (mean, if std == 0.0 { 1.0 } else { std })
}

impl Estimator for GaussianProcess {
    type Fitted = GaussianProcessModel;

    fn fit(&self, data: &TrainingSet, ctx: &FitContext) -> Result<GaussianProcessModel, FitError> {
        ctx.cancel.check()?;
        let (y_mean, y_std) = if self.normalize_y { normalisation(&data.y) } else { (0.0, 1.0) };
        let y = DVector::from_iterator(data.y.len(), data.y.iter().map(|v| (v - y_mean) / y_std));
        let chol = Cholesky::factor_with_jitter(
            || regularised_gram(&self.kernel, &data.x, self.noise.value, ctx.par),
            ctx.par,
        )?;
        ctx.cancel.check()?;
        let alpha = chol.solve_vec(&y);
        let n = y.len() as f64;
        let lml = -0.5 * y.dot(&alpha) - 0.5 * chol.log_det() - 0.5 * n * (2.0 * std::f64::consts::PI).ln();
        let report =
            TrainingReport { log_marginal_likelihood: Some(lml), jitter: Some(chol.jitter()), ..Default::default() };
        Ok(GaussianProcessModel {
            spec: self.clone(),
            x: data.x.clone(),
            alpha: alpha.as_slice().to_vec(),
            chol,
            y_mean,
            y_std,
            report,
        })
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
            return Prediction { values, variance, covariance: Some(cov) };
        }
        let block = super::predict_block_rows(self.x.n());
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
        Prediction { values, variance, covariance: None }
    }

    fn kernel(&self) -> &Kernel {
        &self.spec.kernel
    }

    fn params_json(&self) -> Value {
        self.spec.params_json()
    }

    fn report(&self) -> &TrainingReport {
        &self.report
    }

    fn report_mut(&mut self) -> &mut TrainingReport {
        &mut self.report
    }

    fn n_support(&self) -> usize {
        self.x.n()
    }

    fn n_features(&self) -> usize {
        self.x.d()
    }

    fn memory_bytes(&self) -> usize {
        self.x.memory_bytes() + self.alpha.len() * 8 + self.chol.n() * self.chol.n() * 8
    }

    fn predict_cost(&self, m: usize, opts: &PredictOptions) -> f64 {
        let n = self.x.n() as f64;
        let m = m as f64;
        let mut cost = m * n * (self.x.d() as f64 + 2.0);
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn data() -> TrainingSet {
        let rows: Vec<Vec<f64>> = (0..12).map(|i| vec![i as f64 * 0.5, (i as f64 * 0.7).sin()]).collect();
        let y = rows.iter().map(|r| r[0].cos() + 0.3 * r[1]).collect();
        TrainingSet { x: Points::from_rows(&rows), y }
    }

    fn gp(params: Value) -> GaussianProcess {
        let k = Kernel::from_json(&json!({"type": "rbf", "length_scale": 1.1})).unwrap();
        GaussianProcess::from_json(k, &params, "/params").unwrap()
    }

    /// Variance from the blocked solve equals the diagonal of the covariance, and the
    /// covariance equals its definition K** - K*^T (K + s I)^-1 K* computed independently
    /// with nalgebra.
    #[test]
    fn variance_and_covariance_agree_with_the_definition() {
        let data = data();
        let model = gp(json!({"noise": 0.05})).fit(&data, &FitContext::sequential()).unwrap();
        let q = Points::from_rows(&[vec![0.2, 0.1], vec![3.3, -0.4], vec![9.0, 1.0]]);
        let opts = PredictOptions { covariance: true, ..Default::default() };
        let full = model.predict(&q, &opts, Parallelism::Sequential);
        let var = model.predict(&q, &PredictOptions::default(), Parallelism::Sequential);

        let k = model.kernel();
        let n = data.x.n();
        let kxx = DMatrix::from_fn(n, n, |i, j| {
            k.eval(data.x.point(i), data.x.point(j), i == j) + if i == j { 0.05 } else { 0.0 }
        });
        let ks = DMatrix::from_fn(n, 3, |i, j| k.eval(data.x.point(i), q.point(j), false));
        let kss = DMatrix::from_fn(3, 3, |i, j| k.eval(q.point(i), q.point(j), i == j));
        let inv = kxx.clone().try_inverse().unwrap();
        let want_cov = &kss - ks.transpose() * &inv * &ks;
        let want_mean = ks.transpose() * (&inv * DVector::from_column_slice(&data.y));
        let cov = full.covariance.unwrap();
        for i in 0..3 {
            assert!((full.values[i] - want_mean[i]).abs() < 1e-9);
            assert!((var.values[i] - want_mean[i]).abs() < 1e-9);
            assert!((var.variance.as_ref().unwrap()[i] - want_cov[(i, i)]).abs() < 1e-9);
            for j in 0..3 {
                assert!((cov[(i, j)] - want_cov[(i, j)]).abs() < 1e-9);
            }
        }
    }

    #[test]
    fn normalize_y_and_include_noise_scale_in_y_units() {
        let mut data = data();
        for v in &mut data.y {
            *v = 100.0 + 20.0 * *v;
        }
        let (_, std) = normalisation(&data.y);
        let model = gp(json!({"noise": 0.01, "normalize_y": true})).fit(&data, &FitContext::sequential()).unwrap();
        let q = Points::from_rows(&[vec![1.0, 0.2]]);
        let plain = model.predict(&q, &PredictOptions::default(), Parallelism::Sequential);
        let noisy =
            model.predict(&q, &PredictOptions { include_noise: true, ..Default::default() }, Parallelism::Sequential);
        let dv = noisy.variance.unwrap()[0] - plain.variance.unwrap()[0];
        assert!((dv - 0.01 * std * std).abs() < 1e-9 * std * std);
        assert!((plain.values[0] - 100.0).abs() < 40.0, "prediction in y units: {}", plain.values[0]);
    }

    #[test]
    fn variance_is_never_negative_at_training_points() {
        let data = data();
        let model = gp(json!({"noise": 0.0})).fit(&data, &FitContext::sequential()).unwrap();
        let p = model.predict(&data.x, &PredictOptions::default(), Parallelism::Sequential);
        assert!(p.variance.unwrap().iter().all(|&v| v >= 0.0));
    }

    #[test]
    fn params_are_checked_and_echoed() {
        let g = gp(json!({"noise": {"value": 0.1, "bounds": [1e-3, 1.0]}, "seed": 3}));
        assert_eq!(
            g.params_json(),
            json!({"noise": {"value": 0.1, "bounds": [1e-3, 1.0]}, "normalize_y": false, "optimize": false, "restarts": 0, "seed": 3})
        );
        let k = crate::kernel::default_kernel();
        let e = GaussianProcess::from_json(k.clone(), &json!({"noise": -1.0}), "/params").unwrap_err();
        assert_eq!(e.pointer, "/params/noise");
        let e = GaussianProcess::from_json(k, &json!({"normalize_y": "yes"}), "/params").unwrap_err();
        assert_eq!((e.kind, e.pointer.as_str()), (crate::spec::ErrorKind::Shape, "/params/normalize_y"));
    }
}

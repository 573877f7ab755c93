//! Gaussian-process regression with fixed hyperparameters (Rasmussen & Williams, Alg. 2.1).
//!
//! Fit: L = chol(K + noise I), alpha = L^T \ (L \ y), log marginal likelihood
//! -1/2 y^T alpha - sum log L_ii - n/2 log 2 pi. Predict: mean K*^T alpha; variance
//! k(x*, x*) - |v|^2 with V = L \ K* (one blocked triangular solve for all queries),
//! clipped at 0. Matches scikit-learn's `GaussianProcessRegressor(optimizer=None)` with
//! `alpha = noise`, including `normalize_y` (centre, divide by the ddof-0 std).
//!
//! `likelihood.rs`: the log marginal likelihood, its gradient and the hyperparameter
//! search; `model.rs`: the fitted model (predict, append, storage); `sparse.rs`: the
//! nystrom form (Titsias' bound); `variational.rs`: the variational form (any of its
//! likelihoods, through `estimator/variational/`); `posterior.rs`: joint posterior
//! draws; `classifier/`: the GP classifier (Laplace, and its variational form).

pub mod classifier;
mod likelihood;
mod model;
pub mod posterior;
pub(crate) mod search;
pub mod sparse;
mod variational;

pub use model::GaussianProcessModel;

use super::{
    regularised_gram, Estimator, FitContext, FitError, Fitted, ModelKind, RestoreError, Restoring, RidgeForm, Spec,
    TrainingData, TrainingReport, TrainingSet,
};
use crate::estimator::approximation::nystrom::SearchSize;
use crate::estimator::approximation::Approximation;
use crate::estimator::approximation::Mode;
use crate::estimator::targets::outputs::Normalisation;
use crate::estimator::variational::{LikelihoodKind, Params as VariationalParams};
use crate::kernel::hyper::Hyper;
use crate::kernel::{Kernel, Points};
use crate::linalg::{Cholesky, Parallelism};
use crate::spec::{FieldError, ObjectReader};
use nalgebra::DMatrix;
use serde_json::{json, Value};

/// The most extra optimiser starts one fit may ask for: each costs a full search.
pub const MAX_RESTARTS: u64 = 1000;

/// Default bounds of `params.noise` when it is optimised.
pub const NOISE_BOUNDS: (f64, f64) = (1e-10, 1e5);

/// Checked parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct GaussianProcess {
    pub kernel: Kernel,
    /// Variance added to the diagonal of K (scikit-learn's `alpha`), >= 0. With
    /// `noise_rows` it is fixed at 0 and unused.
    pub noise: Hyper,
    /// A noise variance per training row (scikit-learn's `alpha` as an array): never
    /// optimised, in normalised units under `normalize_y`.
    pub noise_rows: Option<Vec<f64>>,
    pub normalize_y: bool,
    pub optimize: bool,
    pub restarts: u64,
    /// Draws the optimiser's restarts and the inducing points.
    pub seed: u64,
    pub approx: Approximation,
    /// The variational fit's own params (defaults unless `approx` is variational).
    pub variational: VariationalParams,
    /// Whether `noise` and `optimize` were given: a variational fit has its own defaults.
    pub given: Given,
}

/// Which params with a default of their own in a variational fit the request gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Given {
    pub noise: bool,
    pub optimize: bool,
}

impl GaussianProcess {
    pub fn from_json(kernel: Kernel, params: &Value, path: &str) -> Result<GaussianProcess, FieldError> {
        let mut obj = ObjectReader::new(params, path)?;
        let noise_ptr = obj.pointer("noise");
        let mut noise_rows = None;
        let given = Given { noise: obj.has("noise"), optimize: obj.has("optimize") };
        let noise = match obj.take("noise") {
            None => Hyper::new(1e-10),
            Some(Value::Array(list)) => {
                let mut rows = Vec::with_capacity(list.len());
                for (i, v) in list.iter().enumerate() {
                    match v.as_f64() {
                        Some(s) if s >= 0.0 && s.is_finite() => rows.push(s),
                        _ => {
                            return Err(FieldError::invalid(
                                format!("{noise_ptr}/{i}"),
                                "must be a non-negative number (a noise variance)",
                            ))
                        }
                    }
                }
                noise_rows = Some(rows);
                let mut fixed = Hyper::new(0.0);
                fixed.fixed = true;
                fixed
            }
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
        if restarts > MAX_RESTARTS {
            return Err(FieldError::invalid(obj.pointer("restarts"), format!("must be at most {MAX_RESTARTS}")));
        }
        let seed = obj.u64("seed")?.unwrap_or(0);
        let approx = Approximation::read(&mut obj)?;
        let variational = VariationalParams::read(
            &mut obj,
            approx.mode == Mode::Variational,
            &[LikelihoodKind::Gaussian, LikelihoodKind::StudentT, LikelihoodKind::Poisson],
        )?;
        obj.finish()?;
        let gp = GaussianProcess {
            kernel,
            noise,
            noise_rows,
            normalize_y,
            optimize,
            restarts,
            seed,
            approx,
            variational,
            given,
        };
        gp.check_variational()?;
        Ok(gp)
    }

    /// The noise variance on row i's diagonal entry.
    pub fn noise_at(&self, i: usize) -> f64 {
        self.noise_rows.as_ref().map_or(self.noise.value, |r| r[i])
    }

    /// A per-row noise list must have one entry per training row.
    pub fn check_data(&self, n: usize) -> Result<(), FieldError> {
        match &self.noise_rows {
            Some(r) if r.len() != n => Err(FieldError::invalid(
                "/params/noise",
                format!("has {} entries but there are {n} training rows", r.len()),
            )),
            _ => Ok(()),
        }
    }

    /// The same model for rows `rows` of its data (a fold's training rows).
    pub fn for_rows(&self, rows: &[usize]) -> GaussianProcess {
        let mut out = self.clone();
        if let Some(r) = &self.noise_rows {
            out.noise_rows = Some(rows.iter().map(|&i| r[i]).collect());
        }
        out
    }

    pub fn params_json(&self) -> Value {
        let mut out = json!({
            "noise": match &self.noise_rows {
                Some(r) => json!(r),
                None => self.noise.to_json(),
            },
            "normalize_y": self.normalize_y,
            "optimize": self.optimize,
            "restarts": self.restarts,
            "seed": self.seed,
        });
        let map = out.as_object_mut().expect("an object");
        self.approx.write_json(map);
        if self.approx.mode == Mode::Variational {
            if self.variational.likelihood == Some(LikelihoodKind::Poisson) {
                // The poisson likelihood has no noise (given, it is refused).
                map.remove("noise");
            }
            self.variational.write_json(map);
        }
        out
    }
}

/// Summed over the t outputs (columns of y): -1/2 y_k^T alpha_k - 1/2 log det K -
/// n/2 log 2 pi, with alpha = K^-1 y and K = L L^T.
fn log_marginal_likelihood_of(y: &DMatrix<f64>, alpha: &DMatrix<f64>, chol: &Cholesky) -> f64 {
    let (n, t) = (y.nrows() as f64, y.ncols() as f64);
    -0.5 * y.dot(alpha) - t * (0.5 * chol.log_det() + 0.5 * n * (2.0 * std::f64::consts::PI).ln())
}

impl Estimator for GaussianProcess {
    type Data = TrainingSet;
    type Fitted = GaussianProcessModel;

    fn fit(&self, data: &TrainingSet, ctx: &FitContext) -> Result<GaussianProcessModel, FitError> {
        ctx.cancel.check()?;
        ctx.progress.phase("factorize");
        let y = Normalisation::of(data, self.normalize_y).apply(data);
        let (spec, search) =
            if self.optimize { self.optimise(&data.x, &y, ctx)? } else { (self.clone(), TrainingReport::default()) };
        spec.fit_fixed(data, search, ctx)
    }
}

impl GaussianProcess {
    /// K + noise on the diagonal (lower triangle, for a Cholesky factorisation).
    pub fn regularised_gram(&self, x: &Points, par: Parallelism) -> DMatrix<f64> {
        match &self.noise_rows {
            None => regularised_gram(&self.kernel, x, self.noise.value, par),
            Some(r) => {
                let mut k = self.kernel.gram_lower(x, par);
                for (i, s) in r.iter().enumerate() {
                    k[(i, i)] += s;
                }
                k
            }
        }
    }

    /// The fit at this model's hyperparameters, with the contract's jitter rule.
    fn fit_fixed(
        &self,
        data: &TrainingSet,
        search: TrainingReport,
        ctx: &FitContext,
    ) -> Result<GaussianProcessModel, FitError> {
        let chol = Cholesky::factor_with_jitter_until(|| self.regularised_gram(&data.x, ctx.par), ctx.par, &|| {
            ctx.cancel.is_cancelled()
        })?;
        ctx.cancel.check()?;
        self.with_factor(chol, data.clone(), search, None, ctx.par)
    }

    /// The fitted model given the factor of K + noise I over `data.x`; `search` is the
    /// report of how the hyperparameters were found.
    fn with_factor(
        &self,
        chol: Cholesky,
        data: TrainingSet,
        search: TrainingReport,
        z: Option<DMatrix<f64>>,
        par: Parallelism,
    ) -> Result<GaussianProcessModel, FitError> {
        let norm = Normalisation::of(&data, self.normalize_y);
        let y = norm.apply(&data);
        // One factor, one right-hand side per output (each solved sequentially, so that
        // its rounding does not depend on the thread count): z = L^-1 y (grown with the
        // factor by an append), then alpha = L^-T z.
        let mut alpha = z.unwrap_or_else(|| {
            let mut z = y.clone();
            chol.forward_columns_in_place(&mut z, par);
            z
        });
        let z = alpha.as_slice().to_vec();
        chol.backward_columns_in_place(&mut alpha, par);
        let lml = log_marginal_likelihood_of(&y, &alpha, &chol);
        if !lml.is_finite() {
            // JSON has no infinities; and a likelihood that overflows says y needs scaling.
            return Err(FitError::Invalid(FieldError::invalid(
                "/y",
                "the targets are too large: the log marginal likelihood overflows; rescale y or set normalize_y",
            )));
        }
        let loo = self.approx.loo.then(|| super::LeaveOneOut::from_factor(&chol, &alpha, &norm.std, true, par));
        let report = TrainingReport { log_marginal_likelihood: Some(lml), jitter: Some(chol.jitter()), loo, ..search };
        Ok(GaussianProcessModel {
            spec: self.clone(),
            x: data.x,
            alpha: alpha.as_slice().to_vec(),
            chol,
            y: Some(data.y),
            outputs: data.outputs,
            z,
            norm,
            report,
        })
    }
}

impl Spec for GaussianProcess {
    crate::estimator::spec_basics!();

    fn kind(&self) -> ModelKind {
        ModelKind::GaussianProcess
    }

    fn check_data(&self, n: usize) -> Result<(), FieldError> {
        GaussianProcess::check_data(self, n)
    }

    fn fit_memory_estimate(&self, n: usize, d: usize) -> usize {
        if self.approx.mode == Mode::Variational {
            return self.variational.fit_memory_estimate(n, d, self.approx.m(n), 1, self.theta().len() + 1);
        }
        if self.approx.mode == Mode::Nystrom {
            let search = self
                .optimize
                .then(|| SearchSize { params: self.theta().len(), subset_rows: sparse::OPTIMIZE_SUBSET_ROWS });
            return crate::estimator::approximation::nystrom::fit_memory_estimate(n, d, self.approx.m(n), search);
        }
        // One n x n matrix (K, factorised in place) plus the data; the hyperparameter
        // search holds K, one gradient matrix per free hyperparameter, the inverse and W.
        let matrices = if self.optimize { self.theta().len() + 4 } else { 1 };
        matrices * n * n * 8 + n * d * 8 * 2
    }

    fn for_rows(&self, rows: &[usize]) -> Box<dyn Spec> {
        Box::new(GaussianProcess::for_rows(self, rows))
    }

    fn approximation(&self) -> Option<&Approximation> {
        Some(&self.approx)
    }

    fn approximation_mut(&mut self) -> Option<&mut Approximation> {
        Some(&mut self.approx)
    }

    fn check_targets(&self, data: &TrainingData) -> Result<(), FieldError> {
        self.check_variational_targets(data)
    }

    fn admit(&mut self, _: usize) -> Result<(), FieldError> {
        self.settle_variational();
        let rows = self.noise_rows.as_deref().filter(|_| self.approx.mode == Mode::Nystrom);
        if let Some(i) = rows.and_then(|r| r.iter().position(|s| s.is_nan() || *s <= 0.0)) {
            return Err(FieldError::invalid(
                format!("/params/noise/{i}"),
                "a nystrom gaussian_process needs every noise > 0 (the variational bound divides by it)",
            ));
        }
        Ok(())
    }

    fn fit_checked(&self, data: &TrainingData, ctx: &FitContext) -> Result<Box<dyn Fitted>, FitError> {
        let data = data.regression(self.kind())?;
        if self.approx.mode == Mode::Variational {
            return Ok(Box::new(self.fit_variational(data, ctx)?));
        }
        if self.approx.mode == Mode::Nystrom {
            return Ok(Box::new(sparse::SparseGpModel::fit(self, data, ctx)?));
        }
        Ok(Box::new(Estimator::fit(self, data, ctx)?))
    }

    fn ridge(&self) -> Option<RidgeForm> {
        // A noise per row is no single diagonal value to sweep.
        let fixed = self.approx.mode == Mode::Exact && !self.optimize && self.noise_rows.is_none();
        fixed.then(|| RidgeForm {
            kernel: self.kernel.clone(),
            diagonal: self.noise.value,
            normalize_y: self.normalize_y,
            gaussian_process: true,
        })
    }

    fn closed_form_loo(&self) -> bool {
        self.approx.mode == Mode::Exact && !self.optimize
    }
}

/// A stored Gaussian process, exact or sparse.
pub(crate) fn restore(mut r: Restoring) -> Result<Box<dyn Fitted>, RestoreError> {
    let spec = r.spec(GaussianProcess::from_json)?;
    if r.variational {
        return spec.restore_variational(r);
    }
    let x = r.points(false)?;
    let (outputs, alpha, y) = crate::estimator::targets::outputs::restore_columns(&mut r, x.n())?;
    let norm = Normalisation::restore(outputs, &r.fit, &mut r.arrays)?;
    if r.nystrom {
        let v = r.factor(x.n(), 0.0)?;
        return Ok(Box::new(sparse::SparseGpModel::restore(spec, x, alpha, v, (outputs, norm), r.report)));
    }
    let factor = r.factor(x.n(), r.fit.jitter)?;
    let z = r.arrays.take("z", Some(x.n() * outputs.t())).ok();
    Ok(Box::new(GaussianProcessModel::restore(spec, x, alpha, factor, y, z, (outputs, norm), r.report)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimator::{PredictOptions, Predictor};
    use nalgebra::DVector;
    use serde_json::json;

    fn data() -> TrainingSet {
        let rows: Vec<Vec<f64>> = (0..12).map(|i| vec![i as f64 * 0.5, (i as f64 * 0.7).sin()]).collect();
        let y = rows.iter().map(|r| r[0].cos() + 0.3 * r[1]).collect();
        TrainingSet::new(Points::from_rows(&rows), y)
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
        let (_, std) = crate::estimator::targets::outputs::normalisation(&data.y);
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

    /// The analytic LML gradient (kernel hyperparameters and the noise) agrees with
    /// central differences of the LML itself.
    #[test]
    fn lml_gradient_matches_finite_differences() {
        let data = data();
        // One output, and three (the likelihood and gradient summed over them).
        let three = DMatrix::from_fn(data.x.n(), 3, |i, k| data.y[i] * (k as f64 + 1.0) + (i * k) as f64 * 0.1);
        for y in [data.y_matrix(), three] {
            lml_gradient_at(&data, &y);
        }
    }

    fn lml_gradient_at(data: &TrainingSet, y: &DMatrix<f64>) {
        let k = Kernel::from_json(&json!({"type": "sum", "kernels": [
            {"type": "scale", "factor": 1.5, "kernel": {"type": "rbf", "length_scale": [0.8, 2.0]}},
            {"type": "matern", "nu": 2.5, "length_scale": 3.0}
        ]}))
        .unwrap();
        let gp = GaussianProcess::from_json(k, &json!({"noise": 0.05}), "/params").unwrap();
        let theta = gp.theta();
        assert_eq!(theta.len(), 5, "factor, 2 length scales, matern length scale, noise");
        let (_, grad) = gp.log_marginal_likelihood(&data.x, y, Parallelism::Sequential).unwrap();
        for j in 0..theta.len() {
            let h = 1e-5;
            let at = |d: f64| {
                let mut t = theta.clone();
                t[j] += d;
                gp.with_theta(&t).log_marginal_likelihood(&data.x, y, Parallelism::Sequential).unwrap().0
            };
            let fd = (at(h) - at(-h)) / (2.0 * h);
            assert!((grad[j] - fd).abs() <= 1e-6 * fd.abs().max(1.0), "theta[{j}]: analytic {} vs fd {fd}", grad[j]);
        }
    }

    #[test]
    fn optimise_improves_the_likelihood_and_reports_its_search() {
        let data = data();
        let k = Kernel::from_json(&json!({"type": "rbf", "length_scale": 20.0})).unwrap();
        let fixed = GaussianProcess::from_json(k.clone(), &json!({"noise": 1.0}), "/params").unwrap();
        let before = fixed.fit(&data, &FitContext::sequential()).unwrap().log_marginal_likelihood();
        let search = GaussianProcess::from_json(
            k,
            &json!({"noise": 1.0, "optimize": true, "restarts": 2, "seed": 1}),
            "/params",
        )
        .unwrap();
        let model = search.fit(&data, &FitContext::sequential()).unwrap();
        let r = model.report();
        assert!(model.log_marginal_likelihood() > before + 1.0, "{} vs {before}", model.log_marginal_likelihood());
        assert_eq!(r.converged, Some(true), "{r:?}");
        assert!(r.iterations.unwrap() > 0 && r.restarts_failed == Some(0), "{r:?}");
        // The fitted values are returned, and the gradient vanishes there (a local optimum
        // inside the bounds) or the hyperparameter is reported on its bound.
        let fitted = &model.spec;
        assert_ne!(fitted.noise.value, 1.0);
        let y = data.y_matrix();
        let (_, g) = fitted.log_marginal_likelihood(&data.x, &y, Parallelism::Sequential).unwrap();
        let at_bounds = r.hyperparameters_at_bounds.clone().unwrap();
        for (gi, p) in g.iter().zip(fitted.theta_pointers()) {
            assert!(gi.abs() < 1e-3 || at_bounds.contains(&p), "{p}: gradient {gi} ({r:?})");
        }
    }

    #[test]
    fn params_are_checked_and_echoed() {
        let g = gp(json!({"noise": {"value": 0.1, "bounds": [1e-3, 1.0]}, "seed": 3}));
        assert_eq!(
            g.params_json(),
            json!({"noise": {"value": 0.1, "bounds": [1e-3, 1.0]}, "normalize_y": false, "optimize": false, "restarts": 0, "seed": 3,
                   "approximation": "auto", "inducing_points": null, "inducing_selection": null, "loo": false})
        );
        let k = crate::kernel::default_kernel();
        let e = GaussianProcess::from_json(k.clone(), &json!({"noise": -1.0}), "/params").unwrap_err();
        assert_eq!(e.pointer, "/params/noise");
        let e = GaussianProcess::from_json(k.clone(), &json!({"restarts": 1001}), "/params").unwrap_err();
        assert_eq!((e.kind, e.pointer.as_str()), (crate::spec::ErrorKind::Invalid, "/params/restarts"));
        let e = GaussianProcess::from_json(k, &json!({"normalize_y": "yes"}), "/params").unwrap_err();
        assert_eq!((e.kind, e.pointer.as_str()), (crate::spec::ErrorKind::Shape, "/params/normalize_y"));
    }
}

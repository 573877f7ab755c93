//! The surrogate of a Bayesian optimisation: a Gaussian process on the unit cube, a
//! constant times Matern 5/2 with one length scale per dimension plus a noise variance,
//! on standardised values.
//!
//! Its hyperparameters are fitted by mercer's own `gaussian_process` likelihood (the
//! same log marginal likelihood and gradient an `optimize` fit climbs) plus priors, the
//! maximum a posteriori point found by multi-start L-BFGS-B. The priors are the gamma
//! priors Optuna's GPSampler puts on the same kernel: 1 / l^2 ~ Gamma(2, rate 0.5) per
//! dimension (mode l = 0.5 of the unit cube; short lengths are ruled out fast, long ones
//! only slowly), the output scale ~ Gamma(2, 1) and the noise ~ Gamma(1.1, 30) (the values
//! are standardised). Without priors a maximum-likelihood GP on few points often takes
//! tiny length scales or a noise that explains everything, and expected improvement then
//! sticks near the best point. Measured on Hartmann6 with 50 evaluations (BENCHMARKS.md):
//! Hvarfner et al.'s log-normal prior (BoTorch's default for high dimensions, a median
//! length of 10 cubes in 6-D) ended no better than random search; a log-normal centred
//! at half the cube left 5 seeds of 10 in the -3.20 local minimum; these leave 3, as
//! Optuna's.
//!
//! Predictions carry their gradient with respect to the query point, which the
//! acquisition's optimiser needs; the kernel is evaluated here directly for that.

use crate::estimator::GaussianProcess;
use crate::kernel::{Kernel, Points};
use crate::linalg::{Cholesky, Parallelism};
use crate::optimize::{minimize, Options, SplitMix64};
use nalgebra::{DMatrix, DVector};
use serde_json::{json, Value};

/// Search bounds of the hyperparameters (their own units).
const LENGTH_SCALE_BOUNDS: (f64, f64) = (1e-3, 1e3);
const SCALE_BOUNDS: (f64, f64) = (1e-3, 1e3);
const NOISE_BOUNDS: (f64, f64) = (1e-8, 1.0);
/// Starts of the hyperparameter search besides the previous optimum (or the prior's mode).
const RESTARTS: usize = 4;
/// Gamma priors (shape, rate) of 1 / l^2, the output scale and the noise variance.
const INVERSE_SQUARED_LENGTH_PRIOR: (f64, f64) = (2.0, 0.5);
const SCALE_PRIOR: (f64, f64) = (2.0, 1.0);
const NOISE_PRIOR: (f64, f64) = (1.1, 30.0);

/// Fitted hyperparameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Hyper {
    pub length_scales: Vec<f64>,
    pub scale: f64,
    pub noise: f64,
}

impl Hyper {
    /// The priors' modes: where a search without a previous optimum starts.
    pub fn prior_mode(dims: usize) -> Hyper {
        // Modes in log space: shape / rate for the scale and the noise, l = sqrt(rate / shape').
        let (k, r) = INVERSE_SQUARED_LENGTH_PRIOR;
        Hyper {
            length_scales: vec![(r / k).sqrt(); dims],
            scale: SCALE_PRIOR.0 / SCALE_PRIOR.1,
            noise: NOISE_PRIOR.0 / NOISE_PRIOR.1,
        }
    }

    /// What `training.search.surrogate` and a study report.
    pub fn to_json(&self) -> Value {
        json!({
            "kernel": "matern_5_2_ard",
            "length_scales": self.length_scales,
            "scale": self.scale,
            "noise": self.noise,
        })
    }
}

/// What the priors are, for reports.
pub fn priors_json(dims: usize) -> Value {
    let _ = dims;
    let g = |(shape, rate): (f64, f64)| json!({"gamma": {"shape": shape, "rate": rate}});
    json!({
        "inverse_squared_length_scale": g(INVERSE_SQUARED_LENGTH_PRIOR),
        "scale": g(SCALE_PRIOR),
        "noise": g(NOISE_PRIOR),
    })
}

/// log p(theta) + const of a Gamma(shape, rate) on v = e^(a theta) (a = 1 for the scale and
/// the noise, -2 for 1 / l^2 with theta = log l), the Jacobian included, and its derivative.
fn log_gamma_in_log((shape, rate): (f64, f64), a: f64, theta: f64) -> (f64, f64) {
    let v = (a * theta).exp();
    // log p(v) = (shape - 1) log v - rate v; |dv/dtheta| = |a| v.
    (shape * a * theta - rate * v, shape * a - rate * a * v)
}

/// The GP: training points (d x t, in the unit cube), standardised values, the factor of
/// K + noise I and alpha = (K + noise I)^-1 y.
#[derive(Debug, Clone)]
pub struct Surrogate {
    x: DMatrix<f64>,
    y: Vec<f64>,
    pub hyper: Hyper,
    chol: Cholesky,
    alpha: DVector<f64>,
}

/// mercer's gaussian_process for these hyperparameters (scale x Matern 5/2 ARD, noise).
fn gaussian_process(h: &Hyper) -> GaussianProcess {
    let kernel = json!({
        "type": "scale",
        "factor": {"value": h.scale, "bounds": [SCALE_BOUNDS.0, SCALE_BOUNDS.1]},
        "kernel": {
            "type": "matern",
            "nu": 2.5,
            "length_scale": {"value": h.length_scales, "bounds": [LENGTH_SCALE_BOUNDS.0, LENGTH_SCALE_BOUNDS.1]},
        },
    });
    let kernel = Kernel::from_json(&kernel).expect("the surrogate's kernel is well-formed");
    let params = json!({"noise": {"value": h.noise, "bounds": [NOISE_BOUNDS.0, NOISE_BOUNDS.1]}});
    GaussianProcess::from_json(kernel, &params, "/params").expect("the surrogate's params are well-formed")
}

/// The hyperparameters a search vector (log scale, log length scales, log noise: the
/// order of [`GaussianProcess::theta`] for this kernel) stands for.
fn hyper_of(theta: &[f64]) -> Hyper {
    let d = theta.len() - 2;
    Hyper {
        scale: theta[0].exp(),
        length_scales: theta[1..=d].iter().map(|t| t.exp()).collect(),
        noise: theta[d + 1].exp(),
    }
}

/// log prior density (up to a constant) of a search vector and its gradient.
fn log_prior(theta: &[f64]) -> (f64, Vec<f64>) {
    let d = theta.len() - 2;
    let mut grad = vec![0.0; theta.len()];
    let mut total = 0.0;
    for (i, &t) in theta.iter().enumerate() {
        let (f, g) = match i {
            0 => log_gamma_in_log(SCALE_PRIOR, 1.0, t),
            i if i <= d => log_gamma_in_log(INVERSE_SQUARED_LENGTH_PRIOR, -2.0, t),
            _ => log_gamma_in_log(NOISE_PRIOR, 1.0, t),
        };
        total += f;
        grad[i] = g;
    }
    (total, grad)
}

impl Surrogate {
    /// Fits the hyperparameters (MAP) to points `x` (d x t) and standardised values `y`,
    /// starting from `start` (the previous optimum) and from seeded draws; then
    /// factorises. None only when no start can be evaluated.
    pub fn fit(x: DMatrix<f64>, y: Vec<f64>, start: Option<&Hyper>, seed: u64) -> Option<Surrogate> {
        let d = x.nrows();
        let points = Points::from_columns(x.clone());
        let targets = DMatrix::from_column_slice(y.len(), 1, &y);
        let base = gaussian_process(start.cloned().as_ref().unwrap_or(&Hyper::prior_mode(d)));
        let bounds = base.theta_bounds();
        let objective = |theta: &[f64]| {
            let (lml, grad) =
                base.with_theta(theta).log_marginal_likelihood(&points, &targets, Parallelism::Sequential)?;
            let (lp, gp) = log_prior(theta);
            let f = -(lml + lp);
            f.is_finite().then(|| (f, grad.iter().zip(&gp).map(|(a, b)| -(a + b)).collect()))
        };
        let mut rng = SplitMix64::new(seed ^ 0x005E_ED0F_6A55);
        let mut starts = vec![base.theta()];
        // Restarts around the priors' modes, a unit (in log) either way.
        let mode = Hyper::prior_mode(d);
        for _ in 0..RESTARTS {
            let mut t = vec![mode.scale.ln() + rng.normal()];
            t.extend((0..d).map(|_| mode.length_scales[0].ln() + rng.normal()));
            t.push(mode.noise.ln() + rng.normal());
            for (v, (lo, hi)) in t.iter_mut().zip(&bounds) {
                *v = v.clamp(*lo, *hi);
            }
            starts.push(t);
        }
        let opts = Options { max_iterations: 200, max_evaluations: 300, ..Options::default() };
        let best = starts
            .iter()
            .filter_map(|s| minimize(objective, s, &bounds, &opts))
            .filter(|o| o.f.is_finite())
            .min_by(|a, b| a.f.total_cmp(&b.f))?;
        Surrogate::with_hyper(x, y, hyper_of(&best.x))
    }

    /// The GP with these hyperparameters (no search). None when K + noise I cannot be
    /// factorised.
    pub fn with_hyper(x: DMatrix<f64>, y: Vec<f64>, hyper: Hyper) -> Option<Surrogate> {
        let t = x.ncols();
        let mut k = DMatrix::from_fn(t, t, |i, j| kernel(&hyper, x.column(i).as_slice(), x.column(j).as_slice()).0);
        for i in 0..t {
            k[(i, i)] += hyper.noise;
        }
        let chol = Cholesky::factor(k, Parallelism::Sequential).ok()?;
        let alpha = chol.solve_vec(&DVector::from_column_slice(&y));
        Some(Surrogate { x, y, hyper, chol, alpha })
    }

    /// The same GP with one more point (hyperparameters unchanged): the factor grows by
    /// a row, O(t^2) instead of a new O(t^3) factorisation.
    pub fn extended(&self, point: &[f64], value: f64) -> Option<Surrogate> {
        let t = self.x.ncols();
        let cross = DMatrix::from_fn(t, 1, |i, _| kernel(&self.hyper, self.x.column(i).as_slice(), point).0);
        let corner = DMatrix::from_element(1, 1, self.hyper.scale + self.hyper.noise);
        let chol = self.chol.extend(cross, corner, Parallelism::Sequential).ok()?;
        let mut x = self.x.clone().resize_horizontally(t + 1, 0.0);
        x.column_mut(t).copy_from_slice(point);
        let mut y = self.y.clone();
        y.push(value);
        let alpha = chol.solve_vec(&DVector::from_column_slice(&y));
        Some(Surrogate { x, y, hyper: self.hyper.clone(), chol, alpha })
    }

    pub fn len(&self) -> usize {
        self.y.len()
    }

    pub fn is_empty(&self) -> bool {
        self.y.is_empty()
    }

    /// Latent means and variances at many query points (the columns of `q`), without
    /// gradients: one block of kernel values and one triangular solve with many
    /// right-hand sides, at the matrix-product rate rather than a solve per point.
    pub fn predict_many(&self, q: &DMatrix<f64>) -> Vec<(f64, f64)> {
        let t = self.x.ncols();
        let mut k = DMatrix::from_fn(t, q.ncols(), |i, j| {
            kernel(&self.hyper, q.column(j).as_slice(), self.x.column(i).as_slice()).0
        });
        let means = k.tr_mul(&self.alpha);
        self.chol.solve_l_in_place(&mut k, Parallelism::Sequential);
        (0..q.ncols()).map(|j| (means[j], (self.hyper.scale - k.column(j).norm_squared()).max(0.0))).collect()
    }

    /// Latent mean and variance at `q` (noise excluded), with their gradients in q.
    pub fn predict(&self, q: &[f64]) -> Prediction {
        let t = self.x.ncols();
        let d = q.len();
        let mut k = DVector::zeros(t);
        let mut dk = DMatrix::zeros(t, d);
        for i in 0..t {
            let (v, g) = kernel_with_gradient(&self.hyper, q, self.x.column(i).as_slice());
            k[i] = v;
            dk.row_mut(i).copy_from_slice(&g);
        }
        let mean = k.dot(&self.alpha);
        let dmean: Vec<f64> = (0..d).map(|j| dk.column(j).dot(&self.alpha)).collect();
        // v = L^-1 k, var = s - v'v; w = L^-T v = K^-1 k, dvar = -2 w' dk.
        let mut v = DMatrix::from_column_slice(t, 1, k.as_slice());
        self.chol.solve_l_in_place(&mut v, Parallelism::Sequential);
        let var = (self.hyper.scale - v.column(0).norm_squared()).max(0.0);
        self.chol.solve_lt_in_place(&mut v, Parallelism::Sequential);
        let dvar: Vec<f64> = (0..d).map(|j| -2.0 * dk.column(j).dot(&v.column(0))).collect();
        Prediction { mean, var, dmean, dvar }
    }
}

/// A prediction and its gradient in the query point.
#[derive(Debug, Clone)]
pub struct Prediction {
    pub mean: f64,
    pub var: f64,
    pub dmean: Vec<f64>,
    pub dvar: Vec<f64>,
}

/// scale x Matern 5/2 ARD at (a, b), and r.
fn kernel(h: &Hyper, a: &[f64], b: &[f64]) -> (f64, f64) {
    let r2: f64 = a.iter().zip(b).zip(&h.length_scales).map(|((x, y), l)| ((x - y) / l).powi(2)).sum();
    let r = r2.sqrt();
    let s5 = 5f64.sqrt() * r;
    (h.scale * (1.0 + s5 + 5.0 * r2 / 3.0) * (-s5).exp(), r)
}

/// The kernel at (q, b) and its gradient in q: d/dq_j = -(5/3) s (1 + sqrt5 r) e^(-sqrt5 r)
/// (q_j - b_j) / l_j^2 (finite, 0, at r = 0).
fn kernel_with_gradient(h: &Hyper, q: &[f64], b: &[f64]) -> (f64, Vec<f64>) {
    let (v, r) = kernel(h, q, b);
    let s5 = 5f64.sqrt() * r;
    let c = -(5.0 / 3.0) * h.scale * (1.0 + s5) * (-s5).exp();
    let g = q.iter().zip(b).zip(&h.length_scales).map(|((x, y), l)| c * (x - y) / (l * l)).collect();
    (v, g)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn points(d: usize, t: usize, seed: u64) -> DMatrix<f64> {
        let mut rng = SplitMix64::new(seed);
        DMatrix::from_fn(d, t, |_, _| rng.uniform(0.0, 1.0))
    }

    #[test]
    fn batched_predictions_equal_single_ones() {
        let x = points(3, 15, 2);
        let y: Vec<f64> = (0..15).map(|j| (3.0 * x[(0, j)]).sin() + x[(1, j)] * x[(2, j)]).collect();
        let gp = Surrogate::fit(x, y, None, 1).unwrap();
        let q = points(3, 40, 3);
        for (j, (mean, var)) in gp.predict_many(&q).into_iter().enumerate() {
            let p = gp.predict(q.column(j).as_slice());
            assert!((mean - p.mean).abs() < 1e-10 && (var - p.var).abs() < 1e-10, "{j}: {mean} {var} {p:?}");
        }
    }

    #[test]
    fn gradients_in_the_query_match_finite_differences() {
        let x = points(3, 12, 1);
        let y: Vec<f64> = x.column_iter().map(|c| (3.0 * c[0]).sin() + c[1] * c[2]).collect();
        let h = Hyper { length_scales: vec![0.3, 0.5, 0.8], scale: 1.3, noise: 1e-4 };
        let gp = Surrogate::with_hyper(x, y, h).unwrap();
        let q = [0.41, 0.27, 0.66];
        let p = gp.predict(&q);
        for j in 0..3 {
            let step = 1e-6;
            let (mut a, mut b) = (q, q);
            a[j] += step;
            b[j] -= step;
            let (pa, pb) = (gp.predict(&a), gp.predict(&b));
            let fd_mean = (pa.mean - pb.mean) / (2.0 * step);
            let fd_var = (pa.var - pb.var) / (2.0 * step);
            assert!((p.dmean[j] - fd_mean).abs() < 1e-6 * (1.0 + fd_mean.abs()), "dmean {j}: {} {fd_mean}", p.dmean[j]);
            assert!((p.dvar[j] - fd_var).abs() < 1e-6 * (1.0 + fd_var.abs()), "dvar {j}: {} {fd_var}", p.dvar[j]);
        }
    }

    #[test]
    fn a_grown_gp_equals_one_factorised_on_all_its_points() {
        let x = points(2, 9, 3);
        let y: Vec<f64> = x.column_iter().map(|c| c[0] - c[1]).collect();
        let h = Hyper { length_scales: vec![0.4, 0.7], scale: 1.0, noise: 1e-3 };
        let small = Surrogate::with_hyper(x.columns(0, 8).into_owned(), y[..8].to_vec(), h.clone()).unwrap();
        let grown = small.extended(x.column(8).as_slice(), y[8]).unwrap();
        let whole = Surrogate::with_hyper(x, y, h).unwrap();
        let q = [0.2, 0.9];
        let (a, b) = (grown.predict(&q), whole.predict(&q));
        assert!((a.mean - b.mean).abs() < 1e-10 && (a.var - b.var).abs() < 1e-10, "{a:?} {b:?}");
    }

    #[test]
    fn the_priors_gradient_matches_finite_differences() {
        let theta = [0.3, -0.9, 0.4, -3.0];
        let (_, g) = log_prior(&theta);
        for i in 0..theta.len() {
            let (mut a, mut b) = (theta, theta);
            a[i] += 1e-6;
            b[i] -= 1e-6;
            let fd = (log_prior(&a).0 - log_prior(&b).0) / 2e-6;
            assert!((g[i] - fd).abs() < 1e-6 * (1.0 + fd.abs()), "{i}: {} against {fd}", g[i]);
        }
        // The modes are where the gradient vanishes.
        let m = Hyper::prior_mode(2);
        let at = [m.scale.ln(), m.length_scales[0].ln(), m.length_scales[1].ln(), m.noise.ln()];
        assert!(log_prior(&at).1.iter().all(|v| v.abs() < 1e-12));
    }

    #[test]
    fn the_hyperparameter_fit_is_seeded_and_climbs_the_posterior() {
        let x = points(2, 20, 5);
        let y: Vec<f64> = x.column_iter().map(|c| (4.0 * c[0]).sin() + 0.1 * c[1]).collect();
        let a = Surrogate::fit(x.clone(), y.clone(), None, 7).unwrap();
        let b = Surrogate::fit(x.clone(), y.clone(), None, 7).unwrap();
        assert_eq!(a.hyper, b.hyper);
        // The first dimension matters more: its length scale is the shorter.
        assert!(a.hyper.length_scales[0] < a.hyper.length_scales[1], "{:?}", a.hyper);
        let score = |h: &Hyper| {
            let gp = gaussian_process(h);
            let theta = gp.theta();
            let t = DMatrix::from_column_slice(y.len(), 1, &y);
            gp.log_marginal_likelihood(&Points::from_columns(x.clone()), &t, Parallelism::Sequential).unwrap().0
                + log_prior(&theta).0
        };
        assert!(score(&a.hyper) >= score(&Hyper::prior_mode(2)) - 1e-9);
    }
}

#[cfg(test)]
mod consistency {
    use super::*;
    use crate::estimator::{Estimator, PredictOptions, Predictor, TrainingSet};

    /// The surrogate's own kernel is mercer's gaussian_process kernel: the same mean and
    /// variance at a query for the same hyperparameters.
    #[test]
    fn the_surrogate_predicts_as_mercers_gaussian_process() {
        let mut rng = SplitMix64::new(9);
        let x = DMatrix::from_fn(3, 15, |_, _| rng.uniform(0.0, 1.0));
        let y: Vec<f64> = x.column_iter().map(|c| (5.0 * c[0]).sin() + c[1] - c[2] * c[2]).collect();
        let h = Hyper { length_scales: vec![0.3, 0.8, 2.0], scale: 1.7, noise: 1e-3 };
        let ours = Surrogate::with_hyper(x.clone(), y.clone(), h.clone()).unwrap();
        let gp = gaussian_process(&h);
        let fitted =
            gp.fit(&TrainingSet::new(Points::from_columns(x), y), &crate::estimator::FitContext::sequential()).unwrap();
        let q = [0.2, 0.4, 0.9];
        let p = fitted.predict(
            &Points::from_columns(DMatrix::from_column_slice(3, 1, &q)),
            &PredictOptions::default(),
            Parallelism::Sequential,
        );
        let mine = ours.predict(&q);
        assert!((p.values[0] - mine.mean).abs() < 1e-9, "mean {} against {}", p.values[0], mine.mean);
        let var = p.variance.as_ref().unwrap()[0];
        assert!((var - mine.var).abs() < 1e-9, "variance {var} against {}", mine.var);
    }
}

//! Gaussian-process classification with the logistic likelihood and the Laplace
//! approximation, as scikit-learn's `GaussianProcessClassifier` (Rasmussen & Williams):
//!
//! - the posterior mode by Newton iterations in the stable form B = I + W^1/2 K W^1/2
//!   (Alg. 3.1), from f = 0, stopping when the approximate log marginal likelihood gains
//!   less than 1e-10 (converged) or after `max_iter` steps (not), reported in `training`;
//! - predictions (Alg. 3.2): latent mean K*'(t - pi) and variance k** - |L \ W^1/2 K*|^2,
//!   the sigmoid averaged over that Gaussian by the erf expansion of scikit-learn/GPML;
//! - with `optimize`, the approximate log marginal likelihood and its gradient (Alg. 5.1)
//!   maximised by the same search as GP regression (restarts drawn from `seed`).
//!
//! More than two classes: one machine per class against the rest, each with its own
//! hyperparameters, probabilities normalised over the classes; the reported log marginal
//! likelihood is the machines' mean (as scikit-learn).
//!
//! `variational.rs`: `approximation: "variational"` (bernoulli or softmax likelihood,
//! through `estimator/variational/`), which `auto` chooses where the exact fit is too big.

mod variational;

use crate::estimator::approximation::{self as approx, Approximation};
use crate::estimator::dual;
use crate::estimator::targets::labels::{ClassLabels, ClassificationSet};
use crate::estimator::variational::{LikelihoodKind, Params as VariationalParams};
use crate::estimator::{
    log1p_exp, sigmoid, Estimator, FitContext, FitError, Fitted, HyperSearch, ModelKind, PredictOptions, Prediction,
    Predictor, RestoreError, Restoring, Spec, TrainingData, TrainingReport,
};
use crate::kernel::{Kernel, Points};
use crate::linalg::{Cholesky, Parallelism};
use crate::spec::{FieldError, ObjectReader};
use nalgebra::{DMatrix, DVector};
use serde_json::{json, Value};

/// The logistic sigmoid as a combination of five error functions (Williams & Barber
/// 1998; the coefficients scikit-learn and GPML use): averaging it over a Gaussian
/// then has a closed form.
const LAMBDAS: [f64; 5] = [0.41, 0.4, 0.37, 0.44, 0.39];
const COEFS: [f64; 5] = [-1854.8214151, 3516.89893646, 221.29346712, 128.12323805, -2010.49422654];

#[derive(Debug, Clone, PartialEq)]
pub struct GpClassifier {
    pub kernel: Kernel,
    pub optimize: bool,
    pub restarts: u64,
    pub seed: u64,
    pub max_iter: u64,
    /// exact, or variational (`auto` resolves to one of them at admission).
    pub approx: Approximation,
    /// The variational fit's own params (defaults unless `approx` is variational).
    pub variational: VariationalParams,
    /// Whether `optimize` was given (a variational fit learns by default).
    pub optimize_given: bool,
}

impl GpClassifier {
    pub fn from_json(kernel: Kernel, params: &Value, path: &str) -> Result<GpClassifier, FieldError> {
        let mut obj = ObjectReader::new(params, path)?;
        let optimize_given = obj.has("optimize");
        let (restarts_given, max_iter_given) = (obj.has("restarts"), obj.has("max_iter"));
        let optimize = obj.bool("optimize")?.unwrap_or(false);
        let restarts = obj.u64("restarts")?.unwrap_or(0);
        if restarts > crate::estimator::gaussian_process::MAX_RESTARTS {
            return Err(FieldError::invalid(
                obj.pointer("restarts"),
                format!("must be at most {}", crate::estimator::gaussian_process::MAX_RESTARTS),
            ));
        }
        let seed = obj.u64("seed")?.unwrap_or(0);
        let max_iter = obj.u64("max_iter")?.unwrap_or(100);
        if !(1..=10_000).contains(&max_iter) {
            return Err(FieldError::invalid(obj.pointer("max_iter"), "must be in 1..=10000"));
        }
        let approx = Approximation::read_without_loo(&mut obj)?;
        let variational = VariationalParams::read(
            &mut obj,
            approx.mode == approx::Mode::Variational,
            &[LikelihoodKind::Bernoulli, LikelihoodKind::Softmax],
        )?;
        obj.finish()?;
        let spec = GpClassifier { kernel, optimize, restarts, seed, max_iter, approx, variational, optimize_given };
        spec.check_variational(restarts_given, max_iter_given)?;
        Ok(spec)
    }

    pub fn params_json(&self) -> Value {
        let mut out = json!({"optimize": self.optimize, "seed": self.seed});
        let map = out.as_object_mut().expect("an object");
        self.approx.write_json_without_loo(map);
        if self.approx.mode == approx::Mode::Variational {
            self.variational.write_json(map);
        } else {
            map.insert("restarts".into(), json!(self.restarts));
            map.insert("max_iter".into(), json!(self.max_iter));
        }
        out
    }

    /// K, B's factor and, searching, one gradient matrix per hyperparameter and R.
    pub fn fit_memory_estimate(&self, n: usize, d: usize) -> usize {
        let matrices = if self.optimize { self.kernel.theta().len() + 4 } else { 3 };
        matrices * n * n * 8 + n * d * 8 * 2
    }

    /// Alg. 3.1 for targets t in {0, 1}, from f = 0. The temporaries of the last Newton
    /// step, as scikit-learn keeps them for prediction and the gradient.
    fn posterior_mode(&self, k: &DMatrix<f64>, t: &[f64], par: Parallelism) -> Option<Mode> {
        let n = t.len();
        let mut f = DVector::zeros(n);
        let mut lml = f64::NEG_INFINITY;
        let mut mode = None;
        for iteration in 1..=self.max_iter {
            let pi: Vec<f64> = f.iter().map(|&v| sigmoid(v)).collect();
            let w_sr: Vec<f64> = pi.iter().map(|p| (p * (1.0 - p)).sqrt()).collect();
            let mut b_mat = DMatrix::from_fn(n, n, |i, j| w_sr[i] * k[(i, j)] * w_sr[j]);
            for i in 0..n {
                b_mat[(i, i)] += 1.0;
            }
            let l = Cholesky::factor(b_mat, par).ok()?;
            // b = W f + (t - pi); a = b - W^1/2 B^-1 W^1/2 K b; f = K a.
            let b = DVector::from_fn(n, |i, _| w_sr[i] * w_sr[i] * f[i] + (t[i] - pi[i]));
            let kb = k * &b;
            let mut v = DVector::from_fn(n, |i, _| w_sr[i] * kb[i]);
            v = l.solve_vec(&v);
            let a = DVector::from_fn(n, |i, _| b[i] - w_sr[i] * v[i]);
            f = k * &a;
            let log_lik: f64 = (0..n).map(|i| -log1p_exp(-(2.0 * t[i] - 1.0) * f[i])).sum();
            let new_lml = -0.5 * a.dot(&f) + log_lik - 0.5 * l.log_det();
            let gain = new_lml - lml;
            lml = new_lml;
            let converged = gain < 1e-10;
            mode = Some(Mode { lml, pi, w_sr, l, a, iterations: iteration, converged });
            if converged {
                break;
            }
        }
        mode
    }

    /// The approximate log marginal likelihood at `self`'s kernel and its gradient with
    /// respect to theta (Alg. 5.1).
    fn log_marginal_likelihood(&self, x: &Points, t: &[f64], par: Parallelism) -> Option<(f64, Vec<f64>)> {
        let n = t.len();
        let (k, dks) = self.kernel.gram_with_gradient(x, par);
        let m = self.posterior_mode(&k, t, par)?;
        // R = W^1/2 B^-1 W^1/2; C = L \ (W^1/2 K).
        let mut r = DMatrix::from_fn(n, n, |i, j| if i == j { m.w_sr[i] } else { 0.0 });
        m.l.solve_in_place(&mut r, par);
        for j in 0..n {
            for i in 0..n {
                r[(i, j)] *= m.w_sr[i];
            }
        }
        let mut c = DMatrix::from_fn(n, n, |i, j| m.w_sr[i] * k[(i, j)]);
        m.l.solve_l_in_place(&mut c, par);
        crate::linalg::clear_upper_vector_state();
        let s2 = DVector::from_fn(n, |j, _| {
            let cc: f64 = c.column(j).iter().map(|v| v * v).sum();
            -0.5 * (k[(j, j)] - cc) * (m.pi[j] * (1.0 - m.pi[j]) * (1.0 - 2.0 * m.pi[j]))
        });
        let resid = DVector::from_fn(n, |i, _| t[i] - m.pi[i]);
        let grad = dks
            .iter()
            .map(|dk| {
                // tr(R dK) = sum R_ij dK_ji, R and dK symmetric: no n x n product needed.
                let tr_r_dk: f64 = r.iter().zip(dk.iter()).map(|(x, y)| x * y).sum();
                let s1 = 0.5 * m.a.dot(&(dk * &m.a)) - 0.5 * tr_r_dk;
                let b = dk * &resid;
                let s3 = &b - &k * (&r * &b);
                s1 + s2.dot(&s3)
            })
            .collect();
        Some((m.lml, grad))
    }

    /// One machine: its kernel (searched or as given) and its mode.
    fn train_machine(&self, x: &Points, t: &[f64], ctx: &FitContext) -> Result<(Machine, TrainingReport), FitError> {
        let (kernel, mut report) = if self.optimize {
            let search = HyperSearch {
                theta: self.kernel.theta(),
                bounds: self.kernel.theta_bounds(),
                pointers: self
                    .kernel
                    .hyperparameters()
                    .into_iter()
                    .filter(|h| !h.fixed)
                    .map(|h| format!("/kernel{}", h.pointer))
                    .collect(),
                restarts: self.restarts,
                seed: self.seed,
            };
            let (theta, report) = search.maximise(ctx, |th| {
                GpClassifier { kernel: self.kernel.with_theta(th), ..self.clone() }
                    .log_marginal_likelihood(x, t, ctx.par)
            })?;
            (self.kernel.with_theta(&theta), report)
        } else {
            (self.kernel.clone(), TrainingReport::default())
        };
        ctx.cancel.check()?;
        let k = kernel.gram(x, ctx.par);
        let fixed = GpClassifier { kernel: kernel.clone(), ..self.clone() };
        let m = fixed.posterior_mode(&k, t, ctx.par).ok_or_else(|| {
            FitError::Optimisation(
                "I + W^1/2 K W^1/2 could not be factorised (a kernel with NaN or negative values?)".into(),
            )
        })?;
        report.log_marginal_likelihood = Some(m.lml);
        report.mode_iterations = Some(m.iterations);
        report.converged = Some(report.converged.unwrap_or(true) && m.converged);
        let resid = (0..t.len()).map(|i| t[i] - m.pi[i]).collect();
        Ok((Machine { kernel, resid, w_sr: m.w_sr, l: m.l }, report))
    }
}

struct Mode {
    lml: f64,
    pi: Vec<f64>,
    w_sr: Vec<f64>,
    l: Cholesky,
    a: DVector<f64>,
    /// Newton steps taken, and whether the last gained less than 1e-10 (else the
    /// `max_iter` budget ran out).
    iterations: u64,
    converged: bool,
}

/// What one binary machine keeps for prediction.
#[derive(Debug, Clone)]
struct Machine {
    kernel: Kernel,
    /// t - pi at the mode.
    resid: Vec<f64>,
    w_sr: Vec<f64>,
    /// Cholesky factor of I + W^1/2 K W^1/2.
    l: Cholesky,
}

impl Machine {
    /// P(positive) for each query point.
    fn probability(&self, x: &Points, q: &Points, par: Parallelism) -> Vec<f64> {
        let ks = self.kernel.cross(x, q, par);
        let mean: Vec<f64> = crate::estimator::weighted_columns(&ks, &self.resid);
        let mut v = DMatrix::from_fn(ks.nrows(), ks.ncols(), |i, j| self.w_sr[i] * ks[(i, j)]);
        // Each row's solve in an order of its own (the same bits alone or batched).
        crate::linalg::solve_lower_ordered(self.l.l(), &mut v, par);
        let prior = self.kernel.diag(q);
        (0..q.n())
            .map(|j| {
                let var = prior[j] - v.column(j).iter().map(|e| e * e).sum::<f64>();
                averaged_sigmoid(mean[j], var)
            })
            .collect()
    }
}

/// E[sigmoid(f)] for f ~ N(mean, var) by the erf expansion (scikit-learn's formula).
fn averaged_sigmoid(mean: f64, var: f64) -> f64 {
    let alpha = 1.0 / (2.0 * var);
    let total: f64 = LAMBDAS
        .iter()
        .zip(&COEFS)
        .map(|(&l, &c)| {
            let gamma = l * mean;
            let integral = (std::f64::consts::PI / alpha).sqrt() * libm::erf(gamma * (alpha / (alpha + l * l)).sqrt())
                / (2.0 * (var * 2.0 * std::f64::consts::PI).sqrt());
            c * integral
        })
        .sum();
    total + 0.5 * COEFS.iter().sum::<f64>()
}

#[derive(Debug, Clone)]
pub struct GpClassifierModel {
    spec: GpClassifier,
    classes: ClassLabels,
    x: Points,
    machines: Vec<Machine>,
    report: TrainingReport,
}

impl Estimator for GpClassifier {
    type Data = ClassificationSet;
    type Fitted = GpClassifierModel;

    fn fit(&self, data: &ClassificationSet, ctx: &FitContext) -> Result<GpClassifierModel, FitError> {
        let k = data.classes.len();
        let mut machines = Vec::new();
        let mut reports = Vec::new();
        for c in 0..dual::machines(k) {
            let t: Vec<f64> = dual::machine_labels(&data.y, k, c).iter().map(|&v| (v + 1.0) / 2.0).collect();
            let (m, r) = self.train_machine(&data.x, &t, ctx)?;
            machines.push(m);
            reports.push(r);
        }
        let lml = reports.iter().filter_map(|r| r.log_marginal_likelihood).sum::<f64>() / reports.len() as f64;
        let sum = |field: fn(&TrainingReport) -> Option<u64>| reports.iter().filter_map(field).sum::<u64>();
        let mode_iterations = sum(|r| r.mode_iterations);
        let mut report = TrainingReport {
            log_marginal_likelihood: Some(lml),
            // Every mode search, and with `optimize` every hyperparameter search, ended by
            // its stopping rule.
            converged: Some(reports.iter().all(|r| r.converged == Some(true))),
            // The outer search's steps when there is one, else the Newton steps.
            iterations: Some(if self.optimize { sum(|r| r.iterations) } else { mode_iterations }),
            mode_iterations: Some(mode_iterations),
            ..Default::default()
        };
        if self.optimize {
            report.evaluations = Some(sum(|r| r.evaluations));
            report.stop_reason = reports
                .iter()
                .find(|r| r.converged != Some(true))
                .or(reports.first())
                .and_then(|r| r.stop_reason.clone());
            report.restarts_failed = Some(sum(|r| r.restarts_failed));
            report.hyperparameters_at_bounds =
                Some(reports.iter().flat_map(|r| r.hyperparameters_at_bounds.clone().unwrap_or_default()).collect());
        }
        if machines.len() > 1 {
            report.class_kernels = Some(machines.iter().map(|m| m.kernel.to_json()).collect());
        }
        Ok(GpClassifierModel { spec: self.clone(), classes: data.classes.clone(), x: data.x.clone(), machines, report })
    }
}

impl GpClassifierModel {
    pub(in crate::estimator) fn store_into(&self, s: &mut crate::estimator::StoredFit) {
        s.put_points(&self.x);
        let cat = |f: &dyn Fn(&Machine) -> Vec<f64>| self.machines.iter().flat_map(f).collect::<Vec<f64>>();
        s.arrays = vec![
            ("theta".into(), cat(&|m| m.kernel.theta())),
            ("resid".into(), cat(&|m| m.resid.clone())),
            ("w_sr".into(), cat(&|m| m.w_sr.clone())),
            ("factor".into(), cat(&|m| m.l.l().as_slice().to_vec())),
        ];
    }

    pub(in crate::estimator) fn restore(
        spec: GpClassifier,
        classes: ClassLabels,
        x: Points,
        mut arrays: crate::estimator::StoredArrays,
        report: TrainingReport,
    ) -> Result<Self, crate::estimator::RestoreError> {
        let (machines, n, p) = (dual::machines(classes.len()), x.n(), spec.kernel.theta().len());
        let theta = arrays.take("theta", Some(machines * p))?;
        let resid = arrays.take("resid", Some(machines * n))?;
        let w_sr = arrays.take("w_sr", Some(machines * n))?;
        let factor = arrays.take("factor", Some(machines * n * n))?;
        let machines = (0..machines)
            .map(|c| Machine {
                kernel: spec.kernel.with_theta(&theta[c * p..(c + 1) * p]),
                resid: resid[c * n..(c + 1) * n].to_vec(),
                w_sr: w_sr[c * n..(c + 1) * n].to_vec(),
                l: Cholesky::from_factor(DMatrix::from_column_slice(n, n, &factor[c * n * n..(c + 1) * n * n]), 0.0),
            })
            .collect();
        Ok(GpClassifierModel { spec, classes, x, machines, report })
    }
}

impl Predictor for GpClassifierModel {
    fn predict(&self, x: &Points, opts: &PredictOptions, par: Parallelism) -> Prediction {
        let k = self.classes.len();
        let m = x.n();
        let mut probs = DMatrix::zeros(m, k);
        let block = crate::estimator::predict_block_rows(self.x.n());
        for start in (0..m).step_by(block) {
            let q = x.slice(start, block.min(m - start));
            let per_machine: Vec<Vec<f64>> = self.machines.iter().map(|mc| mc.probability(&self.x, &q, par)).collect();
            for j in 0..q.n() {
                let row = start + j;
                if k == 2 {
                    probs[(row, 1)] = per_machine[0][j];
                    probs[(row, 0)] = 1.0 - per_machine[0][j];
                } else {
                    let total: f64 = per_machine.iter().map(|p| p[j]).sum();
                    for c in 0..k {
                        probs[(row, c)] = per_machine[c][j] / total;
                    }
                }
            }
        }
        // The most probable class (the first of equals).
        let classes = (0..m).map(|r| crate::estimator::first_max(probs.row(r).iter().copied())).collect();
        Prediction { classes: Some(classes), probabilities: opts.probabilities.then_some(probs), ..Default::default() }
    }

    fn kernel(&self) -> &Kernel {
        // Several machines each have their own (listed in training.class_kernels).
        if self.machines.len() == 1 {
            &self.machines[0].kernel
        } else {
            &self.spec.kernel
        }
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

    fn support(&self) -> &Points {
        &self.x
    }

    fn classes(&self) -> Option<&ClassLabels> {
        Some(&self.classes)
    }

    fn memory_bytes(&self) -> usize {
        let n = self.x.n();
        self.x.memory_bytes() + self.machines.len() * (n * n + 2 * n) * 8
    }

    fn predict_cost(&self, m: usize, _opts: &PredictOptions) -> f64 {
        let n = self.x.n();
        (self.machines.len() * m * n) as f64 * (n as f64 + self.kernel().pair_cost(&self.x) + 2.0)
    }
}

impl Spec for GpClassifier {
    crate::estimator::spec_basics!();

    fn kind(&self) -> ModelKind {
        ModelKind::GpClassifier
    }

    fn fit_memory_estimate(&self, n: usize, d: usize) -> usize {
        if self.approx.mode == approx::Mode::Variational {
            return self.variational_memory_estimate(n, d);
        }
        GpClassifier::fit_memory_estimate(self, n, d)
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
        Ok(())
    }

    fn for_rows(&self, _: &[usize]) -> Box<dyn Spec> {
        Box::new(self.clone())
    }

    fn fit_checked(&self, data: &TrainingData, ctx: &FitContext) -> Result<Box<dyn Fitted>, FitError> {
        let data = data.classification(self.kind())?;
        if self.approx.mode == approx::Mode::Variational {
            return Ok(Box::new(self.fit_variational(data, ctx)?));
        }
        Ok(Box::new(Estimator::fit(self, data, ctx)?))
    }
}

impl Fitted for GpClassifierModel {
    crate::estimator::fitted_basics!();

    fn kind(&self) -> ModelKind {
        ModelKind::GpClassifier
    }
}

/// A stored Gaussian process classifier.
pub(crate) fn restore(mut r: Restoring) -> Result<Box<dyn Fitted>, RestoreError> {
    let spec = r.spec(GpClassifier::from_json)?;
    let classes = ClassLabels::restore(&r)?;
    if r.variational {
        return spec.restore_variational(r, classes);
    }
    let x = r.points(false)?;
    Ok(Box::new(GpClassifierModel::restore(spec, classes, x, r.arrays, r.report)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The erf expansion approximates E[sigmoid(f)] well: against a fine quadrature.
    #[test]
    fn averaged_sigmoid_matches_numerical_integration() {
        for (mean, var) in [(0.0f64, 1.0f64), (1.5, 0.3), (-2.0, 4.0), (0.7, 1e-4)] {
            let sd: f64 = var.sqrt();
            let steps = 20_000;
            let (lo, hi) = (mean - 10.0 * sd, mean + 10.0 * sd);
            let h = (hi - lo) / steps as f64;
            let want: f64 = (0..=steps)
                .map(|i| {
                    let f = lo + i as f64 * h;
                    let w = if i == 0 || i == steps { 0.5 } else { 1.0 };
                    w * sigmoid(f) * (-(f - mean).powi(2) / (2.0 * var)).exp()
                        / (2.0 * std::f64::consts::PI * var).sqrt()
                })
                .sum::<f64>()
                * h;
            let got = averaged_sigmoid(mean, var);
            assert!((got - want).abs() < 2e-3, "mean {mean} var {var}: {got} vs {want}");
        }
    }

    /// The gradient of the approximate log marginal likelihood against central
    /// differences.
    #[test]
    fn lml_gradient_matches_finite_differences() {
        let x = Points::from_columns(crate::test_support::seeded_matrix(2, 25, 4));
        let t: Vec<f64> = (0..25).map(|i| if x.point(i)[0] * x.point(i)[1] > 0.0 { 1.0 } else { 0.0 }).collect();
        let kernel = Kernel::from_json(&json!({"type": "product", "kernels": [{"type": "constant", "value": 2.0}, {"type": "rbf", "length_scale": [0.8, 1.3]}]})).unwrap();
        let spec = GpClassifier::from_json(kernel, &json!({"max_iter": 1000}), "/params").unwrap();
        let theta = spec.kernel.theta();
        let at = |th: &[f64]| {
            GpClassifier { kernel: spec.kernel.with_theta(th), ..spec.clone() }
                .log_marginal_likelihood(&x, &t, Parallelism::Sequential)
                .unwrap()
        };
        let (_, grad) = at(&theta);
        for j in 0..theta.len() {
            let h = 1e-5;
            let (mut up, mut down) = (theta.clone(), theta.clone());
            up[j] += h;
            down[j] -= h;
            let fd = (at(&up).0 - at(&down).0) / (2.0 * h);
            assert!((fd - grad[j]).abs() < 1e-5 * fd.abs().max(1.0), "theta {j}: {} vs {fd}", grad[j]);
        }
    }
}

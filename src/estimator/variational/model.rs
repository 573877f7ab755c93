//! A fitted variational GP: its inducing locations, K_MM's factor L, and per latent the
//! mean weights w_c = L^-T m_c and the lower triangular T_c = L P_c (P_c P_c' the precision
//! of q(v_c)), so that at a query x with k = k_M(x)
//!
//!   mu_c = k'w_c,   var_c = k(x, x) - |L^-1 k|^2 + |T_c^-1 k|^2
//!
//! (a'S a = |P^-1 a|^2 with a = L^-1 k, and P^-1 L^-1 = (L P)^-1). These arrays are what is
//! stored, so a restored model predicts bit for bit. Regression answers the likelihood's
//! predictive mean and variance (in y's units under `normalize_y`); classification the
//! class probabilities: bernoulli's closed form Phi(mu / sqrt(1 + var)), softmax's
//! expectation over fixed draws (the same for every row and every restore, so that a row's
//! answer does not depend on the rows beside it).

use super::likelihood::{Likelihood, LikelihoodKind};
use super::train::Trained;
use crate::estimator::targets::outputs::Normalisation;
use crate::estimator::{
    ClassLabels, Fitted, ModelKind, Outputs, PredictOptions, Prediction, Predictor, RestoreError, StoredArrays,
    StoredFit, TrainingReport,
};
use crate::kernel::{Kernel, Points};
use crate::linalg::{self, Cholesky, Parallelism};
use crate::optimize::SplitMix64;
use nalgebra::DMatrix;
use serde_json::Value;

/// Standard-normal draws per latent behind a softmax model's probabilities.
pub const PREDICT_SAMPLES: usize = 512;
/// The seed of those draws (fixed: they are part of the model's definition).
const PREDICT_STREAM: u64 = 0x50F7_4A11;

/// What the model answers: numbers (with their normalisation) or classes.
#[derive(Debug, Clone)]
pub enum Answer {
    Regression(Normalisation),
    Classes(ClassLabels),
}

#[derive(Debug, Clone)]
pub struct VariationalModel {
    kind: ModelKind,
    kernel: Kernel,
    params: Value,
    z: Points,
    lik: Likelihood,
    l: Cholesky,
    t: Vec<Cholesky>,
    /// M x latents, column-major.
    w: Vec<f64>,
    answer: Answer,
    report: TrainingReport,
    /// softmax: PREDICT_SAMPLES x latents standard normals, row-major.
    draws: Vec<f64>,
}

fn predict_draws(lik: &Likelihood) -> Vec<f64> {
    if lik.kind != LikelihoodKind::Softmax {
        return Vec::new();
    }
    let mut rng = SplitMix64::new(PREDICT_STREAM);
    (0..PREDICT_SAMPLES * lik.latents).map(|_| rng.normal()).collect()
}

impl VariationalModel {
    /// The model of a finished fit; `params` the fitted spec's JSON.
    pub fn new(
        kind: ModelKind,
        params: Value,
        fit: Trained,
        answer: Answer,
        report: TrainingReport,
    ) -> VariationalModel {
        let m = fit.z.n();
        let mut w = Vec::with_capacity(m * fit.likelihood.latents);
        let mut t = Vec::with_capacity(fit.likelihood.latents);
        for (mean, p) in fit.q.mean.iter().zip(&fit.q.chol) {
            let mut wc = DMatrix::from_column_slice(m, 1, mean.as_slice());
            fit.l.solve_lt_in_place(&mut wc, Parallelism::Sequential);
            w.extend(wc.iter());
            let mut lp = linalg::mul_ab(fit.l.l(), p.l(), Parallelism::Sequential);
            for j in 0..m {
                for i in 0..j {
                    lp[(i, j)] = 0.0;
                }
            }
            t.push(Cholesky::from_factor(lp, 0.0));
        }
        linalg::clear_upper_vector_state();
        let draws = predict_draws(&fit.likelihood);
        VariationalModel {
            kind,
            kernel: fit.kernel,
            params,
            z: fit.z,
            lik: fit.likelihood,
            l: fit.l,
            t,
            w,
            answer,
            report,
            draws,
        }
    }

    pub fn likelihood(&self) -> &Likelihood {
        &self.lik
    }

    pub(crate) fn store_into(&self, s: &mut StoredFit) {
        s.put_points(&self.z);
        s.alpha = self.w.clone();
        s.factor = self.l.l().as_slice().to_vec();
        s.jitter = self.l.jitter();
        s.arrays.push(("t".into(), self.t.iter().flat_map(|t| t.l().iter().copied()).collect()));
        if let Answer::Regression(norm) = &self.answer {
            norm.store(Outputs::Single, s);
        }
    }

    /// A stored model: `fit` holds the points, w, L and the arrays.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn restore(
        kind: ModelKind,
        kernel: Kernel,
        params: Value,
        lik: Likelihood,
        z: Points,
        fit: &mut StoredFit,
        arrays: &mut StoredArrays,
        answer: Answer,
        report: TrainingReport,
    ) -> Result<VariationalModel, RestoreError> {
        let (m, c) = (z.n(), lik.latents);
        if fit.alpha.len() != m * c {
            return Err(RestoreError(format!(
                "{} mean weights for {m} inducing points and {c} latents",
                fit.alpha.len()
            )));
        }
        if fit.factor.len() != m * m {
            return Err(RestoreError(format!("factor has {} entries, expected {}", fit.factor.len(), m * m)));
        }
        let l = Cholesky::from_factor(DMatrix::from_vec(m, m, std::mem::take(&mut fit.factor)), fit.jitter);
        let t_all = arrays.take("t", Some(m * m * c))?;
        let t = t_all.chunks(m * m).map(|t| Cholesky::from_factor(DMatrix::from_column_slice(m, m, t), 0.0)).collect();
        let draws = predict_draws(&lik);
        Ok(VariationalModel {
            kind,
            kernel,
            params,
            z,
            lik,
            l,
            t,
            w: std::mem::take(&mut fit.alpha),
            answer,
            report,
            draws,
        })
    }

    /// Each latent's mean (m x latents) and, when asked, variance at the query rows.
    fn latents(&self, q: &Points, variance: bool, par: Parallelism) -> (DMatrix<f64>, Option<DMatrix<f64>>) {
        let (m, c) = (self.z.n(), self.lik.latents);
        let k = self.kernel.cross(&self.z, q, par);
        let w = DMatrix::from_column_slice(m, c, &self.w);
        // Products and solves in an order of each row's own: a row's answer is the same
        // bits alone or batched with others (linalg::ordered).
        let mean = linalg::mul_at_b_ordered(&k, &w);
        if !variance {
            return (mean, None);
        }
        let mut a = k.clone();
        linalg::solve_lower_ordered(self.l.l(), &mut a, par);
        let prior = self.kernel.diag(q);
        let base: Vec<f64> = a.column_iter().zip(prior.iter()).map(|(a, p)| p - a.norm_squared()).collect();
        let mut var = DMatrix::zeros(q.n(), c);
        for (ci, t) in self.t.iter().enumerate() {
            let mut b = k.clone();
            linalg::solve_lower_ordered(t.l(), &mut b, par);
            for (i, col) in b.column_iter().enumerate() {
                var[(i, ci)] = (base[i] + col.norm_squared()).max(0.0);
            }
        }
        linalg::clear_upper_vector_state();
        (mean, Some(var))
    }

    /// The Gaussian likelihood's joint predictive covariance of f at the query rows:
    /// K** - A'A + B'B with A = L^-1 K_M*, B = T^-1 K_M*.
    fn covariance(&self, q: &Points, par: Parallelism) -> DMatrix<f64> {
        let k = self.kernel.cross(&self.z, q, par);
        let mut a = k.clone();
        self.l.solve_l_blocks(&mut a, par);
        let mut b = k;
        self.t[0].solve_l_blocks(&mut b, par);
        let mut cov = self.kernel.gram(q, par);
        linalg::sub_at_a(&mut cov, &a, par);
        cov += linalg::mul_at_b(&b, &b, par);
        linalg::clear_upper_vector_state();
        cov
    }

    fn softmax_probabilities(&self, mean: &DMatrix<f64>, var: &DMatrix<f64>) -> DMatrix<f64> {
        let (rows, c) = mean.shape();
        let mut out = DMatrix::zeros(rows, c);
        let mut f = vec![0.0; c];
        for i in 0..rows {
            let sd: Vec<f64> = (0..c).map(|k| var[(i, k)].sqrt()).collect();
            for s in 0..PREDICT_SAMPLES {
                let eps = &self.draws[s * c..(s + 1) * c];
                for k in 0..c {
                    f[k] = mean[(i, k)] + sd[k] * eps[k];
                }
                let top = f.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let total: f64 = f.iter().map(|v| (v - top).exp()).sum();
                for k in 0..c {
                    out[(i, k)] += (f[k] - top).exp() / total;
                }
            }
            for k in 0..c {
                out[(i, k)] /= PREDICT_SAMPLES as f64;
            }
        }
        out
    }
}

impl Predictor for VariationalModel {
    fn predict(&self, x: &Points, opts: &PredictOptions, par: Parallelism) -> Prediction {
        let block = crate::estimator::predict_block_rows(self.z.n());
        match &self.answer {
            Answer::Regression(norm) => {
                let scale = norm.std[0] * norm.std[0];
                if opts.covariance && self.lik.kind == LikelihoodKind::Gaussian {
                    let (mean, _) = self.latents(x, false, par);
                    let mut cov = self.covariance(x, par);
                    let noise = if opts.include_noise { self.lik.noise.value } else { 0.0 };
                    for i in 0..cov.nrows() {
                        cov[(i, i)] = cov[(i, i)].max(0.0) + noise;
                    }
                    cov *= scale;
                    return Prediction {
                        values: mean.iter().map(|v| norm.unscale(0, *v)).collect(),
                        variance: opts.variance.then(|| cov.diagonal().iter().copied().collect()),
                        covariance: Some(cov),
                        ..Default::default()
                    };
                }
                // The mean of poisson's rate needs the latent variance too.
                let need_var = opts.variance || self.lik.kind == LikelihoodKind::Poisson;
                let mut values = Vec::with_capacity(x.n());
                let mut variance = opts.variance.then(|| Vec::with_capacity(x.n()));
                for start in (0..x.n()).step_by(block) {
                    let q = x.slice(start, block.min(x.n() - start));
                    let (mean, var) = self.latents(&q, need_var, par);
                    for i in 0..q.n() {
                        let v = var.as_ref().map_or(0.0, |v| v[(i, 0)]);
                        let (mu, s2) = self.lik.predictive(mean[(i, 0)], v, opts.include_noise);
                        values.push(norm.unscale(0, mu));
                        if let Some(out) = variance.as_mut() {
                            out.push(s2 * scale);
                        }
                    }
                }
                Prediction { values, variance, ..Default::default() }
            }
            Answer::Classes(classes) => {
                let k = classes.len();
                let mut probs = DMatrix::zeros(x.n(), k);
                for start in (0..x.n()).step_by(block) {
                    let q = x.slice(start, block.min(x.n() - start));
                    let (mean, var) = self.latents(&q, true, par);
                    let var = var.expect("asked for");
                    if self.lik.kind == LikelihoodKind::Bernoulli {
                        for i in 0..q.n() {
                            let (p1, _) = self.lik.predictive(mean[(i, 0)], var[(i, 0)], false);
                            probs[(start + i, 1)] = p1;
                            probs[(start + i, 0)] = 1.0 - p1;
                        }
                    } else {
                        let p = self.softmax_probabilities(&mean, &var);
                        probs.rows_mut(start, q.n()).copy_from(&p);
                    }
                }
                let classes = (0..x.n()).map(|r| crate::estimator::first_max(probs.row(r).iter().copied())).collect();
                Prediction {
                    classes: Some(classes),
                    probabilities: opts.probabilities.then_some(probs),
                    ..Default::default()
                }
            }
        }
    }

    fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    fn params_json(&self) -> Value {
        self.params.clone()
    }

    fn report(&self) -> &TrainingReport {
        &self.report
    }

    fn report_mut(&mut self) -> &mut TrainingReport {
        &mut self.report
    }

    fn n_support(&self) -> usize {
        self.z.n()
    }

    fn support(&self) -> &Points {
        &self.z
    }

    fn classes(&self) -> Option<&ClassLabels> {
        match &self.answer {
            Answer::Classes(c) => Some(c),
            Answer::Regression(_) => None,
        }
    }

    fn memory_bytes(&self) -> usize {
        let m = self.z.n();
        self.z.memory_bytes() + (self.w.len() + m * m * (1 + self.t.len()) + self.draws.len()) * 8
    }

    fn predict_cost(&self, rows: usize, opts: &PredictOptions) -> f64 {
        let (m, rows, c) = (self.z.n() as f64, rows as f64, self.lik.latents as f64);
        let mut cost = rows * m * (self.kernel.pair_cost(&self.z) + 2.0 * c);
        if opts.variance || opts.covariance || self.classes().is_some() || self.lik.kind == LikelihoodKind::Poisson {
            cost += rows * m * m * (1.0 + c);
        }
        if opts.covariance {
            cost += 2.0 * rows * rows * m;
        }
        cost
    }
}

impl Fitted for VariationalModel {
    crate::estimator::fitted_basics!();

    fn kind(&self) -> ModelKind {
        self.kind
    }

    fn posterior_refused(&self) -> Option<String> {
        match (&self.answer, self.lik.kind) {
            (Answer::Regression(_), LikelihoodKind::Gaussian) => None,
            (_, kind) => Some(format!(
                "a joint predictive covariance is the gaussian likelihood's; this model's likelihood is {}",
                kind.name()
            )),
        }
    }
}

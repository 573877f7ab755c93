//! Sparse Gaussian-process regression: Titsias' variational free energy (VFE, GPflow's
//! SGPR) with M inducing points Z, for `gaussian_process` with `approximation: nystrom`.
//!
//! With K_MM = L L', G = A A' for A = L^-1 K_Mn (streamed as in `approximation/nystrom.rs`),
//! B = I + G / s (s the noise variance) = L_B L_B', and c = L_B^-1 L^-1 K_Mn y / s, the
//! collapsed bound is
//!
//!   F = -n/2 log 2 pi - sum log diag L_B - n/2 log s - y'y / (2s) + c'c / 2
//!       - tr(K_nn) / (2s) + tr(G) / (2s)
//!
//! = log N(y | 0, Q_nn + s I) - tr(K_nn - Q_nn) / (2s), Q_nn = K_nM K_MM^-1 K_Mn. The
//! predictive mean at x* is k*' w with w = L^-T L_B^-T c, its variance
//! k(x*, x*) - |L^-1 k*|^2 + |L_B^-1 L^-1 k*|^2 = k(x*, x*) - t'(I - B^-1) t, t = L^-1 k*.
//! With U upper triangular, U U' = I - B^-1, that is k(x*, x*) - |V^-1 k*|^2 for the
//! lower triangular V = L U'^-1, formed once at the fit: one triangular solve per query
//! block instead of two (1000 queries at M = 1024, two threads: 39 ms became 20.5).
//!
//! The gradient of F with respect to the log hyperparameters (for `optimize`) treats F
//! as a function of K_MM, P = K_Mn K_nM, v = K_Mn y, tr K_nn and s; the chain rule
//! through P and v needs the adjoint W = 2 (dF/dP) K_Mn + (dF/dv) y' of each block of
//! K_Mn, which a second pass over the rows contracts with the block's kernel derivatives. For n beyond
//! [`OPTIMIZE_SUBSET_ROWS`], the search runs on a seeded uniform subset of that many rows
//! (inducing points fixed) and the final fit on every row (`training.optimized_on_rows`).

use crate::estimator::approximation::nystrom::{factor_kmm, over_row_blocks, weighted_moments, whiten, Moments};
use crate::estimator::coefficients;
use crate::estimator::gaussian_process::GaussianProcess;
use crate::estimator::targets::outputs::{gp_prediction, mean_rows, Normalisation};
use crate::estimator::{
    Coefficients, FitContext, FitError, Fitted, ModelKind, Outputs, PredictOptions, Prediction, Predictor, Progress,
    TrainingReport, TrainingSet,
};
use crate::kernel::{Kernel, Points};
use crate::linalg::{self, Cholesky, Parallelism};
use crate::spec::FieldError;
use nalgebra::DMatrix;

/// The hyperparameter search of a sparse GP sees at most this many rows.
pub const OPTIMIZE_SUBSET_ROWS: usize = 20_000;

#[derive(Debug, Clone)]
pub struct SparseGpModel {
    spec: GaussianProcess,
    z: Points,
    /// The predictive variance is k(x*, x*) - |V^-1 k*|^2.
    v: Cholesky,
    /// The predictive mean is K_*M W (M x t column-major, one column per output).
    weights: Vec<f64>,
    outputs: Outputs,
    norm: Normalisation,
    report: TrainingReport,
}

/// A fit at fixed hyperparameters: the factors, the mean weights and the bound.
struct Fixed {
    v: Cholesky,
    jitter: f64,
    weights: Vec<f64>,
    bound: f64,
}

/// The noise the bound divides by and, with a noise per row, each row's 1/sqrt(s_i): the
/// rows are then whitened by their own noise (their columns of A and their targets
/// scaled), the bound's s is 1, and -1/2 sum log s_i replaces -n/2 log s (see
/// [`log_det_correction`]).
fn noise_of(spec: &GaussianProcess) -> Result<(f64, Option<Vec<f64>>), FitError> {
    if let Some(rows) = &spec.noise_rows {
        if let Some(i) = rows.iter().position(|s| s.is_nan() || *s <= 0.0) {
            return Err(FitError::Invalid(FieldError::invalid(
                format!("/params/noise/{i}"),
                "a nystrom gaussian_process needs every noise > 0 (the variational bound divides by it)",
            )));
        }
        return Ok((1.0, Some(rows.iter().map(|s| 1.0 / s.sqrt()).collect())));
    }
    let s = spec.noise.value;
    if s > 0.0 {
        Ok((s, None))
    } else {
        Err(FitError::Invalid(FieldError::invalid(
            "/params/noise",
            "a nystrom gaussian_process needs noise > 0 (the variational bound divides by it)",
        )))
    }
}

/// -1/2 sum_i log s_i = sum_i log(1/sqrt(s_i)) for a noise per row, else 0 (the bound's
/// own -n/2 log s term covers one noise).
fn log_det_correction(scale: Option<&[f64]>) -> f64 {
    scale.map_or(0.0, |s| s.iter().map(|v| v.ln()).sum())
}

/// What the bound and the mean need from the moments: L_B, C = L_B^-1 U / s (M x t),
/// and F summed over the t outputs (each output's bound has the same terms but its data
/// fit; `correction` is one output's [`log_det_correction`]).
struct Collapsed {
    lb: Cholesky,
    c: DMatrix<f64>,
    bound: f64,
}

fn collapse(stats: &Moments, s: f64, n: usize, correction: f64, par: Parallelism) -> Result<Collapsed, FitError> {
    let lb = factor_b(&stats.g, s, par)?;
    let mut c = stats.u.clone();
    lb.solve_l_in_place(&mut c, Parallelism::Sequential);
    c /= s;
    let (n, t) = (n as f64, stats.u.ncols() as f64);
    let per_output =
        -0.5 * n * (2.0 * std::f64::consts::PI).ln() - 0.5 * lb.log_det() - 0.5 * n * s.ln() - 0.5 * stats.trace / s
            + 0.5 * stats.g.trace() / s
            + correction;
    let bound = t * per_output - 0.5 * stats.yy / s + 0.5 * c.norm_squared();
    Ok(Collapsed { lb, c, bound })
}

fn fit_fixed(
    spec: &GaussianProcess,
    z: &Points,
    x: &Points,
    y: &DMatrix<f64>,
    ctx: &FitContext,
) -> Result<Fixed, FitError> {
    let (s, scale) = noise_of(spec)?;
    let kernel = &spec.kernel;
    let l = factor_kmm(kernel, z, ctx.par)?;
    ctx.progress.phase("kernel_pass");
    let stats = weighted_moments(kernel, z, &l, x, y, scale.as_deref(), ctx)?;
    ctx.progress.phase("solve");
    let correction = log_det_correction(scale.as_deref());
    let Collapsed { lb, mut c, bound } = collapse(&stats, s, x.n(), correction, ctx.par)?;
    lb.solve_lt_in_place(&mut c, Parallelism::Sequential);
    l.solve_lt_in_place(&mut c, Parallelism::Sequential);
    let v = variance_factor(&l, &lb, ctx.par)?;
    Ok(Fixed { v, jitter: l.jitter(), weights: c.as_slice().to_vec(), bound })
}

/// V = L U'^-1, lower triangular, with U U' = I - B^-1 (U upper triangular): then
/// V^-T V^-1 = L^-T (I - B^-1) L^-1 = K_MM^-1 - (K_MM + P/s)^-1. U is the lower Cholesky
/// factor R of I - B^-1 with rows and columns reversed (J R J), so V' = U^-1 L' =
/// J R^-1 J L'. I - B^-1 has the eigenvalues g/(g + s) of G's g: singular only where G
/// is, and then the jitter rule adds at most 1e-4 of its mean diagonal, which moves the
/// variance by no more than that times k(x*, x*).
fn variance_factor(l: &Cholesky, lb: &Cholesky, par: Parallelism) -> Result<Cholesky, FitError> {
    let m = l.n();
    let b_inv = symmetric_inverse(lb, par);
    let r = Cholesky::factor_with_jitter(
        || DMatrix::from_fn(m, m, |i, j| f64::from(u8::from(i == j)) - b_inv[(m - 1 - i, m - 1 - j)]),
        par,
    )?;
    // (J L')[i, j] = L[j, m - 1 - i].
    let mut y = DMatrix::from_fn(m, m, |i, j| l.l()[(j, m - 1 - i)]);
    r.solve_l_in_place(&mut y, par);
    // V[i, j] = (J Y)[j, i] = Y[m - 1 - j, i]; V is lower triangular.
    let v = DMatrix::from_fn(m, m, |i, j| if j <= i { y[(m - 1 - j, i)] } else { 0.0 });
    Ok(Cholesky::from_factor(v, 0.0))
}

/// B = I + G / s, factorised (B >= I, so only round-off could fail it; the jitter rule
/// covers that).
fn factor_b(g: &DMatrix<f64>, s: f64, par: Parallelism) -> Result<Cholesky, FitError> {
    Ok(Cholesky::factor_with_jitter(
        || {
            let mut b = g / s;
            for i in 0..b.nrows() {
                b[(i, i)] += 1.0;
            }
            b
        },
        par,
    )?)
}

/// The bound at `spec`'s hyperparameters on rows (x, y), and its gradient with respect
/// to `spec.theta()` (kernel hyperparameters, then log noise unless fixed). None where
/// it cannot be evaluated (the search steps back) or once the fit is cancelled.
///
/// With C_hat = L_B^-T C (M x t), D_P = t (I - B^-1) - C_hat C_hat' and A = L^-1 K_Mn,
/// the partial derivatives (summed over the t outputs) are dF/dK_MM = L^-T (D_P - t G/s)
/// L^-1 / 2, and through P = K_Mn K_nM and V = K_Mn Y the adjoint of K_Mn is
/// W = L^-T (D_P A + C_hat Y') / s; dF/dtr K_nn = -t/(2s). Everything is computed in the
/// whitened basis, as the fit is.
pub fn bound_and_gradient(
    spec: &GaussianProcess,
    z: &Points,
    x: &Points,
    y: &DMatrix<f64>,
    ctx: &FitContext,
) -> Option<(f64, Vec<f64>)> {
    let (s, scale) = noise_of(spec).ok()?;
    let scale = scale.as_deref();
    let kernel = &spec.kernel;
    let (n, m) = (x.n(), z.n());
    let t = y.ncols() as f64;
    let (kuu, dkuu) = kernel.gram_with_gradient(z, ctx.par);
    let l = Cholesky::factor_with_jitter(|| kuu.clone(), ctx.par).ok()?;
    let stats = weighted_moments(kernel, z, &l, x, y, scale, ctx).ok()?;
    let Collapsed { lb, c, bound } = collapse(&stats, s, n, log_det_correction(scale), ctx.par).ok()?;
    let mut c_hat = c;
    lb.solve_lt_in_place(&mut c_hat, Parallelism::Sequential);
    let b_inv = symmetric_inverse(&lb, ctx.par);
    let mut d_p = -&b_inv * t - &c_hat * c_hat.transpose();
    for i in 0..m {
        d_p[(i, i)] += t;
    }
    let d_uu = &d_p - &stats.g * (t / s);
    let p = kernel.theta().len();
    let c_hat_over_s = &c_hat / s;
    let d_p_over_s = &d_p / s;
    // The second pass: sum over blocks of <W_B, dK_MB/dtheta_j>, and
    // -1/(2s) sum_i dk(x_i, x_i)/dtheta_j.
    let parts = over_row_blocks(
        n,
        ctx,
        || vec![0.0; p],
        |acc, rows| {
            let q = x.slice(rows.start, rows.len());
            let (mut k, mut dk) = kernel.cross_with_gradient(z, &q, Parallelism::Sequential);
            l.solve_l_in_place(&mut k, Parallelism::Sequential);
            // With a noise per row every row's column (and its derivatives) and target
            // carry its 1/sqrt(s_i), as in the moments.
            let w = |i: usize| scale.map_or(1.0, |sc| sc[rows.start + i]);
            if scale.is_some() {
                for (i, mut col) in k.column_iter_mut().enumerate() {
                    col *= w(i);
                }
                for d in dk.iter_mut() {
                    for (i, mut col) in d.column_iter_mut().enumerate() {
                        col *= w(i);
                    }
                }
            }
            let mut adj = &d_p_over_s * &k;
            let mut yb = y.rows(rows.start, rows.len()).transpose();
            for (i, mut col) in yb.column_iter_mut().enumerate() {
                col *= w(i);
            }
            adj.gemm(1.0, &c_hat_over_s, &yb, 1.0);
            l.solve_lt_in_place(&mut adj, Parallelism::Sequential);
            linalg::clear_upper_vector_state();
            let (_, ddiag) = kernel.diag_with_gradient(&q);
            for j in 0..p {
                let diag_term: f64 = ddiag[j].iter().enumerate().map(|(i, d)| d * w(i) * w(i)).sum();
                acc[j] += adj.dot(&dk[j]) - 0.5 * t * diag_term / s;
            }
        },
    )
    .ok()?;
    let mut grad = vec![0.0; p];
    for part in parts {
        for (g, v) in grad.iter_mut().zip(part) {
            *g += v;
        }
    }
    for (g, d) in grad.iter_mut().zip(&dkuu) {
        *g += 0.5 * d_uu.dot(&whiten(&l, d, ctx.par));
    }
    if !spec.noise.fixed {
        // s dF/ds with K_MM, P, v and tr K_nn held; in the whitened basis
        // tr(Sigma^-1 P) = tr(B^-1 G), v'w = u'c_hat and w'Pw = c_hat' G c_hat.
        // Summed over the outputs: the terms without y count t times.
        let tr_binv_g = b_inv.dot(&stats.g);
        let uc = stats.u.dot(&c_hat);
        let gc = &stats.g * &c_hat;
        let cgc = c_hat.dot(&gc);
        let g_tr = stats.g.trace();
        grad.push(
            -0.5 * n as f64 * t
                + (t * (0.5 * tr_binv_g + 0.5 * stats.trace - 0.5 * g_tr) + 0.5 * stats.yy - uc + 0.5 * cgc) / s,
        );
    }
    (bound.is_finite() && grad.iter().all(|v| v.is_finite())).then_some((bound, grad))
}

/// (L L')^-1 with both triangles filled.
fn symmetric_inverse(l: &Cholesky, par: Parallelism) -> DMatrix<f64> {
    let mut inv = l.inverse_lower(par);
    let n = inv.nrows();
    for j in 0..n {
        for i in j + 1..n {
            inv[(j, i)] = inv[(i, j)];
        }
    }
    inv
}

impl SparseGpModel {
    /// Fits `spec` (approximation nystrom): inducing points, then the hyperparameter search
    /// if asked for (on a subset of rows beyond [`OPTIMIZE_SUBSET_ROWS`]), then the fit.
    pub fn fit(spec: &GaussianProcess, data: &TrainingSet, ctx: &FitContext) -> Result<SparseGpModel, FitError> {
        noise_of(spec)?;
        let (z, indices) =
            crate::estimator::approximation::nystrom::inducing_points(&spec.approx, spec.seed, &data.x, ctx)?;
        let mut model = Self::fit_at(spec, z, data, ctx)?;
        model.report.inducing_indices = indices;
        Ok(model)
    }

    /// As `fit`, with the inducing points given.
    pub fn fit_at(
        spec: &GaussianProcess,
        z: Points,
        data: &TrainingSet,
        ctx: &FitContext,
    ) -> Result<SparseGpModel, FitError> {
        noise_of(spec)?;
        let norm = Normalisation::of(data, spec.normalize_y);
        let y = norm.apply(data);
        let (fitted, search) = if spec.optimize {
            Self::search(spec, &z, &data.x, &y, ctx)?
        } else {
            (spec.clone(), TrainingReport::default())
        };
        let fixed = fit_fixed(&fitted, &z, &data.x, &y, ctx)?;
        if !fixed.bound.is_finite() {
            return Err(FitError::Invalid(FieldError::invalid(
                "/y",
                "the targets are too large: the evidence lower bound overflows; rescale y or set normalize_y",
            )));
        }
        let report = TrainingReport {
            evidence_lower_bound: Some(fixed.bound),
            ..crate::estimator::approximation::nystrom::report(z.n(), fixed.jitter).merge_search(search)
        };
        Ok(SparseGpModel { spec: fitted, z, v: fixed.v, weights: fixed.weights, outputs: data.outputs, norm, report })
    }

    fn search(
        spec: &GaussianProcess,
        z: &Points,
        x: &Points,
        y: &DMatrix<f64>,
        ctx: &FitContext,
    ) -> Result<(GaussianProcess, TrainingReport), FitError> {
        let n = x.n();
        let (xs, ys, on_rows, subset) = if n > OPTIMIZE_SUBSET_ROWS {
            // Another stream than the inducing points' draw from the same seed.
            let rows = crate::estimator::approximation::inducing::sample_rows(
                n,
                OPTIMIZE_SUBSET_ROWS,
                spec.seed ^ 0x0B7_1A1E_5EED,
            );
            let ys = y.select_rows(&rows);
            // A noise per row is taken at the subset's rows.
            (std::borrow::Cow::Owned(x.select(&rows)), std::borrow::Cow::Owned(ys), spec.for_rows(&rows), true)
        } else {
            (std::borrow::Cow::Borrowed(x), std::borrow::Cow::Borrowed(y), spec.clone(), false)
        };
        // The passes inside each evaluation must not overwrite the search's progress.
        let inner = FitContext { progress: Progress::default(), ..ctx.clone() };
        let search = crate::estimator::HyperSearch {
            theta: spec.theta(),
            bounds: spec.theta_bounds(),
            pointers: spec.theta_pointers(),
            restarts: spec.restarts,
            seed: spec.seed,
        };
        let (theta, mut report) =
            search.maximise(ctx, |t| bound_and_gradient(&on_rows.with_theta(t), z, &xs, &ys, &inner))?;
        if subset {
            report.optimized_on_rows = Some(OPTIMIZE_SUBSET_ROWS as u64);
        }
        Ok((spec.with_theta(&theta), report))
    }

    pub(crate) fn store_into(&self, s: &mut crate::estimator::StoredFit) {
        s.put_points(&self.z);
        s.alpha = self.weights.clone();
        s.factor = self.v.l().as_slice().to_vec();
        self.outputs.store(s);
        self.norm.store(self.outputs, s);
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn restore(
        spec: GaussianProcess,
        z: Points,
        weights: Vec<f64>,
        v: Cholesky,
        (outputs, norm): (Outputs, Normalisation),
        report: TrainingReport,
    ) -> SparseGpModel {
        SparseGpModel { spec, z, v, weights, outputs, norm, report }
    }

    pub fn evidence_lower_bound(&self) -> f64 {
        self.report.evidence_lower_bound.unwrap_or(f64::NAN)
    }

    /// The model's output axis.
    pub fn outputs(&self) -> crate::estimator::Outputs {
        self.outputs
    }

    pub fn spec(&self) -> &GaussianProcess {
        &self.spec
    }
}

impl TrainingReport {
    /// This report with a hyperparameter search's fields.
    fn merge_search(self, search: TrainingReport) -> TrainingReport {
        TrainingReport {
            iterations: search.iterations,
            evaluations: search.evaluations,
            stop_reason: search.stop_reason,
            converged: search.converged,
            restarts_failed: search.restarts_failed,
            hyperparameters_at_bounds: search.hyperparameters_at_bounds,
            optimized_on_rows: search.optimized_on_rows,
            ..self
        }
    }
}

impl Predictor for SparseGpModel {
    fn predict(&self, x: &Points, opts: &PredictOptions, par: Parallelism) -> Prediction {
        let extra = if opts.include_noise { self.spec.noise.value } else { 0.0 };
        let kernel: &Kernel = &self.spec.kernel;
        let t = self.outputs.t();
        // t = V^-1 K_M*: the covariance is K** - t't.
        let solve = |k: DMatrix<f64>| -> DMatrix<f64> {
            let mut t = k;
            self.v.solve_l_in_place(&mut t, par);
            linalg::clear_upper_vector_state();
            t
        };
        if opts.covariance {
            let k = kernel.cross(&self.z, x, par);
            let mean = mean_rows(&k, &self.weights, t);
            let a = solve(k);
            let mut cov = kernel.gram(x, par);
            linalg::sub_at_a(&mut cov, &a, par);
            return gp_prediction(self.outputs, &self.norm, mean, opts.variance, Some(cov), None, extra);
        }
        let block = crate::estimator::predict_block_rows(self.z.n());
        let mut mean = Vec::with_capacity(x.n() * t);
        let mut variance = opts.variance.then(|| Vec::with_capacity(x.n()));
        for start in (0..x.n()).step_by(block) {
            let q = x.slice(start, block.min(x.n() - start));
            let k = kernel.cross(&self.z, &q, par);
            mean.extend(mean_rows(&k, &self.weights, t));
            if let Some(var) = variance.as_mut() {
                // Each row's solve in an order of its own (the same bits alone or batched).
                let mut a = k;
                linalg::solve_lower_ordered(self.v.l(), &mut a, par);
                let prior = kernel.diag(&q);
                var.extend(a.column_iter().zip(prior.iter()).map(|(a, kxx)| kxx - a.norm_squared()));
            }
        }
        gp_prediction(self.outputs, &self.norm, mean, opts.variance, None, variance, extra)
    }

    crate::estimator::spec_and_report_accessors!();

    fn n_support(&self) -> usize {
        self.z.n()
    }

    fn support(&self) -> &Points {
        &self.z
    }

    fn memory_bytes(&self) -> usize {
        let m = self.z.n();
        self.z.memory_bytes() + self.weights.len() * 8 + m * m * 8
    }

    fn predict_cost(&self, m: usize, opts: &PredictOptions) -> f64 {
        let big_m = self.z.n() as f64;
        let m = m as f64;
        let mut cost = m * big_m * (self.kernel().pair_cost(&self.z) + 2.0 * self.outputs.t() as f64);
        if opts.variance || opts.covariance {
            cost += m * big_m * big_m;
        }
        if opts.covariance {
            cost += 2.0 * m * m * big_m;
        }
        cost
    }
}

impl Fitted for SparseGpModel {
    crate::estimator::fitted_basics!();

    fn kind(&self) -> ModelKind {
        ModelKind::GaussianProcess
    }

    fn outputs(&self) -> Outputs {
        self.outputs
    }

    fn has_row_noise(&self) -> bool {
        self.spec.noise_rows.is_some()
    }

    fn coefficients(&self) -> Option<Coefficients> {
        Some(coefficients::dual(&self.weights, self.z.n(), self.outputs, &self.report))
    }
}

//! `kernel_logistic` with `approximation: nystrom`: the exact model's objective with f in
//! the span of the inducing points,
//!   sum_i log(1 + exp(-y_i f_i)) + (lambda / 2) |w|^2,   f_i = w'phi_i + b,
//! b unpenalised, minimised by Newton's method in M + 1 dimensions with an Armijo
//! backtracking line search.
//!
//! A step takes one pass over the rows: the gradient Phi r and the Hessian Phi S Phi'
//! (S = diag(p_i (1 - p_i))) accumulated per block, O(n M^2). The step's change of the
//! scores, Phi'd, takes a second pass (a product with the cached features, or kernel
//! blocks without whitening), after which every trial of the line search is O(n).
//!
//! When the features do not all fit the budget (a million rows), the fit first solves
//! the problem on as many rows as fit, drawn with the seed, with lambda scaled by their
//! share of the rows (so that its optimum estimates the whole problem's), and starts the
//! whole problem's Newton steps there. Those take the gradient exactly, from kernel
//! blocks without whitening (Phi r = L^-1 K_Mn r), and whiten only the rows whose weight
//! p_i (1 - p_i) is above 1e-4 lambda / n: the rows left out change the Hessian by less
//! than 1e-4 of its smallest eigenvalue, which leaves the steps Newton's to that
//! accuracy and the optimum (where the exact gradient vanishes) unchanged. Confident rows,
//! most of them once the start is good, then cost a kernel block and no M^2 work.
//!
//! With M = n inducing points at the training rows, Phi = L' (in the rows' order) and
//! |w|^2 = a'Ka for w = L'a: the exact model's objective, and its optimum.

use crate::estimator::approximation::nystrom::{over_row_blocks, rank_update, whitened_block};
use crate::estimator::dual;
use crate::estimator::nystrom_features::{feature_budget, FeatureMap};
use crate::estimator::targets::labels::ClassificationSet;
use crate::estimator::{log1p_exp, sigmoid, FitContext, FitError, KernelLogistic, KernelLogisticModel};
use crate::kernel::Points;
use nalgebra::{DMatrix, DVector};

/// Newton stops when the largest gradient entry is below this, relative to n (as the
/// exact model).
const GRADIENT_TOL: f64 = 1e-9;

/// The sample's solve, only a start for the whole problem, stops at this (relative to its
/// rows): its last digits would be undone by the first step on every row.
const START_TOL: f64 = 1e-4;

pub fn fit(spec: &KernelLogistic, data: &ClassificationSet, ctx: &FitContext) -> Result<KernelLogisticModel, FitError> {
    let n = data.x.n();
    let budget = feature_budget(n, data.x.d(), spec.approx.m(n), ctx);
    fit_with_budget(spec, data, budget, ctx)
}

/// The fit holding every row's features when they fit `budget` bytes; otherwise a first
/// solve on a sample of rows, then Newton steps that recompute kernel blocks.
pub fn fit_with_budget(
    spec: &KernelLogistic,
    data: &ClassificationSet,
    budget: usize,
    ctx: &FitContext,
) -> Result<KernelLogisticModel, FitError> {
    let map = FeatureMap::fit(&spec.kernel, &spec.approx, spec.seed, &data.x, ctx)?;
    let n = data.y.len();
    let cache = map.all_features(&data.x, budget, ctx)?;
    // The rows of the first solve, and their features, shared by the machines.
    let sample = match cache {
        Some(_) => None,
        None => {
            let rows =
                (budget / (8 * map.width())).clamp(crate::estimator::approximation::nystrom::BLOCK_ROWS.min(n), n);
            let draw = crate::estimator::approximation::inducing::sample_rows(n, rows, spec.seed ^ WARM_SEED);
            ctx.progress.phase("kernel_pass");
            let phi = map.features(&data.x, &draw, ctx)?;
            Some((draw, phi))
        }
    };
    let k = data.classes.len();
    let machines = dual::machines(k);
    let mut w = DMatrix::zeros(map.width(), machines);
    let (mut iterations, mut converged) = (0, true);
    // The passes' block counts stay out of the progress, which counts Newton steps.
    let quiet = FitContext { progress: Default::default(), ..ctx.clone() };
    ctx.progress.phase("solve");
    for c in 0..machines {
        let y = dual::machine_labels(&data.y, k, c);
        let (wc, steps, ok) = match (&cache, &sample) {
            (Some(phi), _) => {
                let start = DVector::zeros(map.width());
                newton(&Cached(phi, &quiet), &y, spec.lambda, spec.max_iter, start, GRADIENT_TOL, ctx)?
            }
            (None, Some((draw, phi))) => {
                let ys: Vec<f64> = draw.iter().map(|&i| y[i]).collect();
                let share = draw.len() as f64 / n as f64;
                let start = DVector::zeros(map.width());
                let (w0, first, _) =
                    newton(&Cached(phi, &quiet), &ys, spec.lambda * share, spec.max_iter, start, START_TOL, ctx)?;
                let streamed =
                    Streamed { map: &map, x: &data.x, lambda: spec.lambda, sample: (draw, phi), ctx: &quiet };
                let (wc, steps, ok) = newton(&streamed, &y, spec.lambda, spec.max_iter, w0, GRADIENT_TOL, ctx)?;
                (wc, first + steps, ok)
            }
            (None, None) => unreachable!("either the features or a sample"),
        };
        w.set_column(c, &wc);
        iterations = iterations.max(steps);
        converged &= ok;
    }
    Ok(map.classifier(spec, data, &w, iterations, converged))
}

/// Mixed into the seed for the rows of the first solve.
const WARM_SEED: u64 = 0x10C1_57C0_0000_0031;

/// What a Newton step needs of the rows, given r_i = dloss/df_i and s_i = p_i (1 - p_i):
/// the gradient of the loss Phi r, the Hessian Phi S Phi' (both triangles), and Phi'd.
trait Rows {
    fn gradient(&self, r: &[f64]) -> Result<DVector<f64>, FitError>;
    /// `exact`: over every row; otherwise the rows may estimate it (a sample's, scaled).
    fn hessian(&self, s: &[f64], exact: bool) -> Result<DMatrix<f64>, FitError>;
    fn scores(&self, d: &DVector<f64>) -> Result<DVector<f64>, FitError>;
}

/// Every row's features, (M + 1) x n.
struct Cached<'a>(&'a DMatrix<f64>, &'a FitContext);

impl Rows for Cached<'_> {
    fn gradient(&self, r: &[f64]) -> Result<DVector<f64>, FitError> {
        Ok(self.0 * DVector::from_column_slice(r))
    }

    fn hessian(&self, s: &[f64], _exact: bool) -> Result<DMatrix<f64>, FitError> {
        weighted_gram(self.0, s, self.1)
    }

    fn scores(&self, d: &DVector<f64>) -> Result<DVector<f64>, FitError> {
        Ok(self.0.tr_mul(d))
    }
}

/// Phi S Phi' over the columns of `phi` with weights `s`, in row blocks.
fn weighted_gram(phi: &DMatrix<f64>, s: &[f64], ctx: &FitContext) -> Result<DMatrix<f64>, FitError> {
    let width = phi.nrows();
    let parts = over_row_blocks(
        s.len(),
        ctx,
        || DMatrix::zeros(width, width),
        |h, rows| {
            let mut block = phi.columns(rows.start, rows.len()).into_owned();
            for (mut col, si) in block.column_iter_mut().zip(&s[rows]) {
                col *= si.sqrt();
            }
            rank_update(h, &block);
        },
    )?;
    Ok(total(parts))
}

/// Kernel blocks recomputed per pass, and the features of a sample of the rows.
struct Streamed<'a> {
    map: &'a FeatureMap,
    x: &'a Points,
    lambda: f64,
    /// The rows of the first solve and their features.
    sample: (&'a [usize], &'a DMatrix<f64>),
    ctx: &'a FitContext,
}

impl Rows for Streamed<'_> {
    /// [L^-1 K_Mn r; sum r]: kernel blocks, no whitening.
    fn gradient(&self, r: &[f64]) -> Result<DVector<f64>, FitError> {
        let m = self.map.m();
        let parts = over_row_blocks(
            r.len(),
            self.ctx,
            || DVector::zeros(m + 1),
            |u, rows| {
                let q = self.x.slice(rows.start, rows.len());
                let k = self.map.kernel.cross(&self.map.z, &q, crate::linalg::Parallelism::Sequential);
                let rb = &r[rows];
                u.rows_mut(0, m).gemv(1.0, &k, &DVector::from_column_slice(rb), 1.0);
                u[m] += rb.iter().sum::<f64>();
            },
        )?;
        let mut g = parts.into_iter().reduce(|a, b| a + b).expect("at least one part");
        let mut gw = DMatrix::from_column_slice(m, 1, g.rows(0, m).as_slice());
        self.map.l.solve_l_in_place(&mut gw, crate::linalg::Parallelism::Sequential);
        crate::linalg::clear_upper_vector_state();
        g.rows_mut(0, m).copy_from(&gw.column(0));
        Ok(g)
    }

    /// Exact: every row whose weight is above the floor, whitened block by block. Else
    /// the sample's Hessian times n / (its rows).
    fn hessian(&self, s: &[f64], exact: bool) -> Result<DMatrix<f64>, FitError> {
        let n = s.len();
        if !exact {
            let (draw, phi) = self.sample;
            let sampled: Vec<f64> = draw.iter().map(|&i| s[i]).collect();
            return Ok(weighted_gram(phi, &sampled, self.ctx)? * (n as f64 / draw.len() as f64));
        }
        let (m, width) = (self.map.m(), self.map.width());
        let floor = HESSIAN_FLOOR * self.lambda / n as f64;
        let parts = over_row_blocks(
            n,
            self.ctx,
            || DMatrix::zeros(width, width),
            |h, rows| {
                let kept: Vec<usize> = rows.clone().filter(|&i| s[i] > floor).collect();
                if kept.is_empty() {
                    return;
                }
                let a = whitened_block(&self.map.kernel, &self.map.z, &self.map.l, &self.x.select(&kept));
                let mut phi = a.insert_row(m, 1.0);
                for (mut col, &i) in phi.column_iter_mut().zip(&kept) {
                    col *= s[i].sqrt();
                }
                rank_update(h, &phi);
            },
        )?;
        Ok(total(parts))
    }

    fn scores(&self, d: &DVector<f64>) -> Result<DVector<f64>, FitError> {
        let all: Vec<usize> = (0..self.x.n()).collect();
        let dm = DMatrix::from_column_slice(d.len(), 1, d.as_slice());
        Ok(self.map.scores(self.x, &all, &dm, self.ctx)?.column(0).into_owned())
    }
}

/// Rows whose Hessian weight p (1 - p) is at most this times lambda / n are left out of
/// the streamed Hessian (their total changes it by at most this times lambda).
const HESSIAN_FLOOR: f64 = 1e-4;

/// A step whose gradient is above this fraction of the previous one's was slow: the next
/// step takes the Hessian over every row.
const SLOW_STEP: f64 = 0.5;

/// The per-thread sums added in range order, mirrored.
fn total(parts: Vec<DMatrix<f64>>) -> DMatrix<f64> {
    let mut h = parts.into_iter().reduce(|a, b| a + b).expect("at least one part");
    crate::linalg::mirror_lower(&mut h, crate::linalg::Parallelism::Sequential);
    h
}

/// Newton's method from `w` on one machine (labels +-1), until the largest gradient entry
/// is at most `tol` n: weights (M + 1, the constant's last), steps, converged. The
/// gradient is always over every row; the Hessian may be estimated ([`Rows::hessian`])
/// until a step is slow.
fn newton(
    rows: &impl Rows,
    y: &[f64],
    lambda: f64,
    max_iter: u64,
    mut w: DVector<f64>,
    tol: f64,
    ctx: &FitContext,
) -> Result<(DVector<f64>, u64, bool), FitError> {
    let (n, width) = (y.len(), w.len());
    let m = width - 1;
    let objective = |w: &DVector<f64>, f: &[f64]| -> f64 {
        let loss: f64 = f.iter().zip(y).map(|(fi, yi)| log1p_exp(-yi * fi)).sum();
        loss + 0.5 * lambda * w.rows(0, m).norm_squared()
    };
    let mut f: Vec<f64> = if w.iter().all(|&v| v == 0.0) { vec![0.0; n] } else { rows.scores(&w)?.as_slice().to_vec() };
    let mut value = objective(&w, &f);
    let mut last = f64::INFINITY;
    for iter in 1..=max_iter {
        ctx.cancel.check()?;
        let started = std::time::Instant::now();
        // r_i = dloss/df_i = -y_i sigma(-y_i f_i); s_i = sigma(f_i) sigma(-f_i).
        let r: Vec<f64> = (0..n).map(|i| -y[i] * sigmoid(-y[i] * f[i])).collect();
        let mut g = rows.gradient(&r)?;
        for i in 0..m {
            g[i] += lambda * w[i];
        }
        let size = g.amax();
        if size <= tol * n as f64 {
            return Ok((w, iter - 1, true));
        }
        let exact = size > SLOW_STEP * last;
        last = size;
        let s: Vec<f64> = f.iter().map(|&fi| sigmoid(fi) * sigmoid(-fi)).collect();
        let mut h = rows.hessian(&s, exact)?;
        for i in 0..m {
            h[(i, i)] += lambda;
        }
        h[(m, m)] = h[(m, m)].max(1e-300);
        tracing::debug!(
            iter,
            exact,
            gradient = size,
            value,
            seconds = started.elapsed().as_secs_f64(),
            "kernel_logistic nystrom: step"
        );
        let minus_g: Vec<f64> = g.iter().map(|v| -v).collect();
        let d = crate::linalg::solve_square(&h, &minus_g)
            .ok_or_else(|| FitError::Optimisation("the Newton system is singular; increase lambda".into()))?;
        let d = DVector::from_vec(d);
        let df = rows.scores(&d)?;
        let slope = g.dot(&d);
        let mut t = 1.0;
        loop {
            let nw = &w + &d * t;
            let nf: Vec<f64> = f.iter().zip(df.iter()).map(|(fi, di)| fi + t * di).collect();
            let nv = objective(&nw, &nf);
            if nv <= value + 1e-4 * t * slope {
                (w, f, value) = (nw, nf, nv);
                break;
            }
            t /= 2.0;
            if t < 1e-12 {
                if !exact {
                    // An estimated Hessian's direction that does not descend: the next
                    // step takes the exact one.
                    last = 0.0;
                    break;
                }
                // No decrease along the Newton direction: at the optimum to round-off.
                return Ok((w, iter, true));
            }
        }
        ctx.progress.step(Some(value));
    }
    Ok((w, max_iter, false))
}

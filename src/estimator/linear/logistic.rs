//! `kernel_logistic` with `approximation: nystrom`: the exact model's objective with f in
//! the span of the inducing points,
//!   sum_i log(1 + exp(-y_i f_i)) + (lambda / 2) |w|^2,   f_i = w'phi_i + b,
//! b unpenalised, minimised by Newton's method in M + 1 dimensions with an Armijo
//! backtracking line search.
//!
//! A step takes one pass over the rows (their features from the cache, or recomputed
//! block by block): the gradient Phi r and the Hessian Phi S Phi' (S = diag(p_i (1 - p_i)))
//! accumulated per block, O(n M^2). The step's change of the scores, Phi'd, takes a second
//! pass without whitening (or a product with the cache), after which every trial of the
//! line search is O(n).
//!
//! With M = n inducing points at the training rows, Phi = L' (in the rows' order) and
//! |w|^2 = a'Ka for w = L'a: the exact model's objective, and its optimum.

use super::{FeatureMap, FEATURE_BUDGET};
use crate::estimator::dual::{self, DualClassifier};
use crate::estimator::labels::ClassificationSet;
use crate::estimator::nystrom::{mirror_lower, over_row_blocks, rank_update};
use crate::estimator::{log1p_exp, sigmoid, FitContext, FitError, KernelLogistic, KernelLogisticModel};
use crate::kernel::Points;
use nalgebra::{DMatrix, DVector};

/// Newton stops when the largest gradient entry is below this, relative to n (as the
/// exact model).
const GRADIENT_TOL: f64 = 1e-9;

pub fn fit(spec: &KernelLogistic, data: &ClassificationSet, ctx: &FitContext) -> Result<KernelLogisticModel, FitError> {
    fit_with_budget(spec, data, FEATURE_BUDGET, ctx)
}

/// The fit holding every row's features when they fit `budget` bytes, recomputing them
/// in blocks at every step otherwise.
pub fn fit_with_budget(
    spec: &KernelLogistic,
    data: &ClassificationSet,
    budget: usize,
    ctx: &FitContext,
) -> Result<KernelLogisticModel, FitError> {
    let map = FeatureMap::fit(&spec.kernel, &spec.approx, spec.seed, &data.x, ctx)?;
    let n = data.y.len();
    let cache = if map.bytes(n) <= budget {
        ctx.progress.phase("features");
        let all: Vec<usize> = (0..n).collect();
        Some(map.features(&data.x, &all, ctx)?)
    } else {
        None
    };
    ctx.progress.phase("newton");
    let k = data.classes.len();
    let machines = dual::machines(k);
    let mut w = DMatrix::zeros(map.width(), machines);
    let (mut iterations, mut converged) = (0, true);
    let problem = Problem { map: &map, cache: cache.as_ref(), x: &data.x, ctx };
    for c in 0..machines {
        let y = dual::machine_labels(&data.y, k, c);
        let (wc, steps, ok) = problem.newton(&y, spec.lambda, spec.max_iter)?;
        w.set_column(c, &wc);
        iterations = iterations.max(steps);
        converged &= ok;
    }
    Ok(DualClassifier {
        spec: spec.clone(),
        classes: data.classes.clone(),
        expansion: map.expansion(&w),
        report: map.report(iterations, converged),
    })
}

struct Problem<'a> {
    map: &'a FeatureMap,
    cache: Option<&'a DMatrix<f64>>,
    x: &'a Points,
    ctx: &'a FitContext,
}

/// One pass's sums: Phi r, Phi S Phi' (lower triangle while summing).
struct Sums {
    g: DVector<f64>,
    h: DMatrix<f64>,
}

impl Problem<'_> {
    /// Features of rows `rows` (a contiguous range): from the cache, or computed.
    fn block(&self, rows: std::ops::Range<usize>) -> DMatrix<f64> {
        match self.cache {
            Some(phi) => phi.columns(rows.start, rows.len()).into_owned(),
            None => {
                let a = crate::estimator::nystrom::whitened_block(
                    &self.map.kernel,
                    &self.map.z,
                    &self.map.l,
                    &self.x.slice(rows.start, rows.len()),
                );
                a.insert_row(self.map.m(), 1.0)
            }
        }
    }

    /// Phi r and Phi S Phi' over all rows.
    fn sums(&self, r: &[f64], s: &[f64]) -> Result<Sums, FitError> {
        let width = self.map.width();
        let init = || Sums { g: DVector::zeros(width), h: DMatrix::zeros(width, width) };
        let parts = over_row_blocks(r.len(), self.ctx, init, |acc, rows| {
            let mut phi = self.block(rows.clone());
            acc.g.gemv(1.0, &phi, &DVector::from_column_slice(&r[rows.clone()]), 1.0);
            for (mut col, si) in phi.column_iter_mut().zip(&s[rows]) {
                col *= si.sqrt();
            }
            rank_update(&mut acc.h, &phi);
        })?;
        let mut parts = parts.into_iter();
        let mut total = parts.next().expect("at least one part");
        for part in parts {
            total.g += part.g;
            total.h += part.h;
        }
        mirror_lower(&mut total.h);
        Ok(total)
    }

    /// Phi'd for every row.
    fn scores(&self, d: &DVector<f64>) -> Result<DVector<f64>, FitError> {
        match self.cache {
            Some(phi) => Ok(phi.tr_mul(d)),
            None => {
                let all: Vec<usize> = (0..self.x.n()).collect();
                let dm = DMatrix::from_column_slice(d.len(), 1, d.as_slice());
                Ok(self.map.scores(self.x, &all, &dm, self.ctx)?.column(0).into_owned())
            }
        }
    }

    /// One machine (labels +-1): weights (M + 1, the constant's last), Newton steps,
    /// converged.
    fn newton(&self, y: &[f64], lambda: f64, max_iter: u64) -> Result<(DVector<f64>, u64, bool), FitError> {
        let (n, width) = (y.len(), self.map.width());
        let m = width - 1;
        let objective = |w: &DVector<f64>, f: &[f64]| -> f64 {
            let loss: f64 = f.iter().zip(y).map(|(fi, yi)| log1p_exp(-yi * fi)).sum();
            loss + 0.5 * lambda * w.rows(0, m).norm_squared()
        };
        let mut w = DVector::zeros(width);
        let mut f = vec![0.0; n];
        let mut value = objective(&w, &f);
        for iter in 1..=max_iter {
            self.ctx.cancel.check()?;
            // r_i = dloss/df_i = -y_i sigma(-y_i f_i); s_i = sigma(f_i) sigma(-f_i).
            let r: Vec<f64> = (0..n).map(|i| -y[i] * sigmoid(-y[i] * f[i])).collect();
            let s: Vec<f64> = f.iter().map(|&fi| sigmoid(fi) * sigmoid(-fi)).collect();
            let Sums { mut g, mut h } = self.sums(&r, &s)?;
            for i in 0..m {
                g[i] += lambda * w[i];
                h[(i, i)] += lambda;
            }
            if g.amax() <= GRADIENT_TOL * n as f64 {
                return Ok((w, iter - 1, true));
            }
            h[(m, m)] = h[(m, m)].max(1e-300);
            let minus_g: Vec<f64> = g.iter().map(|v| -v).collect();
            let d = crate::linalg::solve_square(&h, &minus_g)
                .ok_or_else(|| FitError::Optimisation("the Newton system is singular; increase lambda".into()))?;
            let d = DVector::from_vec(d);
            let df = self.scores(&d)?;
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
                    // No decrease along the Newton direction: at the optimum to round-off.
                    return Ok((w, iter, true));
                }
            }
            self.ctx.progress.step(Some(value));
        }
        Ok((w, max_iter, false))
    }
}

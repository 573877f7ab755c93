//! Classifiers at scale: `svm` and `kernel_logistic` with `approximation: nystrom` fit a
//! linear model on Nystrom features phi(x) = [L^-1 k_M(x); 1], L the Cholesky factor of
//! K_MM (the exact fits' jitter rule) and the constant feature last.
//!
//! This module owns the feature map ([`FeatureMap`]) and the fitted form; `svm/nystrom.rs` is
//! the dual coordinate-descent C-SVM (LIBLINEAR's `-s 3 -B 1`), `logistic.rs` the Newton
//! solver of the penalised logistic model.
//!
//! The n x (M + 1) feature matrix is held whole only when it fits [`FEATURE_BUDGET`]
//! (1 GiB: 131,000 rows at M = 1024); otherwise the solvers recompute features block
//! by block, and where they only need scores f = w'phi(x) + b they take them without
//! whitening: w'L^-1 k_M(x) = (L^-T w)'k_M(x), a kernel block and a product, no
//! triangular solve.
//!
//! A fitted linear model is served as a dual expansion over the M inducing points:
//! f(x) = (L^-T w)'k_M(x) + b, the same [`DualExpansion`] the exact one-vs-rest
//! classifiers predict from.

use crate::estimator::approximation::nystrom::{self, BLOCK_ROWS};
use crate::estimator::dual::{DualClassifier, DualExpansion};
use crate::estimator::targets::labels::ClassificationSet;
use crate::estimator::{approximation::Approximation, FitContext, FitError};
use crate::kernel::{Kernel, Points};
use crate::linalg::{Cholesky, Parallelism};
use nalgebra::DMatrix;
use rayon::prelude::*;

/// Bytes of features a fit may hold at once (the whole matrix, or a chunk of it): at
/// M = 1024, 131,000 rows, and a fit on a million rows peaks near 1.4 GB.
pub const FEATURE_BUDGET: usize = 1 << 30;

/// phi(x) = [L^-1 k_M(x); 1] for a fit's inducing points.
pub struct FeatureMap {
    pub kernel: Kernel,
    pub z: Points,
    pub l: Cholesky,
    /// Positions of the inducing points among the training rows (uniform selection).
    pub indices: Option<Vec<u64>>,
}

impl FeatureMap {
    /// Chooses the inducing points and factors K_MM.
    pub fn fit(
        kernel: &Kernel,
        approx: &Approximation,
        seed: u64,
        x: &Points,
        ctx: &FitContext,
    ) -> Result<FeatureMap, FitError> {
        let (z, indices) = nystrom::inducing_points(approx, seed, x, ctx)?;
        ctx.progress.phase("factorize");
        let l = nystrom::factor_kmm(kernel, &z, ctx.par)?;
        Ok(FeatureMap { kernel: kernel.clone(), z, l, indices })
    }

    /// M.
    pub fn m(&self) -> usize {
        self.z.n()
    }

    /// Features per row, the constant included: M + 1.
    pub fn width(&self) -> usize {
        self.z.n() + 1
    }

    /// Bytes of the features of `rows` rows.
    pub fn bytes(&self, rows: usize) -> usize {
        rows * self.width() * 8
    }

    /// The features of rows `rows` of `x`: (M + 1) x rows.len(), column j phi(x_rows[j]).
    /// Parallel over blocks of rows when `par` is; stops early when cancelled.
    pub fn features(&self, x: &Points, rows: &[usize], ctx: &FitContext) -> Result<DMatrix<f64>, FitError> {
        let mut out = DMatrix::zeros(self.width(), rows.len());
        self.features_into(x, rows, out.as_mut_slice(), ctx)?;
        Ok(out)
    }

    /// [`FeatureMap::features`] written into `out` (column-major, (M + 1) x rows.len()).
    pub fn features_into(&self, x: &Points, rows: &[usize], out: &mut [f64], ctx: &FitContext) -> Result<(), FitError> {
        let w = self.width();
        assert_eq!(out.len(), w * rows.len(), "one column per row");
        let fill = |(b, chunk): (usize, &mut [f64])| {
            if ctx.cancel.is_cancelled() {
                return;
            }
            let block = &rows[b * BLOCK_ROWS..(b * BLOCK_ROWS + chunk.len() / w)];
            let a = nystrom::whitened_block(&self.kernel, &self.z, &self.l, &x.select(block));
            for (j, col) in chunk.chunks_mut(w).enumerate() {
                col[..w - 1].copy_from_slice(a.column(j).as_slice());
                col[w - 1] = 1.0;
            }
        };
        if ctx.par.is_parallel() {
            out.par_chunks_mut(w * BLOCK_ROWS).enumerate().for_each(fill);
        } else {
            out.chunks_mut(w * BLOCK_ROWS).enumerate().for_each(fill);
        }
        ctx.cancel.check()
    }

    /// Scores f_c(x_i) = w_c'phi(x_i) for rows `rows` of `x` and each column w_c of `w`
    /// ((M + 1) x machines), without whitening: (L^-T w_c)'k_M(x_i) + the constant's
    /// weight. rows.len() x machines.
    pub fn scores(
        &self,
        x: &Points,
        rows: &[usize],
        w: &DMatrix<f64>,
        ctx: &FitContext,
    ) -> Result<DMatrix<f64>, FitError> {
        let (v, bias) = self.dual(w);
        let machines = w.ncols();
        let mut out = DMatrix::zeros(rows.len(), machines);
        let parts: Vec<(usize, DMatrix<f64>)> = {
            let run = |b: usize| {
                if ctx.cancel.is_cancelled() {
                    return (b, DMatrix::zeros(0, 0));
                }
                let block = &rows[b * BLOCK_ROWS..((b + 1) * BLOCK_ROWS).min(rows.len())];
                let k = self.kernel.cross(&self.z, &x.select(block), Parallelism::Sequential);
                (b, k.tr_mul(&v))
            };
            let blocks = rows.len().div_ceil(BLOCK_ROWS);
            if ctx.par.is_parallel() {
                (0..blocks).into_par_iter().map(run).collect()
            } else {
                (0..blocks).map(run).collect()
            }
        };
        ctx.cancel.check()?;
        for (b, f) in parts {
            for c in 0..machines {
                for j in 0..f.nrows() {
                    out[(b * BLOCK_ROWS + j, c)] = f[(j, c)] + bias[c];
                }
            }
        }
        Ok(out)
    }

    /// The dual form of linear weights ((M + 1) x machines): V = L^-T W[..M] (M x
    /// machines) and each machine's constant weight.
    pub fn dual(&self, w: &DMatrix<f64>) -> (DMatrix<f64>, Vec<f64>) {
        let m = self.m();
        let mut v = w.rows(0, m).into_owned();
        self.l.solve_lt_in_place(&mut v, Parallelism::Sequential);
        crate::linalg::clear_upper_vector_state();
        (v, w.row(m).iter().copied().collect())
    }

    /// Every row's features when they fit `budget` bytes, else None.
    pub fn all_features(&self, x: &Points, budget: usize, ctx: &FitContext) -> Result<Option<DMatrix<f64>>, FitError> {
        if self.bytes(x.n()) > budget {
            return Ok(None);
        }
        ctx.progress.phase("kernel_pass");
        let all: Vec<usize> = (0..x.n()).collect();
        self.features(x, &all, ctx).map(Some)
    }

    /// The fitted classifier for weights W ((M + 1) x machines): the expansion over the
    /// inducing points, and the report of a fit on these features.
    pub fn classifier<S: Clone>(
        &self,
        spec: &S,
        data: &ClassificationSet,
        w: &DMatrix<f64>,
        iterations: u64,
        converged: bool,
    ) -> DualClassifier<S> {
        let (v, bias) = self.dual(w);
        let mut report = nystrom::report(self.m(), self.l.jitter());
        report.inducing_indices = self.indices.clone();
        report.iterations = Some(iterations);
        report.converged = Some(converged);
        DualClassifier {
            spec: spec.clone(),
            classes: data.classes.clone(),
            expansion: DualExpansion { points: self.z.clone(), coef: v.transpose(), bias },
            report,
        }
    }
}

/// Peak bytes of a Nystrom classifier's fit over n rows of d features with M inducing
/// points, holding at most [`FEATURE_BUDGET`] of features: the streamed kernel pass's,
/// plus the features held and the solvers' M x M (the least the fit can run in).
pub fn fit_memory_estimate(n: usize, d: usize, m: usize) -> usize {
    let features = ((m + 1) * 8 * n).min(FEATURE_BUDGET);
    besides_features(n, d, m) + features
}

fn besides_features(n: usize, d: usize, m: usize) -> usize {
    nystrom::fit_memory_estimate(n, d, m, None) + 4 * (m + 1) * (m + 1) * 8 + n * 4 * 8
}

/// Bytes of features a fit over n rows holds at once: every row's when that keeps the
/// fit within the context's memory (MERCER_MAX_FIT_BYTES), else [`FEATURE_BUDGET`] (then
/// the solvers stream blocks of rows). With the features whole the dual coordinate
/// descent and Newton's method run as on a small problem; streamed, rows still in play
/// are recomputed pass after pass, which on noisy labels (many rows inside the margin)
/// is most of them.
pub fn feature_budget(n: usize, d: usize, m: usize, ctx: &FitContext) -> usize {
    let whole = (m + 1).saturating_mul(8).saturating_mul(n);
    match ctx.memory {
        Some(limit) if (besides_features(n, d, m) as u64).saturating_add(whole as u64) <= limit => {
            whole.max(FEATURE_BUDGET)
        }
        _ => FEATURE_BUDGET,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimator::approximation::{Mode, Selection};
    use serde_json::json;

    /// Every row's features when the context's memory holds them with the rest of the
    /// fit, else the built-in budget (as without a limit).
    #[test]
    fn features_are_held_whole_when_the_memory_allows() {
        let (n, d, m) = (1_000_000, 10, 1024);
        let whole = (m + 1) * 8 * n;
        let with = |memory: Option<u64>| FitContext { memory, ..FitContext::sequential() };
        assert_eq!(feature_budget(n, d, m, &with(None)), FEATURE_BUDGET);
        assert_eq!(feature_budget(n, d, m, &with(Some(u64::MAX))), whole);
        let need = (besides_features(n, d, m) + whole) as u64;
        assert_eq!(feature_budget(n, d, m, &with(Some(need))), whole);
        assert_eq!(feature_budget(n, d, m, &with(Some(need - 1))), FEATURE_BUDGET);
        // Small fits keep the budget (whole features are under it anyway).
        assert_eq!(feature_budget(1000, d, 64, &with(Some(u64::MAX))), FEATURE_BUDGET);
        assert!(fit_memory_estimate(n, d, m) as u64 <= need);
    }

    /// The features computed in blocks equal the whitened kernel columns, and scores
    /// from the dual form equal w'phi.
    #[test]
    fn features_and_scores_agree() {
        let x = Points::from_columns(crate::test_support::seeded_matrix(3, 700, 4));
        let kernel = Kernel::from_json(&json!({"type": "rbf", "gamma": 0.7})).unwrap();
        let approx = Approximation {
            mode: Mode::Nystrom,
            inducing_points: Some(40),
            selection: Some(Selection::Uniform),
            loo: false,
        };
        let ctx = FitContext::new(Parallelism::Parallel);
        let map = FeatureMap::fit(&kernel, &approx, 3, &x, &ctx).unwrap();
        let rows: Vec<usize> = (0..700).rev().step_by(2).collect();
        let phi = map.features(&x, &rows, &ctx).unwrap();
        let mut direct = kernel.cross(&map.z, &x.select(&rows), Parallelism::Sequential);
        map.l.solve_l_in_place(&mut direct, Parallelism::Sequential);
        for j in 0..rows.len() {
            assert_eq!(phi[(40, j)], 1.0);
            for i in 0..40 {
                assert!((phi[(i, j)] - direct[(i, j)]).abs() < 1e-12);
            }
        }
        let w = DMatrix::from_fn(41, 2, |i, c| ((i * 7 + c * 3) % 11) as f64 / 11.0 - 0.5);
        let s = map.scores(&x, &rows, &w, &ctx).unwrap();
        let expected = phi.tr_mul(&w);
        assert!((s - expected).amax() < 1e-9);
    }
}

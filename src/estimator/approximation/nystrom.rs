//! Nystrom kernel ridge regression, and the streamed kernel statistics it shares with
//! the sparse GP (`gaussian_process/sparse.rs`).
//!
//! With M inducing points Z and K_MM = L L' (the exact fits' jitter rule), the fit never
//! holds K_nM: rows are taken in blocks of [`BLOCK_ROWS`]; each block's M x b matrix
//! K_MB is computed, whitened to A_B = L^-1 K_MB (a triangular solve), folded into
//! G = A A' (a symmetric rank-b update) and u = A y, and dropped. Memory is
//! O(nd + M^2 + M x block) per thread. Each thread takes one contiguous range of rows
//! and the partial sums are added in range order, so a fit is reproducible for a given
//! thread count.
//!
//! Whitening each block costs as much again as the rank update, and is what makes the
//! fit stable: G = L^-1 (K_Mn K_nM) L^-T formed from the product would carry that
//! product's rounding (relative to |K_nM|^2) times |L^-1|^2, which for the nearly
//! singular K_MM of close inducing points swamps lambda or the noise (a 1-D GP with a
//! long length scale failed so). A A' is positive semi-definite by construction and
//! bounded by tr K_nn whatever K_MM's condition.
//!
//! Kernel ridge then minimises |K_nM b - y|^2 + lambda b'K_MM b: with b = L^-T c this is
//! the ridge problem (G + lambda I) c = u, a Cholesky of a matrix whose eigenvalues are at
//! least lambda, never an inverse of K_MM. With M = n inducing points at the training
//! rows, G = L'L and b = (K + lambda I)^-1 y: the exact fit.

use super::Approximation;
use crate::estimator::{FitContext, FitError, TrainingReport};
use crate::kernel::{Kernel, Points};
use crate::linalg::{self, Cholesky, Parallelism};
use faer::linalg::matmul::triangular::BlockStructure;
use faer::{Accum, MatMut, MatRef, Par};
use nalgebra::DMatrix;
use rayon::prelude::*;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

/// Rows per streamed block (K_MB is M x 256: 2 MB at M = 1024, cache-resident). faer's
/// triangular solve and rank update of M = 1024 ran fastest here at 256 columns
/// (31 GFLOP/s per core each, against 25 at 1024).
pub(crate) const BLOCK_ROWS: usize = 256;

/// Runs `step` over rows 0..n in blocks of [`BLOCK_ROWS`]: one contiguous range of
/// blocks per thread (one thread when `ctx.par` is sequential), each with its own
/// accumulator from `init`. Returns the accumulators in range order. Stops early, with
/// `Cancelled`, once the fit is cancelled; counts blocks in `ctx.progress`.
pub(crate) fn over_row_blocks<A: Send>(
    n: usize,
    ctx: &FitContext,
    init: impl Fn() -> A + Sync,
    step: impl Fn(&mut A, Range<usize>) + Sync,
) -> Result<Vec<A>, FitError> {
    let blocks = n.div_ceil(BLOCK_ROWS);
    let parts = if ctx.par.is_parallel() { rayon::current_num_threads().clamp(1, blocks.max(1)) } else { 1 };
    let done = AtomicU64::new(0);
    let run = |part: usize| -> A {
        let mut acc = init();
        let (first, last) = (blocks * part / parts, blocks * (part + 1) / parts);
        for b in first..last {
            if ctx.cancel.is_cancelled() {
                break;
            }
            step(&mut acc, b * BLOCK_ROWS..((b + 1) * BLOCK_ROWS).min(n));
            ctx.progress.iteration(done.fetch_add(1, Ordering::Relaxed) + 1);
        }
        acc
    };
    let out = if parts > 1 { (0..parts).into_par_iter().map(run).collect() } else { vec![run(0)] };
    ctx.cancel.check()?;
    Ok(out)
}

/// The statistics of the training rows a Nystrom fit needs, in the basis whitened by
/// K_MM = L L'.
pub(crate) struct Moments {
    /// G = A A' with A = L^-1 K_Mn, M x M, both triangles filled.
    pub g: DMatrix<f64>,
    /// U = A Y, M x t (one column per output).
    pub u: DMatrix<f64>,
    /// sum over outputs of y'y.
    pub yy: f64,
    /// tr K_nn = sum_i k(x_i, x_i).
    pub trace: f64,
}

/// One block's whitened kernel matrix A_B = L^-1 K(Z, X_B).
pub(crate) fn whitened_block(kernel: &Kernel, z: &Points, l: &Cholesky, q: &Points) -> DMatrix<f64> {
    let mut k = kernel.cross(z, q, Parallelism::Sequential);
    l.solve_l_in_place(&mut k, Parallelism::Sequential);
    linalg::clear_upper_vector_state();
    k
}

/// One pass over the rows: G, U, y'y and tr K_nn for targets `y` (n x t); with `scale`,
/// row i's whitened column
/// and target scaled by `scale[i]` (the
/// square root of its sample weight, or 1/sqrt of its noise): G = A W A', u = A W y,
/// y'W y and sum_i w_i k(x_i, x_i).
pub(crate) fn weighted_moments(
    kernel: &Kernel,
    z: &Points,
    l: &Cholesky,
    x: &Points,
    y: &DMatrix<f64>,
    scale: Option<&[f64]>,
    ctx: &FitContext,
) -> Result<Moments, FitError> {
    let (m, t) = (z.n(), y.ncols());
    let init = || Moments { g: DMatrix::zeros(m, m), u: DMatrix::zeros(m, t), yy: 0.0, trace: 0.0 };
    let parts = over_row_blocks(x.n(), ctx, init, |acc, rows| {
        let q = x.slice(rows.start, rows.len());
        let mut a = whitened_block(kernel, z, l, &q);
        let mut yb = y.rows(rows.start, rows.len()).into_owned();
        if let Some(s) = scale {
            let s = &s[rows.clone()];
            for (mut col, si) in a.column_iter_mut().zip(s) {
                col *= *si;
            }
            for mut col in yb.column_iter_mut() {
                col.iter_mut().zip(s).for_each(|(v, si)| *v *= si);
            }
        }
        rank_update(&mut acc.g, &a);
        acc.u.gemm(1.0, &a, &yb, 1.0);
        acc.yy += yb.norm_squared();
        let kdiag = kernel.diag(&q);
        acc.trace += match scale {
            None => kdiag.sum(),
            Some(s) => kdiag.iter().zip(&s[rows.clone()]).map(|(k, si)| k * si * si).sum(),
        };
    })?;
    let mut parts = parts.into_iter();
    let mut total = parts.next().expect("at least one part");
    for part in parts {
        total.g += part.g;
        total.u += part.u;
        total.yy += part.yy;
        total.trace += part.trace;
    }
    crate::linalg::mirror_lower(&mut total.g, Parallelism::Sequential);
    Ok(total)
}

/// p (lower triangle) += k k'.
pub(crate) fn rank_update(p: &mut DMatrix<f64>, k: &DMatrix<f64>) {
    let (m, b) = k.shape();
    let kv = MatRef::from_column_major_slice(k.as_slice(), m, b);
    let dst = MatMut::from_column_major_slice_mut(p.as_mut_slice(), m, m);
    faer::linalg::matmul::triangular::matmul(
        dst,
        BlockStructure::TriangularLower,
        Accum::Add,
        kv,
        BlockStructure::Rectangular,
        kv.transpose(),
        BlockStructure::Rectangular,
        1.0,
        Par::Seq,
    );
    crate::linalg::clear_upper_vector_state();
}

/// L^-1 S L^-T for a symmetric S (M x M, computed once per fit), made exactly symmetric.
pub(crate) fn whiten(chol: &Cholesky, s: &DMatrix<f64>, par: Parallelism) -> DMatrix<f64> {
    let mut w = s.clone();
    chol.solve_l_in_place(&mut w, par);
    let mut g = w.transpose();
    chol.solve_l_in_place(&mut g, par);
    (&g + g.transpose()) * 0.5
}

/// K_MM = L L' by the exact fits' jitter rule.
pub(crate) fn factor_kmm(kernel: &Kernel, z: &Points, par: Parallelism) -> Result<Cholesky, FitError> {
    Ok(Cholesky::factor_with_jitter(|| kernel.gram(z, par), par)?)
}

/// The Nystrom kernel ridge weights b (M x t column-major, one column per output of `y`)
/// for inducing points `z`, and the jitter K_MM took.
pub(crate) fn ridge_weights(
    kernel: &Kernel,
    lambda: f64,
    z: &Points,
    x: &Points,
    y: &DMatrix<f64>,
    scale: Option<&[f64]>,
    ctx: &FitContext,
) -> Result<(Vec<f64>, f64), FitError> {
    let l = factor_kmm(kernel, z, ctx.par)?;
    ctx.progress.phase("kernel_pass");
    let stats = weighted_moments(kernel, z, &l, x, y, scale, ctx)?;
    ctx.progress.phase("solve");
    let b = Cholesky::factor_with_jitter(
        || {
            let mut b = stats.g.clone();
            for i in 0..b.nrows() {
                b[(i, i)] += lambda;
            }
            b
        },
        ctx.par,
    )?;
    let mut c = stats.u;
    b.solve_in_place(&mut c, Parallelism::Sequential);
    l.solve_lt_in_place(&mut c, Parallelism::Sequential);
    Ok((c.as_slice().to_vec(), l.jitter()))
}

/// The report of a Nystrom fit with M inducing points.
pub(crate) fn report(m: usize, jitter: f64) -> TrainingReport {
    TrainingReport {
        approximation: Some("nystrom".into()),
        inducing_points: Some(m as u64),
        jitter: Some(jitter),
        ..Default::default()
    }
}

/// A hyperparameter search's share of a Nystrom fit: its free hyperparameters and the
/// rows of the subset it runs on.
#[derive(Debug, Clone, Copy)]
pub struct SearchSize {
    pub params: usize,
    pub subset_rows: usize,
}

/// Bytes a Nystrom fit holds at its peak: the data (and the request's copy), each
/// thread's blocks (with `search`, the kernel derivatives: one block per free
/// hyperparameter) and M x M matrices, the search's subset, and k-means' sample.
pub(crate) fn fit_memory_estimate(n: usize, d: usize, m: usize, search: Option<SearchSize>) -> usize {
    let threads = rayon::current_num_threads().max(1);
    let data = n * (d + 2) * 8 * 2;
    let per_block = match search {
        Some(s) => s.params + 3,
        None => 2,
    };
    let blocks = threads * BLOCK_ROWS * m * 8 * per_block;
    let squares = (8 + threads + search.map_or(0, |s| s.params + 6)) * m * m * 8;
    let subset = search.map_or(0, |s| s.subset_rows.min(n) * (d + 1) * 8);
    let sample = crate::estimator::approximation::inducing::sample_bytes(n, d, m);
    data + blocks + squares + subset + sample
}

/// Inducing points for a fit with these approximation params, and with uniform
/// selection the positions of the training rows they are (for `training.inducing_indices`).
pub(crate) fn inducing_points(
    approx: &Approximation,
    seed: u64,
    x: &Points,
    ctx: &FitContext,
) -> Result<(Points, Option<Vec<u64>>), FitError> {
    let m = approx.m(x.n());
    if m > x.n() {
        return Err(FitError::Invalid(crate::spec::FieldError::invalid(
            "/params/inducing_points",
            format!("{m} inducing points requested but there are only {} training rows", x.n()),
        )));
    }
    crate::estimator::approximation::inducing::select(x, m, approx.selection_for(x.kind()), seed, ctx)
}

//! Choosing the M inducing points of a Nystrom fit from the training rows: a seeded
//! uniform draw of rows, or k-means centres (k-means++ from the seed, then Lloyd).
//!
//! k-means runs on a seeded uniform sample of at most [`kmeans_sample_rows`] rows
//! (max(32,768, 2 M, min(32 M, 2^30 / M))), for at most 20 Lloyd iterations: its cost is
//! rows x M x d per pass, and inducing points need centres that cover the data, not
//! converged ones (it is the fit, not the selection, that has to see every row). With
//! M = 1024 it took 6.8 s with 64 M rows and up to 100 iterations, a fifth of the
//! million-row fit. Up to M = 5792 the sample is 32 M rows; beyond, rows x M stays near
//! 2^30 (107,374 rows at M = 10,000), so that k-means costs the same few seconds at any
//! large M instead of growing as M^2 (at M = 10,000 over 32 M rows it would have taken
//! longer than the conjugate-gradient fit it serves).
//! Every step is deterministic for a given seed, whatever the thread count: rows are
//! assigned independently and centres are summed in row order.

use crate::estimator::approximation::Selection;
use crate::estimator::{FitContext, FitError};
use crate::kernel::Points;
use crate::linalg::Parallelism;
use crate::optimize::SplitMix64;
use faer::{Accum, MatMut, MatRef, Par};
use nalgebra::DMatrix;
use rayon::prelude::*;
use std::collections::HashSet;

/// k-means sees at most [`kmeans_sample_rows`] rows.
const KMEANS_ROWS_PER_CENTRE: usize = 32;
const KMEANS_MIN_SAMPLE: usize = 32_768;
/// Past M = 5792, k-means' sample shrinks so that rows x M stays at this.
const KMEANS_MAX_WORK: usize = 1 << 30;

/// The rows k-means runs on for M centres (before the cap at n).
pub fn kmeans_sample_rows(m: usize) -> usize {
    (KMEANS_ROWS_PER_CENTRE * m).min(KMEANS_MAX_WORK / m.max(1)).max(2 * m).max(KMEANS_MIN_SAMPLE)
}

/// Bytes k-means' sample holds (with its scaled copy) for n rows of d features.
pub fn sample_bytes(n: usize, d: usize, m: usize) -> usize {
    kmeans_sample_rows(m).min(n) * d * 8 * 2
}
const LLOYD_MAX_ITERATIONS: usize = 20;
/// Lloyd stops when the centres move by less than this times the data's mean feature
/// variance (squared distance, summed over centres), as scikit-learn's `tol`.
const LLOYD_TOLERANCE: f64 = 1e-4;
/// Bytes of point-to-centre products per block: 2 MiB, so that the argmin pass reads the
/// block from cache. At M = 10,000 the fixed 2048 rows it was before made 160 MB blocks,
/// written and read from memory, and Lloyd took 60 s on 100,000 rows.
const ASSIGN_BLOCK_BYTES: usize = 2 << 20;

/// Rows per block of the point-to-centre products for m centres.
fn assign_block(m: usize) -> usize {
    (ASSIGN_BLOCK_BYTES / (8 * m.max(1))).clamp(16, 2048)
}

/// M inducing points chosen from the rows of `x` (M <= n, checked by the caller), and
/// for uniform selection the rows' positions, in the order of the points.
pub fn select(
    x: &Points,
    m: usize,
    how: Selection,
    seed: u64,
    ctx: &FitContext,
) -> Result<(Points, Option<Vec<u64>>), FitError> {
    ctx.progress.phase("inducing_points");
    match how {
        Selection::Uniform => {
            let rows = sample_rows(x.n(), m, seed);
            Ok((x.select(&rows), Some(rows.iter().map(|&i| i as u64).collect())))
        }
        Selection::Kmeans => Ok((kmeans(x, m, seed, ctx)?, None)),
    }
}

/// `k` distinct row indices out of n, sorted, drawn with `seed` (Floyd's algorithm).
pub fn sample_rows(n: usize, k: usize, seed: u64) -> Vec<usize> {
    assert!(k <= n, "cannot draw {k} rows out of {n}");
    if k == n {
        return (0..n).collect();
    }
    let mut rng = SplitMix64::new(seed);
    let mut chosen = HashSet::with_capacity(k);
    for j in n - k..n {
        let t = (rng.next_u64() % (j as u64 + 1)) as usize;
        if !chosen.insert(t) {
            chosen.insert(j);
        }
    }
    let mut out: Vec<usize> = chosen.into_iter().collect();
    out.sort_unstable();
    out
}

fn squared_distance(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(u, v)| (u - v) * (u - v)).sum()
}

fn kmeans(x: &Points, m: usize, seed: u64, ctx: &FitContext) -> Result<Points, FitError> {
    let cap = kmeans_sample_rows(m);
    // The sample's seed differs from the centres' so that the two draws are independent.
    let sample = if x.n() > cap { x.select(&sample_rows(x.n(), cap, seed ^ 0x5EED_5A3B_1E00_0001)) } else { x.clone() };
    let mut centres = kmeans_plus_plus(&sample, m, seed, ctx.par);
    ctx.cancel.check()?;
    lloyd(&sample, &mut centres, ctx)?;
    Ok(centres)
}

/// k-means++ (Arthur & Vassilvitskii 2007): each new centre drawn with probability
/// proportional to its squared distance from the nearest centre so far.
pub(crate) fn kmeans_plus_plus(x: &Points, m: usize, seed: u64, par: Parallelism) -> Points {
    let (n, d) = (x.n(), x.d());
    let mut rng = SplitMix64::new(seed);
    let mut chosen = Vec::with_capacity(m);
    chosen.push((rng.next_u64() % n as u64) as usize);
    let mut nearest: Vec<f64> = (0..n).map(|i| squared_distance(x.point(i), x.point(chosen[0]))).collect();
    while chosen.len() < m {
        let total: f64 = nearest.iter().sum();
        let next = if total > 0.0 && total.is_finite() {
            let target = rng.uniform(0.0, total);
            let mut acc = 0.0;
            let mut pick = n - 1;
            for (i, w) in nearest.iter().enumerate() {
                acc += w;
                if acc > target {
                    pick = i;
                    break;
                }
            }
            pick
        } else {
            // Every row sits on a centre already (fewer distinct rows than M).
            (rng.next_u64() % n as u64) as usize
        };
        chosen.push(next);
        let c = x.point(next).to_vec();
        let update = |(i, v): (usize, &mut f64)| *v = v.min(squared_distance(x.point(i), &c));
        if par.is_parallel() && n * d > 1 << 16 {
            nearest.par_iter_mut().enumerate().for_each(update);
        } else {
            nearest.iter_mut().enumerate().for_each(update);
        }
    }
    x.select(&chosen)
}

/// For each row, the index of its nearest centre.
pub(crate) fn assign(x: &Points, centres: &Points, par: Parallelism) -> Vec<u32> {
    let (n, d, m) = (x.n(), x.d(), centres.n());
    let c_norms: Vec<f64> = (0..m).map(|j| centres.point(j).iter().map(|v| v * v).sum()).collect();
    let block_rows = assign_block(m);
    let cview = MatRef::from_column_major_slice(centres.as_matrix().as_slice(), d, m);
    let block = |b: usize| -> Vec<u32> {
        let start = b * block_rows;
        let rows = block_rows.min(n - start);
        let xview = MatRef::from_column_major_slice(&x.as_matrix().as_slice()[start * d..(start + rows) * d], d, rows);
        // dots[j, i] = c_j . x_i; |x_i - c_j|^2 = |x_i|^2 + |c_j|^2 - 2 dots, and |x_i|^2
        // does not change which j is nearest.
        let mut dots = DMatrix::<f64>::zeros(m, rows);
        let dst = MatMut::from_column_major_slice_mut(dots.as_mut_slice(), m, rows);
        faer::linalg::matmul::matmul(dst, Accum::Replace, cview.transpose(), xview, 1.0, Par::Seq);
        crate::linalg::clear_upper_vector_state();
        dots.column_iter().map(|col| nearest_centre(col.as_slice(), &c_norms)).collect()
    };
    let blocks = n.div_ceil(block_rows);
    let parts: Vec<Vec<u32>> = if par.is_parallel() {
        (0..blocks).into_par_iter().map(block).collect()
    } else {
        (0..blocks).map(block).collect()
    };
    parts.concat()
}

/// argmin_j |c_j|^2 - 2 dots_j, four lanes at a time (ties: the lowest j, as a scalar
/// scan finds it).
fn nearest_centre(dots: &[f64], c_norms: &[f64]) -> u32 {
    use wide::f64x4;
    let (mut best, mut at) = (f64x4::splat(f64::INFINITY), f64x4::splat(0.0));
    let mut index = f64x4::new([0.0, 1.0, 2.0, 3.0]);
    let full = dots.len() / 4 * 4;
    for (d, c) in dots[..full].chunks_exact(4).zip(c_norms[..full].chunks_exact(4)) {
        let v = f64x4::new(c.try_into().expect("4 lanes")) - f64x4::new(d.try_into().expect("4 lanes")) * 2.0;
        let better = v.simd_lt(best);
        best = better.select(v, best);
        at = better.select(index, at);
        index += 4.0;
    }
    let (best, at) = (best.to_array(), at.to_array());
    let mut winner = (f64::INFINITY, 0usize);
    for lane in 0..4 {
        let j = at[lane] as usize;
        if best[lane] < winner.0 || (best[lane] == winner.0 && j < winner.1) {
            winner = (best[lane], j);
        }
    }
    for j in full..dots.len() {
        let v = c_norms[j] - 2.0 * dots[j];
        if v < winner.0 {
            winner = (v, j);
        }
    }
    winner.1 as u32
}

/// Lloyd's iterations from `centres` until the assignment is stable, the centres move
/// less than the tolerance, or the iteration cap. An empty cluster keeps its centre.
pub(crate) fn lloyd(x: &Points, centres: &mut Points, ctx: &FitContext) -> Result<(), FitError> {
    let (n, d, m) = (x.n(), x.d(), centres.n());
    let mean = x.as_matrix().column_mean();
    let variance: f64 =
        (0..n).map(|i| squared_distance(x.point(i), mean.as_slice())).sum::<f64>() / (n as f64 * d as f64);
    let tolerance = LLOYD_TOLERANCE * variance;
    let mut labels: Vec<u32> = Vec::new();
    for iteration in 0..LLOYD_MAX_ITERATIONS {
        ctx.cancel.check()?;
        ctx.progress.iteration(iteration as u64 + 1);
        let next = assign(x, centres, ctx.par);
        if next == labels {
            break;
        }
        labels = next;
        let mut sums = DMatrix::<f64>::zeros(d, m);
        let mut counts = vec![0usize; m];
        for (i, &c) in labels.iter().enumerate() {
            let c = c as usize;
            counts[c] += 1;
            for (s, v) in sums.column_mut(c).iter_mut().zip(x.point(i)) {
                *s += v;
            }
        }
        let mut shift = 0.0;
        let mut moved = centres.as_matrix().clone();
        for (j, &count) in counts.iter().enumerate() {
            if count > 0 {
                let new: Vec<f64> = sums.column(j).iter().map(|s| s / count as f64).collect();
                shift += squared_distance(&new, centres.point(j));
                moved.column_mut(j).copy_from_slice(&new);
            }
        }
        *centres = Points::from_columns(moved);
        if shift <= tolerance {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Four tight, well-separated blobs of 50 points in 2-D.
    fn blobs() -> (Points, [[f64; 2]; 4]) {
        let centres = [[0.0, 0.0], [10.0, 0.0], [0.0, 10.0], [10.0, 10.0]];
        let noise = crate::test_support::seeded_matrix(2, 200, 4) * 0.5;
        let x = DMatrix::from_fn(2, 200, |r, c| centres[c % 4][r] + noise[(r, c)]);
        (Points::from_columns(x), centres)
    }

    #[test]
    fn uniform_draws_are_distinct_sorted_and_seeded() {
        let a = sample_rows(1000, 100, 7);
        assert_eq!(a.len(), 100);
        assert!(a.windows(2).all(|w| w[0] < w[1]) && *a.last().unwrap() < 1000);
        assert_eq!(a, sample_rows(1000, 100, 7));
        assert_ne!(a, sample_rows(1000, 100, 8));
        assert_eq!(sample_rows(5, 5, 1), vec![0, 1, 2, 3, 4]);
    }

    /// The lane-wise argmin finds the scalar scan's centre, ties to the lowest index.
    #[test]
    fn nearest_centre_is_the_first_minimum() {
        let dots = crate::test_support::seeded_matrix(1, 1003, 5);
        let norms: Vec<f64> = (0..1003).map(|j| ((j * 37) % 101) as f64 / 50.0).collect();
        for len in [1, 3, 4, 7, 64, 1003] {
            let (d, c) = (&dots.as_slice()[..len], &norms[..len]);
            let mut want = (f64::INFINITY, 0);
            for j in 0..len {
                let v = c[j] - 2.0 * d[j];
                if v < want.0 {
                    want = (v, j);
                }
            }
            assert_eq!(nearest_centre(d, c) as usize, want.1, "{len}");
        }
        assert_eq!(nearest_centre(&[0.0; 9], &[1.0; 9]), 0, "ties: the first");
        assert_eq!(nearest_centre(&[0.0, 0.5, 0.0, 0.0, 0.0, 0.5], &[1.0; 6]), 1);
    }

    #[test]
    fn kmeans_sample_is_bounded_at_large_m() {
        assert_eq!(kmeans_sample_rows(16), 32_768);
        assert_eq!(kmeans_sample_rows(1024), 32_768);
        assert_eq!(kmeans_sample_rows(4096), 32 * 4096);
        assert_eq!(kmeans_sample_rows(8192), (1 << 30) / 8192);
        assert_eq!(kmeans_sample_rows(10_000), (1 << 30) / 10_000);
        assert_eq!(kmeans_sample_rows(50_000), 100_000);
        for m in [9000, 10_000, 20_000, 30_000] {
            assert!(kmeans_sample_rows(m) * m <= 1 << 30 || kmeans_sample_rows(m) == 2 * m);
        }
    }

    #[test]
    fn kmeans_finds_the_blobs_reproducibly_whatever_the_threads() {
        let (x, truth) = blobs();
        let seq = select(&x, 4, Selection::Kmeans, 3, &FitContext::sequential()).unwrap().0;
        let par = select(&x, 4, Selection::Kmeans, 3, &FitContext::new(Parallelism::Parallel)).unwrap().0;
        assert_eq!(seq, par, "the same centres on one thread or two");
        assert_eq!(seq, select(&x, 4, Selection::Kmeans, 3, &FitContext::sequential()).unwrap().0);
        for t in truth {
            let nearest = (0..4).map(|j| squared_distance(seq.point(j), &t)).fold(f64::INFINITY, f64::min);
            assert!(nearest < 0.1, "a centre near {t:?}: {seq:?}");
        }
        // More centres than distinct rows: duplicates, no failure.
        let same = Points::from_rows(&[vec![1.0], vec![1.0], vec![1.0]]);
        let c = select(&same, 3, Selection::Kmeans, 0, &FitContext::sequential()).unwrap().0;
        assert!(c.as_matrix().iter().all(|&v| v == 1.0));
    }
}

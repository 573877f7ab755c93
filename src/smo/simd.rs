//! The solver's three passes over the active set, four points per vector: the first-order
//! pick of i, the second-order pick of j, and the gradient update (with the next i in the
//! same pass). Each lane runs the scalar pass's arithmetic in the same order, and ties
//! resolve as the scalar `>=` / `<=` scans do (the last index wins), so the path is LIBSVM's
//! to the bit; the scalar versions below are the reference the tests hold them to.
//!
//! `up[t]` and `low[t]` are 1.0 where point t is in I_up / I_low (kept by the solver as
//! bounds change), so membership is a vector compare instead of a branch per point.

use std::ops::Range;
use wide::f64x4;

const LANES: usize = 4;

fn load(v: &[f64]) -> f64x4 {
    f64x4::new([v[0], v[1], v[2], v[3]])
}

/// Four f32 widened to f64 (one vcvtps2pd where AVX is there).
#[cfg(all(target_arch = "x86_64", target_feature = "avx"))]
fn load32(v: &[f32]) -> f64x4 {
    use std::arch::x86_64::{_mm256_cvtps_pd, _mm_loadu_ps};
    let v: &[f32; 4] = v[..4].try_into().expect("four lanes");
    // SAFETY: AVX is enabled at compile time, and the load reads the four floats of `v`.
    let wide = unsafe { _mm256_cvtps_pd(_mm_loadu_ps(v.as_ptr())) };
    // SAFETY: __m256d and [f64; 4] have the same size, and every bit pattern is an f64.
    f64x4::new(unsafe { std::mem::transmute::<std::arch::x86_64::__m256d, [f64; 4]>(wide) })
}

#[cfg(not(all(target_arch = "x86_64", target_feature = "avx")))]
fn load32(v: &[f32]) -> f64x4 {
    f64x4::new([v[0] as f64, v[1] as f64, v[2] as f64, v[3] as f64])
}

/// `v[r]` four at a time (`r` a whole number of lanes long).
fn lanes<T>(v: &[T], r: Range<usize>) -> std::slice::ChunksExact<'_, T> {
    v[r].chunks_exact(LANES)
}

fn indices(at: usize) -> f64x4 {
    let t = at as f64;
    f64x4::new([t, t + 1.0, t + 2.0, t + 3.0])
}

/// The lanes' (value, index) pairs reduced as one scan in index order with `>=` would:
/// the largest value, the largest index among equals.
fn last_max(values: f64x4, idx: f64x4, best: (f64, usize)) -> (f64, usize) {
    let (v, i) = (values.to_array(), idx.to_array());
    let mut out = best;
    for l in 0..LANES {
        let at = i[l] as usize;
        if i[l] >= 0.0 && (v[l] > out.0 || (v[l] == out.0 && (out.1 == usize::MAX || at > out.1))) {
            out = (v[l], at);
        }
    }
    out
}

/// max of -y_t g_t over I_up in `r` among the variables of sign `only` (0: all), the last
/// index on ties; (-inf, usize::MAX) if none.
pub(super) fn max_up(y: &[f64], g: &[f64], up: &[f64], r: Range<usize>, only: f64) -> (f64, usize) {
    let vec_end = r.start + r.len() / LANES * LANES;
    let (mut best_v, mut best_i) = (f64x4::splat(f64::NEG_INFINITY), f64x4::splat(-1.0));
    let (half, zero, only_v) = (f64x4::splat(0.5), f64x4::splat(0.0), f64x4::splat(only));
    let (mut idx, step) = (indices(r.start), f64x4::splat(LANES as f64));
    let vr = r.start..vec_end;
    for ((y4, g4), up4) in lanes(y, vr.clone()).zip(lanes(g, vr.clone())).zip(lanes(up, vr)) {
        let yv = load(y4);
        let v = -yv * load(g4);
        let take = load(up4).simd_gt(half) & (yv * only_v).simd_ge(zero) & v.simd_ge(best_v);
        best_v = take.select(v, best_v);
        best_i = take.select(idx, best_i);
        idx += step;
    }
    let mut best = last_max(best_v, best_i, (f64::NEG_INFINITY, usize::MAX));
    for t in vec_end..r.end {
        let v = -y[t] * g[t];
        if up[t] > 0.5 && y[t] * only >= 0.0 && v >= best.0 {
            best = (v, t);
        }
    }
    best
}

/// Over I_low in `r` among the variables of sign `only` (0: all): max of y_j g_j, and the
/// j minimising the second-order objective change -(gmax + y_j g_j)^2 / quad_ij among
/// violators (the last on ties): (gmax2, j, objective). `qd_i`, `y_i` and `q_i` (Q's
/// column i, f32) describe the pair's i.
#[allow(clippy::too_many_arguments)]
pub(super) fn min_low(
    y: &[f64],
    g: &[f64],
    low: &[f64],
    qd: &[f64],
    q_i: &[f32],
    r: Range<usize>,
    (gmax, qd_i, y_i): (f64, f64, f64),
    tau: f64,
    only: f64,
) -> (f64, usize, f64) {
    let vec_end = r.start + r.len() / LANES * LANES;
    let (half, zero) = (f64x4::splat(0.5), f64x4::splat(0.0));
    let (gmax_v, qd_i_v, two_y_i, tau_v) =
        (f64x4::splat(gmax), f64x4::splat(qd_i), f64x4::splat(2.0 * y_i), f64x4::splat(tau));
    let only_v = f64x4::splat(only);
    let mut gmax2 = f64x4::splat(f64::NEG_INFINITY);
    let (mut best_obj, mut best_j) = (f64x4::splat(f64::INFINITY), f64x4::splat(-1.0));
    let (mut idx, step) = (indices(r.start), f64x4::splat(LANES as f64));
    let vr = r.start..vec_end;
    let zipped = lanes(y, vr.clone())
        .zip(lanes(g, vr.clone()))
        .zip(lanes(low, vr.clone()))
        .zip(lanes(qd, vr.clone()))
        .zip(lanes(q_i, vr));
    for ((((y4, g4), low4), qd4), q4) in zipped {
        let yj = load(y4);
        let yg = yj * load(g4);
        let in_low = load(low4).simd_gt(half) & (yj * only_v).simd_ge(zero);
        gmax2 = in_low.select(gmax2.max(yg), gmax2);
        let grad_diff = gmax_v + yg;
        // The scalar expression's order: (qd_j + qd_i) - ((2 y_i) y_j) q_ij.
        let quad = (load(qd4) + qd_i_v) - two_y_i * yj * load32(q4);
        let quad = quad.simd_gt(zero).select(quad, tau_v);
        let obj = -(grad_diff * grad_diff) / quad;
        let take = in_low & grad_diff.simd_gt(zero) & obj.simd_le(best_obj);
        best_obj = take.select(obj, best_obj);
        best_j = take.select(idx, best_j);
        idx += step;
    }
    // Lanes to one scan: the smallest objective, the last index on ties.
    let (objs, js) = (best_obj.to_array(), best_j.to_array());
    let mut best = (usize::MAX, f64::INFINITY);
    for l in 0..LANES {
        let j = js[l];
        if j >= 0.0 && (objs[l] < best.1 || (objs[l] == best.1 && (best.0 == usize::MAX || j as usize > best.0))) {
            best = (j as usize, objs[l]);
        }
    }
    let mut gmax2 = gmax2.to_array().into_iter().fold(f64::NEG_INFINITY, f64::max);
    for j in vec_end..r.end {
        if low[j] <= 0.5 || y[j] * only < 0.0 {
            continue;
        }
        let yg = y[j] * g[j];
        gmax2 = gmax2.max(yg);
        let grad_diff = gmax + yg;
        if grad_diff > 0.0 {
            let quad = qd[j] + qd_i - 2.0 * y_i * y[j] * q_i[j] as f64;
            let obj = -(grad_diff * grad_diff) / if quad > 0.0 { quad } else { tau };
            if obj <= best.1 {
                best = (j, obj);
            }
        }
    }
    (gmax2, best.0, best.1)
}

/// g[t] += q_i[t] di + q_j[t] dj over `r` (g holds positions r), and in the same pass the
/// max of -y_t g_t over I_up (the last index on ties).
#[allow(clippy::too_many_arguments)]
pub(super) fn update(
    g: &mut [f64],
    q_i: &[f32],
    q_j: &[f32],
    (di, dj): (f64, f64),
    y: &[f64],
    up: &[f64],
    r: Range<usize>,
) -> (f64, usize) {
    let len = r.len();
    let vec_len = len / LANES * LANES;
    let (di_v, dj_v, half) = (f64x4::splat(di), f64x4::splat(dj), f64x4::splat(0.5));
    let (mut best_v, mut best_i) = (f64x4::splat(f64::NEG_INFINITY), f64x4::splat(-1.0));
    let (mut idx, step) = (indices(r.start), f64x4::splat(LANES as f64));
    let end = r.start + vec_len;
    let vr = r.start..end;
    let zipped = g[..vec_len]
        .chunks_exact_mut(LANES)
        .zip(lanes(q_i, vr.clone()))
        .zip(lanes(q_j, vr.clone()))
        .zip(lanes(y, vr.clone()))
        .zip(lanes(up, vr));
    for ((((g4, qi4), qj4), y4), up4) in zipped {
        let gv = load(g4) + (load32(qi4) * di_v + load32(qj4) * dj_v);
        g4.copy_from_slice(&gv.to_array());
        let v = -load(y4) * gv;
        let take = load(up4).simd_gt(half) & v.simd_ge(best_v);
        best_v = take.select(v, best_v);
        best_i = take.select(idx, best_i);
        idx += step;
    }
    let mut best = last_max(best_v, best_i, (f64::NEG_INFINITY, usize::MAX));
    for (k, gk) in g[vec_len..len].iter_mut().enumerate() {
        let t = r.start + vec_len + k;
        *gk += q_i[t] as f64 * di + q_j[t] as f64 * dj;
        let v = -y[t] * *gk;
        if up[t] > 0.5 && v >= best.0 {
            best = (v, t);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    /// y, g, up, low, qd (f64) and a column of Q (f32).
    type Arrays = (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>, Vec<f32>);
    type Views<'a> = (&'a [f64], &'a [f64], &'a [f64], &'a [f64], &'a [f32]);

    /// Values on a coarse grid so that ties are common.
    fn data(n: usize, seed: u64) -> Arrays {
        let m = crate::test_support::seeded_matrix(6, n, seed);
        let coarse = |v: f64| (v * 4.0).round() / 4.0;
        let y: Vec<f64> = (0..n).map(|t| if m[(0, t)] > 0.0 { 1.0 } else { -1.0 }).collect();
        let g: Vec<f64> = (0..n).map(|t| coarse(m[(1, t)] * 3.0)).collect();
        let up: Vec<f64> = (0..n).map(|t| if m[(2, t)] > -0.4 { 1.0 } else { 0.0 }).collect();
        let low: Vec<f64> = (0..n).map(|t| if m[(3, t)] > -0.4 { 1.0 } else { 0.0 }).collect();
        let qd: Vec<f64> = (0..n).map(|t| 1.0 + coarse(m[(4, t)]).abs()).collect();
        let q: Vec<f32> = (0..n).map(|t| coarse(m[(5, t)]) as f32).collect();
        (y, g, up, low, qd, q)
    }

    fn scalar_min_low(
        (y, g, low, qd, q): Views<'_>,
        r: Range<usize>,
        (gmax, qd_i, y_i): (f64, f64, f64),
        only: f64,
    ) -> (f64, usize, f64) {
        let (mut gmax2, mut best, mut best_obj) = (f64::NEG_INFINITY, usize::MAX, f64::INFINITY);
        for j in r {
            if low[j] <= 0.5 || (only != 0.0 && y[j] != only) {
                continue;
            }
            let yg = y[j] * g[j];
            gmax2 = gmax2.max(yg);
            let grad_diff = gmax + yg;
            if grad_diff > 0.0 {
                let quad = qd[j] + qd_i - 2.0 * y_i * y[j] * q[j] as f64;
                let obj = -(grad_diff * grad_diff) / if quad > 0.0 { quad } else { 1e-12 };
                if obj <= best_obj {
                    (best, best_obj) = (j, obj);
                }
            }
        }
        (gmax2, best, best_obj)
    }

    /// The vector passes equal the scalar scans exactly, ties and all, for ranges of every
    /// alignment and length.
    #[test]
    fn vector_passes_equal_the_scalar_scans() {
        for seed in 0..20u64 {
            let n = 37 + seed as usize;
            let (y, g, up, low, qd, q) = data(n, seed);
            let q_j: Vec<f32> = q.iter().rev().copied().collect();
            for (start, end) in [(0, n), (1, n), (3, n - 2), (5, 6), (7, 7)] {
                let r = start..end;
                let mut want = (f64::NEG_INFINITY, usize::MAX);
                for t in r.clone() {
                    let v = -y[t] * g[t];
                    if up[t] > 0.5 && v >= want.0 {
                        want = (v, t);
                    }
                }
                assert_eq!(max_up(&y, &g, &up, r.clone(), 0.0), want, "seed {seed} {r:?}");
                for only in [1.0, -1.0] {
                    let mut want = (f64::NEG_INFINITY, usize::MAX);
                    for t in r.clone() {
                        let v = -y[t] * g[t];
                        if up[t] > 0.5 && y[t] == only && v >= want.0 {
                            want = (v, t);
                        }
                    }
                    assert_eq!(max_up(&y, &g, &up, r.clone(), only), want, "seed {seed} {r:?} sign {only}");
                }
                for gmax in [0.0, 0.5, 2.0] {
                    let pair = (gmax, qd[0], y[0]);
                    assert_eq!(
                        min_low(&y, &g, &low, &qd, &q, r.clone(), pair, 1e-12, 0.0),
                        scalar_min_low((&y, &g, &low, &qd, &q), r.clone(), pair, 0.0),
                        "seed {seed} {r:?} gmax {gmax}"
                    );
                    for only in [1.0, -1.0] {
                        assert_eq!(
                            min_low(&y, &g, &low, &qd, &q, r.clone(), pair, 1e-12, only),
                            scalar_min_low((&y, &g, &low, &qd, &q), r.clone(), pair, only),
                            "seed {seed} {r:?} gmax {gmax} sign {only}"
                        );
                    }
                }
                let (di, dj) = (0.25, -0.75);
                let mut gs: Vec<f64> = g[r.clone()].to_vec();
                let mut want_g = gs.clone();
                let mut want = (f64::NEG_INFINITY, usize::MAX);
                for (k, t) in r.clone().enumerate() {
                    want_g[k] += q[t] as f64 * di + q_j[t] as f64 * dj;
                    let v = -y[t] * want_g[k];
                    if up[t] > 0.5 && v >= want.0 {
                        want = (v, t);
                    }
                }
                assert_eq!(update(&mut gs, &q, &q_j, (di, dj), &y, &up, r.clone()), want, "seed {seed} {r:?}");
                assert_eq!(gs, want_g);
            }
        }
    }
}

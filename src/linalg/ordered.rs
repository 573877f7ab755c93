//! Solves whose bits per right-hand side do not depend on the others: L^-1 b for each
//! column b of a block, every entry's updates in the order of the factor's columns (one
//! fused multiply-subtract each, v - l*x rounded once), then its division. A served GP's
//! variance for a row is then the same bits alone, stacked with other requests' rows by
//! the batcher, or split between threads; faer's blocked solve would change its sums
//! with the block's width.
//!
//! Any loop order that keeps each entry's updates in column order gives the same bits,
//! so the order is chosen for speed by the block's shape (measured on an Intel Xeon,
//! AVX2 + FMA, and AVX-512 where the CPU has it: see BENCHMARKS.md, "Batched predictions"
//! and "The ordered solve at the product rate"):
//! - one or two right-hand sides: left-looking by panels of 32 rows, each row of the
//!   panel brought up to date against every earlier row in registers (the factor read
//!   as 256-byte pieces of its columns);
//! - more, on a large factor (n > 1536): right-looking by blocks of 256 of the factor's
//!   columns from packed copies, as a GEMM runs (8 or, with AVX-512, 16 rows x up to 6
//!   right-hand sides in registers for 256 updates; the factor streamed once per task);
//! - more, on a smaller factor: left-looking by panels of 8 rows, 8 x 6 in registers.

use super::Parallelism;
use nalgebra::DMatrix;
use rayon::prelude::*;
use std::ops::Range;
use wide::f64x4;

const PANEL: usize = 8;
const COLS: usize = 6;
/// Right-hand sides per parallel task.
const TASK_COLS: usize = 18;

/// Overwrites each column of `b` (n x m) with L^-1 of it, `l` lower triangular n x n.
pub fn solve_lower_ordered(l: &DMatrix<f64>, b: &mut DMatrix<f64>, par: Parallelism) {
    let n = l.nrows();
    assert_eq!(b.nrows(), n);
    if n == 0 || b.ncols() == 0 {
        return;
    }
    let l = l.as_slice();
    let m = b.ncols();
    // One task per thread: the packed order streams the factor once per task.
    let threads = if par.is_parallel() { rayon::current_num_threads() } else { 1 };
    let per_task = m.div_ceil(threads).next_multiple_of(COLS).max(TASK_COLS);
    let chunks = b.as_mut_slice().chunks_mut(n * per_task);
    if threads > 1 && m > per_task {
        chunks.collect::<Vec<_>>().into_par_iter().for_each(|c| solve_any(l, n, c));
    } else {
        chunks.for_each(|c| solve_any(l, n, c));
    }
}

/// The order fastest for the block's shape (all give the same bits).
fn solve_any(l: &[f64], n: usize, b: &mut [f64]) {
    let m = b.len() / n;
    if m <= 2 {
        for col in b.chunks_mut(n) {
            solve_tall(l, n, col);
        }
    } else if n > 1536 {
        solve_packed(l, n, b);
    } else {
        solve_block(l, n, b);
    }
}

/// Left-looking by panels of 8 rows; `b` holds whole columns of n entries.
fn solve_block(l: &[f64], n: usize, b: &mut [f64]) {
    let m = b.len() / n;
    for p0 in (0..n).step_by(PANEL) {
        let rows = PANEL.min(n - p0);
        let mut c = 0;
        while c < m {
            let width = COLS.min(m - c);
            if rows == PANEL {
                // Constant widths: the block of sums stays in registers.
                match width {
                    6 => update_panel::<6>(l, n, b, p0, c),
                    5 => update_panel::<5>(l, n, b, p0, c),
                    4 => update_panel::<4>(l, n, b, p0, c),
                    3 => update_panel::<3>(l, n, b, p0, c),
                    2 => update_panel::<2>(l, n, b, p0, c),
                    _ => update_panel::<1>(l, n, b, p0, c),
                }
            } else {
                for col in b[c * n..(c + width) * n].chunks_mut(n) {
                    subtract(l, n, col, p0..p0 + rows, 0..p0);
                }
            }
            c += width;
        }
        for col in b.chunks_mut(n) {
            finish(l, n, col, p0..p0 + rows);
        }
    }
}

/// Rows p0..p0+8 of columns c..c+W, against every row before p0.
#[inline(always)]
fn update_panel<const W: usize>(l: &[f64], n: usize, b: &mut [f64], p0: usize, c: usize) {
    let mut acc = [[f64x4::ZERO; 2]; W];
    let mut cols: [&[f64]; W] = [&[]; W];
    for w in 0..W {
        let col = &b[(c + w) * n..(c + w + 1) * n];
        acc[w][0] = f64x4::new([col[p0], col[p0 + 1], col[p0 + 2], col[p0 + 3]]);
        acc[w][1] = f64x4::new([col[p0 + 4], col[p0 + 5], col[p0 + 6], col[p0 + 7]]);
        cols[w] = &col[..p0];
    }
    for k in 0..p0 {
        let lk: &[f64; PANEL] = l[k * n + p0..k * n + p0 + PANEL].try_into().expect("a panel of 8");
        let lo = f64x4::new([lk[0], lk[1], lk[2], lk[3]]);
        let hi = f64x4::new([lk[4], lk[5], lk[6], lk[7]]);
        for w in 0..W {
            let s = f64x4::splat(cols[w][k]);
            acc[w][0] = lo.mul_neg_add(s, acc[w][0]);
            acc[w][1] = hi.mul_neg_add(s, acc[w][1]);
        }
    }
    for w in 0..W {
        let col = &mut b[(c + w) * n + p0..(c + w) * n + p0 + PANEL];
        col[..4].copy_from_slice(&acc[w][0].to_array());
        col[4..].copy_from_slice(&acc[w][1].to_array());
    }
}

/// Rows per panel of a lone right-hand side.
const TALL: usize = 32;

/// One right-hand side, left-looking by panels of 32 rows.
fn solve_tall(l: &[f64], n: usize, col: &mut [f64]) {
    for p0 in (0..n).step_by(TALL) {
        let rows = TALL.min(n - p0);
        if rows == TALL {
            let mut acc = [f64x4::ZERO; TALL / 4];
            for (v, a) in acc.iter_mut().enumerate() {
                let at = p0 + 4 * v;
                *a = f64x4::new([col[at], col[at + 1], col[at + 2], col[at + 3]]);
            }
            let (xs, _) = col.split_at(p0);
            for (k, &x) in xs.iter().enumerate() {
                let lk: &[f64; TALL] = l[k * n + p0..k * n + p0 + TALL].try_into().expect("a panel");
                let s = f64x4::splat(x);
                for (v, a) in acc.iter_mut().enumerate() {
                    let piece = f64x4::new([lk[4 * v], lk[4 * v + 1], lk[4 * v + 2], lk[4 * v + 3]]);
                    *a = piece.mul_neg_add(s, *a);
                }
            }
            for (v, a) in acc.iter().enumerate() {
                col[p0 + 4 * v..p0 + 4 * v + 4].copy_from_slice(&a.to_array());
            }
        } else {
            subtract(l, n, col, p0..n, 0..p0);
        }
        finish(l, n, col, p0..p0 + rows);
    }
}

/// Entries `rows` of one right-hand side brought up to date against the factor's columns
/// `ks`, in their order (the scalar form of every order's update).
fn subtract(l: &[f64], n: usize, col: &mut [f64], rows: Range<usize>, ks: Range<usize>) {
    for i in rows {
        let mut v = col[i];
        for k in ks.clone() {
            v = (-l[k * n + i]).mul_add(col[k], v);
        }
        col[i] = v;
    }
}

/// Entries `rows` of one right-hand side finished, each against the columns of `rows`
/// before it, in order, then divided by its diagonal (the earlier columns applied).
fn finish(l: &[f64], n: usize, col: &mut [f64], rows: Range<usize>) {
    let start = rows.start;
    for i in rows {
        let mut v = col[i];
        for k in start..i {
            v = (-l[k * n + i]).mul_add(col[k], v);
        }
        col[i] = v / l[i * n + i];
    }
}

/// Factor columns per block of the packed right-looking order.
const KP: usize = 256;
/// Panels of 8 rows per block of the packed order (256 x 256 entries of the factor).
const PANELS: usize = 32;

/// Right-looking by blocks of 256 of the factor's columns, as a GEMM runs: the block's
/// rows solved in order, then every later row brought up to date against the block's
/// columns in their order, from packed copies (the block's solved rows by groups of 6
/// right-hand sides, and each 8 x 256 tile of the factor, read once for every group).
/// Each sum stays in a register for 256 updates where the 8-column order stores it
/// after 8, and the factor is streamed once per task, not once per 6 columns. Where the
/// CPU has AVX-512, two panels (16 rows) go through 512-bit registers: the same fused
/// operations lane by lane, so the same bits as the 256-bit path.
fn solve_packed(l: &[f64], n: usize, b: &mut [f64]) {
    solve_packed_with(l, n, b, has_avx512())
}

#[cfg(target_arch = "x86_64")]
fn has_avx512() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
}

#[cfg(not(target_arch = "x86_64"))]
fn has_avx512() -> bool {
    false
}

fn solve_packed_with(l: &[f64], n: usize, b: &mut [f64], avx512: bool) {
    let m = b.len() / n;
    let groups = m.div_ceil(COLS);
    let mut xp = vec![0.0; groups * KP * COLS];
    // One L2 block of packed factor tiles (PANELS x 8 x 256 entries, 512 KB), reused.
    let mut ap = vec![0.0; PANELS * KP * PANEL];
    let mut dl = vec![0.0; KP * KP];
    for k0 in (0..n).step_by(KP) {
        let kb = KP.min(n - k0);
        // xp[g][kk][w] = entry k0 + kk of right-hand side 6g + w (0 past the last),
        // finished there (finish_packed), then copied back.
        for g in 0..groups {
            let xg = &mut xp[g * KP * COLS..(g + 1) * KP * COLS];
            for w in 0..COLS {
                let c = g * COLS + w;
                for kk in 0..kb {
                    xg[kk * COLS + w] = if c < m { b[c * n + k0 + kk] } else { 0.0 };
                }
            }
        }
        for i in 0..kb {
            for k in 0..=i {
                dl[i * KP + k] = l[(k0 + k) * n + k0 + i];
            }
        }
        for first in (0..groups).step_by(FINISH_GROUPS) {
            let last = groups.min(first + FINISH_GROUPS);
            finish_packed(&dl, kb, &mut xp[first * KP * COLS..last * KP * COLS]);
        }
        for g in 0..groups {
            let xg = &xp[g * KP * COLS..(g + 1) * KP * COLS];
            for w in 0..COLS.min(m - g * COLS) {
                let c = g * COLS + w;
                for kk in 0..kb {
                    b[c * n + k0 + kk] = xg[kk * COLS + w];
                }
            }
        }
        if k0 + kb >= n {
            break;
        }
        // The full panels of 8 later rows, by blocks of PANELS: each block's tiles packed
        // (ap[p - first][kk][r], in L2), then taken for each group of right-hand sides (in L1).
        let below = k0 + kb;
        let panels = (n - below) / PANEL;
        for first in (0..panels).step_by(PANELS) {
            for p in first..panels.min(first + PANELS) {
                let (i0, t) = (below + p * PANEL, (p - first) * KP);
                for kk in 0..kb {
                    let at = (k0 + kk) * n + i0;
                    ap[(t + kk) * PANEL..(t + kk + 1) * PANEL].copy_from_slice(&l[at..at + PANEL]);
                }
            }
            for g in 0..groups {
                let xg = &xp[g * KP * COLS..(g * KP + kb) * COLS];
                let c = g * COLS;
                let last = panels.min(first + PANELS);
                let mut p = first;
                #[cfg(target_arch = "x86_64")]
                if avx512 {
                    while p + 2 <= last {
                        let t = (p - first) * KP;
                        let a0 = &ap[t * PANEL..(t + kb) * PANEL];
                        let a1 = &ap[(t + KP) * PANEL..(t + KP + kb) * PANEL];
                        let i0 = below + p * PANEL;
                        // SAFETY: the CPU has AVX-512 (checked by the caller of
                        // solve_packed_with), and update_wide checks its slices' bounds.
                        unsafe {
                            match COLS.min(m - c) {
                                6 => wide512::update_wide::<6>(a0, a1, xg, n, b, i0, c),
                                5 => wide512::update_wide::<5>(a0, a1, xg, n, b, i0, c),
                                4 => wide512::update_wide::<4>(a0, a1, xg, n, b, i0, c),
                                3 => wide512::update_wide::<3>(a0, a1, xg, n, b, i0, c),
                                2 => wide512::update_wide::<2>(a0, a1, xg, n, b, i0, c),
                                _ => wide512::update_wide::<1>(a0, a1, xg, n, b, i0, c),
                            }
                        }
                        p += 2;
                    }
                }
                for p in p..last {
                    let t = (p - first) * KP;
                    let a = &ap[t * PANEL..(t + kb) * PANEL];
                    let i0 = below + p * PANEL;
                    match COLS.min(m - c) {
                        6 => update_packed::<6>(a, xg, n, b, i0, c),
                        5 => update_packed::<5>(a, xg, n, b, i0, c),
                        4 => update_packed::<4>(a, xg, n, b, i0, c),
                        3 => update_packed::<3>(a, xg, n, b, i0, c),
                        2 => update_packed::<2>(a, xg, n, b, i0, c),
                        _ => update_packed::<1>(a, xg, n, b, i0, c),
                    }
                }
            }
        }
        let i0 = below + panels * PANEL;
        for col in b.chunks_mut(n) {
            subtract(l, n, col, i0..n, k0..k0 + kb);
        }
    }
}

/// Groups of six right-hand sides finished together: four groups are 8 independent
/// sums in registers, where one column's updates form a chain that waits on each FMA.
const FINISH_GROUPS: usize = 4;

/// [`finish`] for rows 0..kb of a diagonal block, `dl` its lower triangle by rows
/// (`dl[i * KP + k]`), for up to four groups of six right-hand sides held as
/// `xs[g][kk][w]` (KP x 6 per group).
fn finish_packed(dl: &[f64], kb: usize, xs: &mut [f64]) {
    let groups = xs.len() / (KP * COLS);
    for i in 0..kb {
        let row = &dl[i * KP..i * KP + i];
        let mut v = [(f64x4::ZERO, [0.0f64; 2]); FINISH_GROUPS];
        for (g, vg) in v.iter_mut().enumerate().take(groups) {
            let at = g * KP * COLS + i * COLS;
            *vg = (f64x4::new(xs[at..at + 4].try_into().expect("4")), [xs[at + 4], xs[at + 5]]);
        }
        for (k, &lik) in row.iter().enumerate() {
            let s = f64x4::splat(lik);
            for (g, vg) in v.iter_mut().enumerate().take(groups) {
                let at = g * KP * COLS + k * COLS;
                let x = f64x4::new(xs[at..at + 4].try_into().expect("4"));
                vg.0 = s.mul_neg_add(x, vg.0);
                vg.1[0] = (-lik).mul_add(xs[at + 4], vg.1[0]);
                vg.1[1] = (-lik).mul_add(xs[at + 5], vg.1[1]);
            }
        }
        let d = dl[i * KP + i];
        for (g, vg) in v.iter().enumerate().take(groups) {
            let at = g * KP * COLS + i * COLS;
            let q = vg.0.to_array();
            for w in 0..4 {
                xs[at + w] = q[w] / d;
            }
            xs[at + 4] = vg.1[0] / d;
            xs[at + 5] = vg.1[1] / d;
        }
    }
}

/// Rows i0..i0+8 of right-hand sides c..c+W against a block of factor columns: `ap` the
/// 8 rows' factor entries (8 per column, in column order), `xg` the block's solved
/// entries (6 per column).
#[inline(always)]
fn update_packed<const W: usize>(ap: &[f64], xg: &[f64], n: usize, b: &mut [f64], i0: usize, c: usize) {
    let mut acc = [[f64x4::ZERO; 2]; W];
    for (w, a) in acc.iter_mut().enumerate() {
        let col = &b[(c + w) * n + i0..(c + w) * n + i0 + PANEL];
        a[0] = f64x4::new([col[0], col[1], col[2], col[3]]);
        a[1] = f64x4::new([col[4], col[5], col[6], col[7]]);
    }
    for (lk, xk) in ap.chunks_exact(PANEL).zip(xg.chunks_exact(COLS)) {
        let lo = f64x4::new([lk[0], lk[1], lk[2], lk[3]]);
        let hi = f64x4::new([lk[4], lk[5], lk[6], lk[7]]);
        for w in 0..W {
            let s = f64x4::splat(xk[w]);
            acc[w][0] = lo.mul_neg_add(s, acc[w][0]);
            acc[w][1] = hi.mul_neg_add(s, acc[w][1]);
        }
    }
    for (w, a) in acc.iter().enumerate() {
        let col = &mut b[(c + w) * n + i0..(c + w) * n + i0 + PANEL];
        col[..4].copy_from_slice(&a[0].to_array());
        col[4..].copy_from_slice(&a[1].to_array());
    }
}

/// The packed update on 512-bit registers: rows i0..i0+16 (two packed panels).
#[cfg(target_arch = "x86_64")]
mod wide512 {
    use super::{COLS, PANEL};
    use std::arch::x86_64::{_mm512_fnmadd_pd, _mm512_loadu_pd, _mm512_set1_pd, _mm512_setzero_pd, _mm512_storeu_pd};

    /// [`super::update_packed`] for two panels: `a0` and `a1` the packed factor entries
    /// of rows i0..i0+8 and i0+8..i0+16, `xg` the block's solved entries.
    ///
    /// # Safety
    /// The CPU must have AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn update_wide<const W: usize>(
        a0: &[f64],
        a1: &[f64],
        xg: &[f64],
        n: usize,
        b: &mut [f64],
        i0: usize,
        c: usize,
    ) {
        let kb = a0.len() / PANEL;
        assert!(a0.len() == kb * PANEL && a1.len() == kb * PANEL && xg.len() >= kb * COLS);
        assert!(W <= COLS && i0 + 2 * PANEL <= n && (c + W) * n <= b.len());
        let mut acc = [[_mm512_setzero_pd(); 2]; W];
        // SAFETY (every pointer below): in bounds by the asserts above.
        for (w, a) in acc.iter_mut().enumerate() {
            let at = b.as_ptr().add((c + w) * n + i0);
            a[0] = _mm512_loadu_pd(at);
            a[1] = _mm512_loadu_pd(at.add(PANEL));
        }
        for kk in 0..kb {
            let lo = _mm512_loadu_pd(a0.as_ptr().add(kk * PANEL));
            let hi = _mm512_loadu_pd(a1.as_ptr().add(kk * PANEL));
            for (w, a) in acc.iter_mut().enumerate() {
                let s = _mm512_set1_pd(*xg.get_unchecked(kk * COLS + w));
                a[0] = _mm512_fnmadd_pd(lo, s, a[0]);
                a[1] = _mm512_fnmadd_pd(hi, s, a[1]);
            }
        }
        for (w, a) in acc.iter().enumerate() {
            let at = b.as_mut_ptr().add((c + w) * n + i0);
            _mm512_storeu_pd(at, a[0]);
            _mm512_storeu_pd(at.add(PANEL), a[1]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn factor(n: usize) -> DMatrix<f64> {
        let a = DMatrix::from_fn(n, n, |i, j| {
            (-((i as f64 - j as f64) / 3.0).powi(2)).exp() + if i == j { 0.1 } else { 0.0 }
        });
        a.cholesky().unwrap().l()
    }

    #[test]
    fn every_order_gives_the_same_bits() {
        for n in [1, 8, 31, 33, 70, 129, 300, 700] {
            let l = factor(n);
            // 31 columns: five groups of six and one alone, finished four groups at a time.
            let b = DMatrix::from_fn(n, 31, |i, j| ((i * 3 + j * 5) as f64 * 0.9).cos());
            let bits = |m: &[f64]| m.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            let mut left = b.as_slice().to_vec();
            solve_block(l.as_slice(), n, &mut left);
            // The packed order on 256-bit registers, and on 512-bit ones where the CPU has
            // them (otherwise both runs take the 256-bit path).
            for avx512 in [false, has_avx512()] {
                let mut packed = b.as_slice().to_vec();
                solve_packed_with(l.as_slice(), n, &mut packed, avx512);
                assert_eq!(bits(&left), bits(&packed), "n {n}, avx512 {avx512}");
            }
            let mut tall = b.as_slice().to_vec();
            for col in tall.chunks_mut(n) {
                solve_tall(l.as_slice(), n, col);
            }
            assert_eq!(bits(&left), bits(&tall), "n {n}");
        }
    }

    /// The packed order (n > 1536) against each column solved alone (the 32-row order),
    /// one thread and two: a diagonally dominant factor built directly.
    #[test]
    fn a_large_factor_solves_each_column_alike_whatever_its_company() {
        let n = 1700;
        let l = DMatrix::from_fn(n, n, |i, j| match i.cmp(&j) {
            std::cmp::Ordering::Less => 0.0,
            std::cmp::Ordering::Equal => 2.0,
            std::cmp::Ordering::Greater => 0.5 / ((1 + i - j) as f64).powi(2),
        });
        let b = DMatrix::from_fn(n, 13, |i, j| ((i * 5 + j * 3) as f64 * 0.7).sin());
        let mut all = b.clone();
        solve_lower_ordered(&l, &mut all, Parallelism::Sequential);
        let mut par = b.clone();
        solve_lower_ordered(&l, &mut par, Parallelism::Parallel);
        assert_eq!(all, par);
        let back = &l * &all;
        assert!((back - &b).amax() < 1e-12);
        for j in 0..13 {
            let mut one = b.columns(j, 1).into_owned();
            solve_lower_ordered(&l, &mut one, Parallelism::Sequential);
            let bits = |m: &DMatrix<f64>, c: usize| m.column(c).iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&one, 0), bits(&all, j), "column {j}");
        }
    }

    #[test]
    fn each_column_is_solved_alike_whatever_its_company() {
        for n in [1, 7, 8, 9, 37, 64] {
            let l = factor(n);
            let b = DMatrix::from_fn(n, 11, |i, j| ((i * 5 + j * 3) as f64 * 0.7).sin());
            let mut all = b.clone();
            solve_lower_ordered(&l, &mut all, Parallelism::Sequential);
            let mut par = b.clone();
            solve_lower_ordered(&l, &mut par, Parallelism::Parallel);
            assert_eq!(all, par);
            for j in 0..11 {
                let mut one = b.columns(j, 1).into_owned();
                solve_lower_ordered(&l, &mut one, Parallelism::Sequential);
                let bits = |m: &DMatrix<f64>, c: usize| m.column(c).iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&one, 0), bits(&all, j), "n {n} column {j}");
                // And it is L^-1 b.
                let back = &l * one.column(0);
                for i in 0..n {
                    assert!((back[i] - b[(i, j)]).abs() < 1e-9 * (1.0 + b[(i, j)].abs()), "{n}");
                }
            }
        }
    }
}

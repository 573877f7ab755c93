//! Solves whose bits per right-hand side do not depend on the others: L^-1 b for each
//! column b of a block, every entry's updates in the order of the factor's columns (one
//! fused multiply-subtract each, v - l*x rounded once), then its division. A served GP's
//! variance for a row is then the same bits alone, stacked with other requests' rows by
//! the batcher, or split between threads; faer's blocked solve would change its sums
//! with the block's width.
//!
//! Any loop order that keeps each entry's updates in column order gives the same bits,
//! so the order is chosen for speed by the block's shape (measured on an Intel Xeon,
//! AVX2 + FMA: see BENCHMARKS.md, "Batched predictions"):
//! - one or two right-hand sides: left-looking by panels of 32 rows, each row of the
//!   panel brought up to date against every earlier row in registers (the factor read
//!   as 256-byte pieces of its columns);
//! - more, on a large factor (n > 1536): right-looking by blocks of 8 of the factor's
//!   columns, every later row updated against the block's 8 columns, 8 rows x up to 6
//!   right-hand sides in registers (the factor streamed by columns once per block);
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
    let wide = b.ncols() > TASK_COLS;
    let chunks = b.as_mut_slice().chunks_mut(n * TASK_COLS);
    if par.is_parallel() && wide {
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
        solve_right(l, n, b);
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

/// Factor columns per block of the right-looking order.
const KB: usize = 8;

/// Right-looking by blocks of 8 of the factor's columns: the block's rows solved in
/// order, then every later row brought up to date against the block's columns, in their
/// order, 8 rows x up to 6 right-hand sides at a time in registers.
fn solve_right(l: &[f64], n: usize, b: &mut [f64]) {
    let m = b.len() / n;
    for k0 in (0..n).step_by(KB) {
        let kb = KB.min(n - k0);
        for col in b.chunks_mut(n) {
            finish(l, n, col, k0..k0 + kb);
        }
        if k0 + kb >= n {
            break;
        }
        let mut i0 = k0 + KB;
        while i0 + PANEL <= n {
            let mut c = 0;
            while c < m {
                let width = COLS.min(m - c);
                match width {
                    6 => update_right::<6>(l, n, b, k0, i0, c),
                    5 => update_right::<5>(l, n, b, k0, i0, c),
                    4 => update_right::<4>(l, n, b, k0, i0, c),
                    3 => update_right::<3>(l, n, b, k0, i0, c),
                    2 => update_right::<2>(l, n, b, k0, i0, c),
                    _ => update_right::<1>(l, n, b, k0, i0, c),
                }
                c += width;
            }
            i0 += PANEL;
        }
        for col in b.chunks_mut(n) {
            subtract(l, n, col, i0..n, k0..k0 + KB);
        }
    }
}

/// Rows i0..i0+8 of columns c..c+W, against the factor's columns k0..k0+8.
#[inline(always)]
fn update_right<const W: usize>(l: &[f64], n: usize, b: &mut [f64], k0: usize, i0: usize, c: usize) {
    let mut acc = [[f64x4::ZERO; 2]; W];
    let mut x = [[0.0f64; KB]; W];
    for w in 0..W {
        let col = &b[(c + w) * n..(c + w + 1) * n];
        acc[w][0] = f64x4::new([col[i0], col[i0 + 1], col[i0 + 2], col[i0 + 3]]);
        acc[w][1] = f64x4::new([col[i0 + 4], col[i0 + 5], col[i0 + 6], col[i0 + 7]]);
        x[w].copy_from_slice(&col[k0..k0 + KB]);
    }
    for kk in 0..KB {
        let lk: &[f64; PANEL] = l[(k0 + kk) * n + i0..(k0 + kk) * n + i0 + PANEL].try_into().expect("a panel");
        let lo = f64x4::new([lk[0], lk[1], lk[2], lk[3]]);
        let hi = f64x4::new([lk[4], lk[5], lk[6], lk[7]]);
        for w in 0..W {
            let s = f64x4::splat(x[w][kk]);
            acc[w][0] = lo.mul_neg_add(s, acc[w][0]);
            acc[w][1] = hi.mul_neg_add(s, acc[w][1]);
        }
    }
    for w in 0..W {
        let col = &mut b[(c + w) * n + i0..(c + w) * n + i0 + PANEL];
        col[..4].copy_from_slice(&acc[w][0].to_array());
        col[4..].copy_from_slice(&acc[w][1].to_array());
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
        for n in [1, 8, 31, 33, 70, 129] {
            let l = factor(n);
            let b = DMatrix::from_fn(n, 7, |i, j| ((i * 3 + j * 5) as f64 * 0.9).cos());
            let bits = |m: &[f64]| m.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            let mut left = b.as_slice().to_vec();
            solve_block(l.as_slice(), n, &mut left);
            let mut right = b.as_slice().to_vec();
            solve_right(l.as_slice(), n, &mut right);
            let mut tall = b.as_slice().to_vec();
            for col in tall.chunks_mut(n) {
                solve_tall(l.as_slice(), n, col);
            }
            assert_eq!(bits(&left), bits(&right), "n {n}");
            assert_eq!(bits(&left), bits(&tall), "n {n}");
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

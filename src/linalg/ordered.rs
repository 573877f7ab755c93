//! Solves whose bits per right-hand side do not depend on the others: L^-1 b for each
//! column b of a block, every entry's subtractions in the order of the factor's
//! columns (each product rounded, then the difference), then its division. A served
//! GP's variance for a row is then the same bits alone, stacked with other requests'
//! rows by the batcher, or split between threads; faer's blocked solve would change its
//! sums with the block's width.
//!
//! Left-looking by panels of 8 rows: a panel's entries are brought up to date against
//! every earlier row with an 8 x 4 block of them in registers (SIMD down the panel,
//! four right-hand sides at a time), then solved within the panel. The panel's slab of
//! L is read from memory once per block of right-hand sides, which is what stacking
//! rows buys: a lone row streams all of L for n^2 flops.

use super::Parallelism;
use nalgebra::DMatrix;
use rayon::prelude::*;
use wide::f64x4;

const PANEL: usize = 8;
const COLS: usize = 4;
/// Right-hand sides per parallel task.
const TASK_COLS: usize = 16;

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
        chunks.collect::<Vec<_>>().into_par_iter().for_each(|c| solve_block(l, n, c));
    } else {
        chunks.for_each(|c| solve_block(l, n, c));
    }
}

/// `b` holds whole columns of n entries.
fn solve_block(l: &[f64], n: usize, b: &mut [f64]) {
    let m = b.len() / n;
    for p0 in (0..n).step_by(PANEL) {
        let rows = PANEL.min(n - p0);
        let mut c = 0;
        while c < m {
            let width = COLS.min(m - c);
            if rows == PANEL {
                update_panel(l, n, b, p0, c, width);
            } else {
                for j in c..c + width {
                    for r in 0..rows {
                        let i = p0 + r;
                        let mut v = b[j * n + i];
                        for k in 0..p0 {
                            v -= l[k * n + i] * b[j * n + k];
                        }
                        b[j * n + i] = v;
                    }
                }
            }
            c += width;
        }
        // Within the panel: the remaining subtractions in order, then the division.
        for j in 0..m {
            let col = &mut b[j * n..(j + 1) * n];
            for r in 0..rows {
                let i = p0 + r;
                let mut v = col[i];
                for k in p0..i {
                    v -= l[k * n + i] * col[k];
                }
                col[i] = v / l[i * n + i];
            }
        }
    }
}

/// Rows p0..p0+8 of columns c..c+width, against every row before p0.
#[inline(always)]
fn update_panel(l: &[f64], n: usize, b: &mut [f64], p0: usize, c: usize, width: usize) {
    let mut acc = [[f64x4::ZERO; 2]; COLS];
    for (w, a) in acc.iter_mut().enumerate().take(width) {
        let col = &b[(c + w) * n + p0..];
        a[0] = f64x4::new([col[0], col[1], col[2], col[3]]);
        a[1] = f64x4::new([col[4], col[5], col[6], col[7]]);
    }
    for k in 0..p0 {
        let lk = &l[k * n + p0..k * n + p0 + PANEL];
        let lo = f64x4::new([lk[0], lk[1], lk[2], lk[3]]);
        let hi = f64x4::new([lk[4], lk[5], lk[6], lk[7]]);
        for (w, a) in acc.iter_mut().enumerate().take(width) {
            let s = f64x4::splat(b[(c + w) * n + k]);
            a[0] -= lo * s;
            a[1] -= hi * s;
        }
    }
    for (w, a) in acc.iter().enumerate().take(width) {
        let col = &mut b[(c + w) * n + p0..(c + w) * n + p0 + PANEL];
        col[..4].copy_from_slice(&a[0].to_array());
        col[4..].copy_from_slice(&a[1].to_array());
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

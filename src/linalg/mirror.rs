//! Symmetric matrices kept as one triangle, made whole.

use super::Parallelism;
use nalgebra::DMatrix;
use rayon::prelude::*;

/// Copies the strict lower triangle onto the upper, in square tiles so that both the
/// reads (along rows) and the writes stay within a few cache lines.
pub fn mirror_lower(a: &mut DMatrix<f64>, par: Parallelism) {
    const TILE: usize = 64;
    let n = a.nrows();
    let ptr = SyncPtr(a.as_mut_ptr());
    let tile_col = |tj: usize| {
        let p = &ptr;
        let j0 = tj * TILE;
        let j1 = (j0 + TILE).min(n);
        // Upper entries (i, j) with i < j, j in this tile column, read from (j, i).
        for ti in (0..=tj).map(|t| t * TILE) {
            let i1 = (ti + TILE).min(n);
            for j in j0..j1 {
                for i in ti..i1.min(j) {
                    // SAFETY: each (i, j) with i < j is written by exactly one task (the one
                    // owning column tile j / TILE), and (j, i) with j > i is only ever read.
                    unsafe { *p.0.add(i + j * n) = *p.0.add(j + i * n) };
                }
            }
        }
    };
    let tiles = n.div_ceil(TILE);
    if par.is_parallel() {
        (0..tiles).into_par_iter().for_each(tile_col);
    } else {
        (0..tiles).for_each(tile_col);
    }
}

struct SyncPtr(*mut f64);
// SAFETY: used only by `mirror_lower`, whose tasks write disjoint entries.
unsafe impl Sync for SyncPtr {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upper_triangle_becomes_the_lower_one_mirrored_at_any_size() {
        for n in [0, 1, 5, 64, 65, 130] {
            for par in [Parallelism::Sequential, Parallelism::Parallel] {
                let a = DMatrix::from_fn(n, n, |i, j| if i >= j { (i * 1000 + j) as f64 } else { -1.0 });
                let mut m = a.clone();
                mirror_lower(&mut m, par);
                assert!((0..n).all(|j| (0..n).all(|i| m[(i, j)] == a[(i.max(j), i.min(j))])));
            }
        }
    }
}

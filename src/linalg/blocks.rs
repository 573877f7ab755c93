//! A symmetric matrix held as its lower block triangle, for the randomized eigensolver's
//! products: half the memory of the full matrix, and half its first touch, which on the
//! virtual machines we measured costs more than computing the entries (a 20,000 x 20,000
//! kernel matrix: 3.2 GB and about 4 s of page faults whole, half of each this way).
//! Products with a thin matrix read each stored block twice (as itself and as its
//! transpose), so they cost what the full matrix's would.

use super::{clear_upper_vector_state, zeros, Parallelism};
use faer::{Accum, MatMut, MatRef, Par};
use nalgebra::DMatrix;
use rayon::prelude::*;

/// A linear operator known to be symmetric, applied to the columns of a thin matrix.
pub trait SymmetricOperator: Sync {
    fn n(&self) -> usize;
    /// A Q (n x l).
    fn apply(&self, q: &DMatrix<f64>, par: Parallelism) -> DMatrix<f64>;
}

impl SymmetricOperator for DMatrix<f64> {
    fn n(&self) -> usize {
        self.nrows()
    }

    fn apply(&self, q: &DMatrix<f64>, par: Parallelism) -> DMatrix<f64> {
        super::mul_ab(self, q, par)
    }
}

/// Rows per block: 8 MB blocks, large enough for efficient products and for transparent
/// huge pages (`linalg::zeros`), small enough to balance two threads.
pub const BLOCK_ROWS: usize = 1024;

/// The blocks (I, J), J <= I, of a symmetric n x n matrix, row-major over the triangle.
#[derive(Debug, Clone)]
pub struct SymmetricBlocks {
    n: usize,
    b: usize,
    /// Block (I, J) at I (I + 1) / 2 + J: rows I b.., columns J b.. .
    blocks: Vec<DMatrix<f64>>,
}

impl SymmetricBlocks {
    /// The matrix whose block (I, J) is `block(rows_start, rows_len, cols_start,
    /// cols_len)` (called for J <= I only; the diagonal blocks must be symmetric), with
    /// blocks of `b` rows. Blocks are computed side by side when `par` allows.
    pub fn from_fn<F>(n: usize, b: usize, par: Parallelism, block: F) -> SymmetricBlocks
    where
        F: Fn(usize, usize, usize, usize) -> DMatrix<f64> + Sync,
    {
        assert!(b > 0);
        let count = n.div_ceil(b);
        let pairs: Vec<(usize, usize)> = (0..count).flat_map(|i| (0..=i).map(move |j| (i, j))).collect();
        let make = |&(i, j): &(usize, usize)| {
            let (ri, rj) = (i * b, j * b);
            let m = block(ri, b.min(n - ri), rj, b.min(n - rj));
            assert_eq!(m.shape(), (b.min(n - ri), b.min(n - rj)), "a block of the wrong shape");
            m
        };
        let blocks =
            if par.is_parallel() { pairs.par_iter().map(make).collect() } else { pairs.iter().map(make).collect() };
        SymmetricBlocks { n, b, blocks }
    }

    /// The column sums (equal to the row sums).
    pub fn column_sums(&self) -> Vec<f64> {
        let mut sums = vec![0.0; self.n];
        self.for_each_block(|(r, c), m| {
            for (j, col) in m.column_iter().enumerate() {
                sums[c + j] += col.sum();
                if r != c {
                    // The transposed block (J, I): row i of this one is its column r + i.
                    for (i, v) in col.iter().enumerate() {
                        sums[r + i] += v;
                    }
                }
            }
        });
        sums
    }

    fn for_each_block(&self, mut f: impl FnMut((usize, usize), &DMatrix<f64>)) {
        let count = self.n.div_ceil(self.b);
        let mut at = 0;
        for i in 0..count {
            for j in 0..=i {
                f((i * self.b, j * self.b), &self.blocks[at]);
                at += 1;
            }
        }
    }

    /// The bytes the blocks hold.
    pub fn bytes(&self) -> usize {
        self.blocks.iter().map(|m| m.len() * 8).sum()
    }
}

impl SymmetricOperator for SymmetricBlocks {
    fn n(&self) -> usize {
        self.n
    }

    /// Each thread takes a contiguous share of the blocks (by entries) into its own
    /// accumulator; the accumulators are summed in a fixed order, so the result does not
    /// depend on timing.
    fn apply(&self, q: &DMatrix<f64>, par: Parallelism) -> DMatrix<f64> {
        let (n, l) = q.shape();
        assert_eq!(n, self.n);
        let mut origins = Vec::with_capacity(self.blocks.len());
        self.for_each_block(|o, _| origins.push(o));
        let parts = if par.is_parallel() { rayon::current_num_threads().clamp(1, self.blocks.len().max(1)) } else { 1 };
        let total: usize = self.blocks.iter().map(|m| m.len()).sum();
        // Block ranges of about total / parts entries each.
        let mut bounds = vec![0];
        let mut seen = 0;
        for (at, m) in self.blocks.iter().enumerate() {
            seen += m.len();
            if bounds.len() < parts && seen * parts >= total * bounds.len() {
                bounds.push(at + 1);
            }
        }
        if *bounds.last().unwrap() != self.blocks.len() {
            bounds.push(self.blocks.len());
        }
        let qv = MatRef::from_column_major_slice(q.as_slice(), n, l);
        let run = |p: usize| {
            let mut y = zeros(n, l);
            {
                let mut yv = MatMut::from_column_major_slice_mut(y.as_mut_slice(), n, l);
                let range = bounds[p]..bounds[p + 1];
                for (m, &(r, c)) in self.blocks[range.clone()].iter().zip(&origins[range]) {
                    let (rows, cols) = m.shape();
                    let mv = MatRef::from_column_major_slice(m.as_slice(), rows, cols);
                    faer::linalg::matmul::matmul(
                        yv.as_mut().subrows_mut(r, rows),
                        Accum::Add,
                        mv,
                        qv.subrows(c, cols),
                        1.0,
                        Par::Seq,
                    );
                    if r != c {
                        faer::linalg::matmul::matmul(
                            yv.as_mut().subrows_mut(c, cols),
                            Accum::Add,
                            mv.transpose(),
                            qv.subrows(r, rows),
                            1.0,
                            Par::Seq,
                        );
                    }
                }
            }
            clear_upper_vector_state();
            y
        };
        let ranges = bounds.len() - 1;
        let mut ys: Vec<DMatrix<f64>> =
            if ranges > 1 { (0..ranges).into_par_iter().map(run).collect() } else { (0..ranges).map(run).collect() };
        let mut y = ys.remove(0);
        for other in &ys {
            y += other;
        }
        y
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::seeded_matrix;

    #[test]
    fn blocks_multiply_and_sum_as_the_full_matrix() {
        for (n, b) in [(1, 4), (7, 3), (10, 5), (23, 4), (64, 64)] {
            let g = seeded_matrix(n, n, 11);
            let a = &g + g.transpose();
            let blocks = SymmetricBlocks::from_fn(n, b, Parallelism::Parallel, |r, rl, c, cl| {
                a.view((r, c), (rl, cl)).into_owned()
            });
            let q = seeded_matrix(n, 3, 12);
            for par in [Parallelism::Sequential, Parallelism::Parallel] {
                let got = blocks.apply(&q, par);
                let want = &a * &q;
                assert!((got - &want).amax() <= 1e-12 * want.amax().max(1.0), "n {n} b {b}");
            }
            let sums = blocks.column_sums();
            for (j, sum) in sums.iter().enumerate() {
                assert!((sum - a.column(j).sum()).abs() <= 1e-12 * (n as f64), "n {n} b {b} column {j}");
            }
            let lower: usize = (0..n.div_ceil(b)).map(|i| (b.min(n - i * b)) * ((i + 1) * b).min(n)).sum();
            assert_eq!(blocks.bytes(), lower * 8);
        }
    }
}

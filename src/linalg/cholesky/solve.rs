//! Solves with a Cholesky factor: L, L^T and L L^T against one or many right-hand
//! sides, several outputs split into fixed groups (results independent of the thread
//! count), and the rows an append adds to z = L^-1 b.

use super::Cholesky;
use crate::linalg::{clear_upper_vector_state, zeros, Parallelism};
use faer::linalg::triangular_solve::{solve_lower_triangular_in_place, solve_upper_triangular_in_place};
use faer::{MatMut, MatRef};
use nalgebra::{DMatrix, DVector};

impl Cholesky {
    /// L b for b (n x k), reading only L's lower triangle.
    pub fn l_times(&self, b: &DMatrix<f64>, par: Parallelism) -> DMatrix<f64> {
        use faer::linalg::matmul::triangular::{matmul, BlockStructure};
        assert_eq!(b.nrows(), self.n());
        let (rows, cols) = b.shape();
        let mut out = zeros(rows, cols);
        matmul(
            MatMut::from_column_major_slice_mut(out.as_mut_slice(), rows, cols),
            BlockStructure::Rectangular,
            faer::Accum::Replace,
            self.l_ref(),
            BlockStructure::TriangularLower,
            MatRef::from_column_major_slice(b.as_slice(), rows, cols),
            BlockStructure::Rectangular,
            1.0,
            par.faer(),
        );
        clear_upper_vector_state();
        out
    }

    /// Overwrites `b` (n x k) with L^-1 b: one blocked triangular solve for all columns.
    pub fn solve_l_in_place(&self, b: &mut DMatrix<f64>, par: Parallelism) {
        assert_eq!(b.nrows(), self.n());
        let (rows, cols) = b.shape();
        let rhs = MatMut::from_column_major_slice_mut(b.as_mut_slice(), rows, cols);
        solve_lower_triangular_in_place(self.l_ref(), rhs, par.faer());
    }

    /// Overwrites `b` (n x k) with L^-T b.
    pub fn solve_lt_in_place(&self, b: &mut DMatrix<f64>, par: Parallelism) {
        assert_eq!(b.nrows(), self.n());
        let (rows, cols) = b.shape();
        let rhs = MatMut::from_column_major_slice_mut(b.as_mut_slice(), rows, cols);
        solve_upper_triangular_in_place(self.l_ref().transpose(), rhs, par.faer());
    }

    /// Overwrites `b` (n x k) with (L L^T)^-1 b.
    pub fn solve_in_place(&self, b: &mut DMatrix<f64>, par: Parallelism) {
        assert_eq!(b.nrows(), self.n());
        let (rows, cols) = b.shape();
        let mut rhs = MatMut::from_column_major_slice_mut(b.as_mut_slice(), rows, cols);
        solve_lower_triangular_in_place(self.l_ref(), rhs.as_mut(), par.faer());
        solve_upper_triangular_in_place(self.l_ref().transpose(), rhs, par.faer());
    }

    /// As [`Cholesky::solve_in_place`] for several right-hand sides (a multi-output fit's
    /// targets), their columns split into [`SOLVE_GROUPS`] groups solved sequentially, in
    /// parallel when asked: a column's result does not depend on the thread count.
    pub fn solve_columns_in_place(&self, b: &mut DMatrix<f64>, par: Parallelism) {
        self.columns_in_place(b, par, (true, true));
    }

    /// The first half of [`Cholesky::solve_columns_in_place`]: `b` becomes L^-1 b, with
    /// the same bits as there.
    pub fn forward_columns_in_place(&self, b: &mut DMatrix<f64>, par: Parallelism) {
        self.columns_in_place(b, par, (true, false));
    }

    /// The second half of [`Cholesky::solve_columns_in_place`]: `b` becomes L^-T b.
    pub fn backward_columns_in_place(&self, b: &mut DMatrix<f64>, par: Parallelism) {
        self.columns_in_place(b, par, (false, true));
    }

    fn columns_in_place(&self, b: &mut DMatrix<f64>, par: Parallelism, (forward, backward): (bool, bool)) {
        let (n, k) = b.shape();
        assert_eq!(n, self.n());
        if n == 0 || k == 0 {
            return;
        }
        let solve = |part: &mut [f64]| {
            let mut rhs = MatMut::from_column_major_slice_mut(part, n, part.len() / n);
            if forward {
                solve_lower_triangular_in_place(self.l_ref(), rhs.as_mut(), faer::Par::Seq);
            }
            if backward {
                solve_upper_triangular_in_place(self.l_ref().transpose(), rhs, faer::Par::Seq);
            }
        };
        // faer rounds a column differently in groups of different sizes: the grouping is
        // fixed by k alone, so that results do not depend on the thread count.
        let per = k.div_ceil(SOLVE_GROUPS);
        if par.is_parallel() && k > per {
            use rayon::prelude::*;
            b.as_mut_slice().par_chunks_mut(n * per).for_each(|part| {
                solve(part);
                clear_upper_vector_state();
            });
        } else {
            b.as_mut_slice().chunks_mut(n * per).for_each(solve);
        }
    }

    /// L^-1 b in place for many right-hand sides (a variational GP's kernel columns), by
    /// fixed blocks of columns ([`crate::linalg::solve_blocks`]).
    pub fn solve_l_blocks(&self, b: &mut DMatrix<f64>, par: Parallelism) {
        assert_eq!(b.nrows(), self.n());
        crate::linalg::products::solve_in_blocks(self.l_ref(), b.as_mut_slice(), false, par);
    }

    /// L^-T b in place, as [`Cholesky::solve_l_blocks`].
    pub fn solve_lt_blocks(&self, b: &mut DMatrix<f64>, par: Parallelism) {
        assert_eq!(b.nrows(), self.n());
        crate::linalg::products::solve_in_blocks(self.l_ref(), b.as_mut_slice(), true, par);
    }

    /// Rows `from..` of L^-1 b, rows `..from` of `b` holding theirs already: the rows an
    /// append adds to z = L^-1 y, by forward substitution over the factor's new rows
    /// (O(n k) for k rows; column by column, so the factor is read in order).
    pub fn forward_rows_from(&self, from: usize, b: &mut DMatrix<f64>) {
        let n = self.n();
        assert_eq!(b.nrows(), n);
        let l = self.l.as_slice();
        for col in b.as_mut_slice().chunks_mut(n.max(1)) {
            for j in 0..n {
                if j >= from {
                    col[j] /= l[j * n + j];
                }
                let zj = col[j];
                for (i, lij) in l[j * n..(j + 1) * n].iter().enumerate().skip(from.max(j + 1)) {
                    col[i] -= lij * zj;
                }
            }
        }
    }

    /// (L L^T)^-1 b for one right-hand side.
    pub fn solve_vec(&self, b: &DVector<f64>) -> DVector<f64> {
        let mut m = DMatrix::from_column_slice(b.len(), 1, b.as_slice());
        self.solve_in_place(&mut m, Parallelism::Sequential);
        DVector::from_vec(m.data.into())
    }
}

/// Groups of columns [`Cholesky::solve_columns_in_place`] solves, one per thread of this
/// machine's two (on more threads the solves of a model's outputs use two of them).
const SOLVE_GROUPS: usize = 2;

#[cfg(test)]
mod tests {
    use super::super::tests::spd;
    use super::*;
    use crate::test_support::seeded_matrix;

    /// The rows an append adds to z = L^-1 b, by forward substitution, equal the full
    /// solve's (to rounding); the split solve equals the one-pass solve bit for bit, and
    /// neither depends on the thread count.
    #[test]
    fn forward_rows_and_the_split_solve() {
        let (n, from) = (90, 70);
        let chol = Cholesky::factor(spd(n, 3), Parallelism::Sequential).unwrap();
        let b = seeded_matrix(n, 3, 4);
        let mut full = b.clone();
        chol.forward_columns_in_place(&mut full, Parallelism::Parallel);
        let mut rows = b.clone();
        rows.rows_mut(0, from).copy_from(&full.rows(0, from));
        chol.forward_rows_from(from, &mut rows);
        assert_eq!(rows.rows(0, from), full.rows(0, from));
        for (x, y) in rows.iter().zip(full.iter()) {
            assert!((x - y).abs() <= 1e-12 * y.abs().max(1.0), "{x} vs {y}");
        }
        let mut split = b.clone();
        chol.forward_columns_in_place(&mut split, Parallelism::Sequential);
        chol.backward_columns_in_place(&mut split, Parallelism::Parallel);
        let mut one = b.clone();
        chol.solve_columns_in_place(&mut one, Parallelism::Parallel);
        let bits = |m: &DMatrix<f64>| m.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&split), bits(&one));
        // Several outputs: the same bits on one thread and on two, for any count.
        for k in [1, 2, 3, 10] {
            let b = seeded_matrix(n, k, 5);
            let (mut seq, mut par) = (b.clone(), b);
            chol.solve_columns_in_place(&mut seq, Parallelism::Sequential);
            chol.solve_columns_in_place(&mut par, Parallelism::Parallel);
            assert_eq!(bits(&seq), bits(&par), "{k} columns");
        }
    }
}

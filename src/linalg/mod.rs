//! The dense factorisations and solves every estimator goes through.
//!
//! Storage is nalgebra's (column-major `DMatrix`/`DVector`); the O(n^3) and O(n^2 m) work
//! runs in faer on borrowed views, without copies. faer beats nalgebra's own Cholesky by
//! about 50x at n = 4000 on this hardware class (see `benches/linalg.rs`).
//!
//! Parallelism is chosen per call: two threads lose to one on small problems and when
//! several requests already keep the cores busy.
//!
//! `cholesky.rs` owns the factorisation with the contract's jitter rule, its growth by a
//! block (online updates) and the solves with it; `memory.rs` owns how large matrices
//! are allocated and the vector-register state after faer's kernels.

mod blocks;
mod cholesky;
mod eigen;
mod leading;
mod memory;
mod mirror;
mod ordered;
mod preconditioner;
pub(crate) mod products;
mod tridiagonal;

pub use blocks::{SymmetricBlocks, SymmetricOperator, BLOCK_ROWS};
pub use cholesky::Cholesky;
pub use eigen::SymmetricEigen;
pub use leading::{leading_exact, leading_randomized, Leading};
pub use memory::{clear_upper_vector_state, copy_of, zeroed_bytes, zeros};
pub use mirror::mirror_lower;
pub use ordered::solve_lower_ordered;
pub use preconditioner::TwoFactors;
pub use products::{dot_wide, lower_product, solve_blocks, solve_blocks_by, Dense, Real};
pub use tridiagonal::Tridiagonal;

use faer::{MatMut, MatRef, Par};
use nalgebra::DMatrix;

/// Whether one operation may use every core (rayon) or must stay on its thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parallelism {
    Sequential,
    Parallel,
}

/// From this many rows a dense operation runs faster on two threads than on one. Best
/// of 20 here (ms, one thread -> two): n = 512 Gram 1.15 -> 0.80, Cholesky 1.97 -> 1.64,
/// inverse 3.21 -> 1.90; n = 768 5.21 -> 3.69 for the Cholesky (at 384 the gain is
/// within noise). Results do not depend on it (see the test
/// `parallel_and_sequential_results_are_identical`).
const PARALLEL_MIN_N: usize = 512;

impl Parallelism {
    /// Parallel only for a problem of size `n` big enough to gain from it, and only when
    /// this is the single CPU-heavy job running (`busy` counts the others).
    pub fn for_problem(n: usize, busy: usize) -> Parallelism {
        if n >= PARALLEL_MIN_N && busy == 0 && rayon::current_num_threads() > 1 {
            Parallelism::Parallel
        } else {
            Parallelism::Sequential
        }
    }

    pub fn is_parallel(self) -> bool {
        self == Parallelism::Parallel
    }

    pub(crate) fn faer(self) -> Par {
        match self {
            Parallelism::Sequential => Par::Seq,
            Parallelism::Parallel => Par::rayon(0),
        }
    }
}

/// Why a factorisation failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LinalgError {
    /// Not positive definite even after the largest jitter; `index` is the failing pivot.
    #[error("matrix is not positive definite (pivot {index} fails even with jitter {max_jitter:e} on the diagonal)")]
    NotPositiveDefinite { index: usize, max_jitter: f64 },
    /// The caller asked to stop (the fit was cancelled).
    #[error("the factorisation was interrupted")]
    Interrupted,
}

/// c -= a^T a, through faer's matrix product (c is m x m, a is n x m).
pub fn sub_at_a(c: &mut DMatrix<f64>, a: &DMatrix<f64>, par: Parallelism) {
    let (n, m) = a.shape();
    assert_eq!(c.shape(), (m, m));
    let av = MatRef::from_column_major_slice(a.as_slice(), n, m);
    let cv = MatMut::from_column_major_slice_mut(c.as_mut_slice(), m, m);
    faer::linalg::matmul::matmul(cv, faer::Accum::Add, av.transpose(), av, -1.0, par.faer());
}

/// A' B through faer's matrix product (A is n x m, B is n x k).
/// A^T B as [`mul_at_b`], each entry a dot product in a fixed order ([`dot_wide`]): an
/// entry's bits depend on its two columns alone, whatever the other columns of A (the
/// query rows a predict call stacks).
pub fn mul_at_b_ordered(a: &DMatrix<f64>, b: &DMatrix<f64>) -> DMatrix<f64> {
    assert_eq!(a.nrows(), b.nrows());
    let bs: Vec<&[f64]> = (0..b.ncols()).map(|c| &b.as_slice()[c * b.nrows()..(c + 1) * b.nrows()]).collect();
    DMatrix::from_fn(a.ncols(), b.ncols(), |j, c| dot_wide(&a.as_slice()[j * a.nrows()..(j + 1) * a.nrows()], bs[c]))
}

pub fn mul_at_b(a: &DMatrix<f64>, b: &DMatrix<f64>, par: Parallelism) -> DMatrix<f64> {
    let (n, m) = a.shape();
    let k = b.ncols();
    assert_eq!(b.nrows(), n);
    let mut out = zeros(m, k);
    let av = MatRef::from_column_major_slice(a.as_slice(), n, m);
    let bv = MatRef::from_column_major_slice(b.as_slice(), n, k);
    let ov = MatMut::from_column_major_slice_mut(out.as_mut_slice(), m, k);
    faer::linalg::matmul::matmul(ov, faer::Accum::Replace, av.transpose(), bv, 1.0, par.faer());
    clear_upper_vector_state();
    out
}

/// A B through faer's matrix product (A is n x m, B is m x k).
pub fn mul_ab(a: &DMatrix<f64>, b: &DMatrix<f64>, par: Parallelism) -> DMatrix<f64> {
    let (n, m) = a.shape();
    let k = b.ncols();
    assert_eq!(b.nrows(), m);
    let mut out = zeros(n, k);
    let av = MatRef::from_column_major_slice(a.as_slice(), n, m);
    let bv = MatRef::from_column_major_slice(b.as_slice(), m, k);
    let ov = MatMut::from_column_major_slice_mut(out.as_mut_slice(), n, k);
    faer::linalg::matmul::matmul(ov, faer::Accum::Replace, av, bv, 1.0, par.faer());
    clear_upper_vector_state();
    out
}

/// x with A x = b for a square A, by LU with partial pivoting; None when A is singular
/// (to working precision).
pub fn solve_square(a: &DMatrix<f64>, b: &[f64]) -> Option<Vec<f64>> {
    use faer::linalg::solvers::Solve;
    let n = a.nrows();
    assert!(a.ncols() == n && b.len() == n);
    let lu = MatRef::from_column_major_slice(a.as_slice(), n, n).partial_piv_lu();
    let x = lu.solve(faer::Mat::from_fn(n, 1, |i, _| b[i]));
    clear_upper_vector_state();
    let x: Vec<f64> = (0..n).map(|i| x[(i, 0)]).collect();
    x.iter().all(|v| v.is_finite()).then_some(x)
}

/// The x minimising |A x - b|^2 for a tall (or square) A of full column rank, by
/// Householder QR: better conditioned than the normal equations, whose condition number
/// is squared.
pub fn least_squares(a: &DMatrix<f64>, b: &[f64]) -> Vec<f64> {
    use faer::linalg::solvers::SolveLstsq;
    let (n, m) = a.shape();
    assert!(n >= m && b.len() == n);
    let qr = MatRef::from_column_major_slice(a.as_slice(), n, m).qr();
    let rhs = faer::Mat::from_fn(n, 1, |i, _| b[i]);
    let x = qr.solve_lstsq(&rhs);
    clear_upper_vector_state();
    (0..m).map(|i| x[(i, 0)]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::DVector;

    #[test]
    fn parallelism_is_sequential_for_small_or_contended_work() {
        assert_eq!(Parallelism::for_problem(100, 0), Parallelism::Sequential);
        assert_eq!(Parallelism::for_problem(5000, 1), Parallelism::Sequential);
    }

    /// Against nalgebra: the least-squares solution satisfies the normal equations, and
    /// the square solve reproduces b.
    #[test]
    fn least_squares_and_square_solves_agree_with_nalgebra() {
        let a = crate::test_support::seeded_matrix(30, 7, 3);
        let b: Vec<f64> = (0..30).map(|i| (i as f64 * 0.37).sin()).collect();
        let x = DVector::from_vec(least_squares(&a, &b));
        let normal = a.transpose() * (&a * &x - DVector::from_column_slice(&b));
        assert!(normal.amax() < 1e-12, "{normal}");
        let sq = crate::test_support::seeded_matrix(9, 9, 4);
        let x = DVector::from_vec(solve_square(&sq, &b[..9]).unwrap());
        assert!((&sq * x - DVector::from_column_slice(&b[..9])).amax() < 1e-12);
        assert!(solve_square(&DMatrix::zeros(3, 3), &[1.0, 2.0, 3.0]).is_none());
    }
}

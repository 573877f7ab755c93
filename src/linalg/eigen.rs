//! The symmetric eigendecomposition A = Q diag(s) Q' (faer's divide and conquer), for the
//! regularisation paths that solve (A + lambda I) x = b for many lambda from one
//! decomposition: each lambda then costs O(n^2) instead of a factorisation.

use super::{clear_upper_vector_state, zeros, Parallelism};
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::evd::{self, ComputeEigenvectors};
use faer::{MatMut, MatRef};
use nalgebra::DMatrix;

/// Eigenvalues ascending, and the orthonormal eigenvectors as the columns of `vectors`.
#[derive(Debug, Clone)]
pub struct SymmetricEigen {
    pub values: Vec<f64>,
    pub vectors: DMatrix<f64>,
}

impl SymmetricEigen {
    /// Decomposes the symmetric matrix whose lower triangle `a` holds (the upper one is
    /// not read). None if the iteration does not converge (faer's `NoConvergence`).
    pub fn new(a: &DMatrix<f64>, par: Parallelism) -> Option<SymmetricEigen> {
        let n = a.nrows();
        assert_eq!(a.ncols(), n, "a square matrix");
        let mut vectors = zeros(n, n);
        let mut values = faer::diag::Diag::<f64>::zeros(n);
        let params = Default::default();
        let mut mem =
            MemBuffer::new(evd::self_adjoint_evd_scratch::<f64>(n, ComputeEigenvectors::Yes, par.faer(), params));
        let av = MatRef::from_column_major_slice(a.as_slice(), n, n);
        let u = MatMut::from_column_major_slice_mut(vectors.as_mut_slice(), n, n);
        let done = evd::self_adjoint_evd(av, values.as_mut(), Some(u), par.faer(), MemStack::new(&mut mem), params);
        clear_upper_vector_state();
        done.ok()?;
        let values = (0..n).map(|i| values[i]).collect();
        Some(SymmetricEigen { values, vectors })
    }

    /// Q' b for each column of b (n x m).
    pub fn project(&self, b: &DMatrix<f64>, par: Parallelism) -> DMatrix<f64> {
        super::mul_at_b(&self.vectors, b, par)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Q = Q diag(s), Q'Q = I, and the values ascending, against the matrix itself.
    #[test]
    fn decomposes_a_symmetric_matrix() {
        let b = crate::test_support::seeded_matrix(40, 40, 9);
        let a = &b * b.transpose() + DMatrix::identity(40, 40) * 0.1;
        for par in [Parallelism::Sequential, Parallelism::Parallel] {
            let mut lower = a.clone();
            for j in 0..40 {
                for i in 0..j {
                    lower[(i, j)] = f64::NAN; // the upper triangle is never read
                }
            }
            let e = SymmetricEigen::new(&lower, par).unwrap();
            assert!(e.values.windows(2).all(|w| w[0] <= w[1]));
            let q = &e.vectors;
            let resid = &a * q - q * DMatrix::from_diagonal(&nalgebra::DVector::from_column_slice(&e.values));
            assert!(resid.amax() < 1e-11 * a.amax(), "{}", resid.amax());
            assert!((q.transpose() * q - DMatrix::identity(40, 40)).amax() < 1e-12);
            let p = e.project(&a.columns(0, 2).into_owned(), par);
            assert!((p - q.transpose() * a.columns(0, 2)).amax() < 1e-12 * a.amax());
        }
    }
}

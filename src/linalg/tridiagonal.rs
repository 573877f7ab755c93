//! The symmetric tridiagonal reduction A = Q T Q', kept factored: Q as faer's block
//! Householder sequence, T as its diagonal and sub-diagonal, and T's eigenvalues (no
//! eigenvectors).
//!
//! A regularisation path that only needs (A + s I)^-1 b for many s does not need A's
//! eigenvectors: Q' b once, then (T + s I)^-1 by a tridiagonal LDL' in O(n) per s (also
//! ln det), and Q applied to every s's solution at once. Forming the eigenvectors (the
//! tridiagonal eigenproblem's and their back-transformation) is a fifth of a full
//! decomposition's time here.

use super::{clear_upper_vector_state, Parallelism};
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::evd::{self, tridiag};
use faer::linalg::householder;
use faer::{Conj, MatMut, MatRef};
use nalgebra::DMatrix;

pub struct Tridiagonal {
    /// faer's reduced matrix: T on the diagonal and the first sub-diagonal, the
    /// reflectors' essential parts below it.
    reduced: DMatrix<f64>,
    /// The block reflectors' triangular factors (block size x n - 1).
    factor: DMatrix<f64>,
    pub diag: Vec<f64>,
    /// T's sub-diagonal, n - 1 entries.
    pub sub: Vec<f64>,
    /// T's (and A's) eigenvalues, ascending.
    pub values: Vec<f64>,
}

impl Tridiagonal {
    /// Reduces the symmetric matrix whose lower triangle `a` holds. None if T's
    /// eigenvalue iteration does not converge.
    pub fn new(a: &DMatrix<f64>, par: Parallelism) -> Option<Tridiagonal> {
        let n = a.nrows();
        assert_eq!(a.ncols(), n, "a square matrix");
        assert!(n > 0, "a matrix with rows");
        let mut reduced = a.clone();
        let bs = faer::linalg::qr::no_pivoting::factor::recommended_block_size::<f64>(n, n);
        let mut factor = super::zeros(bs, n - 1);
        {
            let params = Default::default();
            let mut mem = MemBuffer::new(tridiag::tridiag_in_place_scratch::<f64>(n, par.faer(), params));
            let r = MatMut::from_column_major_slice_mut(reduced.as_mut_slice(), n, n);
            let h = MatMut::from_column_major_slice_mut(factor.as_mut_slice(), bs, n - 1);
            tridiag::tridiag_in_place(r, h, par.faer(), MemStack::new(&mut mem), params);
        }
        clear_upper_vector_state();
        let diag: Vec<f64> = (0..n).map(|i| reduced[(i, i)]).collect();
        let sub: Vec<f64> = (0..n - 1).map(|i| reduced[(i + 1, i)]).collect();
        let mut values = faer::diag::Diag::<f64>::zeros(n);
        {
            let params = Default::default();
            let padded: Vec<f64> = sub.iter().copied().chain(std::iter::once(0.0)).collect();
            let d = faer::ColRef::from_slice(&diag);
            let s = faer::ColRef::from_slice(&padded);
            let scratch = evd::self_adjoint_evd_scratch::<f64>(n, evd::ComputeEigenvectors::No, par.faer(), params);
            let mut mem = MemBuffer::new(scratch);
            let done = evd::tridiagonal_self_adjoint_evd(
                d.as_diagonal(),
                s.as_diagonal(),
                values.as_mut(),
                None,
                par.faer(),
                MemStack::new(&mut mem),
                params,
            );
            clear_upper_vector_state();
            done.ok()?;
        }
        let values = (0..n).map(|i| values[i]).collect();
        Some(Tridiagonal { reduced, factor, diag, sub, values })
    }

    pub fn n(&self) -> usize {
        self.diag.len()
    }

    /// The reflectors (rows 1.. of the reduced matrix's first n - 1 columns) and their
    /// factors, and the rows of b they act on.
    fn apply(&self, b: &mut DMatrix<f64>, transpose: bool, par: Parallelism) {
        let n = self.n();
        assert_eq!(b.nrows(), n, "a right-hand side of n rows");
        if n < 2 || b.ncols() == 0 {
            return;
        }
        let m = b.ncols();
        let basis = MatRef::from_column_major_slice(self.reduced.as_slice(), n, n).submatrix(1, 0, n - 1, n - 1);
        let bs = self.factor.nrows();
        let factor = MatRef::from_column_major_slice(self.factor.as_slice(), bs, n - 1);
        let target = MatMut::from_column_major_slice_mut(b.as_mut_slice(), n, m).subrows_mut(1, n - 1);
        // The two directions differ only in faer's function and its scratch.
        type Apply = fn(MatRef<'_, f64>, MatRef<'_, f64>, Conj, MatMut<'_, f64>, faer::Par, &mut MemStack);
        let (scratch, apply): (_, Apply) = if transpose {
            (
                householder::apply_block_householder_sequence_transpose_on_the_left_in_place_scratch::<f64>(
                    n - 1,
                    bs,
                    m,
                ),
                householder::apply_block_householder_sequence_transpose_on_the_left_in_place_with_conj::<f64>,
            )
        } else {
            (
                householder::apply_block_householder_sequence_on_the_left_in_place_scratch::<f64>(n - 1, bs, m),
                householder::apply_block_householder_sequence_on_the_left_in_place_with_conj::<f64>,
            )
        };
        let mut mem = MemBuffer::new(scratch);
        apply(basis, factor, Conj::No, target, par.faer(), MemStack::new(&mut mem));
        clear_upper_vector_state();
    }

    /// b := Q' b.
    pub fn q_transpose(&self, b: &mut DMatrix<f64>, par: Parallelism) {
        self.apply(b, true, par);
    }

    /// b := Q b.
    pub fn q(&self, b: &mut DMatrix<f64>, par: Parallelism) {
        self.apply(b, false, par);
    }

    /// (T + s I)^-1 b and ln det(T + s I), by LDL' without pivoting: T + s I must be
    /// positive definite (s above minus the least eigenvalue), where LDL' is
    /// backward stable. None if a pivot is not positive.
    pub fn shifted_solve(&self, s: f64, b: &[f64]) -> Option<(Vec<f64>, f64)> {
        let n = self.n();
        assert_eq!(b.len(), n, "n right-hand sides");
        let mut d = vec![0.0; n];
        let mut l = vec![0.0; n.saturating_sub(1)];
        let mut w = b.to_vec();
        let mut log_det = 0.0;
        for i in 0..n {
            d[i] = self.diag[i] + s;
            if i > 0 {
                d[i] -= l[i - 1] * self.sub[i - 1];
                w[i] -= l[i - 1] * w[i - 1];
            }
            if d[i].is_nan() || d[i] <= 0.0 {
                return None;
            }
            log_det += d[i].ln();
            if i + 1 < n {
                l[i] = self.sub[i] / d[i];
            }
        }
        let mut z = w;
        for i in (0..n).rev() {
            z[i] /= d[i];
            if i + 1 < n {
                z[i] -= l[i] * z[i + 1];
            }
        }
        Some((z, log_det))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Q' A Q = T (Q orthogonal), T's eigenvalues are A's (against a full
    /// decomposition), and the shifted solves and log determinants equal a Cholesky's.
    #[test]
    fn reduces_and_solves_as_a_direct_factorisation() {
        let n = 70;
        let b = crate::test_support::seeded_matrix(n, n, 4);
        let a = &b * b.transpose() / n as f64 + DMatrix::identity(n, n) * 0.01;
        for par in [Parallelism::Sequential, Parallelism::Parallel] {
            let mut lower = a.clone();
            for j in 0..n {
                for i in 0..j {
                    lower[(i, j)] = f64::NAN; // the upper triangle is never read
                }
            }
            let t = Tridiagonal::new(&lower, par).unwrap();
            let mut q = DMatrix::identity(n, n);
            t.q(&mut q, par);
            assert!((q.transpose() * &q - DMatrix::identity(n, n)).amax() < 1e-13);
            let mut dense = DMatrix::zeros(n, n);
            for i in 0..n {
                dense[(i, i)] = t.diag[i];
                if i + 1 < n {
                    dense[(i + 1, i)] = t.sub[i];
                    dense[(i, i + 1)] = t.sub[i];
                }
            }
            assert!((q.transpose() * &a * &q - &dense).amax() < 1e-12 * a.amax());
            let mut qt = a.columns(0, 3).into_owned();
            t.q_transpose(&mut qt, par);
            assert!((qt - q.transpose() * a.columns(0, 3)).amax() < 1e-12 * a.amax());
            let full = crate::linalg::SymmetricEigen::new(&lower, par).unwrap();
            assert!(t.values.iter().zip(&full.values).all(|(x, y)| (x - y).abs() < 1e-12 * a.amax()));
            let rhs: Vec<f64> = (0..n).map(|i| (i as f64 * 0.3).sin()).collect();
            for s in [1e-3, 0.1, 10.0] {
                let (z, log_det) = t.shifted_solve(s, &rhs).unwrap();
                let shifted = &dense + DMatrix::identity(n, n) * s;
                let chol = shifted.clone().cholesky().unwrap();
                let want = chol.solve(&nalgebra::DVector::from_column_slice(&rhs));
                let scale = want.amax();
                assert!(z.iter().zip(want.iter()).all(|(x, y)| (x - y).abs() < 1e-10 * scale), "s = {s}");
                let want_log_det: f64 = chol.l().diagonal().iter().map(|v| 2.0 * v.ln()).sum();
                assert!((log_det - want_log_det).abs() < 1e-10 * want_log_det.abs().max(1.0));
            }
            // Below minus the least eigenvalue: refused, not a wrong answer.
            assert!(t.shifted_solve(-t.values[0] - 1.0, &rhs).is_none());
        }
    }
}

//! Falkon's preconditioner (Rudi, Carratino, Rosasco 2017): two triangular factors in one
//! M x M buffer, built from K_MM alone.
//!
//! The Nystrom system H b = r with H = K_Mn W K_nM + lambda K_MM is approximated, for
//! inducing points that sample the rows, by K_Mn W K_nM ~ c K_MM V K_MM (c = n / M, V the
//! inducing rows' own weights; or c = sum(w) / M and V = I for points that are not rows).
//! With K_MM = T'T (T = L', L the lower Cholesky factor by the jitter rule) this gives
//! H ~ c T'(T V T' + (lambda / c) I) T = c T'A'A T, A the upper Cholesky factor of
//! T V T' + (lambda / c) I (Falkon's weighted preconditioner). Conjugate gradients then
//! run on B'H B with B = T^-1 A^-1 / sqrt(c), whose eigenvalues cluster near 1.
//!
//! Both factors share one buffer, as Falkon's: the lower triangle with the diagonal holds
//! A' (lower), the strict upper triangle holds T with its rows divided by its diagonal
//! (a unit upper triangle), and T's diagonal sits in a vector of its own. Building it
//! needs no second M x M matrix: K_MM is factorised in the buffer, L copied to the upper
//! triangle, L'L formed in place in the lower triangle (LAPACK's LAUUM, blocked), and
//! factorised again in place without touching the upper triangle.

use super::{clear_upper_vector_state, Cholesky, LinalgError, Parallelism};
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt::factor::{cholesky_in_place, cholesky_in_place_scratch, LltRegularization};
use faer::linalg::matmul::triangular::{matmul as tri_matmul, BlockStructure};
use faer::linalg::triangular_solve::{
    solve_lower_triangular_in_place, solve_unit_lower_triangular_in_place, solve_unit_upper_triangular_in_place,
    solve_upper_triangular_in_place,
};
use faer::reborrow::{Reborrow, ReborrowMut};
use faer::{Accum, Mat, MatMut, MatRef};
use nalgebra::DMatrix;

/// Columns per block of the in-place LAUUM and Cholesky: the diagonal block is copied
/// out (kb^2 doubles), the rest goes through faer's products at near their full rate.
const BLOCK: usize = 512;

/// The two factors of Falkon's preconditioner, in one M x M buffer.
#[derive(Debug)]
pub struct TwoFactors {
    /// Lower triangle and diagonal: A' (lower). Strict upper: T / diag(T) by rows.
    buf: DMatrix<f64>,
    /// diag(T) = diag(L).
    t_diag: Vec<f64>,
    /// What K_MM took by the jitter rule.
    kmm_jitter: f64,
    /// What T T' + (lambda / c) I took by the same rule (0 almost always).
    a_jitter: f64,
}

impl TwoFactors {
    /// Builds the factors from the lower Cholesky factor of K_MM (its storage becomes the
    /// buffer) for the shift `lambda / c` and the inducing points' weights V (None: I).
    /// `stop` is asked between blocks.
    pub fn new(
        kmm: Cholesky,
        shift: f64,
        weights: Option<&[f64]>,
        par: Parallelism,
        stop: &dyn Fn() -> bool,
    ) -> Result<TwoFactors, LinalgError> {
        let kmm_jitter = kmm.jitter();
        let mut buf = kmm.into_l();
        let m = buf.nrows();
        let t_diag: Vec<f64> = (0..m).map(|i| buf[(i, i)]).collect();
        // Strict upper: U_ij = T_ij / T_ii = L_ji / L_ii.
        for j in 0..m {
            for i in 0..j {
                buf[(i, j)] = buf[(j, i)] / t_diag[i];
            }
        }
        let roots: Option<Vec<f64>> = weights.map(|w| w.iter().map(|v| v.max(0.0).sqrt()).collect());
        let mut out = TwoFactors { buf, t_diag, kmm_jitter, a_jitter: 0.0 };
        let mean_diag = {
            out.weigh_rows(roots.as_deref());
            out.lauum_lower(par, stop)?;
            (0..m).map(|i| out.buf[(i, i)]).sum::<f64>() / m.max(1) as f64 + shift
        };
        let scale = if mean_diag.is_finite() && mean_diag > 0.0 { mean_diag } else { 1.0 };
        let mut extra = 0.0;
        for attempt in 0..=7 {
            if attempt > 0 {
                // A failed attempt left the lower triangle half factorised: form T T'
                // again from the upper copy of L.
                out.restore_l();
                out.weigh_rows(roots.as_deref());
                out.lauum_lower(par, stop)?;
                extra = scale * 10f64.powi(-11 + attempt);
            }
            for i in 0..m {
                out.buf[(i, i)] += shift + extra;
            }
            match out.cholesky_lower(par, stop) {
                Ok(()) => {
                    out.a_jitter = extra;
                    return Ok(out);
                }
                Err(Stop::Interrupted) => return Err(LinalgError::Interrupted),
                Err(Stop::Pivot(index)) if attempt == 7 => {
                    return Err(LinalgError::NotPositiveDefinite { index, max_jitter: extra })
                }
                Err(Stop::Pivot(_)) => {}
            }
        }
        unreachable!("the last attempt returns")
    }

    pub fn m(&self) -> usize {
        self.t_diag.len()
    }

    /// The jitter K_MM took.
    pub fn kmm_jitter(&self) -> f64 {
        self.kmm_jitter
    }

    /// The jitter T T' + (lambda / c) I took beyond its shift.
    pub fn a_jitter(&self) -> f64 {
        self.a_jitter
    }

    fn view(&self) -> MatRef<'_, f64> {
        MatRef::from_column_major_slice(self.buf.as_slice(), self.m(), self.m())
    }

    /// x <- T^-1 x (T = D U, U unit upper: U x = D^-1 x).
    pub fn solve_t(&self, x: &mut DMatrix<f64>, par: Parallelism) {
        scale_rows(x, &self.t_diag, true);
        solve_unit_upper_triangular_in_place(self.view(), as_mut(x), par.faer());
        clear_upper_vector_state();
    }

    /// x <- T^-T x (T' = U' D: U' w = x, then D^-1 w).
    pub fn solve_tt(&self, x: &mut DMatrix<f64>, par: Parallelism) {
        solve_unit_lower_triangular_in_place(self.view().transpose(), as_mut(x), par.faer());
        scale_rows(x, &self.t_diag, true);
        clear_upper_vector_state();
    }

    /// x <- A^-1 x (A upper, the transpose of the lower triangle).
    pub fn solve_a(&self, x: &mut DMatrix<f64>, par: Parallelism) {
        solve_upper_triangular_in_place(self.view().transpose(), as_mut(x), par.faer());
        clear_upper_vector_state();
    }

    /// x <- A^-T x (A' is the lower triangle).
    pub fn solve_at(&self, x: &mut DMatrix<f64>, par: Parallelism) {
        solve_lower_triangular_in_place(self.view(), as_mut(x), par.faer());
        clear_upper_vector_state();
    }

    /// The lower triangle <- L again, from the upper copy (L_ji = U_ij T_ii).
    fn restore_l(&mut self) {
        let m = self.m();
        for j in 0..m {
            self.buf[(j, j)] = self.t_diag[j];
            for i in 0..j {
                self.buf[(j, i)] = self.buf[(i, j)] * self.t_diag[i];
            }
        }
    }

    /// Row i of the lower triangle times `roots[i]`: L'L then becomes L'V L = T V T'.
    fn weigh_rows(&mut self, roots: Option<&[f64]>) {
        let Some(roots) = roots else { return };
        let m = self.m();
        for j in 0..m {
            let col = &mut self.buf.as_mut_slice()[j * m..(j + 1) * m];
            col[j..].iter_mut().zip(&roots[j..]).for_each(|(v, r)| *v *= r);
        }
    }

    /// Lower triangle L <- L'L in place, by blocks of rows (LAPACK's dlauum, lower), the
    /// strict upper triangle untouched.
    fn lauum_lower(&mut self, par: Parallelism, stop: &dyn Fn() -> bool) -> Result<(), LinalgError> {
        let m = self.m();
        let p = par.faer();
        let mut a = MatMut::from_column_major_slice_mut(self.buf.as_mut_slice(), m, m);
        for i in (0..m).step_by(BLOCK) {
            if stop() {
                return Err(LinalgError::Interrupted);
            }
            let ib = BLOCK.min(m - i);
            let s = lower_copy(a.rb().submatrix(i, i, ib, ib));
            let rows = a.rb_mut().subrows_mut(i, m - i);
            let (block_row, below) = rows.split_at_row_mut(ib);
            let (mut r, mut rest) = block_row.split_at_col_mut(i);
            let (below_left, below_right) = below.split_at_col_mut(i);
            let below_mid = below_right.rb().subcols(0, ib);
            // R <- L_ii' R + L_below' A_below_left, R the block row left of the diagonal.
            if i > 0 {
                let old = r.rb().to_owned();
                tri_matmul(
                    r.rb_mut(),
                    BlockStructure::Rectangular,
                    Accum::Replace,
                    s.as_ref().transpose(),
                    BlockStructure::TriangularUpper,
                    old.as_ref(),
                    BlockStructure::Rectangular,
                    1.0,
                    p,
                );
                faer::linalg::matmul::matmul(r.rb_mut(), Accum::Add, below_mid.transpose(), below_left.rb(), 1.0, p);
            }
            // L_ii <- L_ii' L_ii + L_below' L_below (lower triangle only).
            let mut diag = rest.rb_mut().subcols_mut(0, ib);
            tri_matmul(
                diag.rb_mut(),
                BlockStructure::TriangularLower,
                Accum::Replace,
                s.as_ref().transpose(),
                BlockStructure::TriangularUpper,
                s.as_ref(),
                BlockStructure::TriangularLower,
                1.0,
                p,
            );
            tri_matmul(
                diag.rb_mut(),
                BlockStructure::TriangularLower,
                Accum::Add,
                below_mid.transpose(),
                BlockStructure::Rectangular,
                below_mid,
                BlockStructure::Rectangular,
                1.0,
                p,
            );
        }
        clear_upper_vector_state();
        Ok(())
    }

    /// Right-looking blocked Cholesky of the lower triangle in place; the diagonal
    /// blocks are factorised in a copy, so the strict upper triangle is never written.
    fn cholesky_lower(&mut self, par: Parallelism, stop: &dyn Fn() -> bool) -> Result<(), Stop> {
        let m = self.m();
        let p = par.faer();
        let mut mem = MemBuffer::new(cholesky_in_place_scratch::<f64>(BLOCK, p, Default::default()));
        let mut a = MatMut::from_column_major_slice_mut(self.buf.as_mut_slice(), m, m);
        for k in (0..m).step_by(BLOCK) {
            if stop() {
                return Err(Stop::Interrupted);
            }
            let kb = BLOCK.min(m - k);
            let mut s = lower_copy(a.rb().submatrix(k, k, kb, kb));
            cholesky_in_place(s.as_mut(), LltRegularization::default(), p, MemStack::new(&mut mem), Default::default())
                .map_err(|e| match e {
                    faer::linalg::cholesky::llt::factor::LltError::NonPositivePivot { index } => Stop::Pivot(k + index),
                })?;
            let rest = a.rb_mut().submatrix_mut(k, k, m - k, m - k);
            let (mut top, bottom) = rest.split_at_row_mut(kb);
            for j in 0..kb {
                for i in j..kb {
                    top[(i, j)] = s[(i, j)];
                }
            }
            let (mut a21, mut a22) = bottom.split_at_col_mut(kb);
            solve_lower_triangular_in_place(s.as_ref(), a21.rb_mut().transpose_mut(), p);
            tri_matmul(
                a22.rb_mut(),
                BlockStructure::TriangularLower,
                Accum::Add,
                a21.rb(),
                BlockStructure::Rectangular,
                a21.rb().transpose(),
                BlockStructure::Rectangular,
                -1.0,
                p,
            );
        }
        clear_upper_vector_state();
        Ok(())
    }

    /// Bytes held: the buffer and the diagonal.
    pub fn bytes(&self) -> usize {
        (self.m() * self.m() + self.m()) * 8
    }
}

enum Stop {
    Pivot(usize),
    Interrupted,
}

/// The lower triangle (with the diagonal) of a square block, zeros above.
fn lower_copy(a: MatRef<'_, f64>) -> Mat<f64> {
    let n = a.nrows();
    Mat::from_fn(n, n, |i, j| if i >= j { a[(i, j)] } else { 0.0 })
}

fn as_mut(x: &mut DMatrix<f64>) -> MatMut<'_, f64> {
    let (r, c) = x.shape();
    MatMut::from_column_major_slice_mut(x.as_mut_slice(), r, c)
}

/// Row i of x times d_i (or divided by it).
fn scale_rows(x: &mut DMatrix<f64>, d: &[f64], divide: bool) {
    for mut col in x.column_iter_mut() {
        for (v, di) in col.iter_mut().zip(d) {
            if divide {
                *v /= di;
            } else {
                *v *= di;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::seeded_matrix;

    fn spd(m: usize, seed: u64) -> DMatrix<f64> {
        let g = seeded_matrix(m, m + 3, seed);
        &g * g.transpose() / m as f64 + DMatrix::identity(m, m) * 0.1
    }

    /// Every solve against dense references, on a size that crosses block edges.
    #[test]
    fn factors_solve_as_their_definitions() {
        for (m, par) in [(7, Parallelism::Sequential), (1100, Parallelism::Parallel)] {
            let k = spd(m, 3);
            let l = Cholesky::factor_with_jitter(|| k.clone(), par).unwrap();
            let lm = l.l().clone();
            let shift = 0.37;
            let v: Vec<f64> = (0..m).map(|i| [0.0, 0.5, 1.0, 2.5][i % 4]).collect();
            let f = TwoFactors::new(l, shift, Some(&v), par, &|| false).unwrap();
            let t = lm.transpose();
            let q = &t * DMatrix::from_diagonal(&nalgebra::DVector::from_vec(v.clone())) * t.transpose()
                + DMatrix::identity(m, m) * shift;
            let b = seeded_matrix(m, 2, 9);
            let check = |got: DMatrix<f64>, want: DMatrix<f64>, what: &str| {
                let err = (&got - &want).amax() / want.amax();
                assert!(err < 1e-9, "{what} (m = {m}): relative error {err:e}");
            };
            let mut x = b.clone();
            f.solve_t(&mut x, par);
            check(&t * &x, b.clone(), "T^-1");
            let mut x = b.clone();
            f.solve_tt(&mut x, par);
            check(t.transpose() * &x, b.clone(), "T^-T");
            // A'A = Q with A upper: A^-T A^-1 b = Q^-1 b.
            let mut x = b.clone();
            f.solve_at(&mut x, par);
            f.solve_a(&mut x, par);
            let want = q.clone().cholesky().unwrap().solve(&b);
            check(x, want, "Q^-1 by A");
            assert_eq!(f.a_jitter(), 0.0);
        }
    }

    #[test]
    fn a_stop_interrupts_the_build() {
        let k = spd(1100, 5);
        let l = Cholesky::factor_with_jitter(|| k.clone(), Parallelism::Sequential).unwrap();
        let asked = std::cell::Cell::new(0);
        let stop = || {
            asked.set(asked.get() + 1);
            asked.get() > 1
        };
        let err = TwoFactors::new(l, 0.1, None, Parallelism::Sequential, &stop).unwrap_err();
        assert_eq!(err, LinalgError::Interrupted);
        assert!(asked.get() >= 2);
    }
}

//! The Cholesky factor: factorisation with the contract's jitter rule (blocked and
//! interruptible for large n), growth by a block of rows, the inverse and its diagonal;
//! the solves with it are in [`solve`].

mod solve;

use super::{clear_upper_vector_state, sub_at_a, zeros, LinalgError, Parallelism};
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt::factor::{cholesky_in_place, cholesky_in_place_scratch, LltRegularization};
use faer::linalg::triangular_solve::solve_lower_triangular_in_place;
use faer::{MatMut, MatRef};
use nalgebra::DMatrix;

/// Why one factorisation attempt ended early.
enum Stopped {
    Pivot(usize),
    Interrupted,
}

/// From this size up, factorisations run by blocks of columns so that they can stop.
const BLOCKED_MIN_N: usize = 6144;
/// Columns per block, the trailing update done in slices of twice that: at n = 20,000 a
/// slice is about half a second here, and the whole factorisation stays within a few
/// per cent of faer's own (n = 8,000: 3.36 s against 3.33; 14,000: 16.8-17.8 s against
/// 15.7-16.2).
const BLOCK: usize = 1024;

/// Right-looking blocked Cholesky of the lower triangle of `a`: for each block of
/// columns, factor the diagonal block (faer), solve the panel below it, and update the
/// trailing lower triangle, asking `stop` before each block and each slice of the
/// update.
fn blocked_in_place(
    mut a: MatMut<'_, f64>,
    par: Parallelism,
    stop: &dyn Fn() -> bool,
    mem: &mut MemBuffer,
) -> Result<(), Stopped> {
    use faer::linalg::matmul::triangular::BlockStructure;
    use faer::reborrow::{Reborrow, ReborrowMut};
    let n = a.nrows();
    for k in (0..n).step_by(BLOCK) {
        if stop() {
            return Err(Stopped::Interrupted);
        }
        let kb = BLOCK.min(n - k);
        let rest = a.rb_mut().submatrix_mut(k, k, n - k, n - k);
        let (top, bottom) = rest.split_at_row_mut(kb);
        let mut a11 = top.subcols_mut(0, kb);
        cholesky_in_place(
            a11.rb_mut(),
            LltRegularization::default(),
            par.faer(),
            MemStack::new(mem),
            Default::default(),
        )
        .map_err(|e| match e {
            faer::linalg::cholesky::llt::factor::LltError::NonPositivePivot { index } => Stopped::Pivot(k + index),
        })?;
        let (mut a21, mut a22) = bottom.split_at_col_mut(kb);
        // A21 <- A21 L11^-T, i.e. L11 A21' = A21'.
        solve_lower_triangular_in_place(a11.rb(), a21.rb_mut().transpose_mut(), par.faer());
        // A22 <- A22 - A21 A21' (lower triangle), in slices of columns.
        let m = n - k - kb;
        for c0 in (0..m).step_by(2 * BLOCK) {
            if stop() {
                return Err(Stopped::Interrupted);
            }
            let w = (2 * BLOCK).min(m - c0);
            let dst = a22.rb_mut().submatrix_mut(c0, c0, m - c0, w);
            let (diag, below) = dst.split_at_row_mut(w);
            let left = a21.rb().subrows(c0, w);
            faer::linalg::matmul::triangular::matmul(
                diag,
                BlockStructure::TriangularLower,
                faer::Accum::Add,
                left,
                BlockStructure::Rectangular,
                left.transpose(),
                BlockStructure::Rectangular,
                -1.0,
                par.faer(),
            );
            faer::linalg::matmul::matmul(
                below,
                faer::Accum::Add,
                a21.rb().subrows(c0 + w, m - c0 - w),
                left.transpose(),
                -1.0,
                par.faer(),
            );
        }
    }
    clear_upper_vector_state();
    Ok(())
}

/// faer's block size for a factorisation of order n. Its default (128) makes rank-128
/// updates of the trailing matrix; from n ~ 2000 up, rank-256 ones run closer to the
/// matrix product's rate here (n = 4000, best of 15 on two threads: 347 ms with 128,
/// 309-311 with 256, against 65-70 GFLOP/s for the product itself; n = 2000 and 6000
/// gain 2-4%). Below that the default stays, and so do the rounding and the
/// hyperparameter search's path at the sizes it usually runs.
fn llt_params(n: usize) -> faer::Spec<faer::linalg::cholesky::llt::factor::LltParams, f64> {
    use faer::linalg::cholesky::llt::factor::LltParams;
    let mut params = <LltParams as faer::Auto<f64>>::auto();
    if n >= 2048 {
        params.block_size = 256;
    }
    params.into()
}

/// Jitter exponents of the contract: 1e-10, 1e-9, ..., 1e-4 times the mean diagonal.
const JITTER_EXPONENTS: std::ops::RangeInclusive<i32> = -10..=-4;

/// What the jitter exponents multiply: the mean diagonal, or 1 when that is zero (an
/// all-zero kernel) or not finite, where it would give useless jitter.
fn jitter_scale(mean_diag: f64) -> f64 {
    if mean_diag.is_finite() && mean_diag > 0.0 {
        mean_diag
    } else {
        1.0
    }
}

/// A lower Cholesky factor L with A + jitter I = L L^T.
#[derive(Debug, Clone)]
pub struct Cholesky {
    /// L in the lower triangle, zeros above.
    l: DMatrix<f64>,
    /// The amount added to the diagonal to make the factorisation succeed (0 if none).
    jitter: f64,
}

impl Cholesky {
    /// Factorises the symmetric matrix that `build` returns. If it is not numerically
    /// positive definite, retries with jitter growing tenfold from 1e-10 to 1e-4 times the
    /// mean of its diagonal, as the contract says.
    ///
    /// faer factorises in place and uses the upper triangle as workspace, so a failed
    /// attempt leaves nothing to retry from. Rather than keep an n^2 copy for a rare
    /// event, a retry calls `build` again: rebuilding a Gram matrix costs less than the
    /// factorisation that failed.
    pub fn factor_with_jitter(build: impl FnMut() -> DMatrix<f64>, par: Parallelism) -> Result<Cholesky, LinalgError> {
        Cholesky::factor_with_jitter_until(build, par, &|| false)
    }

    /// As [`Cholesky::factor_with_jitter`], giving up with `Interrupted` soon after
    /// `stop` turns true: large matrices are factorised by blocks of columns, `stop`
    /// asked between them (a 20,000-row factorisation takes half a minute here; a
    /// deleted fit must not hold its worker that long).
    pub fn factor_with_jitter_until(
        mut build: impl FnMut() -> DMatrix<f64>,
        par: Parallelism,
        stop: &dyn Fn() -> bool,
    ) -> Result<Cholesky, LinalgError> {
        let mut a = build();
        assert!(a.is_square(), "Cholesky of a non-square matrix");
        let n = a.nrows();
        let scale = jitter_scale(a.diagonal().sum() / n.max(1) as f64);
        let mut stack_mem = MemBuffer::new(cholesky_in_place_scratch::<f64>(n, par.faer(), Default::default()));
        let mut attempt = |a: &mut DMatrix<f64>| -> Result<(), Stopped> {
            let view = MatMut::from_column_major_slice_mut(a.as_mut_slice(), n, n);
            if n >= BLOCKED_MIN_N {
                return blocked_in_place(view, par, stop, &mut stack_mem);
            }
            cholesky_in_place(
                view,
                LltRegularization::default(),
                par.faer(),
                MemStack::new(&mut stack_mem),
                llt_params(n),
            )
            .map(|_| ())
            .map_err(|e| match e {
                faer::linalg::cholesky::llt::factor::LltError::NonPositivePivot { index } => Stopped::Pivot(index),
            })
        };

        let mut result = attempt(&mut a);
        let mut jitter = 0.0;
        for exp in JITTER_EXPONENTS {
            match result {
                Ok(()) => break,
                Err(Stopped::Interrupted) => return Err(LinalgError::Interrupted),
                Err(Stopped::Pivot(_)) => {}
            }
            jitter = scale * 10f64.powi(exp);
            a = build();
            for i in 0..n {
                a[(i, i)] += jitter;
            }
            result = attempt(&mut a);
        }
        match result {
            Ok(()) => {
                zero_upper(&mut a);
                Ok(Cholesky { l: a, jitter })
            }
            Err(Stopped::Pivot(index)) => Err(LinalgError::NotPositiveDefinite { index, max_jitter: jitter }),
            Err(Stopped::Interrupted) => Err(LinalgError::Interrupted),
        }
    }

    /// Factorises `a` as it is, without jitter: for the hyperparameter search, which
    /// treats a matrix that is not positive definite as a point to step back from.
    pub fn factor(mut a: DMatrix<f64>, par: Parallelism) -> Result<Cholesky, LinalgError> {
        let n = a.nrows();
        let mut mem = MemBuffer::new(cholesky_in_place_scratch::<f64>(n, par.faer(), Default::default()));
        let view = MatMut::from_column_major_slice_mut(a.as_mut_slice(), n, n);
        match cholesky_in_place(view, LltRegularization::default(), par.faer(), MemStack::new(&mut mem), llt_params(n))
        {
            Ok(_) => {
                zero_upper(&mut a);
                Ok(Cholesky { l: a, jitter: 0.0 })
            }
            Err(faer::linalg::cholesky::llt::factor::LltError::NonPositivePivot { index }) => {
                Err(LinalgError::NotPositiveDefinite { index, max_jitter: 0.0 })
            }
        }
    }

    /// The diagonal of (L L^T)^-1 without forming it: [A^-1]_ii = |L^-1 e_i|^2, and
    /// L^-1 e_i is zero above row i, so columns are solved by blocks against the trailing
    /// part of L only: n^3 / 3 flops and an n x 256 workspace, not n x n.
    pub fn inverse_diagonal(&self, par: Parallelism) -> Vec<f64> {
        const COLUMNS: usize = 256;
        let n = self.n();
        let l = self.l_ref();
        let mut out = Vec::with_capacity(n);
        for j0 in (0..n).step_by(COLUMNS) {
            let b = COLUMNS.min(n - j0);
            let rows = n - j0;
            let mut e = faer::Mat::<f64>::zeros(rows, b);
            for c in 0..b {
                e[(c, c)] = 1.0;
            }
            solve_lower_triangular_in_place(l.submatrix(j0, j0, rows, rows), e.as_mut(), par.faer());
            out.extend((0..b).map(|c| e.col(c).iter().map(|v| v * v).sum::<f64>()));
        }
        clear_upper_vector_state();
        out
    }

    /// (L L^T)^-1, formed once from the factor; only its lower triangle is filled (the
    /// inverse is symmetric, and its users read the lower triangle).
    pub fn inverse_lower(&self, par: Parallelism) -> DMatrix<f64> {
        let n = self.n();
        let mut out = zeros(n, n);
        let mut mem = MemBuffer::new(faer::linalg::cholesky::llt::inverse::inverse_scratch::<f64>(n, par.faer()));
        faer::linalg::cholesky::llt::inverse::inverse(
            MatMut::from_column_major_slice_mut(out.as_mut_slice(), n, n),
            self.l_ref(),
            par.faer(),
            MemStack::new(&mut mem),
        );
        clear_upper_vector_state();
        out
    }

    /// The factor of the matrix grown by k rows and columns, [[A, C], [C^T, D]], from this
    /// factor of A (`cross` is C, n x k; `corner` is D, k x k): L' = [[L, 0], [B^T, M]]
    /// with B = L^-1 C and M = chol(D + jitter I - B^T B). O(n^2 k + k^3) instead of the
    /// O((n + k)^3 / 3) of a new factorisation. This factor's jitter is added to D's
    /// diagonal, so L' factors the grown matrix plus the same jitter; whether that is the
    /// jitter a new factorisation would choose is the caller's question
    /// ([`Cholesky::jitter_rule_holds`]).
    ///
    /// Fails with `NotPositiveDefinite` (pivot counted from the first row of A) when the
    /// grown matrix plus this jitter is not numerically positive definite.
    pub fn extend(
        &self,
        mut cross: DMatrix<f64>,
        mut corner: DMatrix<f64>,
        par: Parallelism,
    ) -> Result<Cholesky, LinalgError> {
        let n = self.n();
        let k = corner.nrows();
        assert_eq!(cross.shape(), (n, k), "the cross block is n x k");
        assert!(corner.is_square(), "the corner block is square");
        self.solve_l_in_place(&mut cross, par);
        for i in 0..k {
            corner[(i, i)] += self.jitter;
        }
        sub_at_a(&mut corner, &cross, par);
        let m = Cholesky::factor(corner, Parallelism::Sequential).map_err(|e| match e {
            LinalgError::NotPositiveDefinite { index, .. } => {
                LinalgError::NotPositiveDefinite { index: n + index, max_jitter: self.jitter }
            }
            other => other,
        })?;
        let size = n + k;
        let mut l = zeros(size, size);
        let (old, b, m) = (self.l.as_slice(), &cross, m.l());
        let fill = |(j, col): (usize, &mut [f64])| {
            if j < n {
                col[j..n].copy_from_slice(&old[j * n + j..(j + 1) * n]);
                for c in 0..k {
                    col[n + c] = b[(j, c)];
                }
            } else {
                let c = j - n;
                col[j..].copy_from_slice(&m.as_slice()[c * k + c..(c + 1) * k]);
            }
        };
        if par.is_parallel() {
            use rayon::prelude::*;
            l.as_mut_slice().par_chunks_mut(size).enumerate().for_each(fill);
        } else {
            l.as_mut_slice().chunks_mut(size).enumerate().for_each(fill);
        }
        clear_upper_vector_state();
        Ok(Cholesky { l, jitter: self.jitter })
    }

    /// Whether a new factorisation of a matrix whose diagonal has mean `mean_diag` would
    /// use this factor's jitter, given that it needs no less (true when this factor has
    /// none). The jitter is a power of ten times the mean diagonal: a grown matrix with
    /// another mean would get another amount at the same step.
    pub fn jitter_rule_holds(&self, mean_diag: f64) -> bool {
        if self.jitter == 0.0 {
            return true;
        }
        let scale = jitter_scale(mean_diag);
        JITTER_EXPONENTS.into_iter().any(|e| (scale * 10f64.powi(e) - self.jitter).abs() <= 1e-12 * self.jitter)
    }

    /// A factor computed earlier (the durable store): `l` lower triangular, zeros above.
    pub fn from_factor(l: DMatrix<f64>, jitter: f64) -> Cholesky {
        assert!(l.is_square(), "a Cholesky factor is square");
        Cholesky { l, jitter }
    }

    pub fn n(&self) -> usize {
        self.l.nrows()
    }

    pub fn jitter(&self) -> f64 {
        self.jitter
    }

    /// The factor's storage, L in the lower triangle (zeros above).
    pub fn into_l(self) -> DMatrix<f64> {
        self.l
    }

    /// The factor L (lower triangular).
    pub fn l(&self) -> &DMatrix<f64> {
        &self.l
    }

    /// log det(A + jitter I) = 2 sum log L_ii.
    pub fn log_det(&self) -> f64 {
        2.0 * self.l.diagonal().iter().map(|d| d.ln()).sum::<f64>()
    }

    fn l_ref(&self) -> MatRef<'_, f64> {
        MatRef::from_column_major_slice(self.l.as_slice(), self.n(), self.n())
    }
}

fn zero_upper(a: &mut DMatrix<f64>) {
    let n = a.nrows();
    for j in 1..n {
        a.view_mut((0, j), (j, 1)).fill(0.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::seeded_matrix;
    use faer::Par;
    use nalgebra::DVector;

    /// A seeded symmetric positive definite n x n matrix.
    pub(super) fn spd(n: usize, seed: u64) -> DMatrix<f64> {
        let b = seeded_matrix(n, n, seed);
        &b * b.transpose() + DMatrix::identity(n, n) * n as f64 * 0.1
    }

    #[test]
    fn factor_reconstructs_and_solves_at_several_sizes() {
        for (n, par) in [
            (1, Parallelism::Sequential),
            (7, Parallelism::Sequential),
            (64, Parallelism::Parallel),
            (300, Parallelism::Parallel),
        ] {
            let a = spd(n, n as u64);
            let chol = Cholesky::factor_with_jitter(|| a.clone(), par).unwrap();
            assert_eq!(chol.jitter(), 0.0);
            let l = chol.l();
            let tol = 1e-12 * n as f64 * a.amax();
            assert!((l * l.transpose() - &a).amax() < tol, "n = {n}");
            let b = seeded_matrix(n, 3, 99);
            let mut x = b.clone();
            chol.solve_in_place(&mut x, par);
            assert!((&a * &x - &b).amax() < 1e-10 * n as f64, "n = {n}");
            let mut v = b.clone();
            chol.solve_l_in_place(&mut v, par);
            assert!((l * &v - &b).amax() < 1e-10 * n as f64, "n = {n}");
            let ld = a.clone().cholesky().unwrap().l().diagonal().map(|d| d.ln()).sum() * 2.0;
            assert!((chol.log_det() - ld).abs() < 1e-9 * ld.abs().max(1.0));
        }
    }

    /// The blocked diagonal of the inverse equals the full inverse's, across the block
    /// boundary (n > 256).
    #[test]
    fn inverse_diagonal_is_the_inverse_s_diagonal() {
        for n in [1, 7, 300, 530] {
            let a = spd(n, 40 + n as u64);
            let chol = Cholesky::factor(a.clone(), Parallelism::Parallel).unwrap();
            let inv = a.clone().try_inverse().unwrap();
            let d = chol.inverse_diagonal(Parallelism::Parallel);
            assert_eq!(d.len(), n);
            for (i, v) in d.iter().enumerate() {
                assert!(
                    (v - inv[(i, i)]).abs() <= 1e-10 * inv[(i, i)].abs(),
                    "n = {n}, i = {i}: {v} vs {}",
                    inv[(i, i)]
                );
            }
        }
    }

    /// Growing a factor by blocks of rows gives the factor of the grown matrix, across
    /// several block sizes and the parallel path; a grown matrix that is not positive
    /// definite fails at a pivot among the new rows.
    #[test]
    fn extended_factor_is_the_factor_of_the_grown_matrix() {
        for (n, k, par) in
            [(1, 1, Parallelism::Sequential), (9, 4, Parallelism::Sequential), (600, 10, Parallelism::Parallel)]
        {
            let a = spd(n + k, 7 + n as u64);
            let head = Cholesky::factor(a.view((0, 0), (n, n)).into_owned(), par).unwrap();
            let grown =
                head.extend(a.view((0, n), (n, k)).into_owned(), a.view((n, n), (k, k)).into_owned(), par).unwrap();
            let whole = Cholesky::factor(a.clone(), par).unwrap();
            let tol = 1e-12 * (n + k) as f64 * a.amax();
            assert!((grown.l() - whole.l()).amax() < tol, "n = {n}, k = {k}");
            assert_eq!(grown.l().upper_triangle(), DMatrix::from_diagonal(&grown.l().diagonal()));
        }
        let a = spd(5, 3);
        let head = Cholesky::factor(a.clone(), Parallelism::Sequential).unwrap();
        // A new row equal to the first: the grown matrix is singular.
        let cross = a.view((0, 0), (5, 1)).into_owned();
        let corner = a.view((0, 0), (1, 1)).into_owned();
        let e = head.extend(cross, corner, Parallelism::Sequential).unwrap_err();
        assert!(matches!(e, LinalgError::NotPositiveDefinite { index: 5, .. }), "{e:?}");
    }

    #[test]
    fn jitter_rule_holds_only_for_the_same_step_of_the_same_mean() {
        // Rank 3 of 6: needs jitter.
        let b = seeded_matrix(6, 3, 2);
        let a = &b * b.transpose();
        let chol = Cholesky::factor_with_jitter(|| a.clone(), Parallelism::Sequential).unwrap();
        assert!(chol.jitter() > 0.0);
        let mean = a.diagonal().sum() / 6.0;
        assert!(chol.jitter_rule_holds(mean));
        assert!(!chol.jitter_rule_holds(mean * 1.5));
        let none = Cholesky::factor(spd(3, 1), Parallelism::Sequential).unwrap();
        assert!(none.jitter_rule_holds(123.0));
    }

    /// Running on two threads changes no bit of a factor, an inverse or a solve (faer
    /// splits the output among threads, never a sum), so a fit's numbers do not depend
    /// on how busy the machine was when it ran.
    #[test]
    fn parallel_and_sequential_results_are_identical() {
        let n = 700;
        let a = spd(n, 5);
        let seq = Cholesky::factor(a.clone(), Parallelism::Sequential).unwrap();
        let par = Cholesky::factor(a, Parallelism::Parallel).unwrap();
        assert_eq!(seq.l(), par.l());
        assert_eq!(seq.inverse_lower(Parallelism::Sequential), par.inverse_lower(Parallelism::Parallel));
        let b = seeded_matrix(n, 40, 3);
        let (mut u, mut v) = (b.clone(), b);
        seq.solve_l_in_place(&mut u, Parallelism::Sequential);
        seq.solve_l_in_place(&mut v, Parallelism::Parallel);
        assert_eq!(u, v);
    }

    /// The blocked path (several blocks, a partial last one) reconstructs the matrix,
    /// reports the failing pivot's global index, and stops when asked.
    #[test]
    fn blocked_factorisation_agrees_and_stops() {
        let n = 2 * BLOCK + 301;
        let a = spd(n, 11);
        let mut b = a.clone();
        let mut mem = MemBuffer::new(cholesky_in_place_scratch::<f64>(n, Par::Seq, Default::default()));
        let view = MatMut::from_column_major_slice_mut(b.as_mut_slice(), n, n);
        assert!(blocked_in_place(view, Parallelism::Parallel, &|| false, &mut mem).is_ok());
        zero_upper(&mut b);
        let want = Cholesky::factor(a.clone(), Parallelism::Sequential).unwrap();
        assert!((&b - want.l()).amax() < 1e-10 * want.l().amax(), "blocked and faer's factors agree");
        // A non-positive pivot in the second block is found at its global index.
        let mut bad = a.clone();
        bad[(BLOCK + 5, BLOCK + 5)] = -1.0;
        let view = MatMut::from_column_major_slice_mut(bad.as_mut_slice(), n, n);
        assert!(
            matches!(blocked_in_place(view, Parallelism::Sequential, &|| false, &mut mem), Err(Stopped::Pivot(i)) if i == BLOCK + 5)
        );
        let asked = std::cell::Cell::new(0);
        let stop = || {
            asked.set(asked.get() + 1);
            asked.get() > 2
        };
        let big = DMatrix::<f64>::identity(BLOCKED_MIN_N, BLOCKED_MIN_N) * 2.0;
        let r = Cholesky::factor_with_jitter_until(|| big.clone(), Parallelism::Parallel, &stop);
        assert!(matches!(r, Err(LinalgError::Interrupted)), "{r:?}");
        assert_eq!(asked.get(), 3, "it stopped at the first question answered yes");
    }

    #[test]
    fn inverse_lower_is_the_inverse() {
        for n in [1, 5, 130] {
            let a = spd(n, 3);
            let chol = Cholesky::factor(a.clone(), Parallelism::Parallel).unwrap();
            let mut inv = chol.inverse_lower(Parallelism::Sequential);
            for j in 0..n {
                for i in 0..j {
                    inv[(i, j)] = inv[(j, i)];
                }
            }
            assert!((&a * &inv - DMatrix::<f64>::identity(n, n)).amax() < 1e-10, "n = {n}");
        }
        let indefinite = DMatrix::from_row_slice(2, 2, &[1.0, 2.0, 2.0, 1.0]);
        assert!(Cholesky::factor(indefinite, Parallelism::Sequential).is_err());
    }

    #[test]
    fn singular_matrix_gets_the_smallest_jitter_that_works() {
        // Rank one: x x^T with x = (1, 2, 3). The first jitter (1e-10 * mean diag) suffices.
        let x = DVector::from_vec(vec![1.0, 2.0, 3.0]);
        let a = &x * x.transpose();
        let mean_diag = (1.0 + 4.0 + 9.0) / 3.0;
        let chol = Cholesky::factor_with_jitter(|| a.clone(), Parallelism::Sequential).unwrap();
        let expected = mean_diag * 1e-10;
        assert!((chol.jitter() - expected).abs() < 1e-24, "jitter {}", chol.jitter());
        let l = chol.l();
        let want = &a + DMatrix::identity(3, 3) * expected;
        assert!((l * l.transpose() - want).amax() < 1e-12);
    }

    #[test]
    fn indefinite_matrix_fails_after_the_largest_jitter() {
        let a = DMatrix::from_row_slice(2, 2, &[1.0, 2.0, 2.0, 1.0]);
        match Cholesky::factor_with_jitter(|| a.clone(), Parallelism::Sequential) {
            Err(LinalgError::NotPositiveDefinite { max_jitter, .. }) => {
                assert!((max_jitter - 1e-4).abs() < 1e-18)
            }
            other => panic!("expected failure, got {other:?}"),
        }
    }
}

//! Wide blocks in either precision, and the three things a variational GP does with them
//! per minibatch: triangular solves against many columns, the lower triangle of X Y' for
//! X, Y of M x b, and the transposes that make that product fast.
//!
//! faer multiplies X Y' with both operands stored column-major M x b (the inner dimension
//! strided) at about half the rate of X' Y on their b x M transposes (the inner dimension
//! contiguous in both): at M = b = 1024 here, 33 against 70 GFLOP/s on one thread, 72
//! against 110 on two. A tiled transpose of both costs less than the difference. Its
//! parallel triangular solve gained nothing at M x 1024 (56 GFLOP/s on one thread or two);
//! blocks of columns, each solved on one thread, gain the second core, and their fixed
//! width keeps every column's bits independent of the thread count.

use super::{clear_upper_vector_state, Parallelism};
use faer::linalg::matmul::triangular::BlockStructure;
use faer::linalg::triangular_solve::{solve_lower_triangular_in_place, solve_upper_triangular_in_place};
use faer::{Accum, MatMut, MatRef};
use nalgebra::DMatrix;
use rayon::prelude::*;

/// Columns per block of [`solve_blocks`].
pub const BLOCK_COLUMNS: usize = 256;

/// A real scalar the blocks can hold: f64, or f32 (half the memory traffic, twice the
/// product rate) where single precision is enough.
pub trait Real: faer::traits::RealField + Copy + Default + Send + Sync + 'static {
    fn of(v: f64) -> Self;
    fn wide(self) -> f64;
    /// `m` as a block of Self: moved in double, converted in single.
    fn take(m: DMatrix<f64>) -> Dense<Self>;
    /// The block in double: moved from double, converted from single.
    fn give(d: Dense<Self>) -> DMatrix<f64>;
    /// `m`'s values as Self: borrowed in double, converted in single.
    fn borrow(m: &DMatrix<f64>) -> std::borrow::Cow<'_, [Self]>;
}

impl Real for f64 {
    #[inline(always)]
    fn of(v: f64) -> f64 {
        v
    }
    #[inline(always)]
    fn wide(self) -> f64 {
        self
    }
    fn take(m: DMatrix<f64>) -> Dense<f64> {
        let (rows, cols) = m.shape();
        Dense { rows, cols, data: m.data.into() }
    }
    fn give(d: Dense<f64>) -> DMatrix<f64> {
        DMatrix::from_vec(d.rows, d.cols, d.data)
    }
    fn borrow(m: &DMatrix<f64>) -> std::borrow::Cow<'_, [f64]> {
        std::borrow::Cow::Borrowed(m.as_slice())
    }
}

impl Real for f32 {
    #[inline(always)]
    fn of(v: f64) -> f32 {
        v as f32
    }
    #[inline(always)]
    fn wide(self) -> f64 {
        f64::from(self)
    }
    fn take(m: DMatrix<f64>) -> Dense<f32> {
        Dense::of(&m)
    }
    fn give(d: Dense<f32>) -> DMatrix<f64> {
        d.wide()
    }
    fn borrow(m: &DMatrix<f64>) -> std::borrow::Cow<'_, [f32]> {
        std::borrow::Cow::Owned(m.iter().map(|v| *v as f32).collect())
    }
}

/// sum_i u_i v_i in double, four partial sums (so that the loop vectorises).
pub fn dot_wide<T: Real>(u: &[T], v: &[T]) -> f64 {
    let mut acc = [0.0f64; 4];
    let (uc, vc) = (u.chunks_exact(4), v.chunks_exact(4));
    let (ur, vr) = (uc.remainder(), vc.remainder());
    for (a, b) in uc.zip(vc) {
        for k in 0..4 {
            acc[k] += a[k].wide() * b[k].wide();
        }
    }
    let tail: f64 = ur.iter().zip(vr).map(|(a, b)| a.wide() * b.wide()).sum();
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

/// A column-major rows x cols matrix of T.
#[derive(Debug, Clone, PartialEq)]
pub struct Dense<T> {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<T>,
}

impl<T: Real> Dense<T> {
    pub fn zeros(rows: usize, cols: usize) -> Dense<T> {
        Dense { rows, cols, data: vec![T::default(); rows * cols] }
    }

    /// `m` in precision T.
    pub fn of(m: &DMatrix<f64>) -> Dense<T> {
        Dense { rows: m.nrows(), cols: m.ncols(), data: m.iter().map(|v| T::of(*v)).collect() }
    }

    /// In double.
    pub fn wide(&self) -> DMatrix<f64> {
        DMatrix::from_iterator(self.rows, self.cols, self.data.iter().map(|v| v.wide()))
    }

    pub fn column(&self, j: usize) -> &[T] {
        &self.data[j * self.rows..(j + 1) * self.rows]
    }

    pub fn column_mut(&mut self, j: usize) -> &mut [T] {
        &mut self.data[j * self.rows..(j + 1) * self.rows]
    }

    pub fn view(&self) -> MatRef<'_, T> {
        MatRef::from_column_major_slice(&self.data, self.rows, self.cols)
    }

    pub fn view_mut(&mut self) -> MatMut<'_, T> {
        MatMut::from_column_major_slice_mut(&mut self.data, self.rows, self.cols)
    }

    /// The transpose, copied in square tiles (reads and writes within a few cache lines);
    /// bands of output columns in parallel when asked.
    pub fn transpose(&self, par: Parallelism) -> Dense<T> {
        const TILE: usize = 32;
        let (r, c) = (self.rows, self.cols);
        let mut out = Dense::zeros(c, r);
        if r == 0 || c == 0 {
            return out;
        }
        let src = &self.data;
        // Output column j (length c) is input row j.
        let band = |(b, chunk): (usize, &mut [T])| {
            let j0 = b * TILE;
            let rows = chunk.len() / c;
            for i0 in (0..c).step_by(TILE) {
                let i1 = (i0 + TILE).min(c);
                for dj in 0..rows {
                    let j = j0 + dj;
                    let dst = &mut chunk[dj * c..(dj + 1) * c];
                    for i in i0..i1 {
                        dst[i] = src[j + i * r];
                    }
                }
            }
        };
        if par.is_parallel() {
            out.data.par_chunks_mut(TILE * c).enumerate().for_each(band);
        } else {
            out.data.chunks_mut(TILE * c).enumerate().for_each(band);
        }
        out
    }
}

/// `dst`'s lower triangle (diagonal included) set to X Y', for X and Y given as their
/// transposes `xt` and `yt` (b x M each). The upper triangle is not written.
pub fn lower_product<T: Real>(dst: &mut Dense<T>, xt: &Dense<T>, yt: &Dense<T>, par: Parallelism) {
    let (b, m) = (xt.rows, xt.cols);
    assert_eq!((yt.rows, yt.cols), (b, m));
    assert_eq!((dst.rows, dst.cols), (m, m));
    faer::linalg::matmul::triangular::matmul(
        dst.view_mut(),
        BlockStructure::TriangularLower,
        Accum::Replace,
        xt.view().transpose(),
        BlockStructure::Rectangular,
        yt.view(),
        BlockStructure::Rectangular,
        T::of(1.0),
        par.faer(),
    );
    clear_upper_vector_state();
}

/// `rhs` (M x k) becomes L^-1 rhs, or L^-T rhs with `transpose`, for the lower triangular
/// `l` (M x M): fixed blocks of [`BLOCK_COLUMNS`] columns, each on one thread, in
/// parallel when asked.
pub fn solve_blocks<T: Real>(l: &Dense<T>, rhs: &mut Dense<T>, transpose: bool, par: Parallelism) {
    assert_eq!((l.rows, l.cols), (rhs.rows, rhs.rows));
    solve_in_blocks(l.view(), &mut rhs.data, transpose, par);
}

/// [`solve_blocks`] with the lower triangular factor given as its column-major values.
pub fn solve_blocks_by<T: Real>(l: &[T], rhs: &mut Dense<T>, transpose: bool, par: Parallelism) {
    let n = rhs.rows;
    assert_eq!(l.len(), n * n);
    solve_in_blocks(MatRef::from_column_major_slice(l, n, n), &mut rhs.data, transpose, par);
}

/// [`solve_blocks`] over a column-major slice of right-hand sides (its row count `lv`'s).
pub(crate) fn solve_in_blocks<T: Real>(lv: MatRef<'_, T>, data: &mut [T], transpose: bool, par: Parallelism) {
    let n = lv.nrows();
    if n == 0 || data.is_empty() {
        return;
    }
    let cols = data.len() / n;
    let solve = |part: &mut [T]| {
        let block = MatMut::from_column_major_slice_mut(part, n, part.len() / n);
        if transpose {
            solve_upper_triangular_in_place(lv.transpose(), block, faer::Par::Seq);
        } else {
            solve_lower_triangular_in_place(lv, block, faer::Par::Seq);
        }
        clear_upper_vector_state();
    };
    if par.is_parallel() && cols > BLOCK_COLUMNS {
        data.par_chunks_mut(n * BLOCK_COLUMNS).for_each(solve);
    } else {
        data.chunks_mut(n * BLOCK_COLUMNS).for_each(solve);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transposes_products_and_solves_agree_with_nalgebra() {
        for (r, c) in [(1, 1), (3, 70), (70, 3), (100, 257), (256, 33)] {
            let a = crate::test_support::seeded_matrix(r, c, 5);
            for par in [Parallelism::Sequential, Parallelism::Parallel] {
                assert_eq!(Dense::<f64>::of(&a).transpose(par).wide(), a.transpose(), "{r} x {c}");
            }
        }
        let (x, y) = (crate::test_support::seeded_matrix(40, 90, 1), crate::test_support::seeded_matrix(40, 90, 2));
        let want = &x * y.transpose();
        let mut got = Dense::<f64>::of(&DMatrix::from_element(40, 40, 7.0));
        lower_product(&mut got, &Dense::of(&x.transpose()), &Dense::of(&y.transpose()), Parallelism::Parallel);
        let got = got.wide();
        for j in 0..40 {
            for i in 0..40 {
                if i >= j {
                    assert!((got[(i, j)] - want[(i, j)]).abs() < 1e-12);
                } else {
                    assert_eq!(got[(i, j)], 7.0, "the upper triangle is left alone");
                }
            }
        }
        // Solves in both precisions, blocks and all, against nalgebra's.
        let a = crate::test_support::seeded_matrix(30, 30, 3);
        let spd = &a * a.transpose() + DMatrix::identity(30, 30) * 5.0;
        let l = spd.clone().cholesky().unwrap().l();
        let b = crate::test_support::seeded_matrix(30, 600, 4);
        for (transpose, want) in
            [(false, l.solve_lower_triangular(&b).unwrap()), (true, l.transpose().solve_upper_triangular(&b).unwrap())]
        {
            for par in [Parallelism::Sequential, Parallelism::Parallel] {
                let mut x = Dense::<f64>::of(&b);
                solve_blocks(&Dense::of(&l), &mut x, transpose, par);
                assert!((x.wide() - &want).amax() < 1e-10);
                let mut x = Dense::<f32>::of(&b);
                solve_blocks(&Dense::of(&l), &mut x, transpose, par);
                assert!((x.wide() - &want).amax() < 1e-4);
            }
        }
    }
}

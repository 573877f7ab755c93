//! Gram matrices, built in column blocks spread across cores.
//!
//! Inner-product kernels (linear, polynomial) and squared-distance kernels (rbf,
//! exponential) get X^T Z from faer's matrix product, |x - z|^2 as |x|^2 + |z|^2 - 2 x.z
//! (round-off below zero clamped to 0), then a pointwise map. Each block of output columns
//! runs its product and its map back to back, so the map reads cache-warm data. K(X, X)
//! computes the lower triangle only and mirrors it. The L1 kernel has no product form and
//! runs a direct loop over the same blocks.

use super::hyper::Scales;
use super::{Kernel, RbfWidth};
use crate::linalg::Parallelism;
use faer::{Accum, MatMut, MatRef, Par};
use nalgebra::DMatrix;
use rayon::prelude::*;

/// A set of n points in d dimensions, stored as a d x n matrix: one point per column.
#[derive(Debug, Clone, PartialEq)]
pub struct Points(DMatrix<f64>);

impl Points {
    /// From rows of equal length (the JSON layout); `rows` must be non-empty and rectangular.
    pub fn from_rows(rows: &[Vec<f64>]) -> Points {
        let d = rows.first().map_or(0, Vec::len);
        let mut data = Vec::with_capacity(rows.len() * d);
        for r in rows {
            assert_eq!(r.len(), d, "ragged rows reached Points::from_rows");
            data.extend_from_slice(r);
        }
        Points(DMatrix::from_vec(d, rows.len(), data))
    }

    /// From a d x n matrix whose columns are the points.
    pub fn from_columns(m: DMatrix<f64>) -> Points {
        Points(m)
    }

    pub fn n(&self) -> usize {
        self.0.ncols()
    }

    pub fn d(&self) -> usize {
        self.0.nrows()
    }

    pub fn point(&self, i: usize) -> &[f64] {
        let d = self.d();
        &self.0.as_slice()[i * d..(i + 1) * d]
    }

    pub fn as_matrix(&self) -> &DMatrix<f64> {
        &self.0
    }

    /// Points start..start + len, copied.
    pub fn slice(&self, start: usize, len: usize) -> Points {
        Points(self.0.columns(start, len).into_owned())
    }

    pub fn memory_bytes(&self) -> usize {
        self.0.len() * std::mem::size_of::<f64>()
    }

    /// (p - shift) / scale feature by feature.
    fn affine(&self, shift: &[f64], scale: &[f64]) -> Points {
        let mut m = self.0.clone();
        for mut col in m.column_iter_mut() {
            for (k, v) in col.iter_mut().enumerate() {
                *v = (*v - shift[k]) / scale[k];
            }
        }
        Points(m)
    }

    fn mean(&self) -> Vec<f64> {
        let n = self.n().max(1) as f64;
        self.0.column_sum().iter().map(|s| s / n).collect()
    }

    fn view(&self) -> MatRef<'_, f64> {
        MatRef::from_column_major_slice(self.0.as_slice(), self.d(), self.n())
    }
}

/// Output columns per block: large enough for an efficient product, small enough that
/// a 4000-row block (4 MB) stays near the cache and gives the cores enough blocks.
const BLOCK_COLS: usize = 128;

/// How a kernel value is reached from the two points.
enum Base {
    /// f(x.z)
    Inner,
    /// f(|x - z|^2)
    SqDist,
    /// f(|x - z|_1)
    L1,
}

pub(super) fn build(k: &Kernel, x: &Points, z: Option<&Points>, par: Parallelism) -> DMatrix<f64> {
    match k {
        Kernel::Linear { c } => {
            let c = c.value;
            compute(Base::Inner, x, z, par, move |t| t + c)
        }
        Kernel::Polynomial { degree, gamma, coef0 } => {
            let (g, c0, p) = (gamma.value, coef0.value, *degree as i32);
            compute(Base::Inner, x, z, par, move |t| (g * t + c0).powi(p))
        }
        Kernel::Rbf(RbfWidth::Gamma(g)) => {
            let g = g.value;
            compute(Base::SqDist, x, z, par, move |d2| (-g * d2).exp())
        }
        Kernel::Rbf(RbfWidth::LengthScale(h)) => match &h.value {
            Scales::Isotropic(l) => {
                let g = 0.5 / (l * l);
                compute(Base::SqDist, x, z, par, move |d2| (-g * d2).exp())
            }
            Scales::PerFeature(ls) => {
                // Scale each feature by its length scale; then it is an rbf with l = 1.
                let zero = vec![0.0; ls.len()];
                let xs = x.affine(&zero, ls);
                let zs = z.map(|z| z.affine(&zero, ls));
                compute(Base::SqDist, &xs, zs.as_ref(), par, |d2| (-0.5 * d2).exp())
            }
        },
        Kernel::Exponential { length_scale } => {
            let inv = 1.0 / length_scale.value;
            compute(Base::SqDist, x, z, par, move |d2| (-d2.sqrt() * inv).exp())
        }
        Kernel::Laplacian { length_scale } => {
            let inv = 1.0 / length_scale.value;
            compute(Base::L1, x, z, par, move |d1| (-d1 * inv).exp())
        }
    }
}

/// K[i, j] = f(base(x_i, z_j)); z = None means z = x and a symmetric result.
fn compute(
    base: Base,
    x: &Points,
    z: Option<&Points>,
    par: Parallelism,
    f: impl Fn(f64) -> f64 + Sync,
) -> DMatrix<f64> {
    // Distances do not change under a shift; centring on x's mean keeps |x|^2 small, and
    // with it the cancellation error of |x|^2 + |z|^2 - 2 x.z.
    let centred;
    let (x, z) = match base {
        Base::SqDist => {
            let mu = x.mean();
            let one = vec![1.0; mu.len()];
            let xc = x.affine(&mu, &one);
            let zc = z.map(|z| z.affine(&mu, &one));
            centred = (xc, zc);
            (&centred.0, centred.1.as_ref())
        }
        _ => (x, z),
    };
    let symmetric = z.is_none();
    let z = z.unwrap_or(x);
    let (n, m) = (x.n(), z.n());
    let x_norms: Vec<f64> = (0..n).map(|i| x.point(i).iter().map(|v| v * v).sum()).collect();
    let z_norms: Vec<f64> =
        if symmetric { x_norms.clone() } else { (0..m).map(|j| z.point(j).iter().map(|v| v * v).sum()).collect() };

    let mut out = DMatrix::<f64>::zeros(n, m);
    if n == 0 || m == 0 {
        return out;
    }
    let fill = |block: usize, chunk: &mut [f64]| {
        let j0 = block * BLOCK_COLS;
        let cols = chunk.len() / n;
        // Symmetric: rows j0.. of these columns hold the diagonal block and the lower part.
        let i0 = if symmetric { j0 } else { 0 };
        // This thread may come straight from faer work (a Cholesky on the rayon pool).
        crate::linalg::clear_upper_vector_state();
        let dst = MatMut::from_column_major_slice_mut(&mut *chunk, n, cols);
        match base {
            Base::Inner | Base::SqDist => {
                let lhs = x.view().subcols(i0, n - i0).transpose();
                let rhs = z.view().subcols(j0, cols);
                let alpha = if matches!(base, Base::SqDist) { -2.0 } else { 1.0 };
                faer::linalg::matmul::matmul(dst.subrows_mut(i0, n - i0), Accum::Replace, lhs, rhs, alpha, Par::Seq);
                crate::linalg::clear_upper_vector_state();
                for jj in 0..cols {
                    let j = j0 + jj;
                    let col = &mut chunk[jj * n..(jj + 1) * n];
                    for i in i0..n {
                        let t = col[i];
                        let arg = match base {
                            Base::SqDist if symmetric && i == j => 0.0,
                            Base::SqDist => (x_norms[i] + z_norms[j] + t).max(0.0),
                            _ => t,
                        };
                        col[i] = f(arg);
                    }
                }
            }
            Base::L1 => {
                for jj in 0..cols {
                    let zj = z.point(j0 + jj);
                    let col = &mut chunk[jj * n..(jj + 1) * n];
                    for (i, v) in col.iter_mut().enumerate().skip(i0) {
                        let d1: f64 = x.point(i).iter().zip(zj).map(|(a, b)| (a - b).abs()).sum();
                        *v = f(d1);
                    }
                }
            }
        }
    };
    let chunks = out.as_mut_slice().chunks_mut(n * BLOCK_COLS);
    if par.is_parallel() {
        out_par(chunks.collect(), &fill);
    } else {
        chunks.enumerate().for_each(|(b, c)| fill(b, c));
    }
    if symmetric {
        mirror_lower(&mut out, par);
    }
    out
}

fn out_par(chunks: Vec<&mut [f64]>, fill: &(impl Fn(usize, &mut [f64]) + Sync)) {
    // Blocks near the right of a symmetric matrix are shorter; the rayon work queue
    // balances the uneven sizes.
    chunks.into_par_iter().enumerate().for_each(|(b, c)| fill(b, c));
}

/// Copies the strict lower triangle onto the upper, in square tiles so that both the
/// reads (along rows) and the writes stay within a few cache lines.
fn mirror_lower(a: &mut DMatrix<f64>, par: Parallelism) {
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
    use serde_json::json;

    fn seeded_points(d: usize, n: usize, seed: u64) -> Points {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        Points::from_columns(DMatrix::from_fn(d, n, |_, _| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 4.0 - 2.0 + 3.0
        }))
    }

    fn kernels() -> Vec<Kernel> {
        [
            json!({"type": "linear", "c": 0.5}),
            json!({"type": "polynomial", "degree": 3, "gamma": 0.2, "coef0": 1.0}),
            json!({"type": "rbf", "length_scale": 1.3}),
            json!({"type": "rbf", "gamma": 0.1}),
            json!({"type": "rbf", "length_scale": [0.5, 1.0, 2.0]}),
            json!({"type": "laplacian", "length_scale": 2.0}),
            json!({"type": "exponential", "length_scale": 0.7}),
        ]
        .iter()
        .map(|v| Kernel::from_json(v).unwrap())
        .collect()
    }

    /// Blocks, mirroring and both parallel modes agree with the pointwise definition, at
    /// sizes below, at and above the block width.
    #[test]
    fn gram_and_cross_match_pointwise_definition() {
        for &(n, m) in &[(1, 1), (5, 3), (64, 65), (150, 131)] {
            let x = seeded_points(3, n, n as u64);
            let z = seeded_points(3, m, 1000 + m as u64);
            for k in kernels() {
                for par in [Parallelism::Sequential, Parallelism::Parallel] {
                    let g = k.gram(&x, par);
                    let c = k.cross(&x, &z, par);
                    for i in 0..n {
                        for j in 0..n {
                            let want = k.eval(x.point(i), x.point(j));
                            assert!(
                                (g[(i, j)] - want).abs() <= 1e-12 * want.abs().max(1.0),
                                "{k:?} gram ({i},{j}) n={n}"
                            );
                        }
                        for j in 0..m {
                            let want = k.eval(x.point(i), z.point(j));
                            assert!((c[(i, j)] - want).abs() <= 1e-12 * want.abs().max(1.0), "{k:?} cross ({i},{j})");
                        }
                    }
                    assert_eq!(g, g.transpose(), "{k:?} not exactly symmetric");
                    let diag = k.diag(&x);
                    for i in 0..n {
                        assert!((diag[i] - g[(i, i)]).abs() <= 1e-12 * diag[i].abs().max(1.0));
                    }
                }
            }
        }
    }

    #[test]
    fn distance_kernels_are_exactly_one_on_the_diagonal() {
        let x = seeded_points(4, 70, 7);
        let k = Kernel::from_json(&json!({"type": "rbf", "length_scale": 0.1})).unwrap();
        let g = k.gram(&x, Parallelism::Sequential);
        assert!(g.diagonal().iter().all(|&v| v == 1.0));
    }
}

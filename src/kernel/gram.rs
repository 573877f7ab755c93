//! Gram matrices, built in column blocks spread across cores.
//!
//! Inner-product kernels (linear, polynomial) and squared-distance kernels (rbf,
//! exponential) get X^T Z from faer's matrix product, |x - z|^2 as |x|^2 + |z|^2 - 2 x.z
//! (round-off below zero clamped to 0), then a pointwise map. Each block of output columns
//! runs its product and its map back to back, so the map reads cache-warm data. K(X, X)
//! computes the lower triangle only and mirrors it. The L1 kernel has no product form and
//! runs a direct loop over the same blocks.

use super::fastexp::exp_nonpos4;
use super::hyper::Scales;
use super::points::PrepKey;
use super::{GramTable, Kernel, Nu, Points, RbfWidth};
use crate::linalg::Parallelism;
use faer::{Accum, MatMut, Par};
use nalgebra::DMatrix;
use rayon::prelude::*;
use std::f64::consts::PI;
use std::sync::Arc;
use wide::f64x4;

/// Output columns per block: wide enough that faer's per-call overhead is small, narrow
/// enough that a block's map pass finds its product still in cache and that two cores get
/// enough blocks to balance.
const BLOCK_COLS: usize = 128;

/// How a kernel value is reached from the two points.
#[derive(Clone, Copy, Debug)]
pub(super) enum Base {
    /// f(x.z)
    Inner,
    /// f(|x - z|^2)
    SqDist,
    /// f(|x - z|_1)
    L1,
}

/// A pass over a slice of base values turning them into kernel values in place.
type Map<'a> = &'a (dyn Fn(&mut [f64]) + Sync);

/// An owned [`Map`], capturing only copied hyperparameters.
pub(super) type LeafMap = Box<dyn Fn(&mut [f64]) + Send + Sync>;

/// A kernel that is a pointwise function of one base quantity of the two points, after
/// each feature is divided by `scales` (when given). Every kernel type but constant,
/// white and the combinators is one; the Gram builder and the column evaluator
/// (`column.rs`) share these definitions.
pub(super) struct Leaf {
    pub base: Base,
    pub scales: Option<Scales>,
    pub map: LeafMap,
}

pub(super) fn leaf(k: &Kernel) -> Option<Leaf> {
    let plain = |base, map: LeafMap| Some(Leaf { base, scales: None, map });
    match k {
        Kernel::Linear { c } => {
            let c = c.value;
            plain(Base::Inner, Box::new(move |col| col.iter_mut().for_each(|v| *v += c)))
        }
        Kernel::Polynomial { degree, gamma, coef0 } => {
            let (g, c0, p) = (gamma.value, coef0.value, *degree as i32);
            plain(Base::Inner, Box::new(move |col| col.iter_mut().for_each(|v| *v = (g * *v + c0).powi(p))))
        }
        Kernel::Sigmoid { gamma, coef0 } => {
            let (g, c0) = (gamma.value, coef0.value);
            plain(Base::Inner, Box::new(move |col| col.iter_mut().for_each(|v| *v = (g * *v + c0).tanh())))
        }
        Kernel::Rbf(RbfWidth::Gamma(g)) => {
            let ng = f64x4::splat(-g.value);
            plain(Base::SqDist, Box::new(move |col| map4(col, |v| exp_nonpos4(v * ng))))
        }
        Kernel::Rbf(RbfWidth::LengthScale(h)) => {
            let half = f64x4::splat(-0.5);
            Some(Leaf {
                base: Base::SqDist,
                scales: Some(h.value.clone()),
                map: Box::new(move |col| map4(col, |v| exp_nonpos4(v * half))),
            })
        }
        Kernel::Exponential { length_scale: h } | Kernel::Matern { length_scale: h, .. } => {
            let nu = if let Kernel::Matern { nu, .. } = k { *nu } else { Nu::Half };
            let map: LeafMap = match nu {
                Nu::Half => Box::new(|col| map4(col, |v| exp_nonpos4(-v.sqrt()))),
                Nu::ThreeHalves => Box::new(|col| {
                    let c = f64x4::splat(3f64.sqrt());
                    map4(col, |v| {
                        let s = v.sqrt() * c;
                        (s + 1.0) * exp_nonpos4(-s)
                    })
                }),
                Nu::FiveHalves => Box::new(|col| {
                    let c = f64x4::splat(5f64.sqrt());
                    map4(col, |v| {
                        let s = v.sqrt() * c;
                        (s * s * (1.0 / 3.0) + s + 1.0) * exp_nonpos4(-s)
                    })
                }),
            };
            Some(Leaf { base: Base::SqDist, scales: Some(h.value.clone()), map })
        }
        Kernel::RationalQuadratic { length_scale, alpha } => {
            let a = alpha.value;
            let inv = f64x4::splat(1.0 / (2.0 * a * length_scale.value * length_scale.value));
            let na = f64x4::splat(-a);
            plain(Base::SqDist, Box::new(move |col| map4(col, |v| exp_nonpos4((v * inv + 1.0).ln() * na))))
        }
        Kernel::Periodic { length_scale, period } => {
            let (w, c) = (PI / period.value, -2.0 / (length_scale.value * length_scale.value));
            plain(
                Base::SqDist,
                Box::new(move |col| {
                    col.iter_mut().for_each(|v| {
                        let s = (w * v.sqrt()).sin();
                        *v = (c * s * s).exp();
                    })
                }),
            )
        }
        Kernel::InverseMultiquadric { c } => {
            let c2 = f64x4::splat(c.value * c.value);
            plain(Base::SqDist, Box::new(move |col| map4(col, |v| (v + c2).sqrt().recip())))
        }
        Kernel::Laplacian { length_scale } => {
            let ninv = f64x4::splat(-1.0 / length_scale.value);
            plain(Base::L1, Box::new(move |col| map4(col, |v| exp_nonpos4(v * ninv))))
        }
        Kernel::Constant { .. }
        | Kernel::White { .. }
        | Kernel::Sum(_)
        | Kernel::Product(_)
        | Kernel::Scale { .. }
        | Kernel::Spectrum { .. }
        | Kernel::Subsequence { .. }
        | Kernel::Set { .. }
        | Kernel::Mahalanobis(_)
        | Kernel::Generative(_)
        | Kernel::Fisher(_)
        | Kernel::Precomputed => None,
    }
}

/// How much of a symmetric K(X, X) a caller reads.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Half {
    /// Both triangles.
    Full,
    /// The lower triangle and the diagonal; the strict upper triangle holds finite
    /// values of no meaning. A Cholesky factorisation reads no more, and mirroring
    /// n^2 / 2 entries it would overwrite costs a pass over the matrix.
    Lower,
}

pub(super) fn build(k: &Kernel, x: &Points, z: Option<&Points>, par: Parallelism) -> DMatrix<f64> {
    build_half(k, x, z, par, Half::Full)
}

pub(super) fn build_half(k: &Kernel, x: &Points, z: Option<&Points>, par: Parallelism, half: Half) -> DMatrix<f64> {
    let build = |k: &Kernel, x: &Points, z: Option<&Points>, par| build_half(k, x, z, par, half);
    let (n, m) = (x.n(), z.map_or(x.n(), Points::n));
    if let Kernel::Precomputed = k {
        return super::precomputed::build(x, z, par);
    }
    if let Some((base, map)) = super::structured::feature_map(k) {
        let zm = z.map(&map);
        return build(&base, &map(x), zm.as_ref(), par);
    }
    if let Some(out) = super::structured::build(k, x, z, par) {
        return out;
    }
    if let Some(leaf) = leaf(k) {
        if let (Base::SqDist, Some(z)) = (leaf.base, z) {
            // A cross matrix against a model's kept points: their scaled, centred copy
            // and norms are made once and kept with them, not once per predict.
            let cached = CentredSide::cached(x, leaf.scales.as_ref());
            let side = &cached.1;
            let zs = match &leaf.scales {
                Some(s) => z.scaled(s),
                None => std::borrow::Cow::Borrowed(z),
            };
            let zc = zs.affine(&side.mu, &vec![1.0; side.mu.len()]);
            let z_norms = sq_norms(&zc);
            return fill(Base::SqDist, &side.points, &side.norms, Some((&zc, &z_norms)), par, &*leaf.map, half);
        }
        return match &leaf.scales {
            Some(s) => {
                let (xs, zs) = (x.scaled(s), z.map(|z| z.scaled(s)));
                compute(leaf.base, &xs, zs.as_deref(), par, &*leaf.map, half)
            }
            None => compute(leaf.base, x, z, par, &*leaf.map, half),
        };
    }
    match k {
        Kernel::Constant { value } => {
            let mut k = crate::linalg::zeros(n, m);
            k.fill(value.value);
            k
        }
        Kernel::White { noise } => {
            let mut k = crate::linalg::zeros(n, m);
            if z.is_none() {
                k.fill_diagonal(noise.value);
            }
            k
        }
        Kernel::Sum(ks) => {
            let mut acc = build(&ks[0], x, z, par);
            for part in &ks[1..] {
                acc += build(part, x, z, par);
            }
            acc
        }
        Kernel::Product(ks) => {
            let mut acc = build(&ks[0], x, z, par);
            for part in &ks[1..] {
                acc.component_mul_assign(&build(part, x, z, par));
            }
            acc
        }
        Kernel::Scale { factor, kernel } => build(kernel, x, z, par) * factor.value,
        _ => unreachable!("every other kernel type is a leaf"),
    }
}

/// Squared distances |(x_i - z_j) / l|^2, z None meaning Z = X (for the gradients).
pub(super) fn scaled_sq_distances(x: &Points, z: Option<&Points>, scales: &Scales, par: Parallelism) -> DMatrix<f64> {
    let zs = z.map(|z| z.scaled(scales));
    compute(Base::SqDist, &x.scaled(scales), zs.as_deref(), par, &|_| {}, Half::Full)
}

/// (a, b) <- f(a) entry by entry, four lanes at a time, split across cores: a map that
/// writes its input's place and a second matrix of the same shape in one pass.
pub(super) fn map_matrix_into(
    a: &mut DMatrix<f64>,
    b: &mut DMatrix<f64>,
    par: Parallelism,
    f: &(dyn Fn(f64x4) -> (f64x4, f64x4) + Sync),
) {
    assert_eq!(a.shape(), b.shape());
    let chunk = 1 << 16;
    let pass = |(ca, cb): (&mut [f64], &mut [f64])| {
        let mut lanes = ca.chunks_exact_mut(4).zip(cb.chunks_exact_mut(4));
        for (la, lb) in &mut lanes {
            let (va, vb) = f(f64x4::new([la[0], la[1], la[2], la[3]]));
            la.copy_from_slice(&va.to_array());
            lb.copy_from_slice(&vb.to_array());
        }
        let done = ca.len() / 4 * 4;
        let (ra, rb) = (&mut ca[done..], &mut cb[done..]);
        if !ra.is_empty() {
            let mut buf = [0.0; 4];
            buf[..ra.len()].copy_from_slice(ra);
            let (va, vb) = f(f64x4::new(buf));
            let k = ra.len();
            ra.copy_from_slice(&va.to_array()[..k]);
            rb.copy_from_slice(&vb.to_array()[..k]);
        }
    };
    let pairs = a.as_mut_slice().chunks_mut(chunk).zip(b.as_mut_slice().chunks_mut(chunk));
    if par.is_parallel() {
        pairs.collect::<Vec<_>>().into_par_iter().for_each(pass);
    } else {
        pairs.for_each(pass);
    }
}

/// Applies `f` to `col` four lanes at a time (AVX2 under x86-64-v3). wide's exp and ln
/// are accurate to about an ulp, far inside the 1e-10 parity tolerance.
pub(super) fn map4(col: &mut [f64], f: impl Fn(f64x4) -> f64x4) {
    let mut chunks = col.chunks_exact_mut(4);
    for c in &mut chunks {
        let v = f(f64x4::new([c[0], c[1], c[2], c[3]]));
        c.copy_from_slice(&v.to_array());
    }
    let rest = chunks.into_remainder();
    if !rest.is_empty() {
        let mut buf = [0.0; 4];
        buf[..rest.len()].copy_from_slice(rest);
        let v = f(f64x4::new(buf)).to_array();
        rest.copy_from_slice(&v[..rest.len()]);
    }
}

/// Points divided by their length scales and centred on their mean, with the squared
/// norms of the result: one side of |x - z|^2 = |x|^2 + |z|^2 - 2 x.z.
struct CentredSide {
    points: Points,
    mu: Vec<f64>,
    norms: Vec<f64>,
}

impl CentredSide {
    /// Distances do not change under a shift; centring on x's mean keeps |x|^2 small,
    /// and with it the cancellation error of |x|^2 + |z|^2 - 2 x.z.
    fn new(x: &Points) -> CentredSide {
        let mu = x.mean();
        let points = x.affine(&mu, &vec![1.0; mu.len()]);
        let norms = sq_norms(&points);
        CentredSide { points, mu, norms }
    }

    /// [`CentredSide::new`] of `x` scaled by `scales`, kept with `x` (see `PrepKey`),
    /// behind the exact scales it was made for.
    fn cached(x: &Points, scales: Option<&Scales>) -> Arc<(Vec<u64>, CentredSide)> {
        let bits: Vec<u64> = match scales {
            None => vec![],
            Some(Scales::Isotropic(l)) => vec![l.to_bits()],
            Some(Scales::PerFeature(ls)) => std::iter::once(u64::MAX).chain(ls.iter().map(|l| l.to_bits())).collect(),
        };
        let key = bits.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b).wrapping_mul(0x0100_0000_01b3));
        let make = || {
            let side = match scales {
                Some(s) => CentredSide::new(&x.scaled(s)),
                None => CentredSide::new(x),
            };
            let bytes = side.points.memory_bytes() + 8 * (side.mu.len() + side.norms.len() + bits.len());
            ((bits.clone(), side), bytes)
        };
        let entry: Arc<(Vec<u64>, CentredSide)> = x.prepared(PrepKey::Centred(key), make);
        if entry.0 == bits {
            return entry;
        }
        // Two scale vectors with one fingerprint: correct, just not cached.
        Arc::new(make().0)
    }
}

fn sq_norms(p: &Points) -> Vec<f64> {
    (0..p.n()).map(|i| p.point(i).iter().map(|v| v * v).sum()).collect()
}

/// K[i, j] = map(base(x_i, z_j)); z = None means z = x and a symmetric result.
fn compute(base: Base, x: &Points, z: Option<&Points>, par: Parallelism, map: Map<'_>, half: Half) -> DMatrix<f64> {
    match base {
        Base::SqDist => {
            let side = CentredSide::new(x);
            let zc = z.map(|z| z.affine(&side.mu, &vec![1.0; side.mu.len()]));
            let z_norms = zc.as_ref().map(sq_norms);
            let z = zc.as_ref().zip(z_norms.as_deref());
            fill(base, &side.points, &side.norms, z, par, map, half)
        }
        _ => fill(base, x, &[], z.map(|z| (z, &[][..])), par, map, half),
    }
}

/// K[i, j] = map(base(x_i, z_j)) from prepared sides (for distances: centred, with
/// their squared norms; other bases ignore the norms); z = None means z = x and a
/// symmetric result.
fn fill(
    base: Base,
    x: &Points,
    x_norms: &[f64],
    z: Option<(&Points, &[f64])>,
    par: Parallelism,
    map: Map<'_>,
    half: Half,
) -> DMatrix<f64> {
    let symmetric = z.is_none();
    let (z, z_norms) = z.unwrap_or((x, x_norms));
    let (n, m) = (x.n(), z.n());

    let mut out = crate::linalg::zeros(n, m);
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
        match base {
            Base::Inner | Base::SqDist => {
                let alpha = if matches!(base, Base::SqDist) { -2.0 } else { 1.0 };
                if symmetric {
                    let dst = MatMut::from_column_major_slice_mut(&mut *chunk, n, cols);
                    let lhs = x.view().subcols(i0, n - i0).transpose();
                    let rhs = z.view().subcols(j0, cols);
                    faer::linalg::matmul::matmul(
                        dst.subrows_mut(i0, n - i0),
                        Accum::Replace,
                        lhs,
                        rhs,
                        alpha,
                        Par::Seq,
                    );
                    crate::linalg::clear_upper_vector_state();
                } else {
                    // Against query points: each entry's bits its pair's alone.
                    super::pairwise::inner_block(x, z, j0, cols, alpha, chunk);
                }
                if let Base::SqDist = base {
                    for jj in 0..cols {
                        let j = j0 + jj;
                        let col = &mut chunk[jj * n..(jj + 1) * n];
                        let zj = z.point(j);
                        for i in i0..n {
                            let scale = x_norms[i] + z_norms[j];
                            let d2 = (scale + col[i]).max(0.0);
                            // |x|^2 + |z|^2 - 2 x.z loses up to eps * scale to cancellation;
                            // where that is not small against d2 (nearby points, which the
                            // square root in exponential/Matern kernels amplifies), sum the
                            // differences directly: d2 then keeps ~1e-12 relative accuracy.
                            col[i] = if d2 < 1e-4 * scale {
                                x.point(i).iter().zip(zj).map(|(a, b)| (a - b) * (a - b)).sum()
                            } else {
                                d2
                            };
                        }
                        if symmetric {
                            col[j] = 0.0;
                        }
                    }
                }
            }
            Base::L1 => {
                for jj in 0..cols {
                    let zj = z.point(j0 + jj);
                    let col = &mut chunk[jj * n..(jj + 1) * n];
                    for (i, v) in col.iter_mut().enumerate().skip(i0) {
                        *v = x.point(i).iter().zip(zj).map(|(a, b)| (a - b).abs()).sum();
                    }
                }
            }
        }
        for jj in 0..cols {
            map(&mut chunk[jj * n + i0..(jj + 1) * n]);
        }
    };
    let chunks = out.as_mut_slice().chunks_mut(n * BLOCK_COLS);
    if par.is_parallel() {
        // Blocks near the right of a symmetric matrix are shorter; rayon's work queue
        // balances the uneven sizes.
        chunks.collect::<Vec<_>>().into_par_iter().enumerate().for_each(|(b, c)| fill(b, c));
    } else {
        chunks.enumerate().for_each(|(b, c)| fill(b, c));
    }
    if symmetric && half == Half::Full {
        crate::linalg::mirror_lower(&mut out, par);
    }
    out
}

impl GramTable {
    /// `kernel`'s Gram matrix over `x`, as a table.
    pub fn new(kernel: &Kernel, x: &Points, par: Parallelism) -> GramTable {
        GramTable::from_matrix(kernel.gram(x, par))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Points in [1, 5)^d: off the origin, so centring inside the distance kernels matters.
    fn seeded_points(d: usize, n: usize, seed: u64) -> Points {
        Points::from_columns(crate::test_support::seeded_matrix(d, n, seed).add_scalar(1.5) * 2.0)
    }

    fn kernels() -> Vec<Kernel> {
        [
            json!({"type": "linear", "c": 0.5}),
            json!({"type": "polynomial", "degree": 3, "gamma": 0.2, "coef0": 1.0}),
            json!({"type": "sigmoid", "gamma": 0.05, "coef0": -0.2}),
            json!({"type": "rbf", "length_scale": 1.3}),
            json!({"type": "rbf", "gamma": 0.1}),
            json!({"type": "rbf", "length_scale": [0.5, 1.0, 2.0]}),
            json!({"type": "laplacian", "length_scale": 2.0}),
            json!({"type": "exponential", "length_scale": 0.7}),
            json!({"type": "exponential", "length_scale": [0.7, 1.0, 3.0]}),
            json!({"type": "matern", "nu": 0.5, "length_scale": 1.0}),
            json!({"type": "matern", "nu": 1.5, "length_scale": [2.0, 1.0, 0.5]}),
            json!({"type": "matern", "nu": 2.5, "length_scale": 1.4}),
            json!({"type": "rational_quadratic", "length_scale": 1.2, "alpha": 0.7}),
            json!({"type": "periodic", "length_scale": 0.9, "period": 2.5}),
            json!({"type": "inverse_multiquadric", "c": 1.5}),
            json!({"type": "constant", "value": 0.3}),
            json!({"type": "white", "noise": 0.2}),
            json!({"type": "sum", "kernels": [{"type": "rbf"}, {"type": "white", "noise": 0.1}, {"type": "linear"}]}),
            json!({"type": "product", "kernels": [{"type": "constant", "value": 2.0}, {"type": "matern"}]}),
            json!({"type": "scale", "factor": 3.0, "kernel": {"type": "sum", "kernels": [{"type": "periodic"}, {"type": "rbf", "gamma": 2.0}]}}),
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
                            let want = k.eval(x.point(i), x.point(j), i == j);
                            assert!(
                                (g[(i, j)] - want).abs() <= 1e-12 * want.abs().max(1.0),
                                "{k:?} gram ({i},{j}) n={n}"
                            );
                        }
                        for j in 0..m {
                            let want = k.eval(x.point(i), z.point(j), false);
                            assert!((c[(i, j)] - want).abs() <= 1e-12 * want.abs().max(1.0), "{k:?} cross ({i},{j})");
                        }
                    }
                    assert_eq!(g, g.transpose(), "{k:?} not exactly symmetric");
                    let diag = k.diag(&x);
                    for i in 0..n {
                        assert!((diag[i] - g[(i, i)]).abs() <= 1e-12 * diag[i].abs().max(1.0));
                    }
                    // The lower half a factorisation reads: the same bits, and the same factor.
                    let lower = k.gram_lower(&x, par);
                    for j in 0..n {
                        for i in j..n {
                            assert_eq!(lower[(i, j)].to_bits(), g[(i, j)].to_bits(), "{k:?} lower ({i},{j})");
                        }
                    }
                    assert!(lower.iter().all(|v| v.is_finite()));
                    if n > 1 {
                        let shifted = |a: &DMatrix<f64>| a + DMatrix::from_diagonal_element(n, n, n as f64);
                        let f1 = crate::linalg::Cholesky::factor(shifted(&g), par).unwrap();
                        let f2 = crate::linalg::Cholesky::factor(shifted(&lower), par).unwrap();
                        assert_eq!(f1.l(), f2.l(), "{k:?} factor");
                    }
                }
            }
        }
    }

    /// Nearby points far from the mean: the product form of |x - z|^2 cancels, and the
    /// exponential kernel's square root would amplify it; the direct sum keeps accuracy.
    #[test]
    fn nearby_points_keep_full_accuracy_in_root_distance_kernels() {
        // |x|^2 ~ 1e8 after centring, |x - z|^2 = 0.25: the product form loses ~1e-8.
        let a = [12_345.678_901, -4_321.098_765_4];
        let x = Points::from_rows(&[a.to_vec(), vec![a[0] + 0.3141, a[1] - 0.2718], vec![-0.7 * a[0], -0.3 * a[1]]]);
        for spec in [json!({"type": "exponential"}), json!({"type": "matern", "nu": 1.5})] {
            let k = Kernel::from_json(&spec).unwrap();
            let g = k.gram(&x, Parallelism::Sequential);
            let want = k.eval(x.point(0), x.point(1), false);
            assert!(want > 1e-3, "the points are close on the kernel's scale");
            assert!((g[(0, 1)] - want).abs() <= 1e-12 * want, "{spec}: {} vs {want}", g[(0, 1)]);
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

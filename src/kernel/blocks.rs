//! Kernel blocks K(Z, Q) against fixed points Z, for solvers that recompute the same
//! cross matrix many times (the Nystrom conjugate gradients): in double or in single
//! precision, and with the block's dot products with a vector summed while each column
//! is made.
//!
//! For the distance kernels (rbf, exponential, matern, each possibly scaled) Z is
//! divided by its length scales, centred and stored in the block's precision once; each
//! block of query rows gets the same treatment, -2 z.q comes from a matrix product
//! (faer) written into the block, and one pass adds |z|^2 + |q|^2, applies the map
//! (with the kernels' exp, [`super::fastexp`]), stores the value and adds it times p_i
//! to the dot: f64x4 lanes in double, f32x8 in single (x86-64-v3: twice the lanes).
//! Every other kernel is computed by [`Kernel::cross`] and, in single precision,
//! rounded, so that both precisions work for any kernel.
//!
//! Single-precision values, double sums: the dot products accumulate in double (as do
//! the callers' products with the blocks). Single-precision sums of M terms took float32
//! fits 1e-4 to 3e-4 from float64 ones on the fixtures (the solve amplifies the
//! operator's error by its condition); double sums bring that to about 1e-6, of which
//! the distances' own f32 cancellation error (1e-7 of |z|^2 + |q|^2) is most. The
//! exponential, not the sums, sets the block's time.

use super::fastexp::{exp_nonpos4, exp_nonpos8};
use super::hyper::Scales;
use super::{Kernel, Nu, Points, RbfWidth};
use crate::linalg::Parallelism;
use faer::{Accum, MatMut, MatRef, Par};
use wide::{f32x8, f64x4};

/// The pointwise map of a squared (scaled) distance s to a kernel value, before `factor`.
#[derive(Debug, Clone, Copy)]
pub enum Map {
    /// exp(c s)
    Gauss(f64),
    /// Matern with this nu over r = sqrt(s).
    Matern(Nu),
}

/// A block element type: f64 (four lanes) or f32 (eight).
pub trait Element: faer::traits::RealField + Copy + Default + std::ops::AddAssign + Send + Sync + 'static {
    fn of(v: f64) -> Self;
    fn wide(self) -> f64;
    /// col_i <- factor map(max(0, col_i + zn_i + qn)); returns sum_i col_i p_i (in
    /// double) when `p` is given.
    fn map_column(col: &mut [Self], zn: &[Self], qn: Self, map: Map, factor: f64, p: Option<&[f64]>) -> f64;
}

/// The distance form of a kernel over Z, in one precision.
#[derive(Debug)]
struct Distance<T> {
    /// Z scaled and centred, d x M column-major.
    z: Vec<T>,
    z_norms: Vec<T>,
    /// The centre (of the scaled Z) and 1 / length scale per feature.
    mu: Vec<f64>,
    inv_scales: Vec<f64>,
    map: Map,
    factor: f64,
}

/// K(Z, Q) in precision T for a fixed Z.
#[derive(Debug)]
pub struct CrossBlocks<'a, T> {
    kernel: &'a Kernel,
    z: &'a Points,
    fast: Option<Distance<T>>,
}

/// A block's query rows, scaled and centred, kept between blocks to save allocations.
#[derive(Debug, Default)]
pub struct Scratch<T> {
    q: Vec<T>,
    q_norms: Vec<T>,
}

impl<'a, T: Element> CrossBlocks<'a, T> {
    pub fn new(kernel: &'a Kernel, z: &'a Points) -> CrossBlocks<'a, T> {
        let fast = z.numeric().and_then(|zm| distance(kernel, zm));
        CrossBlocks { kernel, z, fast }
    }

    /// Whether blocks come from the distance path (else from [`Kernel::cross`]).
    pub fn is_native(&self) -> bool {
        self.fast.is_some()
    }

    pub fn m(&self) -> usize {
        self.z.n()
    }

    /// out (M x b column-major, resized) <- K(Z, Q) for the b points of `q`.
    pub fn block(&self, q: &Points, out: &mut Vec<T>, scratch: &mut Scratch<T>) {
        self.block_dot(q, None, out, &mut [], scratch);
    }

    /// [`CrossBlocks::block`], and with `p` (M x t column-major) also dots (b x t
    /// column-major) <- K(Z, Q)' p, summed in double, the first output's while each
    /// column is made.
    pub fn block_dot(
        &self,
        q: &Points,
        p: Option<&[f64]>,
        out: &mut Vec<T>,
        dots: &mut [f64],
        scratch: &mut Scratch<T>,
    ) {
        let (m, b) = (self.m(), q.n());
        // Every value is written below: no need to clear.
        out.resize(m * b, T::default());
        let t = p.map_or(0, |p| p.len() / m);
        let Some(f) = &self.fast else {
            let k = self.kernel.cross(self.z, q, Parallelism::Sequential);
            out.iter_mut().zip(k.as_slice()).for_each(|(o, v)| *o = T::of(*v));
            if let Some(p) = p {
                for (j, col) in out.chunks_exact(m).enumerate() {
                    for o in 0..t {
                        dots[o * b + j] = col.iter().zip(&p[o * m..(o + 1) * m]).map(|(k, v)| k.wide() * v).sum();
                    }
                }
            }
            return;
        };
        let qm = q.numeric().expect("numeric rows, as Z");
        let d = f.mu.len();
        let Scratch { q: qc, q_norms } = scratch;
        qc.clear();
        q_norms.clear();
        for j in 0..b {
            let mut norm = T::default();
            for i in 0..d {
                let v = T::of(qm[(i, j)] * f.inv_scales[i] - f.mu[i]);
                qc.push(v);
                norm += v * v;
            }
            q_norms.push(norm);
        }
        {
            let dst = MatMut::from_column_major_slice_mut(out.as_mut_slice(), m, b);
            let zv = MatRef::from_column_major_slice(f.z.as_slice(), d, m);
            let qv = MatRef::from_column_major_slice(qc.as_slice(), d, b);
            faer::linalg::matmul::matmul(dst, Accum::Replace, zv.transpose(), qv, T::of(-2.0), Par::Seq);
        }
        crate::linalg::clear_upper_vector_state();
        for (j, (col, qn)) in out.chunks_exact_mut(m).zip(q_norms.iter()).enumerate() {
            let first = T::map_column(col, &f.z_norms, *qn, f.map, f.factor, p.map(|p| &p[..m]));
            if t > 0 {
                dots[j] = first;
            }
            for o in 1..t {
                dots[o * b + j] =
                    col.iter().zip(&p.expect("t > 0")[o * m..(o + 1) * m]).map(|(k, v)| k.wide() * v).sum();
            }
        }
    }
}

impl Element for f64 {
    fn of(v: f64) -> f64 {
        v
    }

    fn wide(self) -> f64 {
        self
    }

    fn map_column(col: &mut [f64], zn: &[f64], qn: f64, map: Map, factor: f64, p: Option<&[f64]>) -> f64 {
        let fv = f64x4::splat(factor);
        // One loop per map, so that each is compiled with its map inlined.
        match map {
            Map::Gauss(c) => {
                let c = f64x4::splat(c);
                lanes4(col, zn, qn, p, |s| exp_nonpos4(s * c) * fv)
            }
            Map::Matern(Nu::Half) => lanes4(col, zn, qn, p, |s| exp_nonpos4(-s.sqrt()) * fv),
            Map::Matern(Nu::ThreeHalves) => {
                let c = f64x4::splat(3f64.sqrt());
                lanes4(col, zn, qn, p, |s| {
                    let r = s.sqrt() * c;
                    (r + 1.0) * exp_nonpos4(-r) * fv
                })
            }
            Map::Matern(Nu::FiveHalves) => {
                let c = f64x4::splat(5f64.sqrt());
                lanes4(col, zn, qn, p, |s| {
                    let r = s.sqrt() * c;
                    (r * r * (1.0 / 3.0) + r + 1.0) * exp_nonpos4(-r) * fv
                })
            }
        }
    }
}

impl Element for f32 {
    fn of(v: f64) -> f32 {
        v as f32
    }

    fn wide(self) -> f64 {
        self as f64
    }

    fn map_column(col: &mut [f32], zn: &[f32], qn: f32, map: Map, factor: f64, p: Option<&[f64]>) -> f64 {
        let fv = f32x8::splat(factor as f32);
        match map {
            Map::Gauss(c) => {
                let c = f32x8::splat(c as f32);
                lanes8(col, zn, qn, p, |s| exp_nonpos8(s * c) * fv)
            }
            Map::Matern(Nu::Half) => lanes8(col, zn, qn, p, |s| exp_nonpos8(-s.sqrt()) * fv),
            Map::Matern(Nu::ThreeHalves) => {
                let c = f32x8::splat(3f32.sqrt());
                lanes8(col, zn, qn, p, |s| {
                    let r = s.sqrt() * c;
                    (r + 1.0) * exp_nonpos8(-r) * fv
                })
            }
            Map::Matern(Nu::FiveHalves) => {
                let c = f32x8::splat(5f32.sqrt());
                lanes8(col, zn, qn, p, |s| {
                    let r = s.sqrt() * c;
                    (r * r * (1.0 / 3.0) + r + 1.0) * exp_nonpos8(-r) * fv
                })
            }
        }
    }
}

/// col_i <- f(max(0, col_i + zn_i + qn)) four lanes at a time; returns col . p.
#[inline(always)]
fn lanes4(col: &mut [f64], zn: &[f64], qn: f64, p: Option<&[f64]>, f: impl Fn(f64x4) -> f64x4) -> f64 {
    let (zero, q) = (f64x4::splat(0.0), f64x4::splat(qn));
    let arg = |c: &[f64], z: &[f64]| {
        (f64x4::new(c.try_into().expect("4 lanes")) + f64x4::new(z.try_into().expect("4 lanes")) + q).max(zero)
    };
    let mut acc = zero;
    let full = col.len() / 4 * 4;
    match p {
        Some(p) => {
            for ((c, z), pv) in col.chunks_exact_mut(4).zip(zn.chunks_exact(4)).zip(p.chunks_exact(4)) {
                let k = f(arg(c, z));
                c.copy_from_slice(&k.to_array());
                acc = k.mul_add(f64x4::new(pv.try_into().expect("4 lanes")), acc);
            }
        }
        None => {
            for (c, z) in col.chunks_exact_mut(4).zip(zn.chunks_exact(4)) {
                c.copy_from_slice(&f(arg(c, z)).to_array());
            }
        }
    }
    let rest = col.len() - full;
    if rest > 0 {
        let (mut c, mut z) = ([0.0; 4], [0.0; 4]);
        c[..rest].copy_from_slice(&col[full..]);
        z[..rest].copy_from_slice(&zn[full..]);
        let v = f(arg(&c, &z)).to_array();
        col[full..].copy_from_slice(&v[..rest]);
    }
    let tail = p.map_or(0.0, |p| col[full..].iter().zip(&p[full..]).map(|(k, v)| k * v).sum());
    acc.reduce_add() + tail
}

/// col_i <- f(max(0, col_i + zn_i + qn)) eight lanes at a time; returns col . p summed
/// in double.
#[inline(always)]
fn lanes8(col: &mut [f32], zn: &[f32], qn: f32, p: Option<&[f64]>, f: impl Fn(f32x8) -> f32x8) -> f64 {
    let (zero, q) = (f32x8::splat(0.0), f32x8::splat(qn));
    let arg = |c: &[f32], z: &[f32]| {
        (f32x8::new(c.try_into().expect("8 lanes")) + f32x8::new(z.try_into().expect("8 lanes")) + q).max(zero)
    };
    let (mut acc0, mut acc1) = (f64x4::splat(0.0), f64x4::splat(0.0));
    let full = col.len() / 8 * 8;
    match p {
        Some(p) => {
            for ((c, z), pv) in col.chunks_exact_mut(8).zip(zn.chunks_exact(8)).zip(p.chunks_exact(8)) {
                let k = f(arg(c, z)).to_array();
                c.copy_from_slice(&k);
                let half = |h: usize| f64x4::new([k[h] as f64, k[h + 1] as f64, k[h + 2] as f64, k[h + 3] as f64]);
                acc0 = half(0).mul_add(f64x4::new(pv[..4].try_into().expect("4 lanes")), acc0);
                acc1 = half(4).mul_add(f64x4::new(pv[4..].try_into().expect("4 lanes")), acc1);
            }
        }
        None => {
            for (c, z) in col.chunks_exact_mut(8).zip(zn.chunks_exact(8)) {
                c.copy_from_slice(&f(arg(c, z)).to_array());
            }
        }
    }
    let rest = col.len() - full;
    if rest > 0 {
        let (mut c, mut z) = ([0f32; 8], [0f32; 8]);
        c[..rest].copy_from_slice(&col[full..]);
        z[..rest].copy_from_slice(&zn[full..]);
        let v = f(arg(&c, &z)).to_array();
        col[full..].copy_from_slice(&v[..rest]);
    }
    let tail = p.map_or(0.0, |p| col[full..].iter().zip(&p[full..]).map(|(k, v)| *k as f64 * v).sum());
    (acc0 + acc1).reduce_add() + tail
}

/// The distance form of `kernel` over Z (d x M), when it has one.
fn distance<T: Element>(kernel: &Kernel, zm: &nalgebra::DMatrix<f64>) -> Option<Distance<T>> {
    let (mut factor, mut k) = (1.0f64, kernel);
    if let Kernel::Scale { factor: f, kernel: inner } = kernel {
        factor = f.value;
        k = inner;
    }
    let d = zm.nrows();
    let per_feature = |s: &Scales| -> Vec<f64> {
        match s {
            Scales::Isotropic(l) => vec![1.0 / l; d],
            Scales::PerFeature(ls) => ls.iter().map(|l| 1.0 / l).collect(),
        }
    };
    let (inv_scales, map) = match k {
        Kernel::Rbf(RbfWidth::Gamma(g)) => (vec![1.0; d], Map::Gauss(-g.value)),
        Kernel::Rbf(RbfWidth::LengthScale(h)) => (per_feature(&h.value), Map::Gauss(-0.5)),
        Kernel::Exponential { length_scale } => (per_feature(&length_scale.value), Map::Matern(Nu::Half)),
        Kernel::Matern { length_scale, nu } => (per_feature(&length_scale.value), Map::Matern(*nu)),
        _ => return None,
    };
    if inv_scales.len() != d {
        return None;
    }
    let m = zm.ncols();
    let mut mu = vec![0.0; d];
    for j in 0..m {
        for i in 0..d {
            mu[i] += zm[(i, j)] * inv_scales[i];
        }
    }
    mu.iter_mut().for_each(|v| *v /= m.max(1) as f64);
    let mut z = vec![T::default(); d * m];
    let mut z_norms = vec![T::default(); m];
    for j in 0..m {
        let mut norm = T::default();
        for i in 0..d {
            let v = T::of(zm[(i, j)] * inv_scales[i] - mu[i]);
            z[j * d + i] = v;
            norm += v * v;
        }
        z_norms[j] = norm;
    }
    Some(Distance { z, z_norms, mu, inv_scales, map, factor })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Blocks and their fused dots agree with the f64 kernel: to 1e-12 in double, to
    /// single precision in f32, on the distance path and on [`Kernel::cross`]'s.
    #[test]
    fn blocks_match_the_kernel() {
        let z = Points::from_columns(crate::test_support::seeded_matrix(3, 37, 1));
        let q = Points::from_columns(crate::test_support::seeded_matrix(3, 11, 2) * 1.5);
        for (spec, native) in [
            (json!({"type": "rbf", "length_scale": 0.9}), true),
            (json!({"type": "rbf", "gamma": 0.4}), true),
            (json!({"type": "rbf", "length_scale": [0.5, 1.0, 2.0]}), true),
            (json!({"type": "matern", "nu": 0.5, "length_scale": 1.1}), true),
            (json!({"type": "matern", "nu": 1.5, "length_scale": 1.1}), true),
            (json!({"type": "matern", "nu": 2.5, "length_scale": [0.7, 1.3, 1.0]}), true),
            (json!({"type": "exponential", "length_scale": 2.0}), true),
            (json!({"type": "scale", "factor": 2.5, "kernel": {"type": "rbf", "length_scale": 0.8}}), true),
            (json!({"type": "laplacian", "length_scale": 1.5}), false),
            (json!({"type": "sum", "kernels": [{"type": "rbf"}, {"type": "linear"}]}), false),
        ] {
            let kernel = Kernel::from_json(&spec).unwrap();
            let want = kernel.cross(&z, &q, Parallelism::Sequential);
            let scale = want.amax();
            // Five outputs: the first summed in lanes, the others from the stored column.
            let p: Vec<f64> = (0..37 * 5).map(|i| ((i * 7) % 11) as f64 / 11.0 - 0.4).collect();
            let check = |got: Vec<f64>, dots: Vec<f64>, tol: f64| {
                for (g, w) in got.iter().zip(want.as_slice()) {
                    assert!((g - w).abs() <= tol * scale, "{spec}: {g} vs {w}");
                }
                for o in 0..5 {
                    for j in 0..11 {
                        let exact: f64 = (0..37).map(|i| want[(i, j)] * p[o * 37 + i]).sum();
                        assert!((dots[o * 11 + j] - exact).abs() <= 10.0 * tol * scale, "{spec}: dot {o} {j}");
                    }
                }
            };
            let double = CrossBlocks::<f64>::new(&kernel, &z);
            assert_eq!(double.is_native(), native, "{spec}");
            let (mut out, mut dots) = (Vec::new(), vec![0.0; 55]);
            double.block_dot(&q, Some(&p), &mut out, &mut dots, &mut Scratch::default());
            check(out, dots, 1e-12);
            let single = CrossBlocks::<f32>::new(&kernel, &z);
            let (mut out, mut dots) = (Vec::new(), vec![0.0; 55]);
            single.block_dot(&q, Some(&p), &mut out, &mut dots, &mut Scratch::default());
            check(out.iter().map(|v| *v as f64).collect(), dots, 2e-6);
            let mut plain = Vec::new();
            single.block(&q, &mut plain, &mut Scratch::default());
            assert_eq!(plain.len(), 37 * 11);
        }
    }
}

//! Kernel matrices' adjoints: given W, the gradient of <W, K(Z, X)> with respect to the
//! kernel's free log hyperparameters (theta's order) and, when asked, the points Z, in one
//! walk of the algebra. What a variational GP needs per minibatch, where building every
//! dK/dtheta_j as its own matrix (`cross_with_gradient`) costs more than the solves.
//!
//! The kernels of a scaled distance (rbf, matern, exponential) take a fused path: one
//! elementwise pass makes H = W o c(r^2) with c = -2 dk/d(r^2), and one product G = H X'
//! (M x d) gives both the length scales' gradient and Z's. Sums, scales and products
//! combine their parts' (a product's part sees W times the other parts' values); any
//! other kernel falls back to its derivative matrices and `inputs.rs`.

use super::hyper::Scales;
use super::pointwise::matern;
use super::{Kernel, Nu, Points, RbfWidth};
use crate::linalg::Parallelism;
use nalgebra::DMatrix;
use rayon::prelude::*;

/// Columns per block of the fused pass (computed in parallel, summed in order).
const COLUMNS: usize = 256;

/// What [`Kernel::cross_adjoint`] gives.
#[derive(Debug, Clone, PartialEq)]
pub struct Adjoint {
    /// <W, dK/dtheta_j> for each free hyperparameter, in [`Kernel::theta`]'s order.
    pub theta: Vec<f64>,
    /// d<W, K>/dZ (d x M, through K's first argument only), when asked and defined.
    pub z: Option<DMatrix<f64>>,
}

impl Kernel {
    /// The adjoint of K(Z, X) (z.n() x x.n()) for `w` of that shape; with `same`, of the
    /// Gram matrix K(Z, Z) (x is z; white contributes its diagonal). With `inputs`, also
    /// the gradient with respect to Z through the first argument (for K(Z, Z) and a
    /// symmetric W, the whole gradient is twice that). None where `inputs` is asked of a
    /// kernel without an input derivative ([`Kernel::has_input_gradient`]).
    pub fn cross_adjoint(&self, z: &Points, x: &Points, w: &DMatrix<f64>, same: bool, inputs: bool) -> Option<Adjoint> {
        assert_eq!(w.shape(), (z.n(), x.n()));
        if inputs && !(self.has_input_gradient() && z.numeric().is_some()) {
            return None;
        }
        let mut theta = Vec::new();
        let (_, dz) = walk(self, z, x, w, same, inputs, &mut theta);
        Some(Adjoint { theta, z: dz })
    }
}

/// This kernel's values over (z, x) (the Gram matrix when `same`).
fn values(k: &Kernel, z: &Points, x: &Points, same: bool) -> DMatrix<f64> {
    if same {
        k.gram(z, Parallelism::Sequential)
    } else {
        k.cross(z, x, Parallelism::Sequential)
    }
}

/// Pushes this kernel's share of theta's gradient; returns <W, K> and the input gradient.
fn walk(
    k: &Kernel,
    z: &Points,
    x: &Points,
    w: &DMatrix<f64>,
    same: bool,
    inputs: bool,
    theta: &mut Vec<f64>,
) -> (f64, Option<DMatrix<f64>>) {
    let d = z.d();
    let add = |acc: &mut Option<DMatrix<f64>>, part: Option<DMatrix<f64>>| {
        if let (Some(a), Some(p)) = (acc.as_mut(), part) {
            *a += p;
        }
    };
    let zero = || inputs.then(|| DMatrix::zeros(d, z.n()));
    match k {
        Kernel::Sum(ks) => {
            let (mut wk, mut dz) = (0.0, zero());
            for part in ks {
                let (v, g) = walk(part, z, x, w, same, inputs, theta);
                wk += v;
                add(&mut dz, g);
            }
            (wk, dz)
        }
        Kernel::Scale { factor, kernel } => {
            let slot = (!factor.fixed).then(|| {
                theta.push(0.0);
                theta.len() - 1
            });
            let (inner, dz) = walk(kernel, z, x, &(w * factor.value), same, inputs, theta);
            // inner = <f W, K_inner> = <W, f K_inner>, which is also d<W, f K>/dlog f.
            if let Some(i) = slot {
                theta[i] = inner;
            }
            (inner, dz)
        }
        Kernel::Product(ks) => {
            let parts: Vec<DMatrix<f64>> = ks.iter().map(|p| values(p, z, x, same)).collect();
            let mut dz = zero();
            let mut wk = 0.0;
            for (i, part) in ks.iter().enumerate() {
                let mut wi = w.clone();
                for (j, v) in parts.iter().enumerate() {
                    if j != i {
                        wi.component_mul_assign(v);
                    }
                }
                let (v, g) = walk(part, z, x, &wi, same, inputs, theta);
                wk = v;
                add(&mut dz, g);
            }
            (wk, dz)
        }
        Kernel::Constant { value } => {
            let wk = value.value * w.sum();
            if !value.fixed {
                theta.push(wk);
            }
            (wk, zero())
        }
        Kernel::White { noise } => {
            let wk = if same { noise.value * w.trace() } else { 0.0 };
            if !noise.fixed {
                theta.push(wk);
            }
            (wk, zero())
        }
        Kernel::Rbf(RbfWidth::LengthScale(h)) => {
            let fixed = h.fixed;
            distance(z, x, w, &h.value, inputs, fixed, Theta::LengthScale, theta, |r2| {
                let k = (-0.5 * r2).exp();
                (k, k)
            })
        }
        Kernel::Rbf(RbfWidth::Gamma(g)) => {
            let gamma = g.value;
            distance(z, x, w, &Scales::Isotropic(1.0), inputs, g.fixed, Theta::Gamma, theta, move |d2| {
                let k = (-gamma * d2).exp();
                (k, 2.0 * gamma * k)
            })
        }
        Kernel::Exponential { length_scale: h } => {
            distance(z, x, w, &h.value, inputs, h.fixed, Theta::LengthScale, theta, |r2| matern(Nu::Half, r2.sqrt()))
        }
        Kernel::Matern { length_scale: h, nu } => {
            let nu = *nu;
            distance(z, x, w, &h.value, inputs, h.fixed, Theta::LengthScale, theta, move |r2| matern(nu, r2.sqrt()))
        }
        _ => {
            // Any other leaf: its derivative matrices, and the pointwise input gradient.
            let (kv, dk) = if same {
                k.gram_with_gradient(z, Parallelism::Sequential)
            } else {
                k.cross_with_gradient(z, x, Parallelism::Sequential)
            };
            theta.extend(dk.iter().map(|m| m.dot(w)));
            let dz = if inputs { k.cross_input_gradient(z, x, w) } else { None };
            (kv.dot(w), dz)
        }
    }
}

/// How a distance kernel's own hyperparameter enters r^2.
#[derive(Clone, Copy)]
enum Theta {
    /// r^2 = sum ((z - x) / l)^2: dk/dlog l_k = c (z_k - x_k)^2 / l_k^2.
    LengthScale,
    /// d^2 = |z - x|^2 and k = exp(-gamma d^2): dk/dlog gamma = -gamma d^2 k = -(c / 2) d^2.
    Gamma,
}

/// A kernel k = phi(r^2) of the scaled squared distance, given `profile(r^2) = (k, c)`
/// with c = -2 phi'(r^2): with H = W o C and G = H X' (M x d), dk/dz_k = -c (z_k - x_k) /
/// l_k^2 makes Z's gradient (G - diag(H 1) Z') / l^2, and the length scales' gradient is
/// sum H (z_k - x_k)^2 / l_k^2 = (sum_m z_mk^2 (H 1)_m + sum_i x_ik^2 (1'H)_i - 2 sum_m z_mk G_mk) / l_k^2.
#[allow(clippy::too_many_arguments)]
fn distance(
    z: &Points,
    x: &Points,
    w: &DMatrix<f64>,
    scales: &Scales,
    inputs: bool,
    fixed: bool,
    kind: Theta,
    theta: &mut Vec<f64>,
    profile: impl Fn(f64) -> (f64, f64) + Sync,
) -> (f64, Option<DMatrix<f64>>) {
    let (zm, xm) = (z.as_matrix(), x.as_matrix());
    let (d, m, n) = (zm.nrows(), zm.ncols(), xm.ncols());
    let inv2: Vec<f64> = match scales {
        Scales::Isotropic(l) => vec![1.0 / (l * l); d],
        Scales::PerFeature(ls) => ls.iter().map(|l| 1.0 / (l * l)).collect(),
    };
    let zn: Vec<f64> = (0..m).map(|j| (0..d).map(|k| zm[(k, j)] * zm[(k, j)] * inv2[k]).sum()).collect();
    let per_feature = matches!(scales, Scales::PerFeature(_)) && matches!(kind, Theta::LengthScale);
    // One block of columns: <W, K>, H 1 (its share), 1'H (its columns), sum H r^2, G (M x d).
    struct Part {
        wk: f64,
        row_sums: Vec<f64>,
        col_sums: Vec<f64>,
        hr2: f64,
        g: DMatrix<f64>,
    }
    let starts: Vec<usize> = (0..n).step_by(COLUMNS).collect();
    let parts: Vec<Part> = starts
        .par_iter()
        .map(|&start| {
            let len = COLUMNS.min(n - start);
            let xb = xm.columns(start, len);
            let xs = DMatrix::from_fn(d, len, |k, i| xb[(k, i)] * inv2[k]);
            // z' (x / l^2): the cross term of r^2.
            let cross = zm.transpose() * &xs;
            let mut h = DMatrix::zeros(m, len);
            let (mut wk, mut hr2) = (0.0, 0.0);
            let mut col_sums = vec![0.0; len];
            for i in 0..len {
                let xn: f64 = (0..d).map(|k| xb[(k, i)] * xs[(k, i)]).sum();
                for j in 0..m {
                    let r2 = (zn[j] + xn - 2.0 * cross[(j, i)]).max(0.0);
                    let (kv, c) = profile(r2);
                    let wv = w[(j, start + i)];
                    wk += wv * kv;
                    let hv = wv * c;
                    h[(j, i)] = hv;
                    hr2 += hv * r2;
                    col_sums[i] += hv;
                }
            }
            let row_sums: Vec<f64> = h.row_iter().map(|r| r.sum()).collect();
            let g = if per_feature || inputs { &h * xb.transpose() } else { DMatrix::zeros(0, 0) };
            Part { wk, row_sums, col_sums, hr2, g }
        })
        .collect();
    let mut wk = 0.0;
    let mut hr2 = 0.0;
    let mut row_sums = vec![0.0; m];
    let mut g = DMatrix::zeros(m, d);
    let mut x2h = vec![0.0; d];
    for (part, &start) in parts.iter().zip(&starts) {
        wk += part.wk;
        hr2 += part.hr2;
        row_sums.iter_mut().zip(&part.row_sums).for_each(|(a, b)| *a += b);
        if part.g.nrows() > 0 {
            g += &part.g;
        }
        if per_feature {
            for (i, cs) in part.col_sums.iter().enumerate() {
                for (k, acc) in x2h.iter_mut().enumerate() {
                    *acc += xm[(k, start + i)] * xm[(k, start + i)] * cs;
                }
            }
        }
    }
    if !fixed {
        match kind {
            Theta::Gamma => theta.push(-0.5 * hr2),
            Theta::LengthScale if !per_feature => theta.push(hr2),
            Theta::LengthScale => {
                for k in 0..d {
                    let zz: f64 = (0..m).map(|j| zm[(k, j)] * zm[(k, j)] * row_sums[j]).sum();
                    let zg: f64 = (0..m).map(|j| zm[(k, j)] * g[(j, k)]).sum();
                    theta.push((zz + x2h[k] - 2.0 * zg) * inv2[k]);
                }
            }
        }
    }
    let dz = inputs.then(|| DMatrix::from_fn(d, m, |k, j| (g[(j, k)] - zm[(k, j)] * row_sums[j]) * inv2[k]));
    (wk, dz)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Against the derivative matrices and the input gradient, for kernels on the fused
    /// path and off it, cross and Gram.
    #[test]
    fn adjoints_match_the_derivative_matrices() {
        let z = Points::from_columns(crate::test_support::seeded_matrix(3, 5, 1));
        let x = Points::from_columns(crate::test_support::seeded_matrix(3, 300, 2));
        let w = crate::test_support::seeded_matrix(5, 300, 3);
        let ws = {
            let a = crate::test_support::seeded_matrix(5, 5, 4);
            &a + a.transpose()
        };
        for spec in [
            json!({"type": "rbf", "length_scale": [0.7, 1.3, 2.0]}),
            json!({"type": "rbf", "length_scale": 0.9}),
            json!({"type": "rbf", "gamma": 0.8}),
            json!({"type": "matern", "nu": 2.5, "length_scale": [0.9, 1.2, 0.6]}),
            json!({"type": "exponential", "length_scale": 1.2}),
            json!({"type": "rational_quadratic", "length_scale": 0.8, "alpha": 1.7}),
            json!({"type": "sum", "kernels": [
                {"type": "product", "kernels": [{"type": "constant", "value": 2.0}, {"type": "rbf", "length_scale": [1.0, 0.5, 2.0]},
                                                {"type": "periodic", "length_scale": 1.0, "period": 3.0}]},
                {"type": "scale", "factor": 0.5, "kernel": {"type": "matern", "nu": 1.5, "length_scale": 2.0}},
                {"type": "white", "noise": 0.1}]}),
            json!({"type": "rbf", "length_scale": {"value": 1.0, "fixed": true}}),
        ] {
            let k = Kernel::from_json(&spec).unwrap();
            let got = k.cross_adjoint(&z, &x, &w, false, true).unwrap();
            let (_, dk) = k.cross_with_gradient(&z, &x, Parallelism::Sequential);
            let want: Vec<f64> = dk.iter().map(|m| m.dot(&w)).collect();
            assert_eq!(got.theta.len(), want.len(), "{spec}");
            for (a, b) in got.theta.iter().zip(&want) {
                assert!((a - b).abs() < 1e-9 * b.abs().max(1.0), "{spec}: {a} vs {b}");
            }
            let dz = k.cross_input_gradient(&z, &x, &w).unwrap();
            assert!((got.z.unwrap() - &dz).amax() < 1e-9 * dz.amax().max(1.0), "{spec}: input gradient");
            // The Gram form (white on the diagonal) against gram_with_gradient.
            let got = k.cross_adjoint(&z, &z, &ws, true, false).unwrap();
            let (_, dk) = k.gram_with_gradient(&z, Parallelism::Sequential);
            for (a, m) in got.theta.iter().zip(&dk) {
                let b = m.dot(&ws);
                assert!((a - b).abs() < 1e-9 * b.abs().max(1.0), "{spec} gram: {a} vs {b}");
            }
            assert!(got.z.is_none());
        }
        let strings = Kernel::from_json(&json!({"type": "spectrum", "k": 2})).unwrap();
        assert!(strings.cross_adjoint(&z, &x, &w, false, true).is_none());
    }
}

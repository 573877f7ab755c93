//! Derivatives of kernel values with respect to the points themselves: the gradient of
//! <W, K(Z, X)> with respect to Z, which a variational GP follows to move its inducing
//! locations. Combinators apply the sum and product rules to their parts' matrices;
//! kernels of a (scaled) squared distance share one matrix form; the rest are pointwise.
//! Kernels over strings, sets, mixtures, a learned metric or precomputed values have no
//! such derivative here ([`Kernel::has_input_gradient`] says so).

use super::hyper::Scales;
use super::pointwise::matern;
use super::{Kernel, Nu, Points, RbfWidth};
use crate::linalg::Parallelism;
use nalgebra::DMatrix;
use std::f64::consts::PI;

impl Kernel {
    /// Whether [`Kernel::cross_input_gradient`] is defined for this kernel (on numeric rows).
    pub fn has_input_gradient(&self) -> bool {
        match self {
            Kernel::Sum(ks) | Kernel::Product(ks) => ks.iter().all(Kernel::has_input_gradient),
            Kernel::Scale { kernel, .. } => kernel.has_input_gradient(),
            Kernel::Spectrum { .. }
            | Kernel::Subsequence { .. }
            | Kernel::Set { .. }
            | Kernel::Mahalanobis(_)
            | Kernel::Generative(_)
            | Kernel::Fisher(_)
            | Kernel::Precomputed => false,
            _ => true,
        }
    }

    /// For K = K(Z, X) (`z.n()` x `x.n()`, K[m, i] = k(z_m, x_i)) and an adjoint `w` of
    /// that shape: the d x M matrix whose column m is sum_i w[m, i] dk(z_m, x_i)/dz_m, the
    /// gradient of <W, K> with respect to the points Z. None where a part of the kernel
    /// has no input derivative. For K(Z, Z) with a symmetric W, the gradient is twice this
    /// (every kernel here is symmetric in its arguments).
    pub fn cross_input_gradient(&self, z: &Points, x: &Points, w: &DMatrix<f64>) -> Option<DMatrix<f64>> {
        assert_eq!(w.shape(), (z.n(), x.n()));
        let (zm, xm) = (z.numeric()?, x.numeric()?);
        input_gradient(self, zm, xm, w)
    }
}

/// The recursion over the algebra; `z` is d x M, `x` is d x n (points as columns).
fn input_gradient(k: &Kernel, z: &DMatrix<f64>, x: &DMatrix<f64>, w: &DMatrix<f64>) -> Option<DMatrix<f64>> {
    let d = z.nrows();
    let points = |m: &DMatrix<f64>| Points::from_columns(m.clone());
    match k {
        Kernel::Sum(ks) => {
            let mut out = DMatrix::zeros(d, z.ncols());
            for part in ks {
                out += input_gradient(part, z, x, w)?;
            }
            Some(out)
        }
        Kernel::Scale { factor, kernel } => Some(input_gradient(kernel, z, x, w)? * factor.value),
        Kernel::Product(ks) => {
            // d(prod)/dz = sum_i (d part_i / dz) * product of the others: part i's adjoint is
            // W times the others' values, elementwise.
            let (zp, xp) = (points(z), points(x));
            let values: Vec<DMatrix<f64>> = ks.iter().map(|p| p.cross(&zp, &xp, Parallelism::Sequential)).collect();
            let mut out = DMatrix::zeros(d, z.ncols());
            for (i, part) in ks.iter().enumerate() {
                if matches!(part, Kernel::Constant { .. } | Kernel::White { .. }) {
                    continue;
                }
                let mut wi = w.clone();
                for (j, v) in values.iter().enumerate() {
                    if j != i {
                        wi.component_mul_assign(v);
                    }
                }
                out += input_gradient(part, z, x, &wi)?;
            }
            Some(out)
        }
        Kernel::Constant { .. } | Kernel::White { .. } => Some(DMatrix::zeros(d, z.ncols())),
        Kernel::Rbf(RbfWidth::LengthScale(h)) => {
            // k = exp(-r^2 / 2): -2 dk/d(r^2) = k.
            Some(distance_form(z, x, w, &h.value, |r2| (-0.5 * r2).exp()))
        }
        Kernel::Rbf(RbfWidth::Gamma(g)) => {
            // k = exp(-gamma |z - x|^2): with unit scales, -2 dk/d(d^2) = 2 gamma k.
            let gamma = g.value;
            Some(distance_form(z, x, w, &Scales::Isotropic(1.0), |d2| 2.0 * gamma * (-gamma * d2).exp()))
        }
        Kernel::Exponential { length_scale: h } => {
            Some(distance_form(z, x, w, &h.value, |r2| matern(Nu::Half, r2.sqrt()).1))
        }
        Kernel::Matern { length_scale: h, nu } => {
            // matern()'s second value is -k'(r) / r = -2 dk/d(r^2).
            let nu = *nu;
            Some(distance_form(z, x, w, &h.value, move |r2| matern(nu, r2.sqrt()).1))
        }
        Kernel::RationalQuadratic { length_scale: l, alpha } => {
            // k = (1 + r^2 / (2 alpha))^-alpha: -2 dk/d(r^2) = (1 + r^2 / (2 alpha))^(-alpha - 1).
            let a = alpha.value;
            Some(distance_form(z, x, w, &Scales::Isotropic(l.value), move |r2| (1.0 + r2 / (2.0 * a)).powf(-a - 1.0)))
        }
        Kernel::InverseMultiquadric { c } => {
            // k = (d^2 + c^2)^-1/2: -2 dk/d(d^2) = (d^2 + c^2)^-3/2.
            let c2 = c.value * c.value;
            Some(distance_form(z, x, w, &Scales::Isotropic(1.0), move |d2| (d2 + c2).powf(-1.5)))
        }
        Kernel::Linear { .. } => {
            // dk/dz = x: column m is X w[m, :]'.
            Some(x * w.transpose())
        }
        Kernel::Polynomial { degree, gamma, coef0 } => {
            let (deg, g, c0) = (*degree as i32, gamma.value, coef0.value);
            Some(dot_form(z, x, w, move |t| f64::from(deg) * g * (g * t + c0).powi(deg - 1)))
        }
        Kernel::Sigmoid { gamma, coef0 } => {
            let (g, c0) = (gamma.value, coef0.value);
            Some(dot_form(z, x, w, move |t| {
                let v = (g * t + c0).tanh();
                g * (1.0 - v * v)
            }))
        }
        Kernel::Laplacian { length_scale } => {
            // k = exp(-|z - x|_1 / l): dk/dz_k = -k sign(z_k - x_k) / l.
            let l = length_scale.value;
            Some(pointwise(z, x, w, |zm, xi, out, wmi| {
                let d1: f64 = zm.iter().zip(xi).map(|(a, b)| (a - b).abs()).sum();
                let c = wmi * (-d1 / l).exp() / l;
                for ((o, a), b) in out.iter_mut().zip(zm).zip(xi) {
                    *o -= c * (a - b).signum() * f64::from(u8::from(a != b));
                }
            }))
        }
        Kernel::Periodic { length_scale, period } => {
            // k = exp(-2 sin^2(pi d / p) / l^2): dk/dd = -k 4 sin cos (pi / p) / l^2, and
            // dd/dz = (z - x) / d.
            let (l2, p) = (length_scale.value * length_scale.value, period.value);
            Some(pointwise(z, x, w, |zm, xi, out, wmi| {
                let dist = zm.iter().zip(xi).map(|(a, b)| (a - b) * (a - b)).sum::<f64>().sqrt();
                if dist == 0.0 {
                    return;
                }
                let (s, c) = (PI * dist / p).sin_cos();
                let k = (-2.0 * s * s / l2).exp();
                let dk_dd = -k * 4.0 * s * c * PI / (p * l2);
                for ((o, a), b) in out.iter_mut().zip(zm).zip(xi) {
                    *o += wmi * dk_dd * (a - b) / dist;
                }
            }))
        }
        Kernel::Spectrum { .. }
        | Kernel::Subsequence { .. }
        | Kernel::Set { .. }
        | Kernel::Mahalanobis(_)
        | Kernel::Generative(_)
        | Kernel::Fisher(_)
        | Kernel::Precomputed => None,
    }
}

/// Kernels k = phi(r^2) of the scaled squared distance r^2 = sum_k ((z_k - x_k) / l_k)^2,
/// given c(r^2) = -2 phi'(r^2): dk/dz_k = -c (z_k - x_k) / l_k^2, so with H = W o C the
/// gradient is (X H' - Z diag(H 1)) / l^2, row k divided by l_k^2.
fn distance_form(
    z: &DMatrix<f64>,
    x: &DMatrix<f64>,
    w: &DMatrix<f64>,
    scales: &Scales,
    c: impl Fn(f64) -> f64,
) -> DMatrix<f64> {
    let (d, m, n) = (z.nrows(), z.ncols(), x.ncols());
    let inv2: Vec<f64> = match scales {
        Scales::Isotropic(l) => vec![1.0 / (l * l); d],
        Scales::PerFeature(ls) => ls.iter().map(|l| 1.0 / (l * l)).collect(),
    };
    let mut h = DMatrix::zeros(m, n);
    for i in 0..n {
        let xi = x.column(i);
        for j in 0..m {
            let wv = w[(j, i)];
            if wv == 0.0 {
                continue;
            }
            let zj = z.column(j);
            let r2: f64 = (0..d).map(|k| (zj[k] - xi[k]) * (zj[k] - xi[k]) * inv2[k]).sum();
            h[(j, i)] = wv * c(r2);
        }
    }
    let mut out = x * h.transpose();
    let row_sums: Vec<f64> = h.row_iter().map(|r| r.sum()).collect();
    for j in 0..m {
        for k in 0..d {
            out[(k, j)] = (out[(k, j)] - z[(k, j)] * row_sums[j]) * inv2[k];
        }
    }
    out
}

/// Kernels k = psi(z.x): dk/dz = psi'(z.x) x, so the gradient is X (W o Psi')'.
fn dot_form(z: &DMatrix<f64>, x: &DMatrix<f64>, w: &DMatrix<f64>, dpsi: impl Fn(f64) -> f64) -> DMatrix<f64> {
    let t = z.transpose() * x;
    let g = DMatrix::from_fn(w.nrows(), w.ncols(), |j, i| w[(j, i)] * dpsi(t[(j, i)]));
    x * g.transpose()
}

/// Pair by pair: `add(z_m, x_i, out_m, w[m, i])` adds w[m, i] dk(z_m, x_i)/dz_m to out_m.
fn pointwise(
    z: &DMatrix<f64>,
    x: &DMatrix<f64>,
    w: &DMatrix<f64>,
    add: impl Fn(&[f64], &[f64], &mut [f64], f64),
) -> DMatrix<f64> {
    let (d, m) = (z.nrows(), z.ncols());
    let mut out = DMatrix::zeros(d, m);
    let mut col = vec![0.0; d];
    for j in 0..m {
        col.iter_mut().for_each(|v| *v = 0.0);
        let zj: Vec<f64> = z.column(j).iter().copied().collect();
        for i in 0..x.ncols() {
            if w[(j, i)] != 0.0 {
                add(&zj, x.column(i).as_slice(), &mut col, w[(j, i)]);
            }
        }
        out.column_mut(j).copy_from_slice(&col);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every kernel with an input derivative, against central differences of
    /// <W, K(Z, X)> in each coordinate of each point of Z.
    #[test]
    fn input_gradients_match_finite_differences() {
        let z = crate::test_support::seeded_matrix(3, 4, 11);
        let x = crate::test_support::seeded_matrix(3, 6, 12);
        let w = crate::test_support::seeded_matrix(4, 6, 13);
        let kernels = [
            json!({"type": "rbf", "length_scale": [0.7, 1.3, 2.0]}),
            json!({"type": "rbf", "gamma": 0.8}),
            json!({"type": "matern", "nu": 2.5, "length_scale": 0.9}),
            json!({"type": "matern", "nu": 1.5, "length_scale": [1.0, 0.5, 2.0]}),
            json!({"type": "exponential", "length_scale": 1.2}),
            json!({"type": "rational_quadratic", "length_scale": 0.8, "alpha": 1.7}),
            json!({"type": "inverse_multiquadric", "c": 0.9}),
            json!({"type": "linear", "c": 0.3}),
            json!({"type": "polynomial", "degree": 3, "gamma": 0.5, "coef0": 1.0}),
            json!({"type": "sigmoid", "gamma": 0.4, "coef0": 0.1}),
            json!({"type": "laplacian", "length_scale": 1.1}),
            json!({"type": "periodic", "length_scale": 1.0, "period": 2.5}),
            json!({"type": "sum", "kernels": [
                {"type": "product", "kernels": [{"type": "constant", "value": 2.0}, {"type": "rbf", "length_scale": 1.0},
                                                {"type": "linear", "c": 1.0}]},
                {"type": "scale", "factor": 0.5, "kernel": {"type": "matern", "nu": 0.5, "length_scale": 2.0}},
                {"type": "white", "noise": 0.1}]}),
        ];
        for spec in kernels {
            let k = Kernel::from_json(&spec).unwrap();
            assert!(k.has_input_gradient());
            let value = |zm: &DMatrix<f64>| -> f64 {
                let kz = k.cross(
                    &Points::from_columns(zm.clone()),
                    &Points::from_columns(x.clone()),
                    Parallelism::Sequential,
                );
                kz.dot(&w)
            };
            let got =
                k.cross_input_gradient(&Points::from_columns(z.clone()), &Points::from_columns(x.clone()), &w).unwrap();
            for j in 0..z.ncols() {
                for c in 0..z.nrows() {
                    let h = 1e-6;
                    let (mut up, mut down) = (z.clone(), z.clone());
                    up[(c, j)] += h;
                    down[(c, j)] -= h;
                    let fd = (value(&up) - value(&down)) / (2.0 * h);
                    assert!(
                        (got[(c, j)] - fd).abs() < 1e-6 * fd.abs().max(1.0),
                        "{spec}: z[{c}, {j}] {} vs {fd}",
                        got[(c, j)]
                    );
                }
            }
        }
        let strings = Kernel::from_json(&json!({"type": "spectrum", "k": 2})).unwrap();
        assert!(!strings.has_input_gradient());
    }
}

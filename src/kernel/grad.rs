//! Gram matrices with their derivatives with respect to the log of each free
//! hyperparameter (scikit-learn's `theta`): structurally through the algebra, from
//! distance matrices for the common kernels, pointwise (`pointwise.rs`) for the rest.
//!
//! Derivatives are emitted in the order of `Kernel::visit_hypers`: a kernel's own
//! hyperparameters as written, then its parts depth first. Tests compare each one with
//! central finite differences of `Kernel::with_theta`.

use super::hyper::Scales;
use super::pointwise::{eval, matern};
use super::{Kernel, Nu, Points, RbfWidth};
use crate::linalg::Parallelism;
use nalgebra::{DMatrix, DVector};
use rayon::prelude::*;

/// K and dK/dtheta_j for each free hyperparameter.
type GramGrad = (DMatrix<f64>, Vec<DMatrix<f64>>);

/// K(X, Z) and its derivatives; `z` None means Z = X (a symmetric Gram matrix, where
/// `white` contributes its diagonal). Combinators combine their parts' matrices; rbf,
/// matern, exponential, constant and white build K and dK from distance matrices with
/// vectorised maps; the other kernels fall back to one pointwise evaluation per pair (of
/// the lower triangle when symmetric; only for their own hyperparameters, so no
/// combinator runs per pair).
pub(super) fn gram_with_gradient(k: &Kernel, x: &Points, z: Option<&Points>, par: Parallelism) -> GramGrad {
    let (n, m) = (x.n(), z.map_or(x.n(), Points::n));
    match k {
        Kernel::Sum(ks) => {
            let mut grads = Vec::new();
            let mut acc: Option<DMatrix<f64>> = None;
            for part in ks {
                let (kp, gp) = gram_with_gradient(part, x, z, par);
                grads.extend(gp);
                acc = Some(match acc {
                    None => kp,
                    Some(a) => a + kp,
                });
            }
            (acc.expect("a sum has parts"), grads)
        }
        Kernel::Product(ks) => {
            // Constant parts are scalars: folding them avoids n x n matrices of one value
            // (C * RBF is the usual GP kernel).
            let scalar: f64 = ks
                .iter()
                .filter_map(|p| if let Kernel::Constant { value } = p { Some(value.value) } else { None })
                .product();
            let parts: Vec<Option<GramGrad>> =
                ks.iter()
                    .map(|p| {
                        if matches!(p, Kernel::Constant { .. }) {
                            None
                        } else {
                            Some(gram_with_gradient(p, x, z, par))
                        }
                    })
                    .collect();
            if parts.iter().flatten().count() == 1 {
                return scaled_part(ks, parts, scalar);
            }
            let matrices: Vec<&DMatrix<f64>> = parts.iter().flatten().map(|(kp, _)| kp).collect();
            // The product of every non-constant part except the one at `skip`, times `scalar`.
            let others = |skip: usize| -> Option<DMatrix<f64>> {
                let mut acc: Option<DMatrix<f64>> = None;
                for (j, p) in parts.iter().enumerate() {
                    if let (true, Some((kj, _))) = (j != skip, p) {
                        acc = Some(match acc {
                            None => kj * scalar,
                            Some(a) => a.component_mul(kj),
                        });
                    }
                }
                acc
            };
            let kmat = match matrices.split_first() {
                None => {
                    let mut k = crate::linalg::zeros(n, m);
                    k.fill(scalar);
                    k
                }
                Some((first, rest)) => {
                    let mut k = *first * scalar;
                    for m in rest {
                        k.component_mul_assign(m);
                    }
                    k
                }
            };
            let mut grads = Vec::new();
            for (i, (kernel, part)) in ks.iter().zip(&parts).enumerate() {
                match (kernel, part) {
                    // d(v * rest)/dlog v is the product itself.
                    (Kernel::Constant { value }, _) if !value.fixed => grads.push(kmat.clone()),
                    (_, Some((_, gp))) if !gp.is_empty() => match others(i) {
                        Some(o) => grads.extend(gp.iter().map(|g| g.component_mul(&o))),
                        None => grads.extend(gp.iter().map(|g| g * scalar)),
                    },
                    _ => {}
                }
            }
            (kmat, grads)
        }
        Kernel::Scale { factor, kernel } => {
            let (mut kc, gc) = gram_with_gradient(kernel, x, z, par);
            kc *= factor.value;
            let mut grads = Vec::with_capacity(gc.len() + 1);
            if !factor.fixed {
                grads.push(kc.clone());
            }
            grads.extend(gc.into_iter().map(|g| g * factor.value));
            (kc, grads)
        }
        Kernel::Constant { value } => {
            let mut kmat = crate::linalg::zeros(n, m);
            kmat.fill(value.value);
            let grads = if value.fixed { vec![] } else { vec![kmat.clone()] };
            (kmat, grads)
        }
        Kernel::White { noise } => {
            // Between two point sets no pair is the same point.
            let mut kmat = crate::linalg::zeros(n, m);
            if z.is_none() {
                kmat.fill_diagonal(noise.value);
            }
            let grads = if noise.fixed { vec![] } else { vec![kmat.clone()] };
            (kmat, grads)
        }
        Kernel::Rbf(RbfWidth::LengthScale(h)) => {
            let mut r2 = super::gram::scaled_sq_distances(x, z, &h.value, par);
            // One pass: K = exp(-r2 / 2) into a new matrix and, for one length scale,
            // dK/dlog l = r2 K in place of r2 (a copy of r2 and a second pass saved).
            let isotropic = !h.fixed && matches!(h.value, Scales::Isotropic(_));
            let mut kmat = crate::linalg::zeros(n, m);
            super::gram::map_matrix_into(&mut r2, &mut kmat, par, &|r| {
                let k = (r * -0.5).exp();
                (if isotropic { r * k } else { r }, k)
            });
            let grads = match &h.value {
                _ if h.fixed => vec![],
                Scales::Isotropic(_) => vec![r2],
                Scales::PerFeature(ls) => per_feature(x, z, ls, par, |q, i, j| q * kmat[(i, j)]),
            };
            (kmat, grads)
        }
        Kernel::Exponential { length_scale: h } | Kernel::Matern { length_scale: h, .. } => {
            let nu = if let Kernel::Matern { nu, .. } = k { *nu } else { Nu::Half };
            let r2 = super::gram::scaled_sq_distances(x, z, &h.value, par);
            let mut kmat = r2.clone();
            let mut g = r2.clone();
            let (kv, gv) = (kmat.as_mut_slice(), g.as_mut_slice());
            kv.iter_mut().zip(gv.iter_mut()).for_each(|(kk, gg)| {
                let (v, d) = matern(nu, kk.sqrt());
                *kk = v;
                *gg = d;
            });
            let grads = if h.fixed {
                vec![]
            } else {
                match &h.value {
                    Scales::Isotropic(_) => {
                        g.component_mul_assign(&r2);
                        vec![g]
                    }
                    Scales::PerFeature(ls) => per_feature(x, z, ls, par, |q, i, j| q * g[(i, j)]),
                }
            };
            (kmat, grads)
        }
        Kernel::Spectrum { .. }
        | Kernel::Subsequence { .. }
        | Kernel::Set { .. }
        | Kernel::Mahalanobis(_)
        | Kernel::Generative(_)
        | Kernel::Fisher(_)
        | Kernel::Precomputed => (super::gram::build(k, x, z, par), Vec::new()),
        _ => pointwise_gram_with_gradient(k, x, z, par),
    }
}

/// A product of constants and one other kernel (C * RBF, the usual GP kernel): that
/// kernel's matrices scaled in place, rather than copied as the general product does.
/// The same arithmetic (each entry times the constants' product), so the same bits.
fn scaled_part(ks: &[Kernel], parts: Vec<Option<GramGrad>>, scalar: f64) -> GramGrad {
    let at = parts.iter().position(Option::is_some).expect("one part is not constant");
    let (mut kmat, mut part_grads) = parts.into_iter().flatten().next().expect("one part is not constant");
    kmat *= scalar;
    part_grads.iter_mut().for_each(|g| *g *= scalar);
    let mut grads = Vec::new();
    for (i, kernel) in ks.iter().enumerate() {
        match kernel {
            // d(v * rest)/dlog v is the product itself.
            Kernel::Constant { value } if !value.fixed => grads.push(kmat.clone()),
            _ if i == at => grads.append(&mut part_grads),
            _ => {}
        }
    }
    (kmat, grads)
}

/// k(x_i, x_i) and its derivatives, one vector per free hyperparameter in theta's order:
/// combinators structurally (so string kernels inside a sum never meet a pointwise
/// evaluation), numeric leaves pointwise.
pub(super) fn diag_with_gradient(k: &Kernel, x: &Points) -> (DVector<f64>, Vec<DVector<f64>>) {
    let n = x.n();
    match k {
        Kernel::Sum(ks) => {
            let mut values = DVector::zeros(n);
            let mut grads = Vec::new();
            for part in ks {
                let (v, g) = diag_with_gradient(part, x);
                values += v;
                grads.extend(g);
            }
            (values, grads)
        }
        Kernel::Product(ks) => {
            let parts: Vec<_> = ks.iter().map(|p| diag_with_gradient(p, x)).collect();
            let values = parts.iter().fold(DVector::from_element(n, 1.0), |acc, (v, _)| acc.component_mul(v));
            let mut grads = Vec::new();
            for (i, (_, gp)) in parts.iter().enumerate() {
                for g in gp {
                    let mut g = g.clone();
                    for (j, (vj, _)) in parts.iter().enumerate() {
                        if j != i {
                            g.component_mul_assign(vj);
                        }
                    }
                    grads.push(g);
                }
            }
            (values, grads)
        }
        Kernel::Scale { factor, kernel } => {
            let (v, g) = diag_with_gradient(kernel, x);
            let values = &v * factor.value;
            let mut grads = Vec::with_capacity(g.len() + 1);
            if !factor.fixed {
                grads.push(values.clone());
            }
            grads.extend(g.into_iter().map(|g| g * factor.value));
            (values, grads)
        }
        Kernel::Constant { value: h } | Kernel::White { noise: h } => {
            let values = DVector::from_element(n, h.value);
            let grads = if h.fixed { vec![] } else { vec![values.clone()] };
            (values, grads)
        }
        Kernel::Spectrum { .. }
        | Kernel::Subsequence { .. }
        | Kernel::Set { .. }
        | Kernel::Mahalanobis(_)
        | Kernel::Generative(_)
        | Kernel::Fisher(_)
        | Kernel::Precomputed => (k.diag(x), Vec::new()),
        _ => {
            let p = k.theta().len();
            let mut values = DVector::zeros(n);
            let mut grads = vec![DVector::zeros(n); p];
            let mut g = Vec::with_capacity(p);
            for i in 0..n {
                g.clear();
                values[i] = eval(k, x.point(i), x.point(i), true, Some(&mut g));
                for (out, v) in grads.iter_mut().zip(&g) {
                    out[i] = *v;
                }
            }
            (values, grads)
        }
    }
}

/// For each feature f, the matrix entry(((x_if - z_jf) / l_f)^2, i, j) (z None: Z = X).
fn per_feature(
    x: &Points,
    z: Option<&Points>,
    ls: &[f64],
    par: Parallelism,
    entry: impl Fn(f64, usize, usize) -> f64 + Sync,
) -> Vec<DMatrix<f64>> {
    let n = x.n();
    let z = z.unwrap_or(x);
    ls.iter()
        .enumerate()
        .map(|(f, l)| {
            let mut m = crate::linalg::zeros(n, z.n());
            let fill = |(j, col): (usize, &mut [f64])| {
                let xj = z.point(j)[f];
                for (i, v) in col.iter_mut().enumerate() {
                    let q = ((x.point(i)[f] - xj) / l).powi(2);
                    *v = entry(q, i, j);
                }
            };
            if par.is_parallel() {
                m.as_mut_slice().par_chunks_mut(n).enumerate().for_each(fill);
            } else {
                m.as_mut_slice().chunks_mut(n).enumerate().for_each(fill);
            }
            m
        })
        .collect()
}

/// K and its derivatives by one pointwise evaluation per pair (of the lower triangle when
/// symmetric), columns spread across cores.
fn pointwise_gram_with_gradient(k: &Kernel, x: &Points, z: Option<&Points>, par: Parallelism) -> GramGrad {
    let n = x.n();
    let p = k.theta().len();
    if let Some(z) = z {
        let column = |j: usize| -> Vec<f64> {
            let mut col = Vec::with_capacity(n * (p + 1));
            let mut g = Vec::with_capacity(p);
            for i in 0..n {
                g.clear();
                col.push(eval(k, x.point(i), z.point(j), false, Some(&mut g)));
                col.extend_from_slice(&g);
            }
            col
        };
        let m = z.n();
        let columns: Vec<Vec<f64>> =
            if par.is_parallel() { (0..m).into_par_iter().map(column).collect() } else { (0..m).map(column).collect() };
        let mut kmat = crate::linalg::zeros(n, m);
        let mut grads: Vec<DMatrix<f64>> = (0..p).map(|_| crate::linalg::zeros(n, m)).collect();
        for (j, col) in columns.iter().enumerate() {
            for (i, entry) in col.chunks_exact(p + 1).enumerate() {
                kmat[(i, j)] = entry[0];
                for (q, g) in grads.iter_mut().enumerate() {
                    g[(i, j)] = entry[q + 1];
                }
            }
        }
        return (kmat, grads);
    }
    // Column j holds rows j..n, each as (k, dk_1, ..., dk_p).
    let column = |j: usize| -> Vec<f64> {
        let mut col = Vec::with_capacity((n - j) * (p + 1));
        let mut g = Vec::with_capacity(p);
        for i in j..n {
            g.clear();
            let v = eval(k, x.point(i), x.point(j), i == j, Some(&mut g));
            debug_assert_eq!(g.len(), p);
            col.push(v);
            col.extend_from_slice(&g);
        }
        col
    };
    let columns: Vec<Vec<f64>> =
        if par.is_parallel() { (0..n).into_par_iter().map(column).collect() } else { (0..n).map(column).collect() };
    let mut kmat = crate::linalg::zeros(n, n);
    let mut grads: Vec<DMatrix<f64>> = (0..p).map(|_| crate::linalg::zeros(n, n)).collect();
    for (j, col) in columns.iter().enumerate() {
        for (r, entry) in col.chunks_exact(p + 1).enumerate() {
            let i = j + r;
            kmat[(i, j)] = entry[0];
            kmat[(j, i)] = entry[0];
            for (q, g) in grads.iter_mut().enumerate() {
                g[(i, j)] = entry[q + 1];
                g[(j, i)] = entry[q + 1];
            }
        }
    }
    (kmat, grads)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn seeded_points(d: usize, n: usize, seed: u64) -> Points {
        Points::from_columns(crate::test_support::seeded_matrix(d, n, seed))
    }

    fn kernels() -> Vec<Value> {
        vec![
            json!({"type": "rbf", "length_scale": 0.8}),
            json!({"type": "rbf", "gamma": 0.7}),
            json!({"type": "rbf", "length_scale": [0.5, 1.5, 2.5]}),
            json!({"type": "laplacian", "length_scale": 1.3}),
            json!({"type": "exponential", "length_scale": [0.9, 1.1, 0.7]}),
            json!({"type": "matern", "nu": 0.5, "length_scale": 0.6}),
            json!({"type": "matern", "nu": 1.5, "length_scale": [0.6, 1.2, 2.0]}),
            json!({"type": "matern", "nu": 2.5, "length_scale": 1.7}),
            json!({"type": "rational_quadratic", "length_scale": 0.9, "alpha": 0.6}),
            json!({"type": "periodic", "length_scale": 1.1, "period": 1.9}),
            json!({"type": "inverse_multiquadric", "c": 0.8}),
            json!({"type": "constant", "value": 2.5}),
            json!({"type": "white", "noise": 0.3}),
            json!({"type": "linear", "c": 0.4}),
            json!({"type": "polynomial", "degree": 2, "gamma": 0.5, "coef0": 1.0}),
            json!({"type": "sigmoid", "gamma": 0.3, "coef0": 0.1}),
            json!({"type": "sum", "kernels": [
                {"type": "product", "kernels": [{"type": "constant", "value": 1.7}, {"type": "rbf", "length_scale": [0.7, 1.2, 3.0]}]},
                {"type": "linear", "c": 0.2},
                {"type": "white", "noise": 0.05}
            ]}),
            json!({"type": "product", "kernels": [{"type": "rbf", "length_scale": 0.9}, {"type": "constant", "value": 1.3}]}),
            json!({"type": "product", "kernels": [
                {"type": "constant", "value": 0.7}, {"type": "matern", "length_scale": 1.4},
                {"type": "constant", "value": {"value": 2.0, "fixed": true}}, {"type": "rbf", "length_scale": [1.0, 2.0, 0.5]}]}),
            json!({"type": "product", "kernels": [{"type": "constant", "value": 0.7}, {"type": "constant", "value": 3.0}]}),
            json!({"type": "product", "kernels": [
                {"type": "scale", "factor": 0.6, "kernel": {"type": "periodic", "period": 2.2}},
                {"type": "sum", "kernels": [{"type": "matern", "nu": 2.5, "length_scale": 0.9}, {"type": "constant", "value": 0.4}]},
                {"type": "rational_quadratic", "length_scale": {"value": 1.1, "fixed": true}, "alpha": 2.0}
            ]}),
        ]
    }

    /// Every analytic derivative agrees with central differences of with_theta to 1e-6
    /// (relative to the larger of the entry and the gradient matrix's scale).
    #[test]
    fn gradients_match_central_finite_differences() {
        let x = seeded_points(3, 9, 4);
        for spec in kernels() {
            let k = Kernel::from_json(&spec).unwrap();
            let theta = k.theta();
            for par in [Parallelism::Sequential, Parallelism::Parallel] {
                let (kmat, grads) = k.gram_with_gradient(&x, par);
                assert_eq!(grads.len(), theta.len(), "{spec}");
                let fast = k.gram(&x, par);
                assert!((&kmat - &fast).amax() <= 1e-12 * fast.amax().max(1.0), "{spec}: pointwise vs fast gram");
                for (j, g) in grads.iter().enumerate() {
                    let h = 1e-5;
                    let mut tp = theta.clone();
                    tp[j] += h;
                    let mut tm = theta.clone();
                    tm[j] -= h;
                    let fd = (k.with_theta(&tp).gram(&x, par) - k.with_theta(&tm).gram(&x, par)) / (2.0 * h);
                    let scale = g.amax().max(fd.amax()).max(1e-12);
                    for (a, b) in g.iter().zip(fd.iter()) {
                        assert!(
                            (a - b).abs() <= 1e-6 * scale.max(b.abs()),
                            "{spec} theta[{j}]: analytic {a} vs fd {b}"
                        );
                    }
                }
            }
        }
    }

    /// The structural path (combinators over matrices, vectorised leaves) equals the
    /// pointwise definition for every kernel.
    #[test]
    fn structural_and_pointwise_gradients_agree() {
        let x = seeded_points(3, 23, 9);
        for spec in kernels() {
            let k = Kernel::from_json(&spec).unwrap();
            let (ka, ga) = gram_with_gradient(&k, &x, None, Parallelism::Parallel);
            let (kb, gb) = pointwise_gram_with_gradient(&k, &x, None, Parallelism::Sequential);
            assert!((&ka - &kb).amax() <= 1e-12 * kb.amax().max(1.0), "{spec}: K");
            assert_eq!(ga.len(), gb.len(), "{spec}");
            for (j, (a, b)) in ga.iter().zip(&gb).enumerate() {
                assert!((a - b).amax() <= 1e-11 * b.amax().max(1.0), "{spec}: dK[{j}] differs by {}", (a - b).amax());
            }
        }
    }

    /// Between two point sets: K equals the cross matrix, and every derivative equals the
    /// pointwise definition (white contributes nothing, even where points coincide).
    #[test]
    fn cross_gradients_match_the_pointwise_definition() {
        let x = seeded_points(3, 11, 5);
        let z = Points::from_columns(nalgebra::DMatrix::from_fn(3, 6, |r, c| x.point(c)[r]));
        for spec in kernels() {
            let k = Kernel::from_json(&spec).unwrap();
            for par in [Parallelism::Sequential, Parallelism::Parallel] {
                let (kmat, grads) = k.cross_with_gradient(&x, &z, par);
                let (kp, gp) = pointwise_gram_with_gradient(&k, &x, Some(&z), Parallelism::Sequential);
                assert_eq!(kmat.shape(), (11, 6));
                assert!((&kmat - k.cross(&x, &z, par)).amax() <= 1e-12 * kmat.amax().max(1.0), "{spec}: K");
                assert!((&kmat - &kp).amax() <= 1e-12 * kp.amax().max(1.0), "{spec}: K pointwise");
                assert_eq!(grads.len(), gp.len(), "{spec}");
                for (j, (a, b)) in grads.iter().zip(&gp).enumerate() {
                    assert!((a - b).amax() <= 1e-11 * b.amax().max(1.0), "{spec}: dK[{j}]");
                }
            }
        }
    }

    #[test]
    fn fixed_hyperparameters_have_no_gradient() {
        let k =
            Kernel::from_json(&json!({"type": "rational_quadratic", "length_scale": {"value": 1.0, "fixed": true}}))
                .unwrap();
        let (_, grads) = k.gram_with_gradient(&seeded_points(2, 4, 1), Parallelism::Sequential);
        assert_eq!(grads.len(), 1, "only alpha is free");
    }
}

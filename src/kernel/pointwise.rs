//! The pointwise definition of every numeric kernel, with derivatives with respect to the
//! log of each free hyperparameter: the reference the Gram builders are tested against,
//! and the fallback for kernels without a matrix form of their gradient.

use super::hyper::Scales;
use super::{Kernel, Nu, Points, RbfWidth};
use crate::linalg::Parallelism;
use std::f64::consts::PI;

fn dot(x: &[f64], z: &[f64]) -> f64 {
    x.iter().zip(z).map(|(a, b)| a * b).sum()
}

fn sq_dist(x: &[f64], z: &[f64]) -> f64 {
    x.iter().zip(z).map(|(a, b)| (a - b) * (a - b)).sum()
}

/// r^2 = sum_k ((x_k - z_k) / l_k)^2.
fn scaled_sq_dist(x: &[f64], z: &[f64], scales: &Scales) -> f64 {
    match scales {
        Scales::Isotropic(l) => sq_dist(x, z) / (l * l),
        Scales::PerFeature(ls) => x.iter().zip(z).zip(ls).map(|((a, b), l)| ((a - b) / l).powi(2)).sum(),
    }
}

/// Pushes dk/dlog l for a stationary kernel of r^2, given g = dk/d(log l) per unit of
/// ((x_k - z_k) / l_k)^2: one entry (isotropic) or one per feature (ARD).
fn push_scale_grads(out: &mut Vec<f64>, x: &[f64], z: &[f64], scales: &Scales, r2: f64, g: f64) {
    match scales {
        Scales::Isotropic(_) => out.push(g * r2),
        Scales::PerFeature(ls) => out.extend(x.iter().zip(z).zip(ls).map(|((a, b), l)| g * ((a - b) / l).powi(2))),
    }
}

/// Matern profile: k(r) and -k'(r) / r (finite at r = 0 for every nu).
pub(super) fn matern(nu: Nu, r: f64) -> (f64, f64) {
    match nu {
        Nu::Half => {
            let e = (-r).exp();
            (e, if r > 0.0 { e / r } else { 0.0 })
        }
        Nu::ThreeHalves => {
            let s = 3f64.sqrt() * r;
            let e = (-s).exp();
            ((1.0 + s) * e, 3.0 * e)
        }
        Nu::FiveHalves => {
            let s = 5f64.sqrt() * r;
            let e = (-s).exp();
            ((1.0 + s + s * s / 3.0) * e, 5.0 / 3.0 * (1.0 + s) * e)
        }
    }
}

/// k(x, z); with `grads`, also pushes dk/dlog(theta_j) for each free hyperparameter.
pub(super) fn eval(k: &Kernel, x: &[f64], z: &[f64], same: bool, grads: Option<&mut Vec<f64>>) -> f64 {
    let mut scratch = Vec::new();
    let (want, out) = match grads {
        Some(g) => (true, g),
        None => (false, &mut scratch),
    };
    match k {
        Kernel::Linear { c } => dot(x, z) + c.value,
        Kernel::Polynomial { degree, gamma, coef0 } => (gamma.value * dot(x, z) + coef0.value).powi(*degree as i32),
        Kernel::Sigmoid { gamma, coef0 } => (gamma.value * dot(x, z) + coef0.value).tanh(),
        Kernel::Rbf(RbfWidth::Gamma(g)) => {
            let d2 = sq_dist(x, z);
            let v = (-g.value * d2).exp();
            if want && !g.fixed {
                out.push(-g.value * d2 * v);
            }
            v
        }
        Kernel::Rbf(RbfWidth::LengthScale(h)) => {
            let r2 = scaled_sq_dist(x, z, &h.value);
            let v = (-0.5 * r2).exp();
            if want && !h.fixed {
                push_scale_grads(out, x, z, &h.value, r2, v);
            }
            v
        }
        Kernel::Exponential { length_scale: h } | Kernel::Matern { length_scale: h, .. } => {
            let nu = if let Kernel::Matern { nu, .. } = k { *nu } else { Nu::Half };
            let r2 = scaled_sq_dist(x, z, &h.value);
            let (v, g) = matern(nu, r2.sqrt());
            if want && !h.fixed {
                push_scale_grads(out, x, z, &h.value, r2, g);
            }
            v
        }
        Kernel::Laplacian { length_scale: l } => {
            let d1: f64 = x.iter().zip(z).map(|(a, b)| (a - b).abs()).sum();
            let v = (-d1 / l.value).exp();
            if want && !l.fixed {
                out.push(d1 / l.value * v);
            }
            v
        }
        Kernel::RationalQuadratic { length_scale: l, alpha: a } => {
            let (l2, a_) = (l.value * l.value, a.value);
            let d2 = sq_dist(x, z);
            let base = 1.0 + d2 / (2.0 * a_ * l2);
            let v = base.powf(-a_);
            if want && !a.fixed {
                out.push(a_ * v * (-base.ln() + d2 / (2.0 * a_ * l2 * base)));
            }
            if want && !l.fixed {
                out.push(v / base * d2 / l2);
            }
            v
        }
        Kernel::Periodic { length_scale: l, period: p } => {
            let l2 = l.value * l.value;
            let arg = PI * sq_dist(x, z).sqrt() / p.value;
            let (s, c) = arg.sin_cos();
            let v = (-2.0 * s * s / l2).exp();
            if want && !l.fixed {
                out.push(4.0 * s * s / l2 * v);
            }
            if want && !p.fixed {
                out.push(4.0 * arg * s * c / l2 * v);
            }
            v
        }
        Kernel::InverseMultiquadric { c } => {
            let c2 = c.value * c.value;
            let t = sq_dist(x, z) + c2;
            let v = 1.0 / t.sqrt();
            if want && !c.fixed {
                out.push(-c2 * v / t);
            }
            v
        }
        Kernel::Constant { value } => {
            if want && !value.fixed {
                out.push(value.value);
            }
            value.value
        }
        Kernel::White { noise } => {
            let v = if same { noise.value } else { 0.0 };
            if want && !noise.fixed {
                out.push(v);
            }
            v
        }
        Kernel::Mahalanobis(_) | Kernel::Generative(_) | Kernel::Fisher(_) => {
            // The reference path only: one 1 x 1 cross matrix through the feature map.
            let (px, pz) = (Points::from_rows(&[x.to_vec()]), Points::from_rows(&[z.to_vec()]));
            k.cross(&px, &pz, Parallelism::Sequential)[(0, 0)]
        }
        Kernel::Spectrum { .. } | Kernel::Subsequence { .. } | Kernel::Set { .. } => {
            unreachable!("string and set kernels are never evaluated on numeric points")
        }
        Kernel::Precomputed => unreachable!("a precomputed kernel has no value at a pair of feature vectors"),
        Kernel::Sum(ks) => ks.iter().map(|part| eval(part, x, z, same, want.then_some(&mut *out))).sum(),
        Kernel::Product(ks) => {
            let mut values = Vec::with_capacity(ks.len());
            let mut ranges = Vec::with_capacity(ks.len());
            for part in ks {
                let start = out.len();
                values.push(eval(part, x, z, same, want.then_some(&mut *out)));
                ranges.push(start..out.len());
            }
            if want {
                // d(prod)/d(theta of part i) = d(part i) * product of the others; prefix and
                // suffix products avoid dividing by a part that is 0.
                let m = values.len();
                let mut suffix = vec![1.0; m + 1];
                for i in (0..m).rev() {
                    suffix[i] = suffix[i + 1] * values[i];
                }
                let mut prefix = 1.0;
                for i in 0..m {
                    let others = prefix * suffix[i + 1];
                    for g in &mut out[ranges[i].clone()] {
                        *g *= others;
                    }
                    prefix *= values[i];
                }
            }
            values.iter().product()
        }
        Kernel::Scale { factor, kernel } => {
            let slot = (want && !factor.fixed).then(|| {
                out.push(0.0);
                out.len() - 1
            });
            let start = out.len();
            let inner = eval(kernel, x, z, same, want.then_some(&mut *out));
            for g in &mut out[start..] {
                *g *= factor.value;
            }
            if let Some(i) = slot {
                out[i] = factor.value * inner;
            }
            factor.value * inner
        }
    }
}

//! Kernel functions, their JSON form, and Gram matrices.
//!
//! A [`Kernel`] is a validated kernel specification: every hyperparameter in it is in
//! range, so Gram-matrix code never checks. Points are the columns of a [`Points`] matrix
//! (d x n), which keeps each point's features contiguous for the pointwise kernels and
//! lets the matrix-product kernels hand the same storage to faer without copying.
//!
//! Adding a kernel means: a variant here, its arm in `eval`/`diag`/`gram_with`, and its
//! reader and writer in `json.rs`. Combinators (sum, product, scale) combine the Gram
//! matrices of their parts, so they fit the same interface.

mod gram;
pub mod hyper;
mod json;

use crate::linalg::Parallelism;
use crate::spec::FieldError;
use hyper::{Hyper, Scales};
use nalgebra::{DMatrix, DVector};

pub use gram::Points;

/// The kernel used when a request names none: `{"type": "rbf", "length_scale": 1.0}`.
pub fn default_kernel() -> Kernel {
    Kernel::Rbf(RbfWidth::LengthScale(Hyper::new(Scales::Isotropic(1.0))))
}

/// How an RBF kernel's width is given: as a length scale l (scalar or one per feature),
/// k = exp(-|x - z|^2 / (2 l^2)), or as scikit-learn's `gamma`, k = exp(-gamma |x - z|^2).
#[derive(Debug, Clone, PartialEq)]
pub enum RbfWidth {
    LengthScale(Hyper<Scales>),
    Gamma(Hyper),
}

/// A validated kernel.
#[derive(Debug, Clone, PartialEq)]
pub enum Kernel {
    /// x.z + c, c >= 0.
    Linear {
        c: Hyper,
    },
    /// (gamma x.z + coef0)^degree.
    Polynomial {
        degree: u32,
        gamma: Hyper,
        coef0: Hyper,
    },
    Rbf(RbfWidth),
    /// exp(-|x - z|_1 / l).
    Laplacian {
        length_scale: Hyper,
    },
    /// exp(-|x - z|_2 / l), Matern with nu = 1/2.
    Exponential {
        length_scale: Hyper,
    },
}

impl Kernel {
    /// The kernel's `type` name in the contract.
    pub fn type_name(&self) -> &'static str {
        match self {
            Kernel::Linear { .. } => "linear",
            Kernel::Polynomial { .. } => "polynomial",
            Kernel::Rbf(_) => "rbf",
            Kernel::Laplacian { .. } => "laplacian",
            Kernel::Exponential { .. } => "exponential",
        }
    }

    /// Checks what can only be checked once the feature count d is known (ARD lists).
    /// Errors point into the kernel document (`/length_scale`).
    pub fn check_features(&self, d: usize) -> Result<(), FieldError> {
        if let Kernel::Rbf(RbfWidth::LengthScale(h)) = self {
            if let Scales::PerFeature(ls) = &h.value {
                if ls.len() != d {
                    return Err(FieldError::invalid(
                        "/length_scale",
                        format!("has {} entries but the data has {d} features", ls.len()),
                    ));
                }
            }
        }
        Ok(())
    }

    /// k(x, z) for two points, straight from the definition. The Gram builders are the
    /// fast path; this is their reference and serves tiny inputs.
    pub fn eval(&self, x: &[f64], z: &[f64]) -> f64 {
        let dot = || x.iter().zip(z).map(|(a, b)| a * b).sum::<f64>();
        let sq_dist = |scale: &dyn Fn(usize) -> f64| {
            x.iter().zip(z).enumerate().map(|(k, (a, b))| ((a - b) / scale(k)).powi(2)).sum::<f64>()
        };
        match self {
            Kernel::Linear { c } => dot() + c.value,
            Kernel::Polynomial { degree, gamma, coef0 } => (gamma.value * dot() + coef0.value).powi(*degree as i32),
            Kernel::Rbf(RbfWidth::Gamma(g)) => (-g.value * sq_dist(&|_| 1.0)).exp(),
            Kernel::Rbf(RbfWidth::LengthScale(h)) => match &h.value {
                Scales::Isotropic(l) => (-0.5 * sq_dist(&|_| *l)).exp(),
                Scales::PerFeature(ls) => (-0.5 * sq_dist(&|k| ls[k])).exp(),
            },
            Kernel::Laplacian { length_scale } => {
                let l1: f64 = x.iter().zip(z).map(|(a, b)| (a - b).abs()).sum();
                (-l1 / length_scale.value).exp()
            }
            Kernel::Exponential { length_scale } => (-sq_dist(&|_| 1.0).sqrt() / length_scale.value).exp(),
        }
    }

    /// k(x_i, x_i) for every point, without building the Gram matrix.
    pub fn diag(&self, x: &Points) -> DVector<f64> {
        match self {
            Kernel::Rbf(_) | Kernel::Laplacian { .. } | Kernel::Exponential { .. } => DVector::from_element(x.n(), 1.0),
            Kernel::Linear { .. } | Kernel::Polynomial { .. } => {
                DVector::from_iterator(x.n(), (0..x.n()).map(|i| self.eval(x.point(i), x.point(i))))
            }
        }
    }

    /// The symmetric Gram matrix K(X, X), n x n.
    pub fn gram(&self, x: &Points, par: Parallelism) -> DMatrix<f64> {
        gram::build(self, x, None, par)
    }

    /// The cross-kernel matrix K(X, Z) with K[i, j] = k(x_i, z_j), n x m.
    pub fn cross(&self, x: &Points, z: &Points, par: Parallelism) -> DMatrix<f64> {
        gram::build(self, x, Some(z), par)
    }

    /// Parses the contract's JSON form. Errors point into the kernel document.
    pub fn from_json(v: &serde_json::Value) -> Result<Kernel, FieldError> {
        json::read(v, "")
    }

    /// The contract's JSON form, hyperparameters in the form the client used.
    pub fn to_json(&self) -> serde_json::Value {
        json::write(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ard_length_must_match_feature_count() {
        let k = Kernel::from_json(&json!({"type": "rbf", "length_scale": [1.0, 2.0]})).unwrap();
        assert!(k.check_features(2).is_ok());
        let err = k.check_features(3).unwrap_err();
        assert_eq!(err.pointer, "/length_scale");
    }

    #[test]
    fn gamma_and_length_scale_describe_the_same_rbf() {
        let x = [0.3, -1.2, 2.0];
        let z = [1.1, 0.4, -0.5];
        let by_l = Kernel::from_json(&json!({"type": "rbf", "length_scale": 2.0})).unwrap();
        let by_g = Kernel::from_json(&json!({"type": "rbf", "gamma": 0.125})).unwrap();
        let ard = Kernel::from_json(&json!({"type": "rbf", "length_scale": [2.0, 2.0, 2.0]})).unwrap();
        let a = by_l.eval(&x, &z);
        assert!((a - by_g.eval(&x, &z)).abs() < 1e-15);
        assert!((a - ard.eval(&x, &z)).abs() < 1e-15);
        let d2: f64 = x.iter().zip(&z).map(|(a, b)| (a - b) * (a - b)).sum();
        assert!((a - (-d2 / 8.0).exp()).abs() < 1e-15);
    }
}

//! Kernel functions, the kernel algebra, their JSON form, Gram matrices and gradients.
//!
//! A [`Kernel`] is a validated kernel specification: every hyperparameter in it is in
//! range, so Gram-matrix code never checks. Points are the columns of a [`Points`] matrix
//! (d x n), which keeps each point's features contiguous for the pointwise kernels and
//! lets the matrix-product kernels hand the same storage to faer without copying.
//!
//! Three views of one kernel, kept consistent by tests:
//! - [`Kernel::eval`], the definition, pointwise; the reference for everything else.
//! - [`Kernel::gram`] / [`Kernel::cross`] / [`Kernel::diag`], the fast paths (`gram.rs`).
//! - [`Kernel::theta`], [`Kernel::with_theta`] and [`Kernel::gram_with_gradient`], the
//!   hyperparameters in log space and dK/dtheta (`grad.rs`), as scikit-learn's `theta`.
//!
//! Sums, products and positive multiples of kernels are kernels; `white` contributes
//! only where both arguments are the same point (the training diagonal, or the diagonal
//! of a prediction covariance), never between distinct points.

mod adjoint;
mod blocks;
pub mod cancel;
pub mod column;
mod data;
mod fastexp;
mod grad;
mod gram;
pub mod hyper;
mod inputs;
mod json;
mod pairwise;
mod points;
mod pointwise;
mod precomputed;
mod structured;
mod table;
mod theta;

use crate::linalg::Parallelism;
use crate::spec::FieldError;
use hyper::{Hyper, Scales};
use nalgebra::{DMatrix, DVector};

pub use adjoint::Adjoint;
pub use blocks::{CrossBlocks, Element, Scratch as BlockScratch};
pub use data::MixtureFitter;
pub use fastexp::{exp_nonpos4, exp_nonpos8};
pub use points::{Points, RowKind};
pub use precomputed::training_rows as precomputed_training_rows;
pub use structured::{Mahalanobis, Mixture, MixtureKernel, SetMeasure};
pub use table::GramTable;
pub use theta::HyperInfo;

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

/// The smoothness of a Matern kernel: the three values with closed forms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nu {
    Half,
    ThreeHalves,
    FiveHalves,
}

impl Nu {
    pub fn value(self) -> f64 {
        match self {
            Nu::Half => 0.5,
            Nu::ThreeHalves => 1.5,
            Nu::FiveHalves => 2.5,
        }
    }
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
    /// exp(-r), r = |(x - z) / l|: Matern with nu = 1/2.
    Exponential {
        length_scale: Hyper<Scales>,
    },
    /// Matern with nu in {1/2, 3/2, 5/2}, r = |(x - z) / l|.
    Matern {
        length_scale: Hyper<Scales>,
        nu: Nu,
    },
    /// (1 + |x - z|^2 / (2 alpha l^2))^-alpha.
    RationalQuadratic {
        length_scale: Hyper,
        alpha: Hyper,
    },
    /// exp(-2 sin^2(pi |x - z| / p) / l^2).
    Periodic {
        length_scale: Hyper,
        period: Hyper,
    },
    /// tanh(gamma x.z + coef0); not positive semi-definite in general.
    Sigmoid {
        gamma: Hyper,
        coef0: Hyper,
    },
    /// 1 / sqrt(|x - z|^2 + c^2).
    InverseMultiquadric {
        c: Hyper,
    },
    /// value, everywhere.
    Constant {
        value: Hyper,
    },
    /// noise where both arguments are the same point, else 0.
    White {
        noise: Hyper,
    },
    Sum(Vec<Kernel>),
    Product(Vec<Kernel>),
    /// factor * kernel.
    Scale {
        factor: Hyper,
        kernel: Box<Kernel>,
    },
    /// Leslie's spectrum kernel over strings: shared k-mer counts.
    Spectrum {
        k: usize,
        normalize: bool,
    },
    /// Lodhi's string subsequence kernel: gapped subsequences of `length` characters.
    Subsequence {
        length: usize,
        decay: f64,
        normalize: bool,
    },
    /// Over token sets.
    Set {
        measure: SetMeasure,
    },
    /// exp(-1/2 (x - z)' A (x - z)) for a PSD matrix A.
    Mahalanobis(std::sync::Arc<Mahalanobis>),
    /// sum_i p(x|i) p(z|i) P(i) over a Gaussian mixture fitted to the training rows.
    Generative(MixtureKernel),
    /// The mixture's Fisher scores (gradients with respect to the means), dotted.
    Fisher(MixtureKernel),
    /// The rows of x are kernel values (`precomputed.rs`); only ever a whole kernel.
    Precomputed,
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
            Kernel::Matern { .. } => "matern",
            Kernel::RationalQuadratic { .. } => "rational_quadratic",
            Kernel::Periodic { .. } => "periodic",
            Kernel::Sigmoid { .. } => "sigmoid",
            Kernel::InverseMultiquadric { .. } => "inverse_multiquadric",
            Kernel::Constant { .. } => "constant",
            Kernel::White { .. } => "white",
            Kernel::Sum(_) => "sum",
            Kernel::Product(_) => "product",
            Kernel::Scale { .. } => "scale",
            Kernel::Spectrum { .. } => "spectrum",
            Kernel::Subsequence { .. } => "subsequence",
            Kernel::Set { .. } => "set",
            Kernel::Mahalanobis(_) => "mahalanobis",
            Kernel::Generative(_) => "generative",
            Kernel::Fisher(_) => "fisher",
            Kernel::Precomputed => "precomputed",
        }
    }

    /// Whether every Gram matrix of this kernel over d-dimensional points is positive
    /// semi-definite. Sigmoid is not, nor is anything built from it; nor a polynomial with a
    /// negative offset; nor the periodic kernel beyond one dimension, since sin^2 of a
    /// Euclidean distance is only guaranteed PSD on a line (scikit-learn's ExpSineSquared
    /// shares this; the property tests found it).
    pub fn is_psd(&self, d: usize) -> bool {
        match self {
            Kernel::Sigmoid { .. } => false,
            Kernel::Polynomial { coef0, .. } => coef0.value >= 0.0,
            Kernel::Periodic { .. } => d <= 1,
            Kernel::Sum(ks) | Kernel::Product(ks) => ks.iter().all(|k| k.is_psd(d)),
            Kernel::Scale { kernel, .. } => kernel.is_psd(d),
            _ => true,
        }
    }

    /// The pointer (within this kernel's document) of the first part that can take
    /// negative values: linear, sigmoid, or a polynomial of odd degree. None when every
    /// value is >= 0, as a smoother's weights must be.
    pub fn negative_part(&self) -> Option<String> {
        self.negative_part_at("")
    }

    fn negative_part_at(&self, path: &str) -> Option<String> {
        match self {
            Kernel::Linear { .. } | Kernel::Sigmoid { .. } | Kernel::Fisher(_) => Some(format!("{path}/type")),
            Kernel::Polynomial { degree, .. } if degree % 2 == 1 => Some(format!("{path}/degree")),
            Kernel::Sum(ks) | Kernel::Product(ks) => {
                ks.iter().enumerate().find_map(|(i, k)| k.negative_part_at(&format!("{path}/kernels/{i}")))
            }
            Kernel::Scale { kernel, .. } => kernel.negative_part_at(&format!("{path}/kernel")),
            _ => None,
        }
    }

    /// k(x, z) straight from the definition; `same` says whether x and z are the same
    /// point of one set (only `white` cares). The Gram builders are the fast path; this
    /// is their reference.
    pub fn eval(&self, x: &[f64], z: &[f64], same: bool) -> f64 {
        pointwise::eval(self, x, z, same, None)
    }

    /// k(x_i, x_i) for every point, without building the Gram matrix.
    pub fn diag(&self, x: &Points) -> DVector<f64> {
        if let Kernel::Precomputed = self {
            return precomputed::diag(x);
        }
        if let Some((base, map)) = structured::feature_map(self) {
            return base.diag(&map(x));
        }
        if let Some(d) = structured::diag(self, x) {
            return d;
        }
        match self {
            Kernel::Rbf(_)
            | Kernel::Laplacian { .. }
            | Kernel::Exponential { .. }
            | Kernel::Matern { .. }
            | Kernel::RationalQuadratic { .. }
            | Kernel::Periodic { .. } => DVector::from_element(x.n(), 1.0),
            Kernel::InverseMultiquadric { c } => DVector::from_element(x.n(), 1.0 / c.value),
            Kernel::Constant { value } => DVector::from_element(x.n(), value.value),
            Kernel::White { noise } => DVector::from_element(x.n(), noise.value),
            Kernel::Linear { .. } | Kernel::Polynomial { .. } | Kernel::Sigmoid { .. } => {
                DVector::from_iterator(x.n(), (0..x.n()).map(|i| self.eval(x.point(i), x.point(i), true)))
            }
            Kernel::Sum(ks) => ks.iter().map(|k| k.diag(x)).reduce(|a, b| a + b).expect("a sum has parts"),
            Kernel::Product(ks) => {
                ks.iter().map(|k| k.diag(x)).reduce(|a, b| a.component_mul(&b)).expect("a product has parts")
            }
            Kernel::Scale { factor, kernel } => kernel.diag(x) * factor.value,
            Kernel::Spectrum { .. }
            | Kernel::Subsequence { .. }
            | Kernel::Set { .. }
            | Kernel::Mahalanobis(_)
            | Kernel::Generative(_)
            | Kernel::Fisher(_)
            | Kernel::Precomputed => unreachable!("handled above"),
        }
    }

    /// The symmetric Gram matrix K(X, X), n x n.
    pub fn gram(&self, x: &Points, par: Parallelism) -> DMatrix<f64> {
        gram::build(self, x, None, par)
    }

    /// K(X, X) for a Cholesky factorisation: its lower triangle and diagonal as
    /// [`Kernel::gram`]'s, bit for bit, and no upper triangle (finite values of no
    /// meaning there).
    pub fn gram_lower(&self, x: &Points, par: Parallelism) -> DMatrix<f64> {
        gram::build_half(self, x, None, par, gram::Half::Lower)
    }

    /// The cross-kernel matrix K(X, Z) with K[i, j] = k(x_i, z_j), n x m. `white`
    /// contributes nothing here: X and Z are different point sets.
    pub fn cross(&self, x: &Points, z: &Points, par: Parallelism) -> DMatrix<f64> {
        gram::build(self, x, Some(z), par)
    }

    /// K(X, X) and dK/dtheta_j for every free hyperparameter, in [`Kernel::theta`]'s
    /// order (derivatives with respect to the log of each hyperparameter).
    pub fn gram_with_gradient(&self, x: &Points, par: Parallelism) -> (DMatrix<f64>, Vec<DMatrix<f64>>) {
        grad::gram_with_gradient(self, x, None, par)
    }

    /// K(X, Z) (as [`Kernel::cross`]) and its derivatives, in [`Kernel::theta`]'s order.
    pub fn cross_with_gradient(&self, x: &Points, z: &Points, par: Parallelism) -> (DMatrix<f64>, Vec<DMatrix<f64>>) {
        grad::gram_with_gradient(self, x, Some(z), par)
    }

    /// k(x_i, x_i) for every point and its derivatives with respect to theta: one vector
    /// per free hyperparameter.
    pub fn diag_with_gradient(&self, x: &Points) -> (DVector<f64>, Vec<DVector<f64>>) {
        grad::diag_with_gradient(self, x)
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
    fn gamma_and_length_scale_describe_the_same_rbf() {
        let x = [0.3, -1.2, 2.0];
        let z = [1.1, 0.4, -0.5];
        let by_l = Kernel::from_json(&json!({"type": "rbf", "length_scale": 2.0})).unwrap();
        let by_g = Kernel::from_json(&json!({"type": "rbf", "gamma": 0.125})).unwrap();
        let ard = Kernel::from_json(&json!({"type": "rbf", "length_scale": [2.0, 2.0, 2.0]})).unwrap();
        let a = by_l.eval(&x, &z, false);
        assert!((a - by_g.eval(&x, &z, false)).abs() < 1e-15);
        assert!((a - ard.eval(&x, &z, false)).abs() < 1e-15);
        let d2: f64 = x.iter().zip(&z).map(|(a, b)| (a - b) * (a - b)).sum();
        assert!((a - (-d2 / 8.0).exp()).abs() < 1e-15);
    }

    #[test]
    fn psd_is_tracked_through_the_algebra() {
        let sig = json!({"type": "sigmoid"});
        assert!(!Kernel::from_json(&sig).unwrap().is_psd(1));
        let k = Kernel::from_json(&json!({"type": "product", "kernels": [sig, {"type": "rbf"}]})).unwrap();
        assert!(!k.is_psd(1));
        let sum = Kernel::from_json(&json!({"type": "sum", "kernels": [{"type": "rbf"}, {"type": "linear"}]})).unwrap();
        assert!(sum.is_psd(5));
        let periodic = Kernel::from_json(&json!({"type": "periodic"})).unwrap();
        assert!(periodic.is_psd(1) && !periodic.is_psd(2));
    }
}

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

pub mod column;
mod grad;
mod gram;
pub mod hyper;
mod json;
mod points;
mod pointwise;
mod structured;

use crate::linalg::Parallelism;
use crate::spec::FieldError;
use hyper::{Hyper, Scales, DEFAULT_BOUNDS};
use nalgebra::{DMatrix, DVector};

pub use points::{Points, RowKind};
pub use structured::{Mahalanobis, Mixture, MixtureKernel, SetMeasure};

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
}

/// One optimisable scalar hyperparameter as seen by the optimiser: a JSON pointer into
/// the kernel document, its value, its bounds and whether it is fixed.
#[derive(Debug, Clone, PartialEq)]
pub struct HyperInfo {
    pub pointer: String,
    pub value: f64,
    pub bounds: (f64, f64),
    pub fixed: bool,
}

/// Fits (or finds) the mixture of a generative or Fisher part, given its settings and its
/// pointer within the kernel document.
pub type MixtureFitter<'a, E> = dyn FnMut(&MixtureKernel, &str) -> Result<std::sync::Arc<Mixture>, E> + 'a;

/// Called with (pointer, value, bounds, fixed) for each optimisable scalar.
type HyperVisitor<'a> = dyn FnMut(String, &mut f64, (f64, f64), bool) + 'a;

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

    /// Checks what can only be checked once the feature count d is known (ARD lists).
    /// Errors point into the kernel document (`/length_scale`, `/kernels/1/length_scale`).
    pub fn check_features(&self, d: usize) -> Result<(), FieldError> {
        self.check_features_at(d, "")
    }

    fn check_features_at(&self, d: usize, path: &str) -> Result<(), FieldError> {
        let ard = match self {
            Kernel::Rbf(RbfWidth::LengthScale(h))
            | Kernel::Exponential { length_scale: h }
            | Kernel::Matern { length_scale: h, .. } => Some(h),
            _ => None,
        };
        if let Some(Hyper { value: Scales::PerFeature(ls), .. }) = ard {
            if ls.len() != d {
                return Err(FieldError::invalid(
                    format!("{path}/length_scale"),
                    format!("has {} entries but the data has {d} features", ls.len()),
                ));
            }
        }
        let fixed_width = match self {
            Kernel::Mahalanobis(m) => Some(("matrix", m.matrix().nrows())),
            Kernel::Generative(g) | Kernel::Fisher(g) => g.mixture.as_ref().map(|m| ("mixture/means", m.d())),
            _ => None,
        };
        if let Some((field, width)) = fixed_width.filter(|&(_, w)| w != d) {
            return Err(FieldError::invalid(
                format!("{path}/{field}"),
                format!("is for {width} features but the data has {d}"),
            ));
        }
        match self {
            Kernel::Sum(ks) | Kernel::Product(ks) => {
                for (i, k) in ks.iter().enumerate() {
                    k.check_features_at(d, &format!("{path}/kernels/{i}"))?;
                }
                Ok(())
            }
            Kernel::Scale { kernel, .. } => kernel.check_features_at(d, &format!("{path}/kernel")),
            _ => Ok(()),
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
            | Kernel::Fisher(_) => unreachable!("handled above"),
        }
    }

    /// The symmetric Gram matrix K(X, X), n x n.
    pub fn gram(&self, x: &Points, par: Parallelism) -> DMatrix<f64> {
        gram::build(self, x, None, par)
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

    /// Every optimisable scalar hyperparameter, fixed or not, in a fixed traversal order
    /// (depth first, as written). Never listed: degree, nu, coef0, linear c, polynomial and
    /// sigmoid gamma.
    pub fn hyperparameters(&self) -> Vec<HyperInfo> {
        let mut out = Vec::new();
        self.clone().visit_hypers("", &mut |pointer, value, bounds, fixed| {
            out.push(HyperInfo { pointer, value: *value, bounds, fixed })
        });
        out
    }

    /// log of the free (not fixed) hyperparameters, as scikit-learn's `theta`.
    pub fn theta(&self) -> Vec<f64> {
        self.hyperparameters().iter().filter(|h| !h.fixed).map(|h| h.value.ln()).collect()
    }

    /// log-space bounds of the free hyperparameters.
    pub fn theta_bounds(&self) -> Vec<(f64, f64)> {
        self.hyperparameters().iter().filter(|h| !h.fixed).map(|h| (h.bounds.0.ln(), h.bounds.1.ln())).collect()
    }

    /// The same kernel with its free hyperparameters set to exp(theta).
    pub fn with_theta(&self, theta: &[f64]) -> Kernel {
        let mut k = self.clone();
        let mut it = theta.iter();
        k.visit_hypers("", &mut |_, value, _, fixed| {
            if !fixed {
                *value = it.next().expect("theta has one entry per free hyperparameter").exp();
            }
        });
        assert!(it.next().is_none(), "theta longer than the free hyperparameters");
        k
    }

    /// Calls `f(pointer, value, bounds, fixed)` on every optimisable scalar, depth first;
    /// within one kernel in alphabetical order of name, so that theta is ordered exactly
    /// as scikit-learn's for the kernels it has. The gradient code (`grad.rs`) emits
    /// derivatives in this order.
    fn visit_hypers(&mut self, path: &str, f: &mut HyperVisitor<'_>) {
        fn scalar(h: &mut Hyper, pointer: String, f: &mut HyperVisitor<'_>) {
            let (bounds, fixed) = (h.bounds_or(DEFAULT_BOUNDS), h.fixed);
            f(pointer, &mut h.value, bounds, fixed);
        }
        fn scales(h: &mut Hyper<Scales>, pointer: String, f: &mut HyperVisitor<'_>) {
            let (bounds, fixed) = (h.bounds_or(DEFAULT_BOUNDS), h.fixed);
            match &mut h.value {
                Scales::Isotropic(l) => f(pointer, l, bounds, fixed),
                Scales::PerFeature(ls) => {
                    for (i, l) in ls.iter_mut().enumerate() {
                        f(format!("{pointer}/{i}"), l, bounds, fixed);
                    }
                }
            }
        }
        match self {
            Kernel::Linear { .. } | Kernel::Polynomial { .. } | Kernel::Sigmoid { .. } => {}
            Kernel::Spectrum { .. }
            | Kernel::Subsequence { .. }
            | Kernel::Set { .. }
            | Kernel::Mahalanobis(_)
            | Kernel::Generative(_)
            | Kernel::Fisher(_) => {}
            Kernel::Rbf(RbfWidth::LengthScale(h))
            | Kernel::Exponential { length_scale: h }
            | Kernel::Matern { length_scale: h, .. } => scales(h, format!("{path}/length_scale"), f),
            Kernel::Rbf(RbfWidth::Gamma(g)) => scalar(g, format!("{path}/gamma"), f),
            Kernel::Laplacian { length_scale } => scalar(length_scale, format!("{path}/length_scale"), f),
            Kernel::RationalQuadratic { length_scale, alpha } => {
                scalar(alpha, format!("{path}/alpha"), f);
                scalar(length_scale, format!("{path}/length_scale"), f);
            }
            Kernel::Periodic { length_scale, period } => {
                scalar(length_scale, format!("{path}/length_scale"), f);
                scalar(period, format!("{path}/period"), f);
            }
            Kernel::InverseMultiquadric { c } => scalar(c, format!("{path}/c"), f),
            Kernel::Constant { value } => scalar(value, format!("{path}/value"), f),
            Kernel::White { noise } => scalar(noise, format!("{path}/noise"), f),
            Kernel::Sum(ks) | Kernel::Product(ks) => {
                for (i, k) in ks.iter_mut().enumerate() {
                    k.visit_hypers(&format!("{path}/kernels/{i}"), f);
                }
            }
            Kernel::Scale { factor, kernel } => {
                scalar(factor, format!("{path}/factor"), f);
                kernel.visit_hypers(&format!("{path}/kernel"), f);
            }
        }
    }

    /// The kind of rows this kernel takes: None when any kind will do (constant and
    /// white alone), else the first part's own kind. Errors (pointing at the part that
    /// disagrees) when parts need different kinds or the rows are of another kind.
    pub fn check_rows(&self, rows: RowKind) -> Result<(), FieldError> {
        self.check_rows_at(rows, "")
    }

    fn check_rows_at(&self, rows: RowKind, path: &str) -> Result<(), FieldError> {
        let needs = match self {
            Kernel::Sum(ks) | Kernel::Product(ks) => {
                for (i, k) in ks.iter().enumerate() {
                    k.check_rows_at(rows, &format!("{path}/kernels/{i}"))?;
                }
                return Ok(());
            }
            Kernel::Scale { kernel, .. } => return kernel.check_rows_at(rows, &format!("{path}/kernel")),
            Kernel::Constant { .. } | Kernel::White { .. } => return Ok(()),
            Kernel::Spectrum { .. } | Kernel::Subsequence { .. } => RowKind::Text,
            Kernel::Set { .. } => RowKind::Tokens,
            _ => RowKind::Numeric,
        };
        if needs == rows {
            return Ok(());
        }
        Err(FieldError::invalid(
            path,
            format!("a {} kernel takes {}, but the rows are {}", self.type_name(), needs.describe(), rows.describe()),
        ))
    }

    /// Rough flops of one kernel value between a point of `x` and a query point, for
    /// deciding where a prediction runs: d for numeric rows (whatever the kernel, as the
    /// matrix-product paths make it), and for strings and token sets what the kernel's
    /// own work grows with: the length (spectrum, set), or length times |x| |z|
    /// (subsequence), taking x's average row as the query's.
    pub fn pair_cost(&self, x: &Points) -> f64 {
        if x.kind() == RowKind::Numeric {
            return x.d() as f64;
        }
        let n = x.n().max(1) as f64;
        let mean_len = match (x.texts(), x.token_lists()) {
            (Some(t), _) => t.iter().map(|s| s.len()).sum::<usize>() as f64 / n,
            (_, Some(t)) => t.iter().map(|r| r.len()).sum::<usize>() as f64 / n,
            _ => 0.0,
        };
        self.pair_cost_at(mean_len)
    }

    fn pair_cost_at(&self, len: f64) -> f64 {
        match self {
            Kernel::Sum(ks) | Kernel::Product(ks) => ks.iter().map(|k| k.pair_cost_at(len)).sum(),
            Kernel::Scale { kernel, .. } => kernel.pair_cost_at(len),
            Kernel::Subsequence { length, .. } => 2.0 * *length as f64 * len * len,
            Kernel::Constant { .. } | Kernel::White { .. } => 1.0,
            _ => len,
        }
    }

    /// Errors (at `/x`) when a string kernel sees nothing in any row: every string is
    /// shorter than its k-mers or subsequences, so that part is 0 everywhere and nothing
    /// can be learnt from it. Single short strings are fine (their kernel values are 0).
    pub fn check_lengths(&self, x: &Points) -> Result<(), FieldError> {
        let Some(texts) = x.texts() else { return Ok(()) };
        let longest = texts.iter().map(|s| s.len()).max().unwrap_or(0);
        self.check_lengths_at(longest)
    }

    fn check_lengths_at(&self, longest: usize) -> Result<(), FieldError> {
        let (what, need) = match self {
            Kernel::Sum(ks) | Kernel::Product(ks) => return ks.iter().try_for_each(|k| k.check_lengths_at(longest)),
            Kernel::Scale { kernel, .. } => return kernel.check_lengths_at(longest),
            Kernel::Spectrum { k, .. } => ("k-mers", *k),
            Kernel::Subsequence { length, .. } => ("subsequences", *length),
            _ => return Ok(()),
        };
        if longest >= need {
            return Ok(());
        }
        Err(FieldError::invalid(
            "/x",
            format!(
                "every string has fewer than {need} characters, so the {} kernel's {what} of {need} find nothing in any row",
                self.type_name()
            ),
        ))
    }

    /// The same kernel with every generative and Fisher part's mixture set by `fit`
    /// (called with the part's settings and pointer; parts given a mixture keep it).
    pub fn with_mixtures<E>(&self, fit: &mut MixtureFitter<'_, E>) -> Result<Kernel, E> {
        self.with_mixtures_at("", fit)
    }

    fn with_mixtures_at<E>(&self, path: &str, fit: &mut MixtureFitter<'_, E>) -> Result<Kernel, E> {
        Ok(match self {
            Kernel::Generative(g) | Kernel::Fisher(g) if g.mixture.is_none() => {
                let g = MixtureKernel { mixture: Some(fit(g, path)?), ..g.clone() };
                if matches!(self, Kernel::Generative(_)) {
                    Kernel::Generative(g)
                } else {
                    Kernel::Fisher(g)
                }
            }
            Kernel::Sum(ks) => Kernel::Sum(
                ks.iter()
                    .enumerate()
                    .map(|(i, k)| k.with_mixtures_at(&format!("{path}/kernels/{i}"), fit))
                    .collect::<Result<_, _>>()?,
            ),
            Kernel::Product(ks) => Kernel::Product(
                ks.iter()
                    .enumerate()
                    .map(|(i, k)| k.with_mixtures_at(&format!("{path}/kernels/{i}"), fit))
                    .collect::<Result<_, _>>()?,
            ),
            Kernel::Scale { factor, kernel } => Kernel::Scale {
                factor: factor.clone(),
                kernel: Box::new(kernel.with_mixtures_at(&format!("{path}/kernel"), fit)?),
            },
            other => other.clone(),
        })
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
    fn ard_length_must_match_feature_count_at_any_depth() {
        let k = Kernel::from_json(&json!({"type": "rbf", "length_scale": [1.0, 2.0]})).unwrap();
        assert!(k.check_features(2).is_ok());
        assert_eq!(k.check_features(3).unwrap_err().pointer, "/length_scale");
        let nested = json!({"type": "sum", "kernels": [
            {"type": "white"},
            {"type": "scale", "factor": 2.0, "kernel": {"type": "matern", "length_scale": [1.0, 2.0, 3.0]}}
        ]});
        let k = Kernel::from_json(&nested).unwrap();
        assert!(k.check_features(3).is_ok());
        assert_eq!(k.check_features(2).unwrap_err().pointer, "/kernels/1/kernel/length_scale");
    }

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
    fn theta_lists_free_hyperparameters_in_log_space_and_round_trips() {
        let k = Kernel::from_json(&json!({"type": "sum", "kernels": [
            {"type": "scale", "factor": {"value": 2.0, "bounds": [0.1, 10.0]},
             "kernel": {"type": "rbf", "length_scale": [0.5, 4.0]}},
            {"type": "white", "noise": {"value": 0.1, "fixed": true}},
            {"type": "polynomial", "degree": 2}
        ]}))
        .unwrap();
        let hp = k.hyperparameters();
        let pointers: Vec<_> = hp.iter().map(|h| h.pointer.as_str()).collect();
        assert_eq!(
            pointers,
            [
                "/kernels/0/factor",
                "/kernels/0/kernel/length_scale/0",
                "/kernels/0/kernel/length_scale/1",
                "/kernels/1/noise"
            ]
        );
        assert_eq!(hp[0].bounds, (0.1, 10.0));
        assert_eq!(hp[1].bounds, DEFAULT_BOUNDS);
        let theta = k.theta();
        assert_eq!(theta.len(), 3, "the fixed white noise is not free");
        assert!((theta[0] - 2f64.ln()).abs() < 1e-15 && (theta[2] - 4f64.ln()).abs() < 1e-15);
        assert_eq!(k.theta_bounds()[0], (0.1f64.ln(), 10f64.ln()));
        let moved = k.with_theta(&[0.0, 1.0, -1.0]);
        let hp = moved.hyperparameters();
        assert_eq!((hp[0].value, hp[3].value), (1.0, 0.1));
        assert!((hp[1].value - 1f64.exp()).abs() < 1e-15);
        assert_eq!(moved.with_theta(&theta), k);
    }

    /// Where a prediction runs depends on this: a subsequence kernel over long strings must
    /// not pass for cheap (it would run on the async threads).
    #[test]
    fn pair_cost_grows_with_the_string_kernels_work() {
        let k = |v| Kernel::from_json(&v).unwrap();
        let x = Points::from_rows(&[vec![0.0; 7]]);
        assert_eq!(k(json!({"type": "sum", "kernels": [{"type": "rbf"}, {"type": "linear"}]})).pair_cost(&x), 7.0);
        let t = Points::from_texts(["a".repeat(40), "b".repeat(60)]);
        let spectrum = k(json!({"type": "spectrum"})).pair_cost(&t);
        let subsequence = k(json!({"type": "subsequence", "length": 3})).pair_cost(&t);
        assert_eq!(spectrum, 50.0);
        assert_eq!(subsequence, 2.0 * 3.0 * 50.0 * 50.0);
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

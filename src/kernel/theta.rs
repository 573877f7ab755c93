//! The kernel's hyperparameters as the optimiser sees them: listed with pointers and
//! bounds, as scikit-learn's `theta` (log space, free ones only), and set back.

use super::hyper::{Hyper, Scales, DEFAULT_BOUNDS};
use super::{Kernel, RbfWidth};

/// One optimisable scalar hyperparameter as seen by the optimiser: a JSON pointer into
/// the kernel document, its value, its bounds and whether it is fixed.
#[derive(Debug, Clone, PartialEq)]
pub struct HyperInfo {
    pub pointer: String,
    pub value: f64,
    pub bounds: (f64, f64),
    pub fixed: bool,
}

/// Called with (pointer, value, bounds, fixed) for each optimisable scalar.
type HyperVisitor<'a> = dyn FnMut(String, &mut f64, (f64, f64), bool) + 'a;

impl Kernel {
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
            | Kernel::Fisher(_)
            | Kernel::Precomputed => {}
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
}

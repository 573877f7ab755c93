//! Kernels from a Gaussian mixture (Bishop section 6.2): the generative kernel
//! sum_i p(x|i) p(z|i) P(i) and the Fisher-score kernel g(x)' g(z), g the gradient of
//! ln p(x) with respect to the component means (Fisher information omitted).
//!
//! Both are inner products of explicit features, so they map the points and hand them
//! to the linear kernel: phi_i(x) = sqrt(P(i)) p(x|i) for the generative kernel (C
//! features), r_i(x) (x - mu_i) / var_i stacked over components for the Fisher kernel
//! (C d features). The mixture itself is fitted by the estimator layer (EM); this module
//! only holds and applies it.

use crate::kernel::Points;
use nalgebra::DMatrix;
use std::sync::Arc;

/// A Gaussian mixture with diagonal covariances.
#[derive(Debug, Clone, PartialEq)]
pub struct Mixture {
    /// P(i), one per component, summing to 1.
    pub weights: Vec<f64>,
    /// d x C: component i's mean in column i.
    pub means: DMatrix<f64>,
    /// d x C: component i's per-feature variances in column i, all > 0.
    pub variances: DMatrix<f64>,
}

/// A generative or Fisher kernel's settings and, once fitted (or given), its mixture.
#[derive(Debug, Clone, PartialEq)]
pub struct MixtureKernel {
    pub components: usize,
    pub seed: u64,
    pub max_iter: usize,
    pub mixture: Option<Arc<Mixture>>,
}

impl Mixture {
    pub fn components(&self) -> usize {
        self.weights.len()
    }

    pub fn d(&self) -> usize {
        self.means.nrows()
    }

    /// ln p(x | i) for every component, written into `out`.
    pub fn log_densities(&self, x: &[f64], out: &mut [f64]) {
        let ln_2pi = (2.0 * std::f64::consts::PI).ln();
        for (i, o) in out.iter_mut().enumerate() {
            let (mu, var) = (self.means.column(i), self.variances.column(i));
            let mut s = 0.0;
            for f in 0..x.len() {
                let diff = x[f] - mu[f];
                s += diff * diff / var[f] + var[f].ln() + ln_2pi;
            }
            *o = -0.5 * s;
        }
    }

    /// ln p(x) = ln sum_i P(i) p(x|i), by log-sum-exp; `scratch` gets ln P(i) p(x|i).
    pub fn log_likelihood(&self, x: &[f64], scratch: &mut [f64]) -> f64 {
        self.log_densities(x, scratch);
        for (s, w) in scratch.iter_mut().zip(&self.weights) {
            *s += w.ln();
        }
        log_sum_exp(scratch)
    }

    /// The generative kernel's features: sqrt(P(i)) p(x|i), C x n.
    fn generative_features(&self, x: &Points) -> Points {
        let c = self.components();
        let mut scratch = vec![0.0; c];
        let mut out = DMatrix::zeros(c, x.n());
        for j in 0..x.n() {
            self.log_densities(x.point(j), &mut scratch);
            for i in 0..c {
                out[(i, j)] = (scratch[i] + 0.5 * self.weights[i].ln()).exp();
            }
        }
        Points::from_columns(out)
    }

    /// The Fisher scores with respect to the means: r_i(x) (x - mu_i) / var_i for each
    /// component i, stacked, C d x n.
    fn fisher_features(&self, x: &Points) -> Points {
        let (c, d) = (self.components(), self.d());
        let mut scratch = vec![0.0; c];
        let mut out = DMatrix::zeros(c * d, x.n());
        for j in 0..x.n() {
            let p = x.point(j);
            let total = self.log_likelihood(p, &mut scratch);
            for i in 0..c {
                let r = (scratch[i] - total).exp();
                for f in 0..d {
                    out[(i * d + f, j)] = r * (p[f] - self.means[(f, i)]) / self.variances[(f, i)];
                }
            }
        }
        Points::from_columns(out)
    }
}

/// ln sum exp(v), stable for any finite entries.
fn log_sum_exp(v: &[f64]) -> f64 {
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if max == f64::NEG_INFINITY {
        return max;
    }
    max + v.iter().map(|a| (a - max).exp()).sum::<f64>().ln()
}

/// Which of the two mixture kernels.
#[derive(Debug, Clone, Copy)]
pub(super) enum Score {
    Generative,
    Fisher,
}

impl MixtureKernel {
    pub(super) fn features(&self, score: Score, x: &Points) -> Points {
        let m = self.mixture.as_ref().expect("the mixture is fitted before the kernel is evaluated");
        match score {
            Score::Generative => m.generative_features(x),
            Score::Fisher => m.fisher_features(x),
        }
    }
}

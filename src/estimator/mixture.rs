//! Fitting the Gaussian mixture behind a generative or Fisher kernel: EM with diagonal
//! covariances on the training rows, before the model's own fit.
//!
//! As scikit-learn's GaussianMixture (covariance_type="diag", init_params="kmeans"):
//! k-means (k-means++ from the seed, then Lloyd) labels the rows, those hard
//! responsibilities give the first parameters, and EM runs until the mean
//! log-likelihood changes by less than 1e-6 or `max_iter` steps. Variances get 1e-6
//! added (scikit-learn's reg_covar), so a component on one repeated point stays proper.
//! Every probability is handled in log space through log-sum-exp.

use super::{FitContext, FitError};
use crate::estimator::approximation::inducing::{assign, kmeans_plus_plus, lloyd};
use crate::kernel::{Mixture, MixtureKernel, Points};
use crate::spec::FieldError;
use nalgebra::DMatrix;
use rayon::prelude::*;

const TOLERANCE: f64 = 1e-6;
const VARIANCE_FLOOR: f64 = 1e-6;

/// The mixture EM finds, and how it stopped.
#[derive(Debug, Clone)]
pub struct MixtureFit {
    pub mixture: Mixture,
    pub mean_log_likelihood: f64,
    pub iterations: usize,
    pub converged: bool,
}

/// Fits `spec.components` diagonal Gaussians to the rows of `x` (numeric, checked by the
/// caller). Errors point at `components` within the kernel.
pub fn fit(x: &Points, spec: &MixtureKernel, ctx: &FitContext) -> Result<MixtureFit, FitError> {
    let (n, c) = (x.n(), spec.components);
    if c > n {
        return Err(FitError::Invalid(FieldError::invalid(
            "/components",
            format!("{c} components requested but there are only {n} training rows"),
        )));
    }
    ctx.progress.phase("mixture");
    let mut centres = kmeans_plus_plus(x, c, spec.seed, ctx.par);
    lloyd(x, &mut centres, ctx)?;
    let labels = assign(x, &centres, ctx.par);
    let mut resp = DMatrix::<f64>::zeros(c, n);
    for (i, &l) in labels.iter().enumerate() {
        resp[(l as usize, i)] = 1.0;
    }
    let mut mixture = m_step(x, &resp);
    let mut previous = f64::NEG_INFINITY;
    let (mut iterations, mut converged, mut mean) = (0, false, f64::NEG_INFINITY);
    for it in 1..=spec.max_iter {
        ctx.cancel.check()?;
        mean = e_step(x, &mixture, &mut resp, ctx);
        ctx.progress.step(Some(mean));
        mixture = m_step(x, &resp);
        iterations = it;
        if (mean - previous).abs() < TOLERANCE {
            converged = true;
            break;
        }
        previous = mean;
    }
    Ok(MixtureFit { mixture, mean_log_likelihood: mean, iterations, converged })
}

/// Responsibilities (C x n) under `m`, in place; returns the mean log-likelihood.
fn e_step(x: &Points, m: &Mixture, resp: &mut DMatrix<f64>, ctx: &FitContext) -> f64 {
    let c = m.components();
    let row = |(i, r): (usize, &mut [f64])| -> f64 {
        let total = m.log_likelihood(x.point(i), r);
        r.iter_mut().for_each(|v| *v = (*v - total).exp());
        total
    };
    let lls: Vec<f64> = if ctx.par.is_parallel() {
        resp.as_mut_slice().par_chunks_mut(c).enumerate().with_min_len(256).map(row).collect()
    } else {
        resp.as_mut_slice().chunks_mut(c).enumerate().map(row).collect()
    };
    // Summed in row order, so the result does not depend on the thread count.
    lls.iter().sum::<f64>() / x.n() as f64
}

/// Weights, means and floored variances from responsibilities (C x n).
fn m_step(x: &Points, resp: &DMatrix<f64>) -> Mixture {
    let (n, d, c) = (x.n(), x.d(), resp.nrows());
    // As scikit-learn: a component with no responsibility keeps a tiny, finite weight.
    let nk: Vec<f64> = (0..c).map(|k| resp.row(k).sum() + 10.0 * f64::EPSILON).collect();
    // Responsibility-weighted averages over the rows, per component: of x, then of the
    // squared deviations from the new means (two passes: no cancellation).
    let weighted_mean = |value: &dyn Fn(usize, &[f64], usize) -> f64| {
        let mut sums = DMatrix::<f64>::zeros(d, c);
        for i in 0..n {
            let p = x.point(i);
            for k in 0..c {
                let r = resp[(k, i)];
                if r != 0.0 {
                    for f in 0..d {
                        sums[(f, k)] += r * value(f, p, k);
                    }
                }
            }
        }
        for (k, total) in nk.iter().enumerate() {
            sums.column_mut(k).iter_mut().for_each(|v| *v /= total);
        }
        sums
    };
    let means = weighted_mean(&|f, p, _| p[f]);
    let mut variances = weighted_mean(&|f, p, k| (p[f] - means[(f, k)]).powi(2));
    variances.iter_mut().for_each(|v| *v += VARIANCE_FLOOR);
    let weights = nk.iter().map(|v| v / n as f64).collect();
    Mixture { weights, means, variances }
}

/// The mean log-likelihood of `x` under `m`.
pub fn mean_log_likelihood(x: &Points, m: &Mixture) -> f64 {
    let mut scratch = vec![0.0; m.components()];
    (0..x.n()).map(|i| m.log_likelihood(x.point(i), &mut scratch)).sum::<f64>() / x.n() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn em_recovers_separated_blobs_and_never_lowers_the_likelihood() {
        let centres = [[-5.0, 0.0], [5.0, 2.0], [0.0, 8.0]];
        let noise = crate::test_support::seeded_matrix(2, 300, 9);
        let x = Points::from_columns(DMatrix::from_fn(2, 300, |r, i| centres[i % 3][r] + 0.5 * noise[(r, i)]));
        let spec = MixtureKernel { components: 3, seed: 1, max_iter: 200, mixture: None };
        let fit = fit(&x, &spec, &FitContext::sequential()).unwrap();
        assert!(fit.converged);
        assert!((fit.mixture.weights.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        for c in centres {
            let nearest = (0..3)
                .map(|k| (fit.mixture.means[(0, k)] - c[0]).hypot(fit.mixture.means[(1, k)] - c[1]))
                .fold(f64::INFINITY, f64::min);
            assert!(nearest < 0.3, "a component sits near {c:?}");
        }
        assert!((mean_log_likelihood(&x, &fit.mixture) - fit.mean_log_likelihood).abs() < 1e-5);
        // Fewer iterations never end higher: EM's likelihood is monotone.
        let short = super::fit(&x, &MixtureKernel { max_iter: 1, ..spec.clone() }, &FitContext::sequential()).unwrap();
        assert!(mean_log_likelihood(&x, &short.mixture) <= mean_log_likelihood(&x, &fit.mixture) + 1e-12);
        let too_many = MixtureKernel { components: 301, ..spec };
        assert!(
            matches!(super::fit(&x, &too_many, &FitContext::sequential()), Err(FitError::Invalid(e)) if e.pointer == "/components")
        );
    }

    #[test]
    fn a_repeated_point_gets_the_variance_floor() {
        let x = Points::from_rows(&[vec![1.0], vec![1.0], vec![1.0], vec![4.0]]);
        let spec = MixtureKernel { components: 2, seed: 0, max_iter: 50, mixture: None };
        let fit = fit(&x, &spec, &FitContext::sequential()).unwrap();
        assert!(fit.mixture.variances.iter().all(|&v| v >= VARIANCE_FLOOR && v.is_finite()));
        assert!(fit.mean_log_likelihood.is_finite());
    }
}

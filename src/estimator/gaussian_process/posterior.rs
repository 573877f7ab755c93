//! Joint draws from a Gaussian process's predictive distribution at query rows
//! (scikit-learn's `GaussianProcessRegressor.sample_y`): mean + L z with L the lower
//! Cholesky factor of the predictive covariance (under the jitter rule: a covariance that
//! is singular, as at repeated rows or at noise-free training rows, gains the smallest
//! jitter that factorises it) and z standard normal draws from the seed.
//!
//! Draw j takes the m normals after those of draws 0..j, so asking for more draws from
//! one seed extends the earlier ones rather than changing them (to round-off: the
//! product's blocking depends on how many there are).

use crate::linalg::{Cholesky, LinalgError, Parallelism};
use crate::optimize::SplitMix64;
use nalgebra::DMatrix;

/// The most numbers one request may draw (m x outputs x n_samples).
pub const MAX_DRAWN: u64 = 20_000_000;

/// `n_samples` draws (columns) of the m-vector with this mean and covariance (m x m).
pub fn draw(
    mean: &[f64],
    covariance: &DMatrix<f64>,
    n_samples: usize,
    seed: u64,
    par: Parallelism,
) -> Result<DMatrix<f64>, LinalgError> {
    let m = mean.len();
    assert_eq!(covariance.shape(), (m, m));
    let chol = Cholesky::factor_with_jitter(|| covariance.clone(), par)?;
    let mut rng = SplitMix64::new(seed);
    let z = DMatrix::from_fn(m, n_samples, |_, _| rng.normal());
    let mut out = chol.l_times(&z, par);
    for mut col in out.column_iter_mut() {
        col.iter_mut().zip(mean).for_each(|(v, mu)| *v += mu);
    }
    Ok(out)
}

/// Joint draws at the query rows: m x n_samples, or one such matrix per output of a
/// multi-output model.
#[derive(Debug, Clone)]
pub enum Draws {
    Single(DMatrix<f64>),
    PerOutput(Vec<DMatrix<f64>>),
}

impl Draws {
    pub fn all_finite(&self) -> bool {
        match self {
            Draws::Single(d) => d.iter().all(|v| v.is_finite()),
            Draws::PerOutput(ds) => ds.iter().all(|d| d.iter().all(|v| v.is_finite())),
        }
    }
}

/// Draws from a Gaussian process's prediction with its covariance (one output, or each
/// of several: [`draw_outputs`]).
pub fn draw_prediction(
    p: &crate::estimator::Prediction,
    n_samples: usize,
    seed: u64,
    par: Parallelism,
) -> Result<Draws, LinalgError> {
    let cov = p.covariance.as_ref().expect("a prediction with its covariance");
    match &p.output_scales {
        None => draw(&p.values, cov, n_samples, seed, par).map(Draws::Single),
        Some(scales) => draw_outputs(&p.values, cov, scales, n_samples, seed, par).map(Draws::PerOutput),
    }
}

/// Draws for t outputs sharing one covariance shape: output k's mean is column k of
/// `mean` (m x t row-major) and its covariance `covariance` times `scales[k]` (a 2-D y's
/// GP, whose outputs differ only in their normalisation). One factorisation for all of
/// them; output k's standard normals follow output k - 1's in the seed's stream. Returns
/// one m x n_samples matrix per output.
pub fn draw_outputs(
    mean: &[f64],
    covariance: &DMatrix<f64>,
    scales: &[f64],
    n_samples: usize,
    seed: u64,
    par: Parallelism,
) -> Result<Vec<DMatrix<f64>>, LinalgError> {
    let (m, t) = (covariance.nrows(), scales.len());
    assert_eq!(mean.len(), m * t);
    let chol = Cholesky::factor_with_jitter(|| covariance.clone(), par)?;
    let mut rng = SplitMix64::new(seed);
    let mut out = Vec::with_capacity(t);
    for (k, scale) in scales.iter().enumerate() {
        let z = DMatrix::from_fn(m, n_samples, |_, _| rng.normal());
        let mut d = chol.l_times(&z, par) * scale.sqrt();
        for mut col in d.column_iter_mut() {
            col.iter_mut().enumerate().for_each(|(i, v)| *v += mean[i * t + k]);
        }
        out.push(d);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Many draws have the mean and covariance they were drawn from (to a tolerance from
    /// their number), one seed gives one set of draws, and more draws extend fewer.
    #[test]
    fn draws_follow_their_mean_and_covariance() {
        let a = crate::test_support::seeded_matrix(4, 4, 5);
        let cov = &a * a.transpose() + DMatrix::identity(4, 4) * 0.1;
        let mean = [1.0, -2.0, 0.5, 3.0];
        let n = 40_000;
        let d = draw(&mean, &cov, n, 7, Parallelism::Sequential).unwrap();
        let sample_mean: Vec<f64> = d.row_iter().map(|r| r.sum() / n as f64).collect();
        for i in 0..4 {
            let se = (cov[(i, i)] / n as f64).sqrt();
            assert!((sample_mean[i] - mean[i]).abs() < 5.0 * se, "mean {i}: {} vs {}", sample_mean[i], mean[i]);
            for j in 0..4 {
                let c = (0..n).map(|s| (d[(i, s)] - mean[i]) * (d[(j, s)] - mean[j])).sum::<f64>() / n as f64;
                let se = ((cov[(i, i)] * cov[(j, j)] + cov[(i, j)].powi(2)) / n as f64).sqrt();
                assert!((c - cov[(i, j)]).abs() < 5.0 * se, "cov {i},{j}: {c} vs {}", cov[(i, j)]);
            }
        }
        let again = draw(&mean, &cov, 10, 7, Parallelism::Sequential).unwrap();
        assert!((&again - d.columns(0, 10)).amax() < 1e-12, "the first draws do not depend on how many");
        assert_eq!(again, draw(&mean, &cov, 10, 7, Parallelism::Sequential).unwrap(), "one seed, one set of draws");
        assert_ne!(draw(&mean, &cov, 10, 8, Parallelism::Sequential).unwrap(), again, "another seed");
        // A singular covariance (two equal rows) is drawn through the jitter rule.
        let one = DMatrix::from_element(2, 2, 2.0);
        let d = draw(&[0.0, 0.0], &one, 5, 1, Parallelism::Sequential).unwrap();
        for s in 0..5 {
            assert!((d[(0, s)] - d[(1, s)]).abs() < 1e-4, "equal rows draw (nearly) equal values");
        }
    }
}

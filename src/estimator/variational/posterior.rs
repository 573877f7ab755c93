//! q(v) = N(m_c, S_c) for each latent in the whitened basis (u_c = L v_c, prior N(0, I)),
//! held in natural form for the natural-gradient step: the precision Lambda_c = S_c^-1,
//! its Cholesky factor P_c, theta1_c = Lambda_c m_c, and the mean.
//!
//! The natural-gradient step of size rho (Salimbeni, Eleftheriadis & Hensman 2018) moves
//! the natural parameters toward the prior's plus the data term's gradient in the
//! expectation parameters: Lambda <- (1 - rho) Lambda + rho (I - 2 s H) and theta1 <-
//! (1 - rho) theta1 + rho s r, with H = sum h a a' and r = sum (g - 2 h mu) a over the
//! batch and s = n / batch. For the Gaussian likelihood one step of size 1 over every row
//! is the optimum (Titsias' q(u)).

use crate::linalg::{Cholesky, Parallelism};
use nalgebra::{DMatrix, DVector};

#[derive(Debug, Clone)]
pub struct Posterior {
    pub mean: Vec<DVector<f64>>,
    pub theta1: Vec<DVector<f64>>,
    pub precision: Vec<DMatrix<f64>>,
    pub chol: Vec<Cholesky>,
}

impl Posterior {
    /// The prior N(0, I) for each of `latents` latents of M inducing values.
    pub fn prior(m: usize, latents: usize) -> Posterior {
        Posterior {
            mean: vec![DVector::zeros(m); latents],
            theta1: vec![DVector::zeros(m); latents],
            precision: vec![DMatrix::identity(m, m); latents],
            chol: vec![Cholesky::from_factor(DMatrix::identity(m, m), 0.0); latents],
        }
    }

    /// q(v_c) = N(mean_c, R_c R_c') from each latent's mean and lower Cholesky factor of
    /// its covariance (GPyTorch's `CholeskyVariationalDistribution`). None when a factor
    /// is singular.
    pub fn from_mean_and_factor(mean: &[DVector<f64>], factor: &[DMatrix<f64>]) -> Option<Posterior> {
        let m = mean.first()?.len();
        let mut q = Posterior::prior(m, mean.len());
        for (c, (mu, r)) in mean.iter().zip(factor).enumerate() {
            let rc = Cholesky::from_factor(r.clone(), 0.0);
            // Lambda = R^-T R^-1.
            let mut inv = DMatrix::identity(m, m);
            rc.solve_l_in_place(&mut inv, Parallelism::Sequential);
            let precision = inv.transpose() * &inv;
            let chol = Cholesky::factor(precision.clone(), Parallelism::Sequential).ok()?;
            q.theta1[c] = &precision * mu;
            q.mean[c] = mu.clone();
            q.precision[c] = precision;
            q.chol[c] = chol;
        }
        Some(q)
    }

    pub fn latents(&self) -> usize {
        self.mean.len()
    }

    /// Sets latent c from its precision and theta1; false (and nothing changed) when the
    /// precision is not positive definite.
    pub fn set(&mut self, c: usize, precision: DMatrix<f64>, theta1: DVector<f64>, par: Parallelism) -> bool {
        let Ok(chol) = Cholesky::factor(precision.clone(), par) else {
            return false;
        };
        let mut mean = DMatrix::from_column_slice(theta1.len(), 1, theta1.as_slice());
        chol.solve_in_place(&mut mean, Parallelism::Sequential);
        crate::linalg::clear_upper_vector_state();
        self.mean[c] = DVector::from_column_slice(mean.as_slice());
        self.theta1[c] = theta1;
        self.precision[c] = precision;
        self.chol[c] = chol;
        true
    }

    /// One natural-gradient step of size `rho` from each latent's statistics (H, r) over
    /// a batch scaled by `scale`. A step whose precision is not positive definite (a
    /// likelihood that is not log-concave, as Student-t's) is halved until it is, at most
    /// ten times; returns the steps taken.
    pub fn natural_step(
        &mut self,
        stats: &[(DMatrix<f64>, DVector<f64>)],
        scale: f64,
        rho: f64,
        par: Parallelism,
    ) -> Vec<f64> {
        let m = self.mean.first().map_or(0, DVector::len);
        let mut taken = Vec::with_capacity(stats.len());
        for (c, (h, r)) in stats.iter().enumerate() {
            let mut step = rho;
            let mut done = 0.0;
            for _ in 0..=10 {
                let mut precision = &self.precision[c] * (1.0 - step) + h * (-2.0 * scale * step);
                for i in 0..m {
                    precision[(i, i)] += step;
                }
                let theta1 = &self.theta1[c] * (1.0 - step) + r * (scale * step);
                if self.set(c, precision, theta1, par) {
                    done = step;
                    break;
                }
                step *= 0.5;
            }
            taken.push(done);
        }
        taken
    }

    /// sum over latents of KL(N(m, S) || N(0, I)) = (tr S + m'm - M + log det Lambda) / 2.
    pub fn kl(&self, par: Parallelism) -> f64 {
        self.mean
            .iter()
            .zip(&self.chol)
            .map(|(mean, p)| {
                // inverse_lower: the lower triangle of (P P')^-1 = S.
                let trace = p.inverse_lower(par).diagonal().sum();
                0.5 * (trace + mean.norm_squared() - mean.len() as f64 + p.log_det())
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The KL against its definition with S formed explicitly, and the mean and factor
    /// form read back.
    #[test]
    fn kl_and_the_covariance_form_agree_with_their_definitions() {
        let r = DMatrix::from_fn(3, 3, |i, j| if i >= j { 0.3 + 0.1 * (i + 2 * j) as f64 } else { 0.0 });
        let mean = DVector::from_column_slice(&[0.4, -1.0, 0.2]);
        let q = Posterior::from_mean_and_factor(std::slice::from_ref(&mean), std::slice::from_ref(&r)).unwrap();
        let s = &r * r.transpose();
        let want = 0.5 * (s.trace() + mean.norm_squared() - 3.0 - s.determinant().ln());
        assert!((q.kl(Parallelism::Sequential) - want).abs() < 1e-12, "{} vs {want}", q.kl(Parallelism::Sequential));
        assert!((&q.mean[0] - &mean).amax() < 1e-12);
        let back = s.try_inverse().unwrap();
        assert!((&q.precision[0] - back).amax() < 1e-9);
    }
}

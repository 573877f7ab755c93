//! The log marginal likelihood of a Gaussian process and its gradient with respect to
//! the log hyperparameters (kernel, then noise unless fixed), and the search that
//! maximises it.

use super::{log_marginal_likelihood_of, GaussianProcess, NOISE_BOUNDS};
use crate::estimator::{FitContext, FitError, TrainingReport};
use crate::kernel::Points;
use crate::linalg::{Cholesky, Parallelism};
use nalgebra::DMatrix;
use rayon::prelude::*;

impl GaussianProcess {
    /// The search vector: log of the kernel's free hyperparameters, then log noise unless
    /// the noise is fixed (scikit-learn's order with a WhiteKernel standing for the noise).
    pub fn theta(&self) -> Vec<f64> {
        let mut t = self.kernel.theta();
        if !self.noise.fixed {
            t.push(self.noise.value.ln());
        }
        t
    }

    pub fn theta_bounds(&self) -> Vec<(f64, f64)> {
        let mut b = self.kernel.theta_bounds();
        if !self.noise.fixed {
            let (lo, hi) = self.noise.bounds_or(NOISE_BOUNDS);
            b.push((lo.ln(), hi.ln()));
        }
        b
    }

    /// Pointers (into the request) of the entries of [`GaussianProcess::theta`].
    pub fn theta_pointers(&self) -> Vec<String> {
        let mut p: Vec<String> = self
            .kernel
            .hyperparameters()
            .into_iter()
            .filter(|h| !h.fixed)
            .map(|h| format!("/kernel{}", h.pointer))
            .collect();
        if !self.noise.fixed {
            p.push("/params/noise".into());
        }
        p
    }

    /// The same model with its free hyperparameters set to exp(theta).
    pub fn with_theta(&self, theta: &[f64]) -> GaussianProcess {
        let k = self.kernel.theta().len();
        let mut out = self.clone();
        out.kernel = self.kernel.with_theta(&theta[..k]);
        if !self.noise.fixed {
            out.noise.value = theta[k].exp();
        }
        out
    }

    /// The log marginal likelihood of (normalised) targets `y` and its gradient with
    /// respect to theta (R&W Alg. 2.1 and eq. 5.9): one strict Cholesky (no jitter; a
    /// matrix that is not positive definite gives None, and the search steps back), the
    /// inverse formed once from the factor, and 1/2 tr((a a^T - K^-1) dK/dtheta_j) as a
    /// sum over the lower triangle.
    ///
    /// With t outputs (the columns of y) the likelihood and its gradient are summed over
    /// them: W = sum_k alpha_k alpha_k^T - t K^-1.
    pub fn log_marginal_likelihood(&self, x: &Points, y: &DMatrix<f64>, par: Parallelism) -> Option<(f64, Vec<f64>)> {
        let n = x.n();
        let (mut k, dks) = self.kernel.gram_with_gradient(x, par);
        for i in 0..n {
            k[(i, i)] += self.noise_at(i);
        }
        let chol = Cholesky::factor(k, par).ok()?;
        let mut alpha = y.clone();
        chol.solve_columns_in_place(&mut alpha, par);
        let lml = log_marginal_likelihood_of(y, &alpha, &chol);
        // W = alpha alpha^T - K^-1, lower triangle, off-diagonal entries doubled: then
        // 1/2 tr(W dK) = 1/2 sum_{i >= j} W'_ij dK_ij for symmetric dK.
        let mut w = chol.inverse_lower(par);
        let t = alpha.ncols();
        // alpha row-major, so that row i's t values are adjacent.
        let a = alpha.transpose();
        let a = a.as_slice();
        let tf = t as f64;
        let aa = |i: usize, j: usize| -> f64 {
            a[i * t..(i + 1) * t].iter().zip(&a[j * t..(j + 1) * t]).map(|(p, q)| p * q).sum()
        };
        let w_column = |(j, wc): (usize, &mut [f64])| {
            wc[j] = aa(j, j) - tf * wc[j];
            for (i, w) in wc.iter_mut().enumerate().skip(j + 1) {
                *w = 2.0 * (aa(i, j) - tf * *w);
            }
        };
        if par.is_parallel() {
            w.as_mut_slice().par_chunks_mut(n.max(1)).enumerate().for_each(w_column);
        } else {
            w.as_mut_slice().chunks_mut(n.max(1)).enumerate().for_each(w_column);
        }
        // Columns in parallel; each column's sum is then added in column order, so the
        // result does not depend on the number of threads (the search's path must not).
        let column_dots = |d: &DMatrix<f64>| -> Vec<f64> {
            let dot = |(j, (wc, dc)): (usize, (&[f64], &[f64]))| -> f64 {
                wc[j..].iter().zip(&dc[j..]).map(|(a, b)| a * b).sum::<f64>()
            };
            let columns = w.as_slice().chunks(n.max(1)).zip(d.as_slice().chunks(n.max(1)));
            if par.is_parallel() {
                columns.collect::<Vec<_>>().into_par_iter().enumerate().map(dot).collect()
            } else {
                columns.enumerate().map(dot).collect()
            }
        };
        let lower_dot = |d: &DMatrix<f64>| -> f64 {
            let mut acc = 0.0;
            for c in column_dots(d) {
                acc += c;
            }
            0.5 * acc
        };
        let mut grad: Vec<f64> = dks.iter().map(lower_dot).collect();
        if !self.noise.fixed {
            // dK/dlog(noise) = noise I.
            grad.push(0.5 * self.noise.value * (0..n).map(|i| w[(i, i)]).sum::<f64>());
        }
        Some((lml, grad))
    }

    /// Maximises the log marginal likelihood from theta and `restarts` more starts drawn
    /// log-uniformly within the bounds from `seed`; returns the best model and a report.
    pub(super) fn optimise(
        &self,
        x: &Points,
        y: &DMatrix<f64>,
        ctx: &FitContext,
    ) -> Result<(GaussianProcess, TrainingReport), FitError> {
        let search = crate::estimator::HyperSearch {
            theta: self.theta(),
            bounds: self.theta_bounds(),
            pointers: self.theta_pointers(),
            restarts: self.restarts,
            seed: self.seed,
        };
        let (theta, report) = search.maximise(ctx, |t| self.with_theta(t).log_marginal_likelihood(x, y, ctx.par))?;
        Ok((self.with_theta(&theta), report))
    }
}

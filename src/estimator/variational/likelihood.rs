//! The likelihoods of a variational GP: each row's expected log likelihood under the
//! latent's Gaussian marginal N(mu, var), its derivatives, and the predictive
//! distribution. What the fit needs of a row:
//!
//! - `e` = E[log p(y | f)];
//! - `g` = de/dmu and `h` = de/dvar, exactly (the gradient the hyperparameters follow);
//! - `h_nat`, the curvature the natural-gradient step on q(u) uses: 1/2 E[d^2 log p/df^2]
//!   (Price's theorem; equal to `h` in expectation, and never positive for log-concave
//!   likelihoods, which keeps the precision positive definite);
//! - the derivatives with respect to the likelihood's own parameters (log scale).
//!
//! Closed forms where they exist (gaussian, poisson); Gauss-Hermite quadrature with 20
//! nodes otherwise (student_t, bernoulli), as GPyTorch; softmax by Monte Carlo over given
//! standard-normal draws (GPyTorch's `SoftmaxLikelihood` samples; here the draws are the
//! seeded caller's, so that a fit is reproducible).

use super::quadrature;
use crate::kernel::hyper::Hyper;
use std::f64::consts::PI;

/// The likelihood's name in the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LikelihoodKind {
    Gaussian,
    StudentT,
    Poisson,
    Bernoulli,
    Softmax,
}

impl LikelihoodKind {
    pub const ALL: [LikelihoodKind; 5] = [
        LikelihoodKind::Gaussian,
        LikelihoodKind::StudentT,
        LikelihoodKind::Poisson,
        LikelihoodKind::Bernoulli,
        LikelihoodKind::Softmax,
    ];

    pub fn name(self) -> &'static str {
        match self {
            LikelihoodKind::Gaussian => "gaussian",
            LikelihoodKind::StudentT => "student_t",
            LikelihoodKind::Poisson => "poisson",
            LikelihoodKind::Bernoulli => "bernoulli",
            LikelihoodKind::Softmax => "softmax",
        }
    }

    pub fn from_name(name: &str) -> Option<LikelihoodKind> {
        LikelihoodKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// For classification (bernoulli, softmax), else regression.
    pub fn classifies(self) -> bool {
        matches!(self, LikelihoodKind::Bernoulli | LikelihoodKind::Softmax)
    }
}

/// Default bounds of a variational fit's noise (a smaller noise makes q(u)'s precision
/// as ill-conditioned as an exact GP without jitter).
pub const NOISE_BOUNDS: (f64, f64) = (1e-6, 1e5);
/// Default bounds of the Student-t degrees of freedom (above 2, where y has a variance).
pub const DF_BOUNDS: (f64, f64) = (2.001, 1e3);

/// A likelihood with its parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Likelihood {
    pub kind: LikelihoodKind,
    /// gaussian: the noise variance; student_t: the squared scale. Unused otherwise.
    pub noise: Hyper,
    /// student_t: the degrees of freedom. Unused otherwise.
    pub df: Hyper,
    /// Latent functions: the classes for softmax, else 1.
    pub latents: usize,
}

/// A softmax row's derivatives, one entry per latent.
#[derive(Debug, Clone, Default)]
pub struct LatentTerms {
    pub g: Vec<f64>,
    pub h: Vec<f64>,
    pub h_nat: Vec<f64>,
}

impl LatentTerms {
    pub fn new(latents: usize) -> LatentTerms {
        LatentTerms { g: vec![0.0; latents], h: vec![0.0; latents], h_nat: vec![0.0; latents] }
    }
}

/// One row's terms for one latent (or, for softmax, per latent in slices).
#[derive(Debug, Clone, Copy, Default)]
pub struct Row {
    pub e: f64,
    pub g: f64,
    pub h: f64,
    pub h_nat: f64,
    /// de/dtheta for the likelihood's free parameters, in [`Likelihood::theta`]'s order.
    pub dtheta: [f64; 2],
}

impl Likelihood {
    pub fn new(kind: LikelihoodKind, noise: Hyper, df: Hyper, latents: usize) -> Likelihood {
        Likelihood { kind, noise, df, latents }
    }

    /// Whether the noise takes part (gaussian, student_t).
    fn has_noise(&self) -> bool {
        matches!(self.kind, LikelihoodKind::Gaussian | LikelihoodKind::StudentT)
    }

    /// The free parameters in log space: log noise (gaussian, student_t), then
    /// log(df - 2) (student_t), each unless fixed.
    pub fn theta(&self) -> Vec<f64> {
        let mut t = Vec::new();
        if self.has_noise() && !self.noise.fixed {
            t.push(self.noise.value.ln());
        }
        if self.kind == LikelihoodKind::StudentT && !self.df.fixed {
            t.push((self.df.value - 2.0).ln());
        }
        t
    }

    pub fn theta_bounds(&self) -> Vec<(f64, f64)> {
        let mut b = Vec::new();
        if self.has_noise() && !self.noise.fixed {
            let (lo, hi) = self.noise.bounds_or(NOISE_BOUNDS);
            b.push((lo.ln(), hi.ln()));
        }
        if self.kind == LikelihoodKind::StudentT && !self.df.fixed {
            let (lo, hi) = self.df.bounds_or(DF_BOUNDS);
            b.push(((lo - 2.0).max(1e-12).ln(), (hi - 2.0).ln()));
        }
        b
    }

    pub fn set_theta(&mut self, theta: &[f64]) {
        let mut at = 0;
        if self.has_noise() && !self.noise.fixed {
            self.noise.value = theta[at].exp();
            at += 1;
        }
        if self.kind == LikelihoodKind::StudentT && !self.df.fixed {
            self.df.value = 2.0 + theta[at].exp();
        }
    }

    /// Which of [`Row::dtheta`]'s two slots the free parameters are.
    fn slots(&self) -> (Option<usize>, Option<usize>) {
        let noise = (self.has_noise() && !self.noise.fixed).then_some(0);
        let df = (self.kind == LikelihoodKind::StudentT && !self.df.fixed).then_some(usize::from(noise.is_some()));
        (noise, df)
    }

    /// One row of a single-latent likelihood (not softmax): target `y`, marginal
    /// N(mu, var).
    pub fn row(&self, y: f64, mu: f64, var: f64) -> Row {
        let var = var.max(0.0);
        let (noise_slot, df_slot) = self.slots();
        let mut out = Row::default();
        match self.kind {
            LikelihoodKind::Gaussian => {
                let s = self.noise.value;
                let r = y - mu;
                let q = (r * r + var) / s;
                out.e = -0.5 * (2.0 * PI * s).ln() - 0.5 * q;
                out.g = r / s;
                out.h = -0.5 / s;
                out.h_nat = out.h;
                if let Some(i) = noise_slot {
                    out.dtheta[i] = -0.5 + 0.5 * q;
                }
            }
            LikelihoodKind::Poisson => {
                let ex = (mu + 0.5 * var).exp();
                out.e = y * mu - ex - libm::lgamma(y + 1.0);
                out.g = y - ex;
                out.h = -0.5 * ex;
                out.h_nat = out.h;
            }
            LikelihoodKind::StudentT => {
                let (nu, s) = (self.df.value, self.noise.value);
                let constant = libm::lgamma(0.5 * (nu + 1.0)) - libm::lgamma(0.5 * nu) - 0.5 * (PI * nu * s).ln();
                let dconst_dnu = 0.5 * digamma(0.5 * (nu + 1.0)) - 0.5 * digamma(0.5 * nu) - 0.5 / nu;
                quadrature_row(&mut out, mu, var, |f| {
                    let r = y - f;
                    let q = r * r / (nu * s);
                    let log_p = constant - 0.5 * (nu + 1.0) * q.ln_1p();
                    let d1 = (nu + 1.0) * r / (nu * s + r * r);
                    let d2 = (nu + 1.0) * (r * r - nu * s) / (nu * s + r * r).powi(2);
                    let dlog_s = -0.5 + 0.5 * (nu + 1.0) * q / (1.0 + q);
                    let dnu = dconst_dnu - 0.5 * q.ln_1p() + 0.5 * (nu + 1.0) * q / (nu * (1.0 + q));
                    let mut d = [0.0; 2];
                    if let Some(i) = noise_slot {
                        d[i] = dlog_s;
                    }
                    if let Some(i) = df_slot {
                        d[i] = dnu * (nu - 2.0);
                    }
                    (log_p, d1, d2, d)
                });
            }
            LikelihoodKind::Bernoulli => {
                // Probit: p(y = 1 | f) = Phi(f), as GPyTorch's and GPflow's Bernoulli.
                let sign = if y > 0.5 { 1.0 } else { -1.0 };
                quadrature_row(&mut out, mu, var, |f| {
                    let t = sign * f;
                    let lambda = inverse_mills(t);
                    (log_ndtr(t), sign * lambda, -lambda * (t + lambda), [0.0; 2])
                });
            }
            LikelihoodKind::Softmax => unreachable!("softmax rows go through Likelihood::softmax_row"),
        }
        out
    }

    /// One row of the softmax likelihood over `latents` classes: class `y`, marginals
    /// N(mu[c], var[c]), and `draws` (S x C standard normals, row-major). Writes each
    /// latent's g, h and h_nat into `out`; returns e.
    pub fn softmax_row(&self, y: usize, mu: &[f64], var: &[f64], draws: &[f64], out: &mut LatentTerms) -> f64 {
        let LatentTerms { g, h, h_nat } = out;
        let c = self.latents;
        let samples = draws.len() / c;
        let sd: Vec<f64> = var.iter().map(|v| v.max(0.0).sqrt()).collect();
        g.iter_mut().chain(h.iter_mut()).chain(h_nat.iter_mut()).for_each(|v| *v = 0.0);
        let mut e = 0.0;
        let mut f = vec![0.0; c];
        for s in 0..samples {
            let eps = &draws[s * c..(s + 1) * c];
            for k in 0..c {
                f[k] = mu[k] + sd[k] * eps[k];
            }
            let top = f.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let total: f64 = f.iter().map(|v| (v - top).exp()).sum();
            let lse = top + total.ln();
            e += f[y] - lse;
            for k in 0..c {
                let p = (f[k] - lse).exp();
                let d = f64::from(u8::from(k == y)) - p;
                g[k] += d;
                // d f_k / d var_k = eps_k / (2 sd_k).
                h[k] += if sd[k] > 0.0 { d * eps[k] / (2.0 * sd[k]) } else { 0.0 };
                h_nat[k] -= 0.5 * p * (1.0 - p);
            }
        }
        let inv = 1.0 / samples as f64;
        for k in 0..c {
            g[k] *= inv;
            h[k] *= inv;
            h_nat[k] *= inv;
        }
        e * inv
    }

    /// The predictive mean and variance of y (or, for poisson, of the rate) at a latent
    /// marginal N(mu, var); `include_noise` adds the observation noise (gaussian) or the
    /// counts' own variance (poisson). Student-t's variance is always y's.
    pub fn predictive(&self, mu: f64, var: f64, include_noise: bool) -> (f64, f64) {
        let var = var.max(0.0);
        match self.kind {
            LikelihoodKind::Gaussian => (mu, var + if include_noise { self.noise.value } else { 0.0 }),
            LikelihoodKind::StudentT => {
                let nu = self.df.value;
                (mu, var + self.noise.value * nu / (nu - 2.0))
            }
            LikelihoodKind::Poisson => {
                let mean = (mu + 0.5 * var).exp();
                let rate_var = var.exp_m1() * (2.0 * mu + var).exp();
                (mean, rate_var + if include_noise { mean } else { 0.0 })
            }
            LikelihoodKind::Bernoulli => (ndtr(mu / (1.0 + var).sqrt()), 0.0),
            LikelihoodKind::Softmax => unreachable!("softmax predicts through its draws"),
        }
    }
}

/// Fills `out` from a quadrature over N(mu, var) of `at(f) = (log p, d/df, d2/df2,
/// d/dtheta)`: e and the likelihood derivatives averaged, g = E[d log p/df], h the exact
/// derivative of the quadrature sum in var, h_nat = E[d2 log p/df2] / 2.
fn quadrature_row(out: &mut Row, mu: f64, var: f64, at: impl Fn(f64) -> (f64, f64, f64, [f64; 2])) {
    let rule = quadrature::standard();
    let sd = var.sqrt();
    for (e, w) in rule.points.iter().zip(&rule.weights) {
        let (log_p, d1, d2, d) = at(mu + sd * e);
        out.e += w * log_p;
        out.g += w * d1;
        if sd > 0.0 {
            out.h += w * d1 * e / (2.0 * sd);
        }
        out.h_nat += 0.5 * w * d2;
        out.dtheta[0] += w * d[0];
        out.dtheta[1] += w * d[1];
    }
    if sd == 0.0 {
        // The derivative in var at var = 0 is the curvature's half (Price).
        out.h = out.h_nat;
    }
}

/// The standard normal distribution function.
pub fn ndtr(t: f64) -> f64 {
    0.5 * libm::erfc(-t / std::f64::consts::SQRT_2)
}

/// log Phi(t), accurate far into the lower tail.
pub fn log_ndtr(t: f64) -> f64 {
    if t > -30.0 {
        ndtr(t).ln()
    } else {
        // log phi(t) + log R(-t), R the Mills ratio, by its asymptotic series.
        -0.5 * t * t - 0.5 * (2.0 * PI).ln() + mills_ratio(-t).ln()
    }
}

/// phi(t) / Phi(t), the inverse Mills ratio of the lower tail.
pub fn inverse_mills(t: f64) -> f64 {
    if t > -30.0 {
        let phi = (-0.5 * t * t).exp() / (2.0 * PI).sqrt();
        phi / ndtr(t)
    } else {
        1.0 / mills_ratio(-t)
    }
}

/// Phi(-x) / phi(x) for large x: 1/x (1 - 1/x^2 + 3/x^4 - 15/x^6 + 105/x^8 - 945/x^10).
fn mills_ratio(x: f64) -> f64 {
    let u = 1.0 / (x * x);
    (1.0 - u * (1.0 - 3.0 * u * (1.0 - 5.0 * u * (1.0 - 7.0 * u * (1.0 - 9.0 * u))))) / x
}

/// The digamma function for x > 0: the recurrence up to x >= 6, then the asymptotic series.
pub fn digamma(mut x: f64) -> f64 {
    let mut acc = 0.0;
    while x < 6.0 {
        acc -= 1.0 / x;
        x += 1.0;
    }
    let u = 1.0 / (x * x);
    acc + x.ln() - 0.5 / x - u * (1.0 / 12.0 - u * (1.0 / 120.0 - u * (1.0 / 252.0 - u * (1.0 / 240.0 - u / 132.0))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lik(kind: LikelihoodKind) -> Likelihood {
        let latents = if kind == LikelihoodKind::Softmax { 3 } else { 1 };
        Likelihood::new(kind, Hyper::new(0.3), Hyper::new(3.5), latents)
    }

    /// g, h and the likelihood parameters' derivatives against central differences of e;
    /// h_nat against the second derivative of a fine quadrature.
    #[test]
    fn row_derivatives_match_finite_differences() {
        for kind in
            [LikelihoodKind::Gaussian, LikelihoodKind::StudentT, LikelihoodKind::Poisson, LikelihoodKind::Bernoulli]
        {
            let base = lik(kind);
            let y = match kind {
                LikelihoodKind::Poisson => 3.0,
                LikelihoodKind::Bernoulli => 1.0,
                _ => 0.7,
            };
            for (mu, var) in [(0.2, 0.5), (-1.3, 0.05), (2.0, 1.7)] {
                let r = base.row(y, mu, var);
                let h = 1e-6;
                let fd_mu = (base.row(y, mu + h, var).e - base.row(y, mu - h, var).e) / (2.0 * h);
                let fd_var = (base.row(y, mu, var + h).e - base.row(y, mu, var - h).e) / (2.0 * h);
                assert!((r.g - fd_mu).abs() < 1e-6 * fd_mu.abs().max(1.0), "{kind:?} g {} vs {fd_mu}", r.g);
                assert!((r.h - fd_var).abs() < 1e-6 * fd_var.abs().max(1.0), "{kind:?} h {} vs {fd_var}", r.h);
                // h_nat is E[d2 log p / df2] / 2 = de/dvar in exact arithmetic; the two
                // quadratures agree closely where log p is smooth on the Gaussian's scale
                // (Student-t's bend within a scale of 0.55 is not, for 20 nodes).
                let tol = if kind == LikelihoodKind::StudentT { 0.05 } else { 1e-3 };
                assert!((r.h_nat - r.h).abs() < tol * r.h.abs().max(1e-3), "{kind:?} h_nat {} vs h {}", r.h_nat, r.h);
                if kind != LikelihoodKind::StudentT {
                    assert!(r.h_nat <= 0.0, "{kind:?} is log-concave");
                }
                let theta = base.theta();
                for j in 0..theta.len() {
                    let at = |d: f64| {
                        let mut t = theta.clone();
                        t[j] += d;
                        let mut l = base.clone();
                        l.set_theta(&t);
                        l.row(y, mu, var).e
                    };
                    let fd = (at(h) - at(-h)) / (2.0 * h);
                    assert!(
                        (r.dtheta[j] - fd).abs() < 1e-6 * fd.abs().max(1.0),
                        "{kind:?} theta {j}: {} vs {fd}",
                        r.dtheta[j]
                    );
                }
            }
        }
    }

    #[test]
    fn softmax_gradients_match_finite_differences_of_the_same_draws() {
        let l = lik(LikelihoodKind::Softmax);
        let mut rng = crate::optimize::SplitMix64::new(4);
        let draws: Vec<f64> = (0..16 * 3).map(|_| rng.normal()).collect();
        let (mu, var) = ([0.3, -0.8, 1.1], [0.4, 1.2, 0.05]);
        let e = |mu: &[f64], var: &[f64]| l.softmax_row(2, mu, var, &draws, &mut LatentTerms::new(3));
        let mut terms = LatentTerms::new(3);
        l.softmax_row(2, &mu, &var, &draws, &mut terms);
        let LatentTerms { g, h, h_nat: hn } = terms;
        for k in 0..3 {
            let d = 1e-6;
            let (mut up, mut down) = (mu, mu);
            up[k] += d;
            down[k] -= d;
            let fd = (e(&up, &var) - e(&down, &var)) / (2.0 * d);
            assert!((g[k] - fd).abs() < 1e-7, "g {k}: {} vs {fd}", g[k]);
            let (mut up, mut down) = (var, var);
            up[k] += d;
            down[k] -= d;
            let fd = (e(&mu, &up) - e(&mu, &down)) / (2.0 * d);
            assert!((h[k] - fd).abs() < 1e-6, "h {k}: {} vs {fd}", h[k]);
            assert!(hn[k] <= 0.0);
        }
    }

    #[test]
    fn special_functions() {
        // digamma is the derivative of lgamma.
        for x in [0.3, 1.0, 2.5, 7.0, 40.0] {
            let fd = (libm::lgamma(x + 1e-6) - libm::lgamma(x - 1e-6)) / 2e-6;
            assert!((digamma(x) - fd).abs() < 1e-7, "digamma({x}) {} vs {fd}", digamma(x));
        }
        // log Phi and the inverse Mills ratio join their tail forms continuously.
        for t in [-29.999, -30.001] {
            assert!((log_ndtr(t) - log_ndtr(-30.0)).abs() < 0.031, "{t}");
        }
        let fd = (log_ndtr(-30.0 + 1e-5) - log_ndtr(-30.0 - 1e-5)) / 2e-5;
        assert!((inverse_mills(-30.0) - fd).abs() < 1e-4 * fd, "{} vs {fd}", inverse_mills(-30.0));
        let fd = (log_ndtr(-35.0 + 1e-5) - log_ndtr(-35.0 - 1e-5)) / 2e-5;
        assert!((inverse_mills(-35.0) - fd).abs() < 1e-6 * fd, "{} vs {fd}", inverse_mills(-35.0));
        assert!(log_ndtr(-40.0).is_finite() && inverse_mills(-40.0) > 40.0);
    }
}

//! Log expected improvement and its gradient, computed without losing the far tail.
//!
//! With the surrogate's mean mu and standard deviation s at a point and the best value
//! so far f* (everything in the "greater is better" orientation), the expected
//! improvement is EI = s h(z), z = (mu - f*) / s, h(z) = phi(z) + z Phi(z). Far below
//! f* (z << 0) EI underflows to 0 while its logarithm is still informative; an optimiser
//! that sees a flat 0 cannot climb. So we work with log EI = log s + log h(z), with
//! log h evaluated as Ament et al. (2023, "Unexpected improvements to expected
//! improvement", eq. 9) do:
//! - z > -1: log(phi(z) + z Phi(z)) directly;
//! - -1/sqrt(eps) < z <= -1: -z^2/2 - log(2 pi)/2 + log1mexp(log(erfcx(-z/sqrt 2) |z|)
//!   + log(pi/2)/2), where erfcx(x) = exp(x^2) erfc(x) keeps the ratio Phi/phi exact;
//! - beyond: the asymptote -z^2/2 - log(2 pi)/2 - 2 log|z|.
//!
//! d log h / dz = Phi(z) / h(z), which is exp(log Phi(z) - log h(z)) and stays finite
//! wherever log h does.

use std::f64::consts::{FRAC_1_SQRT_2, PI};

const LN_SQRT_2PI: f64 = 0.918_938_533_204_672_8;

/// erfc(x) exp(x^2), for x >= 0 (and by reflection below): accurate where erfc
/// underflows. Below 2, from libm's erfc; above, the continued fraction
/// erfcx(x) = 1 / sqrt(pi) * 1 / (x + (1/2) / (x + 1 / (x + (3/2) / (x + ...)))),
/// evaluated backward with enough terms for double precision at x >= 2.
pub fn erfcx(x: f64) -> f64 {
    if x < 2.0 {
        if x < -26.0 {
            return f64::INFINITY;
        }
        return (x * x).exp() * libm::erfc(x);
    }
    let mut tail = 0.0;
    for k in (1..=60).rev() {
        tail = (k as f64 / 2.0) / (x + tail);
    }
    1.0 / (PI.sqrt() * (x + tail))
}

/// log Phi(z), the standard normal's log CDF, finite for every finite z.
pub fn log_ndtr(z: f64) -> f64 {
    if z > -1.0 {
        // Phi(z) = erfc(-z / sqrt 2) / 2, well away from underflow here.
        (0.5 * libm::erfc(-z * FRAC_1_SQRT_2)).ln()
    } else {
        // Phi(z) = phi(z) sqrt(pi / 2) erfcx(-z / sqrt 2).
        -0.5 * z * z - LN_SQRT_2PI + (0.5 * PI).sqrt().ln() + erfcx(-z * FRAC_1_SQRT_2).ln()
    }
}

/// log Phi(z) and its derivative phi(z) / Phi(z), finite for every finite z.
pub fn log_ndtr_with_derivative(z: f64) -> (f64, f64) {
    let lp = log_ndtr(z);
    (lp, (-0.5 * z * z - LN_SQRT_2PI - lp).exp())
}

/// log(1 - e^a) for a < 0 (Maechler's rule: expm1 near 0, log1p below log 2).
fn log1mexp(a: f64) -> f64 {
    if a > -std::f64::consts::LN_2 {
        (-a.exp_m1()).ln()
    } else {
        (-a.exp()).ln_1p()
    }
}

/// log h(z), h(z) = phi(z) + z Phi(z) (the expected improvement of a unit normal over
/// its mean minus z).
pub fn log_h(z: f64) -> f64 {
    if z > -1.0 {
        let phi = (-0.5 * z * z - LN_SQRT_2PI).exp();
        let cdf = 0.5 * libm::erfc(-z * FRAC_1_SQRT_2);
        (phi + z * cdf).ln()
    } else if z > -1.0 / f64::EPSILON.sqrt() {
        let u = -z;
        let inner = (erfcx(u * FRAC_1_SQRT_2) * u).ln() + 0.5 * (0.5 * PI).ln();
        -0.5 * z * z - LN_SQRT_2PI + log1mexp(inner)
    } else {
        -0.5 * z * z - LN_SQRT_2PI - 2.0 * (-z).ln()
    }
}

/// d log h / dz = Phi(z) / h(z).
pub fn dlog_h(z: f64) -> f64 {
    (log_ndtr(z) - log_h(z)).exp()
}

/// Log expected improvement over `best` of a normal with mean `mu` and standard
/// deviation `sd` (> 0), and its derivatives with respect to mu and sd.
pub fn log_ei(mu: f64, sd: f64, best: f64) -> (f64, f64, f64) {
    let z = (mu - best) / sd;
    let g = dlog_h(z);
    // d/dmu = g / sd; d/dsd = 1/sd - g z / sd.
    (sd.ln() + log_h(z), g / sd, (1.0 - g * z) / sd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_h_is_continuous_across_its_branches_and_matches_the_direct_form() {
        for z in [-1.0 - 1e-12, -1.0, -1.0 + 1e-12] {
            let direct = {
                let phi = (-0.5 * z * z - LN_SQRT_2PI).exp();
                (phi + z * 0.5 * libm::erfc(-z * FRAC_1_SQRT_2)).ln()
            };
            assert!((log_h(z) - direct).abs() < 1e-9, "z = {z}: {} against {direct}", log_h(z));
        }
        let edge = -1.0 / f64::EPSILON.sqrt();
        let (a, b) = (log_h(edge * (1.0 - 1e-9)), log_h(edge * (1.0 + 1e-9)));
        assert!((a - b).abs() / a.abs() < 1e-6, "{a} {b}");
        // Far out it is finite where h itself underflows.
        let far = log_h(-60.0);
        assert!(far.is_finite() && far < -1800.0 && far > -1820.0, "{far}");
    }

    #[test]
    fn erfcx_matches_exp_x2_erfc_where_both_are_accurate_and_its_asymptote_far_out() {
        for x in [0.0f64, 0.3, 1.0, 1.999, 2.0, 2.5, 4.0, 6.0] {
            let direct = (x * x).exp() * libm::erfc(x);
            assert!((erfcx(x) - direct).abs() / direct < 1e-13, "x = {x}: {} against {direct}", erfcx(x));
        }
        // erfcx(x) ~ 1 / (x sqrt(pi)) (1 - 1 / (2 x^2)).
        let x = 1e4;
        let asym = 1.0 / (x * PI.sqrt()) * (1.0 - 0.5 / (x * x));
        assert!((erfcx(x) - asym).abs() / asym < 1e-12);
    }

    #[test]
    fn the_derivatives_match_finite_differences() {
        for (mu, sd, best) in [(0.3, 0.7, 0.1), (-2.0, 0.2, 1.0), (-40.0, 0.5, 1.0), (1.0, 2.0, -3.0)] {
            let (_, dmu, dsd) = log_ei(mu, sd, best);
            let h = 1e-6;
            let fd_mu = (log_ei(mu + h, sd, best).0 - log_ei(mu - h, sd, best).0) / (2.0 * h);
            let fd_sd = (log_ei(mu, sd + h, best).0 - log_ei(mu, sd - h, best).0) / (2.0 * h);
            assert!((dmu - fd_mu).abs() <= 1e-5 * (1.0 + fd_mu.abs()), "d/dmu {dmu} against {fd_mu}");
            assert!((dsd - fd_sd).abs() <= 1e-5 * (1.0 + fd_sd.abs()), "d/dsd {dsd} against {fd_sd}");
        }
    }
}

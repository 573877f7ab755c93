//! Gauss-Hermite quadrature for expectations over one Gaussian, E[f(mu + sigma e)] with
//! e ~ N(0, 1): sum_k w_k / sqrt(pi) f(mu + sqrt(2) sigma x_k) over the nodes x_k and
//! weights w_k of the weight exp(-x^2). 20 nodes, as GPyTorch's
//! `GaussHermiteQuadrature1D` and numpy's `hermgauss(20)`, so that expected log
//! likelihoods agree with GPyTorch's to round-off.

use std::sync::OnceLock;

/// Nodes used for every one-dimensional expectation.
pub const NODES: usize = 20;

/// The rule for N(0, 1): points e_k = sqrt(2) x_k and weights w_k / sqrt(pi), so that
/// E[f(e)] ~ sum_k weight_k f(e_k).
pub struct Rule {
    pub points: [f64; NODES],
    pub weights: [f64; NODES],
}

/// The standard-normal rule, computed once.
pub fn standard() -> &'static Rule {
    static RULE: OnceLock<Rule> = OnceLock::new();
    RULE.get_or_init(|| {
        let (x, w) = hermite(NODES);
        let mut rule = Rule { points: [0.0; NODES], weights: [0.0; NODES] };
        for k in 0..NODES {
            rule.points[k] = std::f64::consts::SQRT_2 * x[k];
            rule.weights[k] = w[k] / std::f64::consts::PI.sqrt();
        }
        rule
    })
}

/// Nodes (ascending) and weights of n-point Gauss-Hermite quadrature for the weight
/// exp(-x^2): Newton's iteration on the orthonormal Hermite recurrence from the usual
/// starting guesses (Numerical Recipes' `gauher`), to full precision.
pub fn hermite(n: usize) -> (Vec<f64>, Vec<f64>) {
    let pim4 = std::f64::consts::PI.powf(-0.25);
    let mut x = vec![0.0; n];
    let mut w = vec![0.0; n];
    let nf = n as f64;
    let mut z = 0.0f64;
    for i in 0..n.div_ceil(2) {
        z = match i {
            0 => (2.0 * nf + 1.0).sqrt() - 1.85575 * (2.0 * nf + 1.0).powf(-0.16667),
            1 => z - 1.14 * nf.powf(0.426) / z,
            2 => 1.86 * z - 0.86 * x[n - 1],
            3 => 1.91 * z - 0.91 * x[n - 2],
            _ => 2.0 * z - x[n + 1 - i],
        };
        let mut pp = 0.0;
        for _ in 0..100 {
            let (mut p1, mut p2) = (pim4, 0.0);
            for j in 0..n {
                let p3 = p2;
                p2 = p1;
                let jf = j as f64;
                p1 = z * (2.0 / (jf + 1.0)).sqrt() * p2 - (jf / (jf + 1.0)).sqrt() * p3;
            }
            pp = (2.0 * nf).sqrt() * p2;
            let z1 = z;
            z = z1 - p1 / pp;
            if (z - z1).abs() <= 1e-15 * z.abs().max(1.0) {
                break;
            }
        }
        // Largest first: x[n - 1 - i] = z, x[i] = -z.
        x[n - 1 - i] = z;
        x[i] = -z;
        w[n - 1 - i] = 2.0 / (pp * pp);
        w[i] = w[n - 1 - i];
    }
    (x, w)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rule integrates the normal's moments exactly up to degree 2n - 1.
    #[test]
    fn integrates_normal_moments() {
        let r = standard();
        let moment = |p: i32| r.points.iter().zip(&r.weights).map(|(e, w)| w * e.powi(p)).sum::<f64>();
        // E[e^0] = 1, E[e^2] = 1, E[e^4] = 3, E[e^6] = 15, E[e^8] = 105; odd moments 0.
        for (p, want) in [(0, 1.0), (2, 1.0), (4, 3.0), (6, 15.0), (8, 105.0), (10, 945.0)] {
            assert!((moment(p) - want).abs() < 1e-12 * want, "E[e^{p}] = {}", moment(p));
        }
        for p in [1, 3, 5, 7] {
            assert!(moment(p).abs() < 1e-12, "E[e^{p}] = {}", moment(p));
        }
        // E[exp(e)] = exp(1/2).
        let m: f64 = r.points.iter().zip(&r.weights).map(|(e, w)| w * e.exp()).sum();
        assert!((m - 0.5f64.exp()).abs() < 1e-14);
    }
}

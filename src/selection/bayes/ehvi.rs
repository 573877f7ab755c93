//! Expected hypervolume improvement for two objectives, in closed form, in logs.
//!
//! Everything here is in minimisation units. The region a new point y would add to the
//! dominated hypervolume is cut into boxes [l, u) (l may be -inf), disjoint and axis-
//! aligned; a box's share of the improvement is prod_j max(0, u_j - max(l_j, y_j)). With
//! independent normal predictions Y_j ~ N(mu_j, s_j^2) each factor's expectation is
//! g_j(u_j) - g_j(l_j), g(a) = E[max(0, a - Y)] = s h((a - mu) / s), h(z) = phi(z) + z
//! Phi(z) (Emmerich et al. 2016; Yang et al. 2019's box decomposition). The logarithm is
//! kept throughout (log h as log EI keeps it, [`super::acquisition`]) so that the
//! acquisition's optimiser still climbs where the improvement underflows.

use super::acquisition::{log_h, log_ndtr};

const LN_SQRT_2PI: f64 = 0.918_938_533_204_672_8;

/// A box of the non-dominated region: lower and upper corners.
pub type Cell = ([f64; 2], [f64; 2]);

/// The boxes covering what a new point can add to the hypervolume of `front` (mutually
/// non-dominated points, each below `reference` in both objectives) against `reference`.
pub fn cells(front: &[[f64; 2]], reference: [f64; 2]) -> Vec<Cell> {
    let mut p: Vec<[f64; 2]> = front.iter().filter(|q| q[0] < reference[0] && q[1] < reference[1]).copied().collect();
    p.sort_by(|a, b| a[0].total_cmp(&b[0]));
    let mut out = Vec::with_capacity(p.len() + 1);
    let mut ceiling = reference[1];
    let mut left = f64::NEG_INFINITY;
    for q in &p {
        out.push(([left, f64::NEG_INFINITY], [q[0], ceiling]));
        left = q[0];
        ceiling = ceiling.min(q[1]);
    }
    out.push(([left, f64::NEG_INFINITY], [reference[0], ceiling]));
    out.retain(|(l, u)| u[0] > l[0] && u[1] > l[1]);
    out
}

/// log(1 - e^a), a <= 0.
fn log1mexp(a: f64) -> f64 {
    if a > -std::f64::consts::LN_2 {
        (-a.exp_m1()).ln()
    } else {
        (-a.exp()).ln_1p()
    }
}

/// One factor: log(g(u) - g(l)) and its derivatives with respect to mu and s.
fn factor(mu: f64, s: f64, l: f64, u: f64) -> (f64, f64, f64) {
    let zu = (u - mu) / s;
    let log_gu = s.ln() + log_h(zu);
    let log_phi_u = -0.5 * zu * zu - LN_SQRT_2PI;
    let log_cdf_u = log_ndtr(zu);
    if l == f64::NEG_INFINITY {
        // g(u) alone: dg/dmu = -Phi(zu), dg/ds = phi(zu).
        return (log_gu, -(log_cdf_u - log_gu).exp(), (log_phi_u - log_gu).exp());
    }
    let zl = (l - mu) / s;
    let log_gl = s.ln() + log_h(zl);
    let log_d = log_gu + log1mexp((log_gl - log_gu).min(0.0));
    let log_cdf_l = log_ndtr(zl);
    let log_phi_l = -0.5 * zl * zl - LN_SQRT_2PI;
    // Phi(zu) - Phi(zl) > 0 as u > l.
    let dmu = -(log_cdf_u + log1mexp((log_cdf_l - log_cdf_u).min(0.0)) - log_d).exp();
    let ds = (log_phi_u - log_d).exp() - (log_phi_l - log_d).exp();
    (log_d, dmu, ds)
}

/// log EHVI of a point whose two objectives are predicted N(mu_j, s_j^2), over `cells`,
/// and its derivatives with respect to mu and s. -inf without cells.
pub fn log_ehvi(mu: [f64; 2], s: [f64; 2], cells: &[Cell]) -> (f64, [f64; 2], [f64; 2]) {
    let terms: Vec<(f64, [f64; 2], [f64; 2])> = cells
        .iter()
        .map(|(l, u)| {
            let a = factor(mu[0], s[0], l[0], u[0]);
            let b = factor(mu[1], s[1], l[1], u[1]);
            // d log(A B) = d log A + d log B.
            (a.0 + b.0, [a.1, b.1], [a.2, b.2])
        })
        .collect();
    let top = terms.iter().map(|t| t.0).fold(f64::NEG_INFINITY, f64::max);
    if !top.is_finite() {
        return (top, [0.0; 2], [0.0; 2]);
    }
    let weights: Vec<f64> = terms.iter().map(|t| (t.0 - top).exp()).collect();
    let total: f64 = weights.iter().sum();
    let mut dmu = [0.0; 2];
    let mut ds = [0.0; 2];
    for (w, t) in weights.iter().zip(&terms) {
        for j in 0..2 {
            dmu[j] += w / total * t.1[j];
            ds[j] += w / total * t.2[j];
        }
    }
    (top + total.ln(), dmu, ds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimize::SplitMix64;
    use crate::study::pareto::hypervolume;

    /// The closed form against a Monte Carlo average of the hypervolume improvement, and
    /// its derivatives against finite differences.
    #[test]
    fn ehvi_matches_monte_carlo_and_its_gradient_finite_differences() {
        let front = [[0.2, 0.8], [0.5, 0.4], [0.9, 0.1]];
        let reference = [1.2, 1.1];
        let c = cells(&front, reference);
        // The cells tile the non-dominated region below the reference: their volume
        // inside [0, r] is the box's minus the front's hypervolume.
        let inside: f64 = c.iter().map(|(l, u)| (u[0] - l[0].max(0.0)) * (u[1] - l[1].max(0.0))).sum();
        let neg = |p: &[f64; 2]| vec![-p[0], -p[1]];
        let dominated = hypervolume(&front.iter().map(neg).collect::<Vec<_>>(), &neg(&reference));
        assert!((inside + dominated - reference[0] * reference[1]).abs() < 1e-12);
        let mut rng = SplitMix64::new(3);
        for (mu, s) in [([0.4, 0.5], [0.2, 0.3]), ([1.0, 1.0], [0.1, 0.1]), ([0.1, 0.2], [0.5, 0.05])] {
            let (a, dmu, ds) = log_ehvi(mu, s, &c);
            let draws = 200_000;
            let mut total = 0.0;
            for _ in 0..draws {
                let y = [mu[0] + s[0] * rng.normal(), mu[1] + s[1] * rng.normal()];
                let mut with: Vec<Vec<f64>> = front.iter().map(neg).collect();
                with.push(neg(&y));
                total += hypervolume(&with, &neg(&reference)) - dominated;
            }
            let mc = total / draws as f64;
            assert!((a.exp() - mc).abs() < 0.02 * mc + 1e-4, "{mu:?} {s:?}: {} against {mc}", a.exp());
            let h = 1e-6;
            for j in 0..2 {
                let (mut up, mut down) = (mu, mu);
                up[j] += h;
                down[j] -= h;
                let fd = (log_ehvi(up, s, &c).0 - log_ehvi(down, s, &c).0) / (2.0 * h);
                assert!((dmu[j] - fd).abs() < 1e-5 * (1.0 + fd.abs()), "d/dmu {} against {fd}", dmu[j]);
                let (mut up, mut down) = (s, s);
                up[j] += h;
                down[j] -= h;
                let fd = (log_ehvi(mu, up, &c).0 - log_ehvi(mu, down, &c).0) / (2.0 * h);
                assert!((ds[j] - fd).abs() < 1e-5 * (1.0 + fd.abs()), "d/ds {} against {fd}", ds[j]);
            }
        }
        // Far from improving, the logarithm stays finite.
        let (far, _, _) = log_ehvi([30.0, 30.0], [0.1, 0.1], &c);
        assert!(far.is_finite() && far < -1000.0, "{far}");
    }
}

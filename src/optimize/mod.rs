//! Bounded minimisation for hyperparameter searches: L-BFGS-B, as scipy's
//! `minimize(method="L-BFGS-B")` that scikit-learn's Gaussian processes use.
//!
//! The GP searches run in log-hyperparameter space, where every coordinate has bounds.
//! No maintained pure-Rust crate offers L-BFGS-B (argmin's L-BFGS is unbounded, the
//! `lbfgsb` crates wrap the Fortran), so this is ours: the algorithm of the reference
//! code step for step, so that from the same start it walks scikit-learn's path and
//! reaches the same optimum, with one difference in where it stops (see
//! [`Options::refine_ftol`]).

mod adam;
mod lbfgsb;
mod line_search;

pub use adam::Adam;
pub use lbfgsb::{minimize, projected_gradient_norm, Options, Outcome, Stop};

/// A small deterministic generator (splitmix64) for restart points: reproducible from
/// the request's `seed`, with no dependency.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [lo, hi).
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        let u = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        lo + u * (hi - lo)
    }

    /// A standard normal draw (Box-Muller, the cosine branch: two uniforms per draw).
    pub fn normal(&mut self) -> f64 {
        let u = self.uniform(f64::MIN_POSITIVE, 1.0);
        let v = self.uniform(0.0, 1.0);
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rosenbrock(x: &[f64]) -> Option<(f64, Vec<f64>)> {
        let (a, b) = (x[0], x[1]);
        let f = (1.0 - a).powi(2) + 100.0 * (b - a * a).powi(2);
        Some((f, vec![-2.0 * (1.0 - a) - 400.0 * a * (b - a * a), 200.0 * (b - a * a)]))
    }

    #[test]
    fn finds_the_rosenbrock_minimum_inside_wide_bounds() {
        let r = minimize(rosenbrock, &[-1.2, 1.0], &[(-5.0, 5.0), (-5.0, 5.0)], &Options::default()).unwrap();
        assert!(r.converged(), "{r:?}");
        assert!((r.x[0] - 1.0).abs() < 1e-3 && (r.x[1] - 1.0).abs() < 2e-3, "{r:?}");
        assert!(r.f < 1e-6);
    }

    #[test]
    fn stops_on_the_bound_when_the_minimum_is_outside() {
        // Rosenbrock with x0 <= 0.5: the constrained minimum is at (0.5, 0.25).
        let r = minimize(rosenbrock, &[-1.0, 2.0], &[(-2.0, 0.5), (-2.0, 2.0)], &Options::default()).unwrap();
        assert!(r.converged(), "{r:?}");
        assert!((r.x[0] - 0.5).abs() < 1e-9, "{r:?}");
        assert!((r.x[1] - 0.25).abs() < 1e-4, "{r:?}");
    }

    #[test]
    fn solves_a_bounded_quadratic_exactly() {
        // f = sum_i c_i (x_i - t_i)^2 with targets inside and outside the box.
        let t = [3.0, -4.0, 0.5, 10.0];
        let c = [1.0, 10.0, 0.1, 2.0];
        let f = |x: &[f64]| {
            let v = x.iter().zip(&t).zip(&c).map(|((x, t), c)| c * (x - t).powi(2)).sum();
            Some((v, x.iter().zip(&t).zip(&c).map(|((x, t), c)| 2.0 * c * (x - t)).collect()))
        };
        let bounds = [(-1.0, 1.0); 4];
        let r = minimize(f, &[0.0; 4], &bounds, &Options::default()).unwrap();
        let want = [1.0, -1.0, 0.5, 1.0];
        for (a, b) in r.x.iter().zip(&want) {
            assert!((a - b).abs() < 1e-6, "{r:?}");
        }
        assert!(r.converged());
    }

    #[test]
    fn backs_off_where_the_function_cannot_be_evaluated() {
        // Undefined for x > 1 (as a GP whose kernel matrix stops being factorisable).
        let f = |x: &[f64]| if x[0] > 1.0 { None } else { Some(((x[0] - 3.0).powi(2), vec![2.0 * (x[0] - 3.0)])) };
        let r = minimize(f, &[0.0], &[(-10.0, 10.0)], &Options::default()).unwrap();
        assert!(r.x[0] <= 1.0 && r.x[0] > 0.9, "{r:?}");
        assert!(minimize(|_: &[f64]| None, &[0.0], &[(-1.0, 1.0)], &Options::default()).is_none());
    }

    fn reference() -> serde_json::Value {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/sklearn_reference.json");
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    fn floats(v: &serde_json::Value) -> Vec<f64> {
        v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
    }

    type Objective = fn(&[f64]) -> Option<(f64, Vec<f64>)>;

    fn chained_rosenbrock(x: &[f64]) -> Option<(f64, Vec<f64>)> {
        let mut f = 0.0;
        let mut g = vec![0.0; x.len()];
        for i in 0..x.len() - 1 {
            let (a, b) = (x[i], x[i + 1]);
            f += 100.0 * (b - a * a).powi(2) + (1.0 - a).powi(2);
            g[i] += -400.0 * a * (b - a * a) - 2.0 * (1.0 - a);
            g[i + 1] += 200.0 * (b - a * a);
        }
        Some((f, g))
    }

    fn bounded_quadratic(x: &[f64]) -> Option<(f64, Vec<f64>)> {
        // A = tridiag(-1, 2.1, -1), b = (1, ..., n), as the fixtures script.
        let n = x.len();
        let ax: Vec<f64> = (0..n)
            .map(|i| 2.1 * x[i] - if i > 0 { x[i - 1] } else { 0.0 } - if i + 1 < n { x[i + 1] } else { 0.0 })
            .collect();
        let b: Vec<f64> = (1..=n).map(|i| i as f64).collect();
        let f = 0.5 * x.iter().zip(&ax).map(|(a, b)| a * b).sum::<f64>()
            - x.iter().zip(&b).map(|(a, b)| a * b).sum::<f64>();
        Some((f, ax.iter().zip(&b).map(|(a, b)| a - b).collect()))
    }

    /// scipy's L-BFGS-B, run by the fixtures script: with scipy's stopping rule ours
    /// evaluates the same points (to rounding), takes as many iterations and evaluations,
    /// and stops at the same place; with our refinement it ends no higher.
    #[test]
    fn walks_scipys_path_on_its_test_problems() {
        let fx = reference();
        let runs = fx["lbfgsb"].as_array().unwrap();
        assert!(runs.len() >= 6);
        for run in runs {
            let name = run["name"].as_str().unwrap();
            let f: Objective = match run["function"].as_str().unwrap() {
                "chained_rosenbrock" => chained_rosenbrock,
                "bounded_quadratic" => bounded_quadratic,
                other => panic!("unknown function {other}"),
            };
            let x0 = floats(&run["x0"]);
            let bounds: Vec<(f64, f64)> = match run["bounds"].as_array() {
                None => vec![(f64::NEG_INFINITY, f64::INFINITY); x0.len()],
                Some(b) => b
                    .iter()
                    .map(|p| (p[0].as_f64().unwrap_or(f64::NEG_INFINITY), p[1].as_f64().unwrap_or(f64::INFINITY)))
                    .collect(),
            };
            let scipy_rules = Options { refine_ftol: Options::default().ftol, ..Options::default() };
            let mut points = Vec::new();
            let r = minimize(
                |x| {
                    points.push(x.to_vec());
                    f(x)
                },
                &x0,
                &bounds,
                &scipy_rules,
            )
            .unwrap();
            let want: Vec<Vec<f64>> = run["points"].as_array().unwrap().iter().map(floats).collect();
            assert_eq!(
                (r.iterations, r.evaluations),
                (run["iterations"].as_u64().unwrap() as usize, run["evaluations"].as_u64().unwrap() as usize),
                "{name}: iterations and evaluations"
            );
            for (k, (a, b)) in points.iter().zip(&want).enumerate() {
                for (u, v) in a.iter().zip(b) {
                    assert!((u - v).abs() <= 1e-6 * v.abs().max(1.0), "{name}: evaluation {k}: {a:?} vs scipy {b:?}");
                }
            }
            let scipy_f = run["f"].as_f64().unwrap();
            assert!((r.f - scipy_f).abs() <= 1e-9 * scipy_f.abs().max(1.0), "{name}: f {} vs {scipy_f}", r.f);
            let by_gradient = run["message"].as_str().unwrap().contains("GRADIENT");
            let want_stop = if by_gradient { Stop::ProjectedGradient } else { Stop::RelativeReduction };
            assert_eq!(r.stop, want_stop, "{name}");

            let refined = minimize(f, &x0, &bounds, &Options::default()).unwrap();
            assert!(refined.f <= r.f, "{name}: refinement raised f: {} > {}", refined.f, r.f);
            assert!(refined.converged(), "{name}: {refined:?}");
        }
    }

    #[test]
    fn says_converged_only_when_a_stopping_rule_holds() {
        let wide = [(-5.0, 5.0), (-5.0, 5.0)];
        let capped = Options { max_iterations: 3, ..Options::default() };
        let r = minimize(rosenbrock, &[-1.2, 1.0], &wide, &capped).unwrap();
        assert_eq!((r.stop, r.iterations, r.converged()), (Stop::MaxIterations, 3, false), "{r:?}");
        // A gradient that points the wrong way: no step along -g decreases f.
        let lying = |x: &[f64]| Some((x[0] * x[0], vec![-2.0 * x[0] - 1.0]));
        let r = minimize(lying, &[1.0], &[(-5.0, 5.0)], &Options::default()).unwrap();
        assert_eq!((r.stop, r.converged(), r.x[0]), (Stop::LineSearch, false, 1.0), "{r:?}");
        assert!(r.evaluations > 1, "{r:?}");
        // Started on the optimum: converged with no step.
        let r = minimize(rosenbrock, &[1.0, 1.0], &wide, &Options::default()).unwrap();
        assert_eq!((r.stop, r.iterations, r.evaluations), (Stop::ProjectedGradient, 0, 1));
    }

    /// A stiff quadratic whose values carry round-off of 1e-8 of f (a likelihood summed
    /// over many outputs whose large terms cancel) while its gradient is exact. Near the
    /// minimum a step's true decrease falls below that noise before the gradient reaches
    /// pgtol and before the relative reduction falls to ftol, so sufficient decrease fails
    /// on noise alone; the approximate Wolfe conditions (the value within round-off of the
    /// start's, the slope showing the step's minimum reached) accept the step instead of
    /// giving up on the line search.
    #[test]
    fn a_value_change_below_round_off_still_converges() {
        let a = [1.0, 30.0, 900.0, 2.7e4];
        let noisy = |x: &[f64]| {
            let q: f64 = x.iter().zip(&a).map(|(v, a)| 0.5 * a * (v - 1.0) * (v - 1.0)).sum();
            // Deterministic noise in [-1, 1] from the point's bits.
            let h = x.iter().fold(0x9E37_79B9_7F4A_7C15u64, |h, v| (h ^ v.to_bits()).wrapping_mul(0x100_0000_01B3));
            let noise = (h >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
            let g = x.iter().zip(&a).map(|(v, a)| a * (v - 1.0)).collect();
            Some((1e4 + q + 1e-4 * noise, g))
        };
        let mut worked = 0;
        for start in 0..20 {
            let x0: Vec<f64> = (0..4).map(|i| -2.0 + 0.37 * (start * 4 + i) as f64 % 3.0).collect();
            let out = minimize(noisy, &x0, &[(f64::NEG_INFINITY, f64::INFINITY); 4], &Options::default()).unwrap();
            assert!(out.converged(), "start {start}: {:?} after {} evaluations", out.stop, out.evaluations);
            // At the minimum as far as the values can tell (q starts near 1e5): within the
            // round-off window, 1e-6 of f. Stopped by the relative reduction, as scipy's
            // rule stops once f's changes are noise.
            let q: f64 = out.x.iter().zip(&a).map(|(v, a)| 0.5 * a * (v - 1.0) * (v - 1.0)).sum();
            assert!(q <= 1e-2, "start {start}: {:?}, q = {q}, {:?}", out.x, out.stop);
            worked += usize::from(out.evaluations < 200);
        }
        assert_eq!(worked, 20);
    }

    #[test]
    fn splitmix_is_reproducible_and_in_range() {
        let mut a = SplitMix64::new(7);
        let mut b = SplitMix64::new(7);
        for _ in 0..100 {
            let v = a.uniform(-2.0, 3.0);
            assert_eq!(v, b.uniform(-2.0, 3.0));
            assert!((-2.0..3.0).contains(&v));
        }
        assert_ne!(SplitMix64::new(8).next_u64(), SplitMix64::new(7).next_u64());
    }
}

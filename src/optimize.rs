//! Bounded quasi-Newton minimisation: a projected L-BFGS for box constraints.
//!
//! Used to maximise the GP log marginal likelihood in log-hyperparameter space, where
//! every coordinate has bounds. No maintained pure-Rust crate offers L-BFGS with bounds
//! (argmin's L-BFGS is unbounded; the `lbfgsb` crates wrap Fortran), so this is ours.
//!
//! Each iteration fixes the coordinates that sit on a bound with the gradient pushing
//! outward, takes the two-loop L-BFGS direction on the others, and backtracks along the
//! projected path x(t) = P(x + t d) until the Armijo condition holds. Stopping rules are
//! scipy's L-BFGS-B defaults (projected-gradient inf-norm <= 1e-5, relative reduction
//! <= 2.2e-9), so results are comparable with scikit-learn's optimiser.

/// Stopping rules and memory.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Pairs (s, y) kept for the inverse-Hessian approximation.
    pub memory: usize,
    pub max_iterations: usize,
    /// Stop when max_i |P(x - g) - x|_i falls below this.
    pub pgtol: f64,
    /// Stop when (f_k - f_{k+1}) / max(|f_k|, |f_{k+1}|, 1) falls below this.
    pub ftol: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options { memory: 10, max_iterations: 15_000, pgtol: 1e-5, ftol: 1e7 * f64::EPSILON }
    }
}

/// How a minimisation ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub x: Vec<f64>,
    pub f: f64,
    pub iterations: usize,
    pub evaluations: usize,
    /// A stopping rule was met (not the iteration cap, nor a line search that found no
    /// decrease).
    pub converged: bool,
}

/// Minimises `f` over the box `bounds` starting from `x0` (clamped into the box).
/// `f` returns the value and gradient, or `None` where it cannot be evaluated (the
/// line search then backs off). Returns `None` if `f` fails at the start.
pub fn minimize(
    mut f: impl FnMut(&[f64]) -> Option<(f64, Vec<f64>)>,
    x0: &[f64],
    bounds: &[(f64, f64)],
    opts: &Options,
) -> Option<Outcome> {
    let n = x0.len();
    assert_eq!(bounds.len(), n);
    let project = |x: &mut [f64]| {
        for (v, (lo, hi)) in x.iter_mut().zip(bounds) {
            *v = v.clamp(*lo, *hi);
        }
    };
    let mut x = x0.to_vec();
    project(&mut x);
    let mut evaluations = 1;
    let (mut fx, mut g) = valid(f(&x), n)?;
    let mut s_hist: Vec<Vec<f64>> = Vec::new();
    let mut y_hist: Vec<Vec<f64>> = Vec::new();
    let mut iterations = 0;
    let mut converged = false;

    while iterations < opts.max_iterations {
        if projected_gradient_norm(&x, &g, bounds) <= opts.pgtol {
            converged = true;
            break;
        }
        // Coordinates held on their bound this iteration.
        let held: Vec<bool> =
            (0..n).map(|i| (x[i] <= bounds[i].0 && g[i] > 0.0) || (x[i] >= bounds[i].1 && g[i] < 0.0)).collect();
        let mut d = two_loop(&g, &s_hist, &y_hist, &held);
        let mut slope: f64 = d.iter().zip(&g).map(|(a, b)| a * b).sum();
        if slope >= 0.0 || !slope.is_finite() {
            // Not a descent direction: forget the curvature pairs, use steepest descent.
            s_hist.clear();
            y_hist.clear();
            d = g.iter().zip(&held).map(|(gi, h)| if *h { 0.0 } else { -gi }).collect();
            slope = d.iter().zip(&g).map(|(a, b)| a * b).sum();
            if slope >= 0.0 {
                converged = true;
                break;
            }
        }
        // Without curvature information, scale the first step to unit length.
        let mut t =
            if s_hist.is_empty() { (1.0 / d.iter().map(|v| v.abs()).fold(0.0, f64::max)).min(1.0) } else { 1.0 };
        let mut accepted = None;
        for _ in 0..40 {
            let mut trial: Vec<f64> = x.iter().zip(&d).map(|(a, b)| a + t * b).collect();
            project(&mut trial);
            let step: f64 = trial.iter().zip(&x).zip(&g).map(|((a, b), gi)| (a - b) * gi).sum();
            if step >= 0.0 {
                // The projection left no descent along this path.
                t *= 0.5;
                continue;
            }
            evaluations += 1;
            if let Some((ft, gt)) = valid(f(&trial), n) {
                if ft <= fx + 1e-4 * step {
                    accepted = Some((trial, ft, gt));
                    break;
                }
            }
            t *= 0.5;
        }
        iterations += 1;
        let Some((xn, fn_, gn)) = accepted else {
            if s_hist.is_empty() {
                break; // steepest descent found nothing: stop, not converged
            }
            s_hist.clear();
            y_hist.clear();
            continue;
        };
        let s: Vec<f64> = xn.iter().zip(&x).map(|(a, b)| a - b).collect();
        let y: Vec<f64> = gn.iter().zip(&g).map(|(a, b)| a - b).collect();
        let sy: f64 = s.iter().zip(&y).map(|(a, b)| a * b).sum();
        let yy: f64 = y.iter().map(|v| v * v).sum();
        if sy > f64::EPSILON * yy {
            if s_hist.len() == opts.memory {
                s_hist.remove(0);
                y_hist.remove(0);
            }
            s_hist.push(s);
            y_hist.push(y);
        }
        let reduction = (fx - fn_) / fx.abs().max(fn_.abs()).max(1.0);
        x = xn;
        fx = fn_;
        g = gn;
        if reduction <= opts.ftol {
            converged = true;
            break;
        }
    }
    Some(Outcome { x, f: fx, iterations, evaluations, converged })
}

fn valid(r: Option<(f64, Vec<f64>)>, n: usize) -> Option<(f64, Vec<f64>)> {
    r.filter(|(v, g)| v.is_finite() && g.len() == n && g.iter().all(|x| x.is_finite()))
}

/// max_i |clamp(x_i - g_i) - x_i|, scipy's convergence measure.
pub fn projected_gradient_norm(x: &[f64], g: &[f64], bounds: &[(f64, f64)]) -> f64 {
    x.iter().zip(g).zip(bounds).map(|((xi, gi), (lo, hi))| ((xi - gi).clamp(*lo, *hi) - xi).abs()).fold(0.0, f64::max)
}

/// -H g by the L-BFGS two-loop recursion over the coordinates not held on a bound.
fn two_loop(g: &[f64], s_hist: &[Vec<f64>], y_hist: &[Vec<f64>], held: &[bool]) -> Vec<f64> {
    let mask = |v: &[f64]| -> Vec<f64> { v.iter().zip(held).map(|(x, h)| if *h { 0.0 } else { *x }).collect() };
    let dot = |a: &[f64], b: &[f64]| -> f64 {
        a.iter().zip(b).zip(held).filter(|(_, h)| !**h).map(|((x, y), _)| x * y).sum()
    };
    let mut q = mask(g);
    let k = s_hist.len();
    let mut alpha = vec![0.0; k];
    let mut rho = vec![0.0; k];
    for i in (0..k).rev() {
        let sy = dot(&s_hist[i], &y_hist[i]);
        rho[i] = if sy > 0.0 { 1.0 / sy } else { 0.0 };
        alpha[i] = rho[i] * dot(&s_hist[i], &q);
        for (qj, yj) in q.iter_mut().zip(&y_hist[i]) {
            *qj -= alpha[i] * yj;
        }
    }
    if k > 0 {
        let (s, y) = (&s_hist[k - 1], &y_hist[k - 1]);
        let yy = dot(y, y);
        if yy > 0.0 {
            let gamma = dot(s, y) / yy;
            q.iter_mut().for_each(|v| *v *= gamma);
        }
    }
    for i in 0..k {
        let beta = rho[i] * dot(&y_hist[i], &q);
        for (qj, sj) in q.iter_mut().zip(&s_hist[i]) {
            *qj += (alpha[i] - beta) * sj;
        }
    }
    mask(&q).into_iter().map(|v| -v).collect()
}

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
        assert!(r.converged, "{r:?}");
        assert!((r.x[0] - 1.0).abs() < 1e-3 && (r.x[1] - 1.0).abs() < 2e-3, "{r:?}");
        assert!(r.f < 1e-6);
    }

    #[test]
    fn stops_on_the_bound_when_the_minimum_is_outside() {
        // Rosenbrock with x0 <= 0.5: the constrained minimum is at (0.5, 0.25).
        let r = minimize(rosenbrock, &[-1.0, 2.0], &[(-2.0, 0.5), (-2.0, 2.0)], &Options::default()).unwrap();
        assert!(r.converged, "{r:?}");
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
        assert!(r.converged);
    }

    #[test]
    fn backs_off_where_the_function_cannot_be_evaluated() {
        // Undefined for x > 1 (as a GP whose kernel matrix stops being factorisable).
        let f = |x: &[f64]| if x[0] > 1.0 { None } else { Some(((x[0] - 3.0).powi(2), vec![2.0 * (x[0] - 3.0)])) };
        let r = minimize(f, &[0.0], &[(-10.0, 10.0)], &Options::default()).unwrap();
        assert!(r.x[0] <= 1.0 && r.x[0] > 0.9, "{r:?}");
        assert!(minimize(|_: &[f64]| None, &[0.0], &[(-1.0, 1.0)], &Options::default()).is_none());
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

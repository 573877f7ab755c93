//! L-BFGS-B (Byrd, Lu, Nocedal & Zhu 1995; version 3.0 of Morales & Nocedal 2011, which
//! scipy ships): each iteration finds the generalised Cauchy point of the quadratic model
//! along the projected steepest-descent path, minimises the model over the variables
//! still free there (projecting the result, or truncating it when the projection is not
//! a descent direction), and searches along the way to that point with the Moré–Thuente
//! line search. Memory is refreshed where the reference refreshes it: a failed
//! factorisation, a line search that fails, a direction that does not descend.
//!
//! The reference keeps B = theta I - W M W' in compact form so that n can be in the
//! millions. Our n is a kernel's hyperparameter count (tens, ARD included), so B is held
//! as a dense n x n matrix rebuilt from the same pairs (the same matrix: Byrd, Nocedal &
//! Schnabel 1994), and the subspace step is a Cholesky solve with B's free block. The
//! iterates are the reference's up to rounding.

use super::line_search::{LineSearch, Next};
use nalgebra::{DMatrix, DVector};
use std::collections::VecDeque;

/// Stopping rules and memory. The defaults are scipy's (`maxcor` 10, `gtol` 1e-5,
/// `ftol` = factr 1e7 x machine epsilon, `maxls` 20, `maxiter` = `maxfun` = 15000).
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Pairs (s, y) kept for the quasi-Newton matrix.
    pub memory: usize,
    pub max_iterations: usize,
    pub max_evaluations: usize,
    /// Evaluations one line search may spend.
    pub max_line_search: usize,
    /// Stop when max_i |P(x - g) - x|_i falls to this.
    pub pgtol: f64,
    /// scipy's rule: (f_k - f_{k+1}) / max(|f_k|, |f_{k+1}|, 1) <= ftol.
    pub ftol: f64,
    /// Once `ftol` has held, keep iterating (the same path, so never worse than
    /// stopping there) until the relative reduction falls to this, `pgtol` holds, or
    /// no step decreases f any more. scipy's rule alone can stop on a long flat stretch
    /// that is not a stationary point.
    pub refine_ftol: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            memory: 10,
            max_iterations: 15_000,
            max_evaluations: 15_000,
            max_line_search: 20,
            pgtol: 1e-5,
            ftol: 1e7 * f64::EPSILON,
            refine_ftol: 1e3 * f64::EPSILON,
        }
    }
}

/// Why a minimisation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The projected gradient's largest entry fell to `pgtol`.
    ProjectedGradient,
    /// The relative reduction of f fell to `ftol` (and refinement from there found no
    /// more than `refine_ftol`, or no further decrease).
    RelativeReduction,
    MaxIterations,
    MaxEvaluations,
    /// No step along a steepest-descent direction decreased f before any stopping rule
    /// held (scipy's ABNORMAL_TERMINATION_IN_LNSRCH).
    LineSearch,
}

impl Stop {
    /// A stopping rule holds (rather than a budget ran out or the search broke down).
    pub fn converged(self) -> bool {
        matches!(self, Stop::ProjectedGradient | Stop::RelativeReduction)
    }

    pub fn name(self) -> &'static str {
        match self {
            Stop::ProjectedGradient => "projected_gradient",
            Stop::RelativeReduction => "relative_reduction",
            Stop::MaxIterations => "max_iterations",
            Stop::MaxEvaluations => "max_evaluations",
            Stop::LineSearch => "line_search",
        }
    }
}

/// How a minimisation ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub x: Vec<f64>,
    pub f: f64,
    /// Accepted steps.
    pub iterations: usize,
    /// Calls of the objective, the first and failed ones included.
    pub evaluations: usize,
    pub stop: Stop,
}

impl Outcome {
    pub fn converged(&self) -> bool {
        self.stop.converged()
    }
}

/// Minimises `f` over the box `bounds` (entries may be infinite) from `x0`, projected into
/// the box. `f` returns the value and gradient, or `None` where it cannot be evaluated
/// (the line search then backs off). Returns `None` if `f` fails at the start.
pub fn minimize(
    mut f: impl FnMut(&[f64]) -> Option<(f64, Vec<f64>)>,
    x0: &[f64],
    bounds: &[(f64, f64)],
    opts: &Options,
) -> Option<Outcome> {
    let n = x0.len();
    assert_eq!(bounds.len(), n);
    assert!(bounds.iter().all(|(lo, hi)| lo <= hi), "empty box");
    let constrained = bounds.iter().any(|(lo, hi)| lo.is_finite() || hi.is_finite());
    let boxed = bounds.iter().all(|(lo, hi)| lo.is_finite() && hi.is_finite());
    let mut x = x0.to_vec();
    project(&mut x, bounds);
    let (mut fx, mut g) = valid(f(&x), n)?;
    let mut evaluations = 1;
    let mut iterations = 0;
    let mut memory = Memory::new(n, opts.memory);
    let mut ftol_held = false;
    // Steps taken on the slope alone (values within round-off) since the projected
    // gradient's lowest value.
    let (mut lowest_gradient, mut stalled) = (f64::INFINITY, 0);

    let stop = loop {
        if projected_gradient_norm(&x, &g, bounds) <= opts.pgtol {
            break Stop::ProjectedGradient;
        }
        if iterations >= opts.max_iterations {
            break Stop::MaxIterations;
        }
        if evaluations >= opts.max_evaluations {
            break Stop::MaxEvaluations;
        }

        // The target of this iteration's line search.
        let z = if !constrained && !memory.is_empty() {
            // No bounds: the Cauchy step is skipped and every variable is free.
            subspace_minimum(&x, &g, bounds, &memory.b, x.clone(), &vec![true; n])
        } else {
            let (xcp, free) = cauchy_point(&x, &g, bounds, &memory.b);
            if memory.is_empty() || !free.contains(&true) {
                Some(xcp)
            } else {
                subspace_minimum(&x, &g, bounds, &memory.b, xcp, &free)
            }
        };
        let Some(z) = z else {
            memory.clear(); // B's free block could not be factorised
            continue;
        };
        let d: Vec<f64> = z.iter().zip(&x).map(|(a, b)| a - b).collect();
        let gd = dot(&g, &d);
        // Not a descent direction (or NaN).
        if gd >= 0.0 || gd.is_nan() {
            if memory.is_empty() {
                break Stop::LineSearch;
            }
            memory.clear();
            continue;
        }

        let stpmax = if !constrained {
            1e10
        } else if iterations == 0 {
            1.0
        } else {
            max_feasible_step(&x, &d, bounds)
        };
        let dnorm = dot(&d, &d).sqrt();
        let stp0 = if iterations == 0 && !boxed { (1.0 / dnorm).min(stpmax) } else { 1.0 };
        let (mut ls, mut stp) = LineSearch::new(fx, gd, stp0, stpmax);
        let mut accepted = None;
        // Accepted on the approximate Wolfe conditions: f's change is round-off.
        let mut by_slope = false;
        for _ in 0..opts.max_line_search {
            let trial: Vec<f64> = if stp == 1.0 {
                z.clone()
            } else {
                let mut t: Vec<f64> = x.iter().zip(&d).map(|(a, b)| a + stp * b).collect();
                project(&mut t, bounds); // rounding only: stp <= stpmax keeps it inside
                t
            };
            evaluations += 1;
            let Some((ft, gt)) = valid(f(&trial), n) else {
                stp = ls.back_off();
                continue;
            };
            let gdt = dot(&gt, &d);
            match ls.next(ft, gdt) {
                Next::Evaluate(s) => stp = s,
                // The reference also accepts a step the search gave up on; never one
                // that raised f (it would then stop on the ftol rule at a worse point).
                Next::Converged | Next::Warning if ft <= fx => {
                    accepted = Some((trial, ft, gt));
                    break;
                }
                Next::Converged | Next::Warning => break,
                // As Hager and Zhang: the slope vouches for the step, even where round-off
                // puts its value above fx.
                Next::RoundOff => {
                    accepted = Some((trial, ft, gt));
                    by_slope = true;
                    break;
                }
            }
        }
        let Some((xn, fn_, gn)) = accepted else {
            if memory.is_empty() {
                break Stop::LineSearch;
            }
            memory.clear();
            continue;
        };

        iterations += 1;
        let s: Vec<f64> = xn.iter().zip(&x).map(|(a, b)| a - b).collect();
        let y: Vec<f64> = gn.iter().zip(&g).map(|(a, b)| a - b).collect();
        let reduction = (fx - fn_) / fx.abs().max(fn_.abs()).max(1.0);
        let gd_step = -gd * dot(&s, &d) / dot(&d, &d);
        let pg = projected_gradient_norm(&xn, &gn, bounds);
        if by_slope {
            // The values no longer tell points apart (the relative-reduction rule holds
            // as far as they can say): the gradient measures progress from here. Steps
            // that do not bring it to a new low are counted; enough of them in a row end
            // the search (a gradient with round-off of its own could wander).
            ftol_held = true;
            if pg < lowest_gradient {
                lowest_gradient = pg;
                stalled = 0;
            } else {
                stalled += 1;
                if stalled >= STALLED_BY_SLOPE {
                    break Stop::RelativeReduction;
                }
            }
        }
        x = xn;
        fx = fn_;
        g = gn;
        if pg <= opts.pgtol {
            break Stop::ProjectedGradient;
        }
        ftol_held |= reduction <= opts.ftol;
        if !by_slope && reduction <= opts.refine_ftol {
            break Stop::RelativeReduction;
        }
        // Keep the pair only with enough curvature (s'y > eps (-g's)): B stays positive
        // definite.
        if dot(&s, &y) > f64::EPSILON * gd_step {
            memory.push(s, y);
        }
    };
    let stop = if ftol_held && !stop.converged() { Stop::RelativeReduction } else { stop };
    Some(Outcome { x, f: fx, iterations, evaluations, stop })
}

/// Steps accepted on the slope alone, in a row, that may leave the projected gradient
/// above its lowest value before the search ends.
const STALLED_BY_SLOPE: usize = 10;

fn valid(r: Option<(f64, Vec<f64>)>, n: usize) -> Option<(f64, Vec<f64>)> {
    r.filter(|(v, g)| v.is_finite() && g.len() == n && g.iter().all(|x| x.is_finite()))
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn project(x: &mut [f64], bounds: &[(f64, f64)]) {
    for (v, (lo, hi)) in x.iter_mut().zip(bounds) {
        *v = v.max(*lo).min(*hi);
    }
}

/// max_i |P(x - g) - x|_i, scipy's convergence measure.
pub fn projected_gradient_norm(x: &[f64], g: &[f64], bounds: &[(f64, f64)]) -> f64 {
    x.iter().zip(g).zip(bounds).map(|((xi, gi), (lo, hi))| ((xi - gi).max(*lo).min(*hi) - xi).abs()).fold(0.0, f64::max)
}

/// The longest step along d that stays in the box.
fn max_feasible_step(x: &[f64], d: &[f64], bounds: &[(f64, f64)]) -> f64 {
    let mut stpmax: f64 = 1e10;
    for ((&xi, &di), &(lo, hi)) in x.iter().zip(d).zip(bounds) {
        if di < 0.0 && lo.is_finite() {
            let room = lo - xi;
            if room >= 0.0 {
                stpmax = 0.0;
            } else if di * stpmax < room {
                stpmax = room / di;
            }
        } else if di > 0.0 && hi.is_finite() {
            let room = hi - xi;
            if room <= 0.0 {
                stpmax = 0.0;
            } else if di * stpmax > room {
                stpmax = room / di;
            }
        }
    }
    stpmax
}

/// The last `m` pairs (s, y) and the BFGS matrix they make from theta I, theta being the
/// newest pair's y'y / s'y (L-BFGS-B's scaling).
struct Memory {
    pairs: VecDeque<(Vec<f64>, Vec<f64>)>,
    m: usize,
    b: DMatrix<f64>,
}

impl Memory {
    fn new(n: usize, m: usize) -> Memory {
        Memory { pairs: VecDeque::new(), m: m.max(1), b: DMatrix::identity(n, n) }
    }

    fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    fn clear(&mut self) {
        self.pairs.clear();
        self.b.fill_with_identity();
    }

    fn push(&mut self, s: Vec<f64>, y: Vec<f64>) {
        if self.pairs.len() == self.m {
            self.pairs.pop_front();
        }
        self.pairs.push_back((s, y));
        let (s, y) = self.pairs.back().expect("just pushed");
        let theta = dot(y, y) / dot(s, y);
        self.b.fill_with_identity();
        self.b *= theta;
        for (s, y) in &self.pairs {
            let s = DVector::from_column_slice(s);
            let y = DVector::from_column_slice(y);
            let bs = &self.b * &s;
            let sbs = s.dot(&bs);
            let sy = s.dot(&y);
            if sbs > 0.0 && sy > 0.0 {
                self.b -= &bs * bs.transpose() / sbs;
                self.b += &y * y.transpose() / sy;
            }
        }
    }
}

/// The generalised Cauchy point: the first local minimiser of the model
/// m(z) = g'(z - x) + (z - x)'B(z - x)/2 along the path P(x - t g), t >= 0, found by
/// walking the path's breakpoints in order. Also says which variables are free there
/// (not held at a bound).
fn cauchy_point(x: &[f64], g: &[f64], bounds: &[(f64, f64)], b: &DMatrix<f64>) -> (Vec<f64>, Vec<bool>) {
    let n = x.len();
    let mut xcp = x.to_vec();
    let mut d = vec![0.0; n];
    let mut free = vec![true; n];
    let mut breaks: Vec<(f64, usize)> = Vec::new();
    let mut moving_without_break = 0;
    // Whether every moving variable meets a bound (then the path ends at a vertex).
    let mut bounded = true;
    for i in 0..n {
        let (lo, hi) = bounds[i];
        let neg_g = -g[i];
        if lo == hi {
            free[i] = false;
            continue;
        }
        let (at_lo, at_hi) = (lo.is_finite() && x[i] - lo <= 0.0, hi.is_finite() && hi - x[i] <= 0.0);
        if (at_lo && neg_g <= 0.0) || (at_hi && neg_g >= 0.0) {
            free[i] = false;
            continue;
        }
        if neg_g == 0.0 {
            continue;
        }
        d[i] = neg_g;
        if lo.is_finite() && neg_g < 0.0 {
            breaks.push(((x[i] - lo) / -neg_g, i));
        } else if hi.is_finite() && neg_g > 0.0 {
            breaks.push(((hi - x[i]) / neg_g, i));
        } else {
            moving_without_break += 1;
            bounded = false;
        }
    }
    if breaks.is_empty() && moving_without_break == 0 {
        return (xcp, free);
    }
    let dv = DVector::from_column_slice(&d);
    let mut bd: Vec<f64> = (b * &dv).iter().copied().collect();
    // B z for z = (point reached on the path) - x.
    let mut bz = vec![0.0; n];
    let mut f1 = -dot(&d, &d);
    let mut f2 = dot(&d, &bd);
    let f2_org = f2;
    let mut dtm = -f1 / f2;
    let mut tsum = 0.0;
    breaks.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let nbreak = breaks.len();
    let mut tj = 0.0;
    for (k, &(t, ib)) in breaks.iter().enumerate() {
        let dt = t - tj;
        tj = t;
        if dtm < dt {
            break;
        }
        tsum += dt;
        let nleft = nbreak - k - 1;
        let dibp = d[ib];
        for (bzi, bdi) in bz.iter_mut().zip(&bd) {
            *bzi += dt * bdi;
        }
        d[ib] = 0.0;
        xcp[ib] = if dibp > 0.0 { bounds[ib].1 } else { bounds[ib].0 };
        free[ib] = false;
        if nleft == 0 && nbreak == n {
            // Every variable has reached a bound: the path ends here.
            return (xcp, free);
        }
        for (bdi, bci) in bd.iter_mut().zip(b.column(ib).iter()) {
            *bdi -= dibp * bci;
        }
        f1 = dot(g, &d) + dot(&d, &bz);
        f2 = (dot(&d, &bd)).max(f64::EPSILON * f2_org);
        dtm = if nleft > 0 || !bounded { -f1 / f2 } else { 0.0 };
    }
    tsum += dtm.max(0.0);
    for i in 0..n {
        xcp[i] += tsum * d[i];
    }
    project(&mut xcp, bounds);
    (xcp, free)
}

/// Minimises the model over the variables free at the Cauchy point `xcp`, the others held:
/// the Newton step of B's free block, projected into the box if that still descends from
/// x (version 3.0), else cut back to the box along its own direction. `None` if the free
/// block cannot be factorised.
fn subspace_minimum(
    x: &[f64],
    g: &[f64],
    bounds: &[(f64, f64)],
    b: &DMatrix<f64>,
    xcp: Vec<f64>,
    free: &[bool],
) -> Option<Vec<f64>> {
    let idx: Vec<usize> = (0..x.len()).filter(|&i| free[i]).collect();
    let z = DVector::from_iterator(x.len(), xcp.iter().zip(x).map(|(a, b)| a - b));
    let bz = b * z;
    let r = DVector::from_iterator(idx.len(), idx.iter().map(|&i| -(g[i] + bz[i])));
    let bff = DMatrix::from_fn(idx.len(), idx.len(), |i, j| b[(idx[i], idx[j])]);
    let mut du = bff.cholesky()?.solve(&r);
    if du.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let mut projected = xcp.clone();
    let mut hit = false;
    for (k, &i) in idx.iter().enumerate() {
        let (lo, hi) = bounds[i];
        projected[i] = (xcp[i] + du[k]).max(lo).min(hi);
        hit |= (lo.is_finite() && projected[i] == lo) || (hi.is_finite() && projected[i] == hi);
    }
    let descends = || projected.iter().zip(x).zip(g).map(|((p, xi), gi)| (p - xi) * gi).sum::<f64>() <= 0.0;
    if !hit || descends() {
        return Some(projected);
    }
    // Truncate: the largest alpha <= 1 keeping xcp + alpha du in the box.
    let mut alpha: f64 = 1.0;
    let mut blocking = None;
    for (k, &i) in idx.iter().enumerate() {
        let (lo, hi) = bounds[i];
        let dk = du[k];
        let limit = if dk < 0.0 && lo.is_finite() {
            let room = lo - xcp[i];
            if room >= 0.0 {
                0.0
            } else if dk * alpha < room {
                room / dk
            } else {
                continue;
            }
        } else if dk > 0.0 && hi.is_finite() {
            let room = hi - xcp[i];
            if room <= 0.0 {
                0.0
            } else if dk * alpha > room {
                room / dk
            } else {
                continue;
            }
        } else {
            continue;
        };
        if limit < alpha {
            alpha = limit;
            blocking = Some(k);
        }
    }
    let mut out = xcp;
    if let (true, Some(k)) = (alpha < 1.0, blocking) {
        let i = idx[k];
        out[i] = if du[k] > 0.0 { bounds[i].1 } else { bounds[i].0 };
        du[k] = 0.0;
    }
    for (k, &i) in idx.iter().enumerate() {
        out[i] += alpha * du[k];
    }
    project(&mut out, bounds);
    Some(out)
}

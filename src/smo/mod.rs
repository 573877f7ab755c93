//! The SMO solver for the C-SVC dual, the algorithm of LIBSVM:
//!
//!   min 1/2 a'Qa - e'a  subject to  0 <= a_i <= C,  y'a = 0,  Q_ij = y_i y_j k(x_i, x_j)
//!
//! with second-order working-set selection (Fan, Chen & Lin, JMLR 2005, "WSS 2"), the
//! tau safeguard for non-PSD kernels (sigmoid), shrinking, and an LRU cache of kernel
//! columns bounded in bytes. It follows LIBSVM step for step (same selection order and
//! ties, same shrinking schedule, columns cached as f32) so that it reaches the same
//! solution as scikit-learn's SVC on the same data; the speed comes from computing
//! kernel columns with SIMD across cores and from branch-free inner loops.
//!
//! Nothing here knows about classes or labels: `svm.rs` builds the +-1 problems.

mod cache;
mod shrinking;
mod simd;

use crate::kernel::column::ColumnKernel;
use crate::linalg::Parallelism;
use crate::partner::{with_partner, Partner, SplitSlice};
use cache::ColumnCache;
use std::ops::Range;
use std::sync::Mutex;

/// Where the curvature of the pair is not positive (non-PSD kernels), LIBSVM's stand-in.
const TAU: f64 = 1e-12;

/// Passes over fewer points stay on one thread: the hand-off would cost more than half
/// the pass.
const MIN_SPLIT: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SmoOptions {
    /// Upper bound of every a_i, > 0.
    pub c: f64,
    /// Stop when the maximal KKT violation m(a) - M(a) is at most tol.
    pub tol: f64,
    /// None: LIBSVM's own safety cap, max(10^7, 100 n).
    pub max_iter: Option<u64>,
    /// Bytes for cached kernel columns (at least two full columns are always allowed).
    pub cache_bytes: usize,
    pub shrinking: bool,
    pub par: Parallelism,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SmoSolution {
    /// y_i a_i, in the order of the input points.
    pub coef: Vec<f64>,
    /// The bias term: f(x) = sum_i coef_i k(x_i, x) - rho.
    pub rho: f64,
    pub iterations: u64,
    /// False when max_iter stopped it first.
    pub converged: bool,
    /// The dual objective 1/2 a'Qa - e'a at the solution.
    pub objective: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancelled;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Bound {
    Lower,
    Upper,
    Free,
}

/// Solves the dual for the points of `kernel` with labels `y` (each +1 or -1).
/// `cancelled` is polled every few hundred iterations.
pub fn solve(
    kernel: ColumnKernel,
    y: &[f64],
    opts: &SmoOptions,
    cancelled: &dyn Fn() -> bool,
) -> Result<SmoSolution, Cancelled> {
    assert_eq!(kernel.n(), y.len());
    // Every pass of an iteration is split between this thread and a partner pinned to
    // the other half of the points (each core keeps its half of the data in its cache).
    if opts.par.is_parallel() && y.len() >= MIN_SPLIT {
        with_partner(|p| run(kernel, y, opts, cancelled, Some(p)))
    } else {
        run(kernel, y, opts, cancelled, None)
    }
}

fn run(
    kernel: ColumnKernel,
    y: &[f64],
    opts: &SmoOptions,
    cancelled: &dyn Fn() -> bool,
    partner: Option<&Partner<'_>>,
) -> Result<SmoSolution, Cancelled> {
    let n = y.len();
    let mut s = Solver::new(kernel, y, opts, partner);
    let cap = opts.max_iter.unwrap_or((100 * n as u64).max(10_000_000));
    let mut iter = 0u64;
    let mut counter = n.min(1000) + 1;
    let mut converged = true;
    loop {
        if iter >= cap {
            converged = false;
            if s.active < n {
                s.reconstruct_gradient();
                s.active = n;
            }
            break;
        }
        counter -= 1;
        if counter == 0 {
            counter = n.min(1000);
            if opts.shrinking {
                s.shrink();
            }
            if cancelled() {
                return Err(Cancelled);
            }
        }
        let (i, j) = match s.select_working_set() {
            Some(pair) => pair,
            None => {
                // Optimal on the active set: check the whole problem before stopping.
                s.reconstruct_gradient();
                s.active = n;
                match s.select_working_set() {
                    Some(pair) => {
                        counter = 1;
                        pair
                    }
                    None => break,
                }
            }
        };
        iter += 1;
        s.update_pair(i, j);
    }
    let rho = s.rho();
    let objective = (0..n).map(|i| s.alpha[i] * (s.g[i] - 1.0)).sum::<f64>() / 2.0;
    let mut coef = vec![0.0; n];
    for p in 0..n {
        coef[s.original[p]] = s.alpha[p] * s.y[p];
    }
    Ok(SmoSolution { coef, rho, iterations: iter, converged, objective })
}

/// The solver's state. Every per-point array is in position order: shrinking moves
/// inactive points to the end (`original` maps positions back), so the active set is the
/// prefix 0..active and the cache stores column prefixes.
struct Solver<'p> {
    kernel: ColumnKernel,
    cache: ColumnCache,
    partner: Option<&'p Partner<'p>>,
    c: f64,
    tol: f64,
    y: Vec<f64>,
    alpha: Vec<f64>,
    bound: Vec<Bound>,
    /// 1.0 where the point is in I_up / I_low (from y and its bound), for the vector
    /// passes (`simd.rs`).
    up: Vec<f64>,
    low: Vec<f64>,
    /// Gradient of the objective: (Q a)_i - 1.
    g: Vec<f64>,
    /// sum over a_j = C of C Q_ij: lets shrunk gradients be rebuilt from free points only.
    g_bar: Vec<f64>,
    qd: Vec<f64>,
    original: Vec<usize>,
    active: usize,
    /// Whether the gradient was already rebuilt once near the end (LIBSVM's `unshrink`).
    unshrunk: bool,
    /// The next working set's i and its -y_i g_i, found during the last gradient update
    /// (saves a pass); None when positions or gradients changed since.
    next_i: Option<(f64, usize)>,
    scratch: Vec<f64>,
}

impl<'p> Solver<'p> {
    fn new(kernel: ColumnKernel, y: &[f64], opts: &SmoOptions, partner: Option<&'p Partner<'p>>) -> Solver<'p> {
        let n = y.len();
        let qd = (0..n).map(|i| kernel.diag(i)).collect();
        Solver {
            cache: ColumnCache::new(n, opts.cache_bytes),
            kernel,
            partner,
            c: opts.c,
            tol: opts.tol,
            y: y.to_vec(),
            alpha: vec![0.0; n],
            bound: vec![Bound::Lower; n],
            up: y.iter().map(|&v| f64::from(u8::from(in_up(v, Bound::Lower)))).collect(),
            low: y.iter().map(|&v| f64::from(u8::from(in_low(v, Bound::Lower)))).collect(),
            g: vec![-1.0; n],
            g_bar: vec![0.0; n],
            qd,
            original: (0..n).collect(),
            active: n,
            unshrunk: false,
            next_i: None,
            scratch: Vec::new(),
        }
    }

    fn n(&self) -> usize {
        self.y.len()
    }

    /// Makes Q_i[0..len] available in the cache.
    fn load_column(&mut self, i: usize, len: usize) {
        let Solver { cache, kernel, y, scratch, partner, .. } = self;
        cache.fill(i, len, |start, out| {
            scratch.resize(out.len(), 0.0);
            let fill = |r: Range<usize>, k: &mut [f64], o: &mut [f32]| {
                kernel.column(i, r.clone(), k, Parallelism::Sequential);
                let yi = y[i];
                for ((o, k), yp) in o.iter_mut().zip(k.iter()).zip(&y[r]) {
                    *o = (yi * yp * k) as f32;
                }
            };
            match partner {
                Some(p) if out.len() >= MIN_SPLIT => {
                    let (k, o) = (SplitSlice::new(scratch), SplitSlice::new(out));
                    p.split(start..len, &|_, r| {
                        let local = r.start - start..r.end - start;
                        // SAFETY: `split` hands the two threads disjoint ranges.
                        unsafe { fill(r, k.range(local.clone()), o.range(local)) }
                    });
                }
                _ => fill(start..len, scratch, out),
            }
        });
    }

    /// `f` over `range`, split with the partner when there is one and the range is long;
    /// the second result (None when not split) covers the later positions.
    fn halves<T: Send>(&self, range: Range<usize>, f: &(dyn Fn(Range<usize>) -> T + Sync)) -> (T, Option<T>) {
        match self.partner {
            Some(p) if range.len() >= MIN_SPLIT => {
                let out: [Mutex<Option<T>>; 2] = [Mutex::new(None), Mutex::new(None)];
                p.split(range, &|part, r| *out[part].lock().expect("result slot") = Some(f(r)));
                let [a, b] = out.map(|m| m.into_inner().expect("result slot").expect("both halves ran"));
                (a, Some(b))
            }
            _ => (f(range), None),
        }
    }

    /// max of -y_t g_t over I_up within `r` (the last maximum, as LIBSVM's `>=`).
    fn max_up(&self, r: Range<usize>) -> (f64, usize) {
        simd::max_up(&self.y, &self.g, &self.up, r)
    }

    /// Over I_low within `r`: max of y_j g_j, and the j minimising the second-order
    /// objective change with i (the last minimum, as LIBSVM's `<=`): (gmax2, j, change).
    fn min_low(&self, r: Range<usize>, i: usize, gmax: f64, q_i: &[f32]) -> (f64, usize, f64) {
        let pair = (gmax, self.qd[i], self.y[i]);
        simd::min_low(&self.y, &self.g, &self.low, &self.qd, q_i, r, pair, TAU)
    }

    fn set_bound(&mut self, i: usize) {
        self.bound[i] = if self.alpha[i] >= self.c {
            Bound::Upper
        } else if self.alpha[i] <= 0.0 {
            Bound::Lower
        } else {
            Bound::Free
        };
        self.up[i] = f64::from(u8::from(in_up(self.y[i], self.bound[i])));
        self.low[i] = f64::from(u8::from(in_low(self.y[i], self.bound[i])));
    }

    /// WSS 2: i maximises -y_i g_i over I_up; j minimises the second-order gain estimate
    /// over I_low among those violating with i. None when the gap is below tol.
    fn select_working_set(&mut self) -> Option<(usize, usize)> {
        let active = self.active;
        let (gmax, i) = match self.next_i.take() {
            Some(found) => found,
            None => {
                let (first, second) = self.halves(0..active, &|r| self.max_up(r));
                later_max(first, second)
            }
        };
        if i == usize::MAX {
            return None;
        }
        self.load_column(i, active);
        let q_i = self.cache.get(i, active);
        let (first, second) = self.halves(0..active, &|r| self.min_low(r, i, gmax, q_i));
        let (gmax2, j) = match second {
            Some(b) if b.1 != usize::MAX && b.2 <= first.2 => (first.0.max(b.0), b.1),
            Some(b) => (first.0.max(b.0), first.1),
            None => (first.0, first.1),
        };
        if gmax + gmax2 < self.tol || j == usize::MAX {
            return None;
        }
        Some((i, j))
    }

    /// The analytic two-variable step on (i, j), clipped to the box, then the gradient
    /// update over the active set.
    fn update_pair(&mut self, i: usize, j: usize) {
        let active = self.active;
        self.load_column(i, active);
        self.load_column(j, active);
        let c = self.c;
        let (old_i, old_j) = (self.alpha[i], self.alpha[j]);
        let q_ij = self.cache.get(i, active)[j] as f64;
        let (mut ai, mut aj) = (old_i, old_j);
        if self.y[i] != self.y[j] {
            let quad = self.qd[i] + self.qd[j] + 2.0 * q_ij;
            let delta = (-self.g[i] - self.g[j]) / if quad > 0.0 { quad } else { TAU };
            let diff = ai - aj;
            ai += delta;
            aj += delta;
            if diff > 0.0 {
                if aj < 0.0 {
                    aj = 0.0;
                    ai = diff;
                }
            } else if ai < 0.0 {
                ai = 0.0;
                aj = -diff;
            }
            if diff > 0.0 {
                if ai > c {
                    ai = c;
                    aj = c - diff;
                }
            } else if aj > c {
                aj = c;
                ai = c + diff;
            }
        } else {
            let quad = self.qd[i] + self.qd[j] - 2.0 * q_ij;
            let delta = (self.g[i] - self.g[j]) / if quad > 0.0 { quad } else { TAU };
            let sum = ai + aj;
            ai -= delta;
            aj += delta;
            if sum > c {
                if ai > c {
                    ai = c;
                    aj = sum - c;
                }
            } else if aj < 0.0 {
                aj = 0.0;
                ai = sum;
            }
            if sum > c {
                if aj > c {
                    aj = c;
                    ai = sum - c;
                }
            } else if ai < 0.0 {
                ai = 0.0;
                aj = sum;
            }
        }
        self.alpha[i] = ai;
        self.alpha[j] = aj;
        let (di, dj) = (ai - old_i, aj - old_j);
        let (was_upper_i, was_upper_j) = (self.bound[i] == Bound::Upper, self.bound[j] == Bound::Upper);
        self.set_bound(i);
        self.set_bound(j);
        {
            // The gradient update, and in the same pass the next iteration's i.
            let (q_i, q_j) = self.cache.pair(i, j, active);
            let (y, up) = (&self.y, &self.up);
            let update =
                |g: &mut [f64], r: Range<usize>| -> (f64, usize) { simd::update(g, q_i, q_j, (di, dj), y, up, r) };
            self.next_i = Some(match self.partner {
                Some(p) if active >= MIN_SPLIT => {
                    let g = SplitSlice::new(&mut self.g[..active]);
                    let out: [Mutex<(f64, usize)>; 2] = Default::default();
                    // SAFETY: `split` hands the two threads disjoint ranges.
                    p.split(0..active, &|part, r| {
                        *out[part].lock().expect("result slot") = update(unsafe { g.range(r.clone()) }, r)
                    });
                    let [a, b] = out.map(|m| m.into_inner().expect("result slot"));
                    later_max(a, Some(b))
                }
                _ => update(&mut self.g[..active], 0..active),
            });
        }
        let n = self.n();
        for (k, was_upper) in [(i, was_upper_i), (j, was_upper_j)] {
            if was_upper != (self.bound[k] == Bound::Upper) {
                let sign = if was_upper { -c } else { c };
                self.load_column(k, n);
                for (gb, q) in self.g_bar.iter_mut().zip(self.cache.get(k, n)) {
                    *gb += sign * *q as f64;
                }
            }
        }
    }

    /// The bias: the mean of y_i g_i over free points, or the middle of its feasible
    /// interval when none is free.
    fn rho(&self) -> f64 {
        let (mut ub, mut lb) = (f64::INFINITY, f64::NEG_INFINITY);
        let (mut free, mut sum_free) = (0usize, 0.0);
        for i in 0..self.active {
            let yg = self.y[i] * self.g[i];
            match self.bound[i] {
                Bound::Upper => {
                    if self.y[i] < 0.0 {
                        ub = ub.min(yg)
                    } else {
                        lb = lb.max(yg)
                    }
                }
                Bound::Lower => {
                    if self.y[i] > 0.0 {
                        ub = ub.min(yg)
                    } else {
                        lb = lb.max(yg)
                    }
                }
                Bound::Free => {
                    free += 1;
                    sum_free += yg;
                }
            }
        }
        if free > 0 {
            sum_free / free as f64
        } else {
            (ub + lb) / 2.0
        }
    }
}

/// I_up: the points whose a can move in the direction that raises y_t a_t.
fn in_up(y: f64, bound: Bound) -> bool {
    if y > 0.0 {
        bound != Bound::Upper
    } else {
        bound != Bound::Lower
    }
}

/// I_low: those that can lower it.
fn in_low(y: f64, bound: Bound) -> bool {
    if y > 0.0 {
        bound != Bound::Lower
    } else {
        bound != Bound::Upper
    }
}

/// Combines the maxima of two halves as one sequential `>=` pass would: the later half
/// wins ties.
fn later_max(first: (f64, usize), second: Option<(f64, usize)>) -> (f64, usize) {
    match second {
        Some(b) if b.0 >= first.0 => b,
        _ => first,
    }
}

#[cfg(test)]
mod tests;

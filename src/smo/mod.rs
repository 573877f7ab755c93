//! The SMO solver of LIBSVM's duals, one core for every formulation:
//!
//!   min 1/2 a'Qa + p'a  subject to  0 <= a_t <= C_t,  y'a = const,
//!   Q_ts = y_t y_s k(x_point(t), x_point(t')),
//!
//! and, for the nu formulations, e'a fixed within each sign as well (LIBSVM's
//! `Solver_NU`: working pairs of one sign, its own shrinking and rho/r). A
//! [`Problem`] is the data of one formulation (signs, linear term, bounds, start, one or
//! two variables per point); `estimator::svm` builds C-SVC, nu-SVC, one-class,
//! epsilon-SVR and nu-SVR problems exactly as LIBSVM's `solve_*` functions do.
//!
//! The solver follows LIBSVM step for step: second-order working-set selection (Fan,
//! Chen & Lin, JMLR 2005, "WSS 2"), the tau safeguard for non-PSD kernels, the same
//! shrinking schedule and ties, Q cached as f32 (`columns.rs`), so that it reaches
//! scikit-learn's solutions with the same iteration counts. The speed comes from
//! computing kernel columns with SIMD across cores, from passes four points per vector
//! (`simd.rs`), and from splitting long passes with a partner thread.
//!
//! Large SVR problems take a batched working set instead (`batched.rs`, ThunderSVM's):
//! kernel rows by blocks, many steps on them, gradients by block products; the same
//! optimum to `tol` by another path.

mod batched;
mod cache;
mod columns;
mod select;
mod shrinking;
mod simd;

use crate::kernel::column::ColumnKernel;
use crate::linalg::Parallelism;
use crate::partner::{with_partner, Partner, SplitSlice};
use columns::Columns;
use std::ops::Range;
use std::sync::Mutex;

/// Where the curvature of the pair is not positive (non-PSD kernels), LIBSVM's stand-in.
const TAU: f64 = 1e-12;

/// Passes over fewer points stay on one thread: the hand-off would cost more than half
/// the pass.
const MIN_SPLIT: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SmoOptions {
    /// Stop when the maximal KKT violation m(a) - M(a) is at most tol.
    pub tol: f64,
    /// None: LIBSVM's own safety cap, max(10^7, 100 l).
    pub max_iter: Option<u64>,
    /// Bytes for cached kernel columns (at least two full columns are always allowed).
    pub cache_bytes: usize,
    pub shrinking: bool,
    pub par: Parallelism,
}

/// One dual problem: per variable its sign y_t (+1 or -1), linear term p_t, upper bound
/// C_t and (feasible) start a_t. With as many variables as the kernel has points,
/// variable t is point t; with twice as many, variables t and t + n are both point t
/// (SVR's a and a*).
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub y: Vec<f64>,
    pub p: Vec<f64>,
    pub c: Vec<f64>,
    pub start: Vec<f64>,
    /// LIBSVM's `Solver_NU` (nu-SVC, nu-SVR) instead of `Solver`.
    pub nu: bool,
}

impl Problem {
    /// C-SVC's dual for labels `y` (+-1) and per-variable bounds `c` (C times the class
    /// and sample weights): p = -1, a = 0.
    pub fn c_svc(y: Vec<f64>, c: Vec<f64>) -> Problem {
        let l = y.len();
        Problem { y, p: vec![-1.0; l], c, start: vec![0.0; l], nu: false }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct SmoSolution {
    /// a_t, in the order of the problem's variables.
    pub alpha: Vec<f64>,
    /// The bias term: f(x) = sum_t y_t a_t k(x_t, x) - rho (before a formulation's scaling).
    pub rho: f64,
    /// `Solver_NU`'s r (0 for the other formulations).
    pub r: f64,
    pub iterations: u64,
    /// False when max_iter stopped it first.
    pub converged: bool,
    /// The dual objective 1/2 a'Qa + p'a at the solution.
    pub objective: f64,
}

impl SmoSolution {
    /// y_t a_t per variable.
    pub fn coef(&self, y: &[f64]) -> Vec<f64> {
        self.alpha.iter().zip(y).map(|(a, y)| a * y).collect()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancelled;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Bound {
    Lower,
    Upper,
    Free,
}

/// The fewest bytes of kernel values a solve over `points` points holds whatever its
/// cache budget: two columns (f64 scratch included) on LIBSVM's path, the smallest
/// working set's rows and its square block on the batched one.
pub fn cache_floor_bytes(points: usize) -> usize {
    if points >= batched::MIN_POINTS {
        batched::MIN_WORKING_SET * 4 * points + 4 * batched::MAX_WORKING_SET * batched::MAX_WORKING_SET
    } else {
        8 * points
    }
}

/// Solves `problem` over the points of `kernel`. `cancelled` is polled every few
/// hundred iterations.
pub fn solve(
    kernel: ColumnKernel,
    problem: &Problem,
    opts: &SmoOptions,
    cancelled: &dyn Fn() -> bool,
) -> Result<SmoSolution, Cancelled> {
    let l = problem.y.len();
    assert!(kernel.n() == l || 2 * kernel.n() == l, "one or two variables per point");
    assert!(problem.p.len() == l && problem.c.len() == l && problem.start.len() == l);
    if batched::chosen(kernel.n(), l, opts) {
        return batched::solve(kernel, problem, opts, cancelled);
    }
    // Every pass of an iteration is split between this thread and a partner pinned to
    // the other half of the points (each core keeps its half of the data in its cache).
    if opts.par.is_parallel() && l >= MIN_SPLIT {
        with_partner(|p| run(kernel, problem, opts, cancelled, Some(p)))
    } else {
        run(kernel, problem, opts, cancelled, None)
    }
}

fn run(
    kernel: ColumnKernel,
    problem: &Problem,
    opts: &SmoOptions,
    cancelled: &dyn Fn() -> bool,
    partner: Option<&Partner<'_>>,
) -> Result<SmoSolution, Cancelled> {
    let n = problem.y.len();
    let mut s = Solver::new(kernel, problem, opts, partner);
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
    let (rho, r) = if problem.nu { s.rho_nu() } else { (s.rho(), 0.0) };
    let objective = (0..n).map(|i| s.alpha[i] * (s.g[i] + s.p[i])).sum::<f64>() / 2.0;
    let mut alpha = vec![0.0; n];
    for t in 0..n {
        alpha[s.original[t]] = s.alpha[t];
    }
    Ok(SmoSolution { alpha, rho, r, iterations: iter, converged, objective })
}

/// The solver's state. Every per-point array is in position order: shrinking moves
/// inactive points to the end (`original` maps positions back), so the active set is the
/// prefix 0..active and the cache stores column prefixes.
struct Solver<'p> {
    columns: Columns,
    partner: Option<&'p Partner<'p>>,
    tol: f64,
    nu: bool,
    y: Vec<f64>,
    /// Linear term and upper bound of each variable.
    p: Vec<f64>,
    c: Vec<f64>,
    alpha: Vec<f64>,
    bound: Vec<Bound>,
    /// 1.0 where the point is in I_up / I_low (from y and its bound), for the vector
    /// passes (`simd.rs`).
    up: Vec<f64>,
    low: Vec<f64>,
    /// Gradient of the objective: (Q a)_i + p_i.
    g: Vec<f64>,
    /// sum over a_j = C_j of C_j Q_ij: lets shrunk gradients be rebuilt from free points
    /// only.
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
    fn new(kernel: ColumnKernel, problem: &Problem, opts: &SmoOptions, partner: Option<&'p Partner<'p>>) -> Solver<'p> {
        let n = problem.y.len();
        let columns = Columns::new(kernel, n, opts.cache_bytes);
        let qd = columns.diagonal(n);
        let mut s = Solver {
            columns,
            partner,
            tol: opts.tol,
            nu: problem.nu,
            y: problem.y.clone(),
            p: problem.p.clone(),
            c: problem.c.clone(),
            alpha: vec![0.0; n],
            bound: vec![Bound::Lower; n],
            up: vec![0.0; n],
            low: vec![0.0; n],
            g: problem.p.clone(),
            g_bar: vec![0.0; n],
            qd,
            original: (0..n).collect(),
            active: n,
            unshrunk: false,
            next_i: None,
            scratch: Vec::new(),
        };
        s.start_at(&problem.start);
        s
    }

    /// Sets a = start, with the gradient p + Q a and g_bar from the variables at their
    /// upper bound, as LIBSVM initialises: columns of the nonzero a only.
    fn start_at(&mut self, start: &[f64]) {
        let n = self.n();
        self.alpha.copy_from_slice(start);
        for t in 0..n {
            self.set_bound(t);
        }
        for t in 0..n {
            if self.bound[t] == Bound::Lower {
                continue;
            }
            let (a_t, upper, c_t) = (self.alpha[t], self.bound[t] == Bound::Upper, self.c[t]);
            self.load_column(t, n, 0);
            let q_t = self.columns.get(t, n, 0);
            for (g, q) in self.g.iter_mut().zip(q_t) {
                *g += a_t * *q as f64;
            }
            if upper {
                for (gb, q) in self.g_bar.iter_mut().zip(q_t) {
                    *gb += c_t * *q as f64;
                }
            }
        }
    }

    fn n(&self) -> usize {
        self.y.len()
    }

    /// Makes Q_i[0..len] available in `slot` (0 or 1: the pair's two columns).
    fn load_column(&mut self, i: usize, len: usize, slot: usize) {
        let Solver { columns, y, scratch, partner, .. } = self;
        columns.load(i, len, slot, y, scratch, *partner);
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

    /// max of -y_t g_t over I_up within `r` (the last maximum, as LIBSVM's `>=`), over
    /// the variables of sign `only` (0: all).
    fn max_up(&self, r: Range<usize>, only: f64) -> (f64, usize) {
        simd::max_up(&self.y, &self.g, &self.up, r, only)
    }

    /// Over I_low within `r` (the variables of sign `only`, 0: all): max of y_j g_j, and
    /// the j minimising the second-order objective change with i (the last minimum, as
    /// LIBSVM's `<=`): (gmax2, j, change). `qd_i`, `y_i` describe i, `q_i` its column.
    fn min_low(
        &self,
        r: Range<usize>,
        (gmax, qd_i, y_i): (f64, f64, f64),
        q_i: &[f32],
        only: f64,
    ) -> (f64, usize, f64) {
        simd::min_low(&self.y, &self.g, &self.low, &self.qd, q_i, r, (gmax, qd_i, y_i), TAU, only)
    }

    fn set_bound(&mut self, i: usize) {
        self.bound[i] = if self.alpha[i] >= self.c[i] {
            Bound::Upper
        } else if self.alpha[i] <= 0.0 {
            Bound::Lower
        } else {
            Bound::Free
        };
        self.up[i] = f64::from(u8::from(in_up(self.y[i], self.bound[i])));
        self.low[i] = f64::from(u8::from(in_low(self.y[i], self.bound[i])));
    }

    /// The analytic two-variable step on (i, j), clipped to the box, then the gradient
    /// update over the active set.
    fn update_pair(&mut self, i: usize, j: usize) {
        let active = self.active;
        self.load_column(i, active, 0);
        self.load_column(j, active, 1);
        let (c_i, c_j) = (self.c[i], self.c[j]);
        let (old_i, old_j) = (self.alpha[i], self.alpha[j]);
        let q_ij = self.columns.get(i, active, 0)[j] as f64;
        let (ai, aj) = pair_step(
            (self.y[i], self.y[j]),
            (old_i, old_j),
            (c_i, c_j),
            (self.g[i], self.g[j]),
            self.qd[i] + self.qd[j],
            q_ij,
        );
        self.alpha[i] = ai;
        self.alpha[j] = aj;
        let (di, dj) = (ai - old_i, aj - old_j);
        let (was_upper_i, was_upper_j) = (self.bound[i] == Bound::Upper, self.bound[j] == Bound::Upper);
        self.set_bound(i);
        self.set_bound(j);
        {
            // The gradient update, and in the same pass the next iteration's i.
            let (q_i, q_j) = self.columns.pair(i, j, active);
            let (y, up) = (&self.y, &self.up);
            let update =
                |g: &mut [f64], r: Range<usize>| -> (f64, usize) { simd::update(g, q_i, q_j, (di, dj), y, up, r) };
            let best = match self.partner {
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
            };
            // The nu solver picks one i per sign: the fused maximum does not serve it.
            self.next_i = (!self.nu).then_some(best);
        }
        let n = self.n();
        for (slot, (k, was_upper)) in [(i, was_upper_i), (j, was_upper_j)].into_iter().enumerate() {
            if was_upper != (self.bound[k] == Bound::Upper) {
                let c_k = self.c[k];
                self.load_column(k, n, slot);
                // LIBSVM subtracts or adds C_k Q_k term by term.
                let q_k = self.columns.get(k, n, slot);
                if was_upper {
                    self.g_bar.iter_mut().zip(q_k).for_each(|(gb, q)| *gb -= c_k * *q as f64);
                } else {
                    self.g_bar.iter_mut().zip(q_k).for_each(|(gb, q)| *gb += c_k * *q as f64);
                }
            }
        }
    }
}

/// LIBSVM's analytic step on a pair (i, j): the new (a_i, a_j) from their signs, values,
/// bounds and gradients, K_ii + K_jj (`qd`) and Q_ij, clipped to the box along the
/// constraint's line.
fn pair_step(
    (y_i, y_j): (f64, f64),
    (old_i, old_j): (f64, f64),
    (c_i, c_j): (f64, f64),
    (g_i, g_j): (f64, f64),
    qd: f64,
    q_ij: f64,
) -> (f64, f64) {
    let (mut ai, mut aj) = (old_i, old_j);
    if y_i != y_j {
        let quad = qd + 2.0 * q_ij;
        let delta = (-g_i - g_j) / if quad > 0.0 { quad } else { TAU };
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
        if diff > c_i - c_j {
            if ai > c_i {
                ai = c_i;
                aj = c_i - diff;
            }
        } else if aj > c_j {
            aj = c_j;
            ai = c_j + diff;
        }
    } else {
        let quad = qd - 2.0 * q_ij;
        let delta = (g_i - g_j) / if quad > 0.0 { quad } else { TAU };
        let sum = ai + aj;
        ai -= delta;
        aj += delta;
        if sum > c_i {
            if ai > c_i {
                ai = c_i;
                aj = sum - c_i;
            }
        } else if aj < 0.0 {
            aj = 0.0;
            ai = sum;
        }
        if sum > c_j {
            if aj > c_j {
                aj = c_j;
                ai = sum - c_j;
            }
        } else if ai < 0.0 {
            ai = 0.0;
            aj = sum;
        }
    }
    (ai, aj)
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

//! A batched working set for large problems (ThunderSVM's CSMO: Wen, Shi, Li, He & Chen,
//! "ThunderSVM: a fast SVM library on GPUs and CPUs", JMLR 2018).
//!
//! LIBSVM's path (`mod.rs`) takes two kernel columns per step, one at a time; past some
//! tens of thousands of points the column cache thrashes and every step streams the
//! whole point set from memory for two columns. Here the solver keeps a working set of
//! q variables (q from the cache budget, at most [`MAX_WORKING_SET`]) and:
//! 1. computes the kernel rows of the set's newest quarter in one block
//!    ([`ColumnKernel::rows`]: a matrix product, on both cores), keeping the other
//!    members' rows from the rounds before;
//! 2. runs LIBSVM's own steps (second-order pair selection, the same analytic step and
//!    the same nu variant) on the set alone, with its q x q block of Q, until the set's
//!    own violation is a tenth of the whole problem's (or `tol`);
//! 3. adds the set's change to every gradient by one block product;
//! 4. stops on LIBSVM's rule over the full gradient: the maximal violation at most `tol`.
//!
//! The optimum is the same problem's (to `tol`); the path is not LIBSVM's, so
//! `iterations` counts the pair steps taken inside the working sets.
//!
//! Where it is taken ([`chosen`]), measured at 20,000 to 50,000 points (d = 20, rbf,
//! 200 MB cache, noisy labels; scripts/bench_smo.py): epsilon-SVR 1.4x (20,000) and 2.1x
//! (50,000) faster than LIBSVM's path, which computes each point's column for both of its
//! variables; a binary C-SVC at 50,000 points 5.4 s against LIBSVM's path's 5.0 s, and
//! pairs of 20,000 points (four classes at 40,000) 7.8 s against 6.5 s. Without shrinking
//! every round computes rows over all points and updates every gradient, where LIBSVM's
//! path shrinks most of a noisy problem's bounded variables away; so one-variable
//! problems keep LIBSVM's path. LIBSVM's shrinking was tried here (rows over the active
//! points only, G_bar kept from whole rows of the variables that reached or left C): at
//! 50,000 noisy points the active set averaged 63% of the points, and G_bar's whole rows
//! (30,616 of them) cost more than the shrinking saved, 9.6 s against 5.4 s.

use super::select::{rho, rho_nu};
use super::{in_low, in_up, pair_step, Bound, Cancelled, Problem, SmoOptions, SmoSolution, TAU};
use crate::kernel::column::ColumnKernel;
use crate::linalg::Parallelism;
use rayon::prelude::*;

/// Points from which the batched path is taken (when the cache cannot hold the kernel
/// whole). Below it LIBSVM's path is as fast, and it keeps LIBSVM's iteration counts.
pub(super) const MIN_POINTS: usize = 20_000;
/// Working-set size bounds: large enough that a block of rows runs at the product rate,
/// small enough that the set's own SMO steps stay cheap.
pub(super) const MAX_WORKING_SET: usize = 1024;
pub(super) const MIN_WORKING_SET: usize = 32;
/// A round replaces a quarter of the working set (the longest in it); the rest keep their
/// rows. At 50,000 points, against half (ThunderSVM's): 176 rounds instead of 137 but a
/// third less of the kernel computed, 5.4 s against 6.6 s; an eighth took 311 rounds.
const NEW_SHARE: usize = 4;
/// A round's own steps stop at this share of the whole problem's violation (ThunderSVM's
/// choice; a hundredth saved 5% of the rounds and cost as many steps more).
const LOCAL_SHARE: f64 = 0.1;
/// Gradient entries per parallel task of the block update.
const CHUNK: usize = 4096;

/// Whether a problem takes this path: two variables per point (epsilon- and nu-SVR), at
/// least [`MIN_POINTS`] points and a kernel larger than the cache (module docs).
pub(super) fn chosen(points: usize, variables: usize, opts: &SmoOptions) -> bool {
    variables == 2 * points
        && points >= MIN_POINTS
        && points.saturating_mul(points).saturating_mul(4) > opts.cache_bytes
}

/// The working set's size for `variables` over `points` points within `cache_bytes`
/// of f32 rows (even: two halves).
fn working_set(variables: usize, points: usize, cache_bytes: usize) -> usize {
    let fit = cache_bytes / (4 * points.max(1));
    (fit.clamp(MIN_WORKING_SET, MAX_WORKING_SET).min(variables) / 2 * 2).max(2)
}

struct State {
    points: usize,
    nu: bool,
    y: Vec<f64>,
    p: Vec<f64>,
    c: Vec<f64>,
    alpha: Vec<f64>,
    g: Vec<f64>,
    bound: Vec<Bound>,
    qd: Vec<f64>,
    par: Parallelism,
}

pub(super) fn solve(
    kernel: ColumnKernel,
    problem: &Problem,
    opts: &SmoOptions,
    cancelled: &dyn Fn() -> bool,
) -> Result<SmoSolution, Cancelled> {
    let l = problem.y.len();
    let points = kernel.n();
    let mut s = State {
        points,
        nu: problem.nu,
        y: problem.y.clone(),
        p: problem.p.clone(),
        c: problem.c.clone(),
        alpha: vec![0.0; l],
        g: problem.p.clone(),
        bound: vec![Bound::Lower; l],
        qd: (0..l).map(|t| kernel.diag(t % points)).collect(),
        par: opts.par,
    };
    let q = working_set(l, points, opts.cache_bytes);
    let mut rows = vec![0f32; q * points];
    // The start: g = p + Q a for the nonzero a, a block of rows at a time.
    let nonzero: Vec<usize> = (0..l).filter(|&t| problem.start[t] != 0.0).collect();
    for block in nonzero.chunks(q) {
        let at: Vec<usize> = block.iter().map(|&t| t % points).collect();
        kernel.rows(&at, &mut rows[..block.len() * points], opts.par);
        let delta: Vec<(usize, f64)> = block.iter().map(|&t| (t, problem.start[t])).collect();
        s.add_to_gradient(&rows, &delta);
    }
    s.alpha.copy_from_slice(&problem.start);
    for t in 0..l {
        s.bound[t] = bound_of(s.alpha[t], s.c[t]);
    }

    let cap = opts.max_iter.unwrap_or((100 * l as u64).max(10_000_000));
    // Slots 0..q of the working set, by halves: `fresh` is the half computed last.
    let mut set: Vec<Option<usize>> = vec![None; q];
    let mut in_set = vec![false; l];
    let mut ring = 0usize;
    let fresh_count = (q / NEW_SHARE).max(1);
    let (mut iter, mut converged) = (0u64, true);
    loop {
        let violation = s.violation();
        if violation < opts.tol {
            break;
        }
        if iter >= cap {
            converged = false;
            break;
        }
        if cancelled() {
            return Err(Cancelled);
        }
        // The oldest slots of the ring take the new variables (every slot at first).
        let first = set.iter().all(Option::is_none);
        let count = if first { q } else { fresh_count };
        let fill: Vec<usize> = (0..count).map(|k| (ring + k) % q).collect();
        for &slot in &fill {
            if let Some(t) = set[slot].take() {
                in_set[t] = false;
            }
        }
        let picked = s.select(fill.len(), &in_set);
        if picked.is_empty() {
            break;
        }
        for (&slot, &t) in fill.iter().zip(&picked) {
            set[slot] = Some(t);
            in_set[t] = true;
        }
        // At most two runs of consecutive slots (the ring wraps once).
        let mut k = 0;
        while k < picked.len() {
            let slot = fill[k];
            let run = (q - slot).min(picked.len() - k);
            let at: Vec<usize> = picked[k..k + run].iter().map(|&t| t % points).collect();
            kernel.rows(&at, &mut rows[slot * points..(slot + run) * points], opts.par);
            k += run;
        }
        ring = (ring + picked.len()) % q;

        let slots: Vec<usize> = (0..q).filter(|&k| set[k].is_some()).collect();
        let members: Vec<usize> = slots.iter().map(|&k| set[k].expect("a filled slot")).collect();
        let local_tol = opts.tol.max(LOCAL_SHARE * violation);
        let (steps, delta) = s.local(&rows, &slots, &members, local_tol, cap - iter);
        iter += steps;
        if delta.is_empty() {
            // The set cannot move (ties at the tolerance's edge): LIBSVM's rule holds
            // within round-off.
            break;
        }
        let by_slot: Vec<(usize, f64)> = delta.iter().map(|&(k, d)| (slots[k], d)).collect();
        s.add_to_gradient_slots(&rows, &by_slot, &set);
    }
    let (rho, r) = if s.nu { rho_nu(&s.y, &s.g, &s.bound) } else { (rho(&s.y, &s.g, &s.bound), 0.0) };
    let objective = (0..l).map(|t| s.alpha[t] * (s.g[t] + s.p[t])).sum::<f64>() / 2.0;
    Ok(SmoSolution { alpha: s.alpha, rho, r, iterations: iter, converged, objective })
}

fn bound_of(a: f64, c: f64) -> Bound {
    if a >= c {
        Bound::Upper
    } else if a <= 0.0 {
        Bound::Lower
    } else {
        Bound::Free
    }
}

/// The sign groups a pair is chosen within: every variable, or (nu) each sign apart.
fn groups(nu: bool) -> &'static [f64] {
    if nu {
        &[1.0, -1.0]
    } else {
        &[0.0]
    }
}

impl State {
    /// LIBSVM's stopping quantity over every variable: the largest over the sign groups
    /// of max_{up} -y g - min_{low} -y g.
    fn violation(&self) -> f64 {
        let mut worst = f64::NEG_INFINITY;
        for &sign in groups(self.nu) {
            let (mut up, mut low) = (f64::NEG_INFINITY, f64::INFINITY);
            for ((&y, &g), &b) in self.y.iter().zip(&self.g).zip(&self.bound) {
                if sign != 0.0 && y != sign {
                    continue;
                }
                if in_up(y, b) {
                    up = up.max(-y * g);
                }
                if in_low(y, b) {
                    low = low.min(-y * g);
                }
            }
            worst = worst.max(up - low);
        }
        worst
    }

    /// Up to `count` variables not in the set, the most violating first: alternately the
    /// largest -y g of I_up and the smallest of I_low (per sign for nu).
    fn select(&self, count: usize, in_set: &[bool]) -> Vec<usize> {
        let mut lists: Vec<Vec<(f64, usize)>> = Vec::new();
        for &sign in groups(self.nu) {
            let of_sign = |t: &usize| sign == 0.0 || self.y[*t] == sign;
            let mut up: Vec<(f64, usize)> = (0..self.y.len())
                .filter(|t| of_sign(t) && !in_set[*t] && in_up(self.y[*t], self.bound[*t]))
                .map(|t| (-self.y[t] * self.g[t], t))
                .collect();
            let mut low: Vec<(f64, usize)> = (0..self.y.len())
                .filter(|t| of_sign(t) && !in_set[*t] && in_low(self.y[*t], self.bound[*t]))
                .map(|t| (self.y[t] * self.g[t], t))
                .collect();
            for list in [&mut up, &mut low] {
                let keep = count.min(list.len());
                if keep < list.len() {
                    list.select_nth_unstable_by(keep, |a, b| b.0.total_cmp(&a.0));
                    list.truncate(keep);
                }
                list.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            }
            lists.push(up);
            lists.push(low);
        }
        let mut taken = vec![false; self.y.len()];
        let mut picked = Vec::with_capacity(count);
        let mut at = vec![0usize; lists.len()];
        while picked.len() < count {
            let mut any = false;
            for (list, pos) in lists.iter().zip(at.iter_mut()) {
                while *pos < list.len() && taken[list[*pos].1] {
                    *pos += 1;
                }
                if *pos < list.len() && picked.len() < count {
                    let t = list[*pos].1;
                    taken[t] = true;
                    picked.push(t);
                    any = true;
                }
            }
            if !any {
                break;
            }
        }
        picked
    }

    /// LIBSVM's steps on the working set alone (`members`, whose rows are in `slots`),
    /// until its own violation is below `local_tol` or `budget` steps. Returns the steps
    /// and each changed member's (index into members, change of a); updates a and bounds.
    fn local(
        &mut self,
        rows: &[f32],
        slots: &[usize],
        members: &[usize],
        local_tol: f64,
        budget: u64,
    ) -> (u64, Vec<(usize, f64)>) {
        let m = members.len();
        let n = self.points;
        // The set's block of Q, signed, as LIBSVM's f32 values.
        let at: Vec<usize> = members.iter().map(|&t| t % n).collect();
        let signs: Vec<f32> = members.iter().map(|&t| self.y[t] as f32).collect();
        let mut qww = vec![0f32; m * m];
        for ((out, &sa), &ya) in qww.chunks_exact_mut(m).zip(slots).zip(&signs) {
            let row = &rows[sa * n..(sa + 1) * n];
            for ((o, &p), &yb) in out.iter_mut().zip(&at).zip(&signs) {
                *o = ya * yb * row[p];
            }
        }
        let mut set = Local {
            y: members.iter().map(|&t| self.y[t]).collect(),
            c: members.iter().map(|&t| self.c[t]).collect(),
            qd: members.iter().map(|&t| self.qd[t]).collect(),
            a: members.iter().map(|&t| self.alpha[t]).collect(),
            g: members.iter().map(|&t| self.g[t]).collect(),
            up: vec![false; m],
            low: vec![false; m],
        };
        for k in 0..m {
            set.flags(k);
        }
        let old = set.a.clone();
        let limit = budget.min(20 * m as u64 + 100);
        let mut steps = 0u64;
        while steps < limit {
            let Some((i, j)) = set.pair(self.nu, &qww, local_tol) else { break };
            let (ai, aj) = pair_step(
                (set.y[i], set.y[j]),
                (set.a[i], set.a[j]),
                (set.c[i], set.c[j]),
                (set.g[i], set.g[j]),
                set.qd[i] + set.qd[j],
                qww[i * m + j] as f64,
            );
            steps += 1;
            let (di, dj) = (ai - set.a[i], aj - set.a[j]);
            set.a[i] = ai;
            set.a[j] = aj;
            set.flags(i);
            set.flags(j);
            let (qi, qj) = (&qww[i * m..(i + 1) * m], &qww[j * m..(j + 1) * m]);
            for ((g, &a), &b) in set.g.iter_mut().zip(qi).zip(qj) {
                *g += a as f64 * di + b as f64 * dj;
            }
        }
        let mut delta = Vec::new();
        for (k, &t) in members.iter().enumerate() {
            if set.a[k] != old[k] {
                self.alpha[t] = set.a[k];
                self.bound[t] = bound_of(set.a[k], self.c[t]);
                delta.push((k, set.a[k] - old[k]));
            }
        }
        (steps, delta)
    }

    /// g_t += y_t sum_k delta_k y_k K(point(k), point(t)) for every variable t, the rows
    /// of the changed variables being `rows` in the changed variables' order.
    fn add_to_gradient(&mut self, rows: &[f32], delta: &[(usize, f64)]) {
        let order: Vec<(usize, f64)> = delta.iter().enumerate().map(|(k, &(t, d))| (k, d * self.y[t])).collect();
        self.block_update(rows, &order);
    }

    /// The same, the rows in the working set's `slots`.
    fn add_to_gradient_slots(&mut self, rows: &[f32], by_slot: &[(usize, f64)], set: &[Option<usize>]) {
        let order: Vec<(usize, f64)> =
            by_slot.iter().map(|&(slot, d)| (slot, d * self.y[set[slot].expect("a changed slot is filled")])).collect();
        self.block_update(rows, &order);
    }

    /// g_t += y_t sum over (row, w) of w K_row(point(t)), split across cores.
    fn block_update(&mut self, rows: &[f32], weighted: &[(usize, f64)]) {
        let n = self.points;
        let y = &self.y;
        let update = |start: usize, part: &mut [f64]| {
            let mut acc = vec![0.0; part.len()];
            for &(row, w) in weighted {
                let r = &rows[row * n..(row + 1) * n];
                // Variables t and t + n (SVR) share point t: a chunk is at most two runs
                // of consecutive points.
                let mut k = 0;
                while k < acc.len() {
                    let p = (start + k) % n;
                    let run = (n - p).min(acc.len() - k);
                    for (a, v) in acc[k..k + run].iter_mut().zip(&r[p..p + run]) {
                        *a += w * *v as f64;
                    }
                    k += run;
                }
            }
            for ((g, a), t) in part.iter_mut().zip(&acc).zip(start..) {
                *g += y[t] * a;
            }
        };
        if self.par.is_parallel() && self.g.len() > CHUNK {
            self.g.par_chunks_mut(CHUNK).enumerate().for_each(|(c, part)| update(c * CHUNK, part));
        } else {
            update(0, &mut self.g);
        }
    }
}

/// A working set's own copy of its variables, contiguous, for the steps inside it.
struct Local {
    y: Vec<f64>,
    c: Vec<f64>,
    qd: Vec<f64>,
    a: Vec<f64>,
    g: Vec<f64>,
    up: Vec<bool>,
    low: Vec<bool>,
}

impl Local {
    fn flags(&mut self, k: usize) {
        let b = bound_of(self.a[k], self.c[k]);
        self.up[k] = in_up(self.y[k], b);
        self.low[k] = in_low(self.y[k], b);
    }

    /// LIBSVM's second-order pair (`Solver`'s, or `Solver_NU`'s within each sign), or
    /// None when the set's violation is below `tol`.
    fn pair(&self, nu: bool, qww: &[f32], tol: f64) -> Option<(usize, usize)> {
        let m = self.y.len();
        let mut best: Option<(f64, usize, usize)> = None;
        let mut violation = f64::NEG_INFINITY;
        for &sign in groups(nu) {
            let mut i = None;
            let mut gmax = f64::NEG_INFINITY;
            for k in 0..m {
                if self.up[k] && (sign == 0.0 || self.y[k] == sign) && -self.y[k] * self.g[k] >= gmax {
                    gmax = -self.y[k] * self.g[k];
                    i = Some(k);
                }
            }
            let mut gmax2 = f64::NEG_INFINITY;
            let qi = i.map(|i| &qww[i * m..(i + 1) * m]);
            for k in 0..m {
                if !self.low[k] || (sign != 0.0 && self.y[k] != sign) {
                    continue;
                }
                let yg = self.y[k] * self.g[k];
                gmax2 = gmax2.max(yg);
                let grad_diff = gmax + yg;
                if let (Some(i), Some(qi)) = (i, qi) {
                    if grad_diff > 0.0 {
                        let quad = self.qd[i] + self.qd[k] - 2.0 * self.y[i] * self.y[k] * qi[k] as f64;
                        let obj = -(grad_diff * grad_diff) / if quad > 0.0 { quad } else { TAU };
                        if best.is_none_or(|b| obj <= b.0) {
                            best = Some((obj, i, k));
                        }
                    }
                }
            }
            violation = violation.max(gmax + gmax2);
        }
        if violation < tol {
            return None;
        }
        best.map(|(_, i, j)| (i, j))
    }
}

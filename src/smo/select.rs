//! Working-set selection and the bias, for both of LIBSVM's solvers: `Solver` (one pair
//! from all variables, rho) and `Solver_NU` (a pair within one sign, rho and r from the
//! free variables of each sign).

use super::{later_max, Bound, Solver};

impl Solver<'_> {
    /// The next working pair, or None when the active set is optimal within tol.
    pub(super) fn select_working_set(&mut self) -> Option<(usize, usize)> {
        if self.nu {
            self.select_nu()
        } else {
            self.select_standard()
        }
    }

    /// max -y_t g_t over I_up of sign `only` (0: every variable), split with the partner.
    fn first_order(&self, only: f64) -> (f64, usize) {
        let (first, second) = self.halves(0..self.active, &|r| self.max_up(r, only));
        later_max(first, second)
    }

    /// The second-order pick of j for i (over the variables of sign `only`): (gmax2, j,
    /// change), halves combined as one scan would (the later on ties).
    fn second_order(&self, i: usize, gmax: f64, q_i: &[f32], only: f64) -> (f64, usize, f64) {
        let pair = (gmax, self.qd[i], self.y[i]);
        let (first, second) = self.halves(0..self.active, &|r| self.min_low(r, pair, q_i, only));
        match second {
            Some(b) if b.1 != usize::MAX && b.2 <= first.2 => (first.0.max(b.0), b.1, b.2),
            Some(b) => (first.0.max(b.0), first.1, first.2),
            None => first,
        }
    }

    /// WSS 2: i maximises -y_i g_i over I_up; j minimises the second-order gain estimate
    /// over I_low among those violating with i. None when the gap is below tol.
    fn select_standard(&mut self) -> Option<(usize, usize)> {
        let active = self.active;
        let (gmax, i) = match self.next_i.take() {
            Some(found) => found,
            None => self.first_order(0.0),
        };
        if i == usize::MAX {
            return None;
        }
        self.load_column(i, active, 0);
        let q_i = self.columns.get(i, active, 0);
        let (gmax2, j, _) = self.second_order(i, gmax, q_i, 0.0);
        if gmax + gmax2 < self.tol || j == usize::MAX {
            return None;
        }
        Some((i, j))
    }

    /// `Solver_NU`'s pick: the first-order i of each sign, j by the second-order rule
    /// among the variables of i's sign (both signs scanned, the last minimum overall),
    /// and the pair's i the one of j's sign.
    fn select_nu(&mut self) -> Option<(usize, usize)> {
        let active = self.active;
        let (gmaxp, ip) = self.first_order(1.0);
        let (gmaxn, in_) = self.first_order(-1.0);
        // A sign with no i still scans its j for gmax2 (grad_diff is -inf there, so no j
        // of that sign is picked, and its column is never read).
        let none = vec![0.0f32; active];
        if ip != usize::MAX {
            self.load_column(ip, active, 0);
        }
        if in_ != usize::MAX {
            self.load_column(in_, active, 1);
        }
        let column =
            |i: usize, slot: usize| if i == usize::MAX { &none[..] } else { self.columns.get(i, active, slot) };
        let pos = self.second_order_or_none(ip, gmaxp, column(ip, 0), 1.0);
        let neg = self.second_order_or_none(in_, gmaxn, column(in_, 1), -1.0);
        let j = match (pos.1, neg.1) {
            (usize::MAX, j) | (j, usize::MAX) => j,
            (a, b) if neg.2 < pos.2 || (neg.2 == pos.2 && b > a) => b,
            (a, _) => a,
        };
        if (gmaxp + pos.0).max(gmaxn + neg.0) < self.tol || j == usize::MAX {
            return None;
        }
        let i = if self.y[j] > 0.0 { ip } else { in_ };
        Some((i, j))
    }

    /// [`Solver::second_order`] for an i that may not exist (usize::MAX): the j scan
    /// then only yields gmax2.
    fn second_order_or_none(&self, i: usize, gmax: f64, q_i: &[f32], only: f64) -> (f64, usize, f64) {
        if i == usize::MAX {
            // qd_i and y_i are never used: grad_diff = -inf + y g is never > 0.
            let pair = (f64::NEG_INFINITY, 0.0, only);
            let (first, second) = self.halves(0..self.active, &|r| self.min_low(r, pair, q_i, only));
            return (second.map_or(first.0, |b| first.0.max(b.0)), usize::MAX, f64::INFINITY);
        }
        self.second_order(i, gmax, q_i, only)
    }

    /// The bias over the active variables ([`rho`]).
    pub(super) fn rho(&self) -> f64 {
        rho(&self.y[..self.active], &self.g[..self.active], &self.bound[..self.active])
    }

    /// `Solver_NU`'s (rho, r) over the active variables ([`rho_nu`]).
    pub(super) fn rho_nu(&self) -> (f64, f64) {
        rho_nu(&self.y[..self.active], &self.g[..self.active], &self.bound[..self.active])
    }
}

/// The bias: the mean of y_i g_i over free variables, or the middle of its feasible
/// interval when none is free.
pub(super) fn rho(y: &[f64], g: &[f64], bound: &[Bound]) -> f64 {
    let (mut ub, mut lb) = (f64::INFINITY, f64::NEG_INFINITY);
    let (mut free, mut sum_free) = (0usize, 0.0);
    for ((&y, &g), &b) in y.iter().zip(g).zip(bound) {
        let yg = y * g;
        match b {
            Bound::Upper => {
                if y < 0.0 {
                    ub = ub.min(yg)
                } else {
                    lb = lb.max(yg)
                }
            }
            Bound::Lower => {
                if y > 0.0 {
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

/// `Solver_NU`'s (rho, r) = ((r1 - r2) / 2, (r1 + r2) / 2), r1 and r2 the gradient's
/// level over the free variables of each sign (or the middle of its interval).
pub(super) fn rho_nu(y: &[f64], g: &[f64], bound: &[Bound]) -> (f64, f64) {
    let mut side = [(0usize, 0.0, f64::INFINITY, f64::NEG_INFINITY); 2]; // (free, sum, ub, lb)
    for ((&y, &g), &b) in y.iter().zip(g).zip(bound) {
        let s = &mut side[usize::from(y < 0.0)];
        match b {
            Bound::Upper => s.3 = s.3.max(g),
            Bound::Lower => s.2 = s.2.min(g),
            Bound::Free => {
                s.0 += 1;
                s.1 += g;
            }
        }
    }
    let level =
        |(free, sum, ub, lb): (usize, f64, f64, f64)| if free > 0 { sum / free as f64 } else { (ub + lb) / 2.0 };
    let (r1, r2) = (level(side[0]), level(side[1]));
    ((r1 - r2) / 2.0, (r1 + r2) / 2.0)
}

//! Shrinking, as LIBSVM does it: variables at a bound that are far from violating the
//! optimality conditions leave the active set (swapped to its end), and the gradient of
//! the inactive ones is rebuilt from g_bar before the solver stops or unshrinks. The nu
//! solver judges each sign against its own maxima.

use super::{Bound, Solver};

impl Solver<'_> {
    /// Rebuilds the gradient of the inactive points from g_bar and the free points.
    pub(super) fn reconstruct_gradient(&mut self) {
        self.next_i = None;
        let (n, active) = (self.n(), self.active);
        if active == n {
            return;
        }
        for j in active..n {
            self.g[j] = self.g_bar[j] + self.p[j];
        }
        let free: Vec<usize> = (0..active).filter(|&j| self.bound[j] == Bound::Free).collect();
        if free.len() * n > 2 * active * (n - active) {
            for i in active..n {
                self.load_column(i, active, 0);
                let q_i = self.columns.get(i, active, 0);
                // Term by term into g_i, as LIBSVM accumulates.
                let mut g_i = self.g[i];
                for &j in &free {
                    g_i += self.alpha[j] * q_i[j] as f64;
                }
                self.g[i] = g_i;
            }
        } else {
            for &i in &free {
                let a_i = self.alpha[i];
                self.load_column(i, n, 0);
                let q_i = self.columns.get(i, n, 0);
                for (g, q) in self.g[active..].iter_mut().zip(&q_i[active..]) {
                    *g += a_i * *q as f64;
                }
            }
        }
    }

    /// Whether a point at a bound is far enough from violating to leave the active set
    /// (LIBSVM's test, on the raw gradient).
    fn is_shrinkable(&self, i: usize, gmax1: f64, gmax2: f64) -> bool {
        let g = self.g[i];
        match self.bound[i] {
            Bound::Upper => -g > if self.y[i] > 0.0 { gmax1 } else { gmax2 },
            Bound::Lower => g > if self.y[i] > 0.0 { gmax2 } else { gmax1 },
            Bound::Free => false,
        }
    }

    pub(super) fn shrink(&mut self) {
        if self.nu {
            return self.shrink_nu();
        }
        self.next_i = None;
        let mut gmax1 = f64::NEG_INFINITY; // max -y_i g_i over I_up
        let mut gmax2 = f64::NEG_INFINITY; // max y_i g_i over I_low
        for t in 0..self.active {
            let yg = self.y[t] * self.g[t];
            let (up, low) = if self.y[t] > 0.0 {
                (self.bound[t] != Bound::Upper, self.bound[t] != Bound::Lower)
            } else {
                (self.bound[t] != Bound::Lower, self.bound[t] != Bound::Upper)
            };
            if up && -yg >= gmax1 {
                gmax1 = -yg;
            }
            if low && yg >= gmax2 {
                gmax2 = yg;
            }
        }
        if !self.unshrunk && gmax1 + gmax2 <= self.tol * 10.0 {
            self.unshrunk = true;
            self.reconstruct_gradient();
            self.active = self.n();
        }
        let mut i = 0;
        while i < self.active {
            if self.is_shrinkable(i, gmax1, gmax2) {
                self.active -= 1;
                while self.active > i {
                    if !self.is_shrinkable(self.active, gmax1, gmax2) {
                        self.swap(i, self.active);
                        break;
                    }
                    self.active -= 1;
                }
            }
            i += 1;
        }
    }

    /// `Solver_NU::do_shrinking`: the maxima of -g over I_up and of g over I_low, per
    /// sign (Gmax1, Gmax2 for y = +1; Gmax4, Gmax3 for y = -1).
    fn shrink_nu(&mut self) {
        self.next_i = None;
        let (mut g1, mut g2, mut g3, mut g4) =
            (f64::NEG_INFINITY, f64::NEG_INFINITY, f64::NEG_INFINITY, f64::NEG_INFINITY);
        for t in 0..self.active {
            let (g, positive) = (self.g[t], self.y[t] > 0.0);
            if self.bound[t] != Bound::Upper {
                if positive {
                    g1 = g1.max(-g);
                } else {
                    g4 = g4.max(-g);
                }
            }
            if self.bound[t] != Bound::Lower {
                if positive {
                    g2 = g2.max(g);
                } else {
                    g3 = g3.max(g);
                }
            }
        }
        if !self.unshrunk && (g1 + g2).max(g3 + g4) <= self.tol * 10.0 {
            self.unshrunk = true;
            self.reconstruct_gradient();
            self.active = self.n();
        }
        let shrinkable = |s: &Self, t: usize| {
            let (g, positive) = (s.g[t], s.y[t] > 0.0);
            match s.bound[t] {
                Bound::Upper => -g > if positive { g1 } else { g4 },
                Bound::Lower => g > if positive { g2 } else { g3 },
                Bound::Free => false,
            }
        };
        let mut i = 0;
        while i < self.active {
            if shrinkable(self, i) {
                self.active -= 1;
                while self.active > i {
                    if !shrinkable(self, self.active) {
                        self.swap(i, self.active);
                        break;
                    }
                    self.active -= 1;
                }
            }
            i += 1;
        }
    }

    fn swap(&mut self, i: usize, j: usize) {
        self.columns.swap(i, j);
        self.qd.swap(i, j);
        self.p.swap(i, j);
        self.c.swap(i, j);
        self.y.swap(i, j);
        self.g.swap(i, j);
        self.bound.swap(i, j);
        self.up.swap(i, j);
        self.low.swap(i, j);
        self.alpha.swap(i, j);
        self.original.swap(i, j);
        self.g_bar.swap(i, j);
    }
}

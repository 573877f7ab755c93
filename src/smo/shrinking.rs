//! Shrinking, as LIBSVM does it: points at a bound that are far from violating the
//! optimality conditions leave the active set (swapped to its end), and the gradient of
//! the inactive points is rebuilt from g_bar before the solver stops or unshrinks.

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
            self.g[j] = self.g_bar[j] - 1.0;
        }
        let free: Vec<usize> = (0..active).filter(|&j| self.bound[j] == Bound::Free).collect();
        if free.len() * n > 2 * active * (n - active) {
            for i in active..n {
                self.load_column(i, active);
                let q_i = self.cache.get(i, active);
                self.g[i] += free.iter().map(|&j| self.alpha[j] * q_i[j] as f64).sum::<f64>();
            }
        } else {
            for &i in &free {
                let a_i = self.alpha[i];
                self.load_column(i, n);
                let q_i = self.cache.get(i, n);
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

    fn swap(&mut self, i: usize, j: usize) {
        self.kernel.swap(i, j);
        self.cache.swap(i, j);
        self.qd.swap(i, j);
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

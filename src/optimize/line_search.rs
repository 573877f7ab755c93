//! The Moré–Thuente line search (MINPACK-2 `dcsrch` / `dcstep`), the one L-BFGS-B and
//! so scipy's `minimize(method="L-BFGS-B")` use: find a step satisfying the strong Wolfe
//! conditions f(stp) <= f(0) + ftol stp f'(0) and |f'(stp)| <= gtol |f'(0)| by safeguarded
//! cubic and quadratic interpolation inside a shrinking interval of uncertainty.
//!
//! It follows the reference code's branches one for one, so that from the same point and
//! direction it tries the same steps as scipy; only its driving differs (a state machine
//! with [`LineSearch::next`] instead of reverse communication through string tasks), plus
//! [`LineSearch::back_off`] for points where the objective cannot be evaluated, which the
//! reference has no notion of (scikit-learn hands it +inf there, which it turns into NaN),
//! and Hager and Zhang's approximate Wolfe conditions for a step whose value is within
//! round-off of the start's ([`Next::RoundOff`]): there sufficient decrease cannot be told,
//! and the reference would give up on a descent its slopes still show.

/// L-BFGS-B's constants: sufficient decrease, curvature, relative interval width.
const FTOL: f64 = 1e-3;
/// Hager and Zhang's epsilon: a value within this fraction of |f(0)| of f(0) cannot be
/// told from it (CG_DESCENT's default; the sum of many terms that cancel, as a likelihood
/// over several outputs, carries round-off far above machine precision).
const ROUND_OFF: f64 = 1e-6;
const GTOL: f64 = 0.9;
const XTOL: f64 = 0.1;
const XTRAPL: f64 = 1.1;
const XTRAPU: f64 = 4.0;

/// What the caller does next.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Next {
    /// Evaluate f and f' at this step.
    Evaluate(f64),
    /// The last evaluated step satisfies the strong Wolfe conditions.
    Converged,
    /// The last evaluated step satisfies the approximate Wolfe conditions of Hager and
    /// Zhang (2005) and not the strong ones: its value differs from f(0) by no more than
    /// round-off (so sufficient decrease cannot be told), and its slope says the step
    /// reached the line's minimum, sigma f'(0) <= f'(stp) <= (2 ftol - 1) f'(0). The value
    /// may be above f(0) by that round-off.
    RoundOff,
    /// The search cannot make further progress (rounding, the interval is below `xtol`,
    /// or the step sits on `stpmax` / `stpmin`); the last evaluated step stands, as in
    /// the reference code.
    Warning,
}

/// One line search in progress.
#[derive(Debug, Clone)]
pub(super) struct LineSearch {
    stpmin: f64,
    stpmax: f64,
    brackt: bool,
    stage: u8,
    finit: f64,
    ginit: f64,
    gtest: f64,
    width: f64,
    width1: f64,
    stx: f64,
    fx: f64,
    gx: f64,
    sty: f64,
    fy: f64,
    gy: f64,
    stmin: f64,
    stmax: f64,
    stp: f64,
}

impl LineSearch {
    /// With stpmin 0, as L-BFGS-B. `f0` and `g0` are the
    /// value and the (negative) directional derivative at step 0; `stp` the first trial.
    pub fn new(f0: f64, g0: f64, stp: f64, stpmax: f64) -> (LineSearch, f64) {
        debug_assert!(g0 < 0.0, "not a descent direction");
        let stp = stp.clamp(0.0, stpmax);
        let width = stpmax;
        let ls = LineSearch {
            stpmin: 0.0,
            stpmax,
            brackt: false,
            stage: 1,
            finit: f0,
            ginit: g0,
            gtest: FTOL * g0,
            width,
            width1: width / 0.5,
            stx: 0.0,
            fx: f0,
            gx: g0,
            sty: 0.0,
            fy: f0,
            gy: g0,
            stmin: 0.0,
            stmax: stp + XTRAPU * stp,
            stp,
        };
        (ls, stp)
    }

    /// Takes f and f' at the step last asked for and says what to do next.
    pub fn next(&mut self, f: f64, g: f64) -> Next {
        let stp = self.stp;
        let ftest = self.finit + stp * self.gtest;
        if self.stage == 1 && f <= ftest && g >= 0.0 {
            self.stage = 2;
        }
        let warned = (self.brackt
            && (stp <= self.stmin || stp >= self.stmax || self.stmax - self.stmin <= XTOL * self.stmax))
            || (stp == self.stpmax && f <= ftest && g <= self.gtest)
            || (stp == self.stpmin && (f > ftest || g >= self.gtest));
        if f <= ftest && g.abs() <= GTOL * (-self.ginit) {
            return Next::Converged;
        }
        // Sufficient decrease fails, or cannot be told, within round-off: the slope
        // decides (approximate Wolfe). The exact test comes first, so that wherever the
        // values can be told apart the search takes scipy's steps.
        if (f - self.finit).abs() <= ROUND_OFF * self.finit.abs()
            && GTOL * self.ginit <= g
            && g <= (2.0 * FTOL - 1.0) * self.ginit
        {
            return Next::RoundOff;
        }
        if warned {
            return Next::Warning;
        }
        // In the first stage, while f is above the sufficient-decrease line but below the
        // best point, interpolate the modified function f(stp) - ftest(stp).
        if self.stage == 1 && f <= self.fx && f > ftest {
            let gt = self.gtest;
            let mut s = Step {
                stx: self.stx,
                fx: self.fx - self.stx * gt,
                dx: self.gx - gt,
                sty: self.sty,
                fy: self.fy - self.sty * gt,
                dy: self.gy - gt,
                brackt: self.brackt,
            };
            let stp = s.take(stp, f - stp * gt, g - gt, self.stmin, self.stmax);
            self.stp = stp;
            self.stx = s.stx;
            self.sty = s.sty;
            self.brackt = s.brackt;
            self.fx = s.fx + s.stx * gt;
            self.fy = s.fy + s.sty * gt;
            self.gx = s.dx + gt;
            self.gy = s.dy + gt;
        } else {
            let mut s = Step {
                stx: self.stx,
                fx: self.fx,
                dx: self.gx,
                sty: self.sty,
                fy: self.fy,
                dy: self.gy,
                brackt: self.brackt,
            };
            self.stp = s.take(stp, f, g, self.stmin, self.stmax);
            (self.stx, self.fx, self.gx, self.sty, self.fy, self.gy, self.brackt) =
                (s.stx, s.fx, s.dx, s.sty, s.fy, s.dy, s.brackt);
        }
        // Bisect when the interval does not shrink fast enough.
        if self.brackt {
            if (self.sty - self.stx).abs() >= 0.66 * self.width1 {
                self.stp = self.stx + 0.5 * (self.sty - self.stx);
            }
            self.width1 = self.width;
            self.width = (self.sty - self.stx).abs();
        }
        if self.brackt {
            self.stmin = self.stx.min(self.sty);
            self.stmax = self.stx.max(self.sty);
        } else {
            self.stmin = self.stp + XTRAPL * (self.stp - self.stx);
            self.stmax = self.stp + XTRAPU * (self.stp - self.stx);
        }
        self.stp = self.stp.max(self.stpmin).min(self.stpmax);
        // With no further progress possible, fall back to the best step so far.
        if self.brackt
            && (self.stp <= self.stmin || self.stp >= self.stmax || self.stmax - self.stmin <= XTOL * self.stmax)
        {
            self.stp = self.stx;
        }
        Next::Evaluate(self.stp)
    }

    /// The objective could not be evaluated at the step last asked for: treat everything
    /// from there on as out of reach and try halfway back towards the best step.
    pub fn back_off(&mut self) -> f64 {
        let failed = self.stp;
        self.stpmax = self.stpmax.min(failed);
        self.stmax = self.stmax.min(failed);
        self.stp = self.stx + 0.5 * (failed - self.stx);
        self.stp
    }
}

/// `dcstep`'s state: the best step (stx), the other end of the interval (sty), and
/// whether a minimiser is bracketed.
struct Step {
    stx: f64,
    fx: f64,
    dx: f64,
    sty: f64,
    fy: f64,
    dy: f64,
    brackt: bool,
}

impl Step {
    /// Updates the interval with the trial (stp, fp, dp) and returns the next trial,
    /// kept within [stpmin, stpmax].
    fn take(&mut self, stp: f64, fp: f64, dp: f64, stpmin: f64, stpmax: f64) -> f64 {
        let (stx, fx, dx, sty, fy, dy) = (self.stx, self.fx, self.dx, self.sty, self.fy, self.dy);
        let sgnd = dp * (dx / dx.abs());
        let stpf;
        if fp > fx {
            // Case 1: higher value. The minimum is bracketed; take the cubic step if it is
            // closer to stx than the quadratic one, else their average.
            let theta = 3.0 * (fx - fp) / (stp - stx) + dx + dp;
            let s = theta.abs().max(dx.abs()).max(dp.abs());
            let mut gamma = s * ((theta / s).powi(2) - (dx / s) * (dp / s)).sqrt();
            if stp < stx {
                gamma = -gamma;
            }
            let p = (gamma - dx) + theta;
            let q = ((gamma - dx) + gamma) + dp;
            let r = p / q;
            let stpc = stx + r * (stp - stx);
            let stpq = stx + ((dx / ((fx - fp) / (stp - stx) + dx)) / 2.0) * (stp - stx);
            stpf = if (stpc - stx).abs() < (stpq - stx).abs() { stpc } else { stpc + (stpq - stpc) / 2.0 };
            self.brackt = true;
        } else if sgnd < 0.0 {
            // Case 2: lower value, derivatives of opposite sign: bracketed; the step
            // farther from stp of the cubic and the secant.
            let theta = 3.0 * (fx - fp) / (stp - stx) + dx + dp;
            let s = theta.abs().max(dx.abs()).max(dp.abs());
            let mut gamma = s * ((theta / s).powi(2) - (dx / s) * (dp / s)).sqrt();
            if stp > stx {
                gamma = -gamma;
            }
            let p = (gamma - dp) + theta;
            let q = ((gamma - dp) + gamma) + dx;
            let r = p / q;
            let stpc = stp + r * (stx - stp);
            let stpq = stp + (dp / (dp - dx)) * (stx - stp);
            stpf = if (stpc - stp).abs() > (stpq - stp).abs() { stpc } else { stpq };
            self.brackt = true;
        } else if dp.abs() < dx.abs() {
            // Case 3: lower value, same sign, smaller derivative. The cubic is used only
            // if it tends to infinity in the step's direction or its minimum lies beyond.
            let theta = 3.0 * (fx - fp) / (stp - stx) + dx + dp;
            let s = theta.abs().max(dx.abs()).max(dp.abs());
            let mut gamma = s * 0f64.max((theta / s).powi(2) - (dx / s) * (dp / s)).sqrt();
            if stp > stx {
                gamma = -gamma;
            }
            let p = (gamma - dp) + theta;
            let q = (gamma + (dx - dp)) + gamma;
            let r = p / q;
            let stpc = if r < 0.0 && gamma != 0.0 {
                stp + r * (stx - stp)
            } else if stp > stx {
                stpmax
            } else {
                stpmin
            };
            let stpq = stp + (dp / (dp - dx)) * (stx - stp);
            if self.brackt {
                let mut f = if (stpc - stp).abs() < (stpq - stp).abs() { stpc } else { stpq };
                f = if stp > stx { f.min(stp + 0.66 * (sty - stp)) } else { f.max(stp + 0.66 * (sty - stp)) };
                stpf = f;
            } else {
                let f = if (stpc - stp).abs() > (stpq - stp).abs() { stpc } else { stpq };
                stpf = f.min(stpmax).max(stpmin);
            }
        } else if self.brackt {
            // Case 4: lower value, same sign, no smaller derivative: the cubic through
            // stp and sty.
            let theta = 3.0 * (fp - fy) / (sty - stp) + dy + dp;
            let s = theta.abs().max(dy.abs()).max(dp.abs());
            let mut gamma = s * ((theta / s).powi(2) - (dy / s) * (dp / s)).sqrt();
            if stp > sty {
                gamma = -gamma;
            }
            let p = (gamma - dp) + theta;
            let q = ((gamma - dp) + gamma) + dy;
            let r = p / q;
            stpf = stp + r * (sty - stp);
        } else {
            stpf = if stp > stx { stpmax } else { stpmin };
        }
        // The interval that contains a step satisfying the conditions.
        if fp > fx {
            self.sty = stp;
            self.fy = fp;
            self.dy = dp;
        } else {
            if sgnd < 0.0 {
                self.sty = stx;
                self.fy = fx;
                self.dy = dx;
            }
            self.stx = stp;
            self.fx = fp;
            self.dx = dp;
        }
        stpf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the search on phi(stp) = f(x + stp d) given as a closure of the step.
    fn search(phi: impl Fn(f64) -> (f64, f64), stp0: f64, stpmax: f64) -> (f64, Next, usize) {
        let (f0, g0) = phi(0.0);
        let (mut ls, mut stp) = LineSearch::new(f0, g0, stp0, stpmax);
        for evals in 1..=40 {
            let (f, g) = phi(stp);
            match ls.next(f, g) {
                Next::Evaluate(s) => stp = s,
                other => return (stp, other, evals),
            }
        }
        panic!("no termination in 40 evaluations");
    }

    /// phi = 1e4 + 1e-9 (stp - 1)^2 with round-off that raises the value at stp = 1 by
    /// 1e-8: sufficient decrease fails there, but the value is within round-off of phi(0)
    /// and the slope (0 at the line's minimum) vouches for the step. The same raise of
    /// 1e-2 (1e-6 of phi) does too; 1 (above round-off) does not.
    #[test]
    fn a_step_within_round_off_is_taken_on_its_slope() {
        for (raise, want) in [(1e-8, Next::RoundOff), (1e-2, Next::RoundOff)] {
            let phi = |s: f64| (1e4 + 1e-9 * (s - 1.0).powi(2) + if s == 1.0 { raise } else { 0.0 }, 2e-9 * (s - 1.0));
            let (stp, how, evals) = search(phi, 1.0, 1e10);
            assert_eq!((stp, how, evals), (1.0, want, 1), "raise {raise}");
        }
        // Raised by 1 at stp = 1: the values can tell, so the search goes on.
        let (mut ls, stp) = LineSearch::new(1e4 + 1e-9, -2e-9, 1.0, 1e10);
        assert!(matches!(ls.next(1e4 + 1.0, 0.0), Next::Evaluate(s) if s < stp));
    }

    #[test]
    fn accepts_a_unit_step_that_satisfies_the_wolfe_conditions() {
        // phi = (stp - 1)^2: the unit step is the minimiser.
        let (stp, how, evals) = search(|s| ((s - 1.0).powi(2), 2.0 * (s - 1.0)), 1.0, 1e10);
        assert_eq!((stp, how, evals), (1.0, Next::Converged, 1));
    }

    #[test]
    fn reaches_strong_wolfe_points_on_the_first_more_thuente_function() {
        // Moré & Thuente (1994), function 1 from several starts: every accepted step
        // satisfies both conditions (with L-BFGS-B's ftol and gtol).
        let phi = |s: f64| (-s / (s * s + 2.0), (s * s - 2.0) / (s * s + 2.0).powi(2));
        let (f0, g0) = phi(0.0);
        for stp0 in [1e-3, 1e-1, 1e1, 1e3] {
            let (stp, how, _) = search(phi, stp0, 1e10);
            let (f, g) = phi(stp);
            assert_eq!(how, Next::Converged, "start {stp0}: {stp}");
            assert!(f <= f0 + FTOL * stp * g0, "start {stp0}: sufficient decrease at {stp}");
            assert!(g.abs() <= GTOL * g0.abs(), "start {stp0}: curvature at {stp}");
        }
    }

    /// The trial steps scipy's `DCSRCH` took on the same functions from the same starts
    /// (tests/fixtures/generate_sklearn.py).
    #[test]
    fn tries_the_steps_scipys_dcsrch_tries() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/sklearn_reference.json");
        let fx: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let cases = fx["line_searches"].as_array().unwrap();
        assert_eq!(cases.len(), 8);
        for case in cases {
            let phi: fn(f64) -> (f64, f64) = match case["function"].as_str().unwrap() {
                "more_thuente_1" => |s| (-s / (s * s + 2.0), (s * s - 2.0) / (s * s + 2.0).powi(2)),
                _ => |s| {
                    let t = s + 0.004;
                    (t.powi(5) - 2.0 * t.powi(4), 5.0 * t.powi(4) - 8.0 * t.powi(3))
                },
            };
            let (f0, g0) = phi(0.0);
            let (mut ls, mut stp) = LineSearch::new(f0, g0, case["stp0"].as_f64().unwrap(), 1e10);
            let mut steps = vec![];
            let outcome = loop {
                steps.push(stp);
                let (f, g) = phi(stp);
                match ls.next(f, g) {
                    Next::Evaluate(s) => stp = s,
                    Next::Converged => break "converged",
                    Next::Warning => break "warning",
                    Next::RoundOff => break "round_off",
                }
            };
            let want: Vec<f64> = case["steps"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
            assert_eq!(outcome, case["outcome"], "{case}");
            assert_eq!(steps.len(), want.len(), "{steps:?} vs {want:?}");
            for (a, b) in steps.iter().zip(&want) {
                assert!((a - b).abs() <= 1e-12 * b.abs(), "{steps:?} vs {want:?}");
            }
        }
    }

    #[test]
    fn stops_at_stpmax_when_the_function_keeps_falling() {
        let (stp, how, _) = search(|s| (-s, -1.0), 1.0, 8.0);
        assert_eq!((stp, how), (8.0, Next::Warning));
    }

    #[test]
    fn backing_off_halves_towards_the_best_step_and_never_returns() {
        let (mut ls, stp) = LineSearch::new(0.0, -1.0, 1.0, 1e10);
        assert_eq!(stp, 1.0);
        assert_eq!(ls.back_off(), 0.5);
        // Even a search that would extrapolate stays below the failed step.
        let mut stp = 0.5;
        for _ in 0..30 {
            match ls.next(-stp, -1.0) {
                Next::Evaluate(s) => {
                    assert!(s <= 1.0, "{s}");
                    stp = s;
                }
                _ => break,
            }
        }
    }
}

//! `svm` with `approximation: nystrom`: the L2-regularised hinge-loss SVM on Nystrom
//! features, the constant feature regularised like the weights (LIBLINEAR's `-s 3 -B 1`),
//! solved in the dual by coordinate descent with shrinking (Hsieh et al. 2008).
//!
//! Row i's dual variable lives in [0, U_i], U_i = C x its sample weight x its class's
//! weight (two classes: each class its own; more: one-vs-rest, where problem k weights
//! class k's rows only, as LIBLINEAR). Rows with U_i = 0 are left out.
//!
//! When every row's features fit the budget, the solver is LIBLINEAR's loop on them as it
//! is. When they do not (a million rows), it first solves on as many rows as fit, drawn
//! with the seed; then every row's gradient is checked from scores taken without
//! whitening ([`FeatureMap::scores`]): the fit stops when the projected gradients span at
//! most `tol`, and otherwise goes on with the rows that can still move (alpha > 0, or a
//! gradient <= 0), which at scale are the few near the boundary, and so on. Should those
//! not fit either, a pass takes them in chunks that do, running a few epochs of the same
//! loop on each (block minimisation, Yu et al. 2010).

use crate::estimator::dual::{self, DualClassifier, DualSpec};
use crate::estimator::nystrom_features::{feature_budget, FeatureMap};
use crate::estimator::targets::labels::ClassificationSet;
use crate::estimator::{Decision, FitContext, FitError, ModelKind, PredictOptions, Prediction, Svm};
use crate::kernel::{Kernel, Points};
use crate::optimize::SplitMix64;
use nalgebra::DMatrix;
use serde_json::Value;

/// Epochs a chunk gets per pass when the rows in play do not fit the budget.
const CHUNK_EPOCHS: u64 = 10;

/// Mixed into the seed for the rows of the first solve, a draw of its own.
const WARM_SEED: u64 = 0x57A2_7E00_0000_0031;

/// The fitted form: a one-vs-rest expansion over the inducing points.
pub type NystromSvmModel = DualClassifier<Svm>;

impl DualSpec for Svm {
    const KIND: ModelKind = ModelKind::Svm;

    fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    fn params_json(&self) -> Value {
        self.params_json()
    }

    fn answer(&self, f: DMatrix<f64>, classes: Vec<usize>, _opts: &PredictOptions) -> Prediction {
        let decision = if f.ncols() == 1 {
            Decision::Binary(f.column(0).iter().copied().collect())
        } else {
            Decision::PerClass(f)
        };
        Prediction { classes: Some(classes), decision: Some(decision), ..Default::default() }
    }
}

pub fn fit(spec: &Svm, data: &ClassificationSet, ctx: &FitContext) -> Result<NystromSvmModel, FitError> {
    let n = data.x.n();
    let budget = feature_budget(n, data.x.d(), spec.approx.m(n), ctx);
    fit_with_budget(spec, data, budget, ctx)
}

/// The fit holding at most `budget` bytes of features at once.
pub fn fit_with_budget(
    spec: &Svm,
    data: &ClassificationSet,
    budget: usize,
    ctx: &FitContext,
) -> Result<NystromSvmModel, FitError> {
    let map = FeatureMap::fit(&spec.kernel, &spec.approx, spec.seed, &data.x, ctx)?;
    let (n, k) = (data.y.len(), data.classes.len());
    let class_weight = match &spec.class_weight {
        Some(cw) => cw.per_class(&data.classes, &data.y, "/params/class_weight").map_err(FitError::Invalid)?,
        None => vec![1.0; k],
    };
    let sample_weight = |i: usize| spec.sample_weight.as_ref().map_or(1.0, |w| w.0[i]);
    let cache = map.all_features(&data.x, budget, ctx)?;
    ctx.progress.phase("solve");
    let machines = dual::machines(k);
    let mut w = DMatrix::zeros(map.width(), machines);
    let (mut iterations, mut converged) = (0, true);
    let problem = Problem { map: &map, cache: cache.as_ref(), x: &data.x, budget, ctx };
    for c in 0..machines {
        let y = dual::machine_labels(&data.y, k, c);
        let upper: Vec<f64> = (0..n)
            .map(|i| {
                let class = data.y[i];
                let cw = if k == 2 || class == c { class_weight[class] } else { 1.0 };
                spec.c * cw * sample_weight(i)
            })
            .collect();
        let max_iter = spec.solver.max_iter.unwrap_or(u64::MAX);
        let (wc, epochs, ok) = problem.solve(&y, &upper, spec.solver.tol, max_iter, spec.seed, iterations)?;
        w.column_mut(c).copy_from_slice(&wc);
        iterations += epochs;
        converged &= ok;
    }
    Ok(map.classifier(spec, data, &w, iterations, converged))
}

/// What every machine of a fit shares.
struct Problem<'a> {
    map: &'a FeatureMap,
    /// Every row's features, when they fit the budget.
    cache: Option<&'a DMatrix<f64>>,
    x: &'a Points,
    budget: usize,
    ctx: &'a FitContext,
}

impl Problem<'_> {
    /// One binary machine (labels y = +-1, bounds U): its weights (M + 1), epochs and
    /// whether it converged. `done` epochs of earlier machines are counted in progress.
    fn solve(
        &self,
        y: &[f64],
        upper: &[f64],
        tol: f64,
        max_iter: u64,
        seed: u64,
        done: u64,
    ) -> Result<(Vec<f64>, u64, bool), FitError> {
        let n = y.len();
        let width = self.map.width();
        let candidates: Vec<usize> = (0..n).filter(|&i| upper[i] > 0.0).collect();
        let mut state = Dual { alpha: vec![0.0; n], w: vec![0.0; width], rng: SplitMix64::new(seed) };
        let chunk_rows = (self.budget / (8 * width)).max(crate::estimator::approximation::nystrom::BLOCK_ROWS);
        // Without every row's features, start from the solution on as many rows (drawn
        // with the seed) as fit: it is a feasible point of the whole dual (the other
        // alphas 0), and after it most rows are found outside the margin by the check
        // below, without their features ever being computed.
        let mut active = if self.cache.is_none() && candidates.len() > chunk_rows {
            let mut draw =
                crate::estimator::approximation::inducing::sample_rows(candidates.len(), chunk_rows, seed ^ WARM_SEED);
            draw.iter_mut().for_each(|r| *r = candidates[*r]);
            draw
        } else {
            candidates.clone()
        };
        let mut epochs = 0u64;
        // The features of the last round's rows (in the order held), which the next
        // round mostly keeps.
        let mut held: Option<(Vec<usize>, DMatrix<f64>)> = None;
        let started = std::time::Instant::now();
        while epochs < max_iter {
            self.ctx.cancel.check()?;
            tracing::debug!(
                rows = active.len(),
                epochs,
                seconds = started.elapsed().as_secs_f64(),
                "svm nystrom: solving"
            );
            let left = max_iter - epochs;
            let settled = if let Some(phi) = self.cache {
                let (e, ok) = state.epochs(phi, &active, &active, y, upper, tol, left, self.ctx, done + epochs);
                epochs += e;
                ok
            } else if active.len() <= chunk_rows {
                let (order, phi) = self.features_keeping(held.take(), &active)?;
                let cols: Vec<usize> = (0..order.len()).collect();
                let (e, ok) = state.epochs(&phi, &cols, &order, y, upper, tol, left, self.ctx, done + epochs);
                held = Some((order, phi));
                epochs += e;
                ok
            } else {
                held = None;
                for chunk in active.chunks(chunk_rows) {
                    let phi = self.map.features(self.x, chunk, self.ctx)?;
                    let cols: Vec<usize> = (0..chunk.len()).collect();
                    state.epochs(&phi, &cols, chunk, y, upper, tol, CHUNK_EPOCHS.min(left), self.ctx, done + epochs);
                }
                epochs += 1;
                false
            };
            self.ctx.cancel.check()?;
            tracing::debug!(epochs, seconds = started.elapsed().as_secs_f64(), "svm nystrom: checking every row");
            // Every row's projected gradient, from scores without whitening.
            let f = self.map.scores(self.x, &candidates, &DMatrix::from_column_slice(width, 1, &state.w), self.ctx)?;
            let (mut most, mut least) = (f64::NEG_INFINITY, f64::INFINITY);
            let mut next = Vec::new();
            for (j, &i) in candidates.iter().enumerate() {
                let g = y[i] * f[(j, 0)] - 1.0;
                let a = state.alpha[i];
                let pg = if a == 0.0 {
                    g.min(0.0)
                } else if a >= upper[i] {
                    g.max(0.0)
                } else {
                    g
                };
                most = most.max(pg);
                least = least.min(pg);
                if a > 0.0 || g <= 0.0 {
                    next.push(i);
                }
            }
            // The loop's own check passed on these very rows: what the scores add is
            // their rounding, not a violation.
            if most - least <= tol || (settled && next == active) {
                return Ok((state.w, epochs, true));
            }
            active = next;
        }
        Ok((state.w, epochs, false))
    }

    /// The features of `rows` (sorted): the columns of `held` whose rows are among them,
    /// moved to the front of its buffer in place, then the others computed after them.
    /// Returns the rows in the order of the columns. Never more than the larger of the
    /// two sets is held, plus the new rows' block.
    fn features_keeping(
        &self,
        held: Option<(Vec<usize>, DMatrix<f64>)>,
        rows: &[usize],
    ) -> Result<(Vec<usize>, DMatrix<f64>), FitError> {
        let width = self.map.width();
        let Some((old, phi)) = held else {
            return Ok((rows.to_vec(), self.map.features(self.x, rows, self.ctx)?));
        };
        let mut data: Vec<f64> = phi.data.into();
        let mut order = Vec::with_capacity(rows.len());
        for (at, &r) in old.iter().enumerate() {
            if rows.binary_search(&r).is_ok() {
                let to = order.len();
                data.copy_within(at * width..(at + 1) * width, to * width);
                order.push(r);
            }
        }
        // The rest computed straight into the tail, the buffer first cut to the kept
        // columns: the old and the new sets are never held at once.
        let common = order.len();
        data.truncate(common * width);
        data.shrink_to_fit();
        let fresh: Vec<usize> = {
            let mut sorted = order.clone();
            sorted.sort_unstable();
            rows.iter().copied().filter(|r| sorted.binary_search(r).is_err()).collect()
        };
        data.resize((common + fresh.len()) * width, 0.0);
        self.map.features_into(self.x, &fresh, &mut data[common * width..], self.ctx)?;
        order.extend_from_slice(&fresh);
        let n = order.len();
        Ok((order, DMatrix::from_vec(width, n, data)))
    }
}

/// The dual variables of one machine and the primal weights w = sum_i alpha_i y_i phi_i.
struct Dual {
    alpha: Vec<f64>,
    w: Vec<f64>,
    rng: SplitMix64,
}

impl Dual {
    /// LIBLINEAR's loop (`solve_l2r_l1l2_svc`, hinge loss) over rows `rows` of the
    /// problem, whose features are columns `cols` of `phi`, for at most `max_epochs`
    /// epochs: epochs run and whether the projected gradients of all these rows came
    /// within `tol`.
    #[allow(clippy::too_many_arguments)]
    fn epochs(
        &mut self,
        phi: &DMatrix<f64>,
        cols: &[usize],
        rows: &[usize],
        y: &[f64],
        upper: &[f64],
        tol: f64,
        max_epochs: u64,
        ctx: &FitContext,
        done: u64,
    ) -> (u64, bool) {
        let width = phi.nrows();
        let column = |t: usize| &phi.as_slice()[cols[t] * width..(cols[t] + 1) * width];
        let l = rows.len();
        let qd: Vec<f64> = (0..l).map(|t| dot(column(t), column(t))).collect();
        let mut index: Vec<usize> = (0..l).collect();
        let mut active = l;
        let (mut pg_max_old, mut pg_min_old) = (f64::INFINITY, f64::NEG_INFINITY);
        let mut epoch = 0;
        while epoch < max_epochs {
            if ctx.cancel.is_cancelled() {
                break;
            }
            let (mut pg_max, mut pg_min) = (f64::NEG_INFINITY, f64::INFINITY);
            for s in 0..active {
                let j = s + (self.rng.next_u64() % (active - s) as u64) as usize;
                index.swap(s, j);
            }
            let mut s = 0;
            while s < active {
                let t = index[s];
                let (i, x) = (rows[t], column(t));
                let g = y[i] * dot(&self.w, x) - 1.0;
                let (a, c) = (self.alpha[i], upper[i]);
                let mut pg = 0.0;
                if a == 0.0 {
                    if g > pg_max_old {
                        active -= 1;
                        index.swap(s, active);
                        continue;
                    } else if g < 0.0 {
                        pg = g;
                    }
                } else if a == c {
                    if g < pg_min_old {
                        active -= 1;
                        index.swap(s, active);
                        continue;
                    } else if g > 0.0 {
                        pg = g;
                    }
                } else {
                    pg = g;
                }
                pg_max = pg_max.max(pg);
                pg_min = pg_min.min(pg);
                if pg.abs() > 1e-12 {
                    let new = (a - g / qd[t]).max(0.0).min(c);
                    self.alpha[i] = new;
                    axpy(&mut self.w, (new - a) * y[i], x);
                }
                s += 1;
            }
            epoch += 1;
            ctx.progress.iteration(done + epoch);
            if pg_max - pg_min <= tol {
                if active == l {
                    return (epoch, true);
                }
                active = l;
                (pg_max_old, pg_min_old) = (f64::INFINITY, f64::NEG_INFINITY);
                continue;
            }
            pg_max_old = if pg_max <= 0.0 { f64::INFINITY } else { pg_max };
            pg_min_old = if pg_min >= 0.0 { f64::NEG_INFINITY } else { pg_min };
        }
        (epoch, false)
    }
}

/// a'b, four partial sums (vectorisable).
pub(crate) fn dot(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0; 4];
    let (ca, cb) = (a.chunks_exact(4), b.chunks_exact(4));
    let tail: f64 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..4 {
            acc[k] += x[k] * y[k];
        }
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

/// y += a x.
fn axpy(y: &mut [f64], a: f64, x: &[f64]) {
    y.iter_mut().zip(x).for_each(|(yi, xi)| *yi += a * xi);
}

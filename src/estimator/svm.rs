//! C-support vector classification, as scikit-learn's `SVC` (LIBSVM).
//!
//! Two classes: one dual problem solved by SMO (`crate::smo`). More: one-vs-one, a
//! machine per pair of classes, each trained on that pair's rows with the lower class as
//! +1, and predictions by voting (ties to the lower class, as LIBSVM). Only support
//! vectors are kept, once each however many machines use them, grouped by class, with
//! LIBSVM's coefficient layout: the machine for classes (i, j) reads its coefficients of
//! class-i vectors from row j - 1 and of class-j vectors from row i of a
//! (classes - 1) x support-vectors matrix.
//!
//! `probability`: Platt's sigmoid per machine, fitted on 5-fold cross-validated decision
//! values (folds drawn with `seed`), with the Newton method of Lin, Lin & Weng (2007);
//! more than two classes are coupled pairwise (Wu, Lin & Weng 2004, method 2). As in
//! LIBSVM, predictions still come from the decision values, so argmax(probabilities) can
//! disagree with them; the fit counts how often on the training set.

use super::labels::{ClassLabels, ClassificationSet};
use super::{Decision, Estimator, FitContext, FitError, PredictOptions, Prediction, Predictor, TrainingReport};
use crate::kernel::column::ColumnKernel;
use crate::kernel::{Kernel, Points};
use crate::linalg::Parallelism;
use crate::optimize::SplitMix64;
use crate::smo::{self, SmoOptions};
use crate::spec::{FieldError, ObjectReader};
use nalgebra::DMatrix;
use serde_json::{json, Value};

/// Folds of the cross-validation behind Platt scaling (LIBSVM's choice).
const PLATT_FOLDS: usize = 5;
/// Pairwise probabilities are kept inside [MIN_PROB, 1 - MIN_PROB] (LIBSVM's clip).
const MIN_PROB: f64 = 1e-7;

/// Checked parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Svm {
    pub kernel: Kernel,
    pub c: f64,
    pub tol: f64,
    pub max_iter: Option<u64>,
    pub probability: bool,
    pub cache_mb: f64,
    /// Shuffles the Platt cross-validation folds.
    pub seed: u64,
}

impl Svm {
    pub fn from_json(kernel: Kernel, params: &Value, path: &str) -> Result<Svm, FieldError> {
        let mut obj = ObjectReader::new(params, path)?;
        let positive = |obj: &ObjectReader, key: &str, v: Option<f64>, default: f64| match v {
            Some(v) if v <= 0.0 => Err(FieldError::invalid(obj.pointer(key), "must be positive")),
            v => Ok(v.unwrap_or(default)),
        };
        let c = obj.f64("c")?;
        let c = positive(&obj, "c", c, 1.0)?;
        let tol = obj.f64("tol")?;
        let tol = positive(&obj, "tol", tol, 1e-3)?;
        let max_iter = obj.u64("max_iter")?;
        if max_iter == Some(0) {
            return Err(FieldError::invalid(obj.pointer("max_iter"), "must be at least 1 (omit it for no limit)"));
        }
        let probability = obj.bool("probability")?.unwrap_or(false);
        let cache_mb = obj.f64("cache_mb")?;
        let cache_mb = positive(&obj, "cache_mb", cache_mb, 100.0)?;
        if cache_mb > 1e6 {
            return Err(FieldError::invalid(obj.pointer("cache_mb"), "must be at most 1000000 (1 TB)"));
        }
        let seed = obj.u64("seed")?.unwrap_or(0);
        super::approx::Approximation::read_exact_only(&mut obj)?;
        obj.finish()?;
        Ok(Svm { kernel, c, tol, max_iter, probability, cache_mb, seed })
    }

    pub fn params_json(&self) -> Value {
        json!({
            "c": self.c, "tol": self.tol, "max_iter": self.max_iter, "probability": self.probability,
            "cache_mb": self.cache_mb, "seed": self.seed,
        })
    }

    fn cache_bytes(&self) -> usize {
        (self.cache_mb * (1u64 << 20) as f64) as usize
    }

    /// Peak bytes of a fit: the column cache (at least two columns) and O(n) arrays.
    pub fn fit_memory_estimate(&self, n: usize, d: usize) -> usize {
        self.cache_bytes().max(8 * n) + n * (3 * d * 8 + 96)
    }

    fn smo_options(&self, par: Parallelism) -> SmoOptions {
        SmoOptions {
            c: self.c,
            tol: self.tol,
            max_iter: self.max_iter,
            cache_bytes: self.cache_bytes(),
            shrinking: true,
            par,
        }
    }

    /// One binary machine on `x` with labels +-1: (coef = y a, rho, iterations, converged).
    fn solve(&self, x: &Points, y: &[f64], ctx: &FitContext) -> Result<smo::SmoSolution, FitError> {
        let cancel = ctx.cancel.clone();
        smo::solve(ColumnKernel::new(&self.kernel, x), y, &self.smo_options(ctx.par), &move || cancel.is_cancelled())
            .map_err(|_| FitError::Cancelled)
    }

    /// Platt's (A, B) for one machine from cross-validated decision values.
    fn platt(&self, x: &Points, y: &[f64], ctx: &FitContext) -> Result<(f64, f64), FitError> {
        let n = y.len();
        let mut rng = SplitMix64::new(self.seed);
        let mut perm: Vec<usize> = (0..n).collect();
        for i in 0..n {
            let j = i + (rng.next_u64() % (n - i) as u64) as usize;
            perm.swap(i, j);
        }
        let mut dec = vec![0.0; n];
        for fold in 0..PLATT_FOLDS {
            let (begin, end) = (fold * n / PLATT_FOLDS, (fold + 1) * n / PLATT_FOLDS);
            let held = &perm[begin..end];
            let train: Vec<usize> = perm[..begin].iter().chain(&perm[end..]).copied().collect();
            let ty: Vec<f64> = train.iter().map(|&i| y[i]).collect();
            let positives = ty.iter().filter(|&&v| v > 0.0).count();
            let fixed = match (positives, ty.len() - positives) {
                (0, 0) => Some(0.0),
                (_, 0) => Some(1.0),
                (0, _) => Some(-1.0),
                _ => None,
            };
            if let Some(v) = fixed {
                held.iter().for_each(|&i| dec[i] = v);
                continue;
            }
            let tx = x.select(&train);
            let sol = self.solve(&tx, &ty, ctx)?;
            let sv: Vec<usize> = (0..train.len()).filter(|&k| sol.coef[k] != 0.0).collect();
            let k = self.kernel.cross(&tx.select(&sv), &x.select(held), ctx.par);
            for (col, &i) in held.iter().enumerate() {
                dec[i] = sv.iter().enumerate().map(|(r, &s)| sol.coef[s] * k[(r, col)]).sum::<f64>() - sol.rho;
            }
        }
        Ok(sigmoid_train(&dec, y))
    }
}

/// A fitted SVM: support vectors grouped by class and LIBSVM's coefficient layout.
#[derive(Debug, Clone)]
pub struct SvmModel {
    spec: Svm,
    classes: ClassLabels,
    sv: Points,
    /// Class c's support vectors are sv[sv_start[c]..sv_start[c + 1]].
    sv_start: Vec<usize>,
    /// (classes - 1) x support vectors.
    coef: DMatrix<f64>,
    /// Per machine, in pair order (0,1), (0,2), ..., (1,2), ...
    rho: Vec<f64>,
    /// Platt's sigmoid per machine; empty without `probability`.
    prob_a: Vec<f64>,
    prob_b: Vec<f64>,
    report: TrainingReport,
}

impl Estimator for Svm {
    type Data = ClassificationSet;
    type Fitted = SvmModel;

    fn fit(&self, data: &ClassificationSet, ctx: &FitContext) -> Result<SvmModel, FitError> {
        let groups = data.rows_by_class();
        let k = groups.len();
        let n = data.y.len();
        let mut nonzero = vec![false; n];
        let mut machines = Vec::with_capacity(k * (k - 1) / 2);
        let (mut prob_a, mut prob_b) = (Vec::new(), Vec::new());
        let (mut iterations, mut converged) = (0u64, true);
        for i in 0..k {
            for j in i + 1..k {
                ctx.cancel.check()?;
                let rows: Vec<usize> = groups[i].iter().chain(&groups[j]).copied().collect();
                let x = data.x.select(&rows);
                let y: Vec<f64> = (0..rows.len()).map(|r| if r < groups[i].len() { 1.0 } else { -1.0 }).collect();
                if self.probability {
                    let (a, b) = self.platt(&x, &y, ctx)?;
                    prob_a.push(a);
                    prob_b.push(b);
                }
                let sol = self.solve(&x, &y, ctx)?;
                iterations += sol.iterations;
                converged &= sol.converged;
                for (r, &row) in rows.iter().enumerate() {
                    nonzero[row] |= sol.coef[r] != 0.0;
                }
                machines.push((rows, sol));
            }
        }
        // Support vectors grouped by class, in row order within a class.
        let mut position = vec![usize::MAX; n];
        let mut sv_rows = Vec::new();
        let mut sv_start = vec![0];
        for g in &groups {
            for &row in g {
                if nonzero[row] {
                    position[row] = sv_rows.len();
                    sv_rows.push(row);
                }
            }
            sv_start.push(sv_rows.len());
        }
        let mut coef = DMatrix::zeros(k - 1, sv_rows.len());
        let mut rho = Vec::with_capacity(machines.len());
        let mut p = 0;
        for i in 0..k {
            for j in i + 1..k {
                let (rows, sol) = &machines[p];
                for (r, &row) in rows.iter().enumerate() {
                    if sol.coef[r] != 0.0 {
                        let coef_row = if data.y[row] == i { j - 1 } else { i };
                        coef[(coef_row, position[row])] = sol.coef[r];
                    }
                }
                rho.push(sol.rho);
                p += 1;
            }
        }
        let mut model = SvmModel {
            spec: self.clone(),
            classes: data.classes.clone(),
            sv: data.x.select(&sv_rows),
            sv_start,
            coef,
            rho,
            prob_a,
            prob_b,
            report: TrainingReport { converged: Some(converged), iterations: Some(iterations), ..Default::default() },
        };
        if self.probability {
            ctx.cancel.check()?;
            let opts = PredictOptions { probabilities: true, ..PredictOptions::default() };
            let p = model.predict(&data.x, &opts, ctx.par);
            let (labels, probs) =
                (p.classes.unwrap_or_default(), p.probabilities.expect("probabilities were asked for"));
            let disagree = labels
                .iter()
                .enumerate()
                .filter(|&(r, &c)| super::first_max(probs.row(r).iter().copied()) != c)
                .count();
            model.report.probability_disagreements = Some(disagree as u64);
        }
        Ok(model)
    }
}

impl SvmModel {
    pub fn classes(&self) -> &ClassLabels {
        &self.classes
    }

    pub fn support_vectors(&self) -> &Points {
        &self.sv
    }

    pub(super) fn store_into(&self, s: &mut super::StoredFit) {
        s.put_points(&self.sv);
        s.arrays = vec![
            ("sv_start".into(), self.sv_start.iter().map(|&v| v as f64).collect()),
            ("coef".into(), self.coef.as_slice().to_vec()),
            ("rho".into(), self.rho.clone()),
            ("prob_a".into(), self.prob_a.clone()),
            ("prob_b".into(), self.prob_b.clone()),
        ];
    }

    pub(super) fn restore(
        spec: Svm,
        classes: ClassLabels,
        sv: Points,
        mut arrays: super::StoredArrays,
        report: TrainingReport,
    ) -> Result<SvmModel, super::RestoreError> {
        let k = classes.len();
        let pairs = k * (k - 1) / 2;
        let sv_start: Vec<usize> = arrays.take("sv_start", Some(k + 1))?.into_iter().map(|v| v as usize).collect();
        if sv_start[0] != 0 || sv_start.windows(2).any(|w| w[0] > w[1]) || sv_start[k] != sv.n() {
            return Err(super::RestoreError("support-vector offsets are inconsistent".into()));
        }
        let coef = DMatrix::from_vec(k - 1, sv.n(), arrays.take("coef", Some((k - 1) * sv.n()))?);
        let rho = arrays.take("rho", Some(pairs))?;
        let prob_a = arrays.take("prob_a", None)?;
        let prob_b = arrays.take("prob_b", None)?;
        let expect_prob = if spec.probability { pairs } else { 0 };
        if prob_a.len() != expect_prob || prob_b.len() != expect_prob {
            return Err(super::RestoreError("Platt coefficients do not match `probability`".into()));
        }
        Ok(SvmModel { spec, classes, sv, sv_start, coef, rho, prob_a, prob_b, report })
    }

    /// LIBSVM's decision value of each machine for one query, from its kernel values
    /// against every support vector.
    fn machine_values(&self, kv: &[f64], out: &mut Vec<f64>) {
        out.clear();
        let k = self.classes.len();
        let mut p = 0;
        for i in 0..k {
            for j in i + 1..k {
                let (si, sj) = (self.sv_start[i]..self.sv_start[i + 1], self.sv_start[j]..self.sv_start[j + 1]);
                let part = |row: usize, range: std::ops::Range<usize>| -> f64 {
                    range.map(|s| self.coef[(row, s)] * kv[s]).sum()
                };
                out.push(part(j - 1, si) + part(i, sj) - self.rho[p]);
                p += 1;
            }
        }
    }
}

impl Predictor for SvmModel {
    fn predict(&self, x: &Points, opts: &PredictOptions, par: Parallelism) -> Prediction {
        let k = self.classes.len();
        let m = x.n();
        let mut labels = Vec::with_capacity(m);
        let mut decision = DMatrix::zeros(m, if k == 2 { 1 } else { k });
        let with_probs = opts.probabilities && !self.prob_a.is_empty();
        let mut probabilities = with_probs.then(|| DMatrix::zeros(m, k));
        let block = super::predict_block_rows(self.sv.n());
        let mut dec = Vec::new();
        let mut votes = vec![0usize; k];
        for start in (0..m).step_by(block) {
            let q = x.slice(start, block.min(m - start));
            let kv = self.spec.kernel.cross(&self.sv, &q, par);
            for (c, col) in kv.column_iter().enumerate() {
                let row = start + c;
                self.machine_values(col.as_slice(), &mut dec);
                votes.fill(0);
                let mut p = 0;
                for i in 0..k {
                    for j in i + 1..k {
                        votes[if dec[p] > 0.0 { i } else { j }] += 1;
                        p += 1;
                    }
                }
                // The first class with the most votes, as LIBSVM.
                let winner = super::first_max(votes.iter().map(|&v| v as f64));
                labels.push(winner);
                if k == 2 {
                    // Positive means the second class, as scikit-learn.
                    decision[(row, 0)] = -dec[0];
                } else {
                    for (c, v) in ovr_decision(&dec, &votes, k).into_iter().enumerate() {
                        decision[(row, c)] = v;
                    }
                }
                if let Some(probs) = probabilities.as_mut() {
                    let row_probs = self.probabilities(&dec, k);
                    for (c, v) in row_probs.into_iter().enumerate() {
                        probs[(row, c)] = v;
                    }
                }
            }
        }
        let decision = if k == 2 {
            Decision::Binary(decision.column(0).iter().copied().collect())
        } else {
            Decision::PerClass(decision)
        };
        Prediction { classes: Some(labels), decision: Some(decision), probabilities, ..Default::default() }
    }

    super::spec_and_report_accessors!();

    fn n_support(&self) -> usize {
        self.sv.n()
    }

    fn support(&self) -> &Points {
        &self.sv
    }

    fn classes(&self) -> Option<&ClassLabels> {
        Some(&self.classes)
    }

    fn memory_bytes(&self) -> usize {
        self.sv.memory_bytes() + 8 * (self.coef.len() + self.rho.len() * 3 + self.sv_start.len())
    }

    fn predict_cost(&self, m: usize, _opts: &PredictOptions) -> f64 {
        (m * self.sv.n()) as f64 * (self.kernel().pair_cost(&self.sv) + 2.0 + self.coef.nrows() as f64)
    }
}

impl SvmModel {
    // Pairwise tables are indexed by class pairs; iterators would hide the pair order.
    #[allow(clippy::needless_range_loop)]
    fn probabilities(&self, dec: &[f64], k: usize) -> Vec<f64> {
        let mut r = vec![vec![0.0; k]; k];
        let mut p = 0;
        for i in 0..k {
            for j in i + 1..k {
                let v = sigmoid_predict(dec[p], self.prob_a[p], self.prob_b[p]).clamp(MIN_PROB, 1.0 - MIN_PROB);
                r[i][j] = v;
                r[j][i] = 1.0 - v;
                p += 1;
            }
        }
        if k == 2 {
            vec![r[0][1], r[1][0]]
        } else {
            pairwise_coupling(&r)
        }
    }
}

/// scikit-learn's one-vs-one to per-class scores: votes plus the summed pairwise
/// confidences squashed into (-1/3, 1/3), so that they break ties but never outvote.
fn ovr_decision(dec: &[f64], votes: &[usize], k: usize) -> Vec<f64> {
    let mut conf = vec![0.0; k];
    let mut p = 0;
    for i in 0..k {
        for j in i + 1..k {
            conf[i] += dec[p];
            conf[j] -= dec[p];
            p += 1;
        }
    }
    (0..k).map(|c| votes[c] as f64 + conf[c] / (3.0 * (conf[c].abs() + 1.0))).collect()
}

/// P(y = +1 | f) = 1 / (1 + exp(A f + B)) (LIBSVM's sigmoid_predict, to the bit).
fn sigmoid_predict(f: f64, a: f64, b: f64) -> f64 {
    super::sigmoid(-(f * a + b))
}

/// Platt's sigmoid fitted to decision values `dec` and labels `y` (+-1) by Newton's
/// method with backtracking on the regularised targets (Lin, Lin & Weng 2007).
pub(crate) fn sigmoid_train(dec: &[f64], y: &[f64]) -> (f64, f64) {
    let prior1 = y.iter().filter(|&&v| v > 0.0).count() as f64;
    let prior0 = y.len() as f64 - prior1;
    let (max_iter, min_step, sigma, eps) = (100, 1e-10, 1e-12, 1e-5);
    let hi = (prior1 + 1.0) / (prior1 + 2.0);
    let lo = 1.0 / (prior0 + 2.0);
    let t: Vec<f64> = y.iter().map(|&v| if v > 0.0 { hi } else { lo }).collect();
    let objective = |a: f64, b: f64| -> f64 {
        dec.iter()
            .zip(&t)
            .map(|(&f, &ti)| {
                let z = f * a + b;
                if z >= 0.0 {
                    ti * z + (-z).exp().ln_1p()
                } else {
                    (ti - 1.0) * z + z.exp().ln_1p()
                }
            })
            .sum()
    };
    let (mut a, mut b) = (0.0, ((prior0 + 1.0) / (prior1 + 1.0)).ln());
    let mut fval = objective(a, b);
    for _ in 0..max_iter {
        let (mut h11, mut h22, mut h21, mut g1, mut g2) = (sigma, sigma, 0.0, 0.0, 0.0);
        for (&f, &ti) in dec.iter().zip(&t) {
            let z = f * a + b;
            let (p, q) = if z >= 0.0 {
                ((-z).exp() / (1.0 + (-z).exp()), 1.0 / (1.0 + (-z).exp()))
            } else {
                (1.0 / (1.0 + z.exp()), z.exp() / (1.0 + z.exp()))
            };
            let d2 = p * q;
            h11 += f * f * d2;
            h22 += d2;
            h21 += f * d2;
            let d1 = ti - p;
            g1 += f * d1;
            g2 += d1;
        }
        if g1.abs() < eps && g2.abs() < eps {
            break;
        }
        let det = h11 * h22 - h21 * h21;
        let da = -(h22 * g1 - h21 * g2) / det;
        let db = -(-h21 * g1 + h11 * g2) / det;
        let gd = g1 * da + g2 * db;
        let mut step = 1.0;
        while step >= min_step {
            let (na, nb) = (a + step * da, b + step * db);
            let nf = objective(na, nb);
            if nf < fval + 1e-4 * step * gd {
                (a, b, fval) = (na, nb, nf);
                break;
            }
            step /= 2.0;
        }
        if step < min_step {
            break;
        }
    }
    (a, b)
}

/// Class probabilities from pairwise ones r[i][j] = P(i | i or j) (Wu, Lin & Weng 2004,
/// method 2, by LIBSVM's fixed-point iteration).
#[allow(clippy::needless_range_loop)]
pub(crate) fn pairwise_coupling(r: &[Vec<f64>]) -> Vec<f64> {
    let k = r.len();
    let mut q = vec![vec![0.0; k]; k];
    for t in 0..k {
        for j in 0..k {
            if j != t {
                q[t][t] += r[j][t] * r[j][t];
                q[t][j] = -r[j][t] * r[t][j];
            }
        }
    }
    let mut p = vec![1.0 / k as f64; k];
    let mut qp = vec![0.0; k];
    let eps = 0.005 / k as f64;
    for _ in 0..100.max(k) {
        let mut pqp = 0.0;
        for t in 0..k {
            qp[t] = (0..k).map(|j| q[t][j] * p[j]).sum();
            pqp += p[t] * qp[t];
        }
        let max_error = qp.iter().map(|v| (v - pqp).abs()).fold(0.0, f64::max);
        if max_error < eps {
            break;
        }
        for t in 0..k {
            let diff = (-qp[t] + pqp) / q[t][t];
            p[t] += diff;
            pqp = (pqp + diff * (diff * q[t][t] + 2.0 * qp[t])) / (1.0 + diff) / (1.0 + diff);
            for j in 0..k {
                qp[j] = (qp[j] + diff * q[t][j]) / (1.0 + diff);
                p[j] /= 1.0 + diff;
            }
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pairwise probabilities made from known class probabilities are coupled back to them.
    #[test]
    fn pairwise_coupling_recovers_consistent_probabilities() {
        let p = [0.5, 0.3, 0.15, 0.05];
        let r: Vec<Vec<f64>> =
            (0..4).map(|i| (0..4).map(|j| if i == j { 0.0 } else { p[i] / (p[i] + p[j]) }).collect()).collect();
        let q = pairwise_coupling(&r);
        assert!((q.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        for (a, b) in q.iter().zip(&p) {
            assert!((a - b).abs() < 1e-3, "{q:?} vs {p:?}");
        }
    }

    /// At Platt's fitted (A, B) the gradient of the regularised log loss, computed here
    /// from its definition, vanishes.
    #[test]
    fn sigmoid_train_reaches_a_stationary_point() {
        let dec: Vec<f64> = (0..200).map(|i| (i as f64 - 100.0) / 25.0).collect();
        // Labels from a noisy threshold: mostly positive for large decision values.
        let y: Vec<f64> = (0..200).map(|i| if (i * 37) % 200 < 2 * i.min(100) { 1.0 } else { -1.0 }).collect();
        let (a, b) = sigmoid_train(&dec, &y);
        assert!(a < 0.0, "larger decision values are more likely positive: A = {a}");
        let (n1, n0) = (y.iter().filter(|&&v| v > 0.0).count() as f64, y.iter().filter(|&&v| v < 0.0).count() as f64);
        let (mut ga, mut gb) = (0.0, 0.0);
        for (f, yi) in dec.iter().zip(&y) {
            let t = if *yi > 0.0 { (n1 + 1.0) / (n1 + 2.0) } else { 1.0 / (n0 + 2.0) };
            let p = 1.0 / (1.0 + (a * f + b).exp());
            ga += f * (t - p);
            gb += t - p;
        }
        assert!(ga.abs() < 1e-4 && gb.abs() < 1e-4, "gradient ({ga}, {gb})");
    }

    #[test]
    fn sigmoid_predict_is_stable_at_extremes() {
        assert_eq!(sigmoid_predict(1e6, 1.0, 0.0), 0.0);
        assert_eq!(sigmoid_predict(-1e6, 1.0, 0.0), 1.0);
        assert!((sigmoid_predict(0.0, 1.0, 0.0) - 0.5).abs() < 1e-15);
    }

    #[test]
    fn parameters_are_checked_and_echoed() {
        let k = crate::kernel::default_kernel();
        let svm = Svm::from_json(k.clone(), &json!({"c": 2, "max_iter": 50, "cache_mb": 0.5}), "/params").unwrap();
        assert_eq!((svm.c, svm.max_iter, svm.cache_bytes()), (2.0, Some(50), 1 << 19));
        assert_eq!(Svm::from_json(k.clone(), &svm.params_json(), "/params").unwrap(), svm);
        for (bad, pointer) in [
            (json!({"c": -1}), "/params/c"),
            (json!({"tol": 0}), "/params/tol"),
            (json!({"cache_mb": 2e6}), "/params/cache_mb"),
            (json!({"max_iter": 0}), "/params/max_iter"),
        ] {
            assert_eq!(Svm::from_json(k.clone(), &bad, "/params").unwrap_err().pointer, pointer);
        }
    }
}

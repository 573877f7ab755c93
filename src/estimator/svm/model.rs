//! A fitted SVM: its support vectors grouped by class, LIBSVM's coefficient layout, and
//! prediction by one-vs-one voting (with Platt probabilities when fitted for them).

use super::probability::{pairwise_coupling, sigmoid_predict, MIN_PROB};
use super::Svm;
use crate::estimator::coefficients;
use crate::estimator::targets::labels::ClassLabels;
use crate::estimator::{Coefficients, Decision, PredictOptions, Prediction, Predictor, TrainingReport};
use crate::kernel::Points;
use crate::linalg::Parallelism;
use nalgebra::DMatrix;

/// A fitted SVM: support vectors grouped by class and LIBSVM's coefficient layout.
#[derive(Debug, Clone)]
pub struct SvmModel {
    pub(super) spec: Svm,
    pub(super) classes: ClassLabels,
    pub(super) sv: Points,
    /// Class c's support vectors are sv[sv_start[c]..sv_start[c + 1]].
    pub(super) sv_start: Vec<usize>,
    /// (classes - 1) x support vectors.
    pub(super) coef: DMatrix<f64>,
    /// Per machine, in pair order (0,1), (0,2), ..., (1,2), ...
    pub(super) rho: Vec<f64>,
    /// Platt's sigmoid per machine; empty without `probability`.
    pub(super) prob_a: Vec<f64>,
    pub(super) prob_b: Vec<f64>,
    pub(super) report: TrainingReport,
    /// The training rows of the support vectors (None when stored before they were kept).
    pub(super) support_rows: Option<Vec<usize>>,
}

impl SvmModel {
    /// Whether it is a nu-SVC.
    pub fn is_nu(&self) -> bool {
        self.spec.nu.is_some()
    }

    pub fn classes(&self) -> &ClassLabels {
        &self.classes
    }

    pub fn support_vectors(&self) -> &Points {
        &self.sv
    }

    pub(crate) fn store_into(&self, s: &mut crate::estimator::StoredFit) {
        s.put_points(&self.sv);
        s.arrays = vec![
            ("sv_start".into(), self.sv_start.iter().map(|&v| v as f64).collect()),
            ("coef".into(), self.coef.as_slice().to_vec()),
            ("rho".into(), self.rho.clone()),
            ("prob_a".into(), self.prob_a.clone()),
            ("prob_b".into(), self.prob_b.clone()),
        ];
        if let Some(rows) = &self.support_rows {
            s.arrays.push(("support_rows".into(), rows.iter().map(|&r| r as f64).collect()));
        }
    }

    pub(crate) fn restore(
        spec: Svm,
        classes: ClassLabels,
        sv: Points,
        mut arrays: crate::estimator::StoredArrays,
        report: TrainingReport,
    ) -> Result<SvmModel, crate::estimator::RestoreError> {
        let k = classes.len();
        let pairs = k * (k - 1) / 2;
        let sv_start: Vec<usize> = arrays.take("sv_start", Some(k + 1))?.into_iter().map(|v| v as usize).collect();
        if sv_start[0] != 0 || sv_start.windows(2).any(|w| w[0] > w[1]) || sv_start[k] != sv.n() {
            return Err(crate::estimator::RestoreError("support-vector offsets are inconsistent".into()));
        }
        let coef = DMatrix::from_vec(k - 1, sv.n(), arrays.take("coef", Some((k - 1) * sv.n()))?);
        let rho = arrays.take("rho", Some(pairs))?;
        let prob_a = arrays.take("prob_a", None)?;
        let prob_b = arrays.take("prob_b", None)?;
        let expect_prob = if spec.probability { pairs } else { 0 };
        if prob_a.len() != expect_prob || prob_b.len() != expect_prob {
            return Err(crate::estimator::RestoreError("Platt coefficients do not match `probability`".into()));
        }
        let support_rows = super::stored_rows(&mut arrays, sv.n())?;
        Ok(SvmModel { spec, classes, sv, sv_start, coef, rho, prob_a, prob_b, report, support_rows })
    }

    /// scikit-learn's `support_`, `dual_coef_` and `intercept_`. LIBSVM's machine for the
    /// pair (i, j) is positive for class i; scikit-learn turns a binary model's around so
    /// that positive means the second class (its coefficients and intercept negated).
    pub fn coefficients(&self) -> Coefficients {
        let sign = if self.classes.len() == 2 { -1.0 } else { 1.0 };
        Coefficients::Svm {
            support: self.support_rows.as_deref().map(coefficients::rows),
            dual_coef: self.coef.row_iter().map(|r| r.iter().map(|v| sign * v).collect()).collect(),
            intercept: self.rho.iter().map(|r| -sign * r).collect(),
        }
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
        let block = crate::estimator::predict_block_rows(self.sv.n());
        if x.n() == 0 {
            return self.predict_cross(&DMatrix::zeros(self.sv.n(), 0), opts);
        }
        let parts: Vec<Prediction> = (0..x.n())
            .step_by(block)
            .map(|start| {
                let q = x.slice(start, block.min(x.n() - start));
                self.predict_cross(&self.spec.kernel.cross(&self.sv, &q, par), opts)
            })
            .collect();
        Prediction::stack(parts)
    }

    crate::estimator::spec_and_report_accessors!();

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
        self.sv.memory_bytes() + 8 * (self.coef.len() + self.rho.len() * 3 + self.sv_start.len() + self.sv.n())
    }

    fn predict_cost(&self, m: usize, _opts: &PredictOptions) -> f64 {
        (m * self.sv.n()) as f64 * (self.kernel().pair_cost(&self.sv) + 2.0 + self.coef.nrows() as f64)
    }
}

impl SvmModel {
    /// Predictions for m queries from their kernel values against every support vector
    /// (n_sv x m, in support-vector order).
    pub fn predict_cross(&self, kv: &DMatrix<f64>, opts: &PredictOptions) -> Prediction {
        let k = self.classes.len();
        let m = kv.ncols();
        let mut labels = Vec::with_capacity(m);
        let mut decision = DMatrix::zeros(m, if k == 2 { 1 } else { k });
        let with_probs = opts.probabilities && !self.prob_a.is_empty();
        let mut probabilities = with_probs.then(|| DMatrix::zeros(m, k));
        let mut dec = Vec::new();
        let mut votes = vec![0usize; k];
        {
            for (row, col) in kv.column_iter().enumerate() {
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
                let winner = crate::estimator::first_max(votes.iter().map(|&v| v as f64));
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

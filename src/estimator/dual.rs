//! The fitted form shared by one-vs-rest kernel classifiers (perceptron, kernel logistic
//! regression): one expansion f_c(x) = sum_s coef[c, s] k(x_s, x) + bias_c per machine
//! over the support points that any machine uses, each stored once. The models differ only
//! in how they train a machine and in what they answer from the decision values
//! ([`DualSpec`]); [`DualClassifier`] is the rest.

use super::{
    FitError, Fitted, ModelKind, PredictOptions, Prediction, Predictor, RestoreError, Restoring, StoredArrays,
    StoredFit, TrainingReport,
};
use crate::estimator::targets::labels::{ClassLabels, ClassificationSet};
use crate::kernel::{Kernel, Points};
use crate::linalg::Parallelism;
use nalgebra::DMatrix;
use serde_json::Value;

/// What a one-vs-rest dual classifier's checked parameters tell its fitted model.
pub trait DualSpec: Clone + std::fmt::Debug + Send + Sync + 'static {
    /// The kind whose fitted form this is.
    const KIND: ModelKind;
    fn kernel(&self) -> &Kernel;
    fn params_json(&self) -> Value;
    /// The answer for decision values `f` (m x machines) and the classes they predict.
    fn answer(&self, f: DMatrix<f64>, classes: Vec<usize>, opts: &PredictOptions) -> Prediction;
}

/// A fitted one-vs-rest dual classifier.
#[derive(Debug, Clone)]
pub struct DualClassifier<S> {
    pub(super) spec: S,
    pub(super) classes: ClassLabels,
    pub(super) expansion: DualExpansion,
    pub(super) report: TrainingReport,
}

/// One machine's training: its coefficients over all n points, bias, iterations (epochs or
/// Newton steps) and whether it converged.
pub type MachineFit = (Vec<f64>, f64, u64, bool);

impl<S: DualSpec> DualClassifier<S> {
    /// Trains one machine per class against the rest (one for two classes, the second
    /// class positive) with `train` (labels +-1); reports the most iterations any took.
    pub(super) fn fit(
        spec: &S,
        data: &ClassificationSet,
        mut train: impl FnMut(&[f64]) -> Result<MachineFit, FitError>,
    ) -> Result<Self, FitError> {
        let k = data.classes.len();
        let (mut iterations, mut converged) = (0, true);
        let mut fitted = Vec::new();
        for c in 0..machines(k) {
            let (coef, bias, it, ok) = train(&machine_labels(&data.y, k, c))?;
            iterations = iterations.max(it);
            converged &= ok;
            fitted.push((coef, bias));
        }
        Ok(DualClassifier {
            spec: spec.clone(),
            classes: data.classes.clone(),
            expansion: DualExpansion::keep_nonzero(&data.x, &fitted),
            report: TrainingReport { converged: Some(converged), iterations: Some(iterations), ..Default::default() },
        })
    }

    pub(crate) fn store_into(&self, s: &mut StoredFit) {
        self.expansion.store_into(s);
    }

    pub(crate) fn restore(
        spec: S,
        classes: ClassLabels,
        points: Points,
        mut arrays: StoredArrays,
        report: TrainingReport,
    ) -> Result<Self, RestoreError> {
        let expansion = DualExpansion::restore(points, machines(classes.len()), &mut arrays)?;
        Ok(DualClassifier { spec, classes, expansion, report })
    }
}

impl<S: DualSpec> Predictor for DualClassifier<S> {
    fn predict(&self, x: &Points, opts: &PredictOptions, par: Parallelism) -> Prediction {
        let f = self.expansion.decision(self.spec.kernel(), x, par);
        let classes = predicted_classes(&f);
        self.spec.answer(f, classes, opts)
    }

    fn kernel(&self) -> &Kernel {
        self.spec.kernel()
    }

    fn params_json(&self) -> Value {
        self.spec.params_json()
    }

    fn report(&self) -> &TrainingReport {
        &self.report
    }

    fn report_mut(&mut self) -> &mut TrainingReport {
        &mut self.report
    }

    fn n_support(&self) -> usize {
        self.expansion.points.n()
    }

    fn support(&self) -> &Points {
        &self.expansion.points
    }

    fn classes(&self) -> Option<&ClassLabels> {
        Some(&self.classes)
    }

    fn memory_bytes(&self) -> usize {
        self.expansion.memory_bytes()
    }

    fn predict_cost(&self, m: usize, _opts: &PredictOptions) -> f64 {
        self.expansion.predict_cost(m, self.kernel())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct DualExpansion {
    pub points: Points,
    /// machines x points.
    pub coef: DMatrix<f64>,
    pub bias: Vec<f64>,
}

impl DualExpansion {
    /// From per-machine coefficients over all n training points, keeping the points
    /// where any machine's coefficient is non-zero.
    pub fn keep_nonzero(x: &Points, machines: &[(Vec<f64>, f64)]) -> DualExpansion {
        let kept: Vec<usize> = (0..x.n()).filter(|&i| machines.iter().any(|(c, _)| c[i] != 0.0)).collect();
        let coef = DMatrix::from_fn(machines.len(), kept.len(), |c, s| machines[c].0[kept[s]]);
        DualExpansion { points: x.select(&kept), coef, bias: machines.iter().map(|(_, b)| *b).collect() }
    }

    /// m x machines decision values.
    pub fn decision(&self, kernel: &Kernel, x: &Points, par: Parallelism) -> DMatrix<f64> {
        let machines = self.coef.nrows();
        let mut out = DMatrix::zeros(x.n(), machines);
        let block = super::predict_block_rows(self.points.n());
        // Each machine's coefficients contiguous, for dot products in a fixed order: a
        // row's decision values are the same bits whatever rows share its call.
        let rows: Vec<Vec<f64>> = (0..machines).map(|c| self.coef.row(c).iter().copied().collect()).collect();
        for start in (0..x.n()).step_by(block) {
            let q = x.slice(start, block.min(x.n() - start));
            let k = kernel.cross(&self.points, &q, par);
            for (j, col) in k.column_iter().enumerate() {
                for (c, coef) in rows.iter().enumerate() {
                    out[(start + j, c)] = crate::linalg::dot_wide(coef, col.as_slice()) + self.bias[c];
                }
            }
        }
        out
    }

    pub fn memory_bytes(&self) -> usize {
        self.points.memory_bytes() + 8 * (self.coef.len() + self.bias.len())
    }

    pub fn predict_cost(&self, m: usize, kernel: &Kernel) -> f64 {
        (m * self.points.n()) as f64 * (kernel.pair_cost(&self.points) + 2.0 + self.coef.nrows() as f64)
    }

    fn store_into(&self, s: &mut StoredFit) {
        s.put_points(&self.points);
        s.arrays = vec![("coef".into(), self.coef.as_slice().to_vec()), ("bias".into(), self.bias.clone())];
    }

    fn restore(points: Points, machines: usize, arrays: &mut StoredArrays) -> Result<DualExpansion, RestoreError> {
        let coef = DMatrix::from_vec(machines, points.n(), arrays.take("coef", Some(machines * points.n()))?);
        let bias = arrays.take("bias", Some(machines))?;
        Ok(DualExpansion { points, coef, bias })
    }
}

/// Machines a one-vs-rest classifier trains: one (second class positive) for two classes,
/// one per class otherwise.
pub fn machines(classes: usize) -> usize {
    if classes == 2 {
        1
    } else {
        classes
    }
}

/// Labels +-1 of machine `c` for class indices `y`.
pub fn machine_labels(y: &[usize], classes: usize, c: usize) -> Vec<f64> {
    let positive = if classes == 2 { 1 } else { c };
    y.iter().map(|&k| if k == positive { 1.0 } else { -1.0 }).collect()
}

/// Predicted class of each row of an m x machines decision matrix: the second class when
/// the binary score is positive; otherwise the first largest score.
pub fn predicted_classes(decision: &DMatrix<f64>) -> Vec<usize> {
    (0..decision.nrows())
        .map(|r| {
            if decision.ncols() == 1 {
                usize::from(decision[(r, 0)] > 0.0)
            } else {
                super::first_max(decision.row(r).iter().copied())
            }
        })
        .collect()
}

impl<S: DualSpec> Fitted for DualClassifier<S> {
    super::fitted_basics!();

    fn kind(&self) -> ModelKind {
        S::KIND
    }
}

/// A stored one-vs-rest dual classifier of spec `S`, read by `read`.
pub(crate) fn restore<S: DualSpec>(
    mut r: Restoring,
    read: fn(crate::kernel::Kernel, &Value, &str) -> Result<S, crate::spec::FieldError>,
) -> Result<Box<dyn Fitted>, RestoreError> {
    let spec = r.spec(read)?;
    let classes = ClassLabels::restore(&r)?;
    let x = r.points(false)?;
    Ok(Box::new(DualClassifier::restore(spec, classes, x, r.arrays, r.report)?))
}

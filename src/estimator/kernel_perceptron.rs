//! The kernel perceptron in dual form with a bias: f(x) = sum_i alpha_i y_i k(x_i, x) + b,
//! alpha_i counting the mistakes made on x_i. Each epoch visits the points in a new
//! shuffle drawn from `seed`; a point is a mistake when y_i f(x_i) <= 0, and then
//! alpha_i += 1 and b += y_i. Training stops after an epoch without mistakes (converged)
//! or after `max_epochs`. More than two classes: one machine per class against the rest,
//! the largest score wins.
//!
//! f at every training point is kept up to date (a mistake adds one kernel column), so
//! memory stays O(n) and a mistake costs O(n d).

use super::dual::{DualClassifier, DualSpec, MachineFit};
use super::{
    Decision, Estimator, FitContext, FitError, Fitted, ModelKind, PredictOptions, Prediction, RestoreError, Restoring,
    Spec, TrainingData,
};
use crate::estimator::targets::labels::ClassificationSet;
use crate::kernel::column::ColumnKernel;
use crate::kernel::Kernel;

use crate::optimize::SplitMix64;
use crate::spec::{FieldError, ObjectReader};
use nalgebra::DMatrix;
use serde_json::{json, Value};

/// The most epochs a fit may ask for.
pub const MAX_EPOCHS: u64 = 100_000;

#[derive(Debug, Clone, PartialEq)]
pub struct KernelPerceptron {
    pub kernel: Kernel,
    pub max_epochs: u64,
    pub seed: u64,
}

impl KernelPerceptron {
    pub fn from_json(kernel: Kernel, params: &Value, path: &str) -> Result<KernelPerceptron, FieldError> {
        let mut obj = ObjectReader::new(params, path)?;
        let max_epochs = obj.u64("max_epochs")?.unwrap_or(100);
        if !(1..=MAX_EPOCHS).contains(&max_epochs) {
            return Err(FieldError::invalid(obj.pointer("max_epochs"), format!("must be in 1..={MAX_EPOCHS}")));
        }
        let seed = obj.u64("seed")?.unwrap_or(0);
        crate::estimator::approximation::Approximation::read_exact_only(&mut obj)?;
        obj.finish()?;
        Ok(KernelPerceptron { kernel, max_epochs, seed })
    }

    pub fn params_json(&self) -> Value {
        json!({"max_epochs": self.max_epochs, "seed": self.seed})
    }

    /// One machine: (alpha_i y_i for every point, b, epochs run, converged).
    fn train_machine(
        &self,
        columns: &ColumnKernel,
        y: &[f64],
        rng: &mut SplitMix64,
        ctx: &FitContext,
    ) -> Result<MachineFit, FitError> {
        let n = y.len();
        let (mut coef, mut bias) = (vec![0.0; n], 0.0);
        let mut f = vec![0.0; n];
        let mut column = vec![0.0; n];
        let mut order: Vec<usize> = (0..n).collect();
        for epoch in 1..=self.max_epochs {
            ctx.cancel.check()?;
            for i in (1..n).rev() {
                order.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
            }
            let mut mistakes = 0;
            for &i in &order {
                if y[i] * f[i] <= 0.0 {
                    mistakes += 1;
                    coef[i] += y[i];
                    bias += y[i];
                    columns.column(i, 0..n, &mut column, ctx.par);
                    for (fj, kj) in f.iter_mut().zip(&column) {
                        *fj += y[i] * (kj + 1.0);
                    }
                }
            }
            if mistakes == 0 {
                return Ok((coef, bias, epoch, true));
            }
        }
        Ok((coef, bias, self.max_epochs, false))
    }
}

pub type KernelPerceptronModel = DualClassifier<KernelPerceptron>;

impl Estimator for KernelPerceptron {
    type Data = ClassificationSet;
    type Fitted = KernelPerceptronModel;

    fn fit(&self, data: &ClassificationSet, ctx: &FitContext) -> Result<KernelPerceptronModel, FitError> {
        let columns = ColumnKernel::new(&self.kernel, &data.x);
        let mut rng = SplitMix64::new(self.seed);
        DualClassifier::fit(self, data, |y| self.train_machine(&columns, y, &mut rng, ctx))
    }
}

impl DualSpec for KernelPerceptron {
    const KIND: ModelKind = ModelKind::KernelPerceptron;

    fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    fn params_json(&self) -> Value {
        self.params_json()
    }

    /// The decision values themselves: one per row for two classes, one per class else.
    fn answer(&self, d: DMatrix<f64>, classes: Vec<usize>, _opts: &PredictOptions) -> Prediction {
        let decision = if d.ncols() == 1 {
            Decision::Binary(d.column(0).iter().copied().collect())
        } else {
            Decision::PerClass(d)
        };
        Prediction { classes: Some(classes), decision: Some(decision), ..Default::default() }
    }
}

impl Spec for KernelPerceptron {
    crate::estimator::spec_basics!();

    fn kind(&self) -> ModelKind {
        ModelKind::KernelPerceptron
    }

    fn fit_memory_estimate(&self, n: usize, d: usize) -> usize {
        n * (d + 4) * 8 * 2
    }

    fn for_rows(&self, _: &[usize]) -> Box<dyn Spec> {
        Box::new(self.clone())
    }

    fn fit_checked(&self, data: &TrainingData, ctx: &FitContext) -> Result<Box<dyn Fitted>, FitError> {
        let data = data.classification(self.kind())?;
        Ok(Box::new(Estimator::fit(self, data, ctx)?))
    }
}

/// A stored kernel perceptron.
pub(crate) fn restore(r: Restoring) -> Result<Box<dyn Fitted>, RestoreError> {
    super::dual::restore(r, KernelPerceptron::from_json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimator::targets::labels::ClassLabels;
    use crate::estimator::Predictor;
    use crate::estimator::Target;
    use crate::kernel::Points;
    use crate::linalg::Parallelism;

    fn set(x: &[[f64; 2]], labels: &[&str]) -> ClassificationSet {
        let rows: Vec<Vec<f64>> = x.iter().map(|r| r.to_vec()).collect();
        let targets: Vec<Target> = labels.iter().map(|s| Target::Text(s.to_string())).collect();
        let (classes, y) = ClassLabels::encode(&targets).unwrap();
        ClassificationSet { x: Points::from_rows(&rows), y, classes }
    }

    /// A hand-run of the dual perceptron with a linear kernel on two points: the first
    /// visit is a mistake (f = 0), which alone separates them.
    #[test]
    fn two_points_converge_after_one_mistake_each_way() {
        let data = set(&[[1.0, 0.0], [-1.0, 0.0]], &["a", "b"]);
        let spec = KernelPerceptron::from_json(
            Kernel::from_json(&json!({"type": "linear"})).unwrap(),
            &json!({"seed": 3}),
            "/params",
        )
        .unwrap();
        let m = spec.fit(&data, &FitContext::sequential()).unwrap();
        assert_eq!(m.report.converged, Some(true));
        let p = m.predict(&data.x, &PredictOptions::default(), Parallelism::Sequential);
        assert_eq!(p.classes, Some(vec![0, 1]));
        // "b" (second class) is the positive one: its side scores > 0.
        let Some(Decision::Binary(f)) = p.decision else { panic!("binary decision") };
        assert!(f[0] <= 0.0 && f[1] > 0.0, "{f:?}");
        // Each coefficient is +-(mistake count) and the bias their sum of labels.
        let e = &m.expansion;
        assert!(e.coef.iter().all(|c| c.fract() == 0.0));
        assert_eq!(e.bias[0], e.coef.iter().sum::<f64>());
    }

    /// XOR is not linearly separable; an rbf kernel separates it, a linear one cannot
    /// and stops at max_epochs unconverged.
    #[test]
    fn xor_needs_a_nonlinear_kernel() {
        let data = set(&[[0.0, 0.0], [1.0, 1.0], [0.0, 1.0], [1.0, 0.0]], &["x", "x", "o", "o"]);
        let rbf = KernelPerceptron::from_json(
            Kernel::from_json(&json!({"type": "rbf", "gamma": 2.0})).unwrap(),
            &json!({}),
            "/params",
        )
        .unwrap();
        let m = rbf.fit(&data, &FitContext::sequential()).unwrap();
        assert_eq!(m.report.converged, Some(true));
        let p = m.predict(&data.x, &PredictOptions::default(), Parallelism::Sequential);
        assert_eq!(p.classes.unwrap(), data.y);
        let linear = KernelPerceptron::from_json(
            crate::kernel::Kernel::from_json(&json!({"type": "linear"})).unwrap(),
            &json!({"max_epochs": 7}),
            "/params",
        )
        .unwrap();
        let m = linear.fit(&data, &FitContext::sequential()).unwrap();
        assert_eq!((m.report.converged, m.report.iterations), (Some(false), Some(7)));
    }

    #[test]
    fn three_classes_train_one_machine_each() {
        let data = set(
            &[[0.0, 0.0], [0.2, 0.1], [5.0, 0.0], [5.1, 0.3], [0.0, 5.0], [0.2, 5.2]],
            &["a", "a", "b", "b", "c", "c"],
        );
        let spec = KernelPerceptron::from_json(
            Kernel::from_json(&json!({"type": "rbf", "gamma": 0.5})).unwrap(),
            &json!({}),
            "/params",
        )
        .unwrap();
        let m = spec.fit(&data, &FitContext::sequential()).unwrap();
        assert_eq!(m.expansion.coef.nrows(), 3);
        let p = m.predict(&data.x, &PredictOptions::default(), Parallelism::Sequential);
        assert_eq!(p.classes.unwrap(), data.y);
        assert!(matches!(p.decision, Some(Decision::PerClass(ref d)) if d.ncols() == 3));
    }
}

//! Kernel logistic regression: minimises
//!   L(a, b) = sum_i log(1 + exp(-y_i f_i)) + (lambda / 2) a'Ka,   f = K a + b,
//! with an unpenalised bias, by Newton's method with a backtracking (Armijo) line search.
//!
//! With r_i = dloss/df_i and W = diag(p_i (1 - p_i)), the Newton system H d = -g factors
//! as K times the (n + 1) x (n + 1) system
//!   (W K + lambda I) da + W 1 db = -(r + lambda a),   1'W K da + 1'W 1 db = -1'r,
//! whose solution solves the full one even when K is singular, and which needs no K^-1.
//! More than two classes: one machine per class against the rest, probabilities
//! normalised over the classes. With `approximation: nystrom` the same objective is
//! solved over the span of M inducing points (`nystrom.rs`).

pub mod nystrom;

use super::dual::{DualClassifier, DualSpec, MachineFit};
use super::{
    log1p_exp, sigmoid, Estimator, FitContext, FitError, Fitted, ModelKind, PredictOptions, Prediction, RestoreError,
    Restoring, Spec, TrainingData,
};
use crate::estimator::approximation::{Approximation, Mode};
use crate::estimator::targets::labels::ClassificationSet;
use crate::kernel::Kernel;
use crate::linalg;
use crate::spec::{FieldError, ObjectReader};
use nalgebra::{DMatrix, DVector};
use serde_json::{json, Value};

/// Newton stops when the largest gradient entry is below this, relative to n.
const GRADIENT_TOL: f64 = 1e-9;

#[derive(Debug, Clone, PartialEq)]
pub struct KernelLogistic {
    pub kernel: Kernel,
    pub lambda: f64,
    pub max_iter: u64,
    /// `approximation: nystrom` fits on Nystrom features (`nystrom.rs` here).
    pub approx: Approximation,
    /// Draws the inducing points.
    pub seed: u64,
}

impl KernelLogistic {
    pub fn from_json(kernel: Kernel, params: &Value, path: &str) -> Result<KernelLogistic, FieldError> {
        let mut obj = ObjectReader::new(params, path)?;
        let lambda = obj.f64("lambda")?.unwrap_or(1.0);
        if lambda <= 0.0 {
            return Err(FieldError::invalid(obj.pointer("lambda"), "must be positive"));
        }
        let max_iter = obj.u64("max_iter")?.unwrap_or(100);
        if !(1..=10_000).contains(&max_iter) {
            return Err(FieldError::invalid(obj.pointer("max_iter"), "must be in 1..=10000"));
        }
        let approx = Approximation::read_without_loo(&mut obj)?;
        let seed = obj.u64("seed")?.unwrap_or(0);
        obj.finish()?;
        Ok(KernelLogistic { kernel, lambda, max_iter, approx, seed })
    }

    pub fn params_json(&self) -> Value {
        let mut out = json!({"lambda": self.lambda, "max_iter": self.max_iter, "seed": self.seed});
        self.approx.write_json_without_loo(out.as_object_mut().expect("an object"));
        out
    }

    /// K and the Newton system, n x n and (n + 1)^2, plus LU workspace.
    pub fn fit_memory_estimate(&self, n: usize, d: usize) -> usize {
        (3 * (n + 1) * (n + 1) + n * d) * 8
    }

    /// The objective at (a, b) given f = K a + b.
    fn objective(&self, a: &DVector<f64>, f: &DVector<f64>, y: &[f64], k: &DMatrix<f64>) -> f64 {
        let loss: f64 = f.iter().zip(y).map(|(fi, yi)| log1p_exp(-yi * fi)).sum();
        loss + 0.5 * self.lambda * a.dot(&(k * a))
    }

    /// One machine: (a, b, iterations, converged).
    fn train_machine(&self, k: &DMatrix<f64>, y: &[f64], ctx: &FitContext) -> Result<MachineFit, FitError> {
        let n = y.len();
        let (mut a, mut b) = (DVector::zeros(n), 0.0);
        let mut f = DVector::zeros(n);
        let mut value = self.objective(&a, &f, y, k);
        for iter in 1..=self.max_iter {
            ctx.cancel.check()?;
            // r_i = dloss/df_i = -y_i sigma(-y_i f_i); w_i = sigma(f_i) sigma(-f_i).
            let r: Vec<f64> = (0..n).map(|i| -y[i] * sigmoid(-y[i] * f[i])).collect();
            let w: Vec<f64> = (0..n).map(|i| sigmoid(f[i]) * sigmoid(-f[i])).collect();
            let grad_a = k * (DVector::from_column_slice(&r) + &a * self.lambda);
            let grad_b: f64 = r.iter().sum();
            if grad_a.amax().max(grad_b.abs()) <= GRADIENT_TOL * n as f64 {
                return Ok((a.as_slice().to_vec(), b, iter - 1, true));
            }
            let mut system = DMatrix::zeros(n + 1, n + 1);
            for j in 0..n {
                for i in 0..n {
                    system[(i, j)] = w[i] * k[(i, j)];
                }
                system[(j, j)] += self.lambda;
                system[(n, j)] = (0..n).map(|i| w[i] * k[(i, j)]).sum();
            }
            for i in 0..n {
                system[(i, n)] = w[i];
            }
            system[(n, n)] = w.iter().sum::<f64>().max(1e-300);
            let mut rhs: Vec<f64> = (0..n).map(|i| -(r[i] + self.lambda * a[i])).collect();
            rhs.push(-grad_b);
            let step = linalg::solve_square(&system, &rhs)
                .ok_or_else(|| FitError::Optimisation("the Newton system is singular; increase lambda".into()))?;
            let da = DVector::from_column_slice(&step[..n]);
            let db = step[n];
            let df = k * &da + DVector::from_element(n, db);
            let slope = grad_a.dot(&da) + grad_b * db;
            let mut t = 1.0;
            loop {
                let (na, nf) = (&a + &da * t, &f + &df * t);
                let nv = self.objective(&na, &nf, y, k);
                if nv <= value + 1e-4 * t * slope {
                    (a, b, f, value) = (na, b + t * db, nf, nv);
                    break;
                }
                t /= 2.0;
                if t < 1e-12 {
                    // No decrease along the Newton direction: at the optimum to round-off.
                    return Ok((a.as_slice().to_vec(), b, iter, true));
                }
            }
        }
        Ok((a.as_slice().to_vec(), b, self.max_iter, false))
    }
}

pub type KernelLogisticModel = DualClassifier<KernelLogistic>;

impl Estimator for KernelLogistic {
    type Data = ClassificationSet;
    type Fitted = KernelLogisticModel;

    fn fit(&self, data: &ClassificationSet, ctx: &FitContext) -> Result<KernelLogisticModel, FitError> {
        if self.approx.is_nystrom() {
            return crate::estimator::kernel_logistic::nystrom::fit(self, data, ctx);
        }
        let gram = self.kernel.gram(&data.x, ctx.par);
        DualClassifier::fit(self, data, |y| self.train_machine(&gram, y, ctx))
    }
}

impl DualSpec for KernelLogistic {
    const KIND: ModelKind = ModelKind::KernelLogistic;

    fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    fn params_json(&self) -> Value {
        self.params_json()
    }

    /// Probabilities: the sigmoid of the score for two classes; one-vs-rest sigmoids
    /// normalised over the classes otherwise.
    fn answer(&self, f: DMatrix<f64>, classes: Vec<usize>, opts: &PredictOptions) -> Prediction {
        let probabilities = opts.probabilities.then(|| {
            if f.ncols() == 1 {
                DMatrix::from_fn(f.nrows(), 2, |r, c| {
                    let p = sigmoid(f[(r, 0)]);
                    if c == 1 {
                        p
                    } else {
                        1.0 - p
                    }
                })
            } else {
                let mut p = f.map(sigmoid);
                for mut row in p.row_iter_mut() {
                    let total = row.sum();
                    row /= total;
                }
                p
            }
        });
        Prediction { classes: Some(classes), probabilities, ..Default::default() }
    }
}

impl Spec for KernelLogistic {
    crate::estimator::spec_basics!();

    fn kind(&self) -> ModelKind {
        ModelKind::KernelLogistic
    }

    fn fit_memory_estimate(&self, n: usize, d: usize) -> usize {
        match self.approx.mode {
            // (Variational is refused for kernel_logistic when its params are read.)
            Mode::Nystrom | Mode::Variational => {
                crate::estimator::nystrom_features::fit_memory_estimate(n, d, self.approx.m(n))
            }
            Mode::Exact | Mode::Auto => KernelLogistic::fit_memory_estimate(self, n, d),
        }
    }

    fn for_rows(&self, _: &[usize]) -> Box<dyn Spec> {
        Box::new(self.clone())
    }

    fn approximation(&self) -> Option<&Approximation> {
        Some(&self.approx)
    }

    fn approximation_mut(&mut self) -> Option<&mut Approximation> {
        Some(&mut self.approx)
    }

    fn fit_checked(&self, data: &TrainingData, ctx: &FitContext) -> Result<Box<dyn Fitted>, FitError> {
        let data = data.classification(self.kind())?;
        Ok(Box::new(Estimator::fit(self, data, ctx)?))
    }
}

/// A stored kernel logistic regression, exact or on Nystrom features (one form).
pub(crate) fn restore(r: Restoring) -> Result<Box<dyn Fitted>, RestoreError> {
    super::dual::restore(r, KernelLogistic::from_json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimator::targets::labels::ClassLabels;
    use crate::estimator::Predictor;
    use crate::kernel::Points;
    use crate::linalg::Parallelism;

    /// At the fitted (a, b) the gradient of the objective, computed here from its
    /// definition with nalgebra, vanishes.
    #[test]
    fn fit_reaches_a_stationary_point_of_the_objective() {
        let x = Points::from_columns(crate::test_support::seeded_matrix(2, 30, 8));
        let y: Vec<f64> = (0..30).map(|i| if x.point(i)[0] + 0.3 * x.point(i)[1] > 0.1 { 1.0 } else { -1.0 }).collect();
        let spec = KernelLogistic::from_json(
            Kernel::from_json(&json!({"type": "rbf", "gamma": 1.0})).unwrap(),
            &json!({"lambda": 0.5}),
            "/params",
        )
        .unwrap();
        let k = spec.kernel.gram(&x, Parallelism::Sequential);
        let (a, b, _, converged) = spec.train_machine(&k, &y, &FitContext::sequential()).unwrap();
        assert!(converged);
        let a = DVector::from_column_slice(&a);
        let f = &k * &a + DVector::from_element(30, b);
        let r = DVector::from_fn(30, |i, _| -y[i] / (1.0 + (y[i] * f[i]).exp()));
        let grad_a = &k * (&r + &a * 0.5);
        assert!(grad_a.amax() < 1e-7 && r.sum().abs() < 1e-7, "{} {}", grad_a.amax(), r.sum());
    }

    #[test]
    fn probabilities_are_normalised_over_classes() {
        let rows: Vec<Vec<f64>> = (0..12).map(|i| vec![(i / 4) as f64 * 3.0 + (i % 4) as f64 * 0.1]).collect();
        let targets: Vec<crate::estimator::Target> =
            (0..12).map(|i| crate::estimator::Target::Number((i / 4) as f64)).collect();
        let (classes, y) = ClassLabels::encode(&targets).unwrap();
        let data = ClassificationSet { x: Points::from_rows(&rows), y, classes };
        let spec =
            KernelLogistic::from_json(crate::kernel::default_kernel(), &json!({"lambda": 0.01}), "/params").unwrap();
        let m = spec.fit(&data, &FitContext::sequential()).unwrap();
        let p = m.predict(&data.x, &PredictOptions::default(), Parallelism::Sequential);
        assert_eq!(p.classes.unwrap(), data.y);
        let probs = p.probabilities.unwrap();
        for r in 0..12 {
            assert!((probs.row(r).sum() - 1.0).abs() < 1e-12);
        }
    }
}

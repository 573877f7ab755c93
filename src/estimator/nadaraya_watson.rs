//! Nadaraya-Watson kernel regression: y(x) = sum_n k(x, x_n) y_n / sum_m k(x, x_m).
//!
//! The weights must be non-negative, so kernels that can go negative (linear, sigmoid,
//! polynomials of odd degree, and anything built from them) are refused with 422. Where
//! every weight is 0 at a query point (far from all data with a narrow kernel) the
//! prediction is the y of the nearest training point, as the contract says. Nothing is
//! fitted: the model keeps the training set.

use super::{
    Estimator, FitContext, FitError, Fitted, ModelKind, PredictOptions, Prediction, Predictor, RestoreError, Restoring,
    Spec, TrainingData, TrainingReport, TrainingSet,
};
use crate::kernel::{Kernel, Points, RowKind};
use crate::linalg::Parallelism;
use crate::spec::{FieldError, ObjectReader};
use serde_json::{json, Value};

#[derive(Debug, Clone, PartialEq)]
pub struct NadarayaWatson {
    pub kernel: Kernel,
}

impl NadarayaWatson {
    pub fn from_json(kernel: Kernel, params: &Value, path: &str) -> Result<NadarayaWatson, FieldError> {
        let mut obj = ObjectReader::new(params, path)?;
        crate::estimator::approximation::Approximation::read_exact_only(&mut obj)?;
        obj.finish()?;
        if let Some(at) = kernel.negative_part() {
            return Err(FieldError::invalid(
                format!("/kernel{at}"),
                "nadaraya_watson needs a kernel that is never negative (not linear, sigmoid or an odd-degree polynomial)",
            ));
        }
        Ok(NadarayaWatson { kernel })
    }

    pub fn params_json(&self) -> Value {
        json!({})
    }
}

#[derive(Debug, Clone)]
pub struct NadarayaWatsonModel {
    spec: NadarayaWatson,
    x: Points,
    y: Vec<f64>,
    report: TrainingReport,
}

impl NadarayaWatsonModel {
    pub(super) fn store_into(&self, s: &mut super::StoredFit) {
        s.put_points(&self.x);
        s.alpha = self.y.clone();
    }

    pub(super) fn restore(spec: NadarayaWatson, x: Points, y: Vec<f64>, report: TrainingReport) -> Self {
        NadarayaWatsonModel { spec, x, y, report }
    }

    /// y of the training point nearest to q (the first of equals).
    fn nearest(&self, q: &[f64]) -> f64 {
        let d2 = |p: &[f64]| p.iter().zip(q).map(|(a, b)| (a - b) * (a - b)).sum::<f64>();
        let best = (0..self.x.n()).fold((f64::INFINITY, 0), |best, i| {
            let d = d2(self.x.point(i));
            if d < best.0 {
                (d, i)
            } else {
                best
            }
        });
        self.y[best.1]
    }
}

impl Estimator for NadarayaWatson {
    type Data = TrainingSet;
    type Fitted = NadarayaWatsonModel;

    fn fit(&self, data: &TrainingSet, ctx: &FitContext) -> Result<NadarayaWatsonModel, FitError> {
        ctx.cancel.check()?;
        Ok(NadarayaWatsonModel {
            spec: self.clone(),
            x: data.x.clone(),
            y: data.y.clone(),
            report: TrainingReport::default(),
        })
    }
}

impl Predictor for NadarayaWatsonModel {
    fn predict(&self, x: &Points, _opts: &PredictOptions, par: Parallelism) -> Prediction {
        let block = super::predict_block_rows(self.x.n());
        let mut values = Vec::with_capacity(x.n());
        for start in (0..x.n()).step_by(block) {
            let q = x.slice(start, block.min(x.n() - start));
            let k = self.spec.kernel.cross(&self.x, &q, par);
            for (c, col) in k.column_iter().enumerate() {
                let total: f64 = col.iter().sum();
                values.push(if total > 0.0 {
                    col.iter().zip(&self.y).map(|(w, y)| w * y).sum::<f64>() / total
                } else if q.kind() == RowKind::Numeric {
                    self.nearest(q.point(c))
                } else {
                    // Strings and token sets have no distance to find a nearest row by.
                    self.y.iter().sum::<f64>() / self.y.len() as f64
                });
            }
        }
        Prediction { values, ..Default::default() }
    }

    super::spec_and_report_accessors!();

    fn n_support(&self) -> usize {
        self.x.n()
    }

    fn support(&self) -> &Points {
        &self.x
    }

    fn memory_bytes(&self) -> usize {
        self.x.memory_bytes() + self.y.len() * 8
    }

    fn predict_cost(&self, m: usize, _opts: &PredictOptions) -> f64 {
        (m * self.x.n()) as f64 * (self.kernel().pair_cost(&self.x) + 3.0)
    }
}

impl Spec for NadarayaWatson {
    crate::estimator::spec_basics!();

    fn kind(&self) -> ModelKind {
        ModelKind::NadarayaWatson
    }

    fn fit_memory_estimate(&self, n: usize, d: usize) -> usize {
        n * (d + 4) * 8 * 2
    }

    fn for_rows(&self, _: &[usize]) -> Box<dyn Spec> {
        Box::new(self.clone())
    }

    fn fit_checked(&self, data: &TrainingData, ctx: &FitContext) -> Result<Box<dyn Fitted>, FitError> {
        let data = data.regression(self.kind())?;
        Ok(Box::new(Estimator::fit(self, data, ctx)?))
    }
}

impl Fitted for NadarayaWatsonModel {
    super::fitted_basics!();

    fn kind(&self) -> ModelKind {
        ModelKind::NadarayaWatson
    }
}

/// A stored Nadaraya-Watson model: its rows and their targets.
pub(crate) fn restore(mut r: Restoring) -> Result<Box<dyn Fitted>, RestoreError> {
    let spec = r.spec(NadarayaWatson::from_json)?;
    let x = r.points(false)?;
    let (_, y, _) = super::targets::outputs::restore_columns(&mut r, x.n())?;
    Ok(Box::new(NadarayaWatsonModel::restore(spec, x, y, r.report)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fit(kernel: Value, x: &[Vec<f64>], y: &[f64]) -> NadarayaWatsonModel {
        let spec = NadarayaWatson::from_json(Kernel::from_json(&kernel).unwrap(), &json!({}), "/params").unwrap();
        spec.fit(&TrainingSet::new(Points::from_rows(x), y.to_vec()), &FitContext::sequential()).unwrap()
    }

    /// Against the weighted mean written out by hand for a Gaussian kernel.
    #[test]
    fn prediction_is_the_kernel_weighted_mean() {
        let x = vec![vec![0.0], vec![1.0], vec![3.0]];
        let y = [1.0, 2.0, -1.0];
        let m = fit(json!({"type": "rbf", "gamma": 0.5}), &x, &y);
        let p = m.predict(&Points::from_rows(&[vec![0.7]]), &PredictOptions::default(), Parallelism::Sequential);
        let w: Vec<f64> = [0.0f64, 1.0, 3.0].iter().map(|xi| (-0.5 * (0.7 - xi) * (0.7 - xi)).exp()).collect();
        let want = (w[0] * 1.0 + w[1] * 2.0 - w[2]) / w.iter().sum::<f64>();
        assert!((p.values[0] - want).abs() < 1e-14, "{} vs {want}", p.values[0]);
    }

    #[test]
    fn vanishing_weights_fall_back_to_the_nearest_point() {
        let x = vec![vec![0.0, 0.0], vec![10.0, 0.0]];
        let m = fit(json!({"type": "rbf", "gamma": 100.0}), &x, &[5.0, 7.0]);
        let q = Points::from_rows(&[vec![8.0, 3.0], vec![-4.0, 0.0]]);
        assert_eq!(m.predict(&q, &PredictOptions::default(), Parallelism::Sequential).values, vec![7.0, 5.0]);
    }

    #[test]
    fn kernels_that_can_go_negative_are_refused_with_a_pointer() {
        let k = |v: Value| Kernel::from_json(&v).unwrap();
        let e = NadarayaWatson::from_json(k(json!({"type": "linear"})), &json!({}), "/params").unwrap_err();
        assert_eq!(e.pointer, "/kernel/type");
        let nested = json!({"type": "sum", "kernels": [{"type": "rbf"}, {"type": "scale", "factor": 2, "kernel": {"type": "polynomial", "degree": 3}}]});
        let e = NadarayaWatson::from_json(k(nested), &json!({}), "/params").unwrap_err();
        assert_eq!(e.pointer, "/kernel/kernels/1/kernel/degree");
        assert!(NadarayaWatson::from_json(k(json!({"type": "polynomial", "degree": 2})), &json!({}), "/params").is_ok());
        let e = NadarayaWatson::from_json(k(json!({"type": "rbf"})), &json!({"lambda": 1}), "/params").unwrap_err();
        assert_eq!(e.pointer, "/params/lambda");
    }
}

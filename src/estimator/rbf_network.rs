//! RBF network: f(x) = sum_m w_m k(x, c_m) over M centres, with
//! w = (Phi'Phi + lambda I)^-1 Phi'y and Phi[n, m] = k(x_n, c_m).
//!
//! `centers` omitted: every training point is a centre (M = n), and with lambda 0 that is
//! exact interpolation for a positive-definite kernel. A count draws that many distinct
//! training points with `seed`. The weights come from a QR least-squares solve of
//! [Phi; sqrt(lambda) I] w = [y; 0], which has the contract's normal equations as its
//! optimality condition without squaring Phi's condition number.

use super::{
    Estimator, FitContext, FitError, Fitted, ModelKind, PredictOptions, Prediction, Predictor, RestoreError, Restoring,
    Spec, TrainingData, TrainingReport, TrainingSet,
};
use crate::kernel::{Kernel, Points};
use crate::linalg::{self, Parallelism};
use crate::optimize::SplitMix64;
use crate::spec::{FieldError, ObjectReader};
use nalgebra::DMatrix;
use serde_json::{json, Value};

#[derive(Debug, Clone, PartialEq)]
pub struct RbfNetwork {
    pub kernel: Kernel,
    /// None: every training point.
    pub centers: Option<u64>,
    pub lambda: f64,
    pub seed: u64,
}

impl RbfNetwork {
    pub fn from_json(kernel: Kernel, params: &Value, path: &str) -> Result<RbfNetwork, FieldError> {
        let mut obj = ObjectReader::new(params, path)?;
        let centers = obj.u64("centers")?;
        if centers == Some(0) {
            return Err(FieldError::invalid(obj.pointer("centers"), "must be at least 1"));
        }
        let lambda = obj.f64("lambda")?.unwrap_or(0.0);
        if lambda < 0.0 {
            return Err(FieldError::invalid(obj.pointer("lambda"), "must not be negative"));
        }
        let seed = obj.u64("seed")?.unwrap_or(0);
        crate::estimator::approximation::Approximation::read_exact_only(&mut obj)?;
        obj.finish()?;
        Ok(RbfNetwork { kernel, centers, lambda, seed })
    }

    pub fn params_json(&self) -> Value {
        json!({"centers": self.centers, "lambda": self.lambda, "seed": self.seed})
    }

    /// Phi and the augmented QR factorisation: (n + M) x M.
    pub fn fit_memory_estimate(&self, n: usize, d: usize) -> usize {
        let m = self.centers.map_or(n, |c| c as usize);
        (2 * (n + m) * m + n * d) * 8
    }

    /// Indices of the centres: all points, or `count` distinct ones drawn with the seed.
    fn centre_rows(&self, n: usize) -> Result<Vec<usize>, FitError> {
        let Some(count) = self.centers else { return Ok((0..n).collect()) };
        let count = count as usize;
        if count > n {
            return Err(FitError::Invalid(FieldError::invalid(
                "/params/centers",
                format!("{count} centres requested but there are only {n} training rows"),
            )));
        }
        let mut rng = SplitMix64::new(self.seed);
        let mut rows: Vec<usize> = (0..n).collect();
        for i in 0..count {
            let j = i + (rng.next_u64() % (n - i) as u64) as usize;
            rows.swap(i, j);
        }
        rows.truncate(count);
        Ok(rows)
    }
}

#[derive(Debug, Clone)]
pub struct RbfNetworkModel {
    spec: RbfNetwork,
    centres: Points,
    weights: Vec<f64>,
    report: TrainingReport,
}

impl RbfNetworkModel {
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }

    pub(super) fn store_into(&self, s: &mut super::StoredFit) {
        s.put_points(&self.centres);
        s.alpha = self.weights.clone();
    }

    pub(super) fn restore(spec: RbfNetwork, centres: Points, weights: Vec<f64>, report: TrainingReport) -> Self {
        RbfNetworkModel { spec, centres, weights, report }
    }
}

impl Estimator for RbfNetwork {
    type Data = TrainingSet;
    type Fitted = RbfNetworkModel;

    fn fit(&self, data: &TrainingSet, ctx: &FitContext) -> Result<RbfNetworkModel, FitError> {
        let n = data.x.n();
        let centres = data.x.select(&self.centre_rows(n)?);
        let m = centres.n();
        ctx.cancel.check()?;
        // Phi: n x M, k(x_n, c_m); for all points as centres that is the Gram matrix, with
        // `white` on its diagonal as in the other models' K.
        let phi = match self.centers {
            None => self.kernel.gram(&data.x, ctx.par),
            Some(_) => self.kernel.cross(&data.x, &centres, ctx.par),
        };
        let (a, b) = if self.lambda > 0.0 {
            let mut a = DMatrix::zeros(n + m, m);
            a.rows_mut(0, n).copy_from(&phi);
            let s = self.lambda.sqrt();
            for j in 0..m {
                a[(n + j, j)] = s;
            }
            let mut b = data.y.clone();
            b.resize(n + m, 0.0);
            (a, b)
        } else {
            (phi, data.y.clone())
        };
        ctx.cancel.check()?;
        let weights = linalg::least_squares(&a, &b);
        if weights.iter().any(|w| !w.is_finite()) {
            return Err(FitError::Invalid(FieldError::invalid(
                "/params/lambda",
                "the centres' kernel matrix is singular: use a positive lambda or fewer centres",
            )));
        }
        Ok(RbfNetworkModel { spec: self.clone(), centres, weights, report: TrainingReport::default() })
    }
}

impl Predictor for RbfNetworkModel {
    fn predict(&self, x: &Points, _opts: &PredictOptions, par: Parallelism) -> Prediction {
        let block = super::predict_block_rows(self.centres.n());
        let mut values = Vec::with_capacity(x.n());
        for start in (0..x.n()).step_by(block) {
            let q = x.slice(start, block.min(x.n() - start));
            let k = self.spec.kernel.cross(&self.centres, &q, par);
            values.extend(super::weighted_columns(&k, &self.weights));
        }
        Prediction { values, ..Default::default() }
    }

    super::spec_and_report_accessors!();

    fn n_support(&self) -> usize {
        self.centres.n()
    }

    fn support(&self) -> &Points {
        &self.centres
    }

    fn memory_bytes(&self) -> usize {
        self.centres.memory_bytes() + self.weights.len() * 8
    }

    fn predict_cost(&self, m: usize, _opts: &PredictOptions) -> f64 {
        (m * self.centres.n()) as f64 * (self.kernel().pair_cost(&self.centres) + 2.0)
    }
}

impl Spec for RbfNetwork {
    crate::estimator::spec_basics!();

    fn kind(&self) -> ModelKind {
        ModelKind::RbfNetwork
    }

    fn check_data(&self, n: usize) -> Result<(), FieldError> {
        match self.centers {
            Some(c) if c as usize > n => Err(FieldError::invalid(
                "/params/centers",
                format!("{c} centres requested but there are only {n} training rows"),
            )),
            _ => Ok(()),
        }
    }

    fn fit_memory_estimate(&self, n: usize, d: usize) -> usize {
        RbfNetwork::fit_memory_estimate(self, n, d)
    }

    fn for_rows(&self, _: &[usize]) -> Box<dyn Spec> {
        Box::new(self.clone())
    }

    fn fit_checked(&self, data: &TrainingData, ctx: &FitContext) -> Result<Box<dyn Fitted>, FitError> {
        let data = data.regression(self.kind())?;
        Ok(Box::new(Estimator::fit(self, data, ctx)?))
    }
}

impl Fitted for RbfNetworkModel {
    super::fitted_basics!();

    fn kind(&self) -> ModelKind {
        ModelKind::RbfNetwork
    }
}

/// A stored RBF network: its centres and output weights.
pub(crate) fn restore(mut r: Restoring) -> Result<Box<dyn Fitted>, RestoreError> {
    let spec = r.spec(RbfNetwork::from_json)?;
    let x = r.points(false)?;
    let (_, weights, _) = super::targets::outputs::restore_columns(&mut r, x.n())?;
    Ok(Box::new(RbfNetworkModel::restore(spec, x, weights, r.report)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize) -> TrainingSet {
        let x = Points::from_columns(crate::test_support::seeded_matrix(2, n, 5));
        let y = (0..n).map(|i| (3.0 * x.point(i)[0]).sin() + x.point(i)[1]).collect();
        TrainingSet::new(x, y)
    }

    fn spec(params: Value) -> RbfNetwork {
        let k = Kernel::from_json(&json!({"type": "rbf", "gamma": 2.0})).unwrap();
        RbfNetwork::from_json(k, &params, "/params").unwrap()
    }

    #[test]
    fn all_points_as_centres_with_lambda_zero_interpolate() {
        let d = data(40);
        let m = spec(json!({})).fit(&d, &FitContext::sequential()).unwrap();
        let p = m.predict(&d.x, &PredictOptions::default(), Parallelism::Sequential);
        for (a, b) in p.values.iter().zip(&d.y) {
            assert!((a - b).abs() < 1e-8, "{a} vs {b}");
        }
    }

    /// With M centres and lambda > 0 the weights satisfy the contract's normal equations
    /// (Phi'Phi + lambda I) w = Phi'y, checked here with nalgebra.
    #[test]
    fn weights_solve_the_regularised_normal_equations() {
        let d = data(60);
        let s = spec(json!({"centers": 15, "lambda": 0.1, "seed": 3}));
        let m = s.fit(&d, &FitContext::sequential()).unwrap();
        let centres = d.x.select(&s.centre_rows(60).unwrap());
        assert_eq!(m.n_support(), 15);
        let phi = s.kernel.cross(&d.x, &centres, Parallelism::Sequential);
        let lhs = phi.transpose() * &phi + DMatrix::identity(15, 15) * 0.1;
        let rhs = phi.transpose() * nalgebra::DVector::from_column_slice(&d.y);
        let residual = lhs * nalgebra::DVector::from_column_slice(m.weights()) - &rhs;
        assert!(residual.amax() < 1e-10 * rhs.amax(), "{residual}");
        let mut rows = s.centre_rows(60).unwrap();
        rows.sort();
        rows.dedup();
        assert_eq!(rows.len(), 15, "centres are distinct rows");
    }

    #[test]
    fn more_centres_than_rows_is_invalid() {
        let e = spec(json!({"centers": 41})).fit(&data(40), &FitContext::sequential()).unwrap_err();
        assert!(matches!(e, FitError::Invalid(f) if f.pointer == "/params/centers"));
        let e = RbfNetwork::from_json(crate::kernel::default_kernel(), &json!({"centers": 0}), "/params").unwrap_err();
        assert_eq!(e.pointer, "/params/centers");
    }
}

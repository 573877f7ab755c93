//! Kernel ridge regression: alpha = (K + lambda I)^-1 y, f(x) = sum_i alpha_i k(x_i, x).
//!
//! Matches scikit-learn's `KernelRidge` (its `alpha` is our `lambda`), which also solves
//! by Cholesky. Only alpha and the training points are kept: the factor is not needed to
//! predict. With `approximation: nystrom` the fitted state has the same form, over the M
//! inducing points (`approximation/nystrom.rs` computes the weights).
//!
//! `sample_weight` as scikit-learn applies it: with S = diag(sqrt(w)), b = (S K S +
//! lambda I)^-1 S y and alpha = S b (rows of weight 0 get alpha 0 and move nothing).
//! Nystrom: the weighted normal equations (A W A' + lambda I) c = A W y.

pub mod falkon;
mod kind;

pub(crate) use kind::restore;

use super::online::{self, AppendError};
use super::weights::SampleWeight;
use super::{
    regularised_gram, Estimator, FitContext, FitError, PredictOptions, Prediction, Predictor, TrainingReport,
    TrainingSet,
};
use crate::estimator::approximation::{Approximation, Mode};
use crate::estimator::kernel_ridge::falkon::{Solver, SolverParams};
use crate::kernel::{Kernel, Points};
use crate::linalg::{Cholesky, Parallelism};
use crate::spec::{FieldError, ObjectReader};
use nalgebra::DMatrix;
use serde_json::{json, Value};

/// Checked parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelRidge {
    pub kernel: Kernel,
    /// Ridge penalty, >= 0.
    pub lambda: f64,
    pub approx: Approximation,
    /// Draws the inducing points.
    pub seed: u64,
    pub sample_weight: Option<SampleWeight>,
    /// How a nystrom fit solves its system (`solver`, `max_iter`, `tol`, `precision`).
    pub solver: SolverParams,
}

impl KernelRidge {
    pub fn from_json(kernel: Kernel, params: &Value, path: &str) -> Result<KernelRidge, FieldError> {
        let mut obj = ObjectReader::new(params, path)?;
        let lambda = obj.f64("lambda")?.unwrap_or(1.0);
        if lambda < 0.0 {
            return Err(FieldError::invalid(obj.pointer("lambda"), "must not be negative"));
        }
        let approx = Approximation::read(&mut obj)?;
        let seed = obj.u64("seed")?.unwrap_or(0);
        let sample_weight = SampleWeight::read(&mut obj)?;
        let solver = SolverParams::read(&mut obj)?;
        obj.finish()?;
        if approx.mode == Mode::Exact {
            let mut check = solver;
            check.settle(false, 0)?;
        }
        Ok(KernelRidge { kernel, lambda, approx, seed, sample_weight, solver })
    }

    pub fn params_json(&self) -> Value {
        let mut out = json!({"lambda": self.lambda, "seed": self.seed});
        if let Some(w) = &self.sample_weight {
            out["sample_weight"] = w.to_json();
        }
        let map = out.as_object_mut().expect("an object");
        self.approx.write_json(map);
        if self.approx.mode == Mode::Nystrom {
            self.solver.write_json(map);
        }
        out
    }

    /// Settles `solver` once `approximation` is resolved (see [`SolverParams::settle`]).
    pub fn settle_solver(&mut self, n: usize) -> Result<(), FieldError> {
        let nystrom = self.approx.mode == Mode::Nystrom;
        self.solver.settle(nystrom, self.approx.m(n))
    }

    /// Bytes a nystrom fit holds at its peak, by its solver.
    pub fn nystrom_memory_estimate(&self, n: usize, d: usize) -> usize {
        let m = self.approx.m(n);
        match self.solver.resolved(m) {
            Solver::Cg => {
                let data = n * (d + 2) * 8 * 2;
                data + crate::estimator::kernel_ridge::falkon::memory_estimate(m, 1, self.solver.options().single)
                    + crate::estimator::approximation::inducing::sample_bytes(n, d, m)
            }
            _ => crate::estimator::approximation::nystrom::fit_memory_estimate(n, d, m, None),
        }
    }

    /// A weight list must have one weight per training row.
    pub fn check_data(&self, n: usize) -> Result<(), FieldError> {
        match &self.sample_weight {
            Some(w) => w.check_len(n, "/params/sample_weight"),
            None => Ok(()),
        }
    }

    /// The same model for rows `rows` of its data (a fold's training rows).
    pub fn for_rows(&self, rows: &[usize]) -> KernelRidge {
        let mut out = self.clone();
        out.sample_weight = self.sample_weight.as_ref().map(|w| w.select(rows));
        out
    }

    /// sqrt(w) per row, when weighted.
    fn scale(&self) -> Option<Vec<f64>> {
        self.sample_weight.as_ref().map(|w| w.0.iter().map(|v| v.sqrt()).collect())
    }

    /// S K S + lambda I (lower triangle), S = diag(sqrt(w)) (the identity unweighted).
    fn regularised_gram(&self, x: &Points, par: Parallelism) -> nalgebra::DMatrix<f64> {
        match self.scale() {
            None => regularised_gram(&self.kernel, x, self.lambda, par),
            Some(s) => {
                let mut k = self.kernel.gram_lower(x, par);
                let n = k.nrows();
                for j in 0..n {
                    for i in j..n {
                        k[(i, j)] *= s[i] * s[j];
                    }
                    k[(j, j)] += self.lambda;
                }
                k
            }
        }
    }

    /// The exact model given the factor of K + lambda I over `data.x`: alpha, and the
    /// leave-one-out figures when asked, over `base`'s other facts. The factor is kept only
    /// when `keep_factor` (after an append, for the next one), with z = L^-1 b for the
    /// right-hand side b = S y (y without sample weights): `z` when an append grew it.
    fn with_factor(
        &self,
        chol: Cholesky,
        data: TrainingSet,
        base: TrainingReport,
        keep_factor: bool,
        z: Option<DMatrix<f64>>,
        par: Parallelism,
    ) -> KernelRidgeModel {
        let t = data.outputs.t();
        let scale = self.scale();
        // One factor, one right-hand side per output (each solved sequentially, so that
        // its rounding does not depend on the thread count): z = L^-1 b, then L^-T z.
        let mut b = z.unwrap_or_else(|| {
            let mut b = self.right_hand_side(&data, scale.as_deref());
            chol.forward_columns_in_place(&mut b, par);
            b
        });
        let kept_z = keep_factor.then(|| b.as_slice().to_vec());
        chol.backward_columns_in_place(&mut b, par);
        let loo = match &scale {
            None => self.approx.loo.then(|| super::LeaveOneOut::from_factor(&chol, &b, &vec![1.0; t], false, par)),
            // b solves the scaled problem; its leave-one-out residuals are s_i e_i, so
            // their squares sum to the weighted PRESS, sum_i w_i e_i^2.
            Some(s) => self.approx.loo.then(|| {
                let total: f64 = s.iter().map(|si| si * si).sum();
                super::LeaveOneOut::weighted_from_factor(&chol, &b, total, par)
            }),
        };
        if let Some(s) = &scale {
            scale_rows(&mut b, s);
        }
        let report = TrainingReport { jitter: Some(chol.jitter()), loo, ..base };
        KernelRidgeModel {
            spec: self.clone(),
            x: data.x,
            alpha: b.as_slice().to_vec(),
            y: Some(data.y),
            outputs: data.outputs,
            chol: keep_factor.then_some(chol),
            z: kept_z,
            report,
        }
    }

    /// The exact problem's right-hand side, S y (y when there are no sample weights).
    fn right_hand_side(&self, data: &TrainingSet, scale: Option<&[f64]>) -> DMatrix<f64> {
        let mut b = data.y_matrix();
        if let Some(s) = scale {
            scale_rows(&mut b, s);
        }
        b
    }

    /// The Nystrom fit with the given inducing points (they are chosen by `fit`).
    pub fn fit_nystrom_at(
        &self,
        z: Points,
        data: &TrainingSet,
        ctx: &FitContext,
    ) -> Result<KernelRidgeModel, FitError> {
        self.fit_nystrom_rows(z, None, data, ctx)
    }

    /// As [`KernelRidge::fit_nystrom_at`], knowing which training rows the points are
    /// (uniform selection), which the cg preconditioner weighs by their sample weights.
    fn fit_nystrom_rows(
        &self,
        z: Points,
        rows: Option<&[u64]>,
        data: &TrainingSet,
        ctx: &FitContext,
    ) -> Result<KernelRidgeModel, FitError> {
        if self.solver.resolved(z.n()) == Solver::Cg {
            return self.fit_cg_at(z, rows, data, ctx);
        }
        let scale = self.scale();
        let (weights, jitter) = crate::estimator::approximation::nystrom::ridge_weights(
            &self.kernel,
            self.lambda,
            &z,
            &data.x,
            &data.y_matrix(),
            scale.as_deref(),
            ctx,
        )?;
        let report = TrainingReport {
            solver: Some("direct".into()),
            ..crate::estimator::approximation::nystrom::report(z.n(), jitter)
        };
        Ok(self.nystrom_model(z, weights, data, report))
    }

    /// A Nystrom model: weights over the M inducing points, no kept targets or factor.
    fn nystrom_model(
        &self,
        z: Points,
        alpha: Vec<f64>,
        data: &TrainingSet,
        report: TrainingReport,
    ) -> KernelRidgeModel {
        KernelRidgeModel {
            spec: self.clone(),
            x: z,
            alpha,
            y: None,
            outputs: data.outputs,
            chol: None,
            z: None,
            report,
        }
    }

    /// The Nystrom fit by preconditioned conjugate gradients (`falkon.rs`).
    fn fit_cg_at(
        &self,
        z: Points,
        z_rows: Option<&[u64]>,
        data: &TrainingSet,
        ctx: &FitContext,
    ) -> Result<KernelRidgeModel, FitError> {
        let w = self.sample_weight.as_ref().map(|w| &w.0[..]);
        let y = data.y_matrix();
        let problem = crate::estimator::kernel_ridge::falkon::Problem { x: &data.x, y: &y, w, z_rows };
        let out = crate::estimator::kernel_ridge::falkon::ridge_weights(
            &self.kernel,
            self.lambda,
            &z,
            problem,
            self.solver.options(),
            ctx,
        )?;
        let report = TrainingReport {
            solver: Some("cg".into()),
            iterations: Some(out.iterations),
            converged: Some(out.converged),
            residual: Some(out.residual),
            ..crate::estimator::approximation::nystrom::report(z.n(), out.jitter)
        };
        Ok(self.nystrom_model(z, out.weights, data, report))
    }
}

#[derive(Debug, Clone)]
pub struct KernelRidgeModel {
    spec: KernelRidge,
    x: Points,
    /// n x t column-major, one column per output.
    alpha: Vec<f64>,
    /// Exact fits: the training targets as given, n x t (None for Nystrom fits and for
    /// models stored before online updates).
    y: Option<Vec<f64>>,
    outputs: super::Outputs,
    /// The factor of K + lambda I, kept once rows have been appended: the fit itself
    /// does not keep it (n^2 values that prediction never reads), so the first append
    /// factorises anew and later ones grow the factor.
    chol: Option<Cholesky>,
    /// With the factor: z = L^-1 S y, grown with it by appends (alpha = S L^-T z).
    z: Option<Vec<f64>>,
    report: TrainingReport,
}

impl KernelRidgeModel {
    pub fn alpha(&self) -> &[f64] {
        &self.alpha
    }

    pub(super) fn store_into(&self, s: &mut super::StoredFit) {
        s.put_points(&self.x);
        s.alpha = self.alpha.clone();
        self.outputs.store(s);
        if let Some(y) = &self.y {
            s.arrays.push(("y".into(), y.clone()));
        }
        if let Some(chol) = &self.chol {
            s.factor = crate::linalg::copy_of(chol.l().as_slice());
            s.jitter = chol.jitter();
        }
        if let Some(z) = &self.z {
            s.arrays.push(("z".into(), z.clone()));
        }
    }

    /// A stored model; with a kept factor, `z` when the file has it, else solved from
    /// the targets (files written before it was kept).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn restore(
        spec: KernelRidge,
        x: Points,
        alpha: Vec<f64>,
        y: Option<Vec<f64>>,
        outputs: super::Outputs,
        chol: Option<Cholesky>,
        z: Option<Vec<f64>>,
        report: TrainingReport,
    ) -> KernelRidgeModel {
        let z = match (&chol, &y) {
            (Some(_), _) if z.is_some() => z,
            (Some(chol), Some(y)) => {
                let data = TrainingSet { x: x.clone(), y: y.clone(), outputs };
                let mut b = spec.right_hand_side(&data, spec.scale().as_deref());
                chol.forward_columns_in_place(&mut b, Parallelism::Sequential);
                Some(b.as_slice().to_vec())
            }
            _ => None,
        };
        KernelRidgeModel { spec, x, alpha, y, outputs, chol, z, report }
    }

    /// This model with `new` rows appended (see [`super::online`]); `weights`, the new
    /// rows' sample weights, exactly when the model was fitted with them.
    pub fn append(
        &self,
        new: &TrainingSet,
        weights: Option<&[f64]>,
        par: Parallelism,
    ) -> Result<KernelRidgeModel, AppendError> {
        self.append_all(&[(new, weights)], par)
    }

    /// As [`KernelRidgeModel::append`] once per batch, in order, bit for bit, with the
    /// coefficients solved once at the end (see the GP's `append_all`).
    pub fn append_all(
        &self,
        batches: &[(&TrainingSet, Option<&[f64]>)],
        par: Parallelism,
    ) -> Result<KernelRidgeModel, AppendError> {
        if self.report.approximation.as_deref() == Some("nystrom") {
            return Err(AppendError::Unsupported(
                "online updates need an exact model; this kernel_ridge was fitted with approximation nystrom".into(),
            ));
        }
        let y = self.y.as_deref().ok_or_else(AppendError::without_targets)?;
        let mut spec = self.spec.clone();
        let kept = self.z.as_ref().map(|z| DMatrix::from_column_slice(self.x.n(), self.outputs.t(), z));
        let state = (&self.x, y, self.outputs);
        let grown = online::grow_all(
            state,
            (self.chol.as_ref(), kept.as_ref()),
            batches,
            par,
            |new, weights, old, all, chol| {
                match (&spec.sample_weight, weights) {
                    (Some(w), Some(more)) if more.len() == new.x.n() => {
                        spec.sample_weight = Some(SampleWeight(w.0.iter().chain(more.iter()).copied().collect()))
                    }
                    (None, None) => {}
                    _ => {
                        return Err(AppendError::Unsupported(
                            "the new rows' sample weights must be given exactly when the model was fitted with them"
                                .into(),
                        ))
                    }
                }
                let (lambda, scale) = (spec.lambda, spec.scale());
                let (factor, extended) =
                    online::grown_factor(&spec.kernel, &|_| lambda, scale.as_deref(), chol, old, &new.x, &all.x, par)?;
                let rhs = spec.right_hand_side(all, scale.as_deref());
                Ok((factor, extended, Some(rhs)))
            },
        )?;
        let Some(g) = grown else { return Ok(self.clone()) };
        Ok(spec.with_factor(g.chol, g.data, self.report.clone(), true, g.z, par))
    }

    /// The model's output axis.
    pub fn outputs(&self) -> super::Outputs {
        self.outputs
    }

    /// Whether the model was fitted with sample weights.
    pub fn has_sample_weight(&self) -> bool {
        self.spec.sample_weight.is_some()
    }
}

/// Each column of `m` times `s`, row by row.
fn scale_rows(m: &mut DMatrix<f64>, s: &[f64]) {
    for mut col in m.column_iter_mut() {
        col.iter_mut().zip(s).for_each(|(v, si)| *v *= si);
    }
}

impl Estimator for KernelRidge {
    type Data = TrainingSet;
    type Fitted = KernelRidgeModel;

    fn fit(&self, data: &TrainingSet, ctx: &FitContext) -> Result<KernelRidgeModel, FitError> {
        ctx.cancel.check()?;
        if self.approx.mode == Mode::Nystrom {
            let (z, indices) =
                crate::estimator::approximation::nystrom::inducing_points(&self.approx, self.seed, &data.x, ctx)?;
            let mut model = self.fit_nystrom_rows(z, indices.as_deref(), data, ctx)?;
            model.report.inducing_indices = indices;
            return Ok(model);
        }
        ctx.progress.phase("factorize");
        let chol = Cholesky::factor_with_jitter_until(|| self.regularised_gram(&data.x, ctx.par), ctx.par, &|| {
            ctx.cancel.is_cancelled()
        })?;
        Ok(self.with_factor(chol, data.clone(), TrainingReport::default(), false, None, ctx.par))
    }
}

impl Predictor for KernelRidgeModel {
    fn predict(&self, x: &Points, _opts: &PredictOptions, par: Parallelism) -> Prediction {
        let block = super::predict_block_rows(self.x.n());
        let mut values = Vec::with_capacity(x.n());
        for start in (0..x.n()).step_by(block) {
            let q = x.slice(start, block.min(x.n() - start));
            let ks = self.spec.kernel.cross(&self.x, &q, par);
            values.extend(crate::estimator::targets::outputs::mean_rows(&ks, &self.alpha, self.outputs.t()));
        }
        let outputs = self.outputs.is_multi().then_some(self.outputs.t());
        Prediction { values, outputs, ..Default::default() }
    }

    super::spec_and_report_accessors!();

    fn n_support(&self) -> usize {
        self.x.n()
    }

    fn support(&self) -> &Points {
        &self.x
    }

    fn memory_bytes(&self) -> usize {
        let y = self.y.as_ref().map_or(0, Vec::len);
        let factor = self.chol.as_ref().map_or(0, |c| c.n() * c.n());
        let z = self.z.as_ref().map_or(0, Vec::len);
        self.x.memory_bytes() + (self.alpha.len() + y + factor + z) * 8
    }

    fn predict_cost(&self, m: usize, _opts: &PredictOptions) -> f64 {
        (m * self.x.n()) as f64 * (self.kernel().pair_cost(&self.x) + 2.0 * self.outputs.t() as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn interpolates_with_tiny_lambda_and_reads_params() {
        let x = Points::from_rows(&[vec![0.0], vec![1.0], vec![2.5]]);
        let y = vec![1.0, -1.0, 0.5];
        let kernel = Kernel::from_json(&json!({"type": "rbf", "length_scale": 0.7})).unwrap();
        let spec = KernelRidge::from_json(kernel, &json!({"lambda": 1e-12}), "/params").unwrap();
        let model = spec.fit(&TrainingSet::new(x.clone(), y.clone()), &FitContext::sequential()).unwrap();
        let p = model.predict(&x, &PredictOptions::default(), Parallelism::Sequential);
        for (a, b) in p.values.iter().zip(&y) {
            assert!((a - b).abs() < 1e-9, "{a} vs {b}");
        }
        assert!(p.variance.is_none());
    }

    #[test]
    fn negative_lambda_and_unknown_params_are_rejected() {
        let k = crate::kernel::default_kernel();
        let e = KernelRidge::from_json(k.clone(), &json!({"lambda": -1}), "/params").unwrap_err();
        assert_eq!(e.pointer, "/params/lambda");
        let e = KernelRidge::from_json(k, &json!({"noise": 1}), "/params").unwrap_err();
        assert_eq!(e.pointer, "/params/noise");
    }
}

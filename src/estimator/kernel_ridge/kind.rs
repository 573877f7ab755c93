//! Kernel ridge as the estimator sees its kind: the [`Spec`] of its params, the
//! [`Fitted`] model with its online appends, and its restore.

use super::{KernelRidge, KernelRidgeModel};
use crate::estimator::approximation::{Approximation, Mode};
use crate::estimator::coefficients;
use crate::estimator::online::Extra;
use crate::estimator::{
    AppendError, AppendRows, Coefficients, Estimator, FitContext, FitError, Fitted, ModelKind, Online, Outputs,
    RestoreError, Restoring, RidgeForm, Spec, TrainingData, TrainingSet,
};
use crate::linalg::Parallelism;
use crate::spec::FieldError;

impl Spec for KernelRidge {
    crate::estimator::spec_basics!();

    fn kind(&self) -> ModelKind {
        ModelKind::KernelRidge
    }

    fn check_data(&self, n: usize) -> Result<(), FieldError> {
        KernelRidge::check_data(self, n)
    }

    fn fit_memory_estimate(&self, n: usize, d: usize) -> usize {
        match self.approx.mode {
            // (Variational is refused for kernel_ridge when its params are read.)
            Mode::Nystrom | Mode::Variational => self.nystrom_memory_estimate(n, d),
            // One n x n matrix (K, factorised in place) plus the data.
            Mode::Exact | Mode::Auto => n * n * 8 + n * d * 8 * 2,
        }
    }

    fn for_rows(&self, rows: &[usize]) -> Box<dyn Spec> {
        Box::new(KernelRidge::for_rows(self, rows))
    }

    fn approximation(&self) -> Option<&Approximation> {
        Some(&self.approx)
    }

    fn approximation_mut(&mut self) -> Option<&mut Approximation> {
        Some(&mut self.approx)
    }

    fn admit(&mut self, n: usize) -> Result<(), FieldError> {
        self.settle_solver(n)
    }

    fn fit_checked(&self, data: &TrainingData, ctx: &FitContext) -> Result<Box<dyn Fitted>, FitError> {
        let data = data.regression(self.kind())?;
        Ok(Box::new(Estimator::fit(self, data, ctx)?))
    }

    fn ridge(&self) -> Option<RidgeForm> {
        (self.approx.mode == Mode::Exact && self.sample_weight.is_none()).then(|| RidgeForm {
            kernel: self.kernel.clone(),
            diagonal: self.lambda,
            normalize_y: false,
            gaussian_process: false,
        })
    }

    fn closed_form_loo(&self) -> bool {
        self.approx.mode == Mode::Exact
    }
}

impl Fitted for KernelRidgeModel {
    crate::estimator::fitted_basics!();

    fn kind(&self) -> ModelKind {
        ModelKind::KernelRidge
    }

    fn outputs(&self) -> Outputs {
        self.outputs
    }

    fn online(&self) -> Option<&dyn Online> {
        Some(self)
    }

    fn has_sample_weight(&self) -> bool {
        KernelRidgeModel::has_sample_weight(self)
    }

    fn coefficients(&self) -> Option<Coefficients> {
        Some(coefficients::dual(&self.alpha, self.x.n(), self.outputs, &self.report))
    }
}

impl Online for KernelRidgeModel {
    fn append(
        &self,
        new: &TrainingSet,
        noise: Option<&[f64]>,
        weights: Option<&[f64]>,
        par: Parallelism,
    ) -> Result<Box<dyn Fitted>, AppendError> {
        Ok(Box::new(KernelRidgeModel::append(self, new, Extra::Weights.pick(noise, weights)?, par)?))
    }

    fn append_all(&self, batches: &[AppendRows], par: Parallelism) -> Result<Box<dyn Fitted>, AppendError> {
        Ok(Box::new(KernelRidgeModel::append_all(self, &Extra::Weights.batches(batches)?, par)?))
    }
}

/// A stored kernel ridge: a fit keeps no factor; an append keeps it for the next one.
pub(crate) fn restore(mut r: Restoring) -> Result<Box<dyn Fitted>, RestoreError> {
    let spec = r.spec(KernelRidge::from_json)?;
    let x = r.points(false)?;
    let (outputs, alpha, y) = crate::estimator::targets::outputs::restore_columns(&mut r, x.n())?;
    let chol = match r.fit.factor.is_empty() {
        true => None,
        false => Some(r.factor(x.n(), r.fit.jitter)?),
    };
    let z = r.arrays.take("z", Some(x.n() * outputs.t())).ok();
    Ok(Box::new(KernelRidgeModel::restore(spec, x, alpha, y, outputs, chol, z, r.report)))
}

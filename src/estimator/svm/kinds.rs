//! The SVM family as the estimator sees its kinds: C- and nu-SVC (exact, or on Nystrom
//! features), epsilon- and nu-SVR and the one-class SVM as [`Spec`]s and [`Fitted`]
//! models, and their restores.

use super::nystrom::NystromSvmModel;
use super::{OneClassModel, OneClassSvm, Svm, SvmModel, Svr, SvrModel};
use crate::estimator::approximation::{Approximation, Mode};
use crate::estimator::nystrom_features;
use crate::estimator::{
    ClassLabels, Coefficients, CrossPredictor, Estimator, FitContext, FitError, Fitted, ModelKind, PredictOptions,
    Prediction, RestoreError, Restoring, Spec, TableFit, TrainingData,
};
use crate::kernel::GramTable;
use crate::linalg::Parallelism;
use crate::spec::FieldError;
use nalgebra::DMatrix;
use std::sync::Arc;

impl Spec for Svm {
    crate::estimator::spec_basics!();

    fn kind(&self) -> ModelKind {
        match self.nu {
            Some(_) => ModelKind::NuSvm,
            None => ModelKind::Svm,
        }
    }

    fn check_data(&self, n: usize) -> Result<(), FieldError> {
        match &self.sample_weight {
            Some(w) => w.check_len(n, "/params/sample_weight"),
            None => Ok(()),
        }
    }

    fn check_targets(&self, data: &TrainingData) -> Result<(), FieldError> {
        match data {
            TrainingData::Classification(d) => Svm::check_targets(self, d),
            TrainingData::Regression(_) | TrainingData::Unlabelled(_) => Ok(()),
        }
    }

    fn fit_memory_estimate(&self, n: usize, d: usize) -> usize {
        match self.approximation() {
            Some(a) if a.mode == Mode::Nystrom => nystrom_features::fit_memory_estimate(n, d, a.m(n)),
            _ => Svm::fit_memory_estimate(self, n, d),
        }
    }

    fn for_rows(&self, rows: &[usize]) -> Box<dyn Spec> {
        Box::new(Svm::for_rows(self, rows))
    }

    /// nu-SVC is always exact.
    fn approximation(&self) -> Option<&Approximation> {
        self.nu.is_none().then_some(&self.approx)
    }

    fn approximation_mut(&mut self) -> Option<&mut Approximation> {
        self.nu.is_none().then_some(&mut self.approx)
    }

    fn admit(&mut self, _: usize) -> Result<(), FieldError> {
        match self.nu {
            Some(_) => Ok(()),
            None => self.settle_approximation(),
        }
    }

    fn fit_checked(&self, data: &TrainingData, ctx: &FitContext) -> Result<Box<dyn Fitted>, FitError> {
        let data = data.classification(self.kind())?;
        if self.approx.is_nystrom() {
            return Ok(Box::new(super::nystrom::fit(self, data, ctx)?));
        }
        Ok(Box::new(Estimator::fit(self, data, ctx)?))
    }

    fn gives_probabilities(&self) -> bool {
        self.probability
    }

    fn table_fit(&self) -> Option<&dyn TableFit> {
        (!self.approx.is_nystrom()).then_some(self as &dyn TableFit)
    }

    /// The SMO solver splits its passes only from 4096 points.
    fn gains_from_threads(&self, n: usize) -> bool {
        match self.nu {
            None => n >= 4096,
            Some(_) => Parallelism::for_problem(n, 0).is_parallel(),
        }
    }
}

impl TableFit for Svm {
    fn fit_from_table(
        &self,
        data: &TrainingData,
        table: &Arc<GramTable>,
        rows: &[usize],
        ctx: &FitContext,
    ) -> Result<(Box<dyn CrossPredictor>, Vec<usize>), FitError> {
        let data = data.classification(self.kind())?;
        let (model, sv_rows) = Svm::fit_from_table(self, data, table, rows, ctx)?;
        Ok((Box::new(model), sv_rows))
    }
}

impl CrossPredictor for SvmModel {
    fn predict_cross(&self, kv: &DMatrix<f64>, opts: &PredictOptions) -> Prediction {
        SvmModel::predict_cross(self, kv, opts)
    }
}

impl Fitted for SvmModel {
    crate::estimator::fitted_basics!();

    fn kind(&self) -> ModelKind {
        match self.is_nu() {
            true => ModelKind::NuSvm,
            false => ModelKind::Svm,
        }
    }

    fn coefficients(&self) -> Option<Coefficients> {
        Some(SvmModel::coefficients(self))
    }
}

/// A stored C- or nu-SVC, exact or (C-SVC) on Nystrom features. An SVM may keep no
/// support vector (a weighted nu-SVC whose weights zero every row of a pair) and then
/// answers from its intercepts.
pub(crate) fn restore_svc(mut r: Restoring) -> Result<Box<dyn Fitted>, RestoreError> {
    let nu = r.kind == ModelKind::NuSvm;
    let spec = r.spec(if nu { Svm::from_json_nu } else { Svm::from_json })?;
    let classes = ClassLabels::restore(&r)?;
    let x = r.points(true)?;
    if r.nystrom && !nu {
        return Ok(Box::new(NystromSvmModel::restore(spec, classes, x, r.arrays, r.report)?));
    }
    Ok(Box::new(SvmModel::restore(spec, classes, x, r.arrays, r.report)?))
}

impl Spec for Svr {
    crate::estimator::spec_basics!();

    fn kind(&self) -> ModelKind {
        match self.nu {
            Some(_) => ModelKind::NuSvr,
            None => ModelKind::Svr,
        }
    }

    fn check_data(&self, n: usize) -> Result<(), FieldError> {
        Svr::check_data(self, n)
    }

    fn fit_memory_estimate(&self, n: usize, d: usize) -> usize {
        Svr::fit_memory_estimate(self, n, d)
    }

    fn for_rows(&self, rows: &[usize]) -> Box<dyn Spec> {
        Box::new(Svr::for_rows(self, rows))
    }

    fn fit_checked(&self, data: &TrainingData, ctx: &FitContext) -> Result<Box<dyn Fitted>, FitError> {
        let data = data.regression(self.kind())?;
        Ok(Box::new(Estimator::fit(self, data, ctx)?))
    }
}

impl Fitted for SvrModel {
    crate::estimator::fitted_basics!();

    fn kind(&self) -> ModelKind {
        match self.is_nu() {
            true => ModelKind::NuSvr,
            false => ModelKind::Svr,
        }
    }

    fn coefficients(&self) -> Option<Coefficients> {
        Some(self.expansion().coefficients())
    }
}

/// A stored epsilon- or nu-SVR (which may keep no support vector when the epsilon tube
/// holds every target).
pub(crate) fn restore_svr(mut r: Restoring) -> Result<Box<dyn Fitted>, RestoreError> {
    let nu = r.kind == ModelKind::NuSvr;
    let spec = r.spec(if nu { Svr::from_json_nu } else { Svr::from_json })?;
    let x = r.points(true)?;
    let alpha = std::mem::take(&mut r.fit.alpha);
    Ok(Box::new(SvrModel::restore(spec, x, alpha, r.arrays, r.report)?))
}

impl Spec for OneClassSvm {
    crate::estimator::spec_basics!();

    fn kind(&self) -> ModelKind {
        ModelKind::OneClassSvm
    }

    fn check_data(&self, n: usize) -> Result<(), FieldError> {
        OneClassSvm::check_data(self, n)
    }

    fn fit_memory_estimate(&self, n: usize, d: usize) -> usize {
        OneClassSvm::fit_memory_estimate(self, n, d)
    }

    fn for_rows(&self, _: &[usize]) -> Box<dyn Spec> {
        Box::new(self.clone())
    }

    fn fit_checked(&self, data: &TrainingData, ctx: &FitContext) -> Result<Box<dyn Fitted>, FitError> {
        let x = data.unlabelled(self.kind())?;
        Ok(Box::new(OneClassSvm::fit(self, x, ctx)?))
    }
}

impl Fitted for OneClassModel {
    crate::estimator::fitted_basics!();

    fn kind(&self) -> ModelKind {
        ModelKind::OneClassSvm
    }

    fn coefficients(&self) -> Option<Coefficients> {
        Some(self.expansion().coefficients())
    }
}

/// A stored one-class SVM.
pub(crate) fn restore_one_class(mut r: Restoring) -> Result<Box<dyn Fitted>, RestoreError> {
    let spec = r.spec(OneClassSvm::from_json)?;
    let x = r.points(true)?;
    let alpha = std::mem::take(&mut r.fit.alpha);
    Ok(Box::new(OneClassModel::restore(spec, x, alpha, r.arrays, r.report)?))
}

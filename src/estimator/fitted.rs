//! [`FittedModel`]: a fitted model of any kind behind the [`Fitted`] trait, what every kind
//! shares (its stored header, online updates refused alike), and the one table of
//! restores that turns a stored fit back into its kind's model.

use super::{
    gaussian_process, kernel_logistic, kernel_perceptron, kernel_ridge, nadaraya_watson, rbf_network, svm, transform,
    AppendError, AppendRows, ClassLabels, Fitted, ModelKind, Predictor, RestoreError, Restoring, StoredFit, StoredRows,
    TrainingSet,
};
use crate::kernel::RowKind;
use crate::linalg::Parallelism;
use serde_json::Value;
use std::ops::Deref;

/// A fitted model of any kind.
#[derive(Debug)]
pub struct FittedModel(Box<dyn Fitted>);

/// A kind's restore: its model from a stored fit whose header is read.
type Restore = fn(Restoring) -> Result<Box<dyn Fitted>, RestoreError>;

/// The restore of each kind (a kind with an approximation restores either form).
fn restorer(kind: ModelKind) -> Restore {
    match kind {
        ModelKind::KernelRidge => kernel_ridge::restore,
        ModelKind::GaussianProcess => gaussian_process::restore,
        ModelKind::GpClassifier => gaussian_process::classifier::restore,
        ModelKind::Svm | ModelKind::NuSvm => svm::restore_svc,
        ModelKind::KernelPerceptron => kernel_perceptron::restore,
        ModelKind::KernelLogistic => kernel_logistic::restore,
        ModelKind::NadarayaWatson => nadaraya_watson::restore,
        ModelKind::RbfNetwork => rbf_network::restore,
        ModelKind::Svr | ModelKind::NuSvr => svm::restore_svr,
        ModelKind::OneClassSvm => svm::restore_one_class,
        ModelKind::KernelPca => transform::restore,
    }
}

impl Clone for FittedModel {
    fn clone(&self) -> FittedModel {
        FittedModel(self.0.clone_box())
    }
}

impl Deref for FittedModel {
    type Target = dyn Fitted;
    fn deref(&self) -> &(dyn Fitted + 'static) {
        &*self.0
    }
}

impl From<Box<dyn Fitted>> for FittedModel {
    fn from(model: Box<dyn Fitted>) -> FittedModel {
        FittedModel(model)
    }
}

impl FittedModel {
    /// `model` as a fitted model of any kind.
    pub fn new(model: impl Fitted + 'static) -> FittedModel {
        FittedModel(Box::new(model))
    }

    pub fn predictor(&self) -> &dyn Predictor {
        &*self.0
    }

    pub fn predictor_mut(&mut self) -> &mut dyn Predictor {
        &mut *self.0
    }

    /// The state to store.
    pub fn to_stored(&self) -> StoredFit {
        let p = &*self.0;
        let mut s = StoredFit {
            kind: p.kind().name().to_string(),
            kernel: p.kernel().to_json().to_string(),
            params: p.params_json().to_string(),
            report: serde_json::to_string(p.report()).expect("a report serialises"),
            d: p.n_features() as u64,
            x: Vec::new(),
            alpha: Vec::new(),
            factor: Vec::new(),
            jitter: 0.0,
            y_mean: 0.0,
            y_std: 1.0,
            classes: p.classes().map_or(Value::Null, ClassLabels::to_json).to_string(),
            arrays: Vec::new(),
            rows: StoredRows::Numeric,
        };
        p.store_into(&mut s);
        s
    }

    /// The model a stored state describes, checked for consistency. Takes the arrays
    /// over rather than copying them (a GP's factor is n^2 values).
    pub fn from_stored(s: StoredFit) -> Result<FittedModel, RestoreError> {
        let r = Restoring::read(s)?;
        let model = FittedModel(restorer(r.kind)(r)?);
        model.prepare_support();
        Ok(model)
    }

    /// This model with `new` rows appended, equal to a refit on all the rows with the
    /// same hyperparameters: the kinds whose catalogue row says `appends`, fitted exact.
    pub fn append(&self, new: &TrainingSet, par: Parallelism) -> Result<FittedModel, AppendError> {
        self.append_with(new, None, None, par)
    }

    /// As [`FittedModel::append_with`] for each batch (rows, noise, weights) in turn, bit for
    /// bit, the coefficients solved once at the end: replaying stored updates.
    pub fn append_all(&self, batches: &[AppendRows], par: Parallelism) -> Result<FittedModel, AppendError> {
        if batches.is_empty() {
            return Ok(self.clone());
        }
        Ok(FittedModel(self.online()?.append_all(batches, par)?))
    }

    /// As [`FittedModel::append`], with the new rows' noise variances (a Gaussian process
    /// that has a noise per row) or sample weights (a kernel ridge fitted with them).
    pub fn append_with(
        &self,
        new: &TrainingSet,
        noise: Option<&[f64]>,
        weights: Option<&[f64]>,
        par: Parallelism,
    ) -> Result<FittedModel, AppendError> {
        Ok(FittedModel(self.online()?.append(new, noise, weights, par)?))
    }

    /// The model's online updates, or why it has none.
    fn online(&self) -> Result<&dyn super::Online, AppendError> {
        let kind = self.0.kind();
        self.0.online().ok_or_else(|| {
            AppendError::Unsupported(if kind.can().appends {
                format!(
                    "online updates need an exact model; this {} was fitted with approximation nystrom",
                    kind.name()
                )
            } else {
                format!("online updates apply to {} models, not {}", ModelKind::names_that(|c| c.appends), kind.name())
            })
        })
    }

    /// Builds what the kernel derives from the support rows to predict (a string or set
    /// kernel's index of them) now rather than at the first predict, so that
    /// `memory_bytes` counts it from the start: the registry accounts a model's bytes when
    /// it takes the model in. Numeric supports derive nothing this size.
    pub fn prepare_support(&self) {
        let support = self.0.support();
        if support.kind() != RowKind::Numeric && support.n() > 0 {
            drop(self.0.kernel().cross(support, &support.slice(0, 1), Parallelism::Sequential));
        }
    }
}

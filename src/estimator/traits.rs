//! The estimator's vocabulary: the traits every kind implements and the layers above
//! see it through ([`Spec`], [`Fitted`], [`Predictor`], [`Online`], [`Transformer`],
//! [`Estimator`], [`TableFit`], [`CrossPredictor`]), and the macros that write the
//! accessors every kind answers alike.

use super::approximation::Approximation;
use super::{
    AppendError, AppendRows, ClassLabels, Coefficients, FitContext, FitError, ModelKind, Outputs, PredictOptions,
    Prediction, StoredFit, TrainingData, TrainingReport, TrainingSet,
};
use crate::kernel::{GramTable, Kernel, Points, RowKind};
use crate::linalg::Parallelism;
use crate::spec::FieldError;
use nalgebra::DMatrix;
use serde_json::Value;
use std::sync::Arc;

/// The [`Predictor`] accessors every fitted model answers the same way, from its
/// checked parameters (field `spec`, with `kernel` and `params_json`) and its training
/// report (field `report`).
macro_rules! spec_and_report_accessors {
    () => {
        fn kernel(&self) -> &crate::kernel::Kernel {
            &self.spec.kernel
        }

        fn params_json(&self) -> serde_json::Value {
            self.spec.params_json()
        }

        fn report(&self) -> &crate::estimator::TrainingReport {
            &self.report
        }

        fn report_mut(&mut self) -> &mut crate::estimator::TrainingReport {
            &mut self.report
        }
    };
}
pub(crate) use spec_and_report_accessors;

/// Checked hyperparameters of one model: fits a training set.
pub trait Estimator {
    /// [`TrainingSet`] for regression, [`ClassificationSet`](super::ClassificationSet) for classifiers.
    type Data;
    type Fitted: Predictor;
    fn fit(&self, data: &Self::Data, ctx: &FitContext) -> Result<Self::Fitted, FitError>;
}

/// A fitted model: answers queries from its stored state.
pub trait Predictor {
    /// `x` has the training feature count (checked by the caller).
    fn predict(&self, x: &Points, opts: &PredictOptions, par: Parallelism) -> Prediction;
    /// The kernel as fitted.
    fn kernel(&self) -> &Kernel;
    /// The model's params as fitted, in the contract's JSON form.
    fn params_json(&self) -> Value;
    fn report(&self) -> &TrainingReport;
    fn report_mut(&mut self) -> &mut TrainingReport;
    /// Training points kept for prediction.
    fn n_support(&self) -> usize;
    /// A classifier's classes; `Prediction::classes` indexes them.
    fn classes(&self) -> Option<&ClassLabels> {
        None
    }
    /// The training points (or centres) the model keeps for prediction.
    fn support(&self) -> &Points;
    /// Features per row: 0 for strings and token lists.
    fn n_features(&self) -> usize {
        self.support().d()
    }
    /// The kind of rows the model was trained on, and takes at predict.
    fn row_kind(&self) -> RowKind {
        self.support().kind()
    }
    /// Bytes of the stored arrays.
    fn memory_bytes(&self) -> usize;
    /// Rough flop count of predicting `m` rows, to decide where the work runs.
    fn predict_cost(&self, m: usize, opts: &PredictOptions) -> f64;
}

/// A kind's checked parameters, as the layers above see every kind: what can be checked
/// before a fit is queued, what the fit will hold, and the fit itself. [`ModelSpec`]
/// holds one; its constructor reads the kind's JSON and its `fit` runs this one's
/// [`Spec::fit_checked`] after the steps every kind shares.
pub trait Spec: std::fmt::Debug + Send + Sync {
    /// The kind (svm and nu_svm share a type, as do svr and nu_svr).
    fn kind(&self) -> ModelKind;
    fn kernel(&self) -> &Kernel;
    fn kernel_mut(&mut self) -> &mut Kernel;
    /// The params in the contract's JSON form, as the model resource echoes them.
    fn params_json(&self) -> Value;
    /// What can only be checked against the data's size (per-row params, M or centres
    /// against n), pointers within the request. Most kinds have nothing to check.
    fn check_data(&self, n: usize) -> Result<(), FieldError> {
        let _ = n;
        Ok(())
    }
    /// What can only be checked against the targets (class weights' labels, nu).
    fn check_targets(&self, data: &TrainingData) -> Result<(), FieldError> {
        let _ = data;
        Ok(())
    }
    /// Bytes the fit holds at its peak, with the approximation as it now stands.
    fn fit_memory_estimate(&self, n: usize, d: usize) -> usize;
    /// The same model for rows `rows` of its data (a fold's training rows): params
    /// given per row are taken at those rows.
    fn for_rows(&self, rows: &[usize]) -> Box<dyn Spec>;
    /// The approximation params of the kinds whose catalogue row says `nystrom` (and
    /// only those: `tests/catalogue.rs` holds every kind to it).
    fn approximation(&self) -> Option<&Approximation> {
        None
    }
    fn approximation_mut(&mut self) -> Option<&mut Approximation> {
        None
    }
    /// What this kind settles or refuses once its approximation is resolved for n rows
    /// (the cg solver, noise that the variational bound divides by).
    fn admit(&mut self, n: usize) -> Result<(), FieldError> {
        let _ = n;
        Ok(())
    }
    /// Fits data whose rows suit the kernel and whose mixtures are fitted; targets of
    /// another task are 422 at `/y`.
    fn fit_checked(&self, data: &TrainingData, ctx: &FitContext) -> Result<Box<dyn Fitted>, FitError>;
    fn clone_box(&self) -> Box<dyn Spec>;

    /// Class probabilities from this fit: the catalogue's answer unless the params
    /// decide (the svm's `probability`).
    fn gives_probabilities(&self) -> bool {
        self.kind().can().probabilities
    }
    /// The fit as a ridge solve on K + s I, which a model search can share and sweep.
    fn ridge(&self) -> Option<RidgeForm> {
        None
    }
    /// Exact leave-one-out from one factor of all rows (`params.loo`'s closed form).
    fn closed_form_loo(&self) -> bool {
        false
    }
    /// A fit that can take its kernel values from a search's shared Gram table.
    fn table_fit(&self) -> Option<&dyn TableFit> {
        None
    }
    /// Whether one fit of `n` rows runs faster on every core than fits side by side.
    fn gains_from_threads(&self, n: usize) -> bool {
        Parallelism::for_problem(n, 0).is_parallel()
    }
}

/// A fit that needs nothing but K + s I: one kernel, the value added to the diagonal,
/// and whether y is normalised and a predictive variance exists (Gaussian process).
#[derive(Debug, Clone, PartialEq)]
pub struct RidgeForm {
    pub kernel: Kernel,
    pub diagonal: f64,
    pub normalize_y: bool,
    pub gaussian_process: bool,
}

/// Fits from a shared Gram table (a search's): the kernel values between training rows
/// come from `table`, the model predicts from blocks of it.
pub trait TableFit {
    /// Fits data rows whose places in the table are `rows`; returns the model and its
    /// support vectors' data rows.
    fn fit_from_table(
        &self,
        data: &TrainingData,
        table: &Arc<GramTable>,
        rows: &[usize],
        ctx: &FitContext,
    ) -> Result<(Box<dyn CrossPredictor>, Vec<usize>), FitError>;
}

/// A model that predicts from kernel values already computed (support rows x queries).
pub trait CrossPredictor {
    fn predict_cross(&self, kv: &DMatrix<f64>, opts: &PredictOptions) -> Prediction;
}

/// A fitted model as the layers above see every kind: it predicts ([`Predictor`]),
/// stores itself, and says what more it can do. [`FittedModel`](super::FittedModel) holds one.
pub trait Fitted: Predictor + std::fmt::Debug + Send + Sync {
    fn kind(&self) -> ModelKind;
    /// Writes the kind's own state into `s`, whose header (kind, kernel, params, report,
    /// classes) is already filled; `fitted.rs` reads it back through the kind's restore.
    fn store_into(&self, s: &mut StoredFit);
    fn clone_box(&self) -> Box<dyn Fitted>;
    /// The outputs of a regression's targets.
    fn outputs(&self) -> Outputs {
        Outputs::Single
    }
    /// Online updates, for the kinds that take them and fits that allow them (exact).
    fn online(&self) -> Option<&dyn Online> {
        None
    }
    /// A noise variance per training row (a Gaussian process fitted with a list): its
    /// `include_noise` is refused, its appends carry noise.
    fn has_row_noise(&self) -> bool {
        false
    }
    /// Sample weights that appends must carry (a kernel ridge fitted with them).
    fn has_sample_weight(&self) -> bool {
        false
    }
    /// The transform of the kinds that have one.
    fn transformer(&self) -> Option<&dyn Transformer> {
        None
    }
    /// scikit-learn's fitted coefficients, for the kinds that have them.
    fn coefficients(&self) -> Option<Coefficients> {
        None
    }
    /// Why this fitted model has no joint predictive covariance (posterior draws,
    /// `covariance`) although its kind's catalogue row says `posterior`: a variational
    /// GP whose likelihood is not Gaussian. None: it has one where its kind does.
    fn posterior_refused(&self) -> Option<String> {
        None
    }
}

/// Rows appended to a fitted model, equal to a refit on all rows with the same
/// hyperparameters.
pub trait Online {
    /// `noise` (a Gaussian process with a noise per row) or `weights` (a weighted kernel
    /// ridge) for the new rows; a model that takes neither refuses them.
    fn append(
        &self,
        new: &TrainingSet,
        noise: Option<&[f64]>,
        weights: Option<&[f64]>,
        par: Parallelism,
    ) -> Result<Box<dyn Fitted>, AppendError>;
    /// Each batch appended in turn, bit for bit, the coefficients solved once at the end.
    fn append_all(&self, batches: &[AppendRows], par: Parallelism) -> Result<Box<dyn Fitted>, AppendError>;
}

/// Rows mapped to components and back.
pub trait Transformer {
    fn n_components(&self) -> usize;
    /// Whether the fit learned the map back (`fit_inverse_transform`).
    fn has_inverse(&self) -> bool;
    /// Rows (m x d) from components `z` (m x n_components); None without the map back.
    fn inverse_transform(&self, z: &Points, par: Parallelism) -> Option<DMatrix<f64>>;
}

/// The [`Spec`] methods every kind answers from its fields (`kernel`) and its own
/// inherent `params_json`.
macro_rules! spec_basics {
    () => {
        fn kernel(&self) -> &crate::kernel::Kernel {
            &self.kernel
        }

        fn kernel_mut(&mut self) -> &mut crate::kernel::Kernel {
            &mut self.kernel
        }

        fn params_json(&self) -> serde_json::Value {
            Self::params_json(self)
        }

        fn clone_box(&self) -> Box<dyn crate::estimator::Spec> {
            Box::new(self.clone())
        }
    };
}
pub(crate) use spec_basics;

/// The [`Fitted`] methods every fitted model answers alike: a copy, and its inherent
/// `store_into`.
macro_rules! fitted_basics {
    () => {
        fn store_into(&self, s: &mut crate::estimator::StoredFit) {
            Self::store_into(self, s)
        }

        fn clone_box(&self) -> Box<dyn crate::estimator::Fitted> {
            Box::new(self.clone())
        }
    };
}
pub(crate) use fitted_basics;

//! Models: checked parameters -> fit -> fitted state -> predict.
//!
//! Every model kind passes through two stages, each a trait the layers above see every
//! kind through: a [`Spec`] (its params read from JSON and checked, what can be checked
//! against the data before a fit is queued, the fit's memory estimate, the fit) and a
//! [`Fitted`] model (a [`Predictor`] that stores itself and says what more it offers:
//! online appends, a transform, several outputs). [`ModelSpec`] and [`FittedModel`] hold
//! one of each. What a kind *can* do is declared once, in the catalogue
//! ([`ModelKind::entry`], `catalogue.rs`); the service and the model search ask it, never
//! a kind's name.
//!
//! Where things live:
//! - `traits.rs`: the vocabulary (the traits); `catalogue.rs`: the kinds and their
//!   capabilities; `spec.rs`: reading any kind's params and the admission every fit
//!   goes through; `fitted.rs`: what every fitted model shares and the table of
//!   restores; `stored.rs`: the plain data a fit is stored as;
//! - a folder or file per family, each with its approximations: `kernel_ridge/` (with
//!   its cg solve), `gaussian_process/` (with the sparse GP, posterior draws and the GP
//!   classifier, `classifier/`),
//!   `svm/` (C- and nu-SVC with the SVC on Nystrom features, the SVRs, one-class;
//!   `svm/kinds.rs` is how the estimator sees them), `kernel_logistic/`,
//!   `kernel_perceptron.rs`, `nadaraya_watson.rs`, `rbf_network.rs`, `transform/`;
//! - shared machinery: `approximation/` (every kind's `approximation` params: exact,
//!   Nystrom or variational, and how inducing points are chosen; the inducing points
//!   themselves, Nystrom's solve and streaming toolkit), `nystrom_features.rs` (the
//!   classifiers' feature map and linear machines),
//!   `variational/` (the SVGP both GP kinds share), `targets/` (training data, class labels,
//!   several outputs), `online.rs` (rows appended to exact fits), `dual.rs` (one-vs-rest
//!   expansions), `coefficients.rs` (scikit-learn's fitted coefficients), `weights.rs`,
//!   `mixture.rs`, `numeric.rs`, `report.rs`, `prediction.rs`.
//!
//! A family uses the shared machinery and the vocabulary, never another family nor the
//! tables (`scripts/rooms.py` finds circles). A new kind is one row in `catalogue.rs`,
//! one arm in `spec.rs`'s reader and one in `fitted.rs`'s restorer (the compiler asks for
//! both), `pub mod` here, and its own file implementing [`Spec`], [`Fitted`] and a
//! restore; CONTRIBUTING.md walks through it, and `tests/catalogue.rs` checks every
//! capability the new row claims or denies.

pub mod approximation;
mod catalogue;
mod coefficients;
mod context;
pub mod dual;
mod fitted;
pub mod gaussian_process;
pub mod kernel_logistic;
pub mod kernel_perceptron;
pub mod kernel_ridge;
pub mod mixture;
pub mod nadaraya_watson;
mod numeric;
pub mod nystrom_features;
pub mod online;
mod prediction;
pub mod rbf_network;
mod report;
mod spec;
mod stored;
pub mod svm;
pub mod targets;
mod traits;
pub mod transform;
pub mod variational;
pub mod weights;

pub use catalogue::{Capabilities, Entry, KindRow, ModelKind, Precomputed, Task};
pub use coefficients::{Alpha, Coefficients};
pub use context::{CancelToken, FitContext, FitError, Progress, ProgressState};
pub use fitted::FittedModel;
pub use gaussian_process::classifier::{GpClassifier, GpClassifierModel};
pub(crate) use gaussian_process::search::HyperSearch;
pub use gaussian_process::sparse::SparseGpModel;
pub use gaussian_process::{GaussianProcess, GaussianProcessModel};
pub use kernel_logistic::{KernelLogistic, KernelLogisticModel};
pub use kernel_perceptron::{KernelPerceptron, KernelPerceptronModel};
pub use kernel_ridge::{KernelRidge, KernelRidgeModel};
pub use nadaraya_watson::{NadarayaWatson, NadarayaWatsonModel};
pub use numeric::regularised_gram;
pub(crate) use numeric::{first_max, log1p_exp, predict_block_rows, sigmoid, weighted_columns};
pub use online::{AppendError, AppendRows};
pub use prediction::{Decision, PredictOptions, Prediction};
pub use rbf_network::{RbfNetwork, RbfNetworkModel};
pub use report::{LeaveOneOut, TrainingReport};
pub use spec::{Limits, ModelSpec};
pub(crate) use stored::Restoring;
pub(crate) use stored::StoredArrays;
pub use stored::{RestoreError, StoredAppend, StoredFit, StoredRows};
pub use svm::{OneClassModel, OneClassSvm, Svm, SvmModel, Svr, SvrModel};
pub use targets::labels::{ClassLabels, ClassificationSet, Target};
pub use targets::outputs::Outputs;
pub use targets::{TrainingData, TrainingSet};
pub(crate) use traits::{fitted_basics, spec_and_report_accessors, spec_basics};
pub use traits::{CrossPredictor, Estimator, Fitted, Online, Predictor, RidgeForm, Spec, TableFit, Transformer};
pub use transform::{KernelPca, KernelPcaModel};

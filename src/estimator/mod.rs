//! Models: checked parameters -> fit -> fitted state -> predict.
//!
//! Each model lives in its own file and implements [`Estimator`] (its checked parameters
//! fit a training set) and [`Predictor`] (its fitted state answers queries). Parameters
//! are read from JSON by the model itself (`from_json`), so nothing unchecked reaches a
//! solver. [`ModelSpec`] and [`FittedModel`] are the closed sets the service dispatches
//! over; adding a model adds one arm to each.

pub mod approx;
mod context;
pub mod dual;
pub mod gaussian_process;
pub mod gp_classifier;
pub mod inducing;
pub mod kernel_logistic;
pub mod kernel_perceptron;
pub mod kernel_ridge;
pub mod labels;
pub mod mixture;
pub mod nadaraya_watson;
pub(crate) mod nystrom;
pub mod rbf_network;
mod search;
pub mod sparse_gp;
mod stored;
pub mod svm;

use crate::kernel::{Kernel, Points, RowKind};
use crate::linalg::Parallelism;
use crate::spec::FieldError;
use nalgebra::DMatrix;
use serde::Serialize;
use serde_json::Value;

pub use context::{CancelToken, FitContext, FitError, Progress, ProgressState};
pub use gaussian_process::{GaussianProcess, GaussianProcessModel};
pub use gp_classifier::{GpClassifier, GpClassifierModel};
pub use kernel_logistic::{KernelLogistic, KernelLogisticModel};
pub use kernel_perceptron::{KernelPerceptron, KernelPerceptronModel};
pub use kernel_ridge::{KernelRidge, KernelRidgeModel};
pub use labels::{ClassLabels, ClassificationSet, Target};
pub use nadaraya_watson::{NadarayaWatson, NadarayaWatsonModel};
pub use rbf_network::{RbfNetwork, RbfNetworkModel};
pub(crate) use search::HyperSearch;
pub use sparse_gp::SparseGpModel;
pub(crate) use stored::StoredArrays;
pub use stored::{FittedModel, RestoreError, StoredFit, StoredRows};
pub use svm::{Svm, SvmModel};

/// The model names of the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelKind {
    KernelRidge,
    GaussianProcess,
    GpClassifier,
    Svm,
    KernelPerceptron,
    KernelLogistic,
    NadarayaWatson,
    RbfNetwork,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Task {
    Regression,
    Classification,
}

impl ModelKind {
    pub const ALL: [ModelKind; 8] = [
        ModelKind::KernelRidge,
        ModelKind::GaussianProcess,
        ModelKind::GpClassifier,
        ModelKind::Svm,
        ModelKind::KernelPerceptron,
        ModelKind::KernelLogistic,
        ModelKind::NadarayaWatson,
        ModelKind::RbfNetwork,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ModelKind::KernelRidge => "kernel_ridge",
            ModelKind::GaussianProcess => "gaussian_process",
            ModelKind::GpClassifier => "gp_classifier",
            ModelKind::Svm => "svm",
            ModelKind::KernelPerceptron => "kernel_perceptron",
            ModelKind::KernelLogistic => "kernel_logistic",
            ModelKind::NadarayaWatson => "nadaraya_watson",
            ModelKind::RbfNetwork => "rbf_network",
        }
    }

    pub fn from_name(name: &str) -> Option<ModelKind> {
        ModelKind::ALL.into_iter().find(|k| k.name() == name)
    }

    pub fn task(self) -> Task {
        match self {
            ModelKind::KernelRidge | ModelKind::GaussianProcess | ModelKind::NadarayaWatson | ModelKind::RbfNetwork => {
                Task::Regression
            }
            _ => Task::Classification,
        }
    }
}

/// Training inputs of a regression model after validation: n >= 1 points, one finite
/// target each.
#[derive(Debug, Clone)]
pub struct TrainingSet {
    pub x: Points,
    pub y: Vec<f64>,
}

/// Validated training inputs of either task.
#[derive(Debug, Clone)]
pub enum TrainingData {
    Regression(TrainingSet),
    Classification(ClassificationSet),
}

impl TrainingData {
    pub fn x(&self) -> &Points {
        match self {
            TrainingData::Regression(d) => &d.x,
            TrainingData::Classification(d) => &d.x,
        }
    }
}

/// How a fit went, as reported in the model resource's `training`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct TrainingReport {
    pub duration_ms: f64,
    /// `exact` or `nystrom`: what `approximation` resolved to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approximation: Option<String>,
    /// Nystrom fits: M.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inducing_points: Option<u64>,
    /// Nystrom GP: Titsias' collapsed bound (normalised units under normalize_y).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence_lower_bound: Option<f64>,
    /// Nystrom GP with optimize on many rows: the rows of the seeded subset the
    /// hyperparameter search ran on (the final fit uses every row).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optimized_on_rows: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_marginal_likelihood: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub converged: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iterations: Option<u64>,
    /// Hyperparameter search: objective evaluations of the search that produced the
    /// returned hyperparameters (line-search trials and failed points included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluations: Option<u64>,
    /// Hyperparameter search: the rule that ended it (`projected_gradient`,
    /// `relative_reduction`, `max_iterations`, `max_evaluations`, `line_search`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// gp_classifier: Newton steps of the final Laplace mode searches (summed over the
    /// one-vs-rest machines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode_iterations: Option<u64>,
    /// Optimiser starts that could not be evaluated (non-finite or not factorisable).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restarts_failed: Option<u64>,
    /// Pointers of optimised hyperparameters that ended on a bound (scikit-learn warns
    /// about these; we report them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hyperparameters_at_bounds: Option<Vec<String>>,
    /// SVM with `probability`: training rows whose most probable class is not the
    /// predicted one (Platt scaling and voting can disagree, as in LIBSVM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probability_disagreements: Option<u64>,
    /// gp_classifier with more than two classes: each one-vs-rest machine's kernel as
    /// fitted, in the order of `classes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_kernels: Option<Vec<Value>>,
}

/// What a predict request asks for; fields a model does not produce are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PredictOptions {
    pub variance: bool,
    pub covariance: bool,
    pub include_noise: bool,
    pub probabilities: bool,
}

impl Default for PredictOptions {
    fn default() -> Self {
        PredictOptions { variance: true, covariance: false, include_noise: false, probabilities: true }
    }
}

/// Predictions for m query points.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Prediction {
    /// Regression: one value per row.
    pub values: Vec<f64>,
    /// Predictive variance, clipped at 0 (GP).
    pub variance: Option<Vec<f64>>,
    /// m x m predictive covariance (GP, on request).
    pub covariance: Option<DMatrix<f64>>,
    /// Classification: each row's predicted class, an index into the model's classes.
    pub classes: Option<Vec<usize>>,
    pub decision: Option<Decision>,
    /// m x classes, rows summing to 1.
    pub probabilities: Option<DMatrix<f64>>,
}

impl Prediction {
    /// Whether every number in it is finite (JSON has no NaN or infinity).
    pub fn is_finite(&self) -> bool {
        let all = |v: &[f64]| v.iter().all(|x| x.is_finite());
        all(&self.values)
            && self.variance.as_deref().is_none_or(all)
            && self.covariance.as_ref().is_none_or(|c| all(c.as_slice()))
            && self.probabilities.as_ref().is_none_or(|p| all(p.as_slice()))
            && match &self.decision {
                None => true,
                Some(Decision::Binary(d)) => all(d),
                Some(Decision::PerClass(d)) => all(d.as_slice()),
            }
    }
}

/// A classifier's decision function.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Two classes: one score per row, positive for the second class.
    Binary(Vec<f64>),
    /// More: m x classes, the largest score per row being the prediction.
    PerClass(DMatrix<f64>),
}

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
    /// [`TrainingSet`] for regression, [`ClassificationSet`] for classifiers.
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

/// Checked hyperparameters of any model.
#[derive(Debug, Clone)]
pub enum ModelSpec {
    KernelRidge(KernelRidge),
    GaussianProcess(GaussianProcess),
    Svm(Svm),
    KernelPerceptron(KernelPerceptron),
    KernelLogistic(KernelLogistic),
    GpClassifier(GpClassifier),
    NadarayaWatson(NadarayaWatson),
    RbfNetwork(RbfNetwork),
}

impl ModelSpec {
    /// Reads `params` (the request's `params` object, pointer `/params`) for `kind`.
    /// The kernel is already checked. Errors point into the request document.
    pub fn from_json(kind: ModelKind, kernel: Kernel, params: Option<&Value>) -> Result<ModelSpec, FieldError> {
        let empty = Value::Object(Default::default());
        let params = params.unwrap_or(&empty);
        match kind {
            ModelKind::KernelRidge => KernelRidge::from_json(kernel, params, "/params").map(ModelSpec::KernelRidge),
            ModelKind::GaussianProcess => {
                GaussianProcess::from_json(kernel, params, "/params").map(ModelSpec::GaussianProcess)
            }
            ModelKind::Svm => Svm::from_json(kernel, params, "/params").map(ModelSpec::Svm),
            ModelKind::NadarayaWatson => {
                NadarayaWatson::from_json(kernel, params, "/params").map(ModelSpec::NadarayaWatson)
            }
            ModelKind::KernelPerceptron => {
                KernelPerceptron::from_json(kernel, params, "/params").map(ModelSpec::KernelPerceptron)
            }
            ModelKind::KernelLogistic => {
                KernelLogistic::from_json(kernel, params, "/params").map(ModelSpec::KernelLogistic)
            }
            ModelKind::GpClassifier => GpClassifier::from_json(kernel, params, "/params").map(ModelSpec::GpClassifier),
            ModelKind::RbfNetwork => RbfNetwork::from_json(kernel, params, "/params").map(ModelSpec::RbfNetwork),
        }
    }

    pub fn kind(&self) -> ModelKind {
        match self {
            ModelSpec::KernelRidge(_) => ModelKind::KernelRidge,
            ModelSpec::GaussianProcess(_) => ModelKind::GaussianProcess,
            ModelSpec::Svm(_) => ModelKind::Svm,
            ModelSpec::KernelPerceptron(_) => ModelKind::KernelPerceptron,
            ModelSpec::KernelLogistic(_) => ModelKind::KernelLogistic,
            ModelSpec::GpClassifier(_) => ModelKind::GpClassifier,
            ModelSpec::NadarayaWatson(_) => ModelKind::NadarayaWatson,
            ModelSpec::RbfNetwork(_) => ModelKind::RbfNetwork,
        }
    }

    pub fn kernel(&self) -> &Kernel {
        match self {
            ModelSpec::KernelRidge(p) => &p.kernel,
            ModelSpec::GaussianProcess(p) => &p.kernel,
            ModelSpec::Svm(p) => &p.kernel,
            ModelSpec::KernelPerceptron(p) => &p.kernel,
            ModelSpec::KernelLogistic(p) => &p.kernel,
            ModelSpec::GpClassifier(p) => &p.kernel,
            ModelSpec::NadarayaWatson(p) => &p.kernel,
            ModelSpec::RbfNetwork(p) => &p.kernel,
        }
    }

    fn kernel_mut(&mut self) -> &mut Kernel {
        match self {
            ModelSpec::KernelRidge(p) => &mut p.kernel,
            ModelSpec::GaussianProcess(p) => &mut p.kernel,
            ModelSpec::Svm(p) => &mut p.kernel,
            ModelSpec::KernelPerceptron(p) => &mut p.kernel,
            ModelSpec::KernelLogistic(p) => &mut p.kernel,
            ModelSpec::GpClassifier(p) => &mut p.kernel,
            ModelSpec::NadarayaWatson(p) => &mut p.kernel,
            ModelSpec::RbfNetwork(p) => &mut p.kernel,
        }
    }

    /// What can only be checked once the rows are known: the kernel against their kind
    /// and width, and k-means inducing points against non-numeric rows. Pointers are
    /// within the request.
    pub fn check_rows(&self, kind: RowKind, d: usize) -> Result<(), FieldError> {
        self.kernel().check_rows(kind).map_err(|e| e.under("/kernel"))?;
        if kind == RowKind::Numeric {
            self.kernel().check_features(d).map_err(|e| e.under("/kernel"))?;
        } else if let Some(a) = self.approximation().filter(|a| a.mode != approx::Mode::Exact) {
            if a.selection == approx::Selection::Kmeans {
                return Err(FieldError::invalid(
                    "/params/inducing_selection",
                    format!("k-means needs numeric rows, not {}; use \"uniform\"", kind.describe()),
                ));
            }
        }
        Ok(())
    }

    /// This spec with every generative and Fisher kernel's mixture fitted to `x`.
    fn with_fitted_mixtures(&self, x: &Points, ctx: &FitContext) -> Result<Option<ModelSpec>, FitError> {
        let mut fit = |g: &crate::kernel::MixtureKernel,
                       path: &str|
         -> Result<std::sync::Arc<crate::kernel::Mixture>, FitError> {
            match mixture::fit(x, g, ctx) {
                Ok(m) => Ok(std::sync::Arc::new(m.mixture)),
                Err(FitError::Invalid(e)) => Err(FitError::Invalid(e.under(path).under("/kernel"))),
                Err(e) => Err(e),
            }
        };
        let kernel = self.kernel().with_mixtures(&mut fit)?;
        if &kernel == self.kernel() {
            return Ok(None);
        }
        let mut spec = self.clone();
        *spec.kernel_mut() = kernel;
        Ok(Some(spec))
    }

    pub fn params_json(&self) -> Value {
        match self {
            ModelSpec::KernelRidge(p) => p.params_json(),
            ModelSpec::GaussianProcess(p) => p.params_json(),
            ModelSpec::Svm(p) => p.params_json(),
            ModelSpec::KernelPerceptron(p) => p.params_json(),
            ModelSpec::KernelLogistic(p) => p.params_json(),
            ModelSpec::GpClassifier(p) => p.params_json(),
            ModelSpec::NadarayaWatson(p) => p.params_json(),
            ModelSpec::RbfNetwork(p) => p.params_json(),
        }
    }

    /// The approximation params of the models that have them.
    fn approximation_mut(&mut self) -> Option<&mut approx::Approximation> {
        match self {
            ModelSpec::KernelRidge(p) => Some(&mut p.approx),
            ModelSpec::GaussianProcess(p) => Some(&mut p.approx),
            _ => None,
        }
    }

    fn approximation(&self) -> Option<approx::Approximation> {
        match self {
            ModelSpec::KernelRidge(p) => Some(p.approx),
            ModelSpec::GaussianProcess(p) => Some(p.approx),
            _ => None,
        }
    }

    /// Turns `approximation: auto` into exact (n <= `exact_max_rows` and the exact fit's
    /// memory estimate within `max_fit_bytes`) or nystrom, and checks M against n.
    pub fn resolve_approximation(
        &mut self,
        n: usize,
        d: usize,
        exact_max_rows: usize,
        max_fit_bytes: u64,
    ) -> Result<(), FieldError> {
        let exact_fits = {
            let mut exact = self.clone();
            if let Some(a) = exact.approximation_mut() {
                a.mode = approx::Mode::Exact;
            }
            exact.fit_memory_estimate(n, d) as u64 <= max_fit_bytes
        };
        let Some(a) = self.approximation_mut() else { return Ok(()) };
        if a.mode == approx::Mode::Auto {
            a.mode = if n <= exact_max_rows && exact_fits { approx::Mode::Exact } else { approx::Mode::Nystrom };
        }
        if a.mode == approx::Mode::Nystrom && a.m(n) > n {
            return Err(FieldError::invalid(
                "/params/inducing_points",
                format!("{} inducing points requested but there are only {n} training rows", a.m(n)),
            ));
        }
        Ok(())
    }

    /// Bytes the fit will hold at its peak, for admission decisions.
    pub fn fit_memory_estimate(&self, n: usize, d: usize) -> usize {
        if let Some(a) = self.approximation().filter(|a| a.mode == approx::Mode::Nystrom) {
            let search = match self {
                ModelSpec::GaussianProcess(gp) if gp.optimize => Some(gp.theta().len()),
                _ => None,
            };
            return nystrom::fit_memory_estimate(n, d, a.m(n), search);
        }
        match self {
            ModelSpec::Svm(svm) => return svm.fit_memory_estimate(n, d),
            ModelSpec::RbfNetwork(net) => return net.fit_memory_estimate(n, d),
            ModelSpec::KernelLogistic(klr) => return klr.fit_memory_estimate(n, d),
            ModelSpec::GpClassifier(gpc) => return gpc.fit_memory_estimate(n, d),
            ModelSpec::NadarayaWatson(_) | ModelSpec::KernelPerceptron(_) => return n * (d + 4) * 8 * 2,
            _ => {}
        }
        // One n x n matrix (K, factorised in place) plus the data; the hyperparameter
        // search holds K, one gradient matrix per free hyperparameter, the inverse and W.
        let matrices = match self {
            ModelSpec::GaussianProcess(gp) if gp.optimize => gp.theta().len() + 4,
            _ => 1,
        };
        matrices * n * n * 8 + n * d * 8 * 2
    }

    /// What can only be checked against the data's size, before a fit is queued.
    pub fn check_data(&self, n: usize) -> Result<(), FieldError> {
        match self {
            ModelSpec::RbfNetwork(RbfNetwork { centers: Some(c), .. }) if *c as usize > n => Err(FieldError::invalid(
                "/params/centers",
                format!("{c} centres requested but there are only {n} training rows"),
            )),
            _ => Ok(()),
        }
    }

    pub fn fit(&self, data: &TrainingData, ctx: &FitContext) -> Result<FittedModel, FitError> {
        // The kernel may be well-formed but inconsistent with the data (ARD list length,
        // a string kernel over numbers).
        self.check_rows(data.x().kind(), data.x().d()).map_err(FitError::Invalid)?;
        match self.with_fitted_mixtures(data.x(), ctx)? {
            Some(spec) => spec.fit_checked(data, ctx),
            None => self.fit_checked(data, ctx),
        }
    }

    fn fit_checked(&self, data: &TrainingData, ctx: &FitContext) -> Result<FittedModel, FitError> {
        let mut fitted = match (self, data) {
            (ModelSpec::KernelRidge(p), TrainingData::Regression(d)) => FittedModel::KernelRidge(p.fit(d, ctx)?),
            (ModelSpec::GaussianProcess(p), TrainingData::Regression(d)) if p.approx.mode == approx::Mode::Nystrom => {
                FittedModel::SparseGp(SparseGpModel::fit(p, d, ctx)?)
            }
            (ModelSpec::GaussianProcess(p), TrainingData::Regression(d)) => {
                FittedModel::GaussianProcess(p.fit(d, ctx)?)
            }
            (ModelSpec::Svm(p), TrainingData::Classification(d)) => FittedModel::Svm(p.fit(d, ctx)?),
            (ModelSpec::KernelPerceptron(p), TrainingData::Classification(d)) => {
                FittedModel::KernelPerceptron(p.fit(d, ctx)?)
            }
            (ModelSpec::KernelLogistic(p), TrainingData::Classification(d)) => {
                FittedModel::KernelLogistic(p.fit(d, ctx)?)
            }
            (ModelSpec::GpClassifier(p), TrainingData::Classification(d)) => FittedModel::GpClassifier(p.fit(d, ctx)?),
            (ModelSpec::NadarayaWatson(p), TrainingData::Regression(d)) => FittedModel::NadarayaWatson(p.fit(d, ctx)?),
            (ModelSpec::RbfNetwork(p), TrainingData::Regression(d)) => FittedModel::RbfNetwork(p.fit(d, ctx)?),
            _ => {
                return Err(FitError::Invalid(FieldError::invalid(
                    "/y",
                    format!("these targets do not suit a {} model", self.kind().name()),
                )))
            }
        };
        let report = fitted.predictor_mut().report_mut();
        report.approximation.get_or_insert_with(|| "exact".into());
        Ok(fitted)
    }
}

/// 1 / (1 + e^-z) without overflow for any z.
pub(crate) fn sigmoid(z: f64) -> f64 {
    if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        e / (1.0 + e)
    }
}

/// log(1 + e^z) without overflow.
pub(crate) fn log1p_exp(z: f64) -> f64 {
    if z > 0.0 {
        z + (-z).exp().ln_1p()
    } else {
        z.exp().ln_1p()
    }
}

/// The index of the first largest value: ties go to the lowest index (LIBSVM's votes, and
/// classes in sorted order).
pub(crate) fn first_max(values: impl IntoIterator<Item = f64>) -> usize {
    let mut best = (0, f64::NEG_INFINITY);
    for (i, v) in values.into_iter().enumerate() {
        if v > best.1 {
            best = (i, v);
        }
    }
    best.0
}

/// K(X, X) + s I.
pub(crate) fn regularised_gram(kernel: &Kernel, x: &Points, s: f64, par: Parallelism) -> DMatrix<f64> {
    let mut k = kernel.gram(x, par);
    for i in 0..k.nrows() {
        k[(i, i)] += s;
    }
    k
}

/// K(X*, X)^T-style products: out[j] = sum_i k[(i, j)] w[i], for a n x m cross matrix.
pub(crate) fn weighted_columns(k: &DMatrix<f64>, w: &[f64]) -> Vec<f64> {
    k.column_iter().map(|col| col.iter().zip(w).map(|(a, b)| a * b).sum()).collect()
}

/// Query rows per block at predict, so that the n x block cross matrix stays bounded
/// (about 64 MB) whatever m is.
pub(crate) fn predict_block_rows(n_train: usize) -> usize {
    ((8 << 20) / n_train.max(1)).clamp(64, 8192)
}

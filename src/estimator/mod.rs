//! Models: checked parameters -> fit -> fitted state -> predict.
//!
//! Each model lives in its own file and implements [`Estimator`] (its checked parameters
//! fit a training set) and [`Predictor`] (its fitted state answers queries). Parameters
//! are read from JSON by the model itself (`from_json`), so nothing unchecked reaches a
//! solver. [`ModelSpec`] and [`FittedModel`] are the closed sets the service dispatches
//! over; adding a model adds one arm to each.

mod context;
pub mod dual;
pub mod gaussian_process;
pub mod gp_classifier;
pub mod kernel_logistic;
pub mod kernel_perceptron;
pub mod kernel_ridge;
pub mod mixture;
mod model_spec;
pub mod nadaraya_watson;
pub mod nystrom;
pub mod online;
pub mod rbf_network;
mod stored;
pub mod svm;
pub mod targets;
pub mod transform;
pub mod weights;

use crate::kernel::{Kernel, Points, RowKind};
use crate::linalg::Parallelism;
use nalgebra::DMatrix;
use serde::Serialize;
use serde_json::Value;

pub use context::{CancelToken, FitContext, FitError, Progress, ProgressState};
pub(crate) use gaussian_process::search::HyperSearch;
pub use gaussian_process::sparse::SparseGpModel;
pub use gaussian_process::{GaussianProcess, GaussianProcessModel};
pub use gp_classifier::{GpClassifier, GpClassifierModel};
pub use kernel_logistic::{KernelLogistic, KernelLogisticModel};
pub use kernel_perceptron::{KernelPerceptron, KernelPerceptronModel};
pub use kernel_ridge::{KernelRidge, KernelRidgeModel};
pub use model_spec::ModelSpec;
pub use nadaraya_watson::{NadarayaWatson, NadarayaWatsonModel};
pub use rbf_network::{RbfNetwork, RbfNetworkModel};
pub(crate) use stored::StoredArrays;
pub use stored::{AppendRows, FittedModel, RestoreError, StoredAppend, StoredFit, StoredRows};
pub use svm::{OneClassModel, OneClassSvm, Svm, SvmModel, Svr, SvrModel};
pub use targets::labels::{ClassLabels, ClassificationSet, Target};
pub use targets::outputs::Outputs;
pub use transform::{KernelPca, KernelPcaModel};

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
    Svr,
    NuSvr,
    NuSvm,
    OneClassSvm,
    KernelPca,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Task {
    Regression,
    Classification,
    /// No targets: inliers against outliers (one_class_svm).
    Novelty,
    /// No targets: rows mapped to components (kernel_pca).
    Transform,
}

impl ModelKind {
    pub const ALL: [ModelKind; 13] = [
        ModelKind::KernelRidge,
        ModelKind::GaussianProcess,
        ModelKind::GpClassifier,
        ModelKind::Svm,
        ModelKind::KernelPerceptron,
        ModelKind::KernelLogistic,
        ModelKind::NadarayaWatson,
        ModelKind::RbfNetwork,
        ModelKind::Svr,
        ModelKind::NuSvr,
        ModelKind::NuSvm,
        ModelKind::OneClassSvm,
        ModelKind::KernelPca,
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
            ModelKind::Svr => "svr",
            ModelKind::NuSvr => "nu_svr",
            ModelKind::NuSvm => "nu_svm",
            ModelKind::OneClassSvm => "one_class_svm",
            ModelKind::KernelPca => "kernel_pca",
        }
    }

    pub fn from_name(name: &str) -> Option<ModelKind> {
        ModelKind::ALL.into_iter().find(|k| k.name() == name)
    }

    pub fn task(self) -> Task {
        match self {
            ModelKind::KernelRidge
            | ModelKind::GaussianProcess
            | ModelKind::NadarayaWatson
            | ModelKind::RbfNetwork
            | ModelKind::Svr
            | ModelKind::NuSvr => Task::Regression,
            ModelKind::OneClassSvm => Task::Novelty,
            ModelKind::KernelPca => Task::Transform,
            _ => Task::Classification,
        }
    }
}

/// Training inputs of a regression model after validation: n >= 1 points and their
/// finite targets, n x t column-major (output k's targets are `y[k n..(k + 1) n]`; one
/// output: just y). Only kernel ridge and Gaussian processes take several outputs.
#[derive(Debug, Clone)]
pub struct TrainingSet {
    pub x: Points,
    pub y: Vec<f64>,
    pub outputs: Outputs,
}

impl TrainingSet {
    /// One target per row (1-D y).
    pub fn new(x: Points, y: Vec<f64>) -> TrainingSet {
        TrainingSet { x, y, outputs: Outputs::Single }
    }

    /// Targets `y` n x t column-major (2-D y, whatever t).
    pub fn multi(x: Points, y: Vec<f64>, t: usize) -> TrainingSet {
        debug_assert_eq!(y.len(), x.n() * t);
        TrainingSet { x, y, outputs: Outputs::Multi(t) }
    }

    /// The targets as an n x t matrix.
    pub fn y_matrix(&self) -> DMatrix<f64> {
        DMatrix::from_column_slice(self.x.n(), self.outputs.t(), &self.y)
    }

    /// Output k's targets.
    pub fn output(&self, k: usize) -> &[f64] {
        let n = self.x.n();
        &self.y[k * n..(k + 1) * n]
    }
}

/// Validated training inputs of any task.
#[derive(Debug, Clone)]
pub enum TrainingData {
    Regression(TrainingSet),
    Classification(ClassificationSet),
    /// Rows without targets (novelty detection).
    Unlabelled(Points),
}

impl TrainingData {
    pub fn x(&self) -> &Points {
        match self {
            TrainingData::Regression(d) => &d.x,
            TrainingData::Classification(d) => &d.x,
            TrainingData::Unlabelled(x) => x,
        }
    }

    pub fn x_mut(&mut self) -> &mut Points {
        match self {
            TrainingData::Regression(d) => &mut d.x,
            TrainingData::Classification(d) => &mut d.x,
            TrainingData::Unlabelled(x) => x,
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
    /// Nystrom fits with uniform selection: the training rows' positions (0-based) that
    /// are the inducing points, in the order used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inducing_indices: Option<Vec<u64>>,
    /// Nystrom GP: Titsias' collapsed bound (normalised units under normalize_y).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence_lower_bound: Option<f64>,
    /// Nystrom GP with optimize on many rows: the rows of the seeded subset the
    /// hyperparameter search ran on (the final fit uses every row).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optimized_on_rows: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_marginal_likelihood: Option<f64>,
    /// Closed-form leave-one-out of an exact fit (`params.loo`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loo: Option<LeaveOneOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub converged: Option<bool>,
    /// Nystrom kernel_ridge: `cg` or `direct`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub solver: Option<String>,
    /// Nystrom kernel_ridge by cg: the final relative preconditioned residual (the
    /// largest over outputs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub residual: Option<f64>,
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
    /// SVM classifiers: support vectors per class, in the order of `classes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n_support_per_class: Option<Vec<u64>>,
    /// nu-SVR: the epsilon its solver found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epsilon: Option<f64>,
    /// kernel_pca: the kept eigenvalues of the centred kernel matrix, descending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eigenvalues: Option<Vec<f64>>,
    /// kernel_pca: the components kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n_components: Option<u64>,
    /// A searched fit: the model search that chose these hyperparameters (every
    /// candidate's fold scores), as `selection` reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<Value>,
}

/// Leave-one-out figures of an exact fit with its hyperparameters fixed, in y's units:
/// each training row predicted by the model fitted on the others, from the one fit
/// (Rasmussen & Williams section 5.4.2; for kernel ridge, Allen's PRESS residuals).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LeaveOneOut {
    pub rmse: f64,
    /// GP: the mean over rows of log N(y_i; mu_-i, s2_-i), noise included in s2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_log_predictive_density: Option<f64>,
}

impl LeaveOneOut {
    /// From a factor of A = K + s I and alpha = A^-1 y', y' = (y - m) / scale per output
    /// (n x t): the residuals y'_ik - mu_ik = alpha_ik / [A^-1]_ii and variances
    /// 1 / [A^-1]_ii, reported times output k's `scales[k]` (and the density per unit of
    /// y), averaged over every row and output. One pass for diag(A^-1): n^3 / 3.
    pub fn from_factor(
        chol: &crate::linalg::Cholesky,
        alpha: &DMatrix<f64>,
        scales: &[f64],
        density: bool,
        par: Parallelism,
    ) -> LeaveOneOut {
        let inv_diag = chol.inverse_diagonal(par);
        let count = alpha.len().max(1) as f64;
        let residual = |i: usize, k: usize| alpha[(i, k)] / inv_diag[i];
        let cells = || (0..alpha.ncols()).flat_map(|k| (0..alpha.nrows()).map(move |i| (i, k)));
        let mse = cells().map(|(i, k)| (residual(i, k) * scales[k]).powi(2)).sum::<f64>() / count;
        let mean_log_predictive_density = density.then(|| {
            let ln_2pi = (2.0 * std::f64::consts::PI).ln();
            let total: f64 = cells()
                .map(|(i, k)| {
                    let s2 = 1.0 / inv_diag[i];
                    let r = residual(i, k);
                    -0.5 * (ln_2pi + s2.ln()) - r * r / (2.0 * s2) - scales[k].ln()
                })
                .sum();
            total / count
        });
        LeaveOneOut { rmse: mse.sqrt(), mean_log_predictive_density }
    }

    /// Kernel ridge with sample weights, from the factor of S K S + lambda I and b, its
    /// solution for S y (n x t): the scaled residuals b_ik / [A^-1]_ii are sqrt(w_i) e_ik,
    /// and the rmse is sqrt(sum_i w_i |e_i|^2 / (t sum_i w_i)) (rows of weight 0 count
    /// nothing).
    pub fn weighted_from_factor(
        chol: &crate::linalg::Cholesky,
        b: &DMatrix<f64>,
        total_weight: f64,
        par: Parallelism,
    ) -> LeaveOneOut {
        let inv_diag = chol.inverse_diagonal(par);
        let press: f64 =
            b.column_iter().map(|c| c.iter().zip(&inv_diag).map(|(b, d)| (b / d) * (b / d)).sum::<f64>()).sum();
        let t = b.ncols().max(1) as f64;
        LeaveOneOut { rmse: (press / (t * total_weight)).sqrt(), mean_log_predictive_density: None }
    }
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
    /// one_class_svm: the decision function plus rho.
    pub score_samples: Option<Vec<f64>>,
    /// kernel_pca: m x n_components (and nothing else).
    pub embedding: Option<DMatrix<f64>>,
    /// Regression with t outputs (2-D y): `values` and `variance` are m x t, row-major,
    /// and output k's covariance is `covariance` times `output_scales[k]`.
    pub outputs: Option<usize>,
    pub output_scales: Option<Vec<f64>>,
}

impl Prediction {
    /// Cuts a prediction of stacked rows back into one per part, `sizes` giving each
    /// part's row count in order. Not for covariances, which span the parts.
    pub fn split(self, sizes: &[usize]) -> Vec<Prediction> {
        debug_assert!(self.covariance.is_none(), "a covariance cannot be split by rows");
        let t = self.outputs.unwrap_or(1);
        debug_assert_eq!(
            sizes.iter().sum::<usize>(),
            (self.values.len() / t)
                .max(self.classes.as_ref().map_or(0, Vec::len))
                .max(self.embedding.as_ref().map_or(0, DMatrix::nrows))
        );
        let rows = |m: &DMatrix<f64>, at: usize, len: usize| m.rows(at, len).into_owned();
        let mut at = 0;
        sizes
            .iter()
            .map(|&len| {
                let range = at * t..(at + len) * t;
                let part = Prediction {
                    values: self.values.get(range.clone()).map_or_else(Vec::new, <[f64]>::to_vec),
                    variance: self.variance.as_ref().map(|v| v[range.clone()].to_vec()),
                    covariance: None,
                    classes: self.classes.as_ref().map(|c| c[range.clone()].to_vec()),
                    decision: self.decision.as_ref().map(|d| match d {
                        Decision::Binary(v) => Decision::Binary(v[range.clone()].to_vec()),
                        Decision::PerClass(m) => Decision::PerClass(rows(m, at, len)),
                    }),
                    probabilities: self.probabilities.as_ref().map(|p| rows(p, at, len)),
                    score_samples: self.score_samples.as_ref().map(|v| v[range.clone()].to_vec()),
                    embedding: self.embedding.as_ref().map(|e| rows(e, at, len)),
                    outputs: self.outputs,
                    output_scales: self.output_scales.clone(),
                };
                at += len;
                part
            })
            .collect()
    }

    /// The parts' rows stacked in order (the inverse of [`Prediction::split`]); `parts`
    /// must be non-empty, all of one model and without covariances.
    pub fn stack(parts: Vec<Prediction>) -> Prediction {
        let mut parts = parts.into_iter();
        let first = parts.next().expect("at least one part");
        let cat = |a: DMatrix<f64>, b: &DMatrix<f64>| {
            let m = a.nrows();
            let mut out = a.resize_vertically(m + b.nrows(), 0.0);
            out.rows_mut(m, b.nrows()).copy_from(b);
            out
        };
        parts.fold(first, |mut acc, p| {
            acc.values.extend(p.values);
            if let (Some(a), Some(b)) = (acc.variance.as_mut(), p.variance) {
                a.extend(b);
            }
            if let (Some(a), Some(b)) = (acc.classes.as_mut(), p.classes) {
                a.extend(b);
            }
            if let (Some(a), Some(b)) = (acc.score_samples.as_mut(), p.score_samples) {
                a.extend(b);
            }
            acc.decision = match (acc.decision.take(), p.decision) {
                (Some(Decision::Binary(mut a)), Some(Decision::Binary(b))) => {
                    a.extend(b);
                    Some(Decision::Binary(a))
                }
                (Some(Decision::PerClass(a)), Some(Decision::PerClass(b))) => Some(Decision::PerClass(cat(a, &b))),
                _ => None,
            };
            acc.probabilities = match (acc.probabilities.take(), p.probabilities) {
                (Some(a), Some(b)) => Some(cat(a, &b)),
                _ => None,
            };
            acc.embedding = match (acc.embedding.take(), p.embedding) {
                (Some(a), Some(b)) => Some(cat(a, &b)),
                _ => None,
            };
            acc
        })
    }

    /// Whether every number in it is finite (JSON has no NaN or infinity).
    pub fn is_finite(&self) -> bool {
        let all = |v: &[f64]| v.iter().all(|x| x.is_finite());
        all(&self.values)
            && self.variance.as_deref().is_none_or(all)
            && self.covariance.as_ref().is_none_or(|c| all(c.as_slice()))
            && self.probabilities.as_ref().is_none_or(|p| all(p.as_slice()))
            && self.score_samples.as_deref().is_none_or(all)
            && self.embedding.as_ref().is_none_or(|e| all(e.as_slice()))
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

/// K(X, X) + s I, lower triangle only: it is only ever factorised.
pub fn regularised_gram(kernel: &Kernel, x: &Points, s: f64, par: Parallelism) -> DMatrix<f64> {
    let mut k = kernel.gram_lower(x, par);
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

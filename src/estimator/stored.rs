//! A fitted model as plain data for the durable store, and back: [`StoredFit`] is what
//! the store's file format carries, [`FittedModel`] the closed set of fitted models the
//! service dispatches over.

use super::online::AppendError;
use super::{
    svm::nystrom::NystromSvmModel, ClassLabels, GaussianProcess, GaussianProcessModel, GpClassifier, GpClassifierModel,
    KernelLogistic, KernelLogisticModel, KernelPca, KernelPcaModel, KernelPerceptron, KernelPerceptronModel,
    KernelRidge, KernelRidgeModel, ModelKind, NadarayaWatson, NadarayaWatsonModel, OneClassModel, OneClassSvm,
    Predictor, RbfNetwork, RbfNetworkModel, SparseGpModel, Svm, SvmModel, Svr, SvrModel, TrainingReport, TrainingSet,
};
use crate::kernel::{Kernel, Points, RowKind};
use crate::linalg::Parallelism;
use crate::spec::FieldError;
use nalgebra::DMatrix;
use serde::Serialize;
use serde_json::Value;

/// A fitted model's state in plain data, for the durable store. Kernel, params and the
/// training report travel as their JSON text (re-checked on load); arrays as f64,
/// bit-exact.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct StoredFit {
    pub kind: String,
    pub kernel: String,
    pub params: String,
    pub report: String,
    /// Training points, d x n column-major.
    pub d: u64,
    pub x: Vec<f64>,
    pub alpha: Vec<f64>,
    /// GP only: the Cholesky factor (n x n column-major), its jitter, y normalisation.
    pub factor: Vec<f64>,
    pub jitter: f64,
    pub y_mean: f64,
    pub y_std: f64,
    /// JSON text of the classes ("null" for regression).
    pub classes: String,
    /// Further named arrays a model needs (format version 2).
    pub arrays: Vec<(String, Vec<f64>)>,
    /// Training points that are not numbers (format version 5); `d` is then 0.
    pub rows: StoredRows,
}

/// Training points of the kinds that do not fit `StoredFit::x`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub enum StoredRows {
    /// The points are `x` (d x n).
    #[default]
    Numeric,
    Text(Vec<String>),
    Tokens(Vec<Vec<String>>),
    /// A precomputed kernel's training rows by index, of a training set of `width` rows
    /// (format version 6).
    Indices {
        rows: Vec<u64>,
        width: u64,
    },
}

/// Rows an online update appended, in plain data (an append's stored delta): replayed
/// through [`FittedModel::append_with`] they give the appended model again, bit for bit.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct StoredAppend {
    /// The new points as [`StoredFit`] keeps points: `x` (d x k) or `rows`.
    pub d: u64,
    pub x: Vec<f64>,
    pub rows: StoredRows,
    /// Targets, k x t column-major.
    pub y: Vec<f64>,
    /// 0 for a 1-D y, else t.
    pub outputs: u64,
    pub noise: Option<Vec<f64>>,
    pub sample_weight: Option<Vec<f64>>,
}

/// An append's rows, targets, noise variances and sample weights.
pub type AppendRows = (TrainingSet, Option<Vec<f64>>, Option<Vec<f64>>);

impl StoredAppend {
    pub fn of(new: &TrainingSet, noise: Option<&[f64]>, sample_weight: Option<&[f64]>) -> StoredAppend {
        let mut points = StoredFit::default();
        points.put_points(&new.x);
        StoredAppend {
            d: points.d,
            x: points.x,
            rows: points.rows,
            y: new.y.clone(),
            outputs: match new.outputs {
                super::Outputs::Single => 0,
                super::Outputs::Multi(t) => t as u64,
            },
            noise: noise.map(<[f64]>::to_vec),
            sample_weight: sample_weight.map(<[f64]>::to_vec),
        }
    }

    /// The rows back, checked for consistent lengths.
    pub fn restore(self) -> Result<AppendRows, RestoreError> {
        let mut points = StoredFit { d: self.d, x: self.x, rows: self.rows, ..StoredFit::default() };
        let x = points.take_points(false)?;
        let (outputs, t) = match self.outputs {
            0 => (super::Outputs::Single, 1),
            t => (super::Outputs::Multi(t as usize), t as usize),
        };
        let k = x.n();
        if self.y.len() != k * t {
            return Err(RestoreError(format!("{} targets for {k} rows of {t} outputs", self.y.len())));
        }
        for (name, v) in [("noise", &self.noise), ("sample_weight", &self.sample_weight)] {
            if v.as_ref().is_some_and(|v| v.len() != k) {
                return Err(RestoreError(format!("{name} does not have one entry per row")));
            }
        }
        Ok((TrainingSet { x, y: self.y, outputs }, self.noise, self.sample_weight))
    }
}

/// A stored fit's named arrays, taken out one by one on restore.
pub(crate) struct StoredArrays(Vec<(String, Vec<f64>)>);

impl StoredArrays {
    /// The array called `name`, checked to have `len` entries when given.
    pub(crate) fn take(&mut self, name: &str, len: Option<usize>) -> Result<Vec<f64>, RestoreError> {
        let at =
            self.0.iter().position(|(n, _)| n == name).ok_or_else(|| RestoreError(format!("no array `{name}`")))?;
        let (_, values) = self.0.swap_remove(at);
        match len {
            Some(len) if values.len() != len => {
                Err(RestoreError(format!("array `{name}` has {} entries, expected {len}", values.len())))
            }
            _ => Ok(values),
        }
    }
}

/// Why stored state could not be turned back into a model.
#[derive(Debug, thiserror::Error)]
#[error("stored model is inconsistent: {0}")]
pub struct RestoreError(pub String);

impl StoredFit {
    /// Stores `p` as the model's points.
    pub(crate) fn put_points(&mut self, p: &Points) {
        if let Some((rows, _)) = p.indexed() {
            self.rows = StoredRows::Indices { rows: rows.iter().map(|&r| r as u64).collect(), width: p.d() as u64 };
            return;
        }
        match p.kind() {
            RowKind::Numeric => {
                self.d = p.d() as u64;
                self.x = p.as_matrix().as_slice().to_vec();
            }
            RowKind::Text => {
                let texts = p.texts().expect("text points");
                self.rows = StoredRows::Text(texts.iter().map(|s| s.iter().collect()).collect());
            }
            RowKind::Tokens => {
                let lists = p.token_lists().expect("token points");
                self.rows = StoredRows::Tokens(lists.iter().map(|r| r.to_vec()).collect());
            }
        }
    }

    /// The stored points; none only where `may_be_empty`: an SVM-family model may keep no
    /// support vector (an SVR whose epsilon tube holds every target, a weighted nu-SVC
    /// whose weights zero every row of a pair) and then answers from its intercepts.
    fn take_points(&mut self, may_be_empty: bool) -> Result<Points, RestoreError> {
        let some = |len: usize| len > 0 || may_be_empty;
        match std::mem::take(&mut self.rows) {
            StoredRows::Numeric => {}
            StoredRows::Text(t) if some(t.len()) => return Ok(Points::from_texts(t)),
            StoredRows::Tokens(t) if some(t.len()) => return Ok(Points::from_tokens(t)),
            StoredRows::Indices { rows, width } if some(rows.len()) && width > 0 && rows.iter().all(|&r| r < width) => {
                return Ok(Points::indices(rows.iter().map(|&r| r as usize).collect(), width as usize))
            }
            _ => return Err(RestoreError("no training points".into())),
        }
        let d = self.d as usize;
        if d == 0 || self.x.len() % d != 0 || !some(self.x.len()) {
            return Err(RestoreError(format!("{} values do not make points of dimension {d}", self.x.len())));
        }
        let x = std::mem::take(&mut self.x);
        Ok(Points::from_columns(DMatrix::from_vec(d, x.len() / d, x)))
    }

    fn kernel(&self) -> Result<Kernel, RestoreError> {
        let v: Value = serde_json::from_str(&self.kernel).map_err(|e| RestoreError(format!("kernel: {e}")))?;
        Kernel::from_json(&v).map_err(|e| RestoreError(format!("kernel: {e}")))
    }

    fn params(&self) -> Result<Value, RestoreError> {
        serde_json::from_str(&self.params).map_err(|e| RestoreError(format!("params: {e}")))
    }

    fn report(&self) -> Result<TrainingReport, RestoreError> {
        serde_json::from_str(&self.report).map_err(|e| RestoreError(format!("report: {e}")))
    }

    fn classes(&self) -> Result<ClassLabels, RestoreError> {
        let v: Value = serde_json::from_str(&self.classes).map_err(|e| RestoreError(format!("classes: {e}")))?;
        ClassLabels::from_json(&v).map_err(|e| RestoreError(format!("classes: {e}")))
    }
}

/// A fitted model of any kind.
#[derive(Debug, Clone)]
pub enum FittedModel {
    KernelRidge(KernelRidgeModel),
    GaussianProcess(GaussianProcessModel),
    /// A gaussian_process fitted with `approximation: nystrom`.
    SparseGp(SparseGpModel),
    Svm(SvmModel),
    /// An svm fitted with `approximation: nystrom`: one-vs-rest linear machines on
    /// Nystrom features, served as expansions over the inducing points.
    NystromSvm(NystromSvmModel),
    KernelPerceptron(KernelPerceptronModel),
    KernelLogistic(KernelLogisticModel),
    GpClassifier(GpClassifierModel),
    NadarayaWatson(NadarayaWatsonModel),
    RbfNetwork(RbfNetworkModel),
    Svr(SvrModel),
    OneClassSvm(OneClassModel),
    KernelPca(KernelPcaModel),
}

impl FittedModel {
    pub fn kind(&self) -> ModelKind {
        match self {
            FittedModel::KernelRidge(_) => ModelKind::KernelRidge,
            FittedModel::GaussianProcess(_) | FittedModel::SparseGp(_) => ModelKind::GaussianProcess,
            FittedModel::Svm(m) if m.is_nu() => ModelKind::NuSvm,
            FittedModel::Svm(_) | FittedModel::NystromSvm(_) => ModelKind::Svm,
            FittedModel::Svr(m) if m.is_nu() => ModelKind::NuSvr,
            FittedModel::Svr(_) => ModelKind::Svr,
            FittedModel::OneClassSvm(_) => ModelKind::OneClassSvm,
            FittedModel::KernelPca(_) => ModelKind::KernelPca,
            FittedModel::KernelPerceptron(_) => ModelKind::KernelPerceptron,
            FittedModel::KernelLogistic(_) => ModelKind::KernelLogistic,
            FittedModel::GpClassifier(_) => ModelKind::GpClassifier,
            FittedModel::NadarayaWatson(_) => ModelKind::NadarayaWatson,
            FittedModel::RbfNetwork(_) => ModelKind::RbfNetwork,
        }
    }

    pub fn predictor(&self) -> &dyn Predictor {
        match self {
            FittedModel::KernelRidge(m) => m,
            FittedModel::GaussianProcess(m) => m,
            FittedModel::SparseGp(m) => m,
            FittedModel::Svm(m) => m,
            FittedModel::NystromSvm(m) => m,
            FittedModel::KernelPerceptron(m) => m,
            FittedModel::KernelLogistic(m) => m,
            FittedModel::GpClassifier(m) => m,
            FittedModel::NadarayaWatson(m) => m,
            FittedModel::RbfNetwork(m) => m,
            FittedModel::Svr(m) => m,
            FittedModel::OneClassSvm(m) => m,
            FittedModel::KernelPca(m) => m,
        }
    }

    /// The state to store.
    pub fn to_stored(&self) -> StoredFit {
        let p = self.predictor();
        let mut s = StoredFit {
            kind: self.kind().name().to_string(),
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
        match self {
            FittedModel::KernelRidge(m) => m.store_into(&mut s),
            FittedModel::GaussianProcess(m) => m.store_into(&mut s),
            FittedModel::SparseGp(m) => m.store_into(&mut s),
            FittedModel::Svm(m) => m.store_into(&mut s),
            FittedModel::NystromSvm(m) => m.store_into(&mut s),
            FittedModel::KernelPerceptron(m) => m.store_into(&mut s),
            FittedModel::KernelLogistic(m) => m.store_into(&mut s),
            FittedModel::GpClassifier(m) => m.store_into(&mut s),
            FittedModel::NadarayaWatson(m) => m.store_into(&mut s),
            FittedModel::RbfNetwork(m) => m.store_into(&mut s),
            FittedModel::Svr(m) => m.store_into(&mut s),
            FittedModel::OneClassSvm(m) => m.store_into(&mut s),
            FittedModel::KernelPca(m) => m.store_into(&mut s),
        }
        s
    }

    /// The model a stored state describes, checked for consistency. Takes the arrays
    /// over rather than copying them (a GP's factor is n^2 values).
    pub fn from_stored(s: StoredFit) -> Result<FittedModel, RestoreError> {
        let model = Self::from_stored_arrays(s)?;
        model.prepare_support();
        Ok(model)
    }

    fn from_stored_arrays(mut s: StoredFit) -> Result<FittedModel, RestoreError> {
        let kind = ModelKind::from_name(&s.kind).ok_or_else(|| RestoreError(format!("unknown model {}", s.kind)))?;
        let (kernel, params, mut report) = (s.kernel()?, s.params()?, s.report()?);
        // Models stored before approximations existed were all exact.
        let nystrom = report.approximation.as_deref() == Some("nystrom");
        report.approximation.get_or_insert_with(|| "exact".into());
        let svm_family = matches!(
            kind,
            ModelKind::Svm | ModelKind::NuSvm | ModelKind::Svr | ModelKind::NuSvr | ModelKind::OneClassSvm
        );
        let x = s.take_points(svm_family)?;
        let bad = |e: FieldError| RestoreError(format!("params: {e}"));
        let mut arrays = StoredArrays(std::mem::take(&mut s.arrays));
        match kind {
            ModelKind::Svm | ModelKind::NuSvm => {
                let spec = match kind {
                    ModelKind::Svm => Svm::from_json(kernel, &params, "/params"),
                    _ => Svm::from_json_nu(kernel, &params, "/params"),
                }
                .map_err(bad)?;
                if nystrom && kind == ModelKind::Svm {
                    let m = NystromSvmModel::restore(spec, s.classes()?, x, arrays, report)?;
                    return Ok(FittedModel::NystromSvm(m));
                }
                return Ok(FittedModel::Svm(SvmModel::restore(spec, s.classes()?, x, arrays, report)?));
            }
            ModelKind::Svr | ModelKind::NuSvr => {
                let spec = match kind {
                    ModelKind::Svr => Svr::from_json(kernel, &params, "/params"),
                    _ => Svr::from_json_nu(kernel, &params, "/params"),
                }
                .map_err(bad)?;
                return Ok(FittedModel::Svr(SvrModel::restore(spec, x, s.alpha, arrays, report)?));
            }
            ModelKind::OneClassSvm => {
                let spec = OneClassSvm::from_json(kernel, &params, "/params").map_err(bad)?;
                return Ok(FittedModel::OneClassSvm(OneClassModel::restore(spec, x, s.alpha, arrays, report)?));
            }
            ModelKind::KernelPca => {
                let spec = KernelPca::from_json(kernel, &params, "/params").map_err(bad)?;
                return Ok(FittedModel::KernelPca(KernelPcaModel::restore(spec, x, arrays, report)?));
            }
            ModelKind::KernelPerceptron => {
                let spec = KernelPerceptron::from_json(kernel, &params, "/params").map_err(bad)?;
                let m = KernelPerceptronModel::restore(spec, s.classes()?, x, arrays, report)?;
                return Ok(FittedModel::KernelPerceptron(m));
            }
            ModelKind::KernelLogistic => {
                let spec = KernelLogistic::from_json(kernel, &params, "/params").map_err(bad)?;
                let m = KernelLogisticModel::restore(spec, s.classes()?, x, arrays, report)?;
                return Ok(FittedModel::KernelLogistic(m));
            }
            ModelKind::GpClassifier => {
                let spec = GpClassifier::from_json(kernel, &params, "/params").map_err(bad)?;
                let m = GpClassifierModel::restore(spec, s.classes()?, x, arrays, report)?;
                return Ok(FittedModel::GpClassifier(m));
            }
            _ => {}
        }
        // Kernel ridge and GPs may have several outputs: a column of coefficients each.
        let outputs = super::Outputs::restore(&mut arrays)?;
        let t = outputs.t();
        if s.alpha.len() != x.n() * t {
            return Err(RestoreError(format!("{} coefficients for {} points and {t} outputs", s.alpha.len(), x.n())));
        }
        // Exact GP and kernel ridge keep their targets for online updates (absent from
        // files written before them).
        let y = arrays.take("y", Some(x.n() * t)).ok();
        match kind {
            ModelKind::KernelRidge => {
                let spec = KernelRidge::from_json(kernel, &params, "/params").map_err(bad)?;
                // A fit keeps no factor; an append keeps it for the next one.
                let chol = match s.factor.is_empty() {
                    true => None,
                    false => Some(factor_of(s.factor, x.n(), s.jitter)?),
                };
                let z = arrays.take("z", Some(x.n() * t)).ok();
                Ok(FittedModel::KernelRidge(KernelRidgeModel::restore(spec, x, s.alpha, y, outputs, chol, z, report)))
            }
            ModelKind::NadarayaWatson => {
                let spec = NadarayaWatson::from_json(kernel, &params, "/params").map_err(bad)?;
                Ok(FittedModel::NadarayaWatson(NadarayaWatsonModel::restore(spec, x, s.alpha, report)))
            }
            ModelKind::RbfNetwork => {
                let spec = RbfNetwork::from_json(kernel, &params, "/params").map_err(bad)?;
                Ok(FittedModel::RbfNetwork(RbfNetworkModel::restore(spec, x, s.alpha, report)))
            }
            ModelKind::GaussianProcess if nystrom => {
                let spec = GaussianProcess::from_json(kernel, &params, "/params").map_err(bad)?;
                let norm = crate::estimator::targets::outputs::Normalisation::restore(outputs, &s, &mut arrays)?;
                let v = factor_of(s.factor, x.n(), 0.0)?;
                Ok(FittedModel::SparseGp(SparseGpModel::restore(spec, x, s.alpha, v, (outputs, norm), report)))
            }
            ModelKind::GaussianProcess => {
                let spec = GaussianProcess::from_json(kernel, &params, "/params").map_err(bad)?;
                let norm = crate::estimator::targets::outputs::Normalisation::restore(outputs, &s, &mut arrays)?;
                let factor = factor_of(s.factor, x.n(), s.jitter)?;
                let z = arrays.take("z", Some(x.n() * t)).ok();
                Ok(FittedModel::GaussianProcess(GaussianProcessModel::restore(
                    spec,
                    x,
                    s.alpha,
                    factor,
                    y,
                    z,
                    (outputs, norm),
                    report,
                )))
            }
            other => Err(RestoreError(format!("model {} cannot be stored", other.name()))),
        }
    }

    /// This model with `new` rows appended, equal to a refit on all the rows with the
    /// same hyperparameters: exact Gaussian processes and kernel ridge only.
    pub fn append(&self, new: &TrainingSet, par: Parallelism) -> Result<FittedModel, AppendError> {
        self.append_with(new, None, None, par)
    }

    /// As [`FittedModel::append_with`] for each batch (rows, noise, weights) in turn, bit for
    /// bit, the coefficients solved once at the end: replaying stored updates.
    pub fn append_all(&self, batches: &[AppendRows], par: Parallelism) -> Result<FittedModel, AppendError> {
        let any = |pick: fn(&AppendRows) -> bool| batches.iter().any(pick);
        match self {
            FittedModel::GaussianProcess(m) if !any(|b| b.2.is_some()) => {
                let b: Vec<_> = batches.iter().map(|(x, noise, _)| (x, noise.as_deref())).collect();
                Ok(FittedModel::GaussianProcess(m.append_all(&b, par)?))
            }
            FittedModel::KernelRidge(m) if !any(|b| b.1.is_some()) => {
                let b: Vec<_> = batches.iter().map(|(x, _, weights)| (x, weights.as_deref())).collect();
                Ok(FittedModel::KernelRidge(m.append_all(&b, par)?))
            }
            // Refused as one append would be.
            _ => match batches.first() {
                Some((x, noise, weights)) => self.append_with(x, noise.as_deref(), weights.as_deref(), par),
                None => Ok(self.clone()),
            },
        }
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
        let none_of = |what: Option<&[f64]>, name: &str| match what {
            Some(_) => Err(AppendError::Unsupported(format!("this model takes no {name} with new rows"))),
            None => Ok(()),
        };
        match self {
            FittedModel::GaussianProcess(m) => {
                none_of(weights, "sample weights")?;
                Ok(FittedModel::GaussianProcess(m.append(new, noise, par)?))
            }
            FittedModel::KernelRidge(m) => {
                none_of(noise, "noise")?;
                Ok(FittedModel::KernelRidge(m.append(new, weights, par)?))
            }
            FittedModel::SparseGp(_) => Err(AppendError::Unsupported(
                "online updates need an exact model; this gaussian_process was fitted with approximation nystrom"
                    .into(),
            )),
            other => Err(AppendError::Unsupported(format!(
                "online updates apply to gaussian_process and kernel_ridge models, not {}",
                other.kind().name()
            ))),
        }
    }

    /// Whether the model has a noise variance per training row (a Gaussian process
    /// fitted with `params.noise` as a list): its `include_noise` is refused, its appends
    /// carry noise.
    pub fn has_row_noise(&self) -> bool {
        match self {
            FittedModel::GaussianProcess(m) => m.has_row_noise(),
            FittedModel::SparseGp(m) => m.spec().noise_rows.is_some(),
            _ => false,
        }
    }

    /// Builds what the kernel derives from the support rows to predict (a string or set
    /// kernel's index of them) now rather than at the first predict, so that
    /// `memory_bytes` counts it from the start: the registry accounts a model's bytes when
    /// it takes the model in. Numeric supports derive nothing this size.
    pub fn prepare_support(&self) {
        let p = self.predictor();
        let support = p.support();
        if support.kind() != RowKind::Numeric && support.n() > 0 {
            drop(p.kernel().cross(support, &support.slice(0, 1), Parallelism::Sequential));
        }
    }

    /// The outputs of a regression's targets (one for every model but kernel ridge and
    /// Gaussian processes fitted on a 2-D y).
    pub fn outputs(&self) -> super::Outputs {
        match self {
            FittedModel::KernelRidge(m) => m.outputs(),
            FittedModel::GaussianProcess(m) => m.outputs(),
            FittedModel::SparseGp(m) => m.outputs(),
            _ => super::Outputs::Single,
        }
    }

    /// Whether the model was fitted with sample weights that its appends must carry (a
    /// kernel ridge).
    pub fn has_sample_weight(&self) -> bool {
        matches!(self, FittedModel::KernelRidge(m) if m.has_sample_weight())
    }

    pub fn predictor_mut(&mut self) -> &mut dyn Predictor {
        match self {
            FittedModel::KernelRidge(m) => m,
            FittedModel::GaussianProcess(m) => m,
            FittedModel::SparseGp(m) => m,
            FittedModel::Svm(m) => m,
            FittedModel::NystromSvm(m) => m,
            FittedModel::KernelPerceptron(m) => m,
            FittedModel::KernelLogistic(m) => m,
            FittedModel::GpClassifier(m) => m,
            FittedModel::NadarayaWatson(m) => m,
            FittedModel::RbfNetwork(m) => m,
            FittedModel::Svr(m) => m,
            FittedModel::OneClassSvm(m) => m,
            FittedModel::KernelPca(m) => m,
        }
    }
}

/// A stored n x n Cholesky factor (column-major), checked for its size.
fn factor_of(values: Vec<f64>, n: usize, jitter: f64) -> Result<crate::linalg::Cholesky, RestoreError> {
    if values.len() != n * n {
        return Err(RestoreError(format!("factor has {} entries, expected {}", values.len(), n * n)));
    }
    Ok(crate::linalg::Cholesky::from_factor(DMatrix::from_vec(n, n, values), jitter))
}

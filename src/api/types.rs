//! Request and response bodies of the HTTP contract (docs/api.md documents them).

use super::problem::Problem;
use crate::dataset::rows::Row;
use crate::dataset::DatasetInfo;
use crate::estimator::{ClassLabels, Decision, Prediction};
use crate::registry::{ModelEntry, ModelState};
use crate::service::{Target, TrainInput, TrainSource};
use crate::spec::FieldError;
use nalgebra::DMatrix;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// POST /models
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainBody {
    pub model: String,
    #[serde(default)]
    pub kernel: Option<Value>,
    #[serde(default)]
    pub params: Option<Value>,
    #[serde(default)]
    pub x: Option<Vec<Row>>,
    #[serde(default)]
    pub y: Option<Vec<Target>>,
    /// An uploaded dataset's id, instead of x and y.
    #[serde(default)]
    pub dataset: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub metadata: Option<Value>,
    /// Cross-validated model selection (checked by the service).
    #[serde(default)]
    pub search: Option<Value>,
}

impl TryFrom<TrainBody> for TrainInput {
    type Error = FieldError;

    /// The rows come either inline (x and y, both required) or from a dataset.
    fn try_from(b: TrainBody) -> Result<TrainInput, FieldError> {
        let source = match (b.dataset, b.x, b.y) {
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
                return Err(FieldError::invalid("/dataset", "give either a dataset or x and y, not both"))
            }
            (Some(id), None, None) => TrainSource::Dataset(id),
            (None, None, _) => return Err(FieldError::shape("/x", "missing field `x` (or name a `dataset`)")),
            // Whether the model needs y is the service's to say (novelty detection has none).
            (None, Some(x), y) => TrainSource::Rows { x, y },
        };
        Ok(TrainInput {
            model: b.model,
            kernel: b.kernel,
            params: b.params,
            source,
            name: b.name,
            metadata: b.metadata,
            search: b.search,
        })
    }
}

/// Query of GET /models/{id}: `include=coefficients` (a comma-separated list, and
/// `include` may be repeated); other parameters are ignored.
#[derive(Debug, Default)]
pub struct ModelQuery {
    pub include: Vec<String>,
}

impl ModelQuery {
    /// From the query's pairs, in order.
    pub fn of(pairs: Vec<(String, String)>) -> ModelQuery {
        ModelQuery { include: pairs.into_iter().filter(|(k, _)| k == "include").map(|(_, v)| v).collect() }
    }

    /// Whether the coefficients are asked for; an unknown name is 422 at `/include`.
    pub fn coefficients(&self) -> Result<bool, crate::spec::FieldError> {
        let mut wanted = false;
        for name in self.include.iter().flat_map(|s| s.split(',')).map(str::trim).filter(|s| !s.is_empty()) {
            match name {
                "coefficients" => wanted = true,
                other => {
                    return Err(crate::spec::FieldError::invalid(
                        "/include",
                        format!("unknown include `{other}`; expected coefficients"),
                    ))
                }
            }
        }
        Ok(wanted)
    }
}

/// Query of POST /models.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainQuery {
    #[serde(default = "yes")]
    pub wait: bool,
}

fn yes() -> bool {
    true
}

/// POST /models/{id}/observations
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObservationsBody {
    pub x: Vec<Row>,
    pub y: Vec<crate::service::Target>,
    /// The new rows' noise variances (a Gaussian process with a noise per row).
    #[serde(default)]
    pub noise: Option<Vec<f64>>,
    /// The new rows' weights (a model fitted with sample weights).
    #[serde(default)]
    pub sample_weight: Option<Vec<f64>>,
}

/// POST /models/{id}/predict
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PredictBody {
    pub x: Vec<Row>,
    #[serde(default)]
    pub variance: Option<bool>,
    #[serde(default)]
    pub covariance: Option<bool>,
    #[serde(default)]
    pub include_noise: Option<bool>,
    #[serde(default)]
    pub probabilities: Option<bool>,
}

/// POST /models/{id}/posterior_samples as JSON.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PosteriorBody {
    pub x: Vec<Row>,
    #[serde(default)]
    pub n_samples: Option<u64>,
    #[serde(default)]
    pub seed: Option<u64>,
    #[serde(default)]
    pub include_noise: Option<bool>,
}

/// Query of a CSV posterior_samples body: the options a JSON body would carry.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PosteriorQuery {
    #[serde(default)]
    pub n_samples: Option<u64>,
    #[serde(default)]
    pub seed: Option<u64>,
    #[serde(default)]
    pub include_noise: Option<bool>,
}

/// `{"samples"}`: m rows of n_samples draws.
#[derive(Debug, Serialize)]
pub struct SamplesResponse {
    pub samples: Samples,
}

/// m x n_samples, or m x t x n_samples for several outputs (scikit-learn's `sample_y`).
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Samples {
    Single(Vec<Vec<f64>>),
    PerOutput(Vec<Vec<Vec<f64>>>),
}

impl SamplesResponse {
    pub fn new(d: &crate::estimator::gaussian_process::posterior::Draws) -> SamplesResponse {
        let samples = match d {
            crate::estimator::gaussian_process::posterior::Draws::Single(m) => Samples::Single(rows_of(m)),
            crate::estimator::gaussian_process::posterior::Draws::PerOutput(ms) => {
                let m = ms.first().map_or(0, |d| d.nrows());
                Samples::PerOutput(
                    (0..m).map(|i| ms.iter().map(|d| d.row(i).iter().copied().collect()).collect()).collect(),
                )
            }
        };
        SamplesResponse { samples }
    }
}

/// POST /models/{id}/transform and /inverse_transform: rows only.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RowsBody {
    pub x: Vec<Row>,
}

/// m x k as a list of rows.
fn rows_of(m: &nalgebra::DMatrix<f64>) -> Vec<Vec<f64>> {
    m.row_iter().map(|r| r.iter().copied().collect()).collect()
}

#[derive(Debug, Serialize)]
pub struct EmbeddingResponse {
    pub embedding: Vec<Vec<f64>>,
}

impl EmbeddingResponse {
    pub fn new(e: &nalgebra::DMatrix<f64>) -> Self {
        EmbeddingResponse { embedding: rows_of(e) }
    }
}

#[derive(Debug, Serialize)]
pub struct RowsResponse {
    pub x: Vec<Vec<f64>>,
}

impl RowsResponse {
    pub fn new(x: &nalgebra::DMatrix<f64>) -> Self {
        RowsResponse { x: rows_of(x) }
    }
}

#[derive(Debug, Serialize)]
pub struct PredictResponse {
    pub predictions: Predictions,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variance: Option<PerRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub std: Option<PerRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub covariance: Option<Covariance>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision_function: Option<DecisionFunction>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probabilities: Option<Vec<Vec<f64>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score_samples: Option<Vec<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub classes: Option<Value>,
}

/// Numbers for regression, class labels (JSON numbers or strings) for classifiers.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Predictions {
    Values(Vec<f64>),
    /// Several outputs: one list of t numbers per row.
    Rows(Vec<Vec<f64>>),
    Labels(Vec<Value>),
    /// One-class: 1 (inlier) or -1 (outlier).
    Signs(Vec<i8>),
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum DecisionFunction {
    Binary(Vec<f64>),
    PerClass(Vec<Vec<f64>>),
}

/// One number per row, or (several outputs) one list of t numbers per row.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum PerRow {
    Values(Vec<f64>),
    Rows(Vec<Vec<f64>>),
}

impl PerRow {
    /// Row-major values, `t` per row when the model has several outputs.
    fn new(values: Vec<f64>, outputs: Option<usize>) -> PerRow {
        match outputs {
            None => PerRow::Values(values),
            Some(t) => PerRow::Rows(values.chunks(t.max(1)).map(<[f64]>::to_vec).collect()),
        }
    }

    /// Column k (one output's values).
    fn column(&self, k: usize) -> Vec<f64> {
        match self {
            PerRow::Values(v) => v.clone(),
            PerRow::Rows(r) => r.iter().map(|row| row[k]).collect(),
        }
    }
}

/// m x m, or m x m x t for several outputs (scikit-learn's shape for a 2-D y).
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Covariance {
    Matrix(Vec<Vec<f64>>),
    PerOutput(Vec<Vec<Vec<f64>>>),
}

fn rows(m: &DMatrix<f64>) -> Vec<Vec<f64>> {
    m.row_iter().map(|r| r.iter().copied().collect()).collect()
}

impl PredictResponse {
    /// `classes`: the model's, for a classifier (its predictions are indices into them).
    pub fn new(p: Prediction, classes: Option<&ClassLabels>) -> PredictResponse {
        let outputs = p.outputs;
        let std = p.variance.as_ref().map(|v| PerRow::new(v.iter().map(|x| x.sqrt()).collect(), outputs));
        let predictions = match (classes, p.classes) {
            (Some(labels), Some(index)) => Predictions::Labels(index.into_iter().map(|k| labels.label(k)).collect()),
            // One-class SVMs (the models with score_samples) answer the integers 1 / -1.
            _ if p.score_samples.is_some() => Predictions::Signs(p.values.iter().map(|&v| v as i8).collect()),
            _ => match PerRow::new(p.values, outputs) {
                PerRow::Values(v) => Predictions::Values(v),
                PerRow::Rows(r) => Predictions::Rows(r),
            },
        };
        let covariance = p.covariance.as_ref().map(|c| match &p.output_scales {
            None => Covariance::Matrix(rows(c)),
            // cov[i][j][k] = C_ij * scale_k.
            Some(scales) => Covariance::PerOutput(
                c.row_iter().map(|r| r.iter().map(|v| scales.iter().map(|s| v * s).collect()).collect()).collect(),
            ),
        });
        PredictResponse {
            predictions,
            variance: p.variance.map(|v| PerRow::new(v, outputs)),
            std,
            covariance,
            decision_function: p.decision.map(|d| match d {
                Decision::Binary(v) => DecisionFunction::Binary(v),
                Decision::PerClass(m) => DecisionFunction::PerClass(rows(&m)),
            }),
            probabilities: p.probabilities.as_ref().map(rows),
            score_samples: p.score_samples,
            classes: classes.map(ClassLabels::to_json),
        }
    }
}

/// GET /models/kinds.
#[derive(Debug, Serialize)]
pub struct KindList {
    pub kinds: Vec<crate::estimator::KindRow>,
}

/// The model resource of GET /models/{id} (and of the list, and of 201/202).
#[derive(Debug, Serialize)]
pub struct ModelResource {
    pub id: String,
    pub name: Option<String>,
    pub model: &'static str,
    pub task: crate::estimator::Task,
    pub status: crate::registry::Status,
    pub kernel: Value,
    pub params: Value,
    pub n_train: usize,
    /// None for models over strings or token lists.
    pub n_features: Option<usize>,
    pub n_support: Option<usize>,
    pub classes: Option<Value>,
    pub training: Option<Value>,
    pub metadata: Option<Value>,
    pub created_at: String,
    pub memory_bytes: usize,
    /// 1 after the fit (and before it), one more after each online update.
    pub version: u64,
    /// The dataset it was fitted on, and that dataset's feature columns.
    /// While training: the phase, iteration, elapsed time and objective of the fit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dataset: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub features: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Problem>,
    /// `?include=coefficients`, for the kinds that have them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coefficients: Option<crate::estimator::Coefficients>,
}

impl ModelResource {
    pub fn of(e: &ModelEntry) -> ModelResource {
        let state = e.state();
        let mut r = ModelResource {
            id: e.id.to_string(),
            name: e.name.clone(),
            model: e.kind.name(),
            task: e.kind.task(),
            status: state.status(),
            kernel: e.requested_kernel.clone(),
            params: e.requested_params.clone(),
            n_train: e.n_train,
            n_features: (e.n_features > 0).then_some(e.n_features),
            n_support: None,
            classes: None,
            training: None,
            metadata: e.metadata.clone(),
            created_at: humantime::format_rfc3339_millis(e.created_at).to_string(),
            memory_bytes: 0,
            version: e.version(),
            progress: None,
            dataset: e.origin.dataset.map(|d| d.to_string()),
            features: e.origin.features.clone(),
            error: None,
            coefficients: None,
        };
        match state {
            ModelState::Ready(m) => {
                r.kernel = m.kernel.clone();
                r.params = m.params.clone();
                r.n_support = Some(m.n_support);
                r.classes = m.classes.clone();
                r.training = Some(m.training.clone());
                r.memory_bytes = m.memory_bytes;
            }
            ModelState::Failed(f) => r.error = Some(Problem::of_failure(&f)),
            ModelState::Training => {
                let p = e.progress.snapshot();
                let mut v = serde_json::to_value(&p).expect("progress serialises");
                let elapsed = e.running_for().unwrap_or_default().as_secs_f64() * 1e3;
                v["elapsed_ms"] = serde_json::json!(elapsed);
                r.progress = Some(v);
            }
            ModelState::Queued => {}
        }
        r
    }
}

impl ModelResource {
    /// As [`ModelResource::of`], less the bulky arrays a list leaves out (the contract):
    /// `training.inducing_indices` and `training.search.candidates` appear only in
    /// GET /models/{id}.
    pub fn listed(e: &ModelEntry) -> ModelResource {
        let mut r = ModelResource::of(e);
        if let Some(Value::Object(training)) = r.training.as_mut() {
            training.shift_remove("inducing_indices");
            if let Some(Value::Object(search)) = training.get_mut("search") {
                search.shift_remove("candidates");
            }
        }
        r
    }
}

#[derive(Debug, Serialize)]
pub struct ModelList {
    pub models: Vec<ModelResource>,
}

/// The dataset resource of the contract.
#[derive(Debug, Serialize)]
pub struct DatasetResource {
    pub id: String,
    pub name: Option<String>,
    pub n_rows: u64,
    pub n_features: Option<u64>,
    pub features: Option<Vec<String>>,
    /// The target column's name, the list of names of several (`?target=a,b`), or null.
    pub target: Value,
    pub target_kind: &'static str,
    pub bytes: u64,
    pub created_at: String,
}

impl DatasetResource {
    pub fn of(d: &DatasetInfo) -> DatasetResource {
        DatasetResource {
            id: d.id.to_string(),
            name: d.name.clone(),
            n_rows: d.n_rows,
            n_features: d.n_features,
            features: d.features.clone(),
            target: match (&d.targets, &d.target) {
                (Some(names), _) => serde_json::json!(names),
                (None, Some(name)) => Value::String(name.clone()),
                (None, None) => Value::Null,
            },
            target_kind: d.target_kind.name(),
            bytes: d.bytes,
            created_at: humantime::format_rfc3339_millis(d.created_at()).to_string(),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct DatasetList {
    pub datasets: Vec<DatasetResource>,
}

/// Query of POST /datasets.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetQuery {
    #[serde(default)]
    pub target: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
}

/// Query of a CSV predict body: the options a JSON body would carry.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PredictQuery {
    #[serde(default)]
    pub variance: Option<bool>,
    #[serde(default)]
    pub include_noise: Option<bool>,
    #[serde(default)]
    pub probabilities: Option<bool>,
}

/// A class label or number as a CSV cell.
fn cell(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), String::from)
}

impl PredictResponse {
    /// The answer as CSV: `prediction`, then `variance` and `std`, or one `p_<class>`
    /// column per class. Several outputs have `prediction_<target>` columns (then
    /// `variance_<target>`, `std_<target>`), `<target>` being `targets[k]` (the dataset's
    /// target names) or the output's index. Numbers are written in full (shortest
    /// round-trip form).
    pub fn to_csv(&self, targets: Option<&[String]>) -> Vec<u8> {
        let num = |x: &f64| format!("{x:?}");
        let t = match &self.predictions {
            Predictions::Rows(r) => Some(r.first().map_or(0, Vec::len)),
            _ => None,
        };
        let name = |what: &str, k: usize| match t {
            None => what.to_string(),
            Some(_) => match targets {
                Some(names) if names.len() == t.unwrap_or(0) => format!("{what}_{}", names[k]),
                _ => format!("{what}_{k}"),
            },
        };
        let mut header = Vec::new();
        let mut columns: Vec<Vec<String>> = Vec::new();
        match &self.predictions {
            Predictions::Values(v) => columns.push(v.iter().map(num).collect()),
            Predictions::Rows(r) => {
                for k in 0..t.unwrap_or(0) {
                    header.push(name("prediction", k));
                    columns.push(r.iter().map(|row| num(&row[k])).collect());
                }
            }
            Predictions::Labels(l) => columns.push(l.iter().map(cell).collect()),
            Predictions::Signs(v) => columns.push(v.iter().map(|s| s.to_string()).collect()),
        }
        if t.is_none() {
            header.push("prediction".to_string());
        }
        for (what, values) in [("variance", &self.variance), ("std", &self.std)] {
            if let Some(v) = values {
                for k in 0..t.unwrap_or(1) {
                    header.push(name(what, k));
                    columns.push(v.column(k).iter().map(num).collect());
                }
            }
        }
        if let (Some(p), Some(Value::Array(classes))) = (&self.probabilities, &self.classes) {
            for (k, c) in classes.iter().enumerate() {
                header.push(format!("p_{}", cell(c)));
                columns.push(p.iter().map(|row| num(&row[k])).collect());
            }
        }
        let rows = (0..columns[0].len()).map(|i| columns.iter().map(|c| c[i].clone()).collect());
        let mut out = Vec::new();
        crate::dataset::csv::write_table(&mut out, &header, rows);
        out
    }
}

//! Request and response bodies of the contract (../shared/API.md).

use super::problem::Problem;
use crate::estimator::{ClassLabels, Decision, Prediction, TrainingReport};
use crate::registry::{ModelEntry, ModelState};
use crate::service::{Target, TrainInput};
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
    pub x: Vec<Vec<f64>>,
    pub y: Vec<Target>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub metadata: Option<Value>,
}

impl From<TrainBody> for TrainInput {
    fn from(b: TrainBody) -> TrainInput {
        TrainInput {
            model: b.model,
            kernel: b.kernel,
            params: b.params,
            x: b.x,
            y: b.y,
            name: b.name,
            metadata: b.metadata,
        }
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

/// POST /models/{id}/predict
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PredictBody {
    pub x: Vec<Vec<f64>>,
    #[serde(default)]
    pub variance: Option<bool>,
    #[serde(default)]
    pub covariance: Option<bool>,
    #[serde(default)]
    pub include_noise: Option<bool>,
    #[serde(default)]
    pub probabilities: Option<bool>,
}

#[derive(Debug, Serialize)]
pub struct PredictResponse {
    pub predictions: Predictions,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variance: Option<Vec<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub std: Option<Vec<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub covariance: Option<Vec<Vec<f64>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision_function: Option<DecisionFunction>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probabilities: Option<Vec<Vec<f64>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub classes: Option<Value>,
}

/// Numbers for regression, class labels (JSON numbers or strings) for classifiers.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Predictions {
    Values(Vec<f64>),
    Labels(Vec<Value>),
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum DecisionFunction {
    Binary(Vec<f64>),
    PerClass(Vec<Vec<f64>>),
}

fn rows(m: &DMatrix<f64>) -> Vec<Vec<f64>> {
    m.row_iter().map(|r| r.iter().copied().collect()).collect()
}

impl PredictResponse {
    /// `classes`: the model's, for a classifier (its predictions are indices into them).
    pub fn new(p: Prediction, classes: Option<&ClassLabels>) -> PredictResponse {
        let std = p.variance.as_ref().map(|v| v.iter().map(|x| x.sqrt()).collect());
        let predictions = match (classes, p.classes) {
            (Some(labels), Some(index)) => Predictions::Labels(index.into_iter().map(|k| labels.label(k)).collect()),
            _ => Predictions::Values(p.values),
        };
        PredictResponse {
            predictions,
            variance: p.variance,
            std,
            covariance: p.covariance.as_ref().map(rows),
            decision_function: p.decision.map(|d| match d {
                Decision::Binary(v) => DecisionFunction::Binary(v),
                Decision::PerClass(m) => DecisionFunction::PerClass(rows(&m)),
            }),
            probabilities: p.probabilities.as_ref().map(rows),
            classes: classes.map(ClassLabels::to_json),
        }
    }
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
    pub n_features: usize,
    pub n_support: Option<usize>,
    pub classes: Option<Value>,
    pub training: Option<TrainingReport>,
    pub metadata: Option<Value>,
    pub created_at: String,
    pub memory_bytes: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Problem>,
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
            n_features: e.n_features,
            n_support: None,
            classes: None,
            training: None,
            metadata: e.metadata.clone(),
            created_at: humantime::format_rfc3339_millis(e.created_at).to_string(),
            memory_bytes: 0,
            error: None,
        };
        match state {
            ModelState::Ready(m) => {
                let p = m.predictor();
                r.kernel = p.kernel().to_json();
                r.params = p.params_json();
                r.n_support = Some(p.n_support());
                r.classes = p.classes().map(ClassLabels::to_json);
                r.training = Some(p.report().clone());
                r.memory_bytes = p.memory_bytes();
            }
            ModelState::Failed(f) => r.error = Some(Problem::of_failure(&f)),
            ModelState::Queued | ModelState::Training => {}
        }
        r
    }
}

#[derive(Debug, Serialize)]
pub struct ModelList {
    pub models: Vec<ModelResource>,
}

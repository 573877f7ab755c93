//! The Open Inference Protocol v2 (KServe's REST "v2" API, which Triton, MLServer and
//! KServe clients speak) over the same models: a model's name is its id.
//!
//! One input tensor `x`: `[m, d]` numbers (FP64; FP32 and integer types are widened),
//! or `[m]` BYTES for models over strings (models over token lists are not offered:
//! 400). Outputs are the predict route's fields as
//! tensors. Errors are the protocol's `{"error": "..."}`, with the status the predict
//! route would give (409 for a model that is not ready). Tensors may travel in the
//! binary tensor data extension ([`super::oip_binary`]) both ways.

use super::oip_binary::{self as binary, Elements};
use super::problem::ApiError;
use crate::dataset::rows::Row;
use crate::estimator::{Decision, PredictOptions, Prediction};
use crate::kernel::RowKind;
use crate::linalg::Parallelism;
use crate::service::aliases::Served;
use crate::service::{QueryRows, Service, ServiceError};
use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderName, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use uuid::Uuid;

/// A protocol error: `{"error": message}` with a 4xx (or 5xx) status.
pub struct OipError(StatusCode, String);

/// Marks a response as the protocol's own error, which the problem+json middleware
/// leaves as it is.
#[derive(Clone, Copy)]
pub struct ProtocolError;

impl IntoResponse for OipError {
    fn into_response(self) -> Response {
        let mut response = (self.0, Json(json!({"error": self.1}))).into_response();
        response.extensions_mut().insert(ProtocolError);
        response
    }
}

impl From<ServiceError> for OipError {
    fn from(e: ServiceError) -> Self {
        let problem = ApiError::Service(e).to_problem();
        let fields: Vec<String> = problem.errors.iter().map(|f| format!("{}: {}", f.pointer, f.message)).collect();
        let message = if fields.is_empty() { problem.detail } else { fields.join("; ") };
        OipError(StatusCode::from_u16(problem.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), message)
    }
}

fn bad(message: impl Into<String>) -> OipError {
    OipError(StatusCode::BAD_REQUEST, message.into())
}

/// The model `{id}` names for this request: a model id, or the model an alias of that
/// name routes it to (seeded by `request_id`).
async fn served(
    service: &Service,
    id: Result<Path<String>, PathRejection>,
    request_id: &str,
) -> Result<(String, Served), OipError> {
    let Path(raw) = id.map_err(|e| bad(format!("invalid path: {}", e.body_text())))?;
    match service.resolve(&raw, request_id).await {
        Ok(s) => Ok((raw, s)),
        Err(_) => Err(OipError(StatusCode::NOT_FOUND, format!("no model named {raw}"))),
    }
}

/// GET /v2: server metadata.
pub async fn server_metadata() -> Json<Value> {
    Json(json!({"name": "mercer", "version": env!("CARGO_PKG_VERSION"), "extensions": ["binary_tensor_data"]}))
}

/// GET /v2/health/live.
pub async fn live() -> Json<Value> {
    Json(json!({"live": true}))
}

/// GET /v2/health/ready: 503 while starting or draining, as /readyz.
pub async fn ready(State(service): State<Arc<Service>>) -> Response {
    let ready = service.is_ready();
    let status = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    let mut response = (status, Json(json!({"ready": ready}))).into_response();
    response.extensions_mut().insert(ProtocolError);
    response
}

/// GET /v2/models/{id}/ready: 200 when ready, 409 when not (yet, or failed).
pub async fn model_ready(
    State(service): State<Arc<Service>>,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Result<Response, OipError> {
    let (name, served) = served(&service, id, super::served::request_id(&headers)).await?;
    let entry = service.lookup(served.model).await?;
    let ready = service.fitted(&entry).await.is_ok();
    let status = if ready { StatusCode::OK } else { StatusCode::CONFLICT };
    let body = Json(json!({"name": name, "ready": ready}));
    let mut response = (status, super::served::served_headers(&served), body).into_response();
    response.extensions_mut().insert(ProtocolError);
    Ok(response)
}

/// GET /v2/models/{id}: the input tensor and the output tensors a prediction returns
/// (those of a one-row prediction of the model's first kept point, so that they are
/// exactly what `infer` gives).
pub async fn model_metadata(
    State(service): State<Arc<Service>>,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Result<Response, OipError> {
    let (name, served) = served(&service, id, super::served::request_id(&headers)).await?;
    let id = served.model;
    let entry = service.lookup(id).await?;
    let fitted = service.fitted(&entry).await?;
    let predictor = fitted.predictor();
    let input = match predictor.row_kind() {
        RowKind::Numeric => json!({"name": "x", "datatype": "FP64", "shape": [-1, predictor.n_features()]}),
        RowKind::Text => json!({"name": "x", "datatype": "BYTES", "shape": [-1]}),
        RowKind::Tokens => return Err(not_offered()),
    };
    let probe_model = fitted.clone();
    // A one-row predict of a large GP is n^2 flops: off the async threads.
    let probe = tokio::task::spawn_blocking(move || {
        let predictor = probe_model.predictor();
        let support = predictor.support();
        (support.n() > 0).then(|| {
            let p = predictor.predict(&support.slice(0, 1), &PredictOptions::default(), Parallelism::Sequential);
            tensors(p, predictor.classes())
        })
    })
    .await
    .map_err(|_| OipError(StatusCode::INTERNAL_SERVER_ERROR, "the model's metadata could not be computed".into()))?;
    let outputs: Vec<Value> = probe
        .unwrap_or_default()
        .into_iter()
        .map(|t| {
            let mut shape = t["shape"].clone();
            shape[0] = json!(-1);
            json!({"name": t["name"], "datatype": t["datatype"], "shape": shape})
        })
        .collect();
    let body = Json(json!({
        "name": name,
        "versions": [],
        "platform": format!("mercer/{}", entry.kind.name()),
        "inputs": [input],
        "outputs": outputs,
    }));
    Ok((super::served::served_headers(&served), body).into_response())
}

#[derive(Deserialize)]
pub struct InferRequest {
    id: Option<String>,
    inputs: Vec<InputTensor>,
    #[serde(default)]
    outputs: Option<Vec<RequestedOutput>>,
    /// `binary_data_output: true`: every output in binary form.
    #[serde(default)]
    parameters: Option<Value>,
}

#[derive(Deserialize)]
struct InputTensor {
    name: String,
    shape: Vec<i64>,
    datatype: String,
    /// Absent when the tensor's data is binary (`parameters.binary_data_size`).
    #[serde(default)]
    data: Option<Value>,
    #[serde(default)]
    parameters: Option<Value>,
}

#[derive(Deserialize)]
struct RequestedOutput {
    name: String,
    /// `binary_data: true` or false: this output in binary form or not.
    #[serde(default)]
    parameters: Option<Value>,
}

/// A flag among a tensor's or request's `parameters`.
fn flag(parameters: &Option<Value>, name: &str) -> Option<bool> {
    parameters.as_ref()?.get(name)?.as_bool()
}

/// POST /v2/models/{id}/infer, in JSON or with the binary tensor data extension.
/// Models over token lists are not offered under the protocol (it has no tensor of
/// lists of strings): their metadata and infer both answer 400, so that no metadata
/// advertises an input its infer refuses.
fn not_offered() -> OipError {
    bad("models over token lists are not offered under the Open Inference Protocol: use POST /models/{id}/predict")
}

/// Whether model `id` is one over token lists (false when it cannot be read).
async fn over_token_lists(service: &Service, id: Uuid) -> bool {
    let Ok(entry) = service.lookup(id).await else { return false };
    service.fitted(&entry).await.is_ok_and(|f| matches!(f.predictor().row_kind(), RowKind::Tokens))
}

pub async fn infer(
    State(service): State<Arc<Service>>,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, OipError> {
    let (name, served) = served(&service, id, super::served::request_id(&headers)).await?;
    // No tensor this route reads is token lists, so such a model never answers: its
    // failure (whatever the tensor) becomes the 400 of a model not offered. Asked on
    // the failure only, which keeps the model's second lookup off the answered path.
    match infer_model(&service, (&name, &served), &headers, &body).await {
        Err(_) if over_token_lists(&service, served.model).await => Err(not_offered()),
        answered => answered.map(|mut r| {
            r.headers_mut().extend(super::served::served_headers(&served));
            r
        }),
    }
}

async fn infer_model(
    service: &Arc<Service>,
    (name, served): (&str, &Served),
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Response, OipError> {
    let header_len = headers.get(binary::HEADER_LENGTH).map(|v| v.to_str().unwrap_or("?"));
    let (head, binary_part) = binary::split(body, header_len).map_err(bad)?;
    // JSON whatever the Content-Type, as every route of the contract.
    let request: InferRequest =
        serde_json::from_slice(head).map_err(|e| bad(format!("malformed inference request: {e}")))?;
    let [input] = &request.inputs[..] else {
        return Err(bad(format!("expected one input tensor `x`, got {}", request.inputs.len())));
    };
    if input.name != "x" {
        return Err(bad(format!("unknown input `{}`: the model takes one input, `x`", input.name)));
    }
    let binary_size = input.parameters.as_ref().and_then(|p| p.get("binary_data_size")).and_then(Value::as_u64);
    let binary_input = match binary_size {
        Some(n) if n == binary_part.len() as u64 => Some(binary_part),
        Some(n) => {
            return Err(bad(format!(
                "input `x`: binary_data_size is {n} but {} bytes follow the JSON header",
                binary_part.len()
            )))
        }
        None if !binary_part.is_empty() => {
            return Err(bad(format!(
                "{} bytes follow the JSON header but no input has binary_data_size",
                binary_part.len()
            )))
        }
        None => None,
    };
    let rows = rows_of(input, binary_input)?;
    let wanted: Option<Vec<&str>> = request.outputs.as_ref().map(|o| o.iter().map(|o| o.name.as_str()).collect());
    let wants = |name: &str| wanted.as_ref().is_none_or(|w| w.contains(&name));
    let opts = PredictOptions {
        variance: wants("variance") || wants("std"),
        covariance: false,
        include_noise: false,
        probabilities: wants("probabilities"),
    };
    let answer = service.infer(served, QueryRows::Json(rows), opts).await?;
    let (fitted, prediction) = (answer.fitted, answer.prediction);
    let all = tensors(prediction, fitted.predictor().classes());
    if let Some(w) = &wanted {
        if let Some(missing) = w.iter().find(|n| !all.iter().any(|t| t["name"] == **n)) {
            return Err(bad(format!("unknown output `{missing}` for this model")));
        }
    }
    let all_binary = flag(&request.parameters, "binary_data_output").unwrap_or(false);
    let in_binary = |name: &str| {
        let asked = request.outputs.iter().flatten().find(|o| o.name == name);
        asked.and_then(|o| flag(&o.parameters, "binary_data")).unwrap_or(all_binary)
    };
    let mut data = Vec::new();
    let outputs: Vec<Value> = all
        .into_iter()
        .filter(|t| wants(t["name"].as_str().unwrap_or("")))
        .map(|mut t| {
            if in_binary(t["name"].as_str().unwrap_or("")) {
                let bytes = binary::encode(t["datatype"].as_str().unwrap_or("FP64"), &t["data"]);
                if let Some(o) = t.as_object_mut() {
                    o.remove("data");
                    o.insert("parameters".into(), json!({"binary_data_size": bytes.len()}));
                }
                data.extend_from_slice(&bytes);
            }
            t
        })
        .collect();
    let mut answer = json!({"model_name": name, "model": served.model, "outputs": outputs});
    if let Some(rid) = request.id {
        answer["id"] = json!(rid);
    }
    if data.is_empty() && !outputs_binary(&answer) {
        return Ok(Json(answer).into_response());
    }
    let mut head = serde_json::to_vec(&answer).expect("a JSON value serialises");
    let head_len = head.len();
    head.extend_from_slice(&data);
    Ok((
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_string()),
            (HeaderName::from_static(binary::HEADER_LENGTH), head_len.to_string()),
        ],
        head,
    )
        .into_response())
}

/// Whether any output of an answer went binary (an empty one has no bytes).
fn outputs_binary(answer: &Value) -> bool {
    answer["outputs"].as_array().is_some_and(|o| o.iter().any(|t| t.get("data").is_none()))
}

/// The rows of tensor `x`: `[m, d]` numbers, or `[m]` strings for BYTES; its elements
/// from `data`, or from `binary` (the extension's raw bytes).
fn rows_of(t: &InputTensor, binary: Option<&[u8]>) -> Result<Vec<Row>, OipError> {
    let count = t.shape.iter().try_fold(1i64, |a, &s| if s < 0 { None } else { a.checked_mul(s) });
    let elements = match (binary, &t.data) {
        (Some(bytes), _) => {
            let count = count
                .and_then(|c| usize::try_from(c).ok())
                .ok_or_else(|| bad(format!("input `x`: bad shape {:?}", t.shape)))?;
            binary::decode(&t.datatype, bytes, count).map_err(|e| bad(format!("input `x`: {e}")))?
        }
        (None, Some(data)) => {
            let flat = flatten(data);
            if count.is_none_or(|c| c as u64 != flat.len() as u64) {
                return Err(bad(format!(
                    "input `x`: shape {:?} does not match its {} data elements",
                    t.shape,
                    flat.len()
                )));
            }
            match t.datatype.as_str() {
                "BYTES" => Elements::Strings(
                    flat.iter()
                        .map(|v| {
                            v.as_str()
                                .map(str::to_owned)
                                .ok_or_else(|| bad("input `x`: BYTES elements must be strings"))
                        })
                        .collect::<Result<_, _>>()?,
                ),
                "FP64" | "FP32" | "FP16" | "INT8" | "INT16" | "INT32" | "INT64" | "UINT8" | "UINT16" | "UINT32"
                | "UINT64" => Elements::Numbers(
                    flat.iter()
                        .map(|v| {
                            v.as_f64().ok_or_else(|| bad(format!("input `x`: {} elements must be numbers", t.datatype)))
                        })
                        .collect::<Result<_, _>>()?,
                ),
                other => return Err(bad(format!("input `x`: unsupported datatype `{other}`"))),
            }
        }
        (None, None) => return Err(bad("input `x` has neither `data` nor `parameters.binary_data_size`")),
    };
    match elements {
        Elements::Strings(strings) => {
            if t.shape.len() != 1 {
                return Err(bad(format!("input `x`: BYTES takes shape [m], one string per row, not {:?}", t.shape)));
            }
            Ok(strings.into_iter().map(Row::Text).collect())
        }
        Elements::Numbers(numbers) => {
            let [m, d] = t.shape[..] else {
                return Err(bad(format!("input `x`: shape must be [m, d], not {:?}", t.shape)));
            };
            // With d = 0 the data's length would not bound m.
            if d < 1 {
                return Err(bad(format!("input `x`: rows need at least one feature, not shape {:?}", t.shape)));
            }
            let d = d as usize;
            Ok((0..m as usize).map(|i| Row::Numbers(numbers[i * d..(i + 1) * d].to_vec())).collect())
        }
    }
}

/// Row-major elements of flat or nested data.
fn flatten(v: &Value) -> Vec<&Value> {
    match v {
        Value::Array(items) => items.iter().flat_map(flatten).collect(),
        other => vec![other],
    }
}

/// The prediction's fields as output tensors.
fn tensors(p: Prediction, classes: Option<&crate::estimator::ClassLabels>) -> Vec<Value> {
    let tensor = |name: &str, datatype: &str, shape: Vec<usize>, data: Value| json!({"name": name, "datatype": datatype, "shape": shape, "data": data});
    if let Some(e) = &p.embedding {
        // kernel_pca: its one output.
        let data = e.transpose().as_slice().to_vec(); // row-major
        return vec![tensor("embedding", "FP64", vec![e.nrows(), e.ncols()], json!(data))];
    }
    // Several outputs: predictions, variance and std are [m, t] (row-major data).
    let t = p.outputs;
    let m = (p.values.len() / t.unwrap_or(1).max(1)).max(p.classes.as_ref().map_or(0, Vec::len));
    let per_row = |m: usize| -> Vec<usize> { t.map_or(vec![m], |t| vec![m, t]) };
    let mut out = Vec::new();
    match (classes, &p.classes) {
        (Some(labels), Some(index)) => {
            let values: Vec<Value> = index.iter().map(|&k| labels.label(k)).collect();
            let datatype = if values.iter().all(Value::is_number) { "FP64" } else { "BYTES" };
            out.push(tensor("predictions", datatype, vec![m], Value::Array(values)));
        }
        _ => out.push(tensor("predictions", "FP64", per_row(m), json!(p.values))),
    }
    if let Some(v) = &p.variance {
        out.push(tensor("variance", "FP64", per_row(m), json!(v)));
        out.push(tensor("std", "FP64", per_row(m), json!(v.iter().map(|x| x.sqrt()).collect::<Vec<_>>())));
    }
    if let Some(pr) = &p.probabilities {
        let data = pr.transpose().as_slice().to_vec(); // row-major
        out.push(tensor("probabilities", "FP64", vec![pr.nrows(), pr.ncols()], json!(data)));
    }
    match &p.decision {
        Some(Decision::Binary(v)) => out.push(tensor("decision_function", "FP64", vec![m], json!(v))),
        Some(Decision::PerClass(d)) => {
            let data = d.transpose().as_slice().to_vec(); // row-major
            out.push(tensor("decision_function", "FP64", vec![d.nrows(), d.ncols()], json!(data)));
        }
        None => {}
    }
    out
}

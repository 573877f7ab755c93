//! /studies handlers: unpack the request, make one service call, map the result to the
//! contract's resources.

use super::extract::JsonBody;
use super::problem::ApiError;
use crate::service::studies::{Definition, StudyView, TrialRecord};
use crate::service::{Service, ServiceError};
use crate::spec::ObjectReader;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use std::sync::Arc;
use uuid::Uuid;

/// A trial resource (the space names its values, the definition its results).
fn trial_json(t: &TrialRecord, d: &Definition) -> Value {
    let mut v = json!({
        "id": t.id,
        "values": d.space.named(&t.values),
        "state": t.state(),
        "created_at": t.created_at,
    });
    match t.results() {
        Some(results) => {
            if !d.multi() {
                v["value"] = json!(results[0]);
            }
            if !d.result_names().is_empty() {
                v["results"] = d.named(results);
            }
            if !d.constraints.is_empty() {
                v["feasible"] = json!(d.feasible(results));
            }
        }
        None if t.state() == "pruned" => {
            if let Some(last) = t.last_report() {
                v["value"] = json!(last);
            }
        }
        None => {}
    }
    if !t.reports.is_empty() {
        v["reports"] = t.reports.iter().map(|(step, value)| json!({"step": step, "value": value})).collect();
    }
    v
}

/// A study resource.
fn study_json(s: &StudyView) -> Value {
    let d = &s.definition;
    let mut v = d.to_json();
    v["trials"] = s.trials.iter().map(|t| trial_json(t, d)).collect();
    v["best"] = s.best().map_or(Value::Null, |t| trial_json(t, d));
    v["n_complete"] = json!(s.trials.iter().filter(|t| t.results().is_some()).count());
    v["n_pruned"] = json!(s.trials.iter().filter(|t| t.state() == "pruned").count());
    if let Some(front) = &s.front {
        v["pareto"] = front.ids.iter().filter_map(|&id| s.trial(id)).map(|t| trial_json(t, d)).collect();
        v["hypervolume"] = json!(front.hypervolume);
        v["reference"] = front.reference.as_ref().map_or(Value::Null, |r| d.named(r));
        v["reference_derived"] = json!(front.derived);
    }
    v
}

/// A path segment that is not a UUID names no study: 404.
fn study_id(id: Result<Path<String>, PathRejection>) -> Result<Uuid, ApiError> {
    let Path(raw) = id.map_err(|e| ApiError::BadQuery(format!("invalid path: {}", e.body_text())))?;
    Uuid::parse_str(&raw).map_err(|_| ApiError::Service(ServiceError::StudyNotFound(Uuid::nil())))
}

pub async fn create(
    State(service): State<Arc<Service>>,
    JsonBody(body): JsonBody<Value>,
) -> Result<Response, ApiError> {
    let study = service.create_study(&body).await?;
    let location =
        HeaderValue::from_str(&format!("/studies/{}", study.definition.id)).expect("a UUID path is a valid header");
    Ok((StatusCode::CREATED, [(header::LOCATION, location)], Json(study_json(&study))).into_response())
}

pub async fn list(State(service): State<Arc<Service>>) -> Result<Json<Value>, ApiError> {
    let studies = service.list_studies().await?;
    Ok(Json(json!({"studies": studies.iter().map(study_json).collect::<Vec<_>>()})))
}

pub async fn get(
    State(service): State<Arc<Service>>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(study_json(&service.study(study_id(id)?).await?)))
}

pub async fn delete(
    State(service): State<Arc<Service>>,
    id: Result<Path<String>, PathRejection>,
) -> Result<StatusCode, ApiError> {
    service.delete_study(study_id(id)?).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn suggest(
    State(service): State<Arc<Service>>,
    id: Result<Path<String>, PathRejection>,
    JsonBody(body): JsonBody<Value>,
) -> Result<Json<Value>, ApiError> {
    let id = study_id(id)?;
    let mut obj = ObjectReader::new(&body, "").map_err(ServiceError::from)?;
    let count = obj.u64("count").map_err(ServiceError::from)?.unwrap_or(1);
    obj.finish().map_err(ServiceError::from)?;
    let (definition, trials) = service.suggest(id, count).await?;
    Ok(Json(json!({"trials": trials.iter().map(|t| trial_json(t, &definition)).collect::<Vec<_>>()})))
}

/// A study's and a trial's path segments: a study that is not a UUID, or a trial that is
/// not a number, names nothing (404).
fn trial_path(path: Result<Path<(String, String)>, PathRejection>) -> Result<(Uuid, u64), ApiError> {
    let Path((raw, trial)) = path.map_err(|e| ApiError::BadQuery(format!("invalid path: {}", e.body_text())))?;
    let id = Uuid::parse_str(&raw).map_err(|_| ServiceError::StudyNotFound(Uuid::nil()))?;
    let trial = trial.parse().map_err(|_| ServiceError::TrialNotFound { study: id, trial: u64::MAX })?;
    Ok((id, trial))
}

pub async fn tell(
    State(service): State<Arc<Service>>,
    path: Result<Path<(String, String)>, PathRejection>,
    JsonBody(body): JsonBody<Value>,
) -> Result<Json<Value>, ApiError> {
    let (id, trial) = trial_path(path)?;
    let (definition, record) = service.tell(id, trial, &body).await?;
    Ok(Json(trial_json(&record, &definition)))
}

pub async fn report(
    State(service): State<Arc<Service>>,
    path: Result<Path<(String, String)>, PathRejection>,
    JsonBody(body): JsonBody<Value>,
) -> Result<Json<Value>, ApiError> {
    let (id, trial) = trial_path(path)?;
    let (step, prune) = service.report(id, trial, &body).await?;
    Ok(Json(json!({"trial": trial, "step": step, "prune": prune})))
}

pub async fn record(
    State(service): State<Arc<Service>>,
    id: Result<Path<String>, PathRejection>,
    JsonBody(body): JsonBody<Value>,
) -> Result<Response, ApiError> {
    let id = study_id(id)?;
    let (definition, record) = service.record_trial(id, &body).await?;
    Ok((StatusCode::CREATED, Json(trial_json(&record, &definition))).into_response())
}

//! /studies handlers: unpack the request, make one service call, map the result to the
//! contract's resources.

use super::extract::JsonBody;
use super::problem::ApiError;
use crate::selection::bayes::study::StudySpace;
use crate::service::studies::{StudyView, TrialRecord};
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

/// A trial resource (the space names its values).
fn trial_json(t: &TrialRecord, space: &StudySpace) -> Value {
    let mut v = json!({
        "id": t.id,
        "values": space.named(&t.values),
        "state": match t.told {
            None => "pending",
            Some(None) => "failed",
            Some(Some(_)) => "complete",
        },
        "created_at": t.created_at,
    });
    if let Some(Some(value)) = t.told {
        v["value"] = json!(value);
    }
    v
}

/// A study resource.
fn study_json(s: &StudyView) -> Value {
    let d = &s.definition;
    json!({
        "id": d.id,
        "name": d.name,
        "space": d.space_json,
        "direction": if d.maximize { "maximize" } else { "minimize" },
        "seed": d.seed,
        "initial": d.initial,
        "trials": s.trials.iter().map(|t| trial_json(t, &d.space)).collect::<Vec<_>>(),
        "best": s.best().map(|t| trial_json(t, &d.space)),
        "n_complete": s.trials.iter().filter(|t| matches!(t.told, Some(Some(_)))).count(),
        "created_at": d.created_at,
    })
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
    let (space, trials) = service.suggest(id, count).await?;
    Ok(Json(json!({"trials": trials.iter().map(|t| trial_json(t, &space)).collect::<Vec<_>>()})))
}

pub async fn tell(
    State(service): State<Arc<Service>>,
    path: Result<Path<(String, String)>, PathRejection>,
    JsonBody(body): JsonBody<Value>,
) -> Result<Json<Value>, ApiError> {
    let Path((raw, trial)) = path.map_err(|e| ApiError::BadQuery(format!("invalid path: {}", e.body_text())))?;
    let id = Uuid::parse_str(&raw).map_err(|_| ServiceError::StudyNotFound(Uuid::nil()))?;
    let trial: u64 = trial.parse().map_err(|_| ServiceError::TrialNotFound { study: id, trial: u64::MAX })?;
    let (space, record) = service.tell(id, trial, &body).await?;
    Ok(Json(trial_json(&record, &space)))
}

pub async fn record(
    State(service): State<Arc<Service>>,
    id: Result<Path<String>, PathRejection>,
    JsonBody(body): JsonBody<Value>,
) -> Result<Response, ApiError> {
    let id = study_id(id)?;
    let (space, record) = service.record_trial(id, &body).await?;
    Ok((StatusCode::CREATED, Json(trial_json(&record, &space))).into_response())
}

//! Operational endpoints: liveness, readiness, metrics, the OpenAPI document.

use super::problem::Problem;
use crate::service::Service;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use std::sync::Arc;

pub const OPENAPI_YAML: &str = include_str!("../../openapi.yaml");

/// Liveness: touches no lock that a fit holds, so it answers while every worker is busy.
pub async fn healthz() -> Json<serde_json::Value> {
    Json(json!({"status": "ok"}))
}

pub async fn readyz(State(service): State<Arc<Service>>) -> Response {
    if service.is_ready() {
        Json(json!({"status": "ready"})).into_response()
    } else {
        let why = if service.is_draining() { "the server is shutting down" } else { "the server is starting" };
        let mut r = Problem::new(StatusCode::SERVICE_UNAVAILABLE, "not-ready", why).into_response();
        r.headers_mut().insert(header::RETRY_AFTER, 1u64.into());
        r
    }
}

pub async fn metrics(State(service): State<Arc<Service>>) -> Response {
    service.refresh_gauges();
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], service.metrics.encode())
        .into_response()
}

pub async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/yaml")], OPENAPI_YAML).into_response()
}

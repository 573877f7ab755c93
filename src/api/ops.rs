//! Operational endpoints: liveness, readiness, metrics, the OpenAPI document.

use super::problem::Problem;
use crate::metrics::Format;
use crate::service::Service;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
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
        // A shared store being down must not take every replica out of its Service
        // at once: the replica still serves what it holds, and says what is degraded.
        let degraded = service.degraded();
        if degraded.is_empty() {
            Json(json!({"status": "ready"})).into_response()
        } else {
            Json(json!({"status": "ready", "degraded": degraded})).into_response()
        }
    } else {
        let why = if service.is_draining() { "the server is shutting down" } else { "the server is starting" };
        let mut r = Problem::new(StatusCode::SERVICE_UNAVAILABLE, "not-ready", why).into_response();
        r.headers_mut().insert(header::RETRY_AFTER, 1u64.into());
        r
    }
}

/// The Prometheus text format unless `Accept` prefers OpenMetrics, as the Prometheus
/// client libraries negotiate (a Prometheus server asks for OpenMetrics first).
pub async fn metrics(State(service): State<Arc<Service>>, headers: HeaderMap) -> Response {
    service.refresh_gauges();
    let accept = headers.get_all(header::ACCEPT).iter().filter_map(|v| v.to_str().ok()).collect::<Vec<_>>().join(",");
    let format = metrics_format(&accept);
    // Caches must keep the two formats apart.
    ([(header::CONTENT_TYPE, format.content_type()), (header::VARY, "accept")], service.metrics.encode(format))
        .into_response()
}

/// OpenMetrics when `Accept` names it with a higher quality than the classic format
/// (`text/plain`, `text/*` or `*/*`); the classic format otherwise.
fn metrics_format(accept: &str) -> Format {
    let (mut openmetrics, mut classic) = (0.0f64, 0.0f64);
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("").to_ascii_lowercase();
        let q = parts
            .filter_map(|p| p.strip_prefix("q=").or_else(|| p.strip_prefix("Q=")))
            .find_map(|v| v.parse::<f64>().ok())
            .unwrap_or(1.0);
        match media.as_str() {
            "application/openmetrics-text" => openmetrics = openmetrics.max(q),
            "text/plain" | "text/*" | "*/*" => classic = classic.max(q),
            _ => {}
        }
    }
    if openmetrics > 0.0 && openmetrics > classic {
        Format::OpenMetrics
    } else {
        Format::Prometheus
    }
}

pub async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/yaml")], OPENAPI_YAML).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_format_follows_accept() {
        let prometheus_server = "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;\
                                 version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
        for (accept, want) in [
            ("", Format::Prometheus),
            ("*/*", Format::Prometheus),
            ("text/plain; version=0.0.4", Format::Prometheus),
            ("application/openmetrics-text; version=1.0.0", Format::OpenMetrics),
            (prometheus_server, Format::OpenMetrics),
            ("text/plain;q=0.9, application/openmetrics-text;q=0.5", Format::Prometheus),
            ("application/openmetrics-text;q=0", Format::Prometheus),
            ("Application/OpenMetrics-Text", Format::OpenMetrics),
        ] {
            assert_eq!(metrics_format(accept), want, "{accept:?}");
        }
    }
}

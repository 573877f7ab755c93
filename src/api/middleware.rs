//! Cross-cutting request handling: bearer-token auth, per-request metrics and log line,
//! and turning every error response that is not already a problem into one.

use super::keys::{KeyName, KeyRing, Scope};
use super::problem::{ApiError, Problem, PROBLEM_CONTENT_TYPE};
use crate::metrics::{HttpLabels, RouteLabels};
use crate::service::Service;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use std::time::Instant;

/// What a route asks of the bearer token: the configured keys and the scope it needs.
#[derive(Clone)]
pub struct Guard {
    pub keys: Arc<KeyRing>,
    pub needs: Scope,
}

pub async fn require_scope(State(guard): State<Guard>, req: Request, next: Next) -> Response {
    if guard.keys.is_empty() {
        return next.run(req).await;
    }
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(str::trim);
    let Some(key) = presented.and_then(|p| guard.keys.find(p)) else {
        return ApiError::Unauthorized.into_response();
    };
    if key.scope < guard.needs {
        return ApiError::Forbidden { needs: guard.needs, has: key.scope }.into_response();
    }
    let name = KeyName(key.name.clone());
    // Handlers that record who changed something read it from the request.
    let mut req = req;
    req.extensions_mut().insert(name.clone());
    let mut response = next.run(req).await;
    response.extensions_mut().insert(name);
    response
}

/// Counts and times every request by its route template, and logs one line for it.
pub async fn observe(State(service): State<Arc<Service>>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().to_string();
    let route =
        req.extensions().get::<MatchedPath>().map_or_else(|| "unmatched".to_string(), |p| p.as_str().to_string());
    service.request_started();
    // Counted down even if the client goes away and the handler future is dropped.
    let _in_flight = InFlight(&service);
    let response = next.run(req).await;
    let secs = started.elapsed().as_secs_f64();
    let status = response.status().as_u16();
    service
        .metrics
        .http_requests
        .get_or_create(&HttpLabels { method: method.clone(), route: route.clone(), status })
        .inc();
    service
        .metrics
        .http_duration
        .get_or_create(&RouteLabels { method: method.clone(), route: route.clone() })
        .observe(secs);
    // With keys configured, the key's name (never its token): the audit record of every
    // request, mutations included, in one line.
    let key = response.extensions().get::<KeyName>().map(|k| k.0.as_str());
    tracing::info!(method, route, status, latency_ms = secs * 1e3, key, "request");
    response
}

struct InFlight<'a>(&'a Service);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.request_finished();
    }
}

/// Layers below the handlers (body limit, timeout) and axum's own rejections answer with
/// bare statuses; this gives every such error response a problem body.
pub async fn problem_for_bare_errors<B>(response: axum::http::Response<B>) -> Response
where
    B: axum::body::HttpBody<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    let response = response.map(axum::body::Body::new);
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let is_problem = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with(PROBLEM_CONTENT_TYPE));
    // Open Inference Protocol routes answer errors in that protocol's own form.
    if is_problem || response.extensions().get::<super::oip::ProtocolError>().is_some() {
        return response;
    }
    let (slug, detail) = match status {
        StatusCode::PAYLOAD_TOO_LARGE => ("too-large", "request body exceeds the limit (MERCER_MAX_BODY_BYTES)"),
        StatusCode::REQUEST_TIMEOUT => {
            ("timeout", "the request took longer than the server allows (MERCER_REQUEST_TIMEOUT_SECS)")
        }
        StatusCode::METHOD_NOT_ALLOWED => ("method-not-allowed", "this method is not allowed on this resource"),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => ("malformed-request", "unsupported media type"),
        _ => ("error", "the request failed"),
    };
    let mut problem = Problem::new(status, slug, detail).into_response();
    // Keep headers such as Allow and Retry-After; replace only the body's description.
    for (name, value) in response.headers() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            problem.headers_mut().insert(name.clone(), value.clone());
        }
    }
    problem
}

/// Every error response as its route's protocol has it: problem+json
/// ([`problem_for_bare_errors`]), except under `/v2` (the Open Inference Protocol), where
/// every error, also those of the layers below the handlers (405, 413, 408, a route that
/// does not exist, a panic), is the protocol's `{"error": message}`, the problem's
/// `detail` its message.
pub async fn errors_in_their_protocol(req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let oip = path == "/v2" || path.starts_with("/v2/");
    let response = problem_for_bare_errors(next.run(req).await).await;
    let status = response.status();
    if !oip
        || !(status.is_client_error() || status.is_server_error())
        || response.extensions().get::<super::oip::ProtocolError>().is_some()
    {
        return response;
    }
    let (parts, body) = response.into_parts();
    // A problem body is small; anything else is replaced by the status's reason.
    let bytes = axum::body::to_bytes(body, 64 << 10).await.unwrap_or_default();
    let detail = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|v| v["detail"].as_str().map(String::from))
        .unwrap_or_else(|| status.canonical_reason().unwrap_or("error").to_lowercase());
    let mut out = (status, axum::Json(serde_json::json!({"error": detail}))).into_response();
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            out.headers_mut().insert(name.clone(), value.clone());
        }
    }
    out.extensions_mut().insert(super::oip::ProtocolError);
    out
}

/// The answer to a handler that panicked: a 500 problem, the panic logged with its
/// message and counted (`mercer_handler_panics_total`). The connection then ends as any
/// other, with an answer.
pub fn panic_response(
    service: Arc<Service>,
) -> impl Fn(Box<dyn std::any::Any + Send + 'static>) -> Response + Clone + Send + Sync + 'static {
    move |payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into());
        tracing::error!(panic = %message, "a request handler panicked");
        service.metrics.handler_panics.inc();
        crate::api::problem::Problem::new(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the request failed with an internal error; it has been logged",
        )
        .into_response()
    }
}

//! The HTTP layer: routes, request/response types, problem+json errors, middleware.
//! It knows nothing of linear algebra; every route calls into [`crate::service`].

pub mod aliases;
pub mod datasets;
pub mod drain;
pub mod extract;
pub mod keys;
pub mod middleware;
pub mod models;
pub mod oip;
pub mod oip_binary;
pub mod ops;
pub mod problem;
pub mod serve;
pub mod served;
pub mod studies;
pub mod types;
pub mod ui;

use crate::metrics::WhyLabels;
use crate::service::Service;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{HeaderName, StatusCode};
use axum::routing::{delete, get, post, put, MethodRouter};
use axum::Router;
use keys::{KeyRing, Scope};
use problem::ApiError;
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::compression::CompressionLayer;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

pub(crate) const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Every route the router serves: method, path, and the scope of API key it needs (None:
/// open to all, even with keys configured). `predict` reads and predicts, `train` also
/// fits, appends, uploads and runs studies, `admin` also deletes and sets aliases.
/// openapi.yaml must list exactly these (tests/spec_routes.rs checks both directions).
pub const ROUTES: [(&str, &str, Option<Scope>); 40] = [
    ("GET", "/", None),
    ("GET", "/ui/{file}", None),
    ("GET", "/healthz", None),
    ("GET", "/readyz", None),
    ("GET", "/metrics", None),
    ("GET", "/openapi.yaml", None),
    ("POST", "/models", Some(Scope::Train)),
    ("GET", "/models", Some(Scope::Predict)),
    ("GET", "/models/kinds", Some(Scope::Predict)),
    ("GET", "/models/{id}", Some(Scope::Predict)),
    ("DELETE", "/models/{id}", Some(Scope::Admin)),
    ("POST", "/models/{id}/predict", Some(Scope::Predict)),
    ("POST", "/models/{id}/transform", Some(Scope::Predict)),
    ("POST", "/models/{id}/inverse_transform", Some(Scope::Predict)),
    ("POST", "/models/{id}/posterior_samples", Some(Scope::Predict)),
    ("POST", "/models/{id}/observations", Some(Scope::Train)),
    ("GET", "/models/{id}/sample", Some(Scope::Predict)),
    ("POST", "/datasets", Some(Scope::Train)),
    ("GET", "/datasets", Some(Scope::Predict)),
    ("GET", "/datasets/{id}", Some(Scope::Predict)),
    ("DELETE", "/datasets/{id}", Some(Scope::Admin)),
    ("POST", "/studies", Some(Scope::Train)),
    ("GET", "/studies", Some(Scope::Predict)),
    ("GET", "/studies/{id}", Some(Scope::Predict)),
    ("DELETE", "/studies/{id}", Some(Scope::Admin)),
    ("POST", "/studies/{id}/suggest", Some(Scope::Train)),
    ("POST", "/studies/{id}/trials", Some(Scope::Train)),
    ("POST", "/studies/{id}/trials/{trial_id}", Some(Scope::Train)),
    ("POST", "/studies/{id}/trials/{trial_id}/reports", Some(Scope::Train)),
    ("GET", "/aliases", Some(Scope::Predict)),
    ("GET", "/aliases/{name}", Some(Scope::Predict)),
    ("PUT", "/aliases/{name}", Some(Scope::Admin)),
    ("DELETE", "/aliases/{name}", Some(Scope::Admin)),
    ("POST", "/aliases/{name}/rollback", Some(Scope::Admin)),
    ("GET", "/v2", Some(Scope::Predict)),
    ("GET", "/v2/health/live", None),
    ("GET", "/v2/health/ready", None),
    ("GET", "/v2/models/{id}", Some(Scope::Predict)),
    ("GET", "/v2/models/{id}/ready", Some(Scope::Predict)),
    ("POST", "/v2/models/{id}/infer", Some(Scope::Predict)),
];

/// The route's handler; every body but an upload's is bounded by `body_limit`
/// (`MERCER_MAX_BODY_BYTES`): datasets stream under their own limit.
fn handler(method: &str, path: &str, body_limit: usize) -> MethodRouter<Arc<Service>> {
    let bounded = |r: MethodRouter<Arc<Service>>| r.layer(RequestBodyLimitLayer::new(body_limit));
    bounded(match (method, path) {
        ("POST", "/datasets") => return post(datasets::create),
        ("GET", "/datasets") => get(datasets::list),
        ("GET", "/datasets/{id}") => get(datasets::get),
        ("DELETE", "/datasets/{id}") => delete(datasets::delete),
        ("POST", "/studies") => post(studies::create),
        ("GET", "/studies") => get(studies::list),
        ("GET", "/studies/{id}") => get(studies::get),
        ("DELETE", "/studies/{id}") => delete(studies::delete),
        ("POST", "/studies/{id}/suggest") => post(studies::suggest),
        ("POST", "/studies/{id}/trials") => post(studies::record),
        ("POST", "/studies/{id}/trials/{trial_id}") => post(studies::tell),
        ("POST", "/studies/{id}/trials/{trial_id}/reports") => post(studies::report),
        ("GET", "/aliases") => get(aliases::list),
        ("GET", "/aliases/{name}") => get(aliases::get),
        ("PUT", "/aliases/{name}") => put(aliases::put),
        ("DELETE", "/aliases/{name}") => delete(aliases::delete),
        ("POST", "/aliases/{name}/rollback") => post(aliases::rollback),
        ("GET", "/healthz") => get(ops::healthz),
        ("GET", "/readyz") => get(ops::readyz),
        ("GET", "/metrics") => get(ops::metrics),
        ("GET", "/openapi.yaml") => get(ops::openapi),
        ("POST", "/models") => post(models::create),
        ("GET", "/models") => get(models::list),
        ("GET", "/models/kinds") => get(models::kinds),
        ("GET", "/models/{id}") => get(models::get),
        ("DELETE", "/models/{id}") => delete(models::delete),
        ("POST", "/models/{id}/predict") => post(models::predict),
        ("POST", "/models/{id}/transform") => post(models::transform),
        ("POST", "/models/{id}/inverse_transform") => post(models::inverse_transform),
        ("POST", "/models/{id}/posterior_samples") => post(models::posterior_samples),
        ("POST", "/models/{id}/observations") => post(models::observations),
        ("GET", "/models/{id}/sample") => get(models::sample),
        ("GET", "/") => get(ui::index),
        ("GET", "/ui/{file}") => get(ui::file),
        ("GET", "/v2") => get(oip::server_metadata),
        ("GET", "/v2/health/live") => get(oip::live),
        ("GET", "/v2/health/ready") => get(oip::ready),
        ("GET", "/v2/models/{id}") => get(oip::model_metadata),
        ("GET", "/v2/models/{id}/ready") => get(oip::model_ready),
        ("POST", "/v2/models/{id}/infer") => post(oip::infer),
        _ => unreachable!("ROUTES names only routes with a handler: {method} {path}"),
    })
}

/// Every route of ROUTES, one method router per path; a route that needs a key checks
/// for one of its scope (each method of a path its own).
fn routes(keys: &Arc<KeyRing>, body_limit: usize) -> Router<Arc<Service>> {
    let mut router = Router::new();
    let mut paths: Vec<&str> = ROUTES.iter().map(|r| r.1).collect();
    paths.sort_unstable();
    paths.dedup();
    for path in paths {
        let methods = ROUTES
            .iter()
            .filter(|r| r.1 == path)
            .map(|&(method, path, scope)| {
                let route = handler(method, path, body_limit);
                match scope {
                    Some(needs) => route.route_layer(axum::middleware::from_fn_with_state(
                        middleware::Guard { keys: keys.clone(), needs },
                        middleware::require_scope,
                    )),
                    None => route,
                }
            })
            .reduce(MethodRouter::merge)
            .expect("a listed path has a method");
        router = router.route(path, methods);
    }
    router
}

/// Every route of the contract, with its middleware. `MERCER_API_KEYS` was checked when
/// the settings were loaded (`mercer serve` exits 2 on a bad entry); a config built in
/// code with a bad entry serves with no route that needs a key open.
pub fn router(service: Arc<Service>) -> Router {
    let config = &service.config;
    let keys = Arc::new(KeyRing::parse(&config.api_keys).unwrap_or_else(|e| {
        tracing::error!(error = %e, "MERCER_API_KEYS: every route that needs a key refuses");
        KeyRing::refusing()
    }));
    let routes = routes(&keys, config.max_body_bytes);
    layered(service, routes)
}

/// `routes` under the service's middleware stack: request ids, tracing, compression,
/// metrics, problem bodies for bare errors (the protocol's `{"error"}` under `/v2`), the request timeout, and a panicking handler
/// answered with a 500 problem (logged and counted) instead of a connection closed
/// without an answer. Public so that a test can put a route that panics under the same
/// stack.
pub fn layered(service: Arc<Service>, routes: Router<Arc<Service>>) -> Router {
    let config = &service.config;
    let limit = config.max_body_bytes;
    let on_panic = middleware::panic_response(service.clone());
    // An answer before the body's end reads at most this much of the rest: any body the
    // limits allow, and a body some way over them (a 413's).
    let drain_limit = (limit as u64).max(config.max_dataset_bytes).saturating_add(256 << 20);
    let drain_bound = service.metrics.http_unanswered.get_or_create(&WhyLabels { why: "drain_bound".into() }).clone();
    routes
        .fallback(|req: Request| async move { ApiError::NoRoute(req.uri().path().to_string()) })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(
            ServiceBuilder::new()
                .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
                .layer(PropagateRequestIdLayer::new(REQUEST_ID))
                .layer(TraceLayer::new_for_http().make_span_with(|req: &Request| {
                    let id = req.headers().get(REQUEST_ID).and_then(|v| v.to_str().ok()).unwrap_or("");
                    tracing::info_span!("request", request_id = %id)
                }))
                .layer(CompressionLayer::new())
                .layer(axum::middleware::from_fn_with_state(service.clone(), middleware::observe))
                .layer(axum::middleware::from_fn_with_state(
                    drain::DrainLimit(drain_limit, drain_bound),
                    drain::drain_unread,
                ))
                .layer(axum::middleware::from_fn(middleware::errors_in_their_protocol))
                .layer(TimeoutLayer::with_status_code(
                    StatusCode::REQUEST_TIMEOUT,
                    Duration::from_secs(config.request_timeout_secs),
                ))
                .layer(CatchPanicLayer::custom(on_panic))
                .layer(axum::Extension(extract::BodyLimit(limit)))
                .layer(DefaultBodyLimit::disable()),
        )
        .with_state(service)
}

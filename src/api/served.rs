//! Which model answers a request to `{id}` (a model id or an alias name), and the
//! headers that say so: shared by the /models and Open Inference Protocol handlers.

use super::problem::ApiError;
use crate::service::aliases::Served;
use crate::service::Service;
use axum::extract::rejection::PathRejection;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue};

/// The model that answers a request to `{id}`: the model of that id, or the one an
/// alias of that name routes this request to (seeded by its X-Request-Id).
pub async fn served(
    service: &Service,
    id: Result<Path<String>, PathRejection>,
    headers: &HeaderMap,
) -> Result<Served, ApiError> {
    let Path(raw) = id.map_err(|e| ApiError::BadQuery(format!("invalid path: {}", e.body_text())))?;
    Ok(service.resolve(&raw, request_id(headers)).await?)
}

/// The request's id (set by the middleware when the client gave none).
pub fn request_id(headers: &HeaderMap) -> &str {
    headers.get(super::REQUEST_ID).and_then(|v| v.to_str().ok()).unwrap_or("")
}

/// The header of an answer naming the model that computed it.
pub const SERVED_MODEL: &str = "x-mercer-model";
/// Through an alias: its name and the generation that routed the request.
pub const SERVED_ALIAS: &str = "x-mercer-alias";
pub const SERVED_GENERATION: &str = "x-mercer-alias-generation";

/// X-Mercer-Model, and through an alias X-Mercer-Alias and X-Mercer-Alias-Generation.
pub fn served_headers(s: &Served) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(SERVED_MODEL, HeaderValue::from_str(&s.model.to_string()).expect("a UUID is a valid header"));
    if let Some(a) = &s.alias {
        h.insert(SERVED_ALIAS, HeaderValue::from_str(&a.name).expect("an alias name is a valid header"));
        h.insert(SERVED_GENERATION, HeaderValue::from(a.generation));
    }
    h
}

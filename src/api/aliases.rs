//! /aliases handlers: unpack the request (its body, `If-Match` / `If-None-Match`, the
//! key that made it), make one service call, answer the alias with its generation as
//! the ETag.

use super::extract::JsonBody;
use super::keys::KeyName;
use super::problem::ApiError;
use crate::service::aliases::{Alias, Precondition};
use crate::service::Service;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{json, Value};
use std::sync::Arc;

fn name(p: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    let Path(raw) = p.map_err(|e| ApiError::BadQuery(format!("invalid path: {}", e.body_text())))?;
    Ok(raw)
}

/// `If-Match` / `If-None-Match` as a condition on the generation. An entity tag is
/// `"3"`, `W/"3"` or a bare `3`; one that names no generation matches none.
fn precondition(headers: &HeaderMap) -> Result<Precondition, ApiError> {
    let text = |h: header::HeaderName| -> Result<Option<String>, ApiError> {
        let joined: Vec<&str> = headers
            .get_all(h.clone())
            .iter()
            .map(|v| v.to_str().map_err(|_| ApiError::BadQuery(format!("{h}: not text"))))
            .collect::<Result<_, _>>()?;
        Ok((!joined.is_empty()).then(|| joined.join(",")))
    };
    if let Some(v) = text(header::IF_NONE_MATCH)? {
        if v.trim() == "*" {
            return Ok(Precondition::Absent);
        }
        return Err(ApiError::BadQuery("If-None-Match: an alias takes only `*` (create only)".into()));
    }
    let Some(v) = text(header::IF_MATCH)? else { return Ok(Precondition::None) };
    if v.trim() == "*" {
        return Ok(Precondition::Exists);
    }
    let generations = v
        .split(',')
        .filter_map(|tag| {
            let tag = tag.trim();
            let tag = tag.strip_prefix("W/").unwrap_or(tag);
            tag.trim_matches('"').parse::<u64>().ok()
        })
        .collect();
    Ok(Precondition::Generation(generations))
}

fn etag(a: &Alias) -> [(header::HeaderName, HeaderValue); 1] {
    [(header::ETAG, HeaderValue::from_str(&format!("\"{}\"", a.generation())).expect("a number is a valid header"))]
}

fn by(key: Option<Extension<KeyName>>) -> Option<String> {
    key.map(|Extension(KeyName(k))| k)
}

pub async fn list(State(service): State<Arc<Service>>) -> Result<Json<Value>, ApiError> {
    let aliases = service.list_aliases().await?;
    Ok(Json(json!({"aliases": aliases.iter().map(|a| a.to_json(false)).collect::<Vec<_>>()})))
}

pub async fn get(
    State(service): State<Arc<Service>>,
    p: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let alias = service.alias(&name(p)?).await?;
    Ok((etag(&alias), Json(alias.to_json(true))).into_response())
}

/// PUT: 201 when the name was free, 200 when it changed an alias.
pub async fn put(
    State(service): State<Arc<Service>>,
    p: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    key: Option<Extension<KeyName>>,
    JsonBody(body): JsonBody<Value>,
) -> Result<Response, ApiError> {
    let name = name(p)?;
    let pre = precondition(&headers)?;
    let (alias, created) = service.set_alias(&name, &body, &pre, by(key)).await?;
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    let location = HeaderValue::from_str(&format!("/aliases/{name}")).expect("an alias name is a valid header");
    Ok((status, etag(&alias), [(header::LOCATION, location)], Json(alias.to_json(true))).into_response())
}

pub async fn rollback(
    State(service): State<Arc<Service>>,
    p: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    key: Option<Extension<KeyName>>,
) -> Result<Response, ApiError> {
    let pre = precondition(&headers)?;
    let alias = service.rollback_alias(&name(p)?, &pre, by(key)).await?;
    Ok((etag(&alias), Json(alias.to_json(true))).into_response())
}

pub async fn delete(
    State(service): State<Arc<Service>>,
    p: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    key: Option<Extension<KeyName>>,
) -> Result<StatusCode, ApiError> {
    let pre = precondition(&headers)?;
    service.delete_alias(&name(p)?, &pre, by(key)).await?;
    Ok(StatusCode::NO_CONTENT)
}

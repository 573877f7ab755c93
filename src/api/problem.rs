//! Problem details (RFC 9457) and the one place where errors become HTTP statuses.

use super::keys::Scope;
use crate::registry::{Failure, FailureKind};
use crate::service::ServiceError;
use crate::spec::{ErrorKind, FieldError};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

pub const PROBLEM_CONTENT_TYPE: &str = "application/problem+json";

/// One invalid place of a request.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ProblemField {
    pub pointer: String,
    pub message: String,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Problem {
    #[serde(rename = "type")]
    pub type_: String,
    pub title: String,
    pub status: u16,
    pub detail: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<ProblemField>,
}

impl Problem {
    /// `slug` names the problem type (`/problems/<slug>`, listed in README.md).
    pub fn new(status: StatusCode, slug: &str, detail: impl Into<String>) -> Problem {
        Problem {
            type_: format!("/problems/{slug}"),
            title: status.canonical_reason().unwrap_or("Error").to_string(),
            status: status.as_u16(),
            detail: detail.into(),
            errors: Vec::new(),
        }
    }

    pub fn with_field(mut self, pointer: impl Into<String>, message: impl Into<String>) -> Problem {
        self.errors.push(ProblemField { pointer: pointer.into(), message: message.into() });
        self
    }

    fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    /// The problem a failed model carries in its resource (and a failed synchronous
    /// fit answers with).
    pub fn of_failure(f: &Failure) -> Problem {
        match &f.kind {
            FailureKind::Unprocessable => Problem::new(StatusCode::UNPROCESSABLE_ENTITY, "fit-failed", &f.detail),
            FailureKind::InvalidField { pointer } => {
                Problem::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid-input", &f.detail)
                    .with_field(pointer.clone(), f.detail.clone())
            }
            FailureKind::Shutdown => Problem::new(StatusCode::SERVICE_UNAVAILABLE, "draining", &f.detail),
            FailureKind::Storage { out_of_space: true } => {
                Problem::new(StatusCode::INSUFFICIENT_STORAGE, "storage-full", &f.detail)
            }
            FailureKind::Storage { out_of_space: false } => {
                Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "storage-failed", &f.detail)
            }
            FailureKind::StoreUnavailable => {
                Problem::new(StatusCode::SERVICE_UNAVAILABLE, "store-unavailable", &f.detail)
            }
            FailureKind::Internal => Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", &f.detail),
        }
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = self.status_code();
        let body = serde_json::to_vec(&self).expect("a problem always serialises");
        (status, [(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_CONTENT_TYPE))], body).into_response()
    }
}

/// Everything a request can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(transparent)]
    Service(#[from] ServiceError),
    /// The body is not JSON, or not of the documented shape.
    #[error("{message}")]
    MalformedBody { pointer: String, message: String },
    #[error("request body exceeds {limit} bytes")]
    BodyTooLarge { limit: usize },
    #[error("{0}")]
    BadQuery(String),
    #[error("missing or invalid bearer token")]
    Unauthorized,
    /// A known key whose scope falls short of the route's.
    #[error("this route needs a key of scope {needs}")]
    Forbidden { needs: Scope, has: Scope },
    #[error("no route for {0}")]
    NoRoute(String),
    #[error("method not allowed")]
    MethodNotAllowed,
}

impl From<FieldError> for ApiError {
    fn from(e: FieldError) -> Self {
        ApiError::Service(ServiceError::Invalid(e))
    }
}

impl ApiError {
    pub fn to_problem(&self) -> Problem {
        match self {
            ApiError::Service(e) => match e {
                ServiceError::Invalid(f) => {
                    let (status, slug) = match f.kind {
                        ErrorKind::Shape => (StatusCode::BAD_REQUEST, "malformed-request"),
                        ErrorKind::Invalid => (StatusCode::UNPROCESSABLE_ENTITY, "invalid-input"),
                    };
                    // The pointer is in `errors`; the detail does not repeat it.
                    Problem::new(status, slug, &f.message).with_field(f.pointer.clone(), f.message.clone())
                }
                ServiceError::TooLarge { detail } => Problem::new(StatusCode::PAYLOAD_TOO_LARGE, "too-large", detail),
                ServiceError::TooLargeAt { pointer, detail } => {
                    Problem::new(StatusCode::PAYLOAD_TOO_LARGE, "too-large", detail).with_field(pointer, detail)
                }
                ServiceError::AlreadyTold { .. } => Problem::new(StatusCode::CONFLICT, "conflict", e.to_string()),
                ServiceError::PreconditionFailed(detail) => {
                    Problem::new(StatusCode::PRECONDITION_FAILED, "precondition-failed", detail)
                }
                ServiceError::Conflict(detail) => Problem::new(StatusCode::CONFLICT, "conflict", detail),
                ServiceError::ModelInUse { .. } => Problem::new(StatusCode::CONFLICT, "model-in-use", e.to_string()),
                ServiceError::NotFound(_)
                | ServiceError::AliasNotFound(_)
                | ServiceError::DatasetNotFound(_)
                | ServiceError::StudyNotFound(_)
                | ServiceError::TrialNotFound { .. } => Problem::new(StatusCode::NOT_FOUND, "not-found", e.to_string()),
                ServiceError::NotReady { .. } => Problem::new(StatusCode::CONFLICT, "not-ready", e.to_string()),
                ServiceError::Contended { detail } => Problem::new(StatusCode::CONFLICT, "conflict", detail),
                ServiceError::QueueFull { retry_after } => Problem::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "queue-full",
                    format!("the fit queue is full; retry in {} s", retry_after.as_secs().max(1)),
                ),
                ServiceError::Draining => {
                    Problem::new(StatusCode::SERVICE_UNAVAILABLE, "draining", "the server is shutting down")
                }
                ServiceError::FitFailed(f) => Problem::of_failure(f),
                ServiceError::Storage(detail) => {
                    Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "storage-failed", detail)
                }
                ServiceError::DamagedModel { detail, .. } => {
                    Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "damaged-model", detail)
                }
                ServiceError::StoreUnavailable { detail, .. } => {
                    Problem::new(StatusCode::SERVICE_UNAVAILABLE, "store-unavailable", detail)
                }
            },
            ApiError::MalformedBody { pointer, message } => {
                Problem::new(StatusCode::BAD_REQUEST, "malformed-request", message.clone())
                    .with_field(pointer.clone(), message.clone())
            }
            ApiError::BodyTooLarge { limit } => Problem::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too-large",
                format!("request body exceeds the limit of {limit} bytes (MERCER_MAX_BODY_BYTES)"),
            ),
            ApiError::BadQuery(m) => Problem::new(StatusCode::BAD_REQUEST, "malformed-request", m.clone()),
            ApiError::Unauthorized => {
                Problem::new(StatusCode::UNAUTHORIZED, "unauthorized", "a valid bearer token is required")
            }
            ApiError::Forbidden { needs, has } => Problem::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                format!("this route needs a key of scope `{needs}` (or one above it); this key's scope is `{has}`"),
            ),
            ApiError::NoRoute(path) => {
                Problem::new(StatusCode::NOT_FOUND, "not-found", format!("no resource at {path}"))
            }
            ApiError::MethodNotAllowed => Problem::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method-not-allowed",
                "this method is not allowed on this resource",
            ),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = self.to_problem().into_response();
        let headers = response.headers_mut();
        match &self {
            ApiError::Service(ServiceError::QueueFull { retry_after }) => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(retry_after.as_secs().max(1)));
            }
            ApiError::Service(ServiceError::StoreUnavailable { retry_after, .. }) => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(retry_after.as_secs().max(1)));
            }
            ApiError::Service(ServiceError::FitFailed(Failure { kind: FailureKind::StoreUnavailable, .. })) => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(5u64));
            }
            ApiError::Service(ServiceError::Draining) => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(5u64));
            }
            ApiError::Unauthorized => {
                headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"mercer\""));
            }
            _ => {}
        }
        response
    }
}

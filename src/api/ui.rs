//! The web page at `/` and its files (`src/api/ui/`), compiled into the binary and
//! served with a strict Content-Security-Policy: scripts and styles from this origin
//! only, no inline code, no other origins, no framing. The page renders every name and
//! label as text; the policy is the second line of defence.

use crate::service::Service;
use axum::extract::{Path, State};
use axum::http::{header, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// (name, content type, contents): the only files served.
const FILES: [(&str, &str, &str); 5] = [
    ("index.html", "text/html; charset=utf-8", include_str!("ui/index.html")),
    ("app.js", "text/javascript; charset=utf-8", include_str!("ui/app.js")),
    ("api.js", "text/javascript; charset=utf-8", include_str!("ui/api.js")),
    ("plot.js", "text/javascript; charset=utf-8", include_str!("ui/plot.js")),
    ("style.css", "text/css; charset=utf-8", include_str!("ui/style.css")),
];

pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'";

pub async fn index(State(service): State<Arc<Service>>) -> Response {
    file_response(&service, "index.html").await
}

pub async fn file(State(service): State<Arc<Service>>, Path(name): Path<String>) -> Response {
    file_response(&service, &name).await
}

async fn file_response(service: &Service, name: &str) -> Response {
    let Some(&(name, content_type, embedded)) = FILES.iter().find(|f| f.0 == name) else {
        return super::problem::ApiError::NoRoute(format!("/ui/{name}")).into_response();
    };
    // MERCER_UI_DIR (development): the file as it is on disk now.
    let body = if service.config.ui_dir.is_empty() {
        embedded.to_string()
    } else {
        match tokio::fs::read_to_string(std::path::Path::new(&service.config.ui_dir).join(name)).await {
            Ok(text) => text,
            Err(_) => return super::problem::ApiError::NoRoute(format!("/ui/{name}")).into_response(),
        }
    };
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
        (header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY)),
        (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
        (header::REFERRER_POLICY, HeaderValue::from_static("no-referrer")),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        (HeaderName::from_static("x-frame-options"), HeaderValue::from_static("DENY")),
    ];
    (StatusCode::OK, headers, body).into_response()
}

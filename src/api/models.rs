//! /models handlers: unpack the request, make one service call, map the result.

use super::extract::JsonBody;
use super::keys::KeyName;
use super::problem::ApiError;
use super::served::{served, served_headers};
use super::types::{
    EmbeddingResponse, KindList, ModelList, ModelQuery, ModelResource, ObservationsBody, PosteriorBody, PosteriorQuery,
    PredictBody, PredictQuery, PredictResponse, RowsBody, RowsResponse, SamplesResponse, TrainBody, TrainQuery,
};
use crate::estimator::PredictOptions;
use crate::service::{QueryRows, RowExtras, SampleOptions, Service, TrainInput, TrainOutcome};
use axum::body::Bytes;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{FromRequest, Path, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use axum::Json;
use std::sync::Arc;
use uuid::Uuid;

pub async fn create(
    State(service): State<Arc<Service>>,
    query: Result<Query<TrainQuery>, QueryRejection>,
    request: Request,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::BadQuery(format!("invalid query: {}", e.body_text())))?;
    // Shed before reading the body when the pool is full or the server is draining.
    service.admission().await?;
    let JsonBody(body) = JsonBody::<TrainBody>::from_request(request, &service).await?;
    let input = TrainInput::try_from(body)?;
    let (status, entry) = match service.train(input, query.wait).await? {
        TrainOutcome::Ready(e) => (StatusCode::CREATED, e),
        TrainOutcome::Accepted(e) => (StatusCode::ACCEPTED, e),
    };
    let location = HeaderValue::from_str(&format!("/models/{}", entry.id)).expect("a UUID path is a valid header");
    Ok((status, [(header::LOCATION, location)], Json(ModelResource::of(&entry))).into_response())
}

pub async fn list(State(service): State<Arc<Service>>) -> Json<ModelList> {
    Json(ModelList { models: service.list().await.iter().map(|e| ModelResource::listed(e)).collect() })
}

/// The catalogue: every model kind with its task and what it can do.
pub async fn kinds() -> Json<KindList> {
    Json(KindList { kinds: crate::estimator::ModelKind::ALL.map(crate::estimator::ModelKind::row).to_vec() })
}

pub async fn get(
    State(service): State<Arc<Service>>,
    id: Result<Path<String>, PathRejection>,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let Query(pairs) = query.map_err(|e| ApiError::BadQuery(format!("invalid query: {}", e.body_text())))?;
    let query = ModelQuery::of(pairs);
    let served = served(&service, id, &headers).await?;
    let id = served.model;
    if !query.coefficients()? {
        let entry = service.lookup(id).await?;
        return Ok((served_headers(&served), Json(ModelResource::of(&entry))).into_response());
    }
    let (entry, coefficients) = service.with_coefficients(id).await?;
    let mut resource = ModelResource::of(&entry);
    resource.coefficients = coefficients;
    Ok((served_headers(&served), Json(resource)).into_response())
}

/// A ready model's training sample and kept points, for plots.
pub async fn sample(
    State(service): State<Arc<Service>>,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let served = served(&service, id, &headers).await?;
    Ok((served_headers(&served), Json(service.sample(served.model).await?)).into_response())
}

/// Deletes a model; one an alias routes to answers 409 unless `?force=true`.
pub async fn delete(
    State(service): State<Arc<Service>>,
    id: Result<Path<String>, PathRejection>,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
    key: Option<Extension<KeyName>>,
) -> Result<StatusCode, ApiError> {
    let Query(pairs) = query.map_err(|e| ApiError::BadQuery(format!("invalid query: {}", e.body_text())))?;
    let mut force = false;
    for (k, v) in pairs {
        match (k.as_str(), v.as_str()) {
            ("force", "true" | "1") => force = true,
            ("force", "false" | "0") => force = false,
            ("force", other) => {
                return Err(ApiError::BadQuery(format!("invalid query: force must be true or false, not {other:?}")))
            }
            _ => {}
        }
    }
    service.delete(model_id(id)?, force, key.map(|k| k.0 .0)).await?;
    Ok(StatusCode::NO_CONTENT)
}
/// The header of a prediction's answer that names the model version that computed it.
pub const MODEL_VERSION: &str = "x-mercer-model-version";

pub async fn predict(
    State(service): State<Arc<Service>>,
    id: Result<Path<String>, PathRejection>,
    request: Request,
) -> Result<Response, ApiError> {
    let served = served(&service, id, request.headers()).await?;
    let wants_csv = request
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().contains("text/csv"));
    let defaults = PredictOptions::default();
    let (rows, opts) = if super::datasets::is_csv(request.headers()) {
        // A CSV body carries the options in the query string.
        let q: PredictQuery = match request.uri().query() {
            None => PredictQuery::default(),
            Some(_) => {
                Query::<PredictQuery>::try_from_uri(request.uri())
                    .map_err(|e| ApiError::BadQuery(format!("invalid query: {}", e.body_text())))?
                    .0
            }
        };
        let bytes = csv_body(request, &service).await?;
        let opts = PredictOptions {
            variance: q.variance.unwrap_or(defaults.variance),
            covariance: false,
            include_noise: q.include_noise.unwrap_or(defaults.include_noise),
            probabilities: q.probabilities.unwrap_or(defaults.probabilities),
        };
        (QueryRows::Csv(bytes), opts)
    } else {
        let JsonBody(body) = JsonBody::<PredictBody>::from_request(request, &service).await?;
        let opts = PredictOptions {
            variance: body.variance.unwrap_or(defaults.variance),
            covariance: body.covariance.unwrap_or(defaults.covariance),
            include_noise: body.include_noise.unwrap_or(defaults.include_noise),
            probabilities: body.probabilities.unwrap_or(defaults.probabilities),
        };
        (QueryRows::Json(body.x), opts)
    };
    let (answered, targets) = service.predict(&served, rows, opts).await?;
    let version = [(MODEL_VERSION, HeaderValue::from(answered.version))];
    let answer = PredictResponse::new(answered.prediction, answered.fitted.predictor().classes());
    let served = served_headers(&served);
    if wants_csv {
        let csv = HeaderValue::from_static("text/csv; charset=utf-8");
        return Ok(([(header::CONTENT_TYPE, csv)], version, served, answer.to_csv(targets.as_deref())).into_response());
    }
    Ok((version, served, Json(answer)).into_response())
}

/// A CSV body's bytes, within the body limit.
async fn csv_body(request: Request, service: &Arc<Service>) -> Result<Bytes, ApiError> {
    let limit = request.extensions().get::<super::extract::BodyLimit>().map_or(usize::MAX, |l| l.0);
    Bytes::from_request(request, service).await.map_err(|r| {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::BodyTooLarge { limit }
        } else {
            ApiError::MalformedBody { pointer: String::new(), message: format!("cannot read the body: {r}") }
        }
    })
}

/// A kernel PCA's components of the rows (JSON `{"x"}` or a CSV body): 200
/// `{"embedding"}`.
pub async fn transform(
    State(service): State<Arc<Service>>,
    id: Result<Path<String>, PathRejection>,
    request: Request,
) -> Result<Response, ApiError> {
    let served = served(&service, id, request.headers()).await?;
    let rows = if super::datasets::is_csv(request.headers()) {
        QueryRows::Csv(csv_body(request, &service).await?)
    } else {
        QueryRows::Json(JsonBody::<RowsBody>::from_request(request, &service).await?.0.x)
    };
    let embedding = service.transform(served.model, rows).await?;
    Ok((served_headers(&served), Json(EmbeddingResponse::new(&embedding))).into_response())
}

/// Joint draws from a GP's predictive distribution at the rows (JSON `{"x", "n_samples",
/// "seed", "include_noise"}`, or a CSV body with those options in the query): 200
/// `{"samples"}`.
pub async fn posterior_samples(
    State(service): State<Arc<Service>>,
    id: Result<Path<String>, PathRejection>,
    request: Request,
) -> Result<Response, ApiError> {
    let served = served(&service, id, request.headers()).await?;
    let (rows, n_samples, seed, include_noise) = if super::datasets::is_csv(request.headers()) {
        let q: PosteriorQuery = match request.uri().query() {
            None => PosteriorQuery::default(),
            Some(_) => {
                Query::<PosteriorQuery>::try_from_uri(request.uri())
                    .map_err(|e| ApiError::BadQuery(format!("invalid query: {}", e.body_text())))?
                    .0
            }
        };
        (QueryRows::Csv(csv_body(request, &service).await?), q.n_samples, q.seed, q.include_noise)
    } else {
        let JsonBody(b) = JsonBody::<PosteriorBody>::from_request(request, &service).await?;
        (QueryRows::Json(b.x), b.n_samples, b.seed, b.include_noise)
    };
    let opts = SampleOptions {
        n_samples: n_samples.unwrap_or(1),
        seed: seed.unwrap_or(0),
        include_noise: include_noise.unwrap_or(false),
    };
    let samples = service.posterior_samples(served.model, rows, opts).await?;
    Ok((served_headers(&served), Json(SamplesResponse::new(&samples))).into_response())
}

/// Components back to rows (a kernel PCA fitted with `fit_inverse_transform`): 200
/// `{"x"}`.
pub async fn inverse_transform(
    State(service): State<Arc<Service>>,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<RowsBody>,
) -> Result<Response, ApiError> {
    let served = served(&service, id, &headers).await?;
    let rows = service.inverse_transform(served.model, body.x).await?;
    Ok((served_headers(&served), Json(RowsResponse::new(&rows))).into_response())
}

/// Appends rows to a ready exact GP or kernel ridge model: 200 with its next version.
pub async fn observations(
    State(service): State<Arc<Service>>,
    id: Result<Path<String>, PathRejection>,
    JsonBody(body): JsonBody<ObservationsBody>,
) -> Result<Json<ModelResource>, ApiError> {
    let per_row = RowExtras { noise: body.noise, sample_weight: body.sample_weight };
    let entry = service.append_observations(model_id(id)?, body.x, body.y, per_row).await?;
    Ok(Json(ModelResource::of(&entry)))
}

/// A path segment that is not a UUID names no model: 404, as for an unknown UUID.
fn model_id(id: Result<Path<String>, PathRejection>) -> Result<Uuid, ApiError> {
    let Path(raw) = id.map_err(|e| ApiError::BadQuery(format!("invalid path: {}", e.body_text())))?;
    Uuid::parse_str(&raw).map_err(|_| ApiError::NoRoute(format!("/models/{raw}")))
}

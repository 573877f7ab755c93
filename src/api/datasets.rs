//! /datasets handlers. An upload's body is pumped, chunk by chunk, into a blocking task
//! that parses it as it arrives; the body is never held whole, and the byte limit
//! (`MERCER_MAX_DATASET_BYTES`) is counted as it streams.

use super::problem::ApiError;
use super::types::{DatasetList, DatasetQuery, DatasetResource};
use crate::dataset::csv::CsvOptions;
use crate::service::datasets::UploadFormat;
use crate::service::{Service, ServiceError};
use crate::spec::FieldError;
use axum::body::{Bytes, HttpBody};
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use std::io::{self, Read};
use std::sync::Arc;
use tokio::sync::mpsc;
use uuid::Uuid;

/// Chunks in flight between the connection and the parser: enough to keep both busy,
/// few enough that an upload holds only a few hundred KB in memory.
const CHUNKS_IN_FLIGHT: usize = 16;

/// Whether a request declares a CSV body.
pub fn is_csv(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("text/csv"))
}

/// The blocking side of an upload: reads the chunks the handler sends.
struct ChannelReader {
    rx: mpsc::Receiver<io::Result<Bytes>>,
    current: Bytes,
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.current.is_empty() {
            match self.rx.blocking_recv() {
                None => return Ok(0),
                Some(chunk) => self.current = chunk?,
            }
        }
        let k = buf.len().min(self.current.len());
        buf[..k].copy_from_slice(&self.current[..k]);
        self.current = self.current.slice(k..);
        Ok(k)
    }
}

/// How the body's stream ended, as far as the handler saw it.
enum Pumped {
    Complete,
    OverLimit,
    Broken(String),
}

pub async fn create(
    State(service): State<Arc<Service>>,
    query: Result<Query<DatasetQuery>, QueryRejection>,
    request: Request,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::BadQuery(format!("invalid query: {}", e.body_text())))?;
    if service.is_draining() {
        return Err(ServiceError::Draining.into());
    }
    let limit = service.config.max_dataset_bytes;
    let too_large = || {
        ApiError::from(ServiceError::TooLarge {
            detail: format!("the dataset exceeds the limit of {limit} bytes (MERCER_MAX_DATASET_BYTES)"),
        })
    };
    let declared = request.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    let format = if is_csv(request.headers()) {
        UploadFormat::Csv(CsvOptions { target: query.target, name: query.name })
    } else if query.target.is_some() {
        return Err(FieldError::invalid(
            "/target",
            "a JSON dataset's target is its `y` (leave `y` out for none): `?target=` names a CSV column",
        )
        .into());
    } else {
        UploadFormat::Json { name: query.name }
    };
    let (tx, rx) = mpsc::channel(CHUNKS_IN_FLIGHT);
    let parser = {
        let service = service.clone();
        tokio::task::spawn_blocking(move || service.upload_dataset(format, ChannelReader { rx, current: Bytes::new() }))
    };
    let mut body = request.into_body();
    let mut received = 0u64;
    let pumped = loop {
        let frame = std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await;
        let chunk = match frame {
            None => break Pumped::Complete,
            Some(Err(e)) => {
                let message = format!("cannot read the body: {e}");
                let _ = tx.send(Err(io::Error::other(message.clone()))).await;
                break Pumped::Broken(message);
            }
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => data,
                Err(_) => continue, // trailers carry no data
            },
        };
        received += chunk.len() as u64;
        if received > limit {
            let _ = tx.send(Err(io::Error::other("the upload exceeds its limit"))).await;
            break Pumped::OverLimit;
        }
        // The parser stops reading at its first error; its answer is then the response.
        if tx.send(Ok(chunk)).await.is_err() {
            break Pumped::Complete;
        }
    };
    drop(tx);
    let parsed = parser.await.map_err(|_| ServiceError::Storage("the upload was interrupted".into()))?;
    let info = match pumped {
        Pumped::OverLimit => return Err(too_large()),
        Pumped::Broken(message) => return Err(ApiError::MalformedBody { pointer: String::new(), message }),
        Pumped::Complete => parsed?,
    };
    let location = HeaderValue::from_str(&format!("/datasets/{}", info.id)).expect("a UUID path is a valid header");
    Ok((StatusCode::CREATED, [(header::LOCATION, location)], Json(DatasetResource::of(&info))).into_response())
}

pub async fn list(State(service): State<Arc<Service>>) -> Json<DatasetList> {
    Json(DatasetList { datasets: service.list_datasets_now().await.iter().map(DatasetResource::of).collect() })
}

pub async fn get(
    State(service): State<Arc<Service>>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<DatasetResource>, ApiError> {
    Ok(Json(DatasetResource::of(&service.get_dataset(dataset_id(id)?).await?)))
}

pub async fn delete(
    State(service): State<Arc<Service>>,
    id: Result<Path<String>, PathRejection>,
) -> Result<StatusCode, ApiError> {
    service.delete_dataset(dataset_id(id)?).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A path segment that is not a UUID names no dataset: 404.
fn dataset_id(id: Result<Path<String>, PathRejection>) -> Result<Uuid, ApiError> {
    let Path(raw) = id.map_err(|e| ApiError::BadQuery(format!("invalid path: {}", e.body_text())))?;
    Uuid::parse_str(&raw).map_err(|_| ServiceError::DatasetNotFound(raw).into())
}

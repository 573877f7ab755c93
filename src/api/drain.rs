//! Every request ends in an answer the client can read, even when the answer comes before
//! the whole body was read (a 401 before a large upload, a 413 on its declared length, a
//! dataset's bad row on line 3 of 60 MB, a store found down, a timeout, a panic).
//!
//! A server that closes a connection while request bytes are still unread makes the
//! kernel reset it, and the reset destroys the answer in flight: the client sees a broken
//! pipe or "connection closed without response" instead of the 4xx/5xx. So the request
//! body is wrapped; whatever the handler leaves unread comes back here when the handler
//! drops it, and is read and discarded (within [`DRAIN_SECS`] and the body limits) before
//! the answer goes out, which then says `Connection: close`. A body read to its end, the
//! normal case, costs one flag.

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

/// The longest an answer waits for the rest of a body it does not need.
pub const DRAIN_SECS: u64 = 30;

/// How many unread bytes are read and discarded at most, and the counter of answers that
/// went out with their body not read to the end (`mercer_http_unanswered_total{why="drain_bound"}`).
#[derive(Clone)]
pub struct DrainLimit(pub u64, pub prometheus_client::metrics::counter::Counter);

/// The request body, handing what is left of it back through `slot` if dropped unread.
struct Returning {
    inner: Option<Body>,
    slot: Arc<Mutex<Option<Body>>>,
    ended: bool,
}

impl HttpBody for Returning {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let Some(inner) = self.inner.as_mut() else { return Poll::Ready(None) };
        let polled = Pin::new(inner).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            self.ended = true;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.inner.as_ref().is_none_or(HttpBody::is_end_stream)
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.as_ref().map_or_else(|| http_body::SizeHint::with_exact(0), HttpBody::size_hint)
    }
}

impl Drop for Returning {
    fn drop(&mut self) {
        if let Some(body) = self.inner.take() {
            if !self.ended && !body.is_end_stream() {
                *self.slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(body);
            }
        }
    }
}

/// The middleware: wraps the body, runs the handler, drains what it left unread.
pub async fn drain_unread(State(limit): State<DrainLimit>, req: Request, next: Next) -> Response {
    let slot = Arc::new(Mutex::new(None));
    let (parts, body) = req.into_parts();
    let body = Body::new(Returning { inner: Some(body), slot: slot.clone(), ended: false });
    let mut response = next.run(Request::from_parts(parts, body)).await;
    let left = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(body) = left {
        let drained = tokio::time::timeout(Duration::from_secs(DRAIN_SECS), discard(body, limit.0)).await;
        if !matches!(drained, Ok(true)) {
            // The connection closes with bytes unread, which the kernel answers with a
            // reset: the client may never read this answer.
            let why = match drained {
                Err(_) => format!("the rest of the body did not arrive within {DRAIN_SECS} s"),
                Ok(_) => format!("the rest of the body is over {} bytes, or broken", limit.0),
            };
            tracing::warn!(
                status = response.status().as_u16(),
                why,
                "an answer went out before its request body was read to the end"
            );
            limit.1.inc();
        }
        response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// Reads and drops frames until the body ends (true) or `limit` bytes went by (false).
async fn discard(mut body: Body, limit: u64) -> bool {
    let mut seen = 0u64;
    loop {
        match std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
            None => return true,
            Some(Err(_)) => return false,
            Some(Ok(frame)) => {
                seen += frame.data_ref().map_or(0, |d| d.len() as u64);
                if seen > limit {
                    return false;
                }
            }
        }
    }
}

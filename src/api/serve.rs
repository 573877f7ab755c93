//! The accept loop: every connection served by hyper (HTTP/1.1) over the router, with an
//! account of the requests on it. A connection that ends while a request on it has no
//! complete answer is logged (method, route, request id, and why: the client went away, a
//! malformed request, an I/O error, a shutdown) and counted in
//! `mercer_http_unanswered_total{why}`. A client then sees "connection closed without
//! response", and this is where the server says so too.
//!
//! A connection that received bytes and wrote none, without any request reaching the
//! router (a request head that never completed, a read that failed, hyper giving up on
//! it), is logged too, with how much was read and its first line, and counted as
//! `why="before_request"`: from the client's side it is the same closed connection.
//!
//! axum's own `serve` would do the rest of this, but it logs a connection's end only at
//! trace level and cannot tell a connection that ended between requests from one that
//! ended in the middle of one.

use crate::metrics::WhyLabels;
use crate::service::Service;
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tower::ServiceExt;

/// Serves `app` on `listener` until `shutdown` resolves, then stops accepting, lets each
/// connection finish the request it is on (hyper's graceful shutdown), and returns once
/// every connection has ended.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    service: Arc<Service>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    // Each connection task holds a receiver: `closed()` resolves once all have ended.
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut shutdown = pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    accept_failed(e).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        tokio::spawn(connection(stream, app.clone(), service.clone(), stop_rx.clone()));
    }
    drop(listener);
    drop(stop_rx);
    let _ = stop_tx.send(true);
    stop_tx.closed().await;
    Ok(())
}

/// An accept error: one connection's (it is gone; the next accept goes on) or the
/// process's (out of descriptors: wait a little, as a busy loop would not help).
async fn accept_failed(e: std::io::Error) {
    use std::io::ErrorKind::*;
    if matches!(e.kind(), ConnectionAborted | ConnectionReset | ConnectionRefused | Interrupted) {
        return;
    }
    tracing::warn!(error = %e, "cannot accept a connection; accepting again in 100 ms");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// One connection, to its end.
async fn connection(stream: TcpStream, app: Router, service: Arc<Service>, mut stop: watch::Receiver<bool>) {
    // Answers are small and latency matters more than packet count.
    let _ = stream.set_nodelay(true);
    let counted = Counted::new(stream);
    let traffic = counted.traffic.clone();
    let book = Arc::new(Book::default());
    let handler = {
        let book = book.clone();
        hyper::service::service_fn(move |req: Request<Incoming>| {
            let ticket = book.open(&req);
            let call = app.clone().oneshot(req.map(Body::new));
            async move {
                let response = call.await.unwrap_or_else(|e: Infallible| match e {});
                ticket.writing(response.headers().get("x-request-id").and_then(|v| v.to_str().ok()));
                Ok::<_, Infallible>(response.map(|body| Body::new(Tracked { inner: body, ticket })))
            }
        })
    };
    let conn = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(counted), handler);
    let mut conn = pin!(conn);
    let mut stopping = false;
    let ended = loop {
        tokio::select! {
            ended = conn.as_mut() => break ended,
            _ = stop.wait_for(|s| *s), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    };
    book.settle(&service, ended.as_ref().err(), stopping);
    traffic.settle(&service, &book, ended.as_ref().err(), stopping);
}

/// The bytes a connection read and wrote, and the start of what it read.
#[derive(Default)]
struct Traffic {
    read: std::sync::atomic::AtomicU64,
    written: std::sync::atomic::AtomicU64,
    /// The first bytes read (up to FIRST_BYTES), to say what a connection that never
    /// made a request was sent.
    first: Mutex<Vec<u8>>,
}

/// Bytes kept of what a connection read first.
const FIRST_BYTES: usize = 256;

impl Traffic {
    /// Logs and counts a connection that read bytes, wrote none, and had no request
    /// reach the router (those the book has already accounted for).
    fn settle(&self, service: &Service, book: &Book, error: Option<&hyper::Error>, stopping: bool) {
        let (read, written) = (self.read.load(Ordering::Acquire), self.written.load(Ordering::Acquire));
        if read == 0 || written > 0 || book.next.load(Ordering::Acquire) > 0 {
            return;
        }
        let first = self.first.lock().unwrap_or_else(|p| p.into_inner());
        tracing::warn!(
            bytes_read = read,
            first_line = first_line(&first),
            ended = why(error, stopping),
            error = error.map(|e| format!("{e:#}")).unwrap_or_default(),
            "a connection closed without a complete answer: bytes were read and no request reached the router"
        );
        service.metrics.http_unanswered.get_or_create(&WhyLabels { why: "before_request".into() }).inc();
    }
}

/// The first line of what a connection read (a request line: method, path, version;
/// never a header, which may carry a key), printable ASCII only, at most 120 characters.
fn first_line(bytes: &[u8]) -> String {
    let line = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
    line.iter()
        .take(120)
        .map(|b| if (0x20..0x7f).contains(b) { *b as char } else { '.' })
        .collect::<String>()
        .trim_end_matches('.')
        .to_string()
}

/// A connection's stream, counting what passes through it.
struct Counted {
    inner: TcpStream,
    traffic: Arc<Traffic>,
}

impl Counted {
    fn new(inner: TcpStream) -> Counted {
        Counted { inner, traffic: Arc::default() }
    }
}

impl tokio::io::AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let got = &buf.filled()[before..];
        if !got.is_empty() {
            let t = &self.traffic;
            if t.read.fetch_add(got.len() as u64, Ordering::AcqRel) < FIRST_BYTES as u64 {
                let mut first = t.first.lock().unwrap_or_else(|p| p.into_inner());
                let room = FIRST_BYTES.saturating_sub(first.len());
                first.extend_from_slice(&got[..got.len().min(room)]);
            }
        }
        polled
    }
}

impl tokio::io::AsyncWrite for Counted {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &polled {
            self.traffic.written.fetch_add(*n as u64, Ordering::AcqRel);
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = &polled {
            self.traffic.written.fetch_add(*n as u64, Ordering::AcqRel);
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Where a request was when its connection ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Stage {
    /// The handler had not answered.
    Handling,
    /// The answer's head or body was being written.
    Writing,
}

/// One request on a connection.
struct Entry {
    method: String,
    path: String,
    request_id: String,
    stage: Stage,
}

/// The requests of one connection not yet answered to the end.
#[derive(Default)]
struct Book {
    open: Mutex<Vec<(u64, Entry)>>,
    next: std::sync::atomic::AtomicU64,
}

impl Book {
    fn open(self: &Arc<Self>, req: &Request<Incoming>) -> Ticket {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        let request_id =
            req.headers().get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
        let entry = Entry {
            method: req.method().to_string(),
            path: req.uri().path().chars().take(200).collect(),
            request_id,
            stage: Stage::Handling,
        };
        self.open.lock().unwrap_or_else(|p| p.into_inner()).push((key, entry));
        Ticket { book: self.clone(), key, done: AtomicBool::new(false) }
    }

    /// Logs and counts every request the connection ended without answering.
    fn settle(&self, service: &Service, error: Option<&hyper::Error>, stopping: bool) {
        let open = std::mem::take(&mut *self.open.lock().unwrap_or_else(|p| p.into_inner()));
        // An answer whose body hyper dropped unread on a connection that then ended
        // cleanly was written: a HEAD's, a 204's and a 304's body is never sent.
        let unanswered = open.into_iter().filter(|(_, e)| e.stage == Stage::Handling || error.is_some());
        for (_, entry) in unanswered {
            let why = why(error, stopping);
            let at = match entry.stage {
                Stage::Handling => "before the handler answered",
                Stage::Writing => "while the answer was written",
            };
            tracing::warn!(
                method = entry.method,
                path = entry.path,
                request_id = entry.request_id,
                why,
                at,
                error = error.map(|e| format!("{e:#}")).unwrap_or_default(),
                "a connection closed without a complete answer"
            );
            service.metrics.http_unanswered.get_or_create(&WhyLabels { why: why.into() }).inc();
        }
        if let Some(e) = error {
            tracing::debug!(error = %e, "a connection ended with an error between requests");
        }
    }
}

/// The label for why a connection ended with a request unanswered. Without an error the
/// connection ended cleanly: the server's graceful shutdown, else the client closed it
/// (hyper ends a connection whose client has gone, dropping the request's handler).
fn why(error: Option<&hyper::Error>, stopping: bool) -> &'static str {
    let Some(e) = error else { return if stopping { "shutdown" } else { "client_closed" } };
    if e.is_incomplete_message() || e.is_canceled() || e.is_closed() {
        "client_closed"
    } else if e.is_timeout() {
        "timeout"
    } else if e.is_parse() || e.is_parse_status() {
        "malformed"
    } else if e.is_body_write_aborted() || e.is_user() {
        "body_failed"
    } else if std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>()) {
        "io"
    } else {
        "other"
    }
}

/// A request's place in its connection's book; marks it done, or leaves it open when
/// dropped before its answer's end.
struct Ticket {
    book: Arc<Book>,
    key: u64,
    done: AtomicBool,
}

impl Ticket {
    /// The handler answered; its request id (set by the router) is known now.
    fn writing(&self, request_id: Option<&str>) {
        let mut open = self.book.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, e)) = open.iter_mut().find(|(k, _)| *k == self.key) {
            e.stage = Stage::Writing;
            if let Some(id) = request_id {
                e.request_id = id.to_string();
            }
        }
    }

    fn finish(&self) {
        if !self.done.swap(true, Ordering::AcqRel) {
            self.book.open.lock().unwrap_or_else(|p| p.into_inner()).retain(|(k, _)| *k != self.key);
        }
    }
}

/// An answer's body that marks its request done once its end has been reached.
struct Tracked {
    inner: Body,
    ticket: Ticket,
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            self.ticket.finish();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        let end = self.inner.is_end_stream();
        if end {
            self.ticket.finish();
        }
        end
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

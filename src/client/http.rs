//! The HTTP side of the client: one `Api` per invocation, bearer token attached, every
//! non-2xx answer turned into the server's problem (title, detail, pointers) and every
//! transport failure into one readable line.

use futures_util::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use reqwest::{Client, RequestBuilder, Response};
use serde_json::Value;
use std::fmt;
use std::path::Path;
use std::time::Duration;

/// Why a command failed.
#[derive(Debug)]
pub enum ClientError {
    /// The server answered with a problem.
    Problem { status: u16, title: String, detail: String, pointers: Vec<(String, String)> },
    /// The server could not be reached (or stopped answering).
    Unreachable { url: String, reason: String },
    /// Anything else: a file that cannot be read, an answer that is not JSON.
    Other(String),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Problem { status, title, detail, pointers } => {
                write!(f, "{title} ({status}): {detail}")?;
                for (pointer, message) in pointers {
                    write!(f, "\n  at {pointer}: {message}")?;
                }
                Ok(())
            }
            ClientError::Unreachable { url, reason } => write!(f, "cannot reach {url}: {reason}"),
            ClientError::Other(message) => f.write_str(message),
        }
    }
}

pub struct Api {
    base: String,
    token: Option<String>,
    http: Client,
}

impl Api {
    pub fn new(base: &str, token: Option<String>) -> Result<Api, ClientError> {
        let http = Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| ClientError::Other(format!("cannot start the HTTP client: {e}")))?;
        Ok(Api { base: base.trim_end_matches('/').to_string(), token: token.filter(|t| !t.is_empty()), http })
    }

    fn request(&self, method: reqwest::Method, path: &str) -> RequestBuilder {
        let r = self.http.request(method, format!("{}{path}", self.base));
        match &self.token {
            // The token goes in a header only: never in a URL, never printed.
            Some(t) => r.header(AUTHORIZATION, format!("Bearer {t}")),
            None => r,
        }
    }

    async fn send(&self, r: RequestBuilder) -> Result<Response, ClientError> {
        let response = r.send().await.map_err(|e| self.unreachable(e))?;
        if response.status().is_success() {
            return Ok(response);
        }
        Err(problem(response).await)
    }

    fn unreachable(&self, e: reqwest::Error) -> ClientError {
        let mut reason = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            reason = s.to_string();
            source = s.source();
        }
        ClientError::Unreachable { url: self.base.clone(), reason }
    }

    pub async fn get_json(&self, path: &str) -> Result<Value, ClientError> {
        json(self.send(self.request(reqwest::Method::GET, path)).await?).await
    }

    pub async fn post_json(&self, path: &str, body: &Value) -> Result<Value, ClientError> {
        let r =
            self.request(reqwest::Method::POST, path).header(CONTENT_TYPE, "application/json").body(body.to_string());
        json(self.send(r).await?).await
    }

    pub async fn delete(&self, path: &str) -> Result<(), ClientError> {
        self.send(self.request(reqwest::Method::DELETE, path)).await.map(drop)
    }

    /// A write conditioned on a generation (`If-Match: "GEN"` when given): the JSON
    /// answer, or Null for an empty one (204).
    pub async fn conditional(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        if_match: Option<u64>,
    ) -> Result<Value, ClientError> {
        let mut r = self.request(method, path);
        if let Some(body) = body {
            r = r.header(CONTENT_TYPE, "application/json").body(body.to_string());
        }
        if let Some(g) = if_match {
            r = r.header(reqwest::header::IF_MATCH, format!("\"{g}\""));
        }
        let response = self.send(r).await?;
        if response.status() == reqwest::StatusCode::NO_CONTENT {
            return Ok(Value::Null);
        }
        json(response).await
    }

    /// Streams a CSV file to `path` (text/csv), with a byte progress bar.
    pub async fn upload_csv(&self, path: &str, file: &Path) -> Result<Value, ClientError> {
        let cannot = |e: std::io::Error| ClientError::Other(format!("cannot read {}: {e}", file.display()));
        let handle = tokio::fs::File::open(file).await.map_err(cannot)?;
        let len = handle.metadata().await.map_err(cannot)?.len();
        let bar = ProgressBar::new(len).with_style(
            ProgressStyle::with_template("uploading {bytes}/{total_bytes} [{bar:30}] {bytes_per_sec}")
                .expect("a valid template")
                .progress_chars("=> "),
        );
        let counted = bar.clone();
        let stream = tokio_util_stream(handle).map(move |chunk| {
            if let Ok(c) = &chunk {
                counted.inc(c.len() as u64);
            }
            chunk
        });
        let r = self
            .request(reqwest::Method::POST, path)
            .header(CONTENT_TYPE, "text/csv")
            .header(reqwest::header::CONTENT_LENGTH, len)
            .body(reqwest::Body::wrap_stream(stream));
        let result = self.send(r).await;
        bar.finish_and_clear();
        json(result?).await
    }

    /// POSTs a CSV body and returns the CSV answer.
    /// POSTs a CSV body and reads a JSON answer.
    pub async fn post_csv_json(&self, path: &str, body: Vec<u8>) -> Result<Value, ClientError> {
        let r = self.request(reqwest::Method::POST, path).header(CONTENT_TYPE, "text/csv").body(body);
        json(self.send(r).await?).await
    }

    pub async fn predict_csv(&self, path: &str, body: Vec<u8>) -> Result<Vec<u8>, ClientError> {
        let r = self
            .request(reqwest::Method::POST, path)
            .header(CONTENT_TYPE, "text/csv")
            .header(ACCEPT, "text/csv")
            .body(body);
        let response = self.send(r).await?;
        response.bytes().await.map(|b| b.to_vec()).map_err(|e| self.unreachable(e))
    }
}

/// A file as a stream of chunks of at most 256 KiB.
fn tokio_util_stream(
    file: tokio::fs::File,
) -> impl futures_util::Stream<Item = Result<bytes::Bytes, std::io::Error>> + Send + 'static {
    futures_util::stream::unfold(file, |mut file| async move {
        use tokio::io::AsyncReadExt;
        let mut buf = vec![0u8; 256 << 10];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(bytes::Bytes::from(buf)), file))
            }
            Err(e) => Some((Err(e), file)),
        }
    })
}

async fn json(response: Response) -> Result<Value, ClientError> {
    response.json().await.map_err(|e| ClientError::Other(format!("the server's answer is not JSON: {e}")))
}

async fn problem(response: Response) -> ClientError {
    let status = response.status();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    let text = |k: &str, default: &str| body[k].as_str().unwrap_or(default).to_string();
    let pointers = body["errors"]
        .as_array()
        .map(|errors| {
            errors
                .iter()
                .map(|e| {
                    (e["pointer"].as_str().unwrap_or("").to_string(), e["message"].as_str().unwrap_or("").to_string())
                })
                .collect()
        })
        .unwrap_or_default();
    ClientError::Problem {
        status: status.as_u16(),
        title: text("title", status.canonical_reason().unwrap_or("error")),
        detail: text("detail", ""),
        pointers,
    }
}

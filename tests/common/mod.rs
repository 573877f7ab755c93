//! Starts mercer in-process on an ephemeral port and talks to it with reqwest.
#![allow(dead_code)]

pub mod switchable;

use mercer::config::Config;
use mercer::pool::Job;
use mercer::server::{self, RunningServer};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::Arc;

/// Runs every future as its own task, all at once, and returns their outputs in the
/// order given (concurrent clients of one server).
pub async fn at_once<T, F>(futures: impl IntoIterator<Item = F>) -> Vec<T>
where
    F: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let tasks: Vec<_> = futures.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        out.push(t.await.expect("a concurrent client panicked"));
    }
    out
}

pub struct TestServer {
    pub url: String,
    pub http: reqwest::Client,
    pub server: Option<RunningServer>,
}

impl TestServer {
    pub async fn start(config: Config) -> TestServer {
        let server = server::start(config).await.expect("server starts");
        let url = format!("http://{}", server.addr);
        TestServer { url, http: reqwest::Client::new(), server: Some(server) }
    }

    pub async fn default() -> TestServer {
        TestServer::start(Config::for_tests()).await
    }

    pub fn service(&self) -> &Arc<mercer::service::Service> {
        &self.server.as_ref().expect("running").service
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.url, path)
    }

    pub async fn post(&self, path: &str, body: &Value) -> reqwest::Response {
        self.http.post(self.url(path)).body(body.to_string()).send().await.expect("request sent")
    }

    pub async fn post_raw(&self, path: &str, body: impl Into<reqwest::Body>, content_type: &str) -> reqwest::Response {
        self.http
            .post(self.url(path))
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
            .expect("request sent")
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.http.get(self.url(path)).send().await.expect("request sent")
    }

    pub async fn delete(&self, path: &str) -> reqwest::Response {
        self.http.delete(self.url(path)).send().await.expect("request sent")
    }

    /// Trains synchronously and returns the model resource (asserting 201).
    pub async fn train(&self, body: &Value) -> Value {
        let r = self.post("/models", body).await;
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        assert_eq!(status, 201, "training failed: {text}");
        serde_json::from_str(&text).unwrap()
    }

    /// Occupies one fit worker until the returned guard is dropped; returns once the
    /// worker has started the job (no timing assumptions).
    pub fn block_worker(&self) -> WorkerBlock {
        let (started_tx, started_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        self.service()
            .pool
            .try_submit(Job::new(uuid::Uuid::new_v4(), move |_| {
                started_tx.send(()).unwrap();
                let _ = release_rx.recv();
            }))
            .expect("pool accepts the blocking job");
        started_rx.recv().expect("blocking job started");
        WorkerBlock { _release: release_tx }
    }

    /// Fills one queue slot with a job that waits until the guard is dropped.
    pub fn fill_queue_slot(&self) -> WorkerBlock {
        let (release_tx, release_rx) = mpsc::channel::<()>();
        self.service()
            .pool
            .try_submit(Job::new(uuid::Uuid::new_v4(), move |_| {
                let _ = release_rx.recv();
            }))
            .expect("pool accepts the queued job");
        WorkerBlock { _release: release_tx }
    }
}

/// Dropping it releases the blocked job.
pub struct WorkerBlock {
    _release: mpsc::Sender<()>,
}

/// A small 1-D regression set: y = sin(x) on a grid.
pub fn sine(n: usize) -> (Vec<Vec<f64>>, Vec<f64>) {
    let x: Vec<Vec<f64>> = (0..n).map(|i| vec![i as f64 * 6.0 / n as f64]).collect();
    let y = x.iter().map(|r| r[0].sin()).collect();
    (x, y)
}

pub async fn problem(r: reqwest::Response) -> (u16, Value) {
    let status = r.status().as_u16();
    let ct = r.headers().get("content-type").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    assert!(ct.starts_with("application/problem+json"), "status {status}: content-type {ct:?}");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["status"].as_u64(), Some(status as u64), "problem status matches: {body}");
    for k in ["type", "title", "detail"] {
        assert!(body[k].is_string(), "problem has {k}: {body}");
    }
    (status, body)
}

/// Every number in a JSON value (arrays flattened in order).
pub fn numbers(v: &Value) -> Vec<f64> {
    match v {
        Value::Array(items) => items.iter().flat_map(numbers).collect(),
        Value::Number(n) => vec![n.as_f64().unwrap()],
        other => panic!("not numbers: {other}"),
    }
}

/// Every number of `got` within `tol` of `want`'s, relative to `want`'s largest magnitude.
pub fn close(got: &Value, want: &Value, tol: f64, what: &str) {
    let (g, w) = (numbers(got), numbers(want));
    assert_eq!(g.len(), w.len(), "{what}: {got} vs {want}");
    let scale = w.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-300);
    for (a, b) in g.iter().zip(&w) {
        assert!((a - b).abs() <= tol * scale, "{what}: {a} vs {b} (tolerance {tol} x {scale})");
    }
}

/// The pointers of a problem's `errors`.
pub fn pointers(p: &Value) -> Vec<String> {
    p["errors"].as_array().map_or(vec![], |a| a.iter().map(|e| e["pointer"].as_str().unwrap().to_string()).collect())
}

/// Runs the mercer binary (data directory `dir`, more settings in `envs`) on an ephemeral
/// port and returns it once it logs `until`,
/// with the address it listens on (read from its JSON log, not guessed) and a channel of
/// its later log lines.
pub fn spawn_binary(
    dir: &Path,
    envs: &[(&str, &str)],
    until: &str,
) -> (Child, String, std::sync::mpsc::Receiver<Value>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mercer"))
        .env("MERCER_BIND", "127.0.0.1:0")
        .env("MERCER_DATA_DIR", dir)
        .env("MERCER_LOG", "info")
        .envs(envs.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the mercer binary starts");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    // The two lines come in either order: loading runs beside the listener.
    let (mut addr, mut reached) = (None, false);
    for line in lines.by_ref() {
        let line = line.unwrap();
        let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        if v["message"] == "mercer listening" {
            addr = v["addr"].as_str().map(String::from);
        }
        reached |= v["message"] == until;
        if reached && addr.is_some() {
            break;
        }
    }
    // Keep draining stderr so the child never blocks on a full pipe.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                let _ = tx.send(v);
            }
        }
    });
    (child, format!("http://{}", addr.expect("the binary logs its address")), rx)
}

/// Polls `probe` until it returns true or `within` passes.
pub async fn eventually(within: std::time::Duration, mut probe: impl AsyncFnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + within;
    loop {
        if probe().await {
            return true;
        }
        if std::time::Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Posts `body` with ?wait=false and returns its id and the model resource once it is
/// training in `phase` past its first iteration.
pub async fn start_and_watch(s: &TestServer, body: &Value, phase: &str) -> (String, Value) {
    let r = s.http.post(s.url("/models?wait=false")).body(body.to_string()).send().await.unwrap();
    assert_eq!(r.status(), 202);
    let id = r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_string();
    let seen = tokio::time::timeout(std::time::Duration::from_secs(120), async {
        loop {
            let m: Value = s.get(&format!("/models/{id}")).await.json().await.unwrap();
            if m["status"] == "training"
                && m["progress"]["phase"] == phase
                && m["progress"]["iteration"].as_u64() > Some(1)
            {
                return m;
            }
            assert!(matches!(m["status"].as_str(), Some("queued" | "training")), "{m}");
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the phase starts");
    (id, seen)
}

/// DELETE of a training model: 204, the worker free again soon after, then 404.
pub async fn delete_and_see_it_stop(s: &TestServer, id: &str) {
    assert_eq!(s.delete(&format!("/models/{id}")).await.status(), 204);
    let pool = s.service().pool.clone();
    tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while pool.running() > 0 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the deleted fit stops");
    assert_eq!(s.get(&format!("/models/{id}")).await.status(), 404);
}

/// (METHOD, path) pairs of an OpenAPI document's `paths`, read from openapi.yaml's
/// layout: paths at two spaces of indentation, their operations at four.
pub fn spec_operations(spec: &str) -> std::collections::BTreeSet<(String, String)> {
    spec_operation_lines(spec).into_iter().map(|(operation, _)| operation).collect()
}

/// Every line inside an operation of `paths` (its method's line included), with the
/// operation's (METHOD, path).
pub fn spec_operation_lines(spec: &str) -> Vec<((String, String), &str)> {
    const METHODS: [&str; 7] = ["get", "put", "post", "delete", "options", "head", "patch"];
    let mut out = Vec::new();
    let (mut in_paths, mut path, mut operation) = (false, None::<String>, None::<(String, String)>);
    for line in spec.lines() {
        if !line.starts_with(' ') && !line.is_empty() {
            in_paths = line == "paths:";
            continue;
        }
        if !in_paths {
            continue;
        }
        if let Some(p) = line.strip_prefix("  /").and_then(|l| l.strip_suffix(':')) {
            path = Some(format!("/{p}"));
            operation = None;
        } else if let Some(m) = line.strip_prefix("    ").and_then(|l| l.strip_suffix(':')) {
            operation =
                METHODS.contains(&m).then(|| (m.to_uppercase(), path.clone().expect("an operation under a path")));
        }
        if let Some(op) = &operation {
            out.push((op.clone(), line));
        }
    }
    out
}

//! The durable store through the service: restarts keep models bit-identically, damaged
//! files are quarantined, an unwritable data dir gives a clean error, DELETE removes the
//! file, and a model acknowledged with 201 survives kill -9 of the server (spawned binary).

mod common;

use common::{problem, sine, spawn_binary, TestServer};
use mercer::config::Config;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mercer-{tag}-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn config_with(dir: &Path) -> Config {
    Config { data_dir: dir.display().to_string(), ..Config::for_tests() }
}

async fn started(dir: &Path) -> TestServer {
    let s = TestServer::start(config_with(dir)).await;
    s.service().wait_ready().await;
    s
}

async fn stop(mut s: TestServer) {
    assert!(s.server.take().unwrap().shutdown().await, "clean shutdown");
}

fn model_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("model"))
        .collect();
    v.sort();
    v
}

fn bodies() -> Vec<Value> {
    let (x, y) = sine(25);
    vec![
        json!({"model": "gaussian_process", "kernel": {"type": "product", "kernels": [{"type": "constant"}, {"type": "rbf"}]},
               "params": {"noise": 0.1, "optimize": true, "restarts": 1, "normalize_y": true}, "x": x, "y": y,
               "name": "searched", "metadata": {"k": [1, 2]}}),
        json!({"model": "kernel_ridge", "kernel": {"type": "laplacian", "length_scale": 0.7}, "params": {"lambda": 0.3}, "x": x, "y": y}),
        json!({"model": "gaussian_process", "kernel": {"type": "rbf", "length_scale": [0.9]}, "params": {"noise": 0.01}, "x": x, "y": y}),
        json!({"model": "svm", "params": {"probability": true, "c": 3.0}, "x": x,
               "y": y.iter().map(|v| if *v > 0.0 { "up" } else { "down" }).collect::<Vec<_>>()}),
        json!({"model": "nadaraya_watson", "kernel": {"type": "matern", "nu": 2.5}, "x": x, "y": y}),
        json!({"model": "gp_classifier", "params": {"optimize": true}, "x": x,
               "y": y.iter().map(|v| (v * 1.5).round()).collect::<Vec<_>>()}),
        json!({"model": "kernel_logistic", "params": {"lambda": 0.3}, "x": x,
               "y": y.iter().map(|v| if *v > 0.0 { "up" } else { "down" }).collect::<Vec<_>>()}),
        json!({"model": "kernel_perceptron", "x": x, "y": y.iter().map(|v| (v * 1.5).round()).collect::<Vec<_>>()}),
        json!({"model": "rbf_network", "params": {"centers": 7, "lambda": 0.001, "seed": 9}, "x": x, "y": y}),
        json!({"model": "svm", "kernel": {"type": "polynomial", "degree": 2}, "x": x,
               "y": y.iter().map(|v| (v * 1.5).round()).collect::<Vec<_>>()}),
    ]
}

#[tokio::test]
async fn restart_keeps_every_model_and_predictions_are_bit_identical() {
    let dir = temp_dir("restart");
    let s = started(&dir).await;
    let query = json!({"x": [[0.1], [2.2], [5.9]], "covariance": true});
    let mut before = Vec::new();
    for body in bodies() {
        let m = s.train(&body).await;
        let id = m["id"].as_str().unwrap().to_string();
        let p: Value = s.post(&format!("/models/{id}/predict"), &query).await.json().await.unwrap();
        before.push((id, m, p));
    }
    assert_eq!(model_files(&dir).len(), bodies().len(), "one file per ready model");
    stop(s).await;

    let s = started(&dir).await;
    let listed: Value = s.get("/models").await.json().await.unwrap();
    assert_eq!(listed["models"].as_array().unwrap().len(), bodies().len());
    for (id, resource, prediction) in before {
        let again: Value = s.get(&format!("/models/{id}")).await.json().await.unwrap();
        assert_eq!(again, resource, "the resource survives the restart unchanged");
        let p: Value = s.post(&format!("/models/{id}/predict"), &query).await.json().await.unwrap();
        // serde_json writes the shortest representation that round-trips, so equal text
        // is equal bits.
        assert_eq!(p.to_string(), prediction.to_string(), "{id}: predictions bit-identical after restart");
    }
    stop(s).await;
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn corrupt_and_truncated_files_are_quarantined_and_the_rest_load() {
    let dir = temp_dir("quarantine");
    let s = started(&dir).await;
    let mut ids = Vec::new();
    for body in bodies() {
        ids.push(s.train(&body).await["id"].as_str().unwrap().to_string());
    }
    stop(s).await;
    let file = |id: &str| dir.join(format!("{id}.model"));
    let mut bytes = std::fs::read(file(&ids[0])).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x5a;
    std::fs::write(file(&ids[0]), bytes).unwrap();
    let bytes = std::fs::read(file(&ids[1])).unwrap();
    std::fs::write(file(&ids[1]), &bytes[..bytes.len() - 17]).unwrap();
    std::fs::write(dir.join(format!(".{}.tmp", uuid::Uuid::new_v4())), b"half a write").unwrap();

    let s = started(&dir).await;
    let listed: Value = s.get("/models").await.json().await.unwrap();
    let mut listed: Vec<&str> =
        listed["models"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    listed.sort();
    let mut intact: Vec<&str> = ids[2..].iter().map(String::as_str).collect();
    intact.sort();
    assert_eq!(listed, intact, "only the intact models load");
    let mut quarantined: Vec<String> = std::fs::read_dir(dir.join("quarantine"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    quarantined.sort();
    let mut want = vec![format!("{}.model", ids[0]), format!("{}.model", ids[1])];
    want.sort();
    assert_eq!(quarantined, want);
    let mut intact_files: Vec<PathBuf> = ids[2..].iter().map(|id| file(id)).collect();
    intact_files.sort();
    assert_eq!(model_files(&dir), intact_files);
    assert!(std::fs::read_dir(&dir).unwrap().all(|e| !e.unwrap().file_name().to_string_lossy().ends_with(".tmp")));
    stop(s).await;
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn an_unwritable_data_dir_fails_the_fit_cleanly() {
    let base = temp_dir("unwritable");
    // A path below a regular file cannot be a directory, even for root.
    let blocker = base.join("file");
    std::fs::write(&blocker, b"not a directory").unwrap();
    let s = started(&blocker.join("data")).await;
    let (status, p) = problem(s.post("/models", &bodies()[1]).await).await;
    assert_eq!(status, 500, "{p}");
    assert_eq!(p["type"], "/problems/storage-failed");
    assert!(p["detail"].as_str().unwrap().contains("could not be stored"), "{p}");
    let listed: Value = s.get("/models").await.json().await.unwrap();
    assert_eq!(listed, json!({"models": []}), "the registry holds no model that is not stored");
    stop(s).await;
    std::fs::remove_dir_all(base).unwrap();
}

/// A listing of models refreshes from the store, and the refresh is timed in
/// `mercer_store_sync_duration_seconds` (with the refresh interval, how late another
/// replica's writes can show here).
#[tokio::test]
async fn refreshes_from_the_store_are_timed() {
    let dir = temp_dir("sync-metric");
    let s = started(&dir).await;
    let count = async || -> u64 {
        let metrics = s.get("/metrics").await.text().await.unwrap();
        let line = metrics.lines().find(|l| l.starts_with("mercer_store_sync_duration_seconds_count "));
        line.unwrap_or_else(|| panic!("no refresh count in {metrics}")).split(' ').nth(1).unwrap().parse().unwrap()
    };
    let before = count().await;
    assert_eq!(s.get("/models").await.status(), 200);
    assert!(count().await > before, "GET /models refreshed from the store");
    stop(s).await;
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn delete_removes_the_file() {
    let dir = temp_dir("delete");
    let s = started(&dir).await;
    let id = s.train(&bodies()[1]).await["id"].as_str().unwrap().to_string();
    assert_eq!(model_files(&dir).len(), 1);
    assert_eq!(s.delete(&format!("/models/{id}")).await.status(), 204);
    assert!(model_files(&dir).is_empty());
    stop(s).await;
    let s = started(&dir).await;
    let (status, _) = problem(s.get(&format!("/models/{id}")).await).await;
    assert_eq!(status, 404, "a deleted model does not come back");
    stop(s).await;
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn a_model_acknowledged_with_201_survives_kill_9() {
    let dir = temp_dir("kill9");
    let (mut child, url, _) = spawn_binary(&dir, &[], "stored models loaded");
    let http = reqwest::Client::new();
    let r = http.post(format!("{url}/models")).body(bodies()[2].to_string()).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let id = r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_string();
    child.kill().unwrap(); // SIGKILL, right after the 201
    child.wait().unwrap();

    let (mut child, url, _) = spawn_binary(&dir, &[], "stored models loaded");
    let m: Value = http.get(format!("{url}/models/{id}")).send().await.unwrap().json().await.unwrap();
    assert_eq!(m["status"], "ready", "{m}");
    let r =
        http.post(format!("{url}/models/{id}/predict")).body(json!({"x": [[1.0]]}).to_string()).send().await.unwrap();
    assert_eq!(r.status(), 200);
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::remove_dir_all(dir).unwrap();
}

/// One JSON log line per request (request id, route, status, latency) and per fit
/// (model, n, d, duration, outcome), on stderr.
#[tokio::test]
async fn requests_and_fits_log_one_json_line_each() {
    let dir = temp_dir("logs");
    let (mut child, url, logs) = spawn_binary(&dir, &[], "stored models loaded");
    let http = reqwest::Client::new();
    let r = http
        .post(format!("{url}/models"))
        .header("x-request-id", "req-42")
        .body(bodies()[1].to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let (mut fit, mut request) = (None, None);
    // Lines arrive in order; the request line follows the fit it waited for.
    for v in logs.iter() {
        if v["message"] == "fit finished" {
            fit = Some(v);
        } else if v["message"] == "request" && v["span"]["request_id"] == "req-42" {
            request = Some(v);
            break;
        }
    }
    let fit = fit.expect("a fit line");
    assert_eq!(
        (fit["model"].as_str(), fit["n"].as_u64(), fit["d"].as_u64(), fit["outcome"].as_str()),
        (Some("kernel_ridge"), Some(25), Some(1), Some("ready"))
    );
    assert!(fit["duration_ms"].as_f64().unwrap() >= 0.0);
    let request = request.expect("a request line");
    assert_eq!(
        (request["method"].as_str(), request["route"].as_str(), request["status"].as_u64()),
        (Some("POST"), Some("/models"), Some(201))
    );
    assert!(request["latency_ms"].as_f64().unwrap() >= 0.0);
    assert!(request["level"].is_string() && request["timestamp"].is_string());
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::remove_dir_all(dir).unwrap();
}

/// A delete marker left by a process killed before it removed it (older than the marker
/// window, no model behind it) is removed by the next refresh; a fresh marker stays. A
/// model still stored behind a marker (a delete killed between its marker and its object,
/// or a write that landed after the delete) is deleted: not served, and its object
/// removed by the refresh.
#[tokio::test]
async fn stale_delete_markers_are_removed_by_the_refresh() {
    let dir = temp_dir("markers");
    let s = started(&dir).await;
    let stored = s.train(&bodies()[1]).await["id"].as_str().unwrap().to_string();
    stop(s).await;
    let markers = dir.join("deleted");
    std::fs::create_dir_all(&markers).unwrap();
    let (stale, fresh) = (uuid::Uuid::new_v4().to_string(), uuid::Uuid::new_v4().to_string());
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    for (id, written) in [(&stale, Some(hour_ago)), (&fresh, None), (&stored, Some(hour_ago))] {
        let file = std::fs::File::create(markers.join(id)).unwrap();
        if let Some(t) = written {
            file.set_modified(t).unwrap();
        }
    }
    let s = started(&dir).await;
    s.service().sync_store().await;
    assert!(!markers.join(&stale).exists(), "the stale marker is removed");
    assert!(markers.join(&fresh).exists(), "a marker within the window stays");
    assert_eq!(s.get(&format!("/models/{stored}")).await.status(), 404, "the model behind a marker is deleted");
    assert!(model_files(&dir).is_empty(), "the refresh removed its object: {:?}", model_files(&dir));
    stop(s).await;
    std::fs::remove_dir_all(dir).unwrap();
}

//! The HTTP contract end to end: every endpoint's happy path and every error status of
//! ../shared/API.md's table, against a server started in-process.

mod common;

use common::{pointers, problem, sine, TestServer};
use mercer::config::Config;
use serde_json::{json, Value};

fn gp_body() -> Value {
    let (x, y) = sine(12);
    json!({
        "model": "gaussian_process",
        "kernel": {"type": "rbf", "length_scale": 1.0},
        "params": {"noise": 0.01},
        "x": x, "y": y,
        "name": "sine", "metadata": {"owner": "tests", "tags": [1, 2]}
    })
}

#[tokio::test]
async fn health_ready_and_openapi_answer() {
    let s = TestServer::default().await;
    let r = s.get("/healthz").await;
    assert_eq!(r.status(), 200);
    assert!(r.headers().get("x-request-id").is_some(), "a request id is generated");
    assert_eq!(r.json::<Value>().await.unwrap(), json!({"status": "ok"}));

    let r = s.http.get(s.url("/healthz")).header("x-request-id", "abc-123").send().await.unwrap();
    assert_eq!(r.headers()["x-request-id"], "abc-123", "a client's request id is echoed");

    assert_eq!(s.get("/readyz").await.status(), 200);

    let r = s.get("/openapi.yaml").await;
    assert_eq!(r.status(), 200);
    let spec = r.text().await.unwrap();
    assert_eq!(spec, std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.yaml")).unwrap());
}

#[tokio::test]
async fn train_get_list_predict_delete() {
    let s = TestServer::default().await;
    let r = s.post("/models", &gp_body()).await;
    assert_eq!(r.status(), 201);
    let location = r.headers()["location"].to_str().unwrap().to_string();
    let m: Value = r.json().await.unwrap();
    let id = m["id"].as_str().unwrap();
    assert_eq!(location, format!("/models/{id}"));
    assert_eq!(m["status"], "ready");
    assert_eq!(m["model"], "gaussian_process");
    assert_eq!(m["task"], "regression");
    assert_eq!(m["name"], "sine");
    assert_eq!(m["metadata"], json!({"owner": "tests", "tags": [1, 2]}));
    assert_eq!(m["kernel"], json!({"type": "rbf", "length_scale": 1.0}));
    assert_eq!(m["params"]["noise"], 0.01);
    assert_eq!(
        (m["n_train"].as_u64(), m["n_features"].as_u64(), m["n_support"].as_u64()),
        (Some(12), Some(1), Some(12))
    );
    assert!(m["classes"].is_null());
    assert!(m["training"]["log_marginal_likelihood"].as_f64().unwrap().is_finite());
    assert_eq!(m["training"]["jitter"], 0.0);
    assert!(m["training"]["duration_ms"].as_f64().unwrap() >= 0.0);
    // x (12 x 1), alpha (12), y and z = L^-1 y (12 each, for online updates) and the
    // 12 x 12 factor, as f64.
    assert_eq!(m["memory_bytes"].as_u64(), Some((12 + 12 + 12 + 12 + 144) * 8));
    assert_eq!(m["version"].as_u64(), Some(1));
    assert!(humantime::parse_rfc3339(m["created_at"].as_str().unwrap()).is_ok());

    let got: Value = s.get(&location).await.json().await.unwrap();
    assert_eq!(got, m, "GET returns the resource that 201 returned");
    let list: Value = s.get("/models").await.json().await.unwrap();
    assert_eq!(list["models"].as_array().unwrap(), &vec![m.clone()]);

    // At a training point with small noise the GP reproduces y and is confident.
    let r = s.post(&format!("{location}/predict"), &json!({"x": [[0.5], [3.0]]})).await;
    assert_eq!(r.status(), 200);
    let p: Value = r.json().await.unwrap();
    let preds = p["predictions"].as_array().unwrap();
    assert!((preds[0].as_f64().unwrap() - 0.5f64.sin()).abs() < 0.05, "{p}");
    let var = p["variance"].as_array().unwrap();
    let std = p["std"].as_array().unwrap();
    for (v, sd) in var.iter().zip(std) {
        let (v, sd) = (v.as_f64().unwrap(), sd.as_f64().unwrap());
        assert!(v >= 0.0 && (sd * sd - v).abs() < 1e-15);
    }
    assert!(p.get("covariance").is_none(), "covariance only when asked");

    let p: Value = s
        .post(&format!("{location}/predict"), &json!({"x": [[0.5], [3.0]], "covariance": true, "variance": false}))
        .await
        .json()
        .await
        .unwrap();
    assert!(p.get("variance").is_none() && p.get("std").is_none(), "variance: false leaves them out: {p}");
    let cov = p["covariance"].as_array().unwrap();
    assert_eq!(cov.len(), 2);
    assert_eq!(cov[0][1], cov[1][0]);
    assert!((cov[0][0].as_f64().unwrap() - var[0].as_f64().unwrap()).abs() < 1e-12);

    let r = s.delete(&location).await;
    assert_eq!(r.status(), 204);
    let (status, body) = problem(s.get(&location).await).await;
    assert_eq!(status, 404, "{body}");
    let (status, _) = problem(s.post(&format!("{location}/predict"), &json!({"x": [[1.0]]})).await).await;
    assert_eq!(status, 404);
    let (status, _) = problem(s.delete(&location).await).await;
    assert_eq!(status, 404);
    let list: Value = s.get("/models").await.json().await.unwrap();
    assert_eq!(list, json!({"models": []}));
}

#[tokio::test]
async fn kernel_ridge_trains_and_predicts_without_variance() {
    let s = TestServer::default().await;
    let (x, y) = sine(20);
    let m = s.train(&json!({"model": "kernel_ridge", "kernel": {"type": "laplacian"}, "params": {"lambda": 0.1}, "x": x, "y": y})).await;
    assert_eq!(
        m["params"],
        json!({"lambda": 0.1, "seed": 0, "approximation": "exact", "inducing_points": null, "inducing_selection": null, "loo": false}),
        "auto resolves to exact for 20 rows"
    );
    assert_eq!(m["training"]["approximation"], "exact");
    assert_eq!(m["kernel"], json!({"type": "laplacian", "length_scale": 1.0}));
    assert!(m["training"].get("log_marginal_likelihood").is_none());
    let p: Value = s
        .post(&format!("/models/{}/predict", m["id"].as_str().unwrap()), &json!({"x": [[1.0]]}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(p["predictions"].as_array().unwrap().len(), 1);
    assert!(p.get("variance").is_none(), "kernel ridge has no variance: {p}");
}

#[tokio::test]
async fn defaults_apply_when_kernel_and_params_are_omitted() {
    let s = TestServer::default().await;
    let (x, y) = sine(5);
    let m = s.train(&json!({"model": "gaussian_process", "x": x, "y": y})).await;
    assert_eq!(m["kernel"], json!({"type": "rbf", "length_scale": 1.0}));
    assert_eq!(
        m["params"],
        json!({"noise": 1e-10, "normalize_y": false, "optimize": false, "restarts": 0, "seed": 0,
               "approximation": "exact", "inducing_points": null, "inducing_selection": null, "loo": false})
    );
}

#[tokio::test]
async fn body_is_json_whatever_the_content_type() {
    let s = TestServer::default().await;
    let body = gp_body().to_string();
    let r = s.post_raw("/models", body.clone(), "application/x-www-form-urlencoded").await;
    assert_eq!(r.status(), 201);
    let r = s.http.post(s.url("/models")).body(body).send().await.unwrap();
    assert_eq!(r.status(), 201, "no content type at all");
}

#[tokio::test]
async fn wait_false_answers_202_and_the_client_can_follow_the_model() {
    let s = TestServer::default().await;
    let r = s.post("/models?wait=false", &gp_body()).await;
    assert_eq!(r.status(), 202);
    let location = r.headers()["location"].to_str().unwrap().to_string();
    let m: Value = r.json().await.unwrap();
    assert!(["queued", "training", "ready"].contains(&m["status"].as_str().unwrap()), "{m}");
    assert_eq!(location, format!("/models/{}", m["id"].as_str().unwrap()));
    let id = uuid::Uuid::parse_str(m["id"].as_str().unwrap()).unwrap();
    let entry = s.service().replica.registry.get(id).unwrap();
    assert_eq!(entry.settled().await, mercer::registry::Status::Ready);
    let got: Value = s.get(&location).await.json().await.unwrap();
    assert_eq!(got["status"], "ready");
    assert!(got["training"]["log_marginal_likelihood"].is_number());

    let (status, body) = problem(s.post("/models?wait=perhaps", &gp_body()).await).await;
    assert_eq!(status, 400, "{body}");
}

#[tokio::test]
async fn queued_model_is_409_at_predict_and_delete_discards_its_fit() {
    let mut config = Config::for_tests();
    config.fit_workers = 1;
    let s = TestServer::start(config).await;
    let block = s.block_worker();
    let r = s.post("/models?wait=false", &gp_body()).await;
    assert_eq!(r.status(), 202);
    let m: Value = r.json().await.unwrap();
    assert_eq!(m["status"], "queued");
    let location = format!("/models/{}", m["id"].as_str().unwrap());

    let (status, body) = problem(s.post(&format!("{location}/predict"), &json!({"x": [[1.0]]})).await).await;
    assert_eq!(status, 409, "{body}");
    assert!(body["detail"].as_str().unwrap().contains("queued"));

    assert_eq!(s.delete(&location).await.status(), 204);
    assert_eq!(s.service().pool.queued(), 0, "the queued fit was withdrawn");
    drop(block);
    let (status, _) = problem(s.get(&location).await).await;
    assert_eq!(status, 404);
    let metrics = s.get("/metrics").await.text().await.unwrap();
    assert!(metrics.contains(r#"mercer_fits_total{model="gaussian_process",outcome="cancelled"} 1"#), "{metrics}");
}

#[tokio::test]
async fn full_queue_is_503_with_retry_after_and_health_still_answers() {
    let mut config = Config::for_tests();
    config.fit_workers = 1;
    config.fit_queue = 1;
    let s = TestServer::start(config).await;
    let _running = s.block_worker();
    let _queued = s.fill_queue_slot();

    let r = s.post("/models", &gp_body()).await;
    let retry = r.headers().get("retry-after").expect("Retry-After on 503").to_str().unwrap().to_string();
    let secs: u64 = retry.parse().expect("Retry-After is whole seconds");
    assert!(secs >= 1);
    let (status, body) = problem(r).await;
    assert_eq!(status, 503);
    assert_eq!(body["type"], "/problems/queue-full");
    assert!(s.service().replica.registry.list().is_empty(), "a refused fit leaves no model behind");

    // Every worker is busy and the queue is full: liveness and reads still answer.
    let r = s.http.get(s.url("/healthz")).timeout(std::time::Duration::from_secs(5)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(s.get("/models").await.status(), 200);
    let metrics = s.get("/metrics").await.text().await.unwrap();
    assert!(metrics.contains("mercer_fit_queue_depth 1"), "{metrics}");
    assert!(metrics.contains("mercer_fits_running 1"), "{metrics}");
}

#[tokio::test]
async fn healthz_answers_while_every_worker_is_busy() {
    let mut config = Config::for_tests();
    config.fit_workers = 2;
    let s = TestServer::start(config).await;
    let _a = s.block_worker();
    let _b = s.block_worker();
    assert_eq!(s.service().pool.running(), 2);
    for _ in 0..20 {
        let r = s.http.get(s.url("/healthz")).timeout(std::time::Duration::from_secs(5)).send().await.unwrap();
        assert_eq!(r.status(), 200);
    }
}

#[tokio::test]
async fn draining_refuses_fits_and_turns_readiness_off() {
    let s = TestServer::default().await;
    s.service().begin_drain();
    let r = s.post("/models", &gp_body()).await;
    assert!(r.headers().get("retry-after").is_some());
    let (status, body) = problem(r).await;
    assert_eq!(status, 503, "{body}");
    let (status, _) = problem(s.get("/readyz").await).await;
    assert_eq!(status, 503);
    assert_eq!(s.get("/healthz").await.status(), 200);
}

/// Each malformed body gives 400 with a pointer to the offending place.
#[tokio::test]
async fn malformed_bodies_are_400_with_pointers() {
    let s = TestServer::default().await;
    let cases: Vec<(&str, &str)> = vec![
        ("not json", ""),
        (r#"{"model": "gaussian_process", "x": [[0], [1, "a"]], "y": [1, 2]}"#, "/x/1/1"),
        (r#"{"model": "gaussian_process", "x": [[0], [true]], "y": [1, 2]}"#, "/x/1/0"),
        (r#"{"model": "gaussian_process", "x": [[0], 5], "y": [1, 2]}"#, "/x/1"),
        (r#"{"model": "gaussian_process", "x": [[0], [1e400]], "y": [1, 2]}"#, "/x/1/0"),
        (r#"{"model": "gaussian_process", "x": [[0], [1]], "y": [1, 2], "colour": "red"}"#, "/colour"),
        (r#"{"model": "gaussian_process", "y": [1, 2]}"#, "/x"),
        (r#"{"model": "gaussian_process", "x": [[0], [1]], "y": [1, "b"]}"#, "/y/1"),
        (r#"{"model": "gaussian_process", "x": [[0], [1]], "y": [1, 2], "params": {"noize": 1}}"#, "/params/noize"),
        (r#"{"model": "gaussian_process", "x": [[0], [1]], "y": [1, 2], "params": {"noise": "low"}}"#, "/params/noise"),
        (
            r#"{"model": "gaussian_process", "x": [[0], [1]], "y": [1, 2], "kernel": {"type": "rbf", "sigma": 1}}"#,
            "/kernel/sigma",
        ),
        (
            r#"{"model": "gaussian_process", "x": [[0], [1]], "y": [1, 2], "kernel": {"length_scale": 1}}"#,
            "/kernel/type",
        ),
        (r#"{"model": 7, "x": [[0]], "y": [1]}"#, "/model"),
    ];
    for (body, pointer) in cases {
        let (status, p) = problem(s.post_raw("/models", body.to_string(), "application/json").await).await;
        assert_eq!(status, 400, "{body} -> {p}");
        assert_eq!(pointers(&p), vec![pointer.to_string()], "{body} -> {p}");
    }
}

/// Each well-formed but invalid request gives 422 naming the field.
#[tokio::test]
async fn invalid_requests_are_422_with_pointers() {
    let s = TestServer::default().await;
    let cases = vec![
        (json!({"model": "gaussian_process", "x": [[0], [1, 2]], "y": [1, 2]}), "/x/1"),
        (json!({"model": "gaussian_process", "x": [], "y": []}), "/x"),
        // All rows empty: as token lists too, with nothing to tell the kind by.
        (json!({"model": "gaussian_process", "x": [[]], "y": [1]}), "/x"),
        (json!({"model": "gaussian_process", "x": [[], [1]], "y": [1, 2]}), "/x/0"),
        // Rows of two kinds: the first that differs from row 0.
        (json!({"model": "gaussian_process", "x": [[0], ["a"]], "y": [1, 2]}), "/x/1"),
        (json!({"model": "gaussian_process", "x": ["a", "b", [0]], "y": [1, 2, 3]}), "/x/2"),
        (json!({"model": "gaussian_process", "x": [[0], [1]], "y": [1]}), "/y"),
        (json!({"model": "deep_net", "x": [[0]], "y": [1]}), "/model"),
        (json!({"model": "gaussian_process", "x": [[0]], "y": [1], "kernel": {"type": "spline"}}), "/kernel/type"),
        (
            json!({"model": "gaussian_process", "x": [[0]], "y": [1], "kernel": {"type": "rbf", "length_scale": 0}}),
            "/kernel/length_scale",
        ),
        (
            json!({"model": "gaussian_process", "x": [[0, 1]], "y": [1], "kernel": {"type": "rbf", "length_scale": [1, 2, 3]}}),
            "/kernel/length_scale",
        ),
        (
            json!({"model": "gaussian_process", "x": [[0]], "y": [1], "kernel": {"type": "polynomial", "degree": 0}}),
            "/kernel/degree",
        ),
        (json!({"model": "gaussian_process", "x": [[0]], "y": [1], "params": {"noise": -1}}), "/params/noise"),
        (json!({"model": "kernel_ridge", "x": [[0]], "y": [1], "params": {"lambda": -0.5}}), "/params/lambda"),
    ];
    for (body, pointer) in cases {
        let (status, p) = problem(s.post("/models", &body).await).await;
        assert_eq!(status, 422, "{body} -> {p}");
        assert_eq!(pointers(&p), vec![pointer.to_string()], "{body} -> {p}");
    }
    assert!(s.service().replica.registry.list().is_empty(), "no invalid request leaves a model");
}

#[tokio::test]
async fn a_matrix_that_cannot_be_factorised_is_422() {
    let s = TestServer::default().await;
    // (x.z - 5): a rank-one matrix minus 5 everywhere is indefinite; no jitter saves it.
    let body = json!({
        "model": "gaussian_process",
        "kernel": {"type": "polynomial", "degree": 1, "gamma": 1.0, "coef0": -5.0},
        "params": {"noise": 0.0},
        "x": [[0.0], [1.0], [2.0], [3.0]], "y": [1, 2, 3, 4]
    });
    let (status, p) = problem(s.post("/models", &body).await).await;
    assert_eq!(status, 422, "{p}");
    assert!(p["detail"].as_str().unwrap().contains("positive definite"), "{p}");
    assert!(s.service().replica.registry.list().is_empty(), "a failed synchronous fit leaves no model");

    // The same fit with wait=false ends as a failed model that carries its problem.
    let r = s.post("/models?wait=false", &body).await;
    assert_eq!(r.status(), 202);
    let id = r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_string();
    let entry = s.service().replica.registry.get(uuid::Uuid::parse_str(&id).unwrap()).unwrap();
    assert_eq!(entry.settled().await, mercer::registry::Status::Failed);
    let m: Value = s.get(&format!("/models/{id}")).await.json().await.unwrap();
    assert_eq!(m["status"], "failed");
    assert_eq!(m["error"]["status"], 422, "{m}");
    let (status, _) = problem(s.post(&format!("/models/{id}/predict"), &json!({"x": [[1.0]]})).await).await;
    assert_eq!(status, 409);
}

#[tokio::test]
async fn jitter_rescues_a_singular_kernel_matrix_and_is_reported() {
    let s = TestServer::default().await;
    // A repeated point with zero noise makes K singular; the smallest jitter fixes it.
    let body =
        json!({"model": "gaussian_process", "params": {"noise": 0.0}, "x": [[0.0], [0.0], [1.0]], "y": [1, 1, 2]});
    let m = s.train(&body).await;
    let jitter = m["training"]["jitter"].as_f64().unwrap();
    assert!(jitter > 0.0 && jitter <= 1e-4, "jitter {jitter}");
}

#[tokio::test]
async fn predict_errors() {
    let s = TestServer::default().await;
    let m = s.train(&gp_body()).await;
    let path = format!("/models/{}/predict", m["id"].as_str().unwrap());
    let cases = vec![
        (json!({"x": []}), 422, "/x"),
        (json!({"x": [[1.0, 2.0]]}), 422, "/x/0"),
        (json!({"x": [[1.0], [1.0, 2.0]]}), 422, "/x/1"),
        (json!({"x": [[1, "a"]]}), 400, "/x/0/1"),
        (json!({"x": [["a"]]}), 422, "/x"),
        (json!({"x": ["abc"]}), 422, "/x"),
        (json!({"x": [[1.0]], "variance": "yes"}), 400, "/variance"),
        (json!({"x": [[1.0]], "colour": 1}), 400, "/colour"),
        (json!({"variance": true}), 400, "/x"),
    ];
    for (body, want, pointer) in cases {
        let (status, p) = problem(s.post(&path, &body).await).await;
        assert_eq!(status, want, "{body} -> {p}");
        assert_eq!(pointers(&p), vec![pointer.to_string()], "{body} -> {p}");
    }
    let (status, _) = problem(s.post("/models/not-a-uuid/predict", &json!({"x": [[1.0]]})).await).await;
    assert_eq!(status, 404);
    let (status, _) =
        problem(s.post(&format!("/models/{}/predict", uuid::Uuid::new_v4()), &json!({"x": [[1.0]]})).await).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn limits_give_413() {
    let mut config = Config::for_tests();
    config.max_body_bytes = 2_000;
    config.max_train_rows = 5;
    let s = TestServer::start(config).await;
    let (x, y) = sine(6);
    let (status, p) = problem(s.post("/models", &json!({"model": "gaussian_process", "x": x, "y": y})).await).await;
    assert_eq!(status, 413, "{p}");
    assert!(p["detail"].as_str().unwrap().contains("MERCER_MAX_TRAIN_ROWS"));

    let (x, y) = sine(200);
    let big = json!({"model": "gaussian_process", "x": x, "y": y}).to_string();
    assert!(big.len() > 2_000);
    let (status, p) = problem(s.post_raw("/models", big.clone(), "application/json").await).await;
    assert_eq!(status, 413, "{p}");
    // Without a Content-Length the limit applies while the body streams in.
    let stream = futures_stream(big.into_bytes());
    let (status, p) = problem(s.post_raw("/models", stream, "application/json").await).await;
    assert_eq!(status, 413, "{p}");
}

#[tokio::test]
async fn a_fit_over_the_memory_limit_is_413_before_it_starts() {
    let mut config = Config::for_tests();
    config.max_fit_bytes = 100 * 100 * 8;
    let s = TestServer::start(config).await;
    let (x, y) = sine(101);
    let (status, p) = problem(s.post("/models", &json!({"model": "kernel_ridge", "x": x, "y": y})).await).await;
    assert_eq!(status, 413, "{p}");
    let detail = p["detail"].as_str().unwrap();
    assert!(detail.contains("MERCER_MAX_FIT_BYTES") && detail.contains("80000"), "{detail}");
    let (x, y) = sine(50);
    s.train(&json!({"model": "kernel_ridge", "x": x, "y": y})).await;
}

fn futures_stream(bytes: Vec<u8>) -> reqwest::Body {
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = bytes.chunks(512).map(|c| Ok(c.to_vec())).collect();
    reqwest::Body::wrap_stream(futures_util::stream::iter(chunks))
}

#[tokio::test]
async fn unknown_routes_and_methods_are_problems() {
    let s = TestServer::default().await;
    let (status, _) = problem(s.get("/nowhere").await).await;
    assert_eq!(status, 404);
    let r = s.http.put(s.url("/models")).send().await.unwrap();
    assert!(r.headers().get("allow").is_some());
    let (status, _) = problem(r).await;
    assert_eq!(status, 405);
}

#[tokio::test]
async fn api_keys_guard_models_but_not_operations() {
    let mut config = Config::for_tests();
    config.api_keys = "k1,k2".into();
    let s = TestServer::start(config).await;
    let r = s.get("/models").await;
    assert_eq!(r.headers()["www-authenticate"], "Bearer realm=\"mercer\"");
    let (status, _) = problem(r).await;
    assert_eq!(status, 401);
    let r = s.http.get(s.url("/models")).bearer_auth("wrong").send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = s.http.get(s.url("/models")).bearer_auth("k2").send().await.unwrap();
    assert_eq!(r.status(), 200);
    let r = s.http.post(s.url("/models")).bearer_auth("k1").body(gp_body().to_string()).send().await.unwrap();
    assert_eq!(r.status(), 201);
    for open in ["/healthz", "/readyz", "/metrics", "/openapi.yaml"] {
        assert_eq!(s.get(open).await.status(), 200, "{open} needs no token");
    }
}

#[tokio::test]
async fn metrics_expose_the_contract_families() {
    let s = TestServer::default().await;
    let m = s.train(&gp_body()).await;
    s.post(&format!("/models/{}/predict", m["id"].as_str().unwrap()), &json!({"x": [[1.0], [2.0]]})).await;
    let r = s.get("/metrics").await;
    assert_eq!(
        r.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8",
        "the classic format by default"
    );
    let text = r.text().await.unwrap();
    for family in [
        "mercer_http_requests_total{",
        "mercer_http_request_duration_seconds_bucket{",
        "mercer_fit_duration_seconds_bucket{",
        "mercer_fits_total{model=\"gaussian_process\",outcome=\"ready\"} 1",
        "mercer_predict_rows_total{model=\"gaussian_process\"} 2",
        "mercer_fit_queue_depth 0",
        "mercer_fits_running 0",
        "mercer_models{status=\"ready\"} 1",
        "mercer_registry_bytes ",
    ] {
        assert!(text.contains(family), "missing {family} in\n{text}");
    }
    assert!(text.contains(r#"mercer_http_requests_total{method="POST",route="/models",status="201"} 1"#), "{text}");
}

#[tokio::test]
async fn gzip_is_applied_when_asked() {
    let s = TestServer::default().await;
    let r = s.http.get(s.url("/openapi.yaml")).header("accept-encoding", "gzip").send().await.unwrap();
    assert_eq!(r.headers().get("content-encoding").map(|v| v.to_str().unwrap()), Some("gzip"));
}

/// Predictions moved off the async threads (every one, with a zero inline budget) give
/// the same numbers as inline ones.
#[tokio::test]
async fn blocking_and_inline_predictions_agree() {
    let inline = TestServer::default().await;
    let mut config = Config::for_tests();
    config.predict_inline_max_flops = 0.0;
    let blocking = TestServer::start(config).await;
    let query = json!({"x": [[0.25], [1.75], [4.5]], "include_noise": true});
    let mut answers = Vec::new();
    for s in [&inline, &blocking] {
        let m = s.train(&gp_body()).await;
        let r = s.post(&format!("/models/{}/predict", m["id"].as_str().unwrap()), &query).await;
        assert_eq!(r.status(), 200);
        answers.push(r.json::<Value>().await.unwrap());
    }
    assert_eq!(answers[0], answers[1]);
}

/// Every kernel type of the contract trains with kernel_ridge and gaussian_process and
/// predicts; the fitted kernel comes back in the form it was sent.
#[tokio::test]
async fn every_kernel_trains_and_predicts_through_both_models() {
    let s = TestServer::default().await;
    // One feature: the periodic kernel is only positive semi-definite on a line.
    let x: Vec<Vec<f64>> = (0..15).map(|i| vec![i as f64 * 0.4]).collect();
    let y: Vec<f64> = x.iter().map(|r| r[0].sin()).collect();
    let kernels = [
        json!({"type": "linear", "c": 1.0}),
        json!({"type": "polynomial", "degree": 2, "gamma": 0.5, "coef0": 1.0}),
        json!({"type": "rbf", "length_scale": [1.5]}),
        json!({"type": "rbf", "gamma": 0.5}),
        json!({"type": "laplacian", "length_scale": 2.0}),
        json!({"type": "exponential", "length_scale": 1.5}),
        json!({"type": "matern", "nu": 2.5, "length_scale": {"value": 1.0, "bounds": [0.1, 10.0]}}),
        json!({"type": "rational_quadratic", "length_scale": 1.0, "alpha": 0.5}),
        json!({"type": "periodic", "length_scale": 1.0, "period": 3.0}),
        json!({"type": "sigmoid", "gamma": 0.01, "coef0": 0.0}),
        json!({"type": "inverse_multiquadric", "c": 1.0}),
        json!({"type": "constant", "value": 2.0}),
        json!({"type": "white", "noise": 0.5}),
        json!({"type": "sum", "kernels": [{"type": "rbf"}, {"type": "white", "noise": 0.1}]}),
        json!({"type": "product", "kernels": [{"type": "constant", "value": 2.0}, {"type": "matern"}]}),
        json!({"type": "scale", "factor": 3.0, "kernel": {"type": "sum", "kernels": [{"type": "linear"}, {"type": "periodic"}]}}),
    ];
    for kernel in kernels {
        for (model, params) in [("kernel_ridge", json!({"lambda": 0.1})), ("gaussian_process", json!({"noise": 0.1}))] {
            let body = json!({"model": model, "kernel": kernel, "params": params, "x": x, "y": y});
            let r = s.post("/models", &body).await;
            let status = r.status().as_u16();
            let m: Value = r.json().await.unwrap();
            assert_eq!(status, 201, "{model} with {kernel}: {m}");
            let sent = mercer::kernel::Kernel::from_json(&kernel).unwrap().to_json();
            assert_eq!(m["kernel"], sent, "{model}: fitted kernel echoed in its form");
            let p: Value = s
                .post(&format!("/models/{}/predict", m["id"].as_str().unwrap()), &json!({"x": [[0.3], [2.1]]}))
                .await
                .json()
                .await
                .unwrap();
            let preds = p["predictions"].as_array().unwrap();
            assert!(preds.len() == 2 && preds.iter().all(|v| v.as_f64().unwrap().is_finite()), "{model} {kernel}: {p}");
            if model == "gaussian_process" {
                assert!(p["variance"].as_array().unwrap().iter().all(|v| v.as_f64().unwrap() >= 0.0), "{p}");
            }
        }
    }
}

/// Parses /metrics in both formats (the Prometheus text format by default, OpenMetrics when
/// `Accept` asks for it) and checks each contract family's type and the exact label names
/// of its samples.
#[tokio::test]
async fn metrics_families_have_the_contract_names_types_and_labels() {
    use std::collections::{BTreeMap, BTreeSet};
    let s = TestServer::default().await;
    let m = s.train(&gp_body()).await;
    s.post(&format!("/models/{}/predict", m["id"].as_str().unwrap()), &json!({"x": [[1.0]]})).await;
    let appended = s
        .post(&format!("/models/{}/observations", m["id"].as_str().unwrap()), &json!({"x": [[7.5]], "y": [0.9]}))
        .await;
    assert_eq!(appended.status(), 200);
    let mut searched = gp_body();
    searched["search"] = json!({"space": {"/params/noise": [0.01, 0.1]}, "cv": 2});
    s.train(&searched).await;
    let set = |ks: &[&str]| ks.iter().map(|k| k.to_string()).collect::<BTreeSet<_>>();
    // (family, type, a sample's name, its label names)
    let expect = [
        ("mercer_http_requests", "counter", "mercer_http_requests_total", set(&["method", "route", "status"])),
        (
            "mercer_http_request_duration_seconds",
            "histogram",
            "mercer_http_request_duration_seconds_bucket",
            set(&["le", "method", "route"]),
        ),
        ("mercer_fit_duration_seconds", "histogram", "mercer_fit_duration_seconds_bucket", set(&["le", "model"])),
        ("mercer_fits", "counter", "mercer_fits_total", set(&["model", "outcome"])),
        ("mercer_predict_rows", "counter", "mercer_predict_rows_total", set(&["model"])),
        ("mercer_predict_batch_rows", "histogram", "mercer_predict_batch_rows_bucket", set(&["le"])),
        ("mercer_appended_rows", "counter", "mercer_appended_rows_total", set(&["model"])),
        ("mercer_append_duration_seconds", "histogram", "mercer_append_duration_seconds_bucket", set(&["le", "model"])),
        ("mercer_searches", "counter", "mercer_searches_total", set(&["model", "outcome"])),
        ("mercer_search_fits", "counter", "mercer_search_fits_total", set(&["model"])),
        ("mercer_fit_queue_depth", "gauge", "mercer_fit_queue_depth", set(&[])),
        ("mercer_fits_running", "gauge", "mercer_fits_running", set(&[])),
        ("mercer_models", "gauge", "mercer_models", set(&["status"])),
        ("mercer_registry_bytes", "gauge", "mercer_registry_bytes", set(&[])),
    ];
    for (accept, content_type) in [
        ("text/plain", "text/plain; version=0.0.4; charset=utf-8"),
        ("application/openmetrics-text; version=1.0.0", "application/openmetrics-text; version=1.0.0; charset=utf-8"),
    ] {
        let r = s.http.get(s.url("/metrics")).header("accept", accept).send().await.unwrap();
        assert_eq!(r.headers()["content-type"], content_type);
        let text = r.text().await.unwrap();
        let openmetrics = accept.starts_with("application/openmetrics-text");
        let mut types: BTreeMap<String, String> = BTreeMap::new();
        let mut labels: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let mut it = rest.split_whitespace();
                types.insert(it.next().unwrap().to_string(), it.next().unwrap().to_string());
                continue;
            }
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            let (series, value) = line.rsplit_once(' ').unwrap();
            assert!(value.parse::<f64>().is_ok(), "sample value in {line:?}");
            let (name, label_set) = match series.split_once('{') {
                Some((n, l)) => (n, l.trim_end_matches('}')),
                None => (series, ""),
            };
            let keys = labels.entry(name.to_string()).or_default();
            for pair in label_set.split(',').filter(|p| !p.is_empty()) {
                keys.insert(pair.split('=').next().unwrap().to_string());
            }
        }
        for (family, kind, sample, keys) in &expect {
            // The classic format names a counter by its samples (`_total`) in # TYPE.
            let typed = if *kind == "counter" && !openmetrics { sample } else { family };
            assert_eq!(types.get(*typed).map(String::as_str), Some(*kind), "{accept}: # TYPE of {typed}");
            assert_eq!(labels.get(*sample), Some(keys), "{accept}: labels of {sample}");
        }
        assert_eq!(text.trim_end().ends_with("# EOF"), openmetrics, "{accept}: only OpenMetrics ends with # EOF");
    }
}

/// At drain, a fit still waiting in the queue never runs: its model ends failed with a
/// reason a polling client can read, and running fits are not touched.
#[tokio::test]
async fn draining_fails_queued_fits_with_a_reason() {
    let mut config = Config::for_tests();
    config.fit_workers = 1;
    let s = TestServer::start(config).await;
    let block = s.block_worker();
    let r = s.post("/models?wait=false", &gp_body()).await;
    let id = r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_string();
    s.service().begin_drain();
    let m: Value = s.get(&format!("/models/{id}")).await.json().await.unwrap();
    assert_eq!(m["status"], "failed", "{m}");
    assert_eq!(m["error"]["status"], 503, "{m}");
    assert!(m["error"]["detail"].as_str().unwrap().contains("shut down"), "{m}");
    assert_eq!(s.service().pool.running(), 1, "the running job goes on");
    drop(block);
}

/// Shutdown keeps accepting while a request is in flight: new clients get /readyz 503 and
/// fits refused with 503 (not a refused connection); once the request ends, the server
/// stops. The in-flight request is a POST whose body the test streams by hand.
#[tokio::test]
async fn shutdown_answers_503_while_requests_finish_then_stops() {
    let mut s = TestServer::default().await;
    let (tx, rx) = tokio::sync::mpsc::channel::<Vec<u8>>(4);
    let body = reqwest::Body::wrap_stream(futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (Ok::<_, std::io::Error>(chunk), rx))
    }));
    let in_flight = tokio::spawn(s.http.post(s.url("/models")).body(body).send());
    tx.send(br#"{"model": "kernel_ridge", "#.to_vec()).await.unwrap();
    s.service().wait_in_flight_at_least(1).await;

    let service = s.service().clone();
    let server = s.server.take().unwrap();
    let stopping = tokio::spawn(server.shutdown());
    service.begin_drain(); // shutdown's first step; idempotent

    let fresh = reqwest::Client::new();
    let r = fresh.get(s.url("/readyz")).send().await.unwrap();
    assert_eq!(r.status(), 503, "readiness turns off while draining");
    let r = fresh.post(s.url("/models")).body(gp_body().to_string()).send().await.unwrap();
    assert_eq!(r.status(), 503);
    assert!(r.headers().get("retry-after").is_some());
    assert!(!stopping.is_finished(), "a request is still in flight");

    tx.send(br#""x": [[0.0], [1.0]], "y": [0.0, 1.0]}"#.to_vec()).await.unwrap();
    drop(tx);
    let r = in_flight.await.unwrap().unwrap();
    assert_eq!(r.status(), 503, "the in-flight fit request finishes (refused: the server is draining)");
    assert!(stopping.await.unwrap(), "shutdown completes within the grace period");
    assert!(fresh.get(s.url("/healthz")).send().await.is_err(), "the listener is closed");
}

/// Bodies above the inline-parse size are parsed on a blocking thread, with the same
/// results and the same pointers for malformed input.
#[tokio::test]
async fn large_bodies_parse_off_the_async_threads_with_the_same_errors() {
    let s = TestServer::default().await;
    let x: Vec<Vec<f64>> =
        (0..4000).map(|i| (0..6).map(|k| ((i * 7 + k * 3) % 17) as f64 * 0.123_456_789).collect()).collect();
    let y: Vec<f64> = x.iter().map(|r| r[0].sin()).collect();
    let body = json!({"model": "kernel_ridge", "x": x, "y": y});
    assert!(body.to_string().len() > 256 << 10, "the body is above the inline limit");
    let m = s.train(&body).await;
    assert_eq!(m["n_train"], 4000);
    let mut bad = body.clone();
    bad["x"][2000][3] = json!("oops");
    let (status, p) = problem(s.post("/models", &bad).await).await;
    assert_eq!(status, 400, "{p}");
    assert_eq!(pointers(&p), vec!["/x/2000/3".to_string()]);
}

/// Concurrent small predicts to one model are stacked into shared predict calls (the
/// batcher), and each client still gets exactly the answer for its own rows: the same,
/// to round-off, as those rows inside one large request that is never batched.
#[tokio::test]
async fn concurrent_predicts_are_batched_and_each_gets_its_own_rows() {
    let s = TestServer::default().await;
    // n = 400: a row's variance costs 400^2 flops, enough to be batched.
    let (x, y) = sine(400);
    let body = json!({"model": "gaussian_process", "kernel": {"type": "rbf", "length_scale": 0.8},
        "params": {"noise": 0.01}, "x": x, "y": y});
    let m = s.train(&body).await;
    let path = format!("/models/{}/predict", m["id"].as_str().unwrap());
    let rows: Vec<Vec<f64>> = (0..96).map(|i| vec![0.05 + i as f64 * 0.061]).collect();
    // One request of all 96 rows: over the batcher's row cap, so it runs alone.
    let whole: Value = s.post(&path, &json!({"x": rows})).await.json().await.unwrap();
    // 48 requests of 1, 2 or 3 rows at once.
    let mut parts = Vec::new();
    let mut at = 0;
    for i in 0.. {
        let k = [1, 2, 3][i % 3].min(rows.len() - at);
        if k == 0 {
            break;
        }
        parts.push((at, k));
        at += k;
    }
    let answers = futures_util::future::join_all(parts.iter().map(|&(at, k)| {
        let (s, path) = (&s, &path);
        let q = json!({"x": rows[at..at + k]});
        async move { s.post(path, &q).await.json::<Value>().await.unwrap() }
    }))
    .await;
    for (&(at, k), answer) in parts.iter().zip(&answers) {
        for key in ["predictions", "variance", "std"] {
            let got = answer[key].as_array().unwrap();
            assert_eq!(got.len(), k, "{key} of rows {at}..{}", at + k);
            for (j, v) in got.iter().enumerate() {
                let (v, want) = (v.as_f64().unwrap(), whole[key][at + j].as_f64().unwrap());
                assert!((v - want).abs() <= 1e-12 * (1.0 + want.abs()), "{key}[{}]: {v} vs {want}", at + j);
            }
        }
    }
    // Every row of the small requests went through the batcher.
    let metrics = s.get("/metrics").await.text().await.unwrap();
    let sample = |name: &str| -> f64 {
        let line = metrics.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("{name} in /metrics"));
        line.rsplit_once(' ').unwrap().1.parse().unwrap()
    };
    assert_eq!(sample("mercer_predict_batch_rows_sum "), rows.len() as f64);
    let calls = sample("mercer_predict_batch_rows_count ");
    assert!((1.0..=parts.len() as f64).contains(&calls), "{calls} batches for {} requests", parts.len());
}

/// GET /models leaves out the bulky arrays (`training.inducing_indices`,
/// `training.search.candidates`); GET /models/{id} keeps them; everything else is the same.
#[tokio::test]
async fn the_list_leaves_out_the_bulky_arrays_the_model_keeps() {
    let s = TestServer::default().await;
    let x: Vec<Vec<f64>> = (0..60).map(|i| vec![i as f64 / 10.0]).collect();
    let y: Vec<f64> = x.iter().map(|r| r[0].sin()).collect();
    let nystrom = s
        .train(&json!({"model": "kernel_ridge", "x": x, "y": y,
            "params": {"approximation": "nystrom", "inducing_points": 10, "inducing_selection": "uniform"}}))
        .await;
    let searched = s
        .train(&json!({"model": "kernel_ridge", "x": x, "y": y,
            "search": {"space": {"/params/lambda": [0.01, 0.1, 1.0]}, "cv": 3}}))
        .await;
    let list: Value = s.get("/models").await.json().await.unwrap();
    for (m, bulky) in [(&nystrom, "/training/inducing_indices"), (&searched, "/training/search/candidates")] {
        let id = m["id"].as_str().unwrap();
        let one: Value = s.get(&format!("/models/{id}")).await.json().await.unwrap();
        assert!(one.pointer(bulky).is_some_and(|v| !v.as_array().unwrap().is_empty()), "{bulky} in {one}");
        let listed = list["models"].as_array().unwrap().iter().find(|l| l["id"] == m["id"]).unwrap();
        assert!(listed.pointer(bulky).is_none(), "{bulky} in the list: {listed}");
        let (mut a, mut b) = (one.clone(), listed.clone());
        let (parent, key) = bulky.rsplit_once('/').unwrap();
        a.pointer_mut(parent).unwrap().as_object_mut().unwrap().remove(key);
        b.pointer_mut(parent).unwrap().as_object_mut().unwrap().remove(key);
        assert_eq!(a, b, "the rest is the same");
    }
}

/// A problem's `detail` says what is wrong without repeating the pointer its `errors`
/// carry: a refusal before the fit, a fit that failed on a field (answered and kept on the
/// failed model), and a malformed body.
#[tokio::test]
async fn problem_details_do_not_repeat_their_pointers() {
    let s = TestServer::default().await;
    let (x, y) = sine(5);
    let identical = json!({"model": "kernel_pca", "x": [[1.0, 2.0], [1.0, 2.0]]});
    for (body, pointer) in [
        (json!({"model": "kernel_ridge", "x": x, "y": &y[..3]}), "/y"),
        (json!({"model": "kernel_ridge", "x": x, "y": y, "params": {"lambda": -1}}), "/params/lambda"),
        (identical.clone(), "/kernel"),
        (json!({"model": "kernel_ridge", "x": [[1, "a"]], "y": [1]}), "/x/0/1"),
    ] {
        let (_, p) = problem(s.post("/models", &body).await).await;
        assert_eq!(p["errors"][0]["pointer"], pointer, "{p}");
        let detail = p["detail"].as_str().unwrap();
        assert!(!detail.contains(pointer), "{detail}");
        assert_eq!(detail, p["errors"][0]["message"], "{p}");
    }
    // The same failure found by a fit in the background, shown on the failed model.
    let r = s.post("/models?wait=false", &identical).await;
    let id = r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_string();
    let failed = common::eventually(std::time::Duration::from_secs(30), async || {
        let m: Value = s.get(&format!("/models/{id}")).await.json().await.unwrap();
        m["status"] == "failed"
    })
    .await;
    assert!(failed);
    let m: Value = s.get(&format!("/models/{id}")).await.json().await.unwrap();
    assert_eq!(m["error"]["errors"][0]["pointer"], "/kernel", "{m}");
    assert_eq!(m["error"]["detail"], m["error"]["errors"][0]["message"], "{m}");
}

//! The Open Inference Protocol v2 routes: metadata, health, readiness and inference
//! agree with the model resource and the predict route; errors come in the protocol's
//! `{"error"}` form with the predict route's statuses.

mod common;

use common::{sine, TestServer};
use mercer::config::Config;
use serde_json::{json, Value};

async fn body(r: reqwest::Response) -> (u16, Value) {
    let status = r.status().as_u16();
    (status, r.json().await.unwrap())
}

fn output<'a>(answer: &'a Value, name: &str) -> &'a Value {
    answer["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == name)
        .unwrap_or_else(|| panic!("{name} in {answer}"))
}

#[tokio::test]
async fn a_gp_is_described_and_infers_as_the_predict_route_answers() {
    let s = TestServer::default().await;
    let (x, y) = sine(40);
    let m = s
        .train(&json!({"model": "gaussian_process", "kernel": {"type": "rbf", "length_scale": 0.7},
                       "params": {"noise": 0.01}, "x": x, "y": y}))
        .await;
    let id = m["id"].as_str().unwrap();

    let (status, meta) = body(s.get(&format!("/v2/models/{id}")).await).await;
    assert_eq!(status, 200);
    assert_eq!(meta["name"], id);
    assert_eq!(meta["inputs"], json!([{"name": "x", "datatype": "FP64", "shape": [-1, 1]}]));
    let names: Vec<&str> = meta["outputs"].as_array().unwrap().iter().map(|o| o["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["predictions", "variance", "std"]);
    assert_eq!(body(s.get(&format!("/v2/models/{id}/ready")).await).await, (200, json!({"name": id, "ready": true})));

    let q = [[0.3], [2.2], [5.1]];
    let (_, want) = body(s.post(&format!("/models/{id}/predict"), &json!({"x": q})).await).await;
    // Nested and flat data, FP64 and FP32 (read as the same JSON numbers) give the same answer.
    for (datatype, data) in [("FP64", json!(q)), ("FP32", json!([0.3, 2.2, 5.1]))] {
        let req = json!({"id": "r-1", "inputs": [{"name": "x", "shape": [3, 1], "datatype": datatype, "data": data}]});
        let (status, answer) = body(s.post(&format!("/v2/models/{id}/infer"), &req).await).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!((answer["model_name"].as_str(), answer["id"].as_str()), (Some(id), Some("r-1")));
        for key in ["predictions", "variance", "std"] {
            let t = output(&answer, key);
            assert_eq!((t["datatype"].as_str(), &t["shape"]), (Some("FP64"), &json!([3])));
            assert_eq!(t["data"], want[key], "{datatype} {key}");
        }
    }
    // Only the outputs asked for; an unknown one is 400.
    let req = json!({"inputs": [{"name": "x", "shape": [1, 1], "datatype": "FP64", "data": [0.3]}],
                     "outputs": [{"name": "std"}]});
    let (_, answer) = body(s.post(&format!("/v2/models/{id}/infer"), &req).await).await;
    assert_eq!(answer["outputs"].as_array().unwrap().len(), 1);
    assert_eq!(output(&answer, "std")["data"][0], want["std"][0]);
    assert!(answer.get("id").is_none());
    let req = json!({"inputs": [{"name": "x", "shape": [1, 1], "datatype": "FP64", "data": [0.3]}],
                     "outputs": [{"name": "probabilities"}]});
    let (status, e) = body(s.post(&format!("/v2/models/{id}/infer"), &req).await).await;
    assert_eq!(status, 400);
    assert!(e["error"].as_str().unwrap().contains("probabilities"), "{e}");
}

#[tokio::test]
async fn classifiers_answer_labels_as_bytes_and_string_models_take_bytes() {
    let s = TestServer::default().await;
    let x: Vec<Vec<f64>> =
        (0..40).map(|i| vec![(i % 20) as f64 * 0.2 - 2.0, if i < 20 { 1.0 } else { -1.0 }]).collect();
    let y: Vec<&str> = (0..40).map(|i| if i < 20 { "up" } else { "down" }).collect();
    let svm = s.train(&json!({"model": "svm", "kernel": {"type": "rbf", "gamma": 0.5}, "x": x, "y": y})).await;
    let id = svm["id"].as_str().unwrap();
    let req =
        json!({"inputs": [{"name": "x", "shape": [2, 2], "datatype": "FP64", "data": [[0.0, 1.0], [0.0, -1.0]]}]});
    let (status, answer) = body(s.post(&format!("/v2/models/{id}/infer"), &req).await).await;
    assert_eq!(status, 200, "{answer}");
    let p = output(&answer, "predictions");
    assert_eq!((p["datatype"].as_str(), &p["data"]), (Some("BYTES"), &json!(["up", "down"])));
    assert_eq!(output(&answer, "decision_function")["shape"], json!([2]));
    let (_, meta) = body(s.get(&format!("/v2/models/{id}")).await).await;
    assert_eq!(meta["outputs"][0], json!({"name": "predictions", "datatype": "BYTES", "shape": [-1]}));

    // Three classes: probabilities and decisions come as [m, classes], row-major.
    let x3: Vec<Vec<f64>> =
        (0..45).map(|i| vec![(i % 3) as f64 * 2.0 + (i % 5) as f64 * 0.1, (i % 7) as f64 * 0.1]).collect();
    let y3: Vec<String> = (0..45).map(|i| format!("c{}", i % 3)).collect();
    let svm3 = s
        .train(&json!({"model": "svm", "kernel": {"type": "rbf", "gamma": 0.5}, "params": {"probability": true},
                       "x": x3, "y": y3}))
        .await;
    let id3 = svm3["id"].as_str().unwrap();
    let q = [[0.1, 0.2], [4.2, 0.3]];
    let req = json!({"inputs": [{"name": "x", "shape": [2, 2], "datatype": "FP64", "data": q}]});
    let (_, answer) = body(s.post(&format!("/v2/models/{id3}/infer"), &req).await).await;
    let (_, want) = body(s.post(&format!("/models/{id3}/predict"), &json!({"x": q})).await).await;
    for key in ["probabilities", "decision_function"] {
        let t = output(&answer, key);
        assert_eq!(t["shape"], json!([2, 3]), "{key}");
        let rows: Vec<Value> =
            want[key].as_array().unwrap().iter().flat_map(|r| r.as_array().unwrap().clone()).collect();
        assert_eq!(t["data"], Value::Array(rows), "{key} row-major");
    }

    let texts = ["aaab", "aaba", "abaa", "baaa", "cccd", "ccdc", "cdcc", "dccc"];
    let labels = [1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0];
    let m = s
        .train(&json!({"model": "kernel_ridge", "kernel": {"type": "spectrum", "k": 2}, "params": {"lambda": 0.1},
                       "x": texts, "y": labels}))
        .await;
    let id = m["id"].as_str().unwrap();
    let (_, meta) = body(s.get(&format!("/v2/models/{id}")).await).await;
    assert_eq!(meta["inputs"], json!([{"name": "x", "datatype": "BYTES", "shape": [-1]}]));
    let req = json!({"inputs": [{"name": "x", "shape": [2], "datatype": "BYTES", "data": ["aaab", "dccc"]}]});
    let (status, answer) = body(s.post(&format!("/v2/models/{id}/infer"), &req).await).await;
    assert_eq!(status, 200, "{answer}");
    let (_, want) = body(s.post(&format!("/models/{id}/predict"), &json!({"x": ["aaab", "dccc"]})).await).await;
    assert_eq!(output(&answer, "predictions")["data"], want["predictions"]);
}

#[tokio::test]
async fn errors_are_the_protocol_s_with_the_predict_route_s_statuses() {
    let mut config = Config::for_tests();
    config.fit_workers = 1;
    let s = TestServer::start(config).await;
    let (x, y) = sine(20);
    let m = s.train(&json!({"model": "kernel_ridge", "kernel": {"type": "rbf"}, "x": x, "y": y})).await;
    let id = m["id"].as_str().unwrap();
    let infer = |shape: Value, datatype: &str, data: Value| json!({"inputs": [{"name": "x", "shape": shape, "datatype": datatype, "data": data}]});
    for (req, want) in [
        (infer(json!([2, 3]), "FP64", json!([1, 2, 3, 4, 5])), 400),
        (infer(json!([2]), "FP64", json!([1, 2])), 400),
        (infer(json!([4_000_000_000u64, 0]), "FP64", json!([])), 400),
        (infer(json!([9_000_000_000u64, 9_000_000_000u64, 9_000_000_000u64]), "FP64", json!([1])), 400),
        (infer(json!([1, 1]), "BOOL", json!([true])), 400),
        (infer(json!([1, 1]), "FP64", json!(["a"])), 400),
        (infer(json!([1, 2]), "FP64", json!([1, 2])), 422),
        (json!({"inputs": []}), 400),
        (json!({"inputs": [{"name": "y", "shape": [1, 1], "datatype": "FP64", "data": [1]}]}), 400),
        (json!({"inputs": "x"}), 400),
    ] {
        let (status, e) = body(s.post(&format!("/v2/models/{id}/infer"), &req).await).await;
        assert_eq!(status, want, "{req} -> {e}");
        assert!(e["error"].as_str().is_some_and(|m| !m.is_empty()), "{e}");
    }
    let unknown = uuid::Uuid::new_v4();
    let (status, e) = body(s.get(&format!("/v2/models/{unknown}/ready")).await).await;
    assert_eq!(status, 404, "{e}");
    // A model still queued is not ready: 409, as the predict route.
    let _busy = s.block_worker();
    let r = s.post("/models?wait=false", &json!({"model": "kernel_ridge", "x": x, "y": y})).await;
    let queued: Value = r.json().await.unwrap();
    let qid = queued["id"].as_str().unwrap();
    assert_eq!(
        body(s.get(&format!("/v2/models/{qid}/ready")).await).await,
        (409, json!({"name": qid, "ready": false}))
    );
    let (status, e) =
        body(s.post(&format!("/v2/models/{qid}/infer"), &infer(json!([1, 1]), "FP64", json!([0.5]))).await).await;
    assert_eq!(status, 409, "{e}");
    assert_eq!(body(s.get("/v2/health/live").await).await, (200, json!({"live": true})));
    assert_eq!(body(s.get("/v2/health/ready").await).await, (200, json!({"ready": true})));
    let (status, meta) = body(s.get("/v2").await).await;
    assert_eq!((status, meta["name"].as_str()), (200, Some("mercer")));
}

#[tokio::test]
async fn health_needs_no_token_and_models_do() {
    let mut config = Config::for_tests();
    config.api_keys = "k1".into();
    let s = TestServer::start(config).await;
    assert_eq!(s.get("/v2/health/live").await.status(), 200);
    assert_eq!(s.get("/v2/health/ready").await.status(), 200);
    assert_eq!(s.get("/v2").await.status(), 401);
    let id = uuid::Uuid::new_v4();
    assert_eq!(s.get(&format!("/v2/models/{id}")).await.status(), 401);
    let r = s.http.get(s.url(&format!("/v2/models/{id}"))).bearer_auth("k1").send().await.unwrap();
    assert_eq!(r.status(), 404);
}

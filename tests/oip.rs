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

/// The errors that the layers below the handlers answer (a method not allowed, a body over
/// the limit, a path that is no route) are the protocol's `{"error"}` under /v2 too, with
/// their headers; elsewhere they stay problem+json.
#[tokio::test]
async fn errors_from_below_the_handlers_keep_the_protocol_s_shape() {
    let s = TestServer::start(Config { max_body_bytes: 1000, ..Config::for_tests() }).await;
    let big = vec![b'a'; 3000];
    let cases = [
        (s.http.get(s.url("/v2/models/abc/infer")).send().await.unwrap(), 405),
        (s.post_raw("/v2/models/abc/infer", big.clone(), "application/json").await, 413),
        (s.get("/v2/models/abc/versions/1").await, 404),
        (s.get("/v2/nothing").await, 404),
    ];
    for (r, want) in cases {
        assert_eq!(r.status().as_u16(), want);
        let allow = r.headers().contains_key("allow");
        let content_type = r.headers()["content-type"].to_str().unwrap().to_string();
        let e: Value = r.json().await.unwrap();
        assert_eq!(content_type, "application/json", "{want}: {e}");
        assert!(e["error"].as_str().is_some_and(|m| !m.is_empty()) && e.as_object().unwrap().len() == 1, "{want}: {e}");
        assert_eq!(allow, want == 405, "{want}: Allow kept");
    }
    let r = s.post_raw("/models", big, "application/json").await;
    assert_eq!(r.status(), 413);
    assert!(r.headers()["content-type"].to_str().unwrap().starts_with("application/problem+json"));
    // A missing token: 401 in the protocol's shape, its WWW-Authenticate kept.
    let s = TestServer::start(Config { api_keys: "right-token".into(), ..Config::for_tests() }).await;
    let r = s.get("/v2/models/abc/ready").await;
    assert_eq!(r.status(), 401);
    assert!(r.headers().contains_key("www-authenticate"));
    let e: Value = r.json().await.unwrap();
    assert!(e["error"].as_str().is_some_and(|m| !m.is_empty()), "{e}");
}

/// A model over token lists is not offered under the protocol: its metadata and its
/// infer both answer 400 in the protocol's shape (the metadata advertised an input the
/// infer refused).
#[tokio::test]
async fn token_list_models_are_not_offered() {
    let s = TestServer::default().await;
    let m = s
        .train(&json!({"model": "kernel_ridge", "kernel": {"type": "set"},
            "x": [["a", "b"], ["b"], ["c", "a"]], "y": [1, 2, 3]}))
        .await;
    let id = m["id"].as_str().unwrap();
    let (status, e) = body(s.get(&format!("/v2/models/{id}")).await).await;
    assert_eq!(status, 400, "{e}");
    assert!(e["error"].as_str().unwrap().contains("token lists"), "{e}");
    for (shape, data) in [(json!([1]), json!(["a"])), (json!([1, 1]), json!(["a"]))] {
        let req = json!({"inputs": [{"name": "x", "shape": shape, "datatype": "BYTES", "data": data}]});
        let (status, e) = body(s.post(&format!("/v2/models/{id}/infer"), &req).await).await;
        assert_eq!(status, 400, "{e}");
        assert!(e["error"].as_str().unwrap().contains("token lists"), "{e}");
    }
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

/// A body in the binary tensor data extension: the JSON header, then `data`.
async fn infer_binary(s: &TestServer, id: &str, head: &Value, data: &[u8]) -> reqwest::Response {
    let head = head.to_string();
    let mut bytes = head.clone().into_bytes();
    bytes.extend_from_slice(data);
    s.http
        .post(s.url(&format!("/v2/models/{id}/infer")))
        .header("Inference-Header-Content-Length", head.len().to_string())
        .header("Content-Type", "application/octet-stream")
        .body(bytes)
        .send()
        .await
        .unwrap()
}

/// An answer in the extension: its JSON header and each binary output's bytes, by name.
async fn binary_answer(r: reqwest::Response) -> (Value, Vec<(String, Vec<u8>)>) {
    assert_eq!(r.status(), 200);
    let n: usize = r.headers()["inference-header-content-length"].to_str().unwrap().parse().unwrap();
    let body = r.bytes().await.unwrap();
    let head: Value = serde_json::from_slice(&body[..n]).unwrap();
    let mut at = n;
    let mut parts = Vec::new();
    for t in head["outputs"].as_array().unwrap() {
        if let Some(size) = t["parameters"]["binary_data_size"].as_u64() {
            assert!(t.get("data").is_none(), "{t}");
            parts.push((t["name"].as_str().unwrap().to_string(), body[at..at + size as usize].to_vec()));
            at += size as usize;
        }
    }
    assert_eq!(at, body.len(), "every byte belongs to an output");
    (head, parts)
}

fn le_f64(bytes: &[u8]) -> Vec<f64> {
    bytes.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect()
}

/// Binary tensors both ways (FP64, FP32 and INT32 in; every output, or the ones marked,
/// out) give the JSON form's numbers bit for bit; BYTES go both ways; a body whose
/// binary part does not add up is the protocol's 400.
#[tokio::test]
async fn binary_tensors_equal_the_json_form() {
    let s = TestServer::default().await;
    let (x, y) = sine(40);
    let gp = s
        .train(&json!({"model": "gaussian_process", "kernel": {"type": "rbf", "length_scale": 0.7},
                       "params": {"noise": 0.01}, "x": x, "y": y}))
        .await;
    let id = gp["id"].as_str().unwrap();
    let q = [0.5f64, 2.0, -1.25];
    let json_req = json!({"inputs": [{"name": "x", "shape": [3, 1], "datatype": "FP64", "data": q}]});
    let (_, want) = body(s.post(&format!("/v2/models/{id}/infer"), &json_req).await).await;
    let fp64: Vec<u8> = q.iter().flat_map(|v| v.to_le_bytes()).collect();
    let fp32: Vec<u8> = q.iter().flat_map(|v| (*v as f32).to_le_bytes()).collect();
    let int32: Vec<u8> = [1i32, 2, -1].iter().flat_map(|v| v.to_le_bytes()).collect();
    for (datatype, data, same_as_json) in [("FP64", &fp64, true), ("FP32", &fp32, true), ("INT32", &int32, false)] {
        let head = json!({"inputs": [{"name": "x", "shape": [3, 1], "datatype": datatype,
                                       "parameters": {"binary_data_size": data.len()}}],
                          "parameters": {"binary_data_output": true}});
        let (answer, parts) = binary_answer(infer_binary(&s, id, &head, data).await).await;
        assert_eq!(parts.iter().map(|p| p.0.as_str()).collect::<Vec<_>>(), ["predictions", "variance", "std"]);
        for (name, bytes) in &parts {
            assert_eq!(output(&answer, name)["shape"], json!([3]));
            if same_as_json {
                let want: Vec<f64> =
                    output(&want, name)["data"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
                assert_eq!(le_f64(bytes), want, "{datatype} {name}");
            }
        }
        if !same_as_json {
            let ints =
                json!({"inputs": [{"name": "x", "shape": [3, 1], "datatype": "FP64", "data": [1.0, 2.0, -1.0]}]});
            let (_, want) = body(s.post(&format!("/v2/models/{id}/infer"), &ints).await).await;
            let got = le_f64(&parts[0].1);
            let want: Vec<f64> =
                output(&want, "predictions")["data"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
            assert_eq!(got, want, "INT32 rows are the integers");
        }
    }
    // JSON in, one output marked binary, the other in JSON.
    let head = json!({"inputs": [{"name": "x", "shape": [3, 1], "datatype": "FP64", "data": q}],
                      "outputs": [{"name": "predictions", "parameters": {"binary_data": true}}, {"name": "std"}]});
    let (answer, parts) = binary_answer(infer_binary(&s, id, &head, &[]).await).await;
    assert_eq!(parts.len(), 1);
    let want_pred: Vec<f64> =
        output(&want, "predictions")["data"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    assert_eq!(le_f64(&parts[0].1), want_pred);
    assert_eq!(output(&answer, "std")["data"], output(&want, "std")["data"]);

    // BYTES both ways: a string model in, string labels out.
    let (tx, ty) = (["aaab", "aaba", "cccd", "ccdc"], ["a", "a", "c", "c"]);
    let svm = s.train(&json!({"model": "svm", "kernel": {"type": "spectrum", "k": 2}, "x": tx, "y": ty})).await;
    let sid = svm["id"].as_str().unwrap();
    let mut strings = Vec::new();
    for w in ["aaab", "dccc"] {
        strings.extend_from_slice(&(w.len() as u32).to_le_bytes());
        strings.extend_from_slice(w.as_bytes());
    }
    let head = json!({"inputs": [{"name": "x", "shape": [2], "datatype": "BYTES",
                                   "parameters": {"binary_data_size": strings.len()}}],
                      "outputs": [{"name": "predictions", "parameters": {"binary_data": true}}]});
    let (answer, parts) = binary_answer(infer_binary(&s, sid, &head, &strings).await).await;
    assert_eq!(output(&answer, "predictions")["datatype"], "BYTES");
    let mut labels = Vec::new();
    let mut rest = &parts[0].1[..];
    while !rest.is_empty() {
        let n = u32::from_le_bytes(rest[..4].try_into().unwrap()) as usize;
        labels.push(String::from_utf8(rest[4..4 + n].to_vec()).unwrap());
        rest = &rest[4 + n..];
    }
    assert_eq!(labels, ["a", "c"]);

    // Bodies that do not add up: the protocol's 400, naming the problem.
    let head =
        json!({"inputs": [{"name": "x", "shape": [3, 1], "datatype": "FP64", "parameters": {"binary_data_size": 24}}]});
    let cases: [(&str, &[u8], Option<&str>, &str); 4] = [
        ("too few bytes for the shape", &fp64[..16], None, "binary_data_size is 24"),
        ("bytes without binary_data_size", &fp64, None, "no input has binary_data_size"),
        ("a header longer than the body", &fp64, Some("100000"), "Inference-Header-Content-Length"),
        ("a header that is not a number", &fp64, Some("ten"), "byte count"),
    ];
    for (what, data, header, says) in cases {
        let head = if what.starts_with("bytes without") {
            json!({"inputs": [{"name": "x", "shape": [3, 1], "datatype": "FP64", "data": q}]})
        } else {
            head.clone()
        };
        let text = head.to_string();
        let mut bytes = text.clone().into_bytes();
        bytes.extend_from_slice(data);
        let r = s
            .http
            .post(s.url(&format!("/v2/models/{id}/infer")))
            .header("Inference-Header-Content-Length", header.map_or(text.len().to_string(), str::to_string))
            .body(bytes)
            .send()
            .await
            .unwrap();
        let (status, e) = body(r).await;
        assert_eq!(status, 400, "{what}: {e}");
        assert!(e["error"].as_str().unwrap().contains(says), "{what}: {e}");
    }
    let head =
        json!({"inputs": [{"name": "x", "shape": [2, 1], "datatype": "FP64", "parameters": {"binary_data_size": 24}}]});
    let (status, e) = body(infer_binary(&s, id, &head, &fp64).await).await;
    assert_eq!(status, 400);
    assert!(e["error"].as_str().unwrap().contains("24 bytes of binary data for 2 FP64"), "{e}");
}

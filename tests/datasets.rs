//! Datasets end to end: CSV and JSON uploads (with a target, several, or none), their
//! errors, fits that name a dataset, CSV predict bodies and answers, limits, and datasets
//! surviving a restart.

mod common;

use common::{pointers, problem, TestServer};
use mercer::config::Config;
use serde_json::{json, Value};

/// 30 rows of two features and a smooth target, as CSV and as JSON rows.
fn table() -> (String, Vec<Vec<f64>>, Vec<f64>) {
    let x: Vec<Vec<f64>> = (0..30).map(|i| vec![i as f64 * 0.2, (i as f64 * 0.37).sin()]).collect();
    let y: Vec<f64> = x.iter().map(|r| r[0].cos() + 0.5 * r[1]).collect();
    let mut csv = String::from("u,v,target\n");
    for (r, t) in x.iter().zip(&y) {
        csv.push_str(&format!("{:?},{:?},{t:?}\n", r[0], r[1]));
    }
    (csv, x, y)
}

async fn upload(s: &TestServer, query: &str, body: &str, content_type: &str) -> reqwest::Response {
    s.http
        .post(s.url(&format!("/datasets{query}")))
        .header("content-type", content_type)
        .body(body.to_string())
        .send()
        .await
        .unwrap()
}

async fn created(s: &TestServer, query: &str, body: &str, content_type: &str) -> Value {
    let r = upload(s, query, body, content_type).await;
    let status = r.status().as_u16();
    let location = r.headers().get("location").map(|v| v.to_str().unwrap().to_string());
    let text = r.text().await.unwrap();
    assert_eq!(status, 201, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(location, Some(format!("/datasets/{}", v["id"].as_str().unwrap())));
    v
}

async fn predict_csv(s: &TestServer, id: &str, query: &str, body: &str) -> (u16, String) {
    let r = s
        .http
        .post(s.url(&format!("/models/{id}/predict{query}")))
        .header("content-type", "text/csv")
        .header("accept", "text/csv")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

#[tokio::test]
async fn a_csv_dataset_is_listed_fitted_predicted_by_name_and_deleted() {
    let s = TestServer::default().await;
    let (csv, x, y) = table();
    let d = created(&s, "?target=target&name=waves", &csv, "text/csv").await;
    assert_eq!(d["name"], "waves");
    assert_eq!((d["n_rows"].as_u64(), d["n_features"].as_u64()), (Some(30), Some(2)));
    assert_eq!(d["features"], json!(["u", "v"]));
    assert_eq!((d["target"].as_str(), d["target_kind"].as_str()), (Some("target"), Some("numeric")));
    assert!(d["bytes"].as_u64().unwrap() > 30 * 3 * 8, "{d}");
    assert!(d["created_at"].as_str().unwrap().ends_with('Z'));
    let id = d["id"].as_str().unwrap();
    assert_eq!(s.get(&format!("/datasets/{id}")).await.json::<Value>().await.unwrap(), d);
    assert_eq!(s.get("/datasets").await.json::<Value>().await.unwrap(), json!({"datasets": [d.clone()]}));

    // The same fit from the dataset and from the rows inline.
    let spec =
        json!({"model": "gaussian_process", "kernel": {"type": "rbf", "length_scale": 0.8}, "params": {"noise": 0.01}});
    let mut by_id = spec.clone();
    by_id["dataset"] = json!(id);
    let mut inline = spec.clone();
    inline["x"] = json!(x);
    inline["y"] = json!(y);
    let from_dataset = s.train(&by_id).await;
    let from_rows = s.train(&inline).await;
    assert_eq!(from_dataset["dataset"], json!(id));
    assert_eq!(from_dataset["features"], json!(["u", "v"]));
    assert_eq!(from_dataset["training"]["log_marginal_likelihood"], from_rows["training"]["log_marginal_likelihood"]);
    let mid = from_dataset["id"].as_str().unwrap();

    // CSV predict: columns by name, in any order, extra ones ignored; CSV answer.
    let (status, text) = predict_csv(&s, mid, "", "extra,v,u\nq,0.5,1.0\nr,-0.25,2.0\n").await;
    assert_eq!(status, 200, "{text}");
    let json_answer: Value = s
        .post(&format!("/models/{mid}/predict"), &json!({"x": [[1.0, 0.5], [2.0, -0.25]]}))
        .await
        .json()
        .await
        .unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("prediction,variance,std"));
    for (i, line) in lines.enumerate() {
        let cells: Vec<f64> = line.split(',').map(|c| c.parse().unwrap()).collect();
        assert_eq!(cells[0], json_answer["predictions"][i].as_f64().unwrap(), "the CSV carries every digit");
        assert_eq!(cells[1], json_answer["variance"][i].as_f64().unwrap());
        assert_eq!(cells[2], json_answer["std"][i].as_f64().unwrap());
    }
    let (status, text) = predict_csv(&s, mid, "?variance=false", "u,v\n1,0.5\n").await;
    assert_eq!((status, text.lines().next()), (200, Some("prediction")), "{text}");
    let (status, text) = predict_csv(&s, mid, "", "u,w\n1,2\n").await;
    assert_eq!(status, 422, "{text}");
    assert!(text.contains("/line/1") && text.contains("`v`"), "{text}");
    let (status, text) = predict_csv(&s, mid, "", "u,v\n1,2\n3,x\n").await;
    assert_eq!(status, 422);
    assert!(text.contains("/line/3"), "{text}");
    let (status, _) = predict_csv(&s, mid, "?colour=red", "u,v\n1,2\n").await;
    assert_eq!(status, 400);

    // Deleting the dataset leaves the model fitted on it alone.
    assert_eq!(s.delete(&format!("/datasets/{id}")).await.status(), 204);
    let (status, body) = problem(s.get(&format!("/datasets/{id}")).await).await;
    assert_eq!((status, body["type"].as_str()), (404, Some("/problems/not-found")));
    assert_eq!(s.delete(&format!("/datasets/{id}")).await.status(), 404);
    assert_eq!(s.get("/datasets/not-a-uuid").await.status(), 404);
    let (status, _) = predict_csv(&s, mid, "", "u,v\n1,2\n").await;
    assert_eq!(status, 200);
    let (status, p) = problem(s.post("/models", &by_id).await).await;
    assert_eq!((status, pointers(&p)), (422, vec!["/dataset".to_string()]));
}

#[tokio::test]
async fn csv_edge_cases_and_errors_name_line_and_column() {
    let s = TestServer::default().await;
    // BOM, CRLF, quoted fields with commas and quotes, blank lines, string labels.
    let text = "\u{feff}\"a, first\",b,label\r\n1,2,\"cat \"\"x\"\"\"\r\n\r\n3,4,dog\r\n\n5, 6 ,cat \"x\"\r\n";
    let d = created(&s, "", text, "text/csv; charset=utf-8").await;
    assert_eq!(d["features"], json!(["a, first", "b"]));
    assert_eq!((d["n_rows"].as_u64(), d["target_kind"].as_str()), (Some(3), Some("labels")));
    let id = d["id"].as_str().unwrap();
    // A labels target serves classifiers, not regression.
    let m = s.train(&json!({"model": "kernel_perceptron", "dataset": id})).await;
    assert_eq!(m["classes"], json!(["cat \"x\"", "dog"]));
    let (status, text) = predict_csv(&s, m["id"].as_str().unwrap(), "", "b,\"a, first\"\n2,1\n").await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(text, "prediction\n\"cat \"\"x\"\"\"\n");
    let (status, p) = problem(s.post("/models", &json!({"model": "kernel_ridge", "dataset": id})).await).await;
    assert_eq!((status, pointers(&p)), (422, vec!["/dataset".to_string()]));

    for (body, query, pointer, words) in [
        ("x,y\n1,2\n\n3,oops\n4,x\n", "?target=x", "/line/4", vec!["`y`", "oops"]),
        ("x,y\n1,2\n3,4,5\n", "", "/line/3", vec!["3 fields"]),
        ("x,y\n1,2\n", "?target=z", "/line/1", vec!["`z`"]),
        ("x,x,y\n1,2,3\n", "", "/line/1", vec!["duplicate"]),
        ("y\n1\n", "", "/line/1", vec!["no feature"]),
        ("x,y\n", "", "/line/2", vec!["no data rows"]),
        ("", "", "/line/1", vec!["empty"]),
        ("x,y\nnan,1\n", "", "/line/2", vec!["`x`"]),
    ] {
        let (status, p) = problem(upload(&s, query, body, "text/csv").await).await;
        assert_eq!((status, pointers(&p)), (422, vec![pointer.to_string()]), "{body:?}: {p}");
        let message = p["errors"][0]["message"].as_str().unwrap();
        for w in words {
            assert!(message.contains(w), "{body:?}: {message}");
        }
    }
    let (status, _) = problem(upload(&s, "?colour=1", "x,y\n1,2\n", "text/csv").await).await;
    assert_eq!(status, 400);
    assert_eq!(s.get("/datasets").await.json::<Value>().await.unwrap()["datasets"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn json_datasets_and_their_errors() {
    let s = TestServer::default().await;
    let d =
        created(&s, "?name=fallback", r#"{"y": ["b", "a", "b", "a"], "x": [[0], [1], [2], [3]]}"#, "application/json")
            .await;
    assert_eq!((d["name"].as_str(), d["target_kind"].as_str()), (Some("fallback"), Some("labels")));
    assert_eq!((d["features"].clone(), d["target"].clone()), (Value::Null, Value::Null));
    let d2 = created(&s, "", r#"{"x": [[0, 1]], "y": [2.5], "name": "own"}"#, "").await;
    assert_eq!(d2["name"], "own");
    for (body, status, pointer) in [
        (r#"{"x": [[1, 2], [3]], "y": [1, 2]}"#, 422, "/x/1"),
        (r#"{"x": [[1], [2]], "y": [1]}"#, 422, "/y"),
        (r#"{"x": [[1], [2]], "y": [1, "a"]}"#, 422, "/y/1"),
        (r#"{"x": [[1, "a"]], "y": [1]}"#, 400, "/x/0/1"),
        (r#"{"x": [[1]], "y": [1], "extra": 2}"#, 400, "/extra"),
        (r#"{"y": [1]}"#, 400, "/x"),
        (r#"{"x": [[1]], "y": [1"#, 400, "/y/1"),
    ] {
        let (got, p) = problem(upload(&s, "", body, "application/json").await).await;
        assert_eq!((got, pointers(&p)), (status, vec![pointer.to_string()]), "{body}: {p}");
    }
    // A training body names a dataset or carries rows, not both; unknown ids are 422.
    let (x, y) = common::sine(5);
    for body in [
        json!({"model": "kernel_ridge", "dataset": d2["id"], "x": x, "y": y}),
        json!({"model": "kernel_ridge", "dataset": "00000000-0000-0000-0000-000000000000"}),
        json!({"model": "kernel_ridge", "dataset": "nope"}),
    ] {
        let (status, p) = problem(s.post("/models", &body).await).await;
        assert_eq!((status, pointers(&p)), (422, vec!["/dataset".to_string()]), "{body}");
    }
    let (status, p) = problem(s.post("/models", &json!({"model": "kernel_ridge", "y": [1]})).await).await;
    assert_eq!((status, pointers(&p)), (400, vec!["/x".to_string()]));
}

#[tokio::test]
async fn uploads_over_the_dataset_limit_are_refused_and_leave_nothing() {
    let s = TestServer::start(Config { max_dataset_bytes: 200, ..Config::for_tests() }).await;
    let mut big = String::from("a,y\n");
    for i in 0..100 {
        big.push_str(&format!("{i},{i}\n"));
    }
    let (status, p) = problem(upload(&s, "", &big, "text/csv").await).await;
    assert_eq!(status, 413, "{p}");
    // Without a Content-Length the limit is counted as the body streams.
    let chunks: Vec<Result<String, std::io::Error>> = (0..40).map(|i| Ok(format!("{i},{i}\n"))).collect();
    let stream = futures_util::stream::iter(std::iter::once(Ok("a,y\n".to_string())).chain(chunks));
    let r = s
        .http
        .post(s.url("/datasets"))
        .header("content-type", "text/csv")
        .body(reqwest::Body::wrap_stream(stream))
        .send()
        .await
        .unwrap();
    assert_eq!(problem(r).await.0, 413);
    assert!(s.get("/datasets").await.json::<Value>().await.unwrap()["datasets"].as_array().unwrap().is_empty());
    // The body limit of other routes does not apply to uploads, and theirs still holds.
    let s = TestServer::start(Config { max_body_bytes: 100, ..Config::for_tests() }).await;
    created(&s, "", &big, "text/csv").await;
    let (x, y) = common::sine(40);
    let (status, _) = problem(s.post("/models", &json!({"model": "kernel_ridge", "x": x, "y": y})).await).await;
    assert_eq!(status, 413);
}

/// `?target=` present and empty: every column is a feature and the dataset serves the
/// models without targets; a JSON body without `y` likewise. Other models are 422 at
/// `/dataset`; `?target=` on a JSON body is 422 at `/target`.
#[tokio::test]
async fn datasets_without_a_target_serve_the_models_without_one() {
    let s = TestServer::default().await;
    let (csv, x, _) = table();
    let d = created(&s, "?target=", &csv, "text/csv").await;
    assert_eq!(d["features"], json!(["u", "v", "target"]), "{d}");
    assert_eq!(
        (d["target"].clone(), d["target_kind"].clone(), d["n_features"].clone()),
        (Value::Null, json!("numeric"), json!(3))
    );
    let m = s.train(&json!({"model": "one_class_svm", "dataset": d["id"], "params": {"nu": 0.2}})).await;
    assert_eq!((m["n_features"].clone(), m["features"].clone()), (json!(3), json!(["u", "v", "target"])));
    let (status, answer) = predict_csv(&s, m["id"].as_str().unwrap(), "", "target,v,u\n0.5,0.1,0.2\n").await;
    assert_eq!(status, 200, "{answer}");
    let pca = s.train(&json!({"model": "kernel_pca", "dataset": d["id"], "params": {"n_components": 2}})).await;
    assert_eq!(pca["training"]["n_components"], 2);
    // The plot sample has no target to colour by.
    let sample: Value = s.get(&format!("/models/{}/sample", pca["id"].as_str().unwrap())).await.json().await.unwrap();
    assert!(sample["y"].as_array().unwrap().iter().all(Value::is_null), "{sample}");
    for model in ["kernel_ridge", "svm", "gaussian_process"] {
        let (status, p) = problem(s.post("/models", &json!({"model": model, "dataset": d["id"]})).await).await;
        assert_eq!((status, pointers(&p)), (422, vec!["/dataset".to_string()]), "{model}: {p}");
        assert!(p["errors"][0]["message"].as_str().unwrap().contains("no target"), "{p}");
    }

    let j = created(&s, "", &json!({"x": x}).to_string(), "application/json").await;
    assert_eq!((j["target"].clone(), j["n_rows"].clone()), (Value::Null, json!(30)));
    s.train(&json!({"model": "one_class_svm", "dataset": j["id"]})).await;
    let (status, p) = problem(s.post("/models", &json!({"model": "kernel_ridge", "dataset": j["id"]})).await).await;
    assert_eq!((status, pointers(&p)), (422, vec!["/dataset".to_string()]), "{p}");

    for query in ["?target=y", "?target="] {
        let (status, p) = problem(upload(&s, query, r#"{"x": [[1]], "y": [1]}"#, "application/json").await).await;
        assert_eq!((status, pointers(&p)), (422, vec!["/target".to_string()]), "{query}: {p}");
    }
    // Neither refused upload left a dataset behind.
    let listed: Value = s.get("/datasets").await.json().await.unwrap();
    assert_eq!(listed["datasets"].as_array().unwrap().len(), 2, "{listed}");
}

#[tokio::test]
async fn datasets_and_feature_names_survive_a_restart() {
    let dir = std::env::temp_dir().join(format!("mercer-datasets-{}", uuid::Uuid::new_v4()));
    let config = Config { data_dir: dir.display().to_string(), ..Config::for_tests() };
    let (csv, _, _) = table();
    let (d, model) = {
        let mut s = TestServer::start(config.clone()).await;
        s.service().wait_ready().await;
        let d = created(&s, "", &csv, "text/csv").await;
        let none = created(&s, "?target=", &csv, "text/csv").await;
        let m = s.train(&json!({"model": "kernel_ridge", "dataset": d["id"]})).await;
        assert!(s.server.take().unwrap().shutdown().await);
        ((d, none), m)
    };
    let (d, none) = d;
    let s = TestServer::start(config).await;
    s.service().wait_ready().await;
    assert_eq!(s.get("/datasets").await.json::<Value>().await.unwrap(), json!({"datasets": [d.clone(), none.clone()]}));
    // Still without a target: it fits a one-class SVM and refuses a regression.
    s.train(&json!({"model": "one_class_svm", "dataset": none["id"]})).await;
    let (status, p) = problem(s.post("/models", &json!({"model": "kernel_ridge", "dataset": none["id"]})).await).await;
    assert_eq!((status, pointers(&p)), (422, vec!["/dataset".to_string()]), "{p}");
    let again = s.train(&json!({"model": "kernel_ridge", "dataset": d["id"]})).await;
    let mid = model["id"].as_str().unwrap();
    let restored: Value = s.get(&format!("/models/{mid}")).await.json().await.unwrap();
    assert_eq!((restored["dataset"].clone(), restored["features"].clone()), (d["id"].clone(), json!(["u", "v"])));
    let (status, before) = predict_csv(&s, mid, "", "v,u\n0.1,0.2\n").await;
    let (_, after) = predict_csv(&s, again["id"].as_str().unwrap(), "", "v,u\n0.1,0.2\n").await;
    assert_eq!((status, before), (200, after));
    std::fs::remove_dir_all(dir).unwrap();
}

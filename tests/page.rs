//! The web page's files (served without a token, under a strict Content-Security-Policy)
//! and the plot data behind it: GET /models/{id}/sample.

mod common;

use common::{problem, TestServer};
use mercer::config::Config;
use serde_json::{json, Value};

#[tokio::test]
async fn the_page_and_its_files_come_with_a_strict_policy_and_no_token() {
    let s = TestServer::start(Config { api_keys: "secret".into(), ..Config::for_tests() }).await;
    for (path, kind) in [("/", "text/html"), ("/ui/app.js", "text/javascript"), ("/ui/style.css", "text/css")] {
        let r = s.get(path).await;
        assert_eq!(r.status().as_u16(), 200, "{path} needs no token");
        let h = r.headers();
        assert!(h["content-type"].to_str().unwrap().starts_with(kind), "{path}: {:?}", h["content-type"]);
        let csp = h["content-security-policy"].to_str().unwrap();
        for part in ["default-src 'none'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'"] {
            assert!(csp.contains(part), "{path}: {csp}");
        }
        assert!(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"), "{csp}");
        assert_eq!(h["x-content-type-options"], "nosniff");
    }
    let page = s.get("/").await.text().await.unwrap();
    assert!(page.contains("/ui/app.js"), "the page loads its module");
    assert!(!page.contains("<script>") && !page.contains("style=\""), "no inline script or style");
    let (status, _) = problem(s.get("/ui/secrets.txt").await).await;
    assert_eq!(status, 404);
    let (status, _) = problem(s.get("/ui/..%2Fmod.rs").await).await;
    assert_eq!(status, 404);
    // The data behind the page still needs the token.
    let (status, _) = problem(s.get(&format!("/models/{}/sample", uuid::Uuid::new_v4())).await).await;
    assert_eq!(status, 401);
}

async fn sample(s: &TestServer, id: &Value) -> Value {
    let r = s.get(&format!("/models/{}/sample", id.as_str().unwrap())).await;
    assert_eq!(r.status().as_u16(), 200);
    r.json().await.unwrap()
}

#[tokio::test]
async fn a_sample_holds_training_rows_with_their_targets_and_the_kept_points() {
    let s = TestServer::default().await;
    let x: Vec<Vec<f64>> = (0..800).map(|i| vec![i as f64 / 100.0]).collect();
    let y: Vec<f64> = x.iter().map(|r| r[0].sin()).collect();
    let gp = s.train(&json!({"model": "gaussian_process", "params": {"noise": 0.1}, "x": x, "y": y})).await;
    let got = sample(&s, &gp["id"]).await;
    assert_eq!(got["n_train"], 800);
    let (sx, sy) = (got["x"].as_array().unwrap(), got["y"].as_array().unwrap());
    assert_eq!((sx.len(), sy.len()), (500, 500), "at most 500 rows");
    for (row, target) in sx.iter().zip(sy) {
        let v = row[0].as_f64().unwrap();
        let i = (v * 100.0).round() as usize;
        assert_eq!(row, &json!(x[i]), "a training row");
        assert_eq!(target.as_f64().unwrap(), y[i], "with its own target");
    }
    assert_eq!(got["support"].as_array().unwrap().len(), 500);

    let pts = json!([[0, 0], [0.2, 0.1], [0.1, 0.3], [3, 3], [3.2, 2.9], [2.8, 3.1], [0.3, 0.2], [3.1, 3.3]]);
    let labels = json!(["red", "red", "red", "blue", "blue", "blue", "red", "blue"]);
    let svm = s.train(&json!({"model": "svm", "x": pts, "y": labels})).await;
    let got = sample(&s, &svm["id"]).await;
    assert_eq!(got["y"].as_array().unwrap().iter().filter(|v| *v == "red").count(), 4, "labels as given");
    assert_eq!(
        got["support"].as_array().unwrap().len() as u64,
        svm["n_support"].as_u64().unwrap(),
        "the support vectors"
    );

    let text = s.train(&json!({"model": "kernel_ridge", "kernel": {"type": "spectrum", "k": 2}, "x": ["abc", "bcd", "xyz"], "y": [1, 2, 3]})).await;
    let got = sample(&s, &text["id"]).await;
    let mut rows: Vec<&str> = got["x"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    rows.sort();
    assert_eq!(rows, ["abc", "bcd", "xyz"]);
}

#[tokio::test]
async fn a_sample_is_stored_with_its_model_and_answers_409_while_training() {
    let dir = std::env::temp_dir().join(format!("mercer-sample-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    // One fit worker, so that blocking it keeps the next fit queued: with one per core a
    // free worker could finish the two-row fit before the sample is asked for (CI saw it).
    let config = || Config { data_dir: dir.display().to_string(), fit_workers: 1, ..Config::for_tests() };
    let s = TestServer::start(config()).await;
    s.service().wait_ready().await;
    let m = s.train(&json!({"model": "kernel_ridge", "x": [[1.0], [2.0], [3.0]], "y": [1, 4, 9]})).await;
    let before = sample(&s, &m["id"]).await;
    let blocked = s.block_worker();
    let r = s.post("/models?wait=false", &json!({"model": "kernel_ridge", "x": [[1.0], [2.0]], "y": [1, 2]})).await;
    let queued: Value = r.json().await.unwrap();
    let (status, _) = problem(s.get(&format!("/models/{}/sample", queued["id"].as_str().unwrap())).await).await;
    assert_eq!(status, 409, "no sample before the fit");
    drop(blocked);
    drop(s);
    let s = TestServer::start(config()).await;
    s.service().wait_ready().await;
    assert_eq!(sample(&s, &m["id"]).await, before, "read back from the store");
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn a_model_without_targets_keeps_its_datasets_labels_only_in_its_sample() {
    let s = TestServer::default().await;
    // Two clusters with a label column the fit must not use.
    let mut csv = String::from("a,b,kind\n");
    for i in 0..30 {
        let (c, label) = if i % 2 == 0 { (0.0, "near") } else { (5.0, "far") };
        csv.push_str(&format!("{},{},{label}\n", c + (i as f64) * 0.01, c - (i as f64) * 0.02));
    }
    let r = s.post_raw("/datasets?target=kind", csv.clone(), "text/csv").await;
    assert_eq!(r.status().as_u16(), 201);
    let ds: Value = r.json().await.unwrap();
    let on_dataset = s.train(&json!({"model": "kernel_pca", "dataset": ds["id"], "params": {"n_components": 2}})).await;
    assert_eq!(on_dataset["n_features"], 2, "the label column is not a feature");
    let got = sample(&s, &on_dataset["id"]).await;
    for (row, label) in got["x"].as_array().unwrap().iter().zip(got["y"].as_array().unwrap()) {
        let near = row[0].as_f64().unwrap() < 2.5;
        assert_eq!(label, if near { "near" } else { "far" }, "row {row} with its own label");
    }
    // The same rows sent without y: the sample has no labels, and the fit is the same.
    let x: Vec<Value> = got["x"].as_array().unwrap().clone();
    let rows: Vec<Vec<f64>> =
        csv.lines().skip(1).map(|l| l.split(',').take(2).map(|v| v.parse().unwrap()).collect()).collect();
    let on_rows = s.train(&json!({"model": "kernel_pca", "x": rows, "params": {"n_components": 2}})).await;
    assert_eq!(on_rows["training"]["eigenvalues"], on_dataset["training"]["eigenvalues"]);
    let plain = sample(&s, &on_rows["id"]).await;
    assert_eq!(plain["x"].as_array().unwrap(), &x);
    assert!(plain["y"].as_array().unwrap().iter().all(Value::is_null), "{}", plain["y"]);
}

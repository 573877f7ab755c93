//! Batched predictions over HTTP: 64 clients at once get the same bytes as 64 requests
//! sent one after another (and as a server with batching off), for an exact GP with its
//! variance, an SVM's probabilities and a Nystrom model; and batches did form.

mod common;

use common::TestServer;
use mercer::config::Config;
use serde_json::{json, Value};
use std::sync::Arc;

fn rows(n: usize, offset: usize) -> Vec<Vec<f64>> {
    (0..n)
        .map(|i| i + offset)
        .map(|i| (0..3).map(|k| ((i * (k + 2)) as f64 * 0.618_034 + k as f64) % 3.0).collect())
        .collect()
}

fn bodies() -> Vec<(Value, Value)> {
    let x = rows(400, 0);
    let y: Vec<f64> = x.iter().map(|r| r[0].sin() + 0.3 * r[1]).collect();
    let labels: Vec<&str> = x.iter().map(|r| ["a", "b", "c"][(r[0] as usize).min(2)]).collect();
    vec![
        (
            json!({"model": "gaussian_process", "kernel": {"type": "rbf", "length_scale": 0.8}, "params": {"noise": 0.01}, "x": x, "y": y}),
            json!({"variance": true}),
        ),
        (json!({"model": "svm", "params": {"probability": true}, "x": x, "y": labels}), json!({"probabilities": true})),
        (
            json!({"model": "gaussian_process", "params": {"approximation": "nystrom", "inducing_points": 60, "noise": 0.01}, "x": x, "y": y}),
            json!({"variance": true}),
        ),
        (json!({"model": "kernel_ridge", "params": {"lambda": 0.1}, "x": x, "y": y}), json!({})),
    ]
}

async fn answers(s: &Arc<TestServer>, id: &str, opts: &Value, concurrent: bool) -> Vec<String> {
    let q = rows(64, 5000);
    let body = |r: &Vec<f64>| {
        let mut b = opts.clone();
        b["x"] = json!([r]);
        b
    };
    if !concurrent {
        let mut out = Vec::new();
        for r in &q {
            out.push(s.post(&format!("/models/{id}/predict"), &body(r)).await.text().await.unwrap());
        }
        return out;
    }
    let tasks: Vec<_> = q
        .iter()
        .map(|r| {
            let (s, path, b) = (s.clone(), format!("/models/{id}/predict"), body(r));
            tokio::spawn(async move { s.post(&path, &b).await.text().await.unwrap() })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_answers_are_the_sequential_bytes_batched_or_not() {
    let batched = Arc::new(TestServer::start(Config { batch_delay_us: 2000, ..Config::for_tests() }).await);
    let unbatched = Arc::new(TestServer::start(Config { batch_delay_us: 0, ..Config::for_tests() }).await);
    for (fit, opts) in bodies() {
        let id = batched.train(&fit).await["id"].as_str().unwrap().to_string();
        let other = unbatched.train(&fit).await["id"].as_str().unwrap().to_string();
        let sequential = answers(&batched, &id, &opts, false).await;
        assert!(sequential[0].contains("predictions"), "{}", sequential[0]);
        let concurrent = answers(&batched, &id, &opts, true).await;
        let off = answers(&unbatched, &other, &opts, true).await;
        for i in 0..sequential.len() {
            assert_eq!(concurrent[i], sequential[i], "{} row {i}", fit["model"]);
            assert_eq!(off[i], sequential[i], "{} row {i}, batching off", fit["model"]);
        }
    }
    // Batches did form: fewer predict calls than requests on the batching server.
    let text = batched.get("/metrics").await.text().await.unwrap();
    let value = |name: &str| -> f64 {
        text.lines().find(|l| l.starts_with(name)).and_then(|l| l.split_whitespace().last()).unwrap().parse().unwrap()
    };
    let (calls, rows) = (value("mercer_predict_batch_rows_count"), value("mercer_predict_batch_rows_sum"));
    assert!(rows > calls, "{rows} rows in {calls} calls: no batch formed");
    let off = unbatched.get("/metrics").await.text().await.unwrap();
    assert!(off.contains("mercer_predict_batch_rows_count 0"), "batching off still batched");
}

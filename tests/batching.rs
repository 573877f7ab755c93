//! Batched predictions over HTTP: 64 clients at once get the same bytes as 64 requests
//! sent one after another (and as a server with batching off), for an exact GP with its
//! variance, an SVM's probabilities and a Nystrom model; and batches did form. And heavy
//! prediction-side work (a large predict, draws, an inverse transform: all through
//! `Service::run_heavy`) is counted busy while it runs, also when it panics.

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
    common::at_once(q.iter().map(|r| {
        let (s, path, b) = (s.clone(), format!("/models/{id}/predict"), body(r));
        async move { s.post(&path, &b).await.text().await.unwrap() }
    }))
    .await
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heavy_work_is_counted_busy_while_it_runs() {
    let s = TestServer::default().await;
    let service = s.service().clone();
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let running = tokio::spawn({
        let service = service.clone();
        async move {
            service
                .run_heavy(uuid::Uuid::nil(), 10, move |_| {
                    started_tx.send(()).unwrap();
                    release_rx.recv().unwrap();
                    7
                })
                .await
        }
    });
    tokio::task::spawn_blocking(move || started_rx.recv().unwrap()).await.unwrap();
    assert_eq!(service.heavy_running(), 1, "counted while it runs");
    release_tx.send(()).unwrap();
    assert_eq!(running.await.unwrap().unwrap(), 7);
    assert_eq!(service.heavy_running(), 0, "and no longer once done");
    let failed = service.run_heavy(uuid::Uuid::nil(), 10, |_| -> usize { panic!("a predict that panics") }).await;
    assert!(failed.is_err(), "a panic is a failed prediction");
    assert_eq!(service.heavy_running(), 0, "a panic is no longer counted");
}

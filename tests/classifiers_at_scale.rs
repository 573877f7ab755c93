//! `svm` and `kernel_logistic` with `approximation: nystrom` through the HTTP API: what
//! the resource reports, string rows with the default (uniform) inducing rows, a restart,
//! and progress and DELETE during a fit. The numbers themselves are checked against
//! scikit-learn in tests/nystrom_classifiers.rs.

mod common;

use common::{problem, TestServer};
use mercer::config::Config;
use serde_json::{json, Value};
use std::time::Duration;

/// Rows spread over [-2, 2)^2, labelled by a smooth boundary into `classes` classes.
fn rows(n: usize, classes: usize) -> (Vec<Vec<f64>>, Vec<u64>) {
    let x: Vec<Vec<f64>> = (0..n)
        .map(|i| vec![(i as f64 * 0.618_034).rem_euclid(4.0) - 2.0, (i as f64 * 0.414_214).rem_euclid(4.0) - 2.0])
        .collect();
    let y = x
        .iter()
        .map(|r| {
            let f = (1.5 * r[0]).sin() + 0.8 * r[1] * r[1] - 1.0;
            if classes == 2 {
                u64::from(f > 0.0)
            } else {
                u64::from(f > -0.5) + u64::from(f > 0.6)
            }
        })
        .collect();
    (x, y)
}

async fn predict(s: &TestServer, id: &str, x: &[Vec<f64>]) -> Value {
    s.post(&format!("/models/{id}/predict"), &json!({"x": x})).await.json().await.unwrap()
}

#[tokio::test]
async fn nystrom_classifiers_report_their_fit_and_survive_a_restart() {
    let dir = std::env::temp_dir().join(format!("mercer-nystrom-cls-{}", uuid::Uuid::new_v4()));
    let config = Config { data_dir: dir.display().to_string(), ..Config::for_tests() };
    let (x, y) = rows(400, 3);
    let q = &x[..9];
    let mut before = Vec::new();
    {
        let mut s = TestServer::start(config.clone()).await;
        s.service().wait_ready().await;
        for (model, params) in [
            ("svm", json!({"c": 2.0, "class_weight": {"1": 2.0}})),
            ("kernel_logistic", json!({"lambda": 0.1, "inducing_selection": "uniform"})),
        ] {
            let mut params = params;
            params["approximation"] = json!("nystrom");
            params["inducing_points"] = json!(30);
            let m = s
                .train(
                    &json!({"model": model, "kernel": {"type": "rbf", "gamma": 1.0}, "params": params, "x": x, "y": y}),
                )
                .await;
            let t = &m["training"];
            assert_eq!(
                (t["approximation"].as_str(), t["inducing_points"].as_u64()),
                (Some("nystrom"), Some(30)),
                "{m}"
            );
            assert_eq!((m["n_support"].as_u64(), t["converged"].as_bool()), (Some(30), Some(true)), "{m}");
            assert_eq!(t["jitter"], json!(0.0), "{m}");
            assert!(t["n_support_per_class"].is_null(), "{m}");
            let p = predict(&s, m["id"].as_str().unwrap(), &x).await;
            let right =
                p["predictions"].as_array().unwrap().iter().zip(&y).filter(|(a, b)| a.as_u64() == Some(**b)).count();
            assert!(right >= 360, "{model}: {right} of 400 training rows right");
            if model == "svm" {
                // LIBLINEAR's defaults for a nystrom svm, shown in the echo.
                assert_eq!((&m["params"]["tol"], &m["params"]["max_iter"]), (&json!(0.1), &json!(1000)), "{m}");
                assert_eq!(m["params"]["inducing_selection"], Value::Null, "numbers: kmeans, shown as the default");
                assert!(t["inducing_indices"].is_null(), "k-means centres are not rows: {m}");
                assert_eq!(p["decision_function"][0].as_array().unwrap().len(), 3, "{p}");
                assert!(p["probabilities"].is_null(), "{p}");
            } else {
                assert_eq!(t["inducing_indices"].as_array().unwrap().len(), 30, "{m}");
                for row in p["probabilities"].as_array().unwrap() {
                    let total: f64 = row.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).sum();
                    assert!((total - 1.0).abs() < 1e-12, "{row}");
                }
            }
            let id = m["id"].as_str().unwrap().to_string();
            before.push((id.clone(), m, predict(&s, &id, q).await));
        }
        assert!(s.server.take().unwrap().shutdown().await);
    }
    let s = TestServer::start(config).await;
    s.service().wait_ready().await;
    for (id, m, p) in before {
        let again: Value = s.get(&format!("/models/{id}")).await.json().await.unwrap();
        assert_eq!((&again["training"], &again["params"]), (&m["training"], &m["params"]));
        assert_eq!(predict(&s, &id, q).await, p, "identical answers after the restart");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// Strings have no k-means: the default selection is uniform, and the rows it drew are
/// reported. probability is refused for a nystrom svm, also when auto resolves to it.
#[tokio::test]
async fn string_rows_take_uniform_inducing_rows_and_probability_is_refused() {
    let s = TestServer::default().await;
    let words = ["abcab", "bcabc", "cabca", "xyzxy", "yzxyz", "zxyzx", "abxyz", "xyabc"];
    let x: Vec<String> = (0..80).map(|i| format!("{}{}", words[i % 8], words[(i * 3) % 8])).collect();
    let y: Vec<&str> = (0..80).map(|i| if x[i].starts_with(['a', 'b', 'c']) { "abc" } else { "xyz" }).collect();
    for model in ["svm", "kernel_logistic"] {
        let body = json!({"model": model, "kernel": {"type": "spectrum", "k": 2},
                          "params": {"approximation": "nystrom", "inducing_points": 12, "seed": 4}, "x": x, "y": y});
        let m = s.train(&body).await;
        let rows = m["training"]["inducing_indices"].as_array().unwrap_or_else(|| panic!("{m}"));
        assert_eq!(rows.len(), 12, "{m}");
        let p = predict_text(&s, m["id"].as_str().unwrap(), &x).await;
        assert_eq!(p["predictions"], json!(y), "{model}: {p}");
    }
    let body = json!({"model": "svm", "params": {"approximation": "nystrom", "probability": true}, "x": [[0.0], [1.0]], "y": [0, 1]});
    let (status, p) = problem(s.post("/models", &body).await).await;
    assert_eq!((status, p["errors"][0]["pointer"].as_str()), (422, Some("/params/probability")), "{p}");
}

async fn predict_text(s: &TestServer, id: &str, x: &[String]) -> Value {
    s.post(&format!("/models/{id}/predict"), &json!({"x": x})).await.json().await.unwrap()
}

/// A nystrom kernel_logistic fit counts its Newton steps in its progress, and a DELETE
/// stops it.
#[tokio::test]
async fn a_nystrom_classifier_fit_reports_progress_and_stops_when_deleted() {
    let s = TestServer::default().await;
    let (x, y) = rows(30_000, 3);
    let body = json!({"model": "kernel_logistic", "kernel": {"type": "rbf", "gamma": 2.0},
                      "params": {"lambda": 1e-4, "approximation": "nystrom", "inducing_points": 600}, "x": x, "y": y});
    let r = s.http.post(s.url("/models?wait=false")).body(body.to_string()).send().await.unwrap();
    assert_eq!(r.status(), 202);
    let id = r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_string();
    let seen = tokio::time::timeout(Duration::from_secs(300), async {
        loop {
            let m: Value = s.get(&format!("/models/{id}")).await.json().await.unwrap();
            if m["status"] == "training"
                && m["progress"]["phase"] == "solve"
                && m["progress"]["iteration"].as_u64() >= Some(1)
            {
                return m;
            }
            assert!(matches!(m["status"].as_str(), Some("queued" | "training")), "{m}");
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the Newton steps start");
    assert!(seen["progress"]["objective"].as_f64().unwrap().is_finite(), "{seen}");
    assert_eq!(s.delete(&format!("/models/{id}")).await.status(), 204);
    let pool = s.service().pool.clone();
    tokio::time::timeout(Duration::from_secs(60), async {
        while pool.running() > 0 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the deleted fit stops");
    assert_eq!(s.get(&format!("/models/{id}")).await.status(), 404);
}

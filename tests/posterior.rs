//! POST /models/{id}/posterior_samples: joint draws from a GP's predictive distribution,
//! checked in distribution against scikit-learn's predictive mean and covariance
//! (tests/fixtures/generate_gp_options.py), reproducible by seed, and refused as the
//! contract says.

mod common;

use common::{pointers, problem, TestServer};
use serde_json::{json, Value};

fn fixtures() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/gp_options_reference.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn matrix(v: &Value) -> Vec<Vec<f64>> {
    v.as_array().unwrap().iter().map(|r| r.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()).collect()
}

async fn draws(s: &TestServer, id: &str, body: Value) -> Vec<Vec<f64>> {
    let r = s.post(&format!("/models/{id}/posterior_samples"), &body).await;
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    matrix(&v["samples"])
}

/// The draws' sample mean and covariance are the predictive ones within five standard
/// errors of their estimates (for a covariance entry, sqrt((S_ii S_jj + S_ij^2) / N)).
fn follow(samples: &[Vec<f64>], mean: &[f64], cov: &[Vec<f64>], what: &str) {
    let m = mean.len();
    let n = samples[0].len() as f64;
    assert_eq!(samples.len(), m, "{what}: one row per query row");
    for i in 0..m {
        let mu = samples[i].iter().sum::<f64>() / n;
        let se = (cov[i][i].max(0.0) / n).sqrt();
        assert!((mu - mean[i]).abs() <= 5.0 * se + 1e-9, "{what}: mean {i}: {mu} vs {}", mean[i]);
        for j in 0..m {
            let c = samples[i].iter().zip(&samples[j]).map(|(a, b)| (a - mean[i]) * (b - mean[j])).sum::<f64>() / n;
            let se = ((cov[i][i] * cov[j][j] + cov[i][j] * cov[i][j]).max(0.0) / n).sqrt();
            assert!((c - cov[i][j]).abs() <= 5.0 * se + 1e-9, "{what}: covariance {i},{j}: {c} vs {}", cov[i][j]);
        }
    }
}

#[tokio::test]
async fn draws_have_scikit_learns_predictive_mean_and_covariance() {
    let s = TestServer::default().await;
    for case in fixtures()["posterior"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let m = s.train(&case["body"]).await;
        let id = m["id"].as_str().unwrap();
        let mean: Vec<f64> = case["mean"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        let got = draws(&s, id, json!({"x": case["query"], "n_samples": 20000, "seed": 3})).await;
        follow(&got, &mean, &matrix(&case["covariance"]), name);
        let noisy =
            draws(&s, id, json!({"x": case["query"], "n_samples": 20000, "seed": 4, "include_noise": true})).await;
        follow(&noisy, &mean, &matrix(&case["covariance_with_noise"]), &format!("{name}, include_noise"));
        // One seed, one set of draws; the defaults are one draw from seed 0.
        let again = draws(&s, id, json!({"x": case["query"], "n_samples": 20000, "seed": 3})).await;
        assert_eq!(again, got, "{name}: the same seed");
        let one = draws(&s, id, json!({"x": case["query"]})).await;
        assert!(one.iter().all(|r| r.len() == 1), "{name}: n_samples defaults to 1");
        assert_eq!(one, draws(&s, id, json!({"x": case["query"], "n_samples": 1, "seed": 0})).await);
        assert_ne!(one, draws(&s, id, json!({"x": case["query"], "n_samples": 1, "seed": 1})).await);
    }
}

/// A nystrom GP draws from its own predictive covariance (as its predict answers it).
#[tokio::test]
async fn a_nystrom_gp_draws_from_its_predictive_covariance() {
    let s = TestServer::default().await;
    let x: Vec<Vec<f64>> = (0..300).map(|i| vec![i as f64 / 50.0]).collect();
    let y: Vec<f64> = x.iter().map(|r| r[0].sin()).collect();
    let m = s
        .train(&json!({"model": "gaussian_process", "kernel": {"type": "rbf", "length_scale": 0.7},
                       "params": {"noise": 0.05, "approximation": "nystrom", "inducing_points": 30}, "x": x, "y": y}))
        .await;
    let id = m["id"].as_str().unwrap();
    let query = json!([[0.5], [1.0], [4.0], [7.5]]);
    let p: Value =
        s.post(&format!("/models/{id}/predict"), &json!({"x": query, "covariance": true})).await.json().await.unwrap();
    let mean: Vec<f64> = p["predictions"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    let got = draws(&s, id, json!({"x": query, "n_samples": 20000, "seed": 9})).await;
    follow(&got, &mean, &matrix(&p["covariance"]), "nystrom");
}

#[tokio::test]
async fn bad_requests_name_their_place() {
    let s = TestServer::default().await;
    let gp = s.train(&json!({"model": "gaussian_process", "x": [[0.0], [1.0], [2.0]], "y": [0.0, 1.0, 0.5]})).await;
    let id = gp["id"].as_str().unwrap();
    let svm = s.train(&json!({"model": "svm", "x": [[0.0], [1.0], [2.0], [3.0]], "y": [0, 0, 1, 1]})).await;
    let path = |id: &str| format!("/models/{id}/posterior_samples");
    let expect = |got: (u16, Value), status: u16, pointer: &str, what: &str| {
        assert_eq!(got.0, status, "{what}: {}", got.1);
        assert!(pointers(&got.1).iter().any(|p| p == pointer), "{what}: {}", got.1);
    };
    expect(
        problem(s.post(&path(svm["id"].as_str().unwrap()), &json!({"x": [[0.5]]})).await).await,
        422,
        "/model",
        "an svm",
    );
    expect(problem(s.post(&path(id), &json!({"x": [[0.5]], "n_samples": 0})).await).await, 422, "/n_samples", "none");
    let many: Vec<Vec<f64>> = (0..2000).map(|i| vec![i as f64 / 1000.0]).collect();
    expect(
        problem(s.post(&path(id), &json!({"x": many, "n_samples": 10001})).await).await,
        422,
        "/n_samples",
        "over 2e7 numbers",
    );
    let limit = mercer::config::Config::for_tests().max_covariance_rows;
    let over: Vec<Vec<f64>> = (0..=limit).map(|i| vec![i as f64]).collect();
    expect(problem(s.post(&path(id), &json!({"x": over})).await).await, 422, "/x", "over the covariance rows");
    expect(problem(s.post(&path(id), &json!({"x": [[0.5, 1.0]]})).await).await, 422, "/x/0", "a wrong width");
    let (status, _) = problem(s.post(&path(id), &json!({"x": [[0.5]], "samples": 3})).await).await;
    assert_eq!(status, 400, "an unknown field");
    // A CSV body with the options in the query string.
    let r = s.post_raw(&format!("{}?n_samples=3&seed=2", path(id)), "x\n0.5\n1.5\n", "text/csv").await;
    assert_eq!(r.status(), 200);
    let csv: Value = r.json().await.unwrap();
    assert_eq!(
        csv["samples"],
        json!(draws(&s, id, json!({"x": [[0.5], [1.5]], "n_samples": 3, "seed": 2})).await),
        "CSV and JSON bodies draw alike"
    );
}

//! Online updates over HTTP: POST /models/{id}/observations against refits, its errors,
//! concurrent appends, and what a restart keeps.

mod common;

use common::{pointers, problem, TestServer};
use mercer::config::Config;
use serde_json::{json, Value};
use std::path::PathBuf;

fn rows(n: usize, seed: f64) -> (Vec<Vec<f64>>, Vec<f64>) {
    let x: Vec<Vec<f64>> =
        (0..n).map(|i| vec![((i as f64 + seed) * 0.731).sin() * 3.0, ((i as f64) * 0.37 + seed).cos()]).collect();
    let y = x.iter().map(|r| r[0].sin() + 0.5 * r[1] + 3.0).collect();
    (x, y)
}

fn body(model: &str, params: Value, x: &[Vec<f64>], y: &[f64]) -> Value {
    json!({"model": model, "kernel": {"type": "rbf", "length_scale": 1.3}, "params": params, "x": x, "y": y})
}

fn query() -> Value {
    let (q, _) = rows(11, 9.5);
    json!({"x": q, "variance": true})
}

async fn predict(s: &TestServer, id: &str) -> Value {
    let r = s.post(&format!("/models/{id}/predict"), &query()).await;
    assert_eq!(r.status().as_u16(), 200);
    r.json().await.unwrap()
}

/// Every number of `a` within 1e-9 relative of `b`'s (`floor` for values near zero).
/// The `X-Mercer-Model-Version` of a prediction's answer (JSON and CSV agree).
async fn answering_version(s: &TestServer, id: &str) -> u64 {
    let json = s.post(&format!("/models/{id}/predict"), &query()).await;
    let csv = s.http.post(s.url(&format!("/models/{id}/predict"))).header("accept", "text/csv").json(&query());
    let csv = csv.send().await.unwrap();
    let version = |r: &reqwest::Response| -> u64 {
        assert_eq!(r.status(), 200);
        r.headers()["x-mercer-model-version"].to_str().unwrap().parse().unwrap()
    };
    let v = version(&json);
    assert_eq!(version(&csv), v, "the CSV answer names the same version");
    v
}

fn assert_close(a: &Value, b: &Value, floor: f64, what: &str) {
    let (a, b) = (a.as_array().unwrap(), b.as_array().unwrap());
    assert_eq!(a.len(), b.len(), "{what}");
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
        assert!((x - y).abs() <= 1e-9 * y.abs().max(floor), "{what}: {x} vs refit {y}");
    }
}

async fn append(s: &TestServer, id: &str, x: &[Vec<f64>], y: &[f64]) -> (u16, Value) {
    let r = s.post(&format!("/models/{id}/observations"), &json!({"x": x, "y": y})).await;
    let status = r.status().as_u16();
    (status, r.json().await.unwrap())
}

/// Appends in steps of 1, 4 and 10 rows: each answers the next version, and the model
/// predicts (mean and variance) as a refit on all its rows does, for a GP with
/// normalize_y and for kernel ridge.
#[tokio::test]
async fn appends_answer_the_next_version_and_equal_a_refit() {
    let s = TestServer::default().await;
    let (x, y) = rows(45, 0.0);
    for (model, params) in
        [("gaussian_process", json!({"noise": 0.01, "normalize_y": true})), ("kernel_ridge", json!({"lambda": 0.1}))]
    {
        let m = s.train(&body(model, params.clone(), &x[..30], &y[..30])).await;
        let id = m["id"].as_str().unwrap();
        assert_eq!((m["version"].as_u64(), m["n_train"].as_u64()), (Some(1), Some(30)));
        assert_eq!(answering_version(&s, id).await, 1, "a prediction names the version that computed it");
        let mut n = 30;
        for (step, k) in [1, 4, 10].into_iter().enumerate() {
            let (status, grown) = append(&s, id, &x[n..n + k], &y[n..n + k]).await;
            n += k;
            assert_eq!(status, 200, "{grown}");
            assert_eq!(grown["version"].as_u64(), Some(step as u64 + 2), "{grown}");
            assert_eq!((grown["n_train"].as_u64(), grown["id"].as_str()), (Some(n as u64), Some(id)));
            let listed: Value = s.get(&format!("/models/{id}")).await.json().await.unwrap();
            assert_eq!(listed, grown, "GET shows the version the append answered");
            assert_eq!(
                answering_version(&s, id).await,
                step as u64 + 2,
                "{model}: the predict header after the append"
            );
            let refit = s.train(&body(model, params.clone(), &x[..n], &y[..n])).await;
            let (a, b) = (predict(&s, id).await, predict(&s, refit["id"].as_str().unwrap()).await);
            assert_close(&a["predictions"], &b["predictions"], 1.0, &format!("{model} at n = {n}"));
            if model == "gaussian_process" {
                assert_close(&a["variance"], &b["variance"], 1e-3, &format!("{model} variance at n = {n}"));
                let (la, lb) =
                    (&grown["training"]["log_marginal_likelihood"], &refit["training"]["log_marginal_likelihood"]);
                assert_close(&json!([la]), &json!([lb]), 1.0, "log marginal likelihood");
            }
        }
        // The page's plot sample has every row (fewer than its 500), the appended ones last.
        let sample: Value = s.get(&format!("/models/{id}/sample")).await.json().await.unwrap();
        assert_eq!(sample["n_train"], json!(45));
        assert_eq!((sample["x"].as_array().unwrap().len(), sample["y"].as_array().unwrap().len()), (45, 45));
        assert_eq!((&sample["x"][44], &sample["y"][44]), (&json!(x[44]), &json!(y[44])));
    }
}

#[tokio::test]
async fn bad_appends_get_problems_naming_the_field() {
    let s = TestServer::default().await;
    let (x, y) = rows(30, 1.0);
    let gp = s.train(&body("gaussian_process", json!({"noise": 0.01}), &x, &y)).await;
    let gp = gp["id"].as_str().unwrap().to_string();
    let svm =
        s.train(&json!({"model": "svm", "x": x, "y": y.iter().map(|v| (*v > 3.0) as i32).collect::<Vec<_>>()})).await;
    let nystrom =
        s.train(&body("gaussian_process", json!({"approximation": "nystrom", "inducing_points": 10}), &x, &y)).await;
    let path = |id: &Value| format!("/models/{}/observations", id.as_str().unwrap());
    let one = json!({"x": [[0.5, 0.5]], "y": [1.0]});
    for (at, req, want, pointer) in [
        (path(&svm["id"]), one.clone(), 422, "/model"),
        (path(&nystrom["id"]), one.clone(), 422, "/model"),
        (format!("/models/{gp}/observations"), json!({"x": [[0.5]], "y": [1.0]}), 422, "/x/0"),
        (format!("/models/{gp}/observations"), json!({"x": [[0.5, 0.5]], "y": [1.0, 2.0]}), 422, "/y"),
        (format!("/models/{gp}/observations"), json!({"x": [], "y": []}), 422, "/x"),
        (format!("/models/{gp}/observations"), json!({"x": [[0.5, 0.5]], "y": ["a"]}), 400, "/y/0"),
        (format!("/models/{gp}/observations"), json!({"x": [[0.5, 0.5]]}), 400, ""),
        (format!("/models/{gp}/observations"), json!({"x": [[0.5, 0.5]], "y": [1], "z": 1}), 400, ""),
    ] {
        let (status, p) = problem(s.post(&at, &req).await).await;
        assert_eq!(status, want, "{req}: {p}");
        if !pointer.is_empty() {
            assert_eq!(pointers(&p), vec![pointer.to_string()], "{req}: {p}");
        }
    }
    let unknown = uuid::Uuid::new_v4();
    let (status, _) = problem(s.post(&format!("/models/{unknown}/observations"), &one).await).await;
    assert_eq!(status, 404);
    // The kind is checked before readiness: a queued svm is 422, a queued GP 409. Every
    // worker is held, so both stay queued.
    let _busy: Vec<_> = (0..s.service().pool.workers()).map(|_| s.block_worker()).collect();
    let queued =
        |model: &str| json!({"model": model, "x": x, "y": y.iter().map(|v| (*v > 3.0) as i32).collect::<Vec<_>>()});
    for (model, want) in [("svm", 422), ("gaussian_process", 409)] {
        let q: Value = s.post("/models?wait=false", &queued(model)).await.json().await.unwrap();
        let (status, p) = problem(s.post(&path(&q["id"]), &one).await).await;
        assert_eq!(status, want, "queued {model}: {p}");
    }
    // Nothing above changed the GP.
    let m: Value = s.get(&format!("/models/{gp}")).await.json().await.unwrap();
    assert_eq!((m["version"].as_u64(), m["n_train"].as_u64()), (Some(1), Some(30)));
}

/// Concurrent appends to one model are serialised: each gets its own version, none is
/// lost, and the result equals a refit on every row (a GP does not depend on row order).
#[tokio::test]
async fn concurrent_appends_are_serialised_and_none_is_lost() {
    let s = TestServer::default().await;
    let (x, y) = rows(40, 2.0);
    let params = json!({"noise": 0.01});
    let m = s.train(&body("gaussian_process", params.clone(), &x[..24], &y[..24])).await;
    let id = m["id"].as_str().unwrap().to_string();
    let appends = (0..8).map(|i| {
        let (s, id) = (&s, &id);
        let (xs, ys) = (x[24 + 2 * i..26 + 2 * i].to_vec(), y[24 + 2 * i..26 + 2 * i].to_vec());
        async move { append(s, id, &xs, &ys).await }
    });
    let answers = futures_util::future::join_all(appends).await;
    let mut versions: Vec<u64> = answers
        .iter()
        .map(|(status, m)| {
            assert_eq!(*status, 200, "{m}");
            m["version"].as_u64().unwrap()
        })
        .collect();
    versions.sort_unstable();
    assert_eq!(versions, (2..=9).collect::<Vec<u64>>());
    let last: Value = s.get(&format!("/models/{id}")).await.json().await.unwrap();
    assert_eq!((last["version"].as_u64(), last["n_train"].as_u64()), (Some(9), Some(40)));
    let refit = s.train(&body("gaussian_process", params, &x, &y)).await;
    let (a, b) = (predict(&s, &id).await, predict(&s, refit["id"].as_str().unwrap()).await);
    assert_close(&a["predictions"], &b["predictions"], 1.0, "after concurrent appends");
    assert_close(&a["variance"], &b["variance"], 1e-3, "variance after concurrent appends");
}

async fn stop(mut s: TestServer) {
    assert!(s.server.take().unwrap().shutdown().await, "clean shutdown");
}

fn temp_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("mercer-observations-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The append is stored before its 200: a restarted server has the grown model, at its
/// version, predicting the same bits; and later appends grow it further.
#[tokio::test]
async fn a_restart_keeps_the_appended_version() {
    let dir = temp_dir();
    let config = || Config { data_dir: dir.display().to_string(), ..Config::for_tests() };
    let (x, y) = rows(36, 3.0);
    let s = TestServer::start(config()).await;
    s.service().wait_ready().await;
    let m = s.train(&body("kernel_ridge", json!({"lambda": 0.05}), &x[..30], &y[..30])).await;
    let id = m["id"].as_str().unwrap().to_string();
    let (status, grown) = append(&s, &id, &x[30..33], &y[30..33]).await;
    assert_eq!(status, 200, "{grown}");
    let before = predict(&s, &id).await;
    stop(s).await;

    let s = TestServer::start(config()).await;
    s.service().wait_ready().await;
    let again: Value = s.get(&format!("/models/{id}")).await.json().await.unwrap();
    assert_eq!(again, grown, "the stored version is the acknowledged one");
    assert_eq!(predict(&s, &id).await.to_string(), before.to_string(), "bit-identical after the restart");
    let (status, more) = append(&s, &id, &x[33..], &y[33..]).await;
    assert_eq!((status, more["version"].as_u64(), more["n_train"].as_u64()), (200, Some(3), Some(36)), "{more}");
    let refit = s.train(&body("kernel_ridge", json!({"lambda": 0.05}), &x, &y)).await;
    let (a, b) = (predict(&s, &id).await, predict(&s, refit["id"].as_str().unwrap()).await);
    assert_close(&a["predictions"], &b["predictions"], 1.0, "appended after the restart");
    stop(s).await;
    let _ = std::fs::remove_dir_all(dir);
}

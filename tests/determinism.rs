//! The same question, the same answer (issue 57), over HTTP: for every kind of the
//! catalogue, exact and approximate, 64 single-row requests sent one after another and
//! from 64 concurrent clients get the same bytes (as JSON, as CSV and through OIP's
//! infer); so do a GP's covariance and its seeded
//! posterior draws asked 16 times at once; and the same fit answers the same bytes from
//! a server with one fit worker, one with two, and the replica that read it from the store.

mod common;

use common::switchable::{replica, shared_store};
use common::TestServer;
use mercer::config::Config;
use mercer::estimator::{ModelKind, Task};
use serde_json::{json, Value};
use std::sync::Arc;

fn rows(n: usize, offset: usize) -> Vec<Vec<f64>> {
    (0..n)
        .map(|i| i + offset)
        .map(|i| (0..3).map(|k| ((i * (k + 3)) as f64 * 0.618_034 + k as f64 * 0.3) % 3.0).collect())
        .collect()
}

/// One model to ask: a label, the fit body, the predict options, the route.
struct Form {
    label: String,
    fit: Value,
    options: Value,
    route: &'static str,
}

/// Every kind exact, with Nystrom and variational where the catalogue has them.
fn forms() -> Vec<Form> {
    let x = rows(300, 0);
    let y: Vec<f64> = x.iter().map(|r| r[0].sin() + 0.3 * r[1]).collect();
    let labels: Vec<&str> = x.iter().map(|r| ["low", "mid", "high"][(r[0] as usize).min(2)]).collect();
    let mut out = Vec::new();
    for kind in ModelKind::ALL {
        let can = kind.can();
        let approximations = std::iter::once("exact")
            .chain(can.nystrom.then_some("nystrom"))
            .chain(can.variational.then_some("variational"));
        for form in approximations {
            let mut params = match kind.name() {
                "kernel_pca" => json!({"n_components": 3}),
                "rbf_network" => json!({"lambda": 0.01}),
                "gaussian_process" => json!({"noise": 0.01}),
                _ => json!({}),
            };
            if form != "exact" {
                params["approximation"] = json!(form);
                params["inducing_points"] = json!(40);
                if form == "variational" {
                    params["epochs"] = json!(3);
                    params["batch_size"] = json!(64);
                }
            }
            let probabilities = can.probabilities && !(form != "exact" && kind.name().contains("svm"));
            if probabilities && kind.name().contains("svm") {
                params["probability"] = json!(true);
            }
            let mut fit =
                json!({"model": kind.name(), "kernel": {"type": "rbf", "gamma": 0.5}, "params": params, "x": x});
            match kind.task() {
                Task::Regression => fit["y"] = json!(y),
                Task::Classification => fit["y"] = json!(labels),
                Task::Novelty | Task::Transform => {}
            }
            let options = json!({"variance": can.posterior, "probabilities": probabilities});
            let route = if kind.task() == Task::Transform { "transform" } else { "predict" };
            let options = if route == "transform" { json!({}) } else { options };
            out.push(Form { label: format!("{} {form}", kind.name()), fit, options, route });
        }
    }
    out
}

fn with_rows(options: &Value, x: &[Vec<f64>]) -> Value {
    let mut b = options.clone();
    b["x"] = json!(x);
    b
}

/// How a row is asked: the JSON route, the same with a CSV answer, or OIP's infer.
#[derive(Clone, Copy, Debug)]
enum Ask {
    Json,
    Csv,
    Oip,
}

/// One row's request under `ask`: its body's answer.
async fn ask(s: &TestServer, id: &str, form: (&'static str, &Value), how: Ask, row: &[f64]) -> String {
    let (route, options) = form;
    let request = match how {
        Ask::Json => s.http.post(s.url(&format!("/models/{id}/{route}"))).json(&with_rows(options, &[row.to_vec()])),
        Ask::Csv => s
            .http
            .post(s.url(&format!("/models/{id}/{route}")))
            .header("accept", "text/csv")
            .json(&with_rows(options, &[row.to_vec()])),
        Ask::Oip => s
            .http
            .post(s.url(&format!("/v2/models/{id}/infer")))
            .json(&json!({"inputs": [{"name": "x", "shape": [1, row.len()], "datatype": "FP64", "data": row}]})),
    };
    request.send().await.expect("request sent").text().await.unwrap()
}

/// 64 single-row requests, one after another or all at once; the answers' bodies.
async fn single_rows(
    s: &Arc<TestServer>,
    id: &str,
    form: (&'static str, &Value),
    how: Ask,
    concurrent: bool,
) -> Vec<String> {
    let q = rows(64, 5000);
    if !concurrent {
        let mut out = Vec::new();
        for r in &q {
            out.push(ask(s, id, form, how, r).await);
        }
        return out;
    }
    common::at_once(q.into_iter().map(|r| {
        let (s, id, route, options) = (s.clone(), id.to_string(), form.0, form.1.clone());
        async move { ask(&s, &id, (route, &options), how, &r).await }
    }))
    .await
}

/// One body asked `times` times at once: every answer's body.
async fn at_once(s: &Arc<TestServer>, path: &str, body: &Value, times: usize) -> Vec<String> {
    common::at_once((0..times).map(|_| {
        let (s, path, body) = (s.clone(), path.to_string(), body.clone());
        async move { s.post(&path, &body).await.text().await.unwrap() }
    }))
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_kind_answers_concurrent_clients_with_the_sequential_bytes() {
    let s = Arc::new(TestServer::default().await);
    let mut failures = Vec::new();
    let forms = forms();
    assert!(forms.len() > ModelKind::ALL.len(), "every kind and its approximations");
    for form in forms {
        let id = s.train(&form.fit).await["id"].as_str().unwrap().to_string();
        // A transform answers JSON only.
        let hows: &[Ask] =
            if form.route == "transform" { &[Ask::Json, Ask::Oip] } else { &[Ask::Json, Ask::Csv, Ask::Oip] };
        for &how in hows {
            let sequential = single_rows(&s, &id, (form.route, &form.options), how, false).await;
            let first = &sequential[0];
            let answered = match how {
                Ask::Json => first.contains("\"predictions\"") || first.contains("\"embedding\""),
                Ask::Csv => !first.starts_with('{') && first.lines().count() == 2,
                Ask::Oip => first.contains("\"outputs\""),
            };
            assert!(answered, "{} {how:?}: {first}", form.label);
            for (asked, field) in [("variance", "variance"), ("probabilities", "probabilities")] {
                if matches!(how, Ask::Json) && form.options[asked] == json!(true) {
                    assert!(first.contains(field), "{} answers no {field}: {first}", form.label);
                }
            }
            let concurrent = single_rows(&s, &id, (form.route, &form.options), how, true).await;
            let differ = (0..64).filter(|&i| concurrent[i] != sequential[i]).count();
            if differ > 0 {
                failures.push(format!("{} {how:?}: {differ} of 64 rows differ under load", form.label));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A joint answer (the covariance of 12 rows, 5 seeded posterior draws at them) asked 16
/// times at once is one set of bytes, and the one asked alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn covariances_and_seeded_draws_do_not_depend_on_the_load() {
    let s = Arc::new(TestServer::default().await);
    let x = rows(1200, 0);
    let y: Vec<f64> = x.iter().map(|r| r[0].sin() + 0.3 * r[1]).collect();
    let q = rows(12, 7000);
    let fits = [
        json!({"model": "gaussian_process", "kernel": {"type": "rbf", "length_scale": 0.8}, "params": {"noise": 0.01}, "x": x, "y": y}),
        json!({"model": "gaussian_process", "params": {"approximation": "nystrom", "inducing_points": 80, "noise": 0.01}, "x": x, "y": y}),
    ];
    for fit in fits {
        let id = s.train(&fit).await["id"].as_str().unwrap().to_string();
        for (route, body) in [
            ("predict", json!({"x": q, "covariance": true})),
            ("posterior_samples", json!({"x": q, "n_samples": 5, "seed": 11})),
        ] {
            let path = format!("/models/{id}/{route}");
            let alone = s.post(&path, &body).await.text().await.unwrap();
            assert!(alone.contains("covariance") || alone.contains("samples"), "{alone}");
            for (i, answer) in at_once(&s, &path, &body, 16).await.iter().enumerate() {
                assert_eq!(answer, &alone, "{} {route}: answer {i} under load", fit["params"]);
            }
        }
    }
}

/// The same fit on a server with one fit worker, on one with two (fitting another model
/// beside it), and read from the store by a second replica: the same bytes for 64 rows
/// at once, with every output.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fit_workers_and_replicas_do_not_change_the_answer() {
    let store = shared_store();
    let one = replica(&store, Config { fit_workers: 1, store_refresh_secs: 3600, ..Config::for_tests() }).await;
    let other = replica(&store, Config { fit_workers: 1, store_refresh_secs: 3600, ..Config::for_tests() }).await;
    let two = Arc::new(TestServer::start(Config { fit_workers: 2, ..Config::for_tests() }).await);
    let q = rows(64, 9000);
    let mut failures = Vec::new();
    for form in forms() {
        let id = one.train(&form.fit).await["id"].as_str().unwrap().to_string();
        // On the two-worker server the same fit runs beside another one.
        let (beside, fitted) = tokio::join!(
            {
                let (two, body) = (two.clone(), form.fit.clone());
                async move { two.post("/models", &body).await.status() }
            },
            two.train(&form.fit)
        );
        assert_eq!(beside.as_u16(), 201, "{}", form.label);
        let id2 = fitted["id"].as_str().unwrap().to_string();
        let body = with_rows(&form.options, &q);
        let route = form.route;
        let a = one.post(&format!("/models/{id}/{route}"), &body).await.text().await.unwrap();
        let b = other.post(&format!("/models/{id}/{route}"), &body).await.text().await.unwrap();
        let c = two.post(&format!("/models/{id2}/{route}"), &body).await.text().await.unwrap();
        assert!(a.starts_with('{') && !a.contains("\"status\""), "{}: {a}", form.label);
        if a != b {
            failures.push(format!("{}: the other replica answers other bytes", form.label));
        }
        if a != c {
            failures.push(format!("{}: two fit workers answer other bytes", form.label));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

//! Studies over HTTP: create, suggest, tell, warm starts, list, get, delete; every error
//! at its pointer; concurrent suggests that never share a trial id or a point; two
//! replicas on one store; a restart that keeps what was told.

mod common;

use common::{pointers, problem, TestServer};
use serde_json::{json, Value};
use std::collections::HashSet;

fn branin_space() -> Value {
    json!({"x1": {"uniform": [-5, 10]}, "x2": {"uniform": [0, 15]}})
}

fn branin(v: &Value) -> f64 {
    let (x1, x2) = (v["x1"].as_f64().unwrap(), v["x2"].as_f64().unwrap());
    let pi = std::f64::consts::PI;
    let (b, c) = (5.1 / (4.0 * pi * pi), 5.0 / pi);
    (x2 - b * x1 * x1 + c * x1 - 6.0).powi(2) + 10.0 * (1.0 - 1.0 / (8.0 * pi)) * x1.cos() + 10.0
}

async fn created(s: &TestServer, body: &Value) -> Value {
    let r = s.post("/studies", body).await;
    assert_eq!(r.status().as_u16(), 201);
    let location = r.headers()["location"].to_str().unwrap().to_string();
    let study: Value = r.json().await.unwrap();
    assert_eq!(location, format!("/studies/{}", study["id"].as_str().unwrap()));
    study
}

async fn suggest(s: &TestServer, id: &str, count: u64) -> Vec<Value> {
    let r = s.post(&format!("/studies/{id}/suggest"), &json!({"count": count})).await;
    assert_eq!(r.status().as_u16(), 200);
    let v: Value = r.json().await.unwrap();
    v["trials"].as_array().unwrap().clone()
}

async fn tell(s: &TestServer, id: &str, trial: u64, body: &Value) -> (u16, Value) {
    let r = s.post(&format!("/studies/{id}/trials/{trial}"), body).await;
    (r.status().as_u16(), r.json().await.unwrap())
}

#[tokio::test]
async fn a_study_is_asked_and_told_and_finds_branins_minimum() {
    let s = TestServer::default().await;
    let study = created(&s, &json!({"name": "branin", "space": branin_space(), "seed": 3, "initial": 6})).await;
    let id = study["id"].as_str().unwrap().to_string();
    assert_eq!((study["direction"].as_str(), study["initial"].as_u64()), (Some("minimize"), Some(6)));
    assert_eq!(study["best"], Value::Null);
    for round in 0..30u64 {
        let trials = suggest(&s, &id, 1).await;
        assert_eq!(trials.len(), 1);
        let t = &trials[0];
        assert_eq!((t["id"].as_u64(), t["state"].as_str()), (Some(round), Some("pending")));
        let (status, told) = tell(&s, &id, round, &json!({"value": branin(&t["values"])})).await;
        assert_eq!((status, told["state"].as_str()), (200, Some("complete")));
    }
    let got: Value = s.get(&format!("/studies/{id}")).await.json().await.unwrap();
    assert_eq!(got["n_complete"], 30);
    let best = got["best"]["value"].as_f64().unwrap();
    let values: Vec<f64> = got["trials"].as_array().unwrap().iter().map(|t| t["value"].as_f64().unwrap()).collect();
    assert_eq!(best, values.iter().copied().fold(f64::INFINITY, f64::min));
    let random_best = values[..6].iter().copied().fold(f64::INFINITY, f64::min);
    assert!(best < random_best && best < 1.0, "best {best} (the minimum is 0.398), random start {random_best}");
    // A second tell is a conflict; the value stands.
    let (status, _) = tell(&s, &id, 0, &json!({"value": -100.0})).await;
    assert_eq!(status, 409);
    let list: Value = s.get("/studies").await.json().await.unwrap();
    assert!(list["studies"].as_array().unwrap().iter().any(|st| st["id"] == got["id"]));
    assert_eq!(s.delete(&format!("/studies/{id}")).await.status().as_u16(), 204);
    assert_eq!(s.get(&format!("/studies/{id}")).await.status().as_u16(), 404);
    assert_eq!(s.delete(&format!("/studies/{id}")).await.status().as_u16(), 404);
}

#[tokio::test]
async fn failures_warm_starts_and_every_error_at_its_pointer() {
    let s = TestServer::default().await;
    let study = created(
        &s,
        &json!({"space": {"lr": {"log_uniform": [1e-5, 0.1]}, "act": ["relu", "tanh"],
                                              "layers": {"int_uniform": [1, 8]}}, "direction": "maximize"}),
    )
    .await;
    let id = study["id"].as_str().unwrap().to_string();
    assert_eq!(study["initial"], 6, "max(5, 2 x 3 dimensions)");
    let trials = suggest(&s, &id, 3).await;
    let ids: Vec<u64> = trials.iter().map(|t| t["id"].as_u64().unwrap()).collect();
    assert_eq!(ids, [0, 1, 2]);
    for t in &trials {
        let v = &t["values"];
        assert!(["relu", "tanh"].contains(&v["act"].as_str().unwrap()));
        assert!((1..=8).contains(&v["layers"].as_i64().unwrap()));
        assert!((1e-5..=0.1).contains(&v["lr"].as_f64().unwrap()));
    }
    let (status, failed) = tell(&s, &id, 1, &json!({"state": "failed"})).await;
    assert_eq!((status, failed["state"].as_str()), (200, Some("failed")));
    assert!(failed.get("value").is_none());
    // A warm start: complete at once.
    let r = s
        .post(
            &format!("/studies/{id}/trials"),
            &json!({"values": {"lr": 0.01, "act": "relu", "layers": 3}, "value": 0.9}),
        )
        .await;
    assert_eq!(r.status().as_u16(), 201);
    let warm: Value = r.json().await.unwrap();
    assert_eq!(
        (warm["id"].as_u64(), warm["state"].as_str(), warm["value"].as_f64()),
        (Some(3), Some("complete"), Some(0.9))
    );
    let got: Value = s.get(&format!("/studies/{id}")).await.json().await.unwrap();
    assert_eq!(got["best"]["id"], 3, "maximised: the only complete trial");

    let refused = |status: u16, pointer: &'static str| (status, vec![pointer.to_string()]);
    let check = |r: reqwest::Response| async move {
        let (status, p) = problem(r).await;
        (status, pointers(&p))
    };
    for (body, want) in [
        (json!({"space": {}}), refused(422, "/space")),
        (json!({"space": {"x": {"uniform": [1, 0]}}}), refused(422, "/space/x/uniform")),
        (json!({"space": branin_space(), "direction": "up"}), refused(422, "/direction")),
        (json!({"space": branin_space(), "initial": 0}), refused(422, "/initial")),
        (json!({"space": {"x": {"grid": [0, 1, 1000]}}}), refused(422, "/space")),
    ] {
        assert_eq!(check(s.post("/studies", &body).await).await, want, "{body}");
    }
    assert_eq!(
        check(s.post(&format!("/studies/{id}/suggest"), &json!({"count": 0})).await).await,
        refused(422, "/count")
    );
    assert_eq!(
        check(s.post(&format!("/studies/{id}/suggest"), &json!({"count": 65})).await).await,
        refused(422, "/count")
    );
    assert_eq!(
        check(s.post(&format!("/studies/{id}/trials/0"), &json!({"value": "high"})).await).await,
        refused(422, "/value")
    );
    let bad = s.post_raw(&format!("/studies/{id}/trials/0"), "{\"value\": NaN}", "application/json").await;
    assert_eq!(bad.status().as_u16(), 400);
    let (status, still) = tell(&s, &id, 0, &json!({"value": 0.5})).await;
    assert_eq!((status, still["state"].as_str()), (200, Some("complete")), "a refused tell leaves the trial pending");
    let warm_bad = json!({"values": {"lr": 1.0, "act": "relu", "layers": 3}, "value": 1});
    assert_eq!(check(s.post(&format!("/studies/{id}/trials"), &warm_bad).await).await, refused(422, "/values/lr"));
    let (status, _) = tell(&s, &id, 99, &json!({"value": 1})).await;
    assert_eq!(status, 404);
    let nobody = uuid::Uuid::new_v4();
    assert_eq!(s.post(&format!("/studies/{nobody}/suggest"), &json!({})).await.status().as_u16(), 404);
}

/// 64 suggestions from 8 concurrent clients: no trial id twice, no point twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_suggestions_never_share_an_id_or_a_point() {
    let s = std::sync::Arc::new(TestServer::default().await);
    let study = created(&s, &json!({"space": branin_space(), "initial": 8})).await;
    let id = study["id"].as_str().unwrap().to_string();
    // Some history first, so that the model (not only the random start) is asked.
    for t in suggest(&s, &id, 8).await {
        tell(&s, &id, t["id"].as_u64().unwrap(), &json!({"value": branin(&t["values"])})).await;
    }
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (s, id) = (s.clone(), id.clone());
            tokio::spawn(async move {
                let mut got = Vec::new();
                for _ in 0..8 {
                    got.extend(suggest(&s, &id, 1).await);
                }
                got
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    assert_eq!(all.len(), 64);
    let ids: HashSet<u64> = all.iter().map(|t| t["id"].as_u64().unwrap()).collect();
    let points: HashSet<String> = all.iter().map(|t| t["values"].to_string()).collect();
    assert_eq!((ids.len(), points.len()), (64, 64));
}

/// Two replicas on one store: suggest on one, tell on the other, both see every trial.
#[tokio::test]
async fn replicas_share_a_study_through_the_store() {
    let store = common::switchable::shared_store();
    let config = mercer::config::Config::for_tests();
    let a = common::switchable::replica(&store, config.clone()).await;
    let b = common::switchable::replica(&store, config).await;
    let study = created(&a, &json!({"space": branin_space()})).await;
    let id = study["id"].as_str().unwrap().to_string();
    let first = suggest(&a, &id, 2).await;
    let second = suggest(&b, &id, 2).await;
    let ids: Vec<u64> = first.iter().chain(&second).map(|t| t["id"].as_u64().unwrap()).collect();
    assert_eq!(ids, [0, 1, 2, 3], "B reads A's trials before it numbers its own");
    let (status, _) = tell(&b, &id, 0, &json!({"value": 1.5})).await;
    assert_eq!(status, 200);
    let (status, _) = tell(&a, &id, 0, &json!({"value": 2.5})).await;
    assert_eq!(status, 409, "A sees B's tell");
    for s in [&a, &b] {
        let got: Value = s.get(&format!("/studies/{id}")).await.json().await.unwrap();
        assert_eq!(got["trials"].as_array().unwrap().len(), 4);
        assert_eq!(got["trials"][0]["value"], 1.5);
    }
    assert_eq!(b.delete(&format!("/studies/{id}")).await.status().as_u16(), 204);
    assert_eq!(a.get(&format!("/studies/{id}")).await.status().as_u16(), 404, "A sees the delete at once");
}

/// What was told survives a restart (a directory store).
#[tokio::test]
async fn a_restart_keeps_every_trial_and_value() {
    let dir = std::env::temp_dir().join(format!("mercer-studies-{}", uuid::Uuid::new_v4()));
    let config =
        mercer::config::Config { data_dir: dir.to_str().unwrap().into(), ..mercer::config::Config::for_tests() };
    let id;
    {
        let s = TestServer::start(config.clone()).await;
        s.service().wait_ready().await;
        let study = created(&s, &json!({"space": branin_space(), "name": "kept"})).await;
        id = study["id"].as_str().unwrap().to_string();
        suggest(&s, &id, 2).await;
        tell(&s, &id, 1, &json!({"value": 7.25})).await;
    }
    let s = TestServer::start(config).await;
    s.service().wait_ready().await;
    let got: Value = s.get(&format!("/studies/{id}")).await.json().await.unwrap();
    assert_eq!(got["name"], "kept");
    let states: Vec<&str> = got["trials"].as_array().unwrap().iter().map(|t| t["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["pending", "complete"]);
    assert_eq!(got["trials"][1]["value"], 7.25);
    assert_eq!(suggest(&s, &id, 1).await[0]["id"], 2, "numbering goes on");
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

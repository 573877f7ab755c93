//! Aliases over HTTP: stable names with weighted routes, a shadow, compare-and-set
//! generations, history and rollback, the delete guard, and replicas sharing them
//! through the store.

mod common;

use common::switchable::{replica, shared_store};
use common::{problem, sine, TestServer};
use mercer::config::Config;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;

fn ridge(alpha: f64) -> Value {
    let (x, y) = sine(12);
    json!({"model": "kernel_ridge", "kernel": {"type": "rbf", "gamma": 0.5}, "params": {"lambda": alpha}, "x": x, "y": y})
}

async fn fit(s: &TestServer, body: &Value) -> String {
    s.train(body).await["id"].as_str().unwrap().to_string()
}

async fn put(s: &TestServer, name: &str, body: &Value, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut r = s.http.put(s.url(&format!("/aliases/{name}"))).json(body);
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    r.send().await.unwrap()
}

async fn put_ok(s: &TestServer, name: &str, body: &Value) -> Value {
    let r = put(s, name, body, &[]).await;
    let status = r.status().as_u16();
    let v: Value = r.json().await.unwrap();
    assert!(status == 200 || status == 201, "{status}: {v}");
    v
}

async fn predict_as(s: &TestServer, target: &str, request_id: Option<&str>) -> (String, String) {
    let mut r = s.http.post(s.url(&format!("/models/{target}/predict"))).json(&json!({"x": [[0.5], [1.5]]}));
    if let Some(id) = request_id {
        r = r.header("x-request-id", id);
    }
    let r = r.send().await.unwrap();
    assert_eq!(r.status(), 200);
    let model = r.headers()["x-mercer-model"].to_str().unwrap().to_string();
    (model, r.text().await.unwrap())
}

#[tokio::test]
async fn an_alias_is_set_read_listed_and_served_by_name() {
    let s = TestServer::default().await;
    let (a, b) = (fit(&s, &ridge(0.1)).await, fit(&s, &ridge(1.0)).await);
    let r = put(&s, "champion", &json!({"model": a}), &[]).await;
    assert_eq!(r.status(), 201);
    assert_eq!(r.headers()["etag"], "\"1\"");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["name"], "champion");
    assert_eq!(v["generation"], 1);
    assert_eq!(v["routes"], json!([{"model": a, "weight": 100}]));
    assert_eq!(v["shadow"], Value::Null);
    assert_eq!(v["history"].as_array().unwrap().len(), 1);
    assert_eq!(v["history"][0]["action"], "set");

    // Served by name: the same bytes as by id, and the headers say who answered.
    let (served, by_name) = predict_as(&s, "champion", None).await;
    let (_, by_id) = predict_as(&s, &a, None).await;
    assert_eq!((served.as_str(), &by_name), (a.as_str(), &by_id));
    let r = s.http.post(s.url("/models/champion/predict")).json(&json!({"x": [[0.5]]})).send().await.unwrap();
    assert_eq!(r.headers()["x-mercer-alias"], "champion");
    assert_eq!(r.headers()["x-mercer-alias-generation"], "1");
    let details: Value = s.get("/models/champion").await.json().await.unwrap();
    assert_eq!(details["id"], a.as_str());

    // A second setting: 200, generation 2, the history newest first.
    let v = put_ok(&s, "champion", &json!({"routes": [{"model": a, "weight": 90}, {"model": b, "weight": 10}]})).await;
    assert_eq!(v["generation"], 2);
    assert_eq!(
        v["history"].as_array().unwrap().iter().map(|h| h["generation"].as_u64().unwrap()).collect::<Vec<_>>(),
        vec![2, 1]
    );
    let list: Value = s.get("/aliases").await.json().await.unwrap();
    assert_eq!(list["aliases"].as_array().unwrap().len(), 1);
    assert_eq!(list["aliases"][0]["routes"][1], json!({"model": b, "weight": 10}));
    assert!(list["aliases"][0].get("history").is_none());

    // The OIP routes take the name too, and say which model answered.
    let infer = json!({"inputs": [{"name": "x", "datatype": "FP64", "shape": [1, 1], "data": [0.5]}]});
    let r = s.post("/v2/models/champion/infer", &infer).await;
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["model_name"], "champion");
    assert!(v["model"] == a.as_str() || v["model"] == b.as_str(), "{v}");
    assert_eq!(s.get("/v2/models/champion/ready").await.status(), 200);

    // Deleted: 404 everywhere, and the name can be set again, its generations going on.
    assert_eq!(s.delete("/aliases/champion").await.status(), 204);
    assert_eq!(s.get("/aliases/champion").await.status(), 404);
    assert_eq!(s.post("/models/champion/predict", &json!({"x": [[0.5]]})).await.status(), 404);
    assert_eq!(s.delete("/aliases/champion").await.status(), 404);
    let again = put(&s, "champion", &json!({"model": b}), &[]).await;
    assert_eq!(again.status(), 201);
    assert_eq!(again.json::<Value>().await.unwrap()["generation"], 4);
}

#[tokio::test]
async fn routes_follow_their_weights_and_a_request_id_always_lands_alike() {
    let s = TestServer::default().await;
    let (a, b) = (fit(&s, &ridge(0.1)).await, fit(&s, &ridge(1.0)).await);
    put_ok(&s, "canary", &json!({"routes": [{"model": a, "weight": 90}, {"model": b, "weight": 10}]})).await;
    let s = Arc::new(s);
    let n = 10_000;
    let mut tasks = Vec::new();
    for k in 0..16 {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            let mut counts: HashMap<String, usize> = HashMap::new();
            for _ in (k..n).step_by(16) {
                let (model, _) = predict_as(&s, "canary", None).await;
                *counts.entry(model).or_default() += 1;
            }
            counts
        }));
    }
    let mut counts: HashMap<String, usize> = HashMap::new();
    for t in tasks {
        for (m, c) in t.await.unwrap() {
            *counts.entry(m).or_default() += c;
        }
    }
    assert_eq!(counts.values().sum::<usize>(), n);
    // Binomial(10,000, 0.1): sd 30; five sd either side.
    let to_b = counts.get(&b).copied().unwrap_or(0);
    assert!((850..=1150).contains(&to_b), "{counts:?}");
    // The same request id: the same model, every time.
    for i in 0..200 {
        let id = format!("client-{i}");
        let (first, _) = predict_as(&s, "canary", Some(&id)).await;
        let (second, _) = predict_as(&s, "canary", Some(&id)).await;
        assert_eq!(first, second, "{id}");
    }
    let text = s.get("/metrics").await.text().await.unwrap();
    assert!(text.contains(&format!("mercer_alias_requests_total{{alias=\"canary\",model=\"{b}\"}}")), "{text}");
}

#[tokio::test]
async fn if_match_guards_every_write_and_rollbacks_walk_back() {
    let s = TestServer::default().await;
    let (a, b, c) = (fit(&s, &ridge(0.1)).await, fit(&s, &ridge(1.0)).await, fit(&s, &ridge(3.0)).await);
    assert_eq!(put(&s, "x", &json!({"model": a}), &[("if-match", "\"1\"")]).await.status(), 412);
    assert_eq!(put(&s, "x", &json!({"model": a}), &[("if-none-match", "*")]).await.status(), 201);
    assert_eq!(put(&s, "x", &json!({"model": a}), &[("if-none-match", "*")]).await.status(), 412);
    let (status, p) = problem(put(&s, "x", &json!({"model": b}), &[("if-match", "\"7\"")]).await).await;
    assert_eq!((status, p["type"].as_str().unwrap()), (412, "/problems/precondition-failed"));
    assert_eq!(put(&s, "x", &json!({"model": b}), &[("if-match", "\"1\"")]).await.status(), 200);
    assert_eq!(put(&s, "x", &json!({"model": c}), &[("if-match", "W/\"2\"")]).await.status(), 200);
    // Rollback: c -> b -> a, then nothing left.
    let back = |s: &TestServer| {
        let url = s.url("/aliases/x/rollback");
        let http = s.http.clone();
        async move { http.post(url).send().await.unwrap() }
    };
    let v: Value = back(&s).await.json().await.unwrap();
    assert_eq!((v["generation"].as_u64(), v["routes"][0]["model"].as_str()), (Some(4), Some(b.as_str())));
    assert_eq!(v["history"][0]["action"], "rollback");
    assert_eq!(v["history"][0]["restores"], 2);
    let v: Value = back(&s).await.json().await.unwrap();
    assert_eq!(v["routes"][0]["model"], a.as_str());
    let (status, p) = problem(back(&s).await).await;
    assert_eq!((status, p["type"].as_str().unwrap()), (409, "/problems/conflict"));
    // A stale If-Match on a rollback and a delete.
    let r = s.http.post(s.url("/aliases/x/rollback")).header("if-match", "\"3\"").send().await.unwrap();
    assert_eq!(r.status(), 412);
    let r = s.http.delete(s.url("/aliases/x")).header("if-match", "\"3\"").send().await.unwrap();
    assert_eq!(r.status(), 412);
    let r = s.http.delete(s.url("/aliases/x")).header("if-match", "\"5\"").send().await.unwrap();
    assert_eq!(r.status(), 204);
}

#[tokio::test]
async fn a_routed_model_is_deleted_only_by_force_which_takes_it_out() {
    let s = TestServer::default().await;
    let (a, b, c) = (fit(&s, &ridge(0.1)).await, fit(&s, &ridge(1.0)).await, fit(&s, &ridge(3.0)).await);
    put_ok(&s, "two", &json!({"routes": [{"model": a, "weight": 80}, {"model": b, "weight": 20}], "shadow": c})).await;
    put_ok(&s, "one", &json!({"model": b})).await;
    let (status, p) = problem(s.delete(&format!("/models/{b}")).await).await;
    assert_eq!((status, p["type"].as_str().unwrap()), (409, "/problems/model-in-use"));
    let detail = p["detail"].as_str().unwrap();
    assert!(detail.contains("one") && detail.contains("two"), "{detail}");
    let (status, _) = problem(s.delete(&format!("/models/{c}")).await).await;
    assert_eq!(status, 409, "a shadow is in use too");
    assert_eq!(s.delete(&format!("/models/{b}?force=maybe")).await.status(), 400);
    assert_eq!(s.delete(&format!("/models/{b}?force=true")).await.status(), 204);
    let two: Value = s.get("/aliases/two").await.json().await.unwrap();
    assert_eq!(two["routes"], json!([{"model": a, "weight": 100}]));
    assert_eq!(two["history"][0]["action"], "unroute");
    assert_eq!(two["shadow"], c.as_str());
    assert_eq!(s.get("/aliases/one").await.status(), 404, "an alias left with no route is deleted");
    assert_eq!(s.delete(&format!("/models/{c}?force=true")).await.status(), 204);
    let two: Value = s.get("/aliases/two").await.json().await.unwrap();
    assert_eq!(two["shadow"], Value::Null);
    // A rollback to a setting whose model is gone is refused.
    let (status, p) = problem(s.http.post(s.url("/aliases/two/rollback")).send().await.unwrap()).await;
    assert_eq!(status, 409, "{p}");
}

#[tokio::test]
async fn every_refusal_names_its_place() {
    let s = TestServer::default().await;
    let a = fit(&s, &ridge(0.1)).await;
    let (x, _) = sine(12);
    let pca = s
        .train(&json!({"model": "kernel_pca", "kernel": {"type": "rbf", "gamma": 0.5}, "params": {"n_components": 2}, "x": x}))
        .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let two_d = s
        .train(&json!({"model": "kernel_ridge", "kernel": {"type": "rbf"}, "x": [[0.0, 1.0], [1.0, 0.0], [2.0, 2.0]], "y": [0.0, 1.0, 2.0]}))
        .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let missing = uuid::Uuid::new_v4().to_string();
    let cases: Vec<(&str, Value, u16, &str)> = vec![
        ("ok", json!({}), 400, ""),
        ("ok", json!([1]), 400, ""),
        ("ok", json!({"model": a, "routes": []}), 400, "/routes"),
        ("ok", json!({"model": a, "colour": 1}), 400, "/colour"),
        ("ok", json!({"model": 7}), 400, "/model"),
        ("ok", json!({"model": missing}), 422, "/model"),
        ("ok", json!({"routes": []}), 422, "/routes"),
        ("ok", json!({"routes": [{"model": a, "weight": 60}]}), 422, "/routes"),
        ("ok", json!({"routes": [{"model": a, "weight": -1}]}), 422, "/routes/0/weight"),
        ("ok", json!({"routes": [{"model": a, "weight": "x"}]}), 400, "/routes/0/weight"),
        ("ok", json!({"routes": [{"model": a}]}), 400, "/routes/0/weight"),
        ("ok", json!({"routes": [{"model": a, "weight": 50}, {"model": pca, "weight": 50}]}), 422, "/routes/1/model"),
        ("ok", json!({"routes": [{"model": a, "weight": 50}, {"model": two_d, "weight": 50}]}), 422, "/routes/1/model"),
        ("ok", json!({"model": a, "shadow": two_d}), 422, "/shadow"),
        ("ok", json!({"model": a, "shadow": a}), 422, "/shadow"),
        ("ok", json!({"model": a, "shadow": missing}), 422, "/shadow"),
        ("a%20b", json!({"model": a}), 422, "/name"),
        ("kinds", json!({"model": a}), 422, "/name"),
        (missing.as_str(), json!({"model": a}), 422, "/name"),
    ];
    for (name, body, want, pointer) in cases {
        let (status, p) = problem(put(&s, name, &body, &[]).await).await;
        assert_eq!(status, want, "{name} {body}: {p}");
        assert_eq!(p["errors"][0]["pointer"], pointer, "{name} {body}: {p}");
    }
    assert_eq!(s.get("/aliases").await.json::<Value>().await.unwrap()["aliases"], json!([]));
    assert_eq!(s.get("/aliases/nope").await.status(), 404);
    assert_eq!(s.post("/models/nope/predict", &json!({"x": [[0.5]]})).await.status(), 404);
    assert_eq!(s.http.post(s.url("/aliases/nope/rollback")).send().await.unwrap().status(), 404);
}

#[tokio::test]
async fn a_shadow_never_touches_the_answer_and_is_counted() {
    let s = TestServer::default().await;
    let (a, b) = (fit(&s, &ridge(0.1)).await, fit(&s, &ridge(1.0)).await);
    // A shadow that overflows where the primary does not: a degree-9 polynomial.
    let (x, y) = sine(12);
    let poly = s
        .train(&json!({"model": "kernel_ridge", "kernel": {"type": "polynomial", "degree": 9, "gamma": 1.0, "coef0": 1.0}, "x": x, "y": y}))
        .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    put_ok(&s, "shadowed", &json!({"model": a, "shadow": b})).await;
    put_ok(&s, "failing", &json!({"model": a, "shadow": poly})).await;
    let service = s.service().clone();
    let body = json!({"x": [[0.5], [1e80]]});
    let direct = s.post(&format!("/models/{a}/predict"), &body).await.text().await.unwrap();
    {
        // While shadows are held back, answers come at once and are the primary's bytes.
        let _held = service.hold_shadows().await;
        for name in ["shadowed", "failing"] {
            let r = s.post(&format!("/models/{name}/predict"), &body).await;
            assert_eq!(r.status(), 200);
            assert_eq!(r.text().await.unwrap(), direct, "{name}");
        }
    }
    service.wait_shadows(2).await;
    let text = s.get("/metrics").await.text().await.unwrap();
    assert!(text.contains("mercer_alias_shadow_disagreement_count{alias=\"shadowed\"} 2"), "{text}");
    assert!(text.contains("mercer_alias_shadow_errors_total{alias=\"failing\"} 1"), "{text}");
    assert!(text.contains("mercer_alias_shadow_seconds_count{alias=\"shadowed\"} 1"), "{text}");

    // Under load (every core busy with fits) shadows are shed first; answers go on.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let busy = Config { fit_workers: cores, fit_queue: 4, ..Config::for_tests() };
    let loaded = TestServer::start(busy).await;
    let a = fit(&loaded, &ridge(0.1)).await;
    let b = fit(&loaded, &ridge(1.0)).await;
    put_ok(&loaded, "shed", &json!({"model": a, "shadow": b})).await;
    let blocks: Vec<_> = (0..cores).map(|_| loaded.block_worker()).collect();
    let r = loaded.post("/models/shed/predict", &json!({"x": [[0.5]]})).await;
    assert_eq!(r.status(), 200);
    loaded.service().wait_shadows(1).await;
    drop(blocks);
    let text = loaded.get("/metrics").await.text().await.unwrap();
    assert!(text.contains("mercer_alias_shadow_shed_total{alias=\"shed\"} 1"), "{text}");
}

#[tokio::test]
async fn replicas_share_aliases_and_exactly_one_wins_each_generation() {
    let store = shared_store();
    let config = Config { store_refresh_secs: 1, ..Config::for_tests() };
    let (ra, rb) = (replica(&store, config.clone()).await, replica(&store, config).await);
    let (a, b) = (fit(&ra, &ridge(0.1)).await, fit(&ra, &ridge(1.0)).await);
    put_ok(&ra, "shared", &json!({"model": a})).await;
    // B has never seen the name: its first use lists the store.
    let (served, _) = predict_as(&rb, "shared", None).await;
    assert_eq!(served, a);
    // Races: both replicas write the same generation with If-Match; exactly one lands.
    for round in 0..10u64 {
        let generation = format!("\"{}\"", round + 1);
        let (body_a, body_b) = (json!({"model": a}), json!({"model": b}));
        let cond = [("if-match", generation.as_str())];
        let (x, y) = tokio::join!(put(&ra, "shared", &body_a, &cond), put(&rb, "shared", &body_b, &cond));
        let mut statuses = [x.status().as_u16(), y.status().as_u16()];
        statuses.sort_unstable();
        assert_eq!(statuses, [200, 412], "round {round}");
    }
    let on_a: Value = ra.get("/aliases/shared").await.json().await.unwrap();
    let on_b: Value = rb.get("/aliases/shared").await.json().await.unwrap();
    assert_eq!(on_a["generation"], 11);
    assert_eq!(on_a, on_b);
    // A change on A is served by B after B's refresh.
    put_ok(&ra, "shared", &json!({"model": b})).await;
    rb.service().sync_store().await;
    let (served, _) = predict_as(&rb, "shared", None).await;
    assert_eq!(served, b);
}

#[tokio::test]
async fn aliases_outlive_the_process_and_keep_their_history() {
    let dir = std::env::temp_dir().join(format!("mercer-aliases-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = Config { data_dir: dir.display().to_string(), ..Config::for_tests() };
    let s = TestServer::start(config.clone()).await;
    s.service().wait_ready().await;
    let (a, b) = (fit(&s, &ridge(0.1)).await, fit(&s, &ridge(1.0)).await);
    put_ok(&s, "kept", &json!({"model": a})).await;
    let before = put_ok(&s, "kept", &json!({"routes": [{"model": a, "weight": 50}, {"model": b, "weight": 50}]})).await;
    drop(s);
    let s = TestServer::start(config).await;
    s.service().wait_ready().await;
    let after: Value = s.get("/aliases/kept").await.json().await.unwrap();
    assert_eq!(after, before);
    let (served, _) = predict_as(&s, "kept", Some("r1")).await;
    assert!(served == a || served == b);
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn settings_name_the_key_that_made_them_and_need_the_admin_scope() {
    let keys = "reader=tok-read-1:predict,deployer=tok-deploy-2:admin".to_string();
    let s = TestServer::start(Config { api_keys: keys, ..Config::for_tests() }).await;
    let (x, y) = sine(12);
    let body = json!({"model": "kernel_ridge", "x": x, "y": y});
    let r = s.http.post(s.url("/models")).bearer_auth("tok-deploy-2").json(&body).send().await.unwrap();
    let a = r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_string();
    let put =
        |token: &'static str| s.http.put(s.url("/aliases/prod")).bearer_auth(token).json(&json!({"model": a})).send();
    assert_eq!(put("tok-read-1").await.unwrap().status(), 403);
    let v: Value = put("tok-deploy-2").await.unwrap().json().await.unwrap();
    assert_eq!(v["updated_by"], "deployer");
    assert_eq!(v["history"][0]["by"], "deployer");
    let r = s.http.get(s.url("/aliases/prod")).bearer_auth("tok-read-1").send().await.unwrap();
    assert_eq!(r.status(), 200);
    let r = s.http.post(s.url("/models/prod/predict")).bearer_auth("tok-read-1").json(&json!({"x": [[0.5]]}));
    assert_eq!(r.send().await.unwrap().headers()["x-mercer-model"], a.as_str());
    let r = s.http.delete(s.url("/aliases/prod")).bearer_auth("tok-read-1").send().await.unwrap();
    assert_eq!(r.status(), 403);
}

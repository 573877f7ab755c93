//! Replicas sharing one store, in process: two servers over one object store (the
//! object_store crate's in-memory store, through the same backend code as S3), and a
//! store that can be switched off; and two servers over a real S3 server (s3s-fs) on
//! loopback, which a test kills and restarts. scripts/cluster.sh runs the same scenario
//! with real processes, a real S3 server and a load balancer.

mod common;
#[path = "common/s3.rs"]
mod s3;

use common::eventually;
use common::switchable::{replica, shared_store};
use mercer::config::Config;
use mercer::store::blobs::Blobs;
use mercer::store::object::ObjectBlobs;
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn config() -> Config {
    Config { store_refresh_secs: 1, fit_workers: 1, ..Config::for_tests() }
}

fn gp_body(shift: f64) -> Value {
    let x: Vec<Vec<f64>> = (0..40).map(|i| vec![i as f64 / 8.0, (i % 7) as f64 / 3.0]).collect();
    let y: Vec<f64> = x.iter().map(|r| (r[0] + shift).sin() + 0.3 * r[1]).collect();
    json!({"model": "gaussian_process", "kernel": {"type": "rbf", "length_scale": 1.2},
           "params": {"noise": 0.01}, "x": x, "y": y, "name": "shared", "metadata": {"team": "a"}})
}

fn query() -> Value {
    json!({"x": [[0.3, 0.1], [2.2, 1.5], [4.9, 0.4]], "variance": true})
}

async fn json_of(r: reqwest::Response) -> (u16, Value) {
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_model_fitted_on_one_replica_is_served_by_the_other_bit_for_bit() {
    let store = shared_store();
    // B never refreshes on its own here, so what it knows it learned on first use.
    let quiet = Config { store_refresh_secs: 3600, ..config() };
    let (a, b) = (replica(&store, config()).await, replica(&store, quiet).await);
    let fitted = a.train(&gp_body(0.0)).await;
    let id = fitted["id"].as_str().unwrap();
    assert!(!b.service().replica.registry.contains(id.parse().unwrap()), "B has not listed it yet");

    // First use on B reads it from the store: same resource, same predictions.
    let (status, on_b) = json_of(b.get(&format!("/models/{id}")).await).await;
    assert_eq!(status, 200, "{on_b}");
    for field in ["name", "model", "kernel", "params", "n_train", "n_support", "training", "metadata", "created_at"] {
        assert_eq!(on_b[field], fitted[field], "{field}");
    }
    let pa = a.post(&format!("/models/{id}/predict"), &query()).await.text().await.unwrap();
    let pb = b.post(&format!("/models/{id}/predict"), &query()).await.text().await.unwrap();
    assert_eq!(pa, pb, "identical answers from both replicas");
    assert!(pa.contains("variance"), "{pa}");

    // A model fitted on B after B started is in A's list at once.
    let second = b.train(&gp_body(1.0)).await;
    let (_, listed) = json_of(a.get("/models").await).await;
    let ids: Vec<&str> = listed["models"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, vec![id, second["id"].as_str().unwrap()], "GET /models lists the store, oldest first");
}

#[tokio::test]
async fn a_delete_on_one_replica_is_seen_by_the_other_within_the_refresh() {
    let store = shared_store();
    let (a, b) = (replica(&store, config()).await, replica(&store, config()).await);
    let id = a.train(&gp_body(0.0)).await["id"].as_str().unwrap().to_string();
    // B holds it decoded in its cache...
    assert_eq!(b.post(&format!("/models/{id}/predict"), &query()).await.status(), 200);
    assert!(b.service().replica.registry.cache.contains(id.parse().unwrap()));
    // ...and still drops it once A deletes it.
    let deleted_at = Instant::now();
    assert_eq!(a.delete(&format!("/models/{id}")).await.status(), 204);
    assert_eq!(a.get(&format!("/models/{id}")).await.status(), 404);
    let gone = eventually(Duration::from_secs(5), async || b.get(&format!("/models/{id}")).await.status() == 404).await;
    assert!(gone, "B still serves a model deleted on A");
    let took = deleted_at.elapsed();
    assert!(took < Duration::from_secs(3), "seen after {took:?}, refresh is 1 s");
    assert!(!b.service().replica.registry.cache.contains(id.parse().unwrap()), "evicted from B's cache");
    assert_eq!(b.post(&format!("/models/{id}/predict"), &query()).await.status(), 404);
    // A listing that began before the delete cannot bring it back.
    a.service().sync_store().await;
    assert_eq!(a.get(&format!("/models/{id}")).await.status(), 404);
}

#[tokio::test]
async fn a_dataset_uploaded_to_one_replica_is_fitted_on_the_other() {
    let store = shared_store();
    let (a, b) = (replica(&store, config()).await, replica(&store, config()).await);
    let csv: String = std::iter::once("u,v,target\n".to_string())
        .chain((0..30).map(|i| format!("{},{},{}\n", i as f64 / 5.0, (i % 4) as f64, (i as f64 / 5.0).cos())))
        .collect();
    let r = a.post_raw("/datasets", csv, "text/csv").await;
    assert_eq!(r.status(), 201);
    let dataset = r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_string();
    let (status, info) = json_of(b.get(&format!("/datasets/{dataset}")).await).await;
    assert_eq!((status, info["n_rows"].clone()), (200, json!(30)), "{info}");
    let model = b
        .train(&json!({"model": "kernel_ridge", "kernel": {"type": "rbf", "length_scale": 1.0},
                        "params": {"lambda": 0.1}, "dataset": dataset}))
        .await;
    assert_eq!(model["features"], json!(["u", "v"]));
    let id = model["id"].as_str().unwrap();
    let r = a.post_raw(&format!("/models/{id}/predict"), "v,u\n1,0.4\n", "text/csv").await;
    assert_eq!(r.status(), 200, "CSV predict on A by the column names B's fit recorded");
    assert_eq!(a.delete(&format!("/datasets/{dataset}")).await.status(), 204);
    let gone =
        eventually(Duration::from_secs(5), async || b.get(&format!("/datasets/{dataset}")).await.status() == 404).await;
    assert!(gone, "B still lists a dataset deleted on A");
}

#[tokio::test]
async fn when_the_store_is_down_fits_answer_503_and_cached_models_keep_answering() {
    let store = shared_store();
    let a = replica(&store, config()).await;
    let id = a.train(&gp_body(0.0)).await["id"].as_str().unwrap().to_string();
    let before = a.post(&format!("/models/{id}/predict"), &query()).await.text().await.unwrap();

    store.down.store(true, Ordering::SeqCst);
    // A fit either finds out when its PUT fails, or is refused once a store call (the
    // refresh) has found the store down; either way nothing is acknowledged.
    let r = a.post("/models", &gp_body(2.0)).await;
    assert_eq!(r.status(), 503);
    let retry: u64 = r.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!(retry >= 1);
    let (_, p) = json_of(r).await;
    assert_eq!(p["type"], "/problems/store-unavailable", "{p}");
    // Later fits are refused before they run.
    let started = Instant::now();
    let r = a.post("/models", &gp_body(3.0)).await;
    assert_eq!(r.status(), 503);
    assert!(r.headers().contains_key("retry-after"));
    assert!(started.elapsed() < Duration::from_secs(2), "refused without fitting");
    let upload = a.post_raw("/datasets", "a,y\n1,2\n", "text/csv").await;
    assert_eq!(upload.status(), 503, "uploads are not acknowledged either");
    assert_eq!(a.delete(&format!("/models/{id}")).await.status(), 503, "a delete cannot reach the store");
    let r = a.post(&format!("/models/{id}/observations"), &json!({"x": [[1.0, 0.5]], "y": [0.2]})).await;
    assert_eq!(r.status(), 503, "an append cannot be stored, so it is not acknowledged");
    assert!(r.headers().contains_key("retry-after"));
    let (_, m) = json_of(a.get(&format!("/models/{id}")).await).await;
    assert_eq!((m["version"].as_u64(), m["n_train"].as_u64()), (Some(1), Some(40)), "the model is unchanged");

    // What is in memory still answers, identically.
    let during = a.post(&format!("/models/{id}/predict"), &query()).await.text().await.unwrap();
    assert_eq!(during, before);
    assert_eq!(a.get("/healthz").await.status(), 200);
    let (status, ready) = json_of(a.get("/readyz").await).await;
    assert_eq!(status, 200, "a shared dependency must not take every replica out");
    assert!(ready["degraded"][0].as_str().unwrap().starts_with("store"), "{ready}");
    let metrics = a.get("/metrics").await.text().await.unwrap();
    assert!(metrics.lines().any(|l| l == "mercer_store_up 0"), "{metrics}");
    assert!(metrics.contains("outcome=\"unavailable\""), "store calls that failed are in the histogram");
    let (_, listed) = json_of(a.get("/models").await).await;
    assert_eq!(listed["models"].as_array().unwrap().len(), 1, "a failed listing forgets nothing");

    store.down.store(false, Ordering::SeqCst);
    let back = eventually(Duration::from_secs(5), async || {
        a.get("/readyz").await.json::<Value>().await.unwrap()["degraded"].is_null()
    })
    .await;
    assert!(back, "the refresh finds the store again");
    assert_eq!(a.post("/models", &gp_body(2.0)).await.status(), 201);
    let (_, listed) = json_of(a.get("/models").await).await;
    assert_eq!(listed["models"].as_array().unwrap().len(), 2, "nothing lost, nothing half-stored");
}

#[tokio::test]
async fn the_cache_is_bounded_and_models_beyond_it_are_read_on_each_use() {
    let store = shared_store();
    let a = replica(&store, config()).await;
    let first = a.train(&gp_body(0.0)).await;
    let size = first["memory_bytes"].as_u64().unwrap() as usize;
    // Room for one model of this size, not two.
    let b = replica(&store, Config { cache_bytes: (size * 3 / 2) as u64, ..config() }).await;
    let second = a.train(&gp_body(1.0)).await;
    let ids: Vec<uuid::Uuid> = [&first, &second].iter().map(|m| m["id"].as_str().unwrap().parse().unwrap()).collect();
    for (i, id) in ids.iter().enumerate() {
        let answer = b.post(&format!("/models/{id}/predict"), &query()).await;
        assert_eq!(answer.status(), 200, "model {i}");
    }
    let cache = &b.service().replica.registry.cache;
    assert!(!cache.contains(ids[0]) && cache.contains(ids[1]), "the least recently used went first");
    assert_eq!(cache.bytes(), size);
    // A replica whose cache is smaller than any model still serves them all.
    let c = replica(&store, Config { cache_bytes: 1, ..config() }).await;
    for id in &ids {
        let want = a.post(&format!("/models/{id}/predict"), &query()).await.text().await.unwrap();
        assert_eq!(c.post(&format!("/models/{id}/predict"), &query()).await.text().await.unwrap(), want);
    }
    assert_eq!(c.service().replica.registry.cache.bytes(), 0);
}

/// Appends sent to both replicas at once are serialised through the store's conditional
/// write: every one is acknowledged with its own version, none is lost, both replicas
/// come to serve the last version, and it equals a refit on all the rows.
#[tokio::test]
async fn appends_on_two_replicas_are_serialised_and_both_serve_the_last_version() {
    let store = shared_store();
    let (a, b) = (replica(&store, config()).await, replica(&store, config()).await);
    let fitted = a.train(&gp_body(0.0)).await;
    let id = fitted["id"].as_str().unwrap().to_string();
    // B holds version 1 decoded.
    assert_eq!(b.post(&format!("/models/{id}/predict"), &query()).await.status(), 200);
    let new_x: Vec<Vec<f64>> = (0..8).map(|i| vec![i as f64 / 1.7 + 0.05, (i % 5) as f64 / 2.0]).collect();
    let new_y: Vec<f64> = new_x.iter().map(|r| r[0].sin() + 0.3 * r[1]).collect();
    let appends = (0..8).map(|i| {
        let (on, path) = (if i % 2 == 0 { &a } else { &b }, format!("/models/{id}/observations"));
        let body = json!({"x": [new_x[i]], "y": [new_y[i]]});
        async move { json_of(on.post(&path, &body).await).await }
    });
    let mut versions: Vec<u64> = futures_util::future::join_all(appends)
        .await
        .into_iter()
        .map(|(status, m)| {
            assert_eq!(status, 200, "{m}");
            m["version"].as_u64().unwrap()
        })
        .collect();
    versions.sort_unstable();
    assert_eq!(versions, (2..=9).collect::<Vec<u64>>(), "one version per append");
    for (name, r) in [("A", &a), ("B", &b)] {
        let current = eventually(Duration::from_secs(5), async || {
            let (_, m) = json_of(r.get(&format!("/models/{id}")).await).await;
            m["version"] == json!(9) && m["n_train"] == json!(48)
        })
        .await;
        assert!(current, "replica {name} does not serve the last version");
    }
    let mut all = gp_body(0.0);
    all["x"].as_array_mut().unwrap().extend(new_x.iter().map(|r| json!(r)));
    all["y"].as_array_mut().unwrap().extend(new_y.iter().map(|v| json!(v)));
    let refit = a.train(&all).await;
    let want: Value =
        a.post(&format!("/models/{}/predict", refit["id"].as_str().unwrap()), &query()).await.json().await.unwrap();
    for (name, r) in [("A", &a), ("B", &b)] {
        let got: Value = r.post(&format!("/models/{id}/predict"), &query()).await.json().await.unwrap();
        for field in ["predictions", "variance"] {
            for (x, y) in got[field].as_array().unwrap().iter().zip(want[field].as_array().unwrap()) {
                let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
                assert!((x - y).abs() <= 1e-9 * y.abs().max(1e-3), "{name} {field}: {x} vs refit {y}");
            }
        }
    }
}

/// A store that comes back is back for every replica on its next request, not at its next
/// listing (the listing here is an hour away): in each of 20 rounds the store goes down
/// until both replicas have answered a fit 503, comes back, and then a fit on A and the
/// next fit on B are both 201 at once: each request probes a store its replica found down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_comes_back_is_back_for_both_replicas_on_their_next_request() {
    let store = shared_store();
    let slow_refresh = || Config { store_refresh_secs: 3600, ..config() };
    let a = replica(&store, slow_refresh()).await;
    let b = replica(&store, slow_refresh()).await;
    for round in 0..20 {
        store.down.store(true, Ordering::SeqCst);
        for (name, r) in [("A", &a), ("B", &b)] {
            let got = r.post("/models", &gp_body(round as f64)).await;
            assert_eq!(got.status(), 503, "round {round}: replica {name} with the store down");
            assert!(got.headers().contains_key("retry-after"));
        }
        store.down.store(false, Ordering::SeqCst);
        for (name, r) in [("A", &a), ("B", &b)] {
            let got = r.post("/models", &gp_body(round as f64 + 0.5)).await;
            let status = got.status().as_u16();
            assert_eq!(
                status,
                201,
                "round {round}: replica {name}'s first fit after the store came back: {}",
                got.text().await.unwrap()
            );
        }
    }
    let (_, listed) = json_of(b.get("/models").await).await;
    assert_eq!(listed["models"].as_array().unwrap().len(), 40, "every acknowledged fit is stored");
}

/// A store that accepts and never answers: fits, uploads and appends answer 503 with
/// Retry-After within the contract's 30 s, a cached model's predictions keep their
/// latency (p99 under 20 ms over 200), /healthz answers within 2 s; once the store answers
/// again everything acknowledged is there and nothing refused is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_store_is_refused_in_time_while_cached_models_keep_answering() {
    let store = shared_store();
    let a = replica(&store, config()).await;
    let id = a.train(&gp_body(0.0)).await["id"].as_str().unwrap().to_string();
    let want = a.post(&format!("/models/{id}/predict"), &query()).await.text().await.unwrap();
    store.hung.store(true, Ordering::SeqCst);
    let started = Instant::now();
    let timed = |r: reqwest::RequestBuilder| async move {
        let t = Instant::now();
        let r = r.send().await.expect("an answer");
        (r.status().as_u16(), r.headers().contains_key("retry-after"), t.elapsed())
    };
    let fit = tokio::spawn(timed(a.http.post(a.url("/models")).body(gp_body(1.0).to_string())));
    let upload =
        tokio::spawn(timed(a.http.post(a.url("/datasets")).header("content-type", "text/csv").body("a,y\n1,2\n3,4\n")));
    let append = tokio::spawn(timed(
        a.http
            .post(a.url(&format!("/models/{id}/observations")))
            .body(json!({"x": [[1.0, 0.5]], "y": [0.2]}).to_string()),
    ));
    // Meanwhile the cached model answers as usual.
    let mut latencies = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        let got = a.post(&format!("/models/{id}/predict"), &query()).await.text().await.unwrap();
        latencies.push(t.elapsed());
        assert_eq!(got, want);
    }
    latencies.sort();
    assert!(latencies[197] < Duration::from_millis(20), "p99 {:?} with the store hung", latencies[197]);
    let t = Instant::now();
    assert_eq!(a.get("/healthz").await.status(), 200);
    assert!(t.elapsed() < Duration::from_secs(2), "/healthz took {:?}", t.elapsed());
    for (what, task) in [("fit", fit), ("upload", upload), ("append", append)] {
        let (status, retry_after, took) = task.await.unwrap();
        assert_eq!(status, 503, "{what} with the store hung");
        assert!(retry_after, "{what}: 503 without Retry-After");
        assert!(took < Duration::from_secs(30), "{what} answered after {took:?}");
    }
    assert!(started.elapsed() < Duration::from_secs(60));
    store.hung.store(false, Ordering::SeqCst);
    let (_, listed) = json_of(a.get("/models").await).await;
    assert_eq!(listed["models"].as_array().unwrap().len(), 1, "the acknowledged model, nothing refused");
    let (_, m) = json_of(a.get(&format!("/models/{id}")).await).await;
    assert_eq!(m["version"].as_u64(), Some(1), "the refused append changed nothing");
    assert_eq!(a.post("/models", &gp_body(2.0)).await.status(), 201, "fits work again");
}

/// A slow store (a second per call): everything still succeeds, on both replicas.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_store_slows_but_fails_nothing() {
    let store = shared_store();
    let a = replica(&store, config()).await;
    let b = replica(&store, config()).await;
    store.slow.store(true, Ordering::SeqCst);
    let m = a.train(&gp_body(0.0)).await;
    let id = m["id"].as_str().unwrap().to_string();
    let upload = a.post_raw("/datasets", "a,y\n1,2\n3,4\n5,7\n", "text/csv").await;
    assert_eq!(upload.status(), 201);
    let r = a.post(&format!("/models/{id}/observations"), &json!({"x": [[1.0, 0.5]], "y": [0.2]})).await;
    assert_eq!(r.status(), 200);
    // B reads the model (a second version) from the slow store.
    let found = eventually(Duration::from_secs(20), async || {
        let (status, m) = json_of(b.get(&format!("/models/{id}")).await).await;
        status == 200 && m["version"].as_u64() == Some(2)
    })
    .await;
    assert!(found, "replica B sees version 2");
    let (a_says, b_says) = (
        a.post(&format!("/models/{id}/predict"), &query()).await.text().await.unwrap(),
        b.post(&format!("/models/{id}/predict"), &query()).await.text().await.unwrap(),
    );
    assert_eq!(a_says, b_says);
    assert_eq!(b.delete(&format!("/models/{id}")).await.status(), 204);
    store.slow.store(false, Ordering::SeqCst);
}

/// A DELETE on one replica racing appends on the other: every append answers 200 (it
/// came first) or 404 (the model is gone), and nothing brings the model back: afterwards
/// neither replica serves it, lists it, or finds it in the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_racing_appends_on_the_other_replica_resurrects_nothing() {
    let store = shared_store();
    let a = replica(&store, config()).await;
    let b = replica(&store, config()).await;
    for round in 0..5 {
        let id = a.train(&gp_body(round as f64)).await["id"].as_str().unwrap().to_string();
        // B knows the model before the race.
        assert_eq!(b.get(&format!("/models/{id}")).await.status(), 200);
        let appends = {
            let (http, url) = (b.http.clone(), b.url(&format!("/models/{id}/observations")));
            tokio::spawn(async move {
                let mut codes = Vec::new();
                for k in 0..6 {
                    let body = json!({"x": [[5.0 + k as f64 * 0.1, 0.3]], "y": [0.1]});
                    codes.push(http.post(&url).body(body.to_string()).send().await.unwrap().status().as_u16());
                }
                codes
            })
        };
        let deleted = a.delete(&format!("/models/{id}")).await.status().as_u16();
        assert_eq!(deleted, 204, "round {round}: the delete");
        let codes = appends.await.unwrap();
        assert!(codes.iter().all(|c| *c == 200 || *c == 404), "round {round}: appends answered {codes:?}");
        // Once one append saw the model gone, none after it found it again.
        if let Some(first_gone) = codes.iter().position(|c| *c == 404) {
            assert!(codes[first_gone..].iter().all(|c| *c == 404), "round {round}: resurrected: {codes:?}");
        }
        for (name, r) in [("A", &a), ("B", &b)] {
            let gone =
                eventually(Duration::from_secs(5), async || r.get(&format!("/models/{id}")).await.status() == 404)
                    .await;
            assert!(gone, "round {round}: replica {name} still serves the deleted model");
            let (_, listed) = json_of(r.get("/models").await).await;
            assert!(
                !listed["models"].as_array().unwrap().iter().any(|m| m["id"] == id.as_str()),
                "round {round}: replica {name} lists the deleted model"
            );
        }
        let key = format!("{id}.model");
        assert!(
            matches!(store.inner.tag(&key).await, Ok(None)),
            "round {round}: the model's object is back in the store"
        );
        let deltas = store.inner.list("deltas").await.unwrap();
        assert!(!deltas.iter().any(|o| o.key.contains(&id)), "round {round}: an update's delta is left: {deltas:?}");
    }
}

/// A fit from a dataset deleted on the other replica meanwhile: the fit is either ready
/// (it read the rows first) or refused at /dataset, never a 500 or a hang; the dataset
/// stays deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fit_from_a_dataset_deleted_on_the_other_replica_ends_cleanly() {
    let store = shared_store();
    let a = replica(&store, config()).await;
    let b = replica(&store, config()).await;
    let mut csv = String::from("u,v,y\n");
    for i in 0..400 {
        csv.push_str(&format!("{},{},{}\n", i as f64 / 40.0, (i % 9) as f64, (i as f64 / 40.0).sin()));
    }
    for round in 0..5 {
        let (_, d) = json_of(a.post_raw("/datasets", csv.clone(), "text/csv").await).await;
        let ds = d["id"].as_str().unwrap().to_string();
        let fit = {
            let (http, url) = (b.http.clone(), b.url("/models"));
            let body = json!({"model": "gaussian_process", "params": {"noise": 0.1}, "dataset": ds});
            tokio::spawn(async move {
                let r = http.post(url).body(body.to_string()).send().await.unwrap();
                let status = r.status().as_u16();
                (status, r.json::<Value>().await.unwrap_or(Value::Null))
            })
        };
        assert_eq!(a.delete(&format!("/datasets/{ds}")).await.status(), 204, "round {round}");
        let (status, body) = fit.await.unwrap();
        match status {
            201 => assert_eq!(body["status"], "ready", "round {round}: {body}"),
            404 | 422 => assert!(
                body["errors"][0]["pointer"] == "/dataset" || body["type"] == "/problems/not-found",
                "round {round}: {body}"
            ),
            other => panic!("round {round}: the fit answered {other}: {body}"),
        }
        for r in [&a, &b] {
            let gone =
                eventually(Duration::from_secs(5), async || r.get(&format!("/datasets/{ds}")).await.status() == 404)
                    .await;
            assert!(gone, "round {round}: the dataset is back");
        }
    }
}

/// After the store hung and came back, a delete on A is seen by B within the refresh
/// interval + 1 s: B's refresh that began during the hang tries its listing again on
/// fresh connections every interval instead of waiting out the listing's 5 s deadline.
/// 20 rounds.
#[tokio::test]
async fn a_delete_after_a_hang_is_seen_within_the_refresh_interval() {
    let store = shared_store();
    let (a, b) = (replica(&store, config()).await, replica(&store, config()).await);
    for round in 0..20 {
        let id = a.train(&gp_body(round as f64)).await["id"].as_str().unwrap().to_string();
        let known =
            eventually(Duration::from_secs(5), async || b.get(&format!("/models/{id}")).await.status() == 200).await;
        assert!(known, "round {round}: B lists the model");
        // Hang until both replicas' refreshes have a call waiting on the hung store: each
        // refreshes every second, and B's first hung call comes within a second of the
        // hang, before A's listing is tried again (a second after A's first).
        let before = store.hung_calls.load(Ordering::SeqCst);
        store.hung.store(true, Ordering::SeqCst);
        let waiting =
            eventually(Duration::from_secs(5), async || store.hung_calls.load(Ordering::SeqCst) >= before + 2).await;
        assert!(waiting, "round {round}: refreshes call the hung store");
        store.hung.store(false, Ordering::SeqCst);
        assert_eq!(a.delete(&format!("/models/{id}")).await.status(), 204, "round {round}");
        let deleted_at = Instant::now();
        let gone =
            eventually(Duration::from_secs(2), async || b.get(&format!("/models/{id}")).await.status() == 404).await;
        assert!(gone, "round {round}: B still serves the model {:?} after the delete", deleted_at.elapsed());
    }
}

/// A replica of its own S3 client (its own connection pool, as a process has) on `server`.
async fn s3_replica(server: &s3::S3Server, config: Config) -> common::TestServer {
    let settings = server.settings();
    let settings: Vec<(&str, &str)> = settings.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let url = format!("s3://{}/replicas", s3::BUCKET);
    let blobs = ObjectBlobs::s3_with(&url, std::env::temp_dir(), &settings).expect("an S3 client");
    let server = mercer::server::start_with_store(config, mercer::store::Store::new(Arc::new(blobs)))
        .await
        .expect("replica starts");
    let s = common::TestServer {
        url: format!("http://{}", server.addr),
        http: reqwest::Client::new(),
        server: Some(server),
    };
    s.service().wait_ready().await;
    s
}

async fn fit_status(r: &common::TestServer, body: &Value) -> (u16, String, bool) {
    let got = r.post("/models", body).await;
    let (status, retry_after) = (got.status().as_u16(), got.headers().contains_key("retry-after"));
    (status, got.text().await.unwrap_or_default(), retry_after)
}

/// A real S3 server killed (every connection closed) and started again on its port
/// 0.3 s later, 20 rounds, both replicas holding pooled connections from before and
/// refreshing every second. (a) Each replica fits during the outage: 503 with
/// Retry-After. Right after the restart, A's and then B's next fit both succeed: each
/// probes the store on that request, and neither uses a connection from before the
/// restart. (b) The same restart unseen (no request during it): a fit on each right
/// after, both 201.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_restarted_within_a_second_is_back_for_both_replicas() {
    let mut server = s3::S3Server::start();
    let a = s3_replica(&server, config()).await;
    let b = s3_replica(&server, config()).await;
    for round in 0..20 {
        let shift = round as f64;
        for (name, r) in [("A", &a), ("B", &b)] {
            let (status, text, _) = fit_status(r, &gp_body(shift)).await;
            assert_eq!(status, 201, "round {round}: replica {name} before the restart: {text}");
        }
        server.kill();
        for (name, r) in [("A", &a), ("B", &b)] {
            let (status, text, retry_after) = fit_status(r, &gp_body(shift + 0.25)).await;
            assert_eq!(status, 503, "round {round}: replica {name} with the store down: {text}");
            assert!(retry_after, "round {round}: replica {name}'s 503 names Retry-After");
        }
        tokio::time::sleep(Duration::from_millis(300)).await; // the outage's length
        server.restart();
        for (name, r) in [("A", &a), ("B", &b)] {
            let (status, text, _) = fit_status(r, &gp_body(shift + 0.5)).await;
            assert_eq!(status, 201, "round {round}: replica {name}'s first fit after the restart: {text}");
        }
        // (b) unseen: killed and restarted with no request in between.
        server.kill();
        tokio::time::sleep(Duration::from_millis(300)).await;
        server.restart();
        for (name, r) in [("A", &a), ("B", &b)] {
            let (status, text, _) = fit_status(r, &gp_body(shift + 0.75)).await;
            assert_eq!(status, 201, "round {round}: replica {name}'s fit right after an unseen restart: {text}");
        }
    }
}

/// Issue 52's first report, as its reporter ran it: two replicas of their own S3 clients
/// on a real S3 server that was killed and restarted before each round; a fit (60 rows)
/// on A that B has read, then A appends 2 rows at a time, 12 times in a row, while B
/// deletes the model 0.15 s in. B's 204 must stay a delete on both replicas within the
/// refresh interval + 2 s. Run with compaction every 2 deltas too, so that
/// compactions race the delete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_racing_appends_after_store_restarts_stays_a_delete() {
    let mut server = s3::S3Server::start();
    for compact_deltas in [32, 2] {
        let cfg = || Config { compact_deltas, ..config() };
        let a = s3_replica(&server, cfg()).await;
        let b = s3_replica(&server, cfg()).await;
        for round in 0..4 {
            let what = format!("compaction every {compact_deltas}, round {round}");
            server.kill();
            tokio::time::sleep(Duration::from_millis(300)).await; // the outage's length
            server.restart();
            let x: Vec<Vec<f64>> = (0..60).map(|i| vec![i as f64 / 10.0, (i % 7) as f64 / 3.0]).collect();
            let y: Vec<f64> = x.iter().map(|r| r[0].sin() + 0.3 * r[1]).collect();
            let body = json!({"model": "gaussian_process", "kernel": {"type": "rbf", "length_scale": 1.2},
                              "params": {"noise": 0.01}, "x": x, "y": y});
            let (status, text, _) = fit_status(&a, &body).await;
            assert_eq!(status, 201, "{what}: the fit: {text}");
            let id = serde_json::from_str::<Value>(&text).unwrap()["id"].as_str().unwrap().to_string();
            let known =
                eventually(Duration::from_secs(5), async || b.get(&format!("/models/{id}")).await.status() == 200)
                    .await;
            assert!(known, "{what}: B reads the model");
            let appends = {
                let (http, url) = (a.http.clone(), a.url(&format!("/models/{id}/observations")));
                tokio::spawn(async move {
                    let mut codes = Vec::new();
                    for k in 0..12 {
                        let t = 6.0 + k as f64 * 0.1;
                        let body = json!({"x": [[t, 0.3], [t + 0.05, 0.6]], "y": [t.sin(), (t + 0.05).sin()]});
                        codes.push(http.post(&url).body(body.to_string()).send().await.unwrap().status().as_u16());
                    }
                    codes
                })
            };
            tokio::time::sleep(Duration::from_millis(150)).await; // the reporter's timing
            assert_eq!(b.delete(&format!("/models/{id}")).await.status(), 204, "{what}: the delete");
            let codes = appends.await.unwrap();
            assert!(codes.iter().all(|c| *c == 200 || *c == 404), "{what}: appends answered {codes:?}");
            for (name, r) in [("A", &a), ("B", &b)] {
                let gone =
                    eventually(Duration::from_secs(3), async || r.get(&format!("/models/{id}")).await.status() == 404)
                        .await;
                assert!(gone, "{what}: replica {name} still serves the deleted model (appends {codes:?})");
            }
        }
    }
}

/// A write the store carries out after a delete answered 204 puts the deleted model's full
/// object back (a compaction's write the store held through a hang and carried out on
/// resuming, or one on a server whose conditional write is not atomic): neither replica
/// serves the model again within the refresh interval + 2 s, a replica started afterwards
/// does not adopt it, and a refresh takes the object back. Before the delete markers were
/// read at each refresh, the replica that had not deleted it served it for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_landing_after_a_delete_brings_nothing_back() {
    let store = shared_store();
    let (a, b) = (replica(&store, config()).await, replica(&store, config()).await);
    for round in 0..3 {
        let id = a.train(&gp_body(round as f64)).await["id"].as_str().unwrap().to_string();
        let known =
            eventually(Duration::from_secs(5), async || b.get(&format!("/models/{id}")).await.status() == 200).await;
        assert!(known, "round {round}: B reads the model");
        let append = json!({"x": [[7.0, 0.3]], "y": [0.6]});
        assert_eq!(a.post(&format!("/models/{id}/observations"), &append).await.status(), 200, "round {round}");
        let key = format!("{id}.model");
        let late = store.inner.get(&key).await.expect("the full object");
        assert_eq!(b.delete(&format!("/models/{id}")).await.status(), 204, "round {round}: the delete");
        store.inner.put(&key, late).await.expect("the late write lands");
        for (name, r) in [("A", &a), ("B", &b)] {
            let gone =
                eventually(Duration::from_secs(3), async || r.get(&format!("/models/{id}")).await.status() == 404)
                    .await;
            assert!(gone, "round {round}: replica {name} serves the deleted model again");
        }
        let fresh = replica(&store, config()).await;
        assert_eq!(fresh.get(&format!("/models/{id}")).await.status(), 404, "round {round}: a new replica adopts it");
        let (_, listed) = json_of(fresh.get("/models").await).await;
        assert!(
            !listed["models"].as_array().unwrap().iter().any(|m| m["id"] == id.as_str()),
            "round {round}: a new replica lists the deleted model"
        );
        let taken_back =
            eventually(Duration::from_secs(3), async || matches!(store.inner.tag(&key).await, Ok(None))).await;
        assert!(taken_back, "round {round}: the late object is still in the store");
    }
}

/// A replica that starts while the store's listing of the deltas fails (s3s-fs answers
/// 500 when a file goes while it walks) never serves a model at its full object's older
/// version: it adopts nothing it cannot bring to its newest version, and a lookup says 503
/// until the deltas can be listed, then the newest version. Before, it adopted the full
/// object's version and served it until a refresh listed the deltas: a client that had
/// seen version 3 on it before its restart saw version 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_starting_without_the_deltas_never_serves_an_older_version() {
    let store = shared_store();
    let a = replica(&store, config()).await;
    let id = a.train(&gp_body(0.0)).await["id"].as_str().unwrap().to_string();
    for k in 0..2 {
        let append = json!({"x": [[6.0 + k as f64, 0.3]], "y": [0.6]});
        assert_eq!(a.post(&format!("/models/{id}/observations"), &append).await.status(), 200);
    }
    store.deltas_unlisted.store(true, Ordering::SeqCst);
    let c = replica(&store, config()).await;
    for _ in 0..3 {
        let (status, m) = json_of(c.get(&format!("/models/{id}")).await).await;
        assert!(
            status == 503 || (status == 200 && m["version"] == 3),
            "while the deltas cannot be listed: {status} {m}"
        );
        let (_, listed) = json_of(c.get("/models").await).await;
        let shown: Vec<&Value> =
            listed["models"].as_array().unwrap().iter().filter(|m| m["id"] == id.as_str()).collect();
        assert!(shown.iter().all(|m| m["version"] == 3), "listed at an older version: {shown:?}");
    }
    store.deltas_unlisted.store(false, Ordering::SeqCst);
    let (status, m) = json_of(c.get(&format!("/models/{id}")).await).await;
    assert_eq!((status, m["version"].as_u64()), (200, Some(3)), "{m}");
}

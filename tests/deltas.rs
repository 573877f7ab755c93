//! Online updates stored as deltas (issue 29), on both store backends: a data directory
//! and the object-store backend (the object_store crate's in-memory store, through the
//! same code as S3; scripts/cluster.sh runs the S3 case against a real S3 server).
//!
//! - An append writes a small delta, not the model; a restart, a cache miss, another
//!   replica and a replica whose copy is stale rebuild the model bit for bit, also after
//!   kill -9 between appends and with a delta whose write was never acknowledged.
//! - Compaction writes a full object of the newest version and deletes the deltas it
//!   covers; it is safe against a concurrent append, a concurrent DELETE, a second
//!   replica compacting at once, and an appender whose copy predates the compaction.

mod common;

use common::switchable::{replica, shared_store, Switchable};
use common::{eventually, spawn_binary, TestServer};
use mercer::config::Config;
use mercer::estimator::StoredFit;
use mercer::service::Compaction;
use mercer::store::Store;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

/// Where the replicas of a test keep their models.
enum Backend {
    Dir(PathBuf),
    Objects(Arc<Switchable>),
}

impl Backend {
    fn both(tag: &str) -> Vec<Backend> {
        let dir = std::env::temp_dir().join(format!("mercer-deltas-{tag}-{}", Uuid::new_v4()));
        vec![Backend::Dir(dir), Backend::Objects(shared_store())]
    }

    fn name(&self) -> &'static str {
        match self {
            Backend::Dir(_) => "directory",
            Backend::Objects(_) => "object store",
        }
    }

    async fn replica(&self, config: Config) -> TestServer {
        match self {
            Backend::Dir(dir) => {
                let s = TestServer::start(Config { data_dir: dir.display().to_string(), ..config }).await;
                s.service().wait_ready().await;
                s
            }
            Backend::Objects(store) => replica(store, config).await,
        }
    }

    /// The store as a replica sees it, to look at its objects.
    fn store(&self) -> Store {
        match self {
            Backend::Dir(dir) => mercer::store::open("", &dir.display().to_string()).unwrap(),
            Backend::Objects(store) => Store::new(store.clone()),
        }
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        if let Backend::Dir(dir) = self {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Replicas that list the store every second and never compact unless told.
fn config() -> Config {
    Config { store_refresh_secs: 1, compact_deltas: 1000, ..Config::for_tests() }
}

fn rows(n: usize, from: usize) -> (Vec<Vec<f64>>, Vec<f64>) {
    let x: Vec<Vec<f64>> =
        (from..from + n).map(|i| vec![(i as f64 * 0.37).sin() * 3.0, (i % 7) as f64 / 3.0]).collect();
    let y = x.iter().map(|r| r[0].sin() + 0.3 * r[1]).collect();
    (x, y)
}

fn gp_body() -> Value {
    let (x, y) = rows(40, 0);
    json!({"model": "gaussian_process", "kernel": {"type": "rbf", "length_scale": 1.2},
           "params": {"noise": 0.01, "normalize_y": true}, "x": x, "y": y})
}

/// An append of `k` rows (the `round`th) for `body`'s model, with the per-row fields it
/// needs.
fn append_body(body: &Value, k: usize, round: usize) -> Value {
    let (x, y) = rows(k, 1000 + 10 * round);
    let mut out = json!({"x": x});
    out["y"] = if body["y"][0].is_array() {
        json!(y.iter().map(|v| vec![*v, 2.0 * v - 1.0]).collect::<Vec<_>>())
    } else {
        json!(y)
    };
    if body["params"]["noise"].is_array() {
        out["noise"] = json!((0..k).map(|i| 0.01 + 0.002 * i as f64).collect::<Vec<_>>());
    }
    if body["params"]["sample_weight"].is_array() {
        out["sample_weight"] = json!((0..k).map(|i| 0.5 + i as f64).collect::<Vec<_>>());
    }
    out
}

/// Models that take appends, with every per-row extra: a GP with per-row noise and
/// normalize_y, kernel ridge with sample weights, a GP with two outputs.
fn appendable_bodies() -> Vec<Value> {
    let (x, y) = rows(40, 0);
    let two: Vec<Vec<f64>> = y.iter().map(|v| vec![*v, 2.0 * v - 1.0]).collect();
    vec![
        json!({"model": "gaussian_process", "kernel": {"type": "rbf", "length_scale": 1.2},
               "params": {"noise": (0..40).map(|i| 0.01 + 0.001 * i as f64).collect::<Vec<_>>(), "normalize_y": true},
               "x": x, "y": y}),
        json!({"model": "kernel_ridge", "kernel": {"type": "laplacian", "length_scale": 0.8},
               "params": {"lambda": 0.1, "sample_weight": (0..40).map(|i| 0.5 + (i % 3) as f64).collect::<Vec<_>>()},
               "x": x, "y": y}),
        json!({"model": "gaussian_process", "kernel": {"type": "matern", "nu": 2.5, "length_scale": 0.9},
               "params": {"noise": 0.02}, "x": x, "y": two}),
    ]
}

fn query() -> Value {
    json!({"x": [[0.3, 0.1], [2.2, 1.5], [-1.9, 0.4], [0.0, 2.0]], "variance": true})
}

/// A prediction's text: equal text is equal bits (serde_json writes the shortest text
/// that reads back as the same f64).
async fn prediction(s: &TestServer, id: &str) -> String {
    let r = s.post(&format!("/models/{id}/predict"), &query()).await;
    assert_eq!(r.status(), 200, "predict {id}");
    let mut v: Value = r.json().await.unwrap();
    v.as_object_mut().unwrap().retain(|k, _| k != "duration_ms");
    v.to_string()
}

async fn append(s: &TestServer, id: &str, body: &Value) -> Value {
    let r = s.post(&format!("/models/{id}/observations"), body).await;
    let status = r.status();
    let m: Value = r.json().await.unwrap();
    assert_eq!(status, 200, "append: {m}");
    m
}

/// Every number of a fitted model's stored state, as bits.
fn bits(f: &StoredFit) -> Vec<u64> {
    let mut out: Vec<u64> = [&f.x, &f.alpha, &f.factor].iter().flat_map(|v| v.iter().map(|x| x.to_bits())).collect();
    out.extend([f.jitter, f.y_mean, f.y_std].map(f64::to_bits));
    for (_, a) in &f.arrays {
        out.extend(a.iter().map(|x| x.to_bits()));
    }
    out
}

/// The decoded model a replica holds now, as bits (it reads it from the store if needed).
async fn state(s: &TestServer, id: &str) -> Vec<u64> {
    let id = Uuid::parse_str(id).unwrap();
    let service = s.service();
    let entry = service.lookup(id).await.unwrap();
    bits(&service.fitted(&entry).await.unwrap().to_stored())
}

async fn stop(mut s: TestServer) {
    assert!(s.server.take().unwrap().shutdown().await, "clean shutdown");
}

/// Stored deltas of model `id`, by version.
async fn deltas_of(store: &Store, id: &str) -> Vec<u64> {
    let id = Uuid::parse_str(id).unwrap();
    let mut v: Vec<u64> =
        store.list_deltas().await.unwrap().into_iter().filter(|d| d.id == id).map(|d| d.version).collect();
    v.sort_unstable();
    v
}

/// The version of model `id`'s full object.
async fn full_version(store: &Store, id: &str) -> Option<u64> {
    let head = store.model_head(Uuid::parse_str(id).unwrap()).await.unwrap()?;
    Some(head.summary().unwrap().version)
}

async fn compact(s: &TestServer, id: &str) -> Compaction {
    let service = s.service();
    let entry = service.lookup(Uuid::parse_str(id).unwrap()).await.unwrap();
    let fitted = service.fitted(&entry).await.unwrap();
    service.replica.compact(&entry, fitted).await.unwrap()
}

/// Each append writes one small delta and leaves the full object as it was; a restart
/// rebuilds every model from its full object and deltas bit for bit (per-row noise,
/// sample weights, two outputs).
#[tokio::test]
async fn appends_are_small_deltas_and_a_restart_replays_them_bit_for_bit() {
    for backend in Backend::both("restart") {
        let what = backend.name();
        let store = backend.store();
        let s = backend.replica(config()).await;
        let mut models = Vec::new();
        for body in appendable_bodies() {
            let id = s.train(&body).await["id"].as_str().unwrap().to_string();
            let key = Uuid::parse_str(&id).unwrap();
            let full_before = store.model_head(key).await.unwrap().unwrap();
            for round in 0..4 {
                let m = append(&s, &id, &append_body(&body, 3, round)).await;
                assert_eq!(
                    (m["version"].as_u64(), m["n_train"].as_u64()),
                    (Some(round as u64 + 2), Some(43 + 3 * round as u64))
                );
            }
            assert_eq!(deltas_of(&store, &id).await, vec![2, 3, 4, 5], "{what}: one delta per append");
            assert_eq!(
                store.model_head(key).await.unwrap().unwrap(),
                full_before,
                "{what}: the full object is untouched"
            );
            let sizes: Vec<u64> =
                store.list_deltas().await.unwrap().iter().filter(|d| d.id == key).map(|d| d.bytes).collect();
            assert!(sizes.iter().all(|b| *b < 4096), "{what}: deltas of 3 rows are small: {sizes:?}");
            models.push((id.clone(), prediction(&s, &id).await, state(&s, &id).await));
        }
        stop(s).await;
        let s = backend.replica(config()).await;
        for (id, pred, bits) in models {
            let m: Value = s.get(&format!("/models/{id}")).await.json().await.unwrap();
            assert_eq!((m["version"].as_u64(), m["n_train"].as_u64()), (Some(5), Some(52)), "{what}: {m}");
            assert_eq!(state(&s, &id).await, bits, "{what}: the replayed state");
            assert!(s.service().metrics.deltas_replayed.get() >= 4, "{what}: read back by replaying");
            assert_eq!(prediction(&s, &id).await, pred, "{what}: predictions after the restart");
        }
        stop(s).await;
    }
}

/// kill -9 between appends loses nothing acknowledged: the restarted binary serves the
/// last acknowledged version bit for bit. A delta write that never finished (a temporary
/// file that never reached its name) is not a version, and is cleared at start.
#[tokio::test]
async fn kill_9_between_appends_keeps_every_acknowledged_version() {
    let dir = std::env::temp_dir().join(format!("mercer-deltas-kill9-{}", Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let http = reqwest::Client::new();
    let settings = [("MERCER_COMPACT_DELTAS", "1000")];
    let (mut child, mut url, _) = spawn_binary(&dir, &settings, "stored models loaded");
    let r = http.post(format!("{url}/models")).body(gp_body().to_string()).send().await.unwrap();
    assert_eq!(r.status(), 201);
    let id = r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_string();
    let predict = async |url: &str| {
        let r = http.post(format!("{url}/models/{id}/predict")).body(query().to_string()).send().await.unwrap();
        let mut v: Value = r.json().await.unwrap();
        v.as_object_mut().unwrap().retain(|k, _| k != "duration_ms");
        v.to_string()
    };
    let mut answered = Vec::new();
    for round in 0..3 {
        let r = http
            .post(format!("{url}/models/{id}/observations"))
            .body(append_body(&gp_body(), 2, round).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        answered.push(predict(&url).await);
        if round == 1 {
            // SIGKILL between two appends: the next one goes to a new process.
            child.kill().unwrap();
            child.wait().unwrap();
            let torn = dir.join("deltas").join(format!(".{}.tmp", Uuid::new_v4()));
            std::fs::write(&torn, b"half of a delta").unwrap();
            (child, url, _) = spawn_binary(&dir, &settings, "stored models loaded");
            assert_eq!(predict(&url).await, answered[1], "after kill -9: the last acknowledged version");
            assert!(!torn.exists(), "the torn write is cleared at start");
            let m: Value = http.get(format!("{url}/models/{id}")).send().await.unwrap().json().await.unwrap();
            assert_eq!((m["version"].as_u64(), m["n_train"].as_u64()), (Some(3), Some(44)), "{m}");
        }
    }
    // The appends after the restart stand too.
    let m: Value = http.get(format!("{url}/models/{id}")).send().await.unwrap().json().await.unwrap();
    assert_eq!(m["version"].as_u64(), Some(4), "{m}");
    child.kill().unwrap();
    child.wait().unwrap();
    let (mut child, url, _) = spawn_binary(&dir, &settings, "stored models loaded");
    assert_eq!(predict(&url).await, answered[2], "after a second kill -9");
    child.kill().unwrap();
    child.wait().unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

/// An update whose delta was stored but never acknowledged (the store went away right
/// after the write, so the append answered 503): it is a version like any other. A fresh
/// replica serves it; the replica that answered 503 catches up on its next append; the
/// two agree bit for bit, and with a refit on every row stored.
#[tokio::test]
async fn a_delta_stored_but_never_acknowledged_is_replayed_everywhere_alike() {
    let store = shared_store();
    let a = replica(&store, config()).await;
    let id = a.train(&gp_body()).await["id"].as_str().unwrap().to_string();
    store.down_after_delta.store(true, Ordering::SeqCst);
    let r = a.post(&format!("/models/{id}/observations"), &append_body(&gp_body(), 2, 0)).await;
    assert_eq!(r.status(), 503, "the store went away before the append could confirm");
    store.down.store(false, Ordering::SeqCst);

    let b = replica(&store, config()).await;
    let m: Value = b.get(&format!("/models/{id}")).await.json().await.unwrap();
    assert_eq!((m["version"].as_u64(), m["n_train"].as_u64()), (Some(2), Some(42)), "{m}");
    // A appends next: its version 2 is taken, so it catches up and appends version 3.
    // A found the store down; its next request probes it.
    let m = append(&a, &id, &append_body(&gp_body(), 2, 1)).await;
    assert_eq!((m["version"].as_u64(), m["n_train"].as_u64()), (Some(3), Some(44)), "{m}");
    let ok = eventually(Duration::from_secs(5), async || {
        let m: Value = b.get(&format!("/models/{id}")).await.json().await.unwrap();
        m["version"] == json!(3)
    })
    .await;
    assert!(ok, "B sees version 3 within the refresh");
    assert_eq!(prediction(&a, &id).await, prediction(&b, &id).await, "A and B agree bit for bit");
    assert_eq!(state(&a, &id).await, state(&b, &id).await);

    let mut all = gp_body();
    for round in 0..2 {
        let more = append_body(&gp_body(), 2, round);
        all["x"].as_array_mut().unwrap().extend(more["x"].as_array().unwrap().iter().cloned());
        all["y"].as_array_mut().unwrap().extend(more["y"].as_array().unwrap().iter().cloned());
    }
    let refit = a.train(&all).await["id"].as_str().unwrap().to_string();
    let (got, want): (Value, Value) = (
        serde_json::from_str(&prediction(&b, &id).await).unwrap(),
        serde_json::from_str(&prediction(&a, &refit).await).unwrap(),
    );
    for field in ["predictions", "variance"] {
        for (x, y) in got[field].as_array().unwrap().iter().zip(want[field].as_array().unwrap()) {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            assert!((x - y).abs() <= 1e-9 * y.abs().max(1e-3), "{field}: {x} vs refit {y}");
        }
    }
}

/// A replica holding an older version decoded brings it up by replaying the deltas
/// after it (no full read), and serves the newer version within the refresh; a replica
/// that never saw the model reads the full object and the deltas. All agree bit for bit.
#[tokio::test]
async fn a_stale_replica_replays_the_deltas_it_missed() {
    for backend in Backend::both("stale") {
        let what = backend.name();
        let a = backend.replica(config()).await;
        let b = backend.replica(config()).await;
        let id = a.train(&gp_body()).await["id"].as_str().unwrap().to_string();
        prediction(&b, &id).await; // B decodes version 1.
        for round in 0..5 {
            append(&a, &id, &append_body(&gp_body(), 2, round)).await;
        }
        let want = (prediction(&a, &id).await, state(&a, &id).await);
        let seen = eventually(Duration::from_secs(5), async || {
            let m: Value = b.get(&format!("/models/{id}")).await.json().await.unwrap();
            m["version"] == json!(6)
        })
        .await;
        assert!(seen, "{what}: B serves version 6 within the refresh");
        assert_eq!(prediction(&b, &id).await, want.0, "{what}: B's predictions");
        assert_eq!(state(&b, &id).await, want.1, "{what}: B's state");
        assert_eq!(b.service().metrics.deltas_replayed.get(), 5, "{what}: B replayed the five deltas onto its copy");
        let c = backend.replica(config()).await;
        assert_eq!(prediction(&c, &id).await, want.0, "{what}: a new replica's predictions");
        assert_eq!(state(&c, &id).await, want.1, "{what}: a new replica's state");
    }
}

/// Past `compact_deltas` deltas the appending replica writes a full object of the
/// newest version and deletes the deltas it covers, in the background; the model is
/// listed once throughout, and a new replica reads the compacted model bit for bit.
#[tokio::test]
async fn compaction_folds_the_deltas_into_a_full_object() {
    for backend in Backend::both("compact") {
        let what = backend.name();
        let store = backend.store();
        let a = backend.replica(Config { compact_deltas: 3, ..config() }).await;
        let id = a.train(&gp_body()).await["id"].as_str().unwrap().to_string();
        for round in 0..7 {
            append(&a, &id, &append_body(&gp_body(), 2, round)).await;
            let listed: Value = a.get("/models").await.json().await.unwrap();
            let times = listed["models"].as_array().unwrap().iter().filter(|m| m["id"] == id.as_str()).count();
            assert_eq!(times, 1, "{what}: listed once");
        }
        let compacted = eventually(Duration::from_secs(10), async || {
            a.service().metrics.compactions.get_or_create(&outcome("compacted")).get() >= 1
        })
        .await;
        assert!(compacted, "{what}: a compaction ran");
        // Whatever the background ones reached, one more brings the full object to the end.
        let last = compact(&a, &id).await;
        assert!(matches!(last, Compaction::Compacted { version: 8, .. } | Compaction::Raced), "{what}: {last:?}");
        let done = eventually(Duration::from_secs(10), async || {
            full_version(&store, &id).await == Some(8) && deltas_of(&store, &id).await.is_empty()
        })
        .await;
        assert!(done, "{what}: full object at 8 and no delta left: {:?}", deltas_of(&store, &id).await);
        let want = (prediction(&a, &id).await, state(&a, &id).await);
        let b = backend.replica(config()).await;
        let m: Value = b.get(&format!("/models/{id}")).await.json().await.unwrap();
        assert_eq!((m["version"].as_u64(), m["n_train"].as_u64()), (Some(8), Some(54)), "{what}: {m}");
        assert_eq!(prediction(&b, &id).await, want.0, "{what}: predictions from the compacted object");
        assert_eq!(state(&b, &id).await, want.1, "{what}");
        assert_eq!(b.service().metrics.deltas_replayed.get(), 0, "{what}: nothing left to replay");
        // Appends go on from the compacted object.
        let m = append(&b, &id, &append_body(&gp_body(), 2, 9)).await;
        assert_eq!(m["version"].as_u64(), Some(9), "{what}");
        assert_eq!(deltas_of(&store, &id).await, vec![9], "{what}");
    }
}

fn outcome(label: &str) -> mercer::metrics::OutcomeLabels {
    mercer::metrics::OutcomeLabels { outcome: label.into() }
}

/// Two replicas compacting one model at once: one writes, the other finds it done; the
/// model reads back bit for bit. A compaction racing a DELETE brings nothing back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compactions_race_each_other_and_deletes_safely() {
    for backend in Backend::both("race") {
        let what = backend.name();
        let store = backend.store();
        let a = backend.replica(config()).await;
        let b = backend.replica(config()).await;
        let id = a.train(&gp_body()).await["id"].as_str().unwrap().to_string();
        for round in 0..4 {
            append(&a, &id, &append_body(&gp_body(), 2, round)).await;
        }
        let want = (prediction(&a, &id).await, state(&a, &id).await);
        assert_eq!(state(&b, &id).await, want.1, "{what}: B up to date");
        let (x, y) = tokio::join!(compact(&a, &id), compact(&b, &id));
        let wrote = [x, y].iter().filter(|c| matches!(c, Compaction::Compacted { version: 5, .. })).count();
        assert_eq!(wrote, 1, "{what}: exactly one of two compactions writes: {x:?} {y:?}");
        assert_eq!((full_version(&store, &id).await, deltas_of(&store, &id).await), (Some(5), vec![]), "{what}");
        let c = backend.replica(config()).await;
        assert_eq!((prediction(&c, &id).await, state(&c, &id).await), want, "{what}: after the race");

        // A compaction on A while B appends: every append stands, in order.
        for round in 4..8 {
            append(&a, &id, &append_body(&gp_body(), 2, round)).await;
        }
        let appends = async {
            let mut versions = Vec::new();
            for round in 8..12 {
                versions.push(append(&b, &id, &append_body(&gp_body(), 2, round)).await["version"].as_u64().unwrap());
            }
            versions
        };
        let (compaction, versions) = tokio::join!(compact(&a, &id), appends);
        assert!(matches!(compaction, Compaction::Compacted { version: 9, .. }), "{what}: {compaction:?}");
        assert_eq!(versions, vec![10, 11, 12, 13], "{what}");
        assert_eq!(full_version(&store, &id).await, Some(9), "{what}");
        assert_eq!(deltas_of(&store, &id).await, vec![10, 11, 12, 13], "{what}: the deltas after the compaction stay");
        let want = (prediction(&b, &id).await, state(&b, &id).await);
        let d = backend.replica(config()).await;
        assert_eq!((prediction(&d, &id).await, state(&d, &id).await), want, "{what}: appends during a compaction");

        for round in 0..4 {
            let id = a.train(&gp_body()).await["id"].as_str().unwrap().to_string();
            for k in 0..3 {
                append(&a, &id, &append_body(&gp_body(), 1, k)).await;
            }
            let path = format!("/models/{id}");
            let (compaction, deleted) = tokio::join!(
                async {
                    let service = a.service();
                    let entry = service.lookup(Uuid::parse_str(&id).unwrap()).await.unwrap();
                    let fitted = service.fitted(&entry).await.unwrap();
                    service.replica.compact(&entry, fitted).await
                },
                b.delete(&path)
            );
            assert_eq!(deleted.status(), 204, "{what} round {round}");
            assert!(compaction.is_ok(), "{what} round {round}: {compaction:?}");
            assert_eq!(full_version(&store, &id).await, None, "{what} round {round}: the model came back");
            assert_eq!(deltas_of(&store, &id).await, Vec::<u64>::new(), "{what} round {round}: deltas left");
            for (name, r) in [("A", &a), ("B", &b)] {
                let gone = eventually(Duration::from_secs(5), async || r.get(&path).await.status() == 404).await;
                assert!(gone, "{what} round {round}: {name} still serves the deleted model");
            }
        }
    }
}

/// A replica whose copy predates a compaction appends: the key of its version was freed
/// by the compaction, so its write lands, but the full object is already past it and
/// did not fold it in: the append is withdrawn and redone on the newest version. It
/// answers that version, and nothing is lost or doubled.
#[tokio::test]
async fn an_append_from_before_a_compaction_is_redone_on_the_newest_version() {
    for backend in Backend::both("stale-append") {
        let what = backend.name();
        let store = backend.store();
        let a = backend.replica(config()).await;
        // B never lists the store: it learns only when it writes.
        let b = backend.replica(Config { store_refresh_secs: 3600, ..config() }).await;
        let id = a.train(&gp_body()).await["id"].as_str().unwrap().to_string();
        prediction(&b, &id).await;
        for round in 0..3 {
            append(&a, &id, &append_body(&gp_body(), 2, round)).await;
        }
        assert_eq!(compact(&a, &id).await, Compaction::Compacted { version: 4, deltas: 3 }, "{what}");
        let m = append(&b, &id, &append_body(&gp_body(), 2, 3)).await;
        assert_eq!((m["version"].as_u64(), m["n_train"].as_u64()), (Some(5), Some(48)), "{what}: {m}");
        assert_eq!(deltas_of(&store, &id).await, vec![5], "{what}: the withdrawn delta is gone");
        let c = backend.replica(config()).await;
        let want = (prediction(&b, &id).await, state(&b, &id).await);
        assert_eq!((prediction(&c, &id).await, state(&c, &id).await), want, "{what}");
    }
}

/// On a server whose conditional writes are not atomic (s3s-fs checks If-Match, then
/// writes), a compaction can land after a DELETE. It finds the delete's marker and takes
/// its write back: nothing comes back.
#[tokio::test]
async fn a_compaction_landing_after_a_delete_is_taken_back() {
    let store = shared_store();
    let a = replica(&store, config()).await;
    let b = replica(&store, config()).await;
    let id = a.train(&gp_body()).await["id"].as_str().unwrap().to_string();
    for round in 0..3 {
        append(&a, &id, &append_body(&gp_body(), 2, round)).await;
    }
    let service = a.service();
    let key = Uuid::parse_str(&id).unwrap();
    let entry = service.lookup(key).await.unwrap();
    let fitted = service.fitted(&entry).await.unwrap();
    // The compaction has read the model and checked its version; B deletes it; then the
    // write lands regardless (the server's check came before the delete).
    store.unconditional.store(true, Ordering::SeqCst);
    store.hold_put_if.store(true, Ordering::SeqCst);
    let compaction = {
        let service = service.clone();
        tokio::spawn(async move { service.replica.compact(&entry, fitted).await })
    };
    store.put_if_reached.notified().await;
    assert_eq!(b.delete(&format!("/models/{id}")).await.status(), 204);
    store.put_if_resume.notify_one();
    assert_eq!(compaction.await.unwrap().unwrap(), Compaction::Raced);
    store.unconditional.store(false, Ordering::SeqCst);
    let view = Store::new(store.clone());
    assert_eq!(full_version(&view, &id).await, None, "the compaction's write was taken back");
    assert_eq!(deltas_of(&view, &id).await, Vec::<u64>::new());

    for (name, r) in [("A", &a), ("B", &b)] {
        let gone =
            eventually(Duration::from_secs(5), async || r.get(&format!("/models/{id}")).await.status() == 404).await;
        assert!(gone, "{name} serves the deleted model");
    }
}

/// A damaged delta: the model answers 500 `damaged-model` naming the delta (a stored
/// model is not lost: its full object stays), counted in
/// `mercer_store_damaged_objects_total`; once an operator removes that delta (and any
/// after it) the model serves the last intact version again.
#[tokio::test]
async fn a_damaged_delta_is_its_own_problem_and_its_removal_recovers_the_model() {
    let dir = std::env::temp_dir().join(format!("mercer-deltas-damaged-{}", Uuid::new_v4()));
    let backend = Backend::Dir(dir.clone());
    let s = backend.replica(config()).await;
    let id = s.train(&gp_body()).await["id"].as_str().unwrap().to_string();
    let before = prediction(&s, &id).await;
    append(&s, &id, &append_body(&gp_body(), 3, 0)).await;
    append(&s, &id, &append_body(&gp_body(), 2, 1)).await;
    let versions = deltas_of(&backend.store(), &id).await;
    assert_eq!(versions.len(), 2, "two deltas");
    stop(s).await;
    // The first of the two: a replica learns the newest version from the second and
    // needs the first to reach it.
    let uuid = Uuid::parse_str(&id).unwrap();
    let key = mercer::store::delta::delta_key(uuid, versions[0]);
    std::fs::write(dir.join(&key), b"not a delta at all").unwrap();

    let s = backend.replica(config()).await;
    let r = s.post(&format!("/models/{id}/predict"), &query()).await;
    assert_eq!(r.status(), 500);
    let p: Value = r.json().await.unwrap();
    assert_eq!(p["type"], "/problems/damaged-model", "{p}");
    assert!(p["detail"].as_str().unwrap().contains(&key), "the delta is named: {p}");
    let metrics = s.get("/metrics").await.text().await.unwrap();
    // Every read that finds it counts (the start's and the predict's here).
    let counted = metrics
        .lines()
        .find_map(|l| l.strip_prefix("mercer_store_damaged_objects_total{object=\"delta\"} "))
        .and_then(|v| v.parse::<f64>().ok());
    assert!(counted.is_some_and(|c| c >= 1.0), "{metrics}");
    assert!(dir.join(format!("{id}.model")).exists(), "the full object stays");
    stop(s).await;

    // What docs/monitoring.md tells an operator: remove the damaged delta and any later.
    for v in &versions {
        std::fs::remove_file(dir.join(mercer::store::delta::delta_key(uuid, *v))).unwrap();
    }
    let s = backend.replica(config()).await;
    assert_eq!(prediction(&s, &id).await, before, "the last intact version");
    stop(s).await;
}

/// The count of `mercer_store_damaged_objects_total{object="delta"}`, 0 when absent.
async fn damaged_deltas(s: &TestServer) -> f64 {
    let metrics = s.get("/metrics").await.text().await.unwrap();
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("mercer_store_damaged_objects_total{object=\"delta\"} "))
        .map_or(0.0, |v| v.parse().unwrap())
}

/// A damaged *newest* delta, met by another replica's refresh: that replica keeps serving
/// the intact version before it, and reports the delta once (logged and counted once over
/// any number of refreshes), instead of skipping it in silence.
#[tokio::test]
async fn a_damaged_newest_delta_met_by_a_refresh_is_reported_once() {
    let dir = std::env::temp_dir().join(format!("mercer-deltas-newest-{}", Uuid::new_v4()));
    let backend = Backend::Dir(dir.clone());
    // B refreshes only when told to here.
    let (a, b) =
        (backend.replica(config()).await, backend.replica(Config { store_refresh_secs: 3600, ..config() }).await);
    let id = a.train(&gp_body()).await["id"].as_str().unwrap().to_string();
    let before = prediction(&b, &id).await;
    append(&a, &id, &append_body(&gp_body(), 3, 0)).await;
    let versions = deltas_of(&backend.store(), &id).await;
    assert_eq!(versions.len(), 1);
    let key = mercer::store::delta::delta_key(Uuid::parse_str(&id).unwrap(), versions[0]);
    std::fs::write(dir.join(&key), b"not a delta at all").unwrap();
    assert_eq!(damaged_deltas(&b).await, 0.0);
    for _ in 0..3 {
        b.service().sync_store().await;
    }
    assert_eq!(damaged_deltas(&b).await, 1.0, "reported once over three refreshes");
    assert_eq!(prediction(&b, &id).await, before, "B serves the intact version before it");
    stop(a).await;
    stop(b).await;
}

//! `cargo bench --bench append_cost`: where an online update's wall time goes, through
//! HTTP on a data directory (issue 42). A GP (rbf, length scale 2, noise 0.01) fitted on
//! n = 4000 rows of d = 8 through `POST /models`; then `POST /models/{id}/observations`
//! of 10 rows, timed from the client (median of 15, no compaction). Beside it, each part
//! alone, medians too:
//!
//! - the HTTP round trip of a request that does nothing (`GET /healthz`), and the JSON
//!   of the append's body and of its answer, encoded and decoded;
//! - the arithmetic: `FittedModel::append_with` on the same model;
//! - the stored write: `Store::create_delta` on a directory store (encode, a temporary
//!   file written and fsynced, linked in place, the directory fsynced), and its two
//!   fsyncs alone (a 1.3 KB file; a directory);
//! - the confirmation: `Store::model_tag` (a stat of the full object).
//!
//! The machine is shared: compare within one run.

mod common;

use common::{median_ms, points};
use mercer::config::Config;
use mercer::estimator::{StoredAppend, TrainingSet};
use mercer::linalg::Parallelism;
use mercer::store::delta::{Delta, DeltaHead};
use serde_json::{json, Value};
use std::io::Write;

const D: usize = 8;
const N: usize = 4000;
const K: usize = 10;

fn rows(t: &TrainingSet) -> Value {
    let x: Vec<Vec<f64>> = (0..t.x.n()).map(|i| t.x.point(i).to_vec()).collect();
    json!({"x": x, "y": t.y})
}

fn main() {
    mercer::tune_allocator();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = std::env::temp_dir().join(format!("mercer-append-cost-{}", std::process::id()));
    let config =
        Config { data_dir: dir.join("data").display().to_string(), compact_deltas: 1000, ..Config::for_tests() };
    let server = rt.block_on(mercer::server::start(config)).unwrap();
    let url = format!("http://{}", server.addr);
    let http = reqwest::Client::new();
    let head = common::smooth_targets(points(D, N, 11));
    let mut fit = rows(&head);
    fit["model"] = json!("gaussian_process");
    fit["kernel"] = json!({"type": "rbf", "length_scale": 2.0});
    fit["params"] = json!({"noise": 0.01});
    let model: Value = rt.block_on(async {
        let r = http.post(format!("{url}/models")).json(&fit).send().await.unwrap();
        assert_eq!(r.status(), 201);
        r.json().await.unwrap()
    });
    let id = model["id"].as_str().unwrap().to_string();
    let batch = |r: u64| common::smooth_targets(points(D, K, 100 + r));

    // The whole append through HTTP, as a client sees it.
    let mut r = 0;
    let mut answer = Vec::new();
    let http_ms = median_ms(15, || {
        r += 1;
        let body = serde_json::to_vec(&rows(&batch(r))).unwrap();
        answer = rt.block_on(async {
            let got = http
                .post(format!("{url}/models/{id}/observations"))
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap();
            assert_eq!(got.status(), 200);
            got.bytes().await.unwrap().to_vec()
        });
    });
    let healthz_ms = median_ms(31, || {
        rt.block_on(async { http.get(format!("{url}/healthz")).send().await.unwrap().bytes().await.unwrap() });
    });
    let body = serde_json::to_vec(&rows(&batch(0))).unwrap();
    let json_ms = median_ms(31, || {
        let v: Value = serde_json::from_slice(&body).unwrap();
        std::hint::black_box(serde_json::to_vec(&v).unwrap());
        let a: Value = serde_json::from_slice(&answer).unwrap();
        std::hint::black_box(serde_json::to_vec(&a).unwrap());
    });

    // The arithmetic on the model as the service holds it.
    let service = server.service.clone();
    let fitted = rt.block_on(async {
        let entry = service.lookup(id.parse().unwrap()).await.unwrap();
        service.fitted(&entry).await.unwrap()
    });
    let new = batch(1000);
    let grow_ms = median_ms(9, || {
        std::hint::black_box(fitted.append_with(&new, None, None, Parallelism::Parallel).unwrap());
    });

    // The stored write and its confirmation, on a directory store of their own.
    let store = mercer::store::open("", &dir.join("parts").display().to_string()).unwrap();
    let uuid = uuid::Uuid::new_v4();
    let mut version = 1;
    let delta_ms = median_ms(15, || {
        version += 1;
        let delta = Delta {
            head: DeltaHead { id: uuid, version, write_id: version, n_train: (N + K) as u64, summary: "{}".into() },
            rows: StoredAppend::of(&new, None, None),
        };
        rt.block_on(store.create_delta(&delta)).unwrap();
    });
    let tag_ms = median_ms(31, || {
        std::hint::black_box(rt.block_on(service.replica.store.model_tag(id.parse().unwrap())).unwrap());
    });
    let scratch = dir.join("fsync");
    std::fs::create_dir_all(&scratch).unwrap();
    let bytes = vec![7u8; 1300];
    let mut f = 0;
    let file_fsync_ms = median_ms(15, || {
        f += 1;
        let mut file = std::fs::File::create(scratch.join(format!("f{f}"))).unwrap();
        file.write_all(&bytes).unwrap();
        file.sync_all().unwrap();
    });
    let dir_fsync_ms = median_ms(15, || {
        std::fs::File::open(&scratch).unwrap().sync_all().unwrap();
    });

    println!("n = {N}, k = {K}, d = {D}, {} threads; answer {} bytes", rayon::current_num_threads(), answer.len());
    println!();
    println!("| part | ms (median) |");
    println!("|---|---|");
    println!("| **append of {K} rows through HTTP, stored (client's wall time)** | **{http_ms:.2}** |");
    println!("| the arithmetic (`append_with`: grown factor, z, alpha) | {grow_ms:.2} |");
    println!("| the delta stored (`create_delta`: encode, temp file + fsync, link, directory fsync) | {delta_ms:.2} |");
    println!("| - of which one fsync of a 1.3 KB file | {file_fsync_ms:.2} |");
    println!("| - of which one fsync of a directory | {dir_fsync_ms:.2} |");
    println!("| the confirmation (`model_tag`: a stat) | {tag_ms:.2} |");
    println!("| an HTTP round trip doing nothing (`GET /healthz`) | {healthz_ms:.2} |");
    println!("| JSON of the body and the answer, decoded and encoded | {json_ms:.2} |");
    let parts = grow_ms + delta_ms + tag_ms + healthz_ms + json_ms;
    println!("| the parts' sum | {parts:.2} |");
    println!("| the rest (locks, checks, the entry's swap, the worker hand-offs) | {:.2} |", http_ms - parts);
    println!(
        "| target: 2 x arithmetic + one fsync of the delta | {:.2} ({}) |",
        2.0 * grow_ms + file_fsync_ms,
        if http_ms <= 2.0 * grow_ms + file_fsync_ms { "met" } else { "missed" }
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

//! `cargo bench --bench store`: how long a restart takes to become ready with 100 stored
//! GP models of n = 2000 (d = 8), i.e. reading, checking and decoding ~3.2 GB.

mod common;

use common::points;
use mercer::config::Config;
use mercer::dataset::rows::Row;
use mercer::service::{Service, Target, TrainInput, TrainSource};
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;

fn main() {
    mercer::tune_allocator();
    let dir = std::env::temp_dir().join(format!("mercer-store-bench-{}", std::process::id()));
    let config = Config { data_dir: dir.display().to_string(), ..Config::for_tests() };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (models, n) = (100, 2000);
    let service = Arc::new(Service::new(config.clone()));
    service.load_store();
    let x = points(8, n, 3);
    let rows: Vec<Row> = (0..n).map(|i| Row::Numbers(x.point(i).to_vec())).collect();
    let y: Vec<Target> = (0..n).map(|i| Target::Number((i as f64 * 0.01).sin())).collect();
    let started = Instant::now();
    for _ in 0..models {
        let input = TrainInput {
            model: "gaussian_process".into(),
            kernel: Some(json!({"type": "rbf", "length_scale": 2.0})),
            params: Some(json!({"noise": 0.01})),
            source: TrainSource::Rows { x: rows.clone(), y: Some(y.clone()) },
            name: None,
            metadata: None,
            search: None,
        };
        rt.block_on(service.train(input, true)).unwrap();
    }
    let written = started.elapsed();
    let bytes: u64 = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum();
    drop(service);
    // Cold-ish: the files were just written, so the page cache holds what fits in it.
    let restarted = Instant::now();
    let service = Service::new(config);
    let loaded = service.load_store();
    let ready = restarted.elapsed();
    println!(
        "{models} GP models, n = {n}: written in {:.1} s ({:.2} GB); restart ready after {:.2} s ({loaded} loaded, {:.2} GB/s)",
        written.as_secs_f64(),
        bytes as f64 / 1e9,
        ready.as_secs_f64(),
        bytes as f64 / 1e9 / ready.as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

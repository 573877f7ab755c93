//! `cargo bench --bench online`: appending 10 rows to a model of n = 4000 against a refit
//! on the 4010 rows (issue 18), in one run:
//!
//! - the numbers alone (`FittedModel::append` against `ModelSpec::fit`), with the
//!   append's parts: the block of the factor (B = L^-1 C, then M), the copy into the
//!   grown factor, the solve for alpha;
//! - through the service, with a durable directory store and with an S3 server (s3s-fs,
//!   when on PATH): a stored fit of the 4010 rows against an append, which stores its rows
//!   as a small delta before it answers (issue 29); a new replica's first use of a model
//!   with 50 deltas (full object plus 50 replays) and of the same model compacted; and
//!   the compaction itself (the full object, (n + k)^2 factor values, written again).
//!
//! - scikit-learn's refits on the same 4010 rows (`benches/sklearn_online.py`): it has no
//!   online update, so adding rows means refitting.
//!
//! Data as the peer bench's shape: d = 8, rbf with length scale 2, noise 0.01 (GP) or
//! lambda 0.01 (kernel ridge), seeded points in [-1, 1]^8. Medians; the machine is shared,
//! so compare within one run.

mod common;

use common::{median_ms, points, python};
use mercer::config::Config;
use mercer::dataset::rows::Row;
use mercer::estimator::{FitContext, FittedModel, ModelKind, ModelSpec, TrainingData, TrainingSet};
use mercer::kernel::{Kernel, Points};
use mercer::linalg::{Cholesky, Parallelism};
use mercer::service::{Service, Target, TrainInput, TrainOutcome, TrainSource};
use mercer::store::{ModelHead, ModelSummary, StoredModel};
use nalgebra::DVector;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

const D: usize = 8;
const N: usize = 4000;
const K: usize = 10;
const PAR: Parallelism = Parallelism::Parallel;

fn dataset(n: usize, seed: u64) -> TrainingSet {
    common::smooth_targets(points(D, n, seed))
}

fn spec(kind: ModelKind) -> (ModelSpec, Value) {
    let kernel = json!({"type": "rbf", "length_scale": 2.0});
    let params = match kind {
        ModelKind::GaussianProcess => json!({"noise": 0.01}),
        _ => json!({"lambda": 0.01}),
    };
    let spec = ModelSpec::from_json(kind, Kernel::from_json(&kernel).unwrap(), Some(&params)).unwrap();
    (spec, params)
}

fn fit(kind: ModelKind, data: &TrainingSet) -> FittedModel {
    spec(kind).0.fit(&TrainingData::Regression(data.clone()), &FitContext::new(PAR)).unwrap()
}

/// scikit-learn's refit times on `data` (name -> ms), or none without a Python that has it.
fn sklearn_refits(data: &TrainingSet) -> HashMap<String, f64> {
    let mut out = HashMap::new();
    let Some(p) = python() else {
        eprintln!("note: no Python with numpy, scipy and scikit-learn; set MERCER_BENCH_PYTHON");
        return out;
    };
    let rows: Vec<Vec<f64>> = (0..data.x.n()).map(|i| data.x.point(i).to_vec()).collect();
    let path = std::env::temp_dir().join(format!("mercer-online-bench-{}.json", std::process::id()));
    std::fs::write(&path, json!({"x": rows, "y": data.y}).to_string()).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/sklearn_online.py");
    match Command::new(&p).arg(script).arg(&path).output() {
        Ok(o) if o.status.success() => {
            for line in String::from_utf8_lossy(&o.stdout).lines() {
                if let Some((name, ms)) = line.split_once('\t') {
                    if let Ok(ms) = ms.parse() {
                        out.insert(name.to_string(), ms);
                    }
                }
            }
        }
        Ok(o) => eprintln!("note: {script} failed: {}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => eprintln!("note: cannot run {p}: {e}"),
    }
    let _ = std::fs::remove_file(path);
    out
}

fn main() {
    mercer::tune_allocator();
    let all = dataset(N + K, 11);
    let head = TrainingSet::new(all.x.slice(0, N), all.y[..N].to_vec());
    let new = TrainingSet::new(all.x.slice(N, K), all.y[N..].to_vec());
    println!("n = {N}, k = {K}, d = {D}, {} threads", rayon::current_num_threads());
    println!();
    println!("| operation | ms (median) | refit / append |");
    println!("|---|---|---|");
    // MERCER_BENCH_SERVICE_ONLY=1: only the rows through the service.
    if std::env::var("MERCER_BENCH_SERVICE_ONLY").is_ok() {
        service_rows(&all, &head);
        return;
    }

    // The numbers alone.
    let gp = fit(ModelKind::GaussianProcess, &head);
    let append_ms = median_ms(15, || {
        std::hint::black_box(gp.append(&new, PAR).unwrap());
    });
    let refit_ms = median_ms(3, || {
        std::hint::black_box(fit(ModelKind::GaussianProcess, &all));
    });
    println!("| GP refit on {} rows | {refit_ms:.1} | |", N + K);
    println!("| GP append of {K} rows | {append_ms:.1} | {:.1}x |", refit_ms / append_ms);

    // The append's parts, on the same factor.
    let kernel = Kernel::from_json(&json!({"type": "rbf", "length_scale": 2.0})).unwrap();
    let chol = Cholesky::factor(mercer::estimator::regularised_gram(&kernel, &head.x, 0.01, PAR), PAR).unwrap();
    let extend_ms = median_ms(7, || {
        let cross = kernel.cross(&head.x, &new.x, PAR);
        let mut corner = kernel.gram(&new.x, PAR);
        for i in 0..K {
            corner[(i, i)] += 0.01;
        }
        std::hint::black_box(chol.extend(cross, corner, PAR).unwrap());
    });
    let grown = {
        let cross = kernel.cross(&head.x, &new.x, PAR);
        let mut corner = kernel.gram(&new.x, PAR);
        for i in 0..K {
            corner[(i, i)] += 0.01;
        }
        chol.extend(cross, corner, PAR).unwrap()
    };
    let mut b = kernel.cross(&head.x, &new.x, PAR);
    let solve_block_ms = median_ms(7, || {
        b.copy_from(&kernel.cross(&head.x, &new.x, PAR));
        chol.solve_l_in_place(&mut b, PAR);
    });
    let y = DVector::from_column_slice(&all.y);
    let alpha_ms = median_ms(7, || {
        std::hint::black_box(grown.solve_vec(&y));
    });
    // With z = L^-1 y kept (issue 29): the new rows of z by forward substitution, then
    // one backward pass for alpha.
    let mut z_head = nalgebra::DMatrix::from_column_slice(N, 1, &all.y[..N]);
    chol.forward_columns_in_place(&mut z_head, PAR);
    let alpha_z_ms = median_ms(7, || {
        let mut b = nalgebra::DMatrix::from_column_slice(N + K, 1, &all.y);
        b.rows_mut(0, N).copy_from(&z_head);
        grown.forward_rows_from(N, &mut b);
        grown.backward_columns_in_place(&mut b, PAR);
        std::hint::black_box(b);
    });
    println!("| - grow the factor (B = L^-1 C, M, copy into the grown factor) | {extend_ms:.1} | |");
    println!("| -- of which the cross block and B = L^-1 C | {solve_block_ms:.1} | |");
    println!("| - alpha: two triangular solves with the grown factor (a fit's way) | {alpha_ms:.1} | |");
    println!("| - alpha from z = L^-1 y kept: z's new rows, then one triangular solve (the append's way) | {alpha_z_ms:.1} | |");

    let grown_gp = gp.append(&new, PAR).unwrap();
    let to_stored_ms = median_ms(3, || {
        std::hint::black_box(grown_gp.to_stored());
    });
    let stored = StoredModel {
        id: uuid::Uuid::nil(),
        name: None,
        metadata: None,
        created_at_unix_nanos: 0,
        n_train: (N + K) as u64,
        n_features: D as u64,
        fit: grown_gp.to_stored(),
        extra: "{}".into(),
        sample: String::new(),
    };
    let head_of = ModelHead::of(&stored, ModelKind::GaussianProcess, &ModelSummary::of(&grown_gp));
    let encode_ms = median_ms(3, || {
        std::hint::black_box(mercer::store::format::encode(&stored, &head_of));
    });
    println!("| - to store it: the plain-data copy (to_stored) | {to_stored_ms:.1} | |");
    println!(
        "| - to store it: encoding the file ({} MB) | {encode_ms:.1} | |",
        mercer::store::format::encode(&stored, &head_of).len() >> 20
    );

    let krr = fit(ModelKind::KernelRidge, &head);
    let first_ms = median_ms(3, || {
        std::hint::black_box(krr.append(&new, PAR).unwrap());
    });
    let krr_grown = krr.append(&new, PAR).unwrap();
    let more = dataset(K, 12);
    let later_ms = median_ms(7, || {
        std::hint::black_box(krr_grown.append(&more, PAR).unwrap());
    });
    let krr_refit_ms = median_ms(3, || {
        std::hint::black_box(fit(ModelKind::KernelRidge, &all));
    });
    println!("| kernel ridge refit on {} rows | {krr_refit_ms:.1} | |", N + K);
    println!(
        "| kernel ridge first append (factorises: a fit keeps no factor) | {first_ms:.1} | {:.1}x |",
        krr_refit_ms / first_ms
    );
    println!("| kernel ridge later appends | {later_ms:.1} | {:.1}x |", krr_refit_ms / later_ms);

    // scikit-learn has no online update: its users refit.
    let sklearn = sklearn_refits(&all);
    for (name, ours, what) in
        [("gp refit", append_ms, "GP append"), ("krr refit", later_ms, "kernel ridge later append")]
    {
        if let Some(ms) = sklearn.get(&format!("{name} n={}", N + K)) {
            println!(
                "| scikit-learn {name} on {} rows, against mercer's {what} | {ms:.1} | {:.1}x |",
                N + K,
                ms / ours
            );
        }
    }

    service_rows(&all, &head);
}

fn service_rows(all: &TrainingSet, head: &TrainingSet) {
    // Through the service, stored durably before the answer: a data directory, and an
    // S3 server (s3s-fs) when one is on PATH.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = std::env::temp_dir().join(format!("mercer-online-bench-{}", std::process::id()));
    let config = Config { data_dir: dir.display().to_string(), ..Config::for_tests() };
    let mut stores = vec![("durable directory", config, None)];
    match S3Server::start(&dir.join("s3")) {
        Ok(s3) => {
            let config = Config {
                store_url: format!("s3://{}/bench", S3Server::BUCKET),
                data_dir: dir.join("scratch").display().to_string(),
                ..Config::for_tests()
            };
            stores.push(("S3 (s3s-fs on loopback)", config, Some(s3)));
        }
        Err(e) => eprintln!("note: no S3 row: {e}"),
    }
    for (label, config, _s3) in &stores {
        let r = through_service(&rt, config, all, head);
        println!("| service, {label}: fit of {} rows, stored | {:.1} | |", N + K, r.refit_ms);
        println!(
            "| service, {label}: append of {K} rows, stored as a delta (n = {N} on) | {:.1} | {:.1}x |",
            r.append_ms,
            r.refit_ms / r.append_ms
        );
        println!(
            "| service, {label}: a new replica's first prediction, model with {DELTAS} deltas (n = {}) | {:.1} | |",
            N + DELTAS * K,
            r.first_use_ms
        );
        println!("| service, {label}: the same, once compacted (no delta) | {:.1} | |", r.first_use_compacted_ms);
        println!(
            "| service, {label}: compaction ({DELTAS} deltas into a full object of {} MB) | {:.1} | |",
            r.full_bytes >> 20,
            r.compact_ms
        );
    }
    drop(stores);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Deltas a model has when a new replica first reads it.
const DELTAS: usize = 50;

struct Served {
    refit_ms: f64,
    append_ms: f64,
    first_use_ms: f64,
    first_use_compacted_ms: f64,
    compact_ms: f64,
    full_bytes: u64,
}

/// The service over the store `config` names: a stored fit of all the rows against an
/// append of K (median of 9, below the compaction threshold); then the model grown to
/// DELTAS deltas, read by a new replica; compacted; read again.
fn through_service(rt: &tokio::runtime::Runtime, config: &Config, all: &TrainingSet, head: &TrainingSet) -> Served {
    let config = Config { compact_deltas: 1000, ..config.clone() };
    let service = rt.block_on(async { Arc::new(Service::new(config.clone())) });
    service.load_store();
    let rows = |p: &Points| (0..p.n()).map(|i| Row::Numbers(p.point(i).to_vec())).collect::<Vec<Row>>();
    let targets = |y: &[f64]| y.iter().map(|v| Target::Number(*v)).collect::<Vec<Target>>();
    let train = |data: &TrainingSet| {
        let input = TrainInput {
            model: "gaussian_process".into(),
            kernel: Some(json!({"type": "rbf", "length_scale": 2.0})),
            params: Some(spec(ModelKind::GaussianProcess).1),
            source: TrainSource::Rows { x: rows(&data.x), y: Some(targets(&data.y)) },
            name: None,
            metadata: None,
            search: None,
        };
        match rt.block_on(service.train(input, true)).unwrap() {
            TrainOutcome::Ready(e) => e.id,
            TrainOutcome::Accepted(_) => panic!("the fit outlasted the wait"),
        }
    };
    let mut refits = Vec::new();
    let refit_ms = median_ms(3, || refits.push(train(all)));
    for id in refits {
        rt.block_on(service.delete(id, false, None)).unwrap();
    }
    let id = train(head);
    let append = |r: u64| {
        let batch = dataset(K, 100 + r);
        let started = Instant::now();
        rt.block_on(service.append_observations(id, rows(&batch.x), targets(&batch.y), Default::default())).unwrap();
        started.elapsed().as_secs_f64() * 1e3
    };
    let mut times: Vec<f64> = (0..9).map(append).collect();
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    for r in 9..DELTAS as u64 {
        append(r);
    }
    // A new replica that keeps nothing decoded (its cache is too small): every use reads.
    let first_use = || {
        let fresh = rt.block_on(async { Arc::new(Service::new(Config { cache_bytes: 1, ..config.clone() })) });
        fresh.load_store();
        median_ms(3, || {
            rt.block_on(async {
                let entry = fresh.lookup(id).await.unwrap();
                assert_eq!(entry.version() as usize, 1 + DELTAS);
                std::hint::black_box(fresh.fitted(&entry).await.unwrap());
            })
        })
    };
    let first_use_ms = first_use();
    let (compact_ms, full_bytes) = rt.block_on(async {
        let entry = service.lookup(id).await.unwrap();
        let fitted = service.fitted(&entry).await.unwrap();
        let started = Instant::now();
        let done = service.replica.compact(&entry, fitted).await.unwrap();
        assert!(matches!(done, mercer::service::Compaction::Compacted { deltas: DELTAS, .. }), "{done:?}");
        let ms = started.elapsed().as_secs_f64() * 1e3;
        (ms, service.lookup(id).await.unwrap().stored_bytes())
    });
    let first_use_compacted_ms = first_use();
    rt.block_on(service.delete(id, false, None)).unwrap();
    Served { refit_ms, append_ms: times[4], first_use_ms, first_use_compacted_ms, compact_ms, full_bytes }
}

/// s3s-fs (an S3 server over a directory) on a free loopback port, killed when dropped;
/// the AWS_* variables that point the S3 client at it are set for this process.
struct S3Server(std::process::Child);

impl S3Server {
    const BUCKET: &'static str = "mercer-bench";

    fn start(root: &std::path::Path) -> Result<S3Server, String> {
        std::fs::create_dir_all(root.join(Self::BUCKET)).map_err(|e| e.to_string())?;
        let port =
            std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map_err(|e| e.to_string())?.port();
        let child = Command::new("s3s-fs")
            .args([
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                "--access-key",
                "bench",
                "--secret-key",
                "benchsecret",
            ])
            .arg(root)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run s3s-fs: {e}"))?;
        let server = S3Server(child);
        let deadline = Instant::now() + std::time::Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                return Err("s3s-fs did not listen within 20 s".into());
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        for (k, v) in [
            ("AWS_ACCESS_KEY_ID", "bench"),
            ("AWS_SECRET_ACCESS_KEY", "benchsecret"),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ALLOW_HTTP", "true"),
            ("AWS_EC2_METADATA_DISABLED", "true"),
        ] {
            std::env::set_var(k, v);
        }
        std::env::set_var("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}"));
        Ok(server)
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

//! `cargo bench --bench online`: appending 10 rows to a model of n = 4000 against a refit
//! on the 4010 rows (issue 18), in one run:
//!
//! - the numbers alone (`FittedModel::append` against `ModelSpec::fit`), with the
//!   append's parts: the block of the factor (B = L^-1 C, then M), the copy into the
//!   grown factor, the solve for alpha;
//! - through the service with a durable directory store, where the append also encodes
//!   and writes the grown model (its factor is (n + k)^2 values, 128 MB here) before it
//!   answers, as the refit does.
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

    // The numbers alone.
    let gp = fit(ModelKind::GaussianProcess, &head);
    let append_ms = median_ms(7, || {
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
    println!("| - grow the factor (B = L^-1 C, M, copy into the grown factor) | {extend_ms:.1} | |");
    println!("| -- of which the cross block and B = L^-1 C | {solve_block_ms:.1} | |");
    println!("| - alpha: two triangular solves with the grown factor | {alpha_ms:.1} | |");

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

    // Through the service, stored durably before the answer.
    let dir = std::env::temp_dir().join(format!("mercer-online-bench-{}", std::process::id()));
    let config = Config { data_dir: dir.display().to_string(), ..Config::for_tests() };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let service = Arc::new(Service::new(config));
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
    let served_refit_ms = median_ms(3, || refits.push(train(&all)));
    let id = train(&head);
    let mut times: Vec<f64> = (0..5)
        .map(|r| {
            let batch = dataset(K, 100 + r);
            let started = Instant::now();
            rt.block_on(service.append_observations(id, rows(&batch.x), targets(&batch.y), Default::default()))
                .unwrap();
            started.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let served_append_ms = times[2];
    println!("| service: fit of {} rows, stored | {served_refit_ms:.1} | |", N + K);
    println!(
        "| service: append of {K} rows, stored (n = {N} to {}) | {served_append_ms:.1} | {:.1}x |",
        N + 5 * K,
        served_refit_ms / served_append_ms
    );
    drop(service);
    let _ = std::fs::remove_dir_all(&dir);
}

//! `cargo bench --bench sparse`: the in-process parts of the large-n targets (the HTTP
//! ones, upload and fits on a million rows beside scikit-learn, are scripts/bench_scale.py):
//! - predict 1000 rows with variance (and mean only) from a sparse GP with M = 1024,
//!   d = 10 (the target: <= 20 ms);
//! - the streamed Nystrom pass (kernel block, whitening solve, rank update) per 100,000
//!   rows, one thread and both, which the million-row fit times come from;
//! - k-means++ then Lloyd for M = 1024 inducing points on 100,000 rows.

mod common;

use common::{median_ms, points};
use mercer::estimator::approximation::Selection;
use mercer::estimator::{
    approximation::inducing, FitContext, GaussianProcess, KernelRidge, PredictOptions, Predictor, SparseGpModel,
    TrainingSet,
};
use mercer::kernel::Kernel;
use mercer::linalg::Parallelism;
use serde_json::json;

const D: usize = 10;
const M: usize = 1024;

fn dataset(n: usize, seed: u64) -> TrainingSet {
    let x = points(D, n, seed);
    let y = (0..n).map(|i| (x.point(i)[0] * 2.0).sin() + 0.5 * (x.point(i)[1] * x.point(i)[2])).collect();
    TrainingSet::new(x, y)
}

fn main() {
    mercer::tune_allocator();
    let kernel = Kernel::from_json(&json!({"type": "rbf", "length_scale": 1.5})).unwrap();
    let mut rows: Vec<(String, f64)> = Vec::new();

    let data = dataset(20_000, 1);
    let z = data.x.select(&inducing::sample_rows(data.x.n(), M, 3));
    let spec =
        GaussianProcess::from_json(kernel.clone(), &json!({"noise": 0.01, "approximation": "nystrom"}), "/params")
            .unwrap();
    let model = SparseGpModel::fit_at(&spec, z.clone(), &data, &FitContext::new(Parallelism::Parallel)).unwrap();
    let query = points(D, 1000, 9);
    for (label, opts) in [
        ("predict 1000 rows + variance, sparse GP M=1024 d=10", PredictOptions::default()),
        (
            "predict 1000 rows, mean only, sparse GP M=1024 d=10",
            PredictOptions { variance: false, ..Default::default() },
        ),
    ] {
        for (par, name) in [(Parallelism::Parallel, "2 threads"), (Parallelism::Sequential, "1 thread")] {
            let ms = median_ms(15, || drop(model.predict(&query, &opts, par)));
            rows.push((format!("{label}, {name}"), ms));
        }
    }

    let big = dataset(100_000, 2);
    let krr = KernelRidge::from_json(kernel.clone(), &json!({"lambda": 0.01, "approximation": "nystrom"}), "/params")
        .unwrap();
    for (par, name) in [(Parallelism::Parallel, "2 threads"), (Parallelism::Sequential, "1 thread")] {
        let ms = median_ms(3, || drop(krr.fit_nystrom_at(z.clone(), &big, &FitContext::new(par)).unwrap()));
        rows.push((format!("Nystrom kernel ridge fit, n=100,000 M=1024 d=10, {name}"), ms));
    }
    let ms = median_ms(3, || {
        drop(inducing::select(&big.x, M, Selection::Kmeans, 0, &FitContext::new(Parallelism::Parallel)).unwrap())
    });
    rows.push(("k-means++ and Lloyd, M=1024 from n=100,000 (32,768-row sample, 20 Lloyd steps), 2 threads".into(), ms));

    println!("| operation | ms |");
    println!("|---|---|");
    for (label, ms) in rows {
        println!("| {label} | {ms:.1} |");
    }
}

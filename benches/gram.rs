//! `cargo bench --bench gram`: building K(X, X) for rbf and Matern (nu = 1.5) at
//! n = 4000 and 8000, d = 16, against scikit-learn's rbf_kernel and Matern()(X) timed
//! in the same run (benches/sklearn_gram.py). Medians; read the ratios.

mod common;

use common::{median_ms, points, python_timings};
use mercer::kernel::Kernel;
use mercer::linalg::Parallelism;
use serde_json::json;

fn main() {
    mercer::tune_allocator();
    let d = 16;
    let kernels = [
        ("rbf", Kernel::from_json(&json!({"type": "rbf", "length_scale": 3.0})).unwrap()),
        ("matern 1.5", Kernel::from_json(&json!({"type": "matern", "nu": 1.5, "length_scale": 3.0})).unwrap()),
    ];
    let mut rows = Vec::new();
    for n in [4000usize, 8000] {
        let x = points(d, n, 7);
        let reps = if n <= 4000 { 7 } else { 3 };
        for (name, k) in &kernels {
            for par in [Parallelism::Sequential, Parallelism::Parallel] {
                let threads = if par.is_parallel() { 2 } else { 1 };
                let ms = median_ms(reps, || drop(k.gram(&x, par)));
                rows.push((format!("{name} gram n={n} d={d}"), threads, ms));
            }
        }
    }
    let py = python_timings("sklearn_gram.py");
    println!("{:<32}{:>9}{:>12}{:>14}{:>8}", "operation", "threads", "mercer ms", "sklearn ms", "ratio");
    for (name, threads, ms) in &rows {
        match py.get(name) {
            Some(p) => println!("{name:<32}{threads:>9}{ms:>12.1}{p:>14.1}{:>8.2}", p / ms),
            None => println!("{name:<32}{threads:>9}{ms:>12.1}"),
        }
    }
    println!("ratio = scikit-learn time / mercer time (> 1: mercer faster); scikit-learn uses every core");
}

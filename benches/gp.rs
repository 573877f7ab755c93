//! `cargo bench --bench gp`: Gaussian-process fits and predictions against scikit-learn's
//! GaussianProcessRegressor on the same data in the same run (benches/sklearn_gp.py):
//! - optimize with 2 restarts, n = 500 and 1000, d = 8, C * RBF + noise;
//! - fixed-hyperparameter fit at n = 4000;
//! - predict 1000 rows with variance on that model.
//!
//! The data are written to a temporary JSON file that both sides read.

mod common;

use common::{median_ms, points, python};
use mercer::estimator::{Estimator, FitContext, GaussianProcess, PredictOptions, Predictor, TrainingSet};
use mercer::kernel::{Kernel, Points};
use mercer::linalg::Parallelism;
use serde_json::json;
use std::collections::HashMap;
use std::process::Command;

const D: usize = 8;

fn dataset(n: usize, seed: u64) -> TrainingSet {
    let x = points(D, n, seed);
    let noise = points(1, n, seed + 100);
    let y = (0..n)
        .map(|i| (2.0 * x.point(i).iter().sum::<f64>() / (D as f64).sqrt()).sin() + 0.1 * noise.point(i)[0])
        .collect();
    TrainingSet::new(x, y)
}

fn rows(p: &Points) -> Vec<Vec<f64>> {
    (0..p.n()).map(|i| p.point(i).to_vec()).collect()
}

fn main() {
    mercer::tune_allocator();
    let ctx = FitContext::new(Parallelism::Parallel);
    let c_rbf = Kernel::from_json(&json!({"type": "product", "kernels": [
        {"type": "constant", "value": 1.0}, {"type": "rbf", "length_scale": 1.0}]}))
    .unwrap();
    let search = |restarts: u64| {
        GaussianProcess::from_json(
            c_rbf.clone(),
            &json!({"noise": 0.1, "optimize": true, "restarts": restarts}),
            "/params",
        )
        .unwrap()
    };
    let fixed = GaussianProcess::from_json(
        Kernel::from_json(&json!({"type": "rbf", "length_scale": 2.0})).unwrap(),
        &json!({"noise": 0.01}),
        "/params",
    )
    .unwrap();

    let mut data_file = json!({});
    let mut rows_out: Vec<(String, f64, String)> = Vec::new();
    for n in [500usize, 1000] {
        let data = dataset(n, n as u64);
        data_file[format!("opt{n}")] = json!({"x": rows(&data.x), "y": data.y});
        let mut info = String::new();
        let ms = median_ms(3, || {
            let m = search(2).fit(&data, &ctx).unwrap();
            let r = m.report();
            info = format!("LML {:.4}, {} iterations", r.log_marginal_likelihood.unwrap(), r.iterations.unwrap());
        });
        rows_out.push((format!("optimize 2 restarts n={n} d={D}"), ms, info));
    }
    let big = dataset(4000, 4000);
    let query = points(D, 1000, 77);
    data_file["fixed4000"] = json!({"x": rows(&big.x), "y": big.y, "query": rows(&query)});
    let ms = median_ms(3, || drop(fixed.fit(&big, &ctx).unwrap()));
    rows_out.push((format!("fixed fit n=4000 d={D}"), ms, String::new()));
    let model = fixed.fit(&big, &ctx).unwrap();
    let opts = PredictOptions::default();
    let ms = median_ms(5, || drop(model.predict(&query, &opts, Parallelism::Parallel)));
    rows_out.push(("predict 1000 rows + variance, n=4000".into(), ms, String::new()));

    let mut py: HashMap<String, (f64, String)> = HashMap::new();
    if let Some(p) = python() {
        let path = std::env::temp_dir().join(format!("mercer-gp-bench-{}.json", std::process::id()));
        std::fs::write(&path, data_file.to_string()).unwrap();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/sklearn_gp.py");
        match Command::new(&p).arg(script).arg(&path).output() {
            Ok(o) if o.status.success() => {
                for line in String::from_utf8_lossy(&o.stdout).lines() {
                    let parts: Vec<&str> = line.split('\t').collect();
                    if parts.len() >= 2 {
                        if let Ok(v) = parts[1].parse() {
                            py.insert(parts[0].to_string(), (v, parts.get(2).unwrap_or(&"").to_string()));
                        }
                    }
                }
            }
            Ok(o) => eprintln!("note: {script} failed: {}", String::from_utf8_lossy(&o.stderr)),
            Err(e) => eprintln!("note: cannot run {p}: {e}"),
        }
        let _ = std::fs::remove_file(path);
    } else {
        eprintln!("note: no Python with numpy, scipy and scikit-learn; set MERCER_BENCH_PYTHON");
    }
    println!("{:<40}{:>12}{:>14}{:>8}", "operation", "mercer ms", "sklearn ms", "ratio");
    for (name, ms, info) in &rows_out {
        match py.get(name) {
            Some((p, pinfo)) => {
                println!("{name:<40}{ms:>12.1}{p:>14.1}{:>8.2}", p / ms);
                if !info.is_empty() {
                    println!("    mercer: {info}; scikit-learn: {pinfo}");
                }
            }
            None => println!("{name:<40}{ms:>12.1}    {info}"),
        }
    }
    println!("ratio = scikit-learn time / mercer time (> 1: mercer faster)");
}

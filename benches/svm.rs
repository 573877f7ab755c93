//! `cargo bench --bench svm`: SVM fits against scikit-learn's SVC (LIBSVM) on the same
//! data in the same run: make_classification with n = 5000, 10000, 20000, d = 20, rbf with
//! gamma = 1 / (d var(X)), c = 1, tol = 1e-3, a 100 MB kernel cache on both sides.
//! benches/sklearn_svm.py makes the data, writes it to a temporary file and times SVC.
//!
//! Also reports the peak resident memory the n = 20000 fit adds (VmHWM, reset before the
//! fit): it must stay under cache_mb plus O(n); an n x n matrix would be 3.2 GB.

mod common;

use common::{median_ms, python};
use mercer::estimator::{ClassLabels, ClassificationSet, Estimator, FitContext, Predictor, Svm};
use mercer::kernel::{Kernel, Points};
use mercer::linalg::Parallelism;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::process::Command;

fn main() {
    mercer::tune_allocator();
    let Some(py) = python() else {
        eprintln!("note: the SVM bench needs Python with scikit-learn for its data (make_classification)");
        return;
    };
    let path = std::env::temp_dir().join(format!("mercer-svm-bench-{}.json", std::process::id()));
    let script = format!("{}/benches/sklearn_svm.py", env!("CARGO_MANIFEST_DIR"));
    // The script writes the data first, then times scikit-learn; mercer runs afterwards
    // so the two never compete for the cores.
    let out = Command::new(&py).arg(&script).arg(&path).output().expect("python runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let theirs: HashMap<String, (f64, String)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut parts = l.split('\t');
            Some((parts.next()?.to_string(), (parts.next()?.parse().ok()?, parts.next().unwrap_or("").to_string())))
        })
        .collect();
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    std::fs::remove_file(&path).ok();

    let ctx = FitContext::new(Parallelism::Parallel);
    println!("{:<26} {:>11} {:>11} {:>7}  mercer / scikit-learn", "", "mercer ms", "sklearn ms", "ratio");
    let mut sets: Vec<(&String, &Value)> = file["sets"].as_object().unwrap().iter().collect();
    sets.sort_by_key(|(n, _)| n.parse::<usize>().unwrap());
    for (n, set) in sets {
        let rows: Vec<Vec<f64>> = serde_json::from_value(set["x"].clone()).unwrap();
        let labels: Vec<mercer::estimator::Target> = serde_json::from_value(set["y"].clone()).unwrap();
        let (classes, y) = ClassLabels::encode(&labels).unwrap();
        let data = ClassificationSet { x: Points::from_rows(&rows), y, classes };
        let kernel = Kernel::from_json(&json!({"type": "rbf", "gamma": set["gamma"]})).unwrap();
        let spec = Svm::from_json(
            kernel,
            &json!({"c": file["c"], "tol": file["tol"], "cache_mb": file["cache_mb"]}),
            "/params",
        )
        .unwrap();
        let big = n == "20000";
        let mut info = String::new();
        let baseline = peak_rss_reset();
        let ms = median_ms(if big { 1 } else { 3 }, || {
            let m = spec.fit(&data, &ctx).unwrap();
            info = format!("{} SVs, {} iterations", m.n_support(), m.report().iterations.unwrap());
        });
        if big {
            let added = peak_rss_kb().saturating_sub(baseline) as f64 / 1024.0;
            info += &format!("; peak RSS +{added:.0} MB (cache {} MB)", file["cache_mb"]);
        }
        let name = format!("svm fit n={n} d=20");
        let (sk, sk_info) = theirs.get(&name).cloned().unwrap_or((f64::NAN, String::new()));
        println!("{name:<26} {ms:>11.1} {sk:>11.1} {:>6.2}x  {info} | sklearn {sk_info}", sk / ms);
    }
}

/// Resets the peak resident set size to the current one; returns it in kB.
fn peak_rss_reset() -> u64 {
    std::fs::write("/proc/self/clear_refs", "5").ok();
    peak_rss_kb()
}

fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:"))?.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

//! Helpers shared by the benches: seeded points, medians, and the Python to compare with.
#![allow(dead_code)]

use mercer::kernel::Points;
use nalgebra::DMatrix;
use std::collections::HashMap;
use std::process::Command;
use std::time::Instant;

/// A training set of the peer bench's shape over `x`: y = sin(2 sum(x) / sqrt(d)).
pub fn smooth_targets(x: Points) -> mercer::estimator::TrainingSet {
    let d = x.d() as f64;
    let y = (0..x.n()).map(|i| (2.0 * x.point(i).iter().sum::<f64>() / d.sqrt()).sin()).collect();
    mercer::estimator::TrainingSet::new(x, y)
}

/// n points in [-1, 1]^d from a xorshift stream (no RNG crate).
pub fn points(d: usize, n: usize, seed: u64) -> Points {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    Points::from_columns(DMatrix::from_fn(d, n, |_, _| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }))
}

/// Median wall time in milliseconds of `reps` runs after one warm-up.
pub fn median_ms(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut t: Vec<f64> = (0..reps)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(|a, b| a.partial_cmp(b).unwrap());
    t[reps / 2]
}

/// $MERCER_BENCH_PYTHON, else the peer's venv, else python3: the first that imports
/// numpy, scipy and sklearn.
pub fn python() -> Option<String> {
    if let Ok(p) = std::env::var("MERCER_BENCH_PYTHON") {
        return Some(p);
    }
    let venv = std::env::var("HOME").ok().map(|h| format!("{h}/.cache/mercer-peer-venv/bin/python"));
    [venv, Some("python3".to_string())].into_iter().flatten().find(|p| {
        Command::new(p).args(["-c", "import numpy, scipy, sklearn"]).output().is_ok_and(|o| o.status.success())
    })
}

/// Runs benches/<script> and reads its `name<TAB>ms` lines; empty (with a note) if no
/// Python is found or the script fails.
pub fn python_timings(script: &str) -> HashMap<String, f64> {
    let mut out = HashMap::new();
    let Some(p) = python() else {
        eprintln!("note: no Python with numpy, scipy and scikit-learn; set MERCER_BENCH_PYTHON for the comparison");
        return out;
    };
    let path = format!("{}/benches/{script}", env!("CARGO_MANIFEST_DIR"));
    match Command::new(&p).arg(&path).output() {
        Ok(o) if o.status.success() => {
            for line in String::from_utf8_lossy(&o.stdout).lines() {
                if let Some((k, v)) = line.rsplit_once('\t') {
                    if let Ok(v) = v.parse() {
                        out.insert(k.to_string(), v);
                    }
                }
            }
        }
        _ => eprintln!("note: {p} could not run {path}; no comparison column"),
    }
    out
}

//! `cargo bench --bench linalg`: the dense operations every fit and predict goes through,
//! at n = 1000, 2000, 4000, against nalgebra's own and (when a Python with numpy and scipy
//! is found) against numpy/scipy timed in the same run.
//!
//! Python: $MERCER_BENCH_PYTHON, else the peer's venv (~/.cache/mercer-peer-venv), else
//! python3. Figures are medians; the machine is shared, so read ratios, not seconds.

use mercer::kernel::{Kernel, Points};
use mercer::linalg::{Cholesky, Parallelism};
use nalgebra::DMatrix;
use std::process::Command;
use std::time::Instant;

fn points(d: usize, n: usize, seed: u64) -> Points {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    Points::from_columns(DMatrix::from_fn(d, n, |_, _| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }))
}

fn median_ms(reps: usize, mut f: impl FnMut()) -> f64 {
    f(); // warm-up
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

fn python() -> Option<String> {
    if let Ok(p) = std::env::var("MERCER_BENCH_PYTHON") {
        return Some(p);
    }
    let venv = std::env::var("HOME").ok().map(|h| format!("{h}/.cache/mercer-peer-venv/bin/python"));
    [venv, Some("python3".to_string())]
        .into_iter()
        .flatten()
        .find(|p| Command::new(p).args(["-c", "import numpy, scipy"]).output().is_ok_and(|o| o.status.success()))
}

fn main() {
    let d = 8;
    let kernel = Kernel::from_json(&serde_json::json!({"type": "rbf", "length_scale": 2.0})).unwrap();
    let mut rows: Vec<(String, f64)> = Vec::new();
    for n in [1000usize, 2000, 4000] {
        let reps = if n <= 2000 { 9 } else { 5 };
        let x = points(d, n, 1);
        let q = points(d, 1000, 2);
        let spd = || {
            let mut k = kernel.gram(&x, Parallelism::Parallel);
            for i in 0..n {
                k[(i, i)] += 0.01;
            }
            k
        };
        let k = spd();
        for par in [Parallelism::Sequential, Parallelism::Parallel] {
            let tag = if par.is_parallel() { "2 threads" } else { "1 thread" };
            rows.push((format!("rbf gram n={n} d={d} ({tag})"), median_ms(reps, || drop(kernel.gram(&x, par)))));
            rows.push((
                format!("cholesky n={n} faer ({tag})"),
                median_ms(reps, || drop(Cholesky::factor_with_jitter(|| k.clone(), par).unwrap())),
            ));
            let chol = Cholesky::factor_with_jitter(|| k.clone(), par).unwrap();
            let ks = kernel.cross(&x, &q, par);
            rows.push((
                format!("L^-1 B n={n}, 1000 rhs faer ({tag})"),
                median_ms(reps, || {
                    let mut b = ks.clone();
                    chol.solve_l_in_place(&mut b, par);
                }),
            ));
        }
        if n <= 2000 {
            rows.push((format!("cholesky n={n} nalgebra"), median_ms(3, || drop(k.clone().cholesky().unwrap()))));
        }
    }

    let mut py: std::collections::HashMap<String, f64> = Default::default();
    if let Some(p) = python() {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/scipy_linalg.py");
        match Command::new(&p).arg(script).output() {
            Ok(o) if o.status.success() => {
                for line in String::from_utf8_lossy(&o.stdout).lines() {
                    if let Some((k, v)) = line.rsplit_once('\t') {
                        if let Ok(v) = v.parse() {
                            py.insert(k.to_string(), v);
                        }
                    }
                }
            }
            _ => eprintln!("note: {p} could not run {script}; no numpy/scipy column"),
        }
    } else {
        eprintln!("note: no Python with numpy and scipy found; set MERCER_BENCH_PYTHON for the comparison");
    }

    println!("{:<44}{:>12}{:>16}{:>10}", "operation", "mercer ms", "numpy/scipy ms", "ratio");
    for (name, ms) in &rows {
        // The Python script names its rows like ours, minus the thread tag.
        let key = name.split(" (").next().unwrap().replace(" faer", "");
        match py.get(&key) {
            Some(p) if name.contains("2 threads") => {
                println!("{name:<44}{ms:>12.1}{p:>16.1}{:>10.2}", p / ms)
            }
            _ => println!("{name:<44}{ms:>12.1}"),
        }
    }
    println!("ratio = numpy/scipy time / mercer time (> 1: mercer faster); numpy/scipy use every core");
}

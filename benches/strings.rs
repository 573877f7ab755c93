//! `cargo bench --bench strings`: Gram matrices of the string kernels against what a
//! Python user has (benches/python_strings.py, same strings, same run): the spectrum
//! kernel (k = 3, normalised) over 5,000 strings of length 200, against scikit-learn's
//! CountVectorizer with a sparse X X' and against plain Python; the subsequence kernel
//! (length 2, decay 0.5, normalised) over 1,000 strings of length 50, against plain
//! Python's dynamic programme. The plain-Python figures are extrapolated from a slice of
//! rows (the script says how). Medians; read the ratios.

mod common;

use common::{median_ms, python_timings};
use mercer::kernel::{Kernel, Points};
use mercer::linalg::Parallelism;
use serde_json::json;

/// The same xorshift stream as python_strings.py's `strings`.
fn strings(n: usize, length: usize, seed: u64) -> Vec<String> {
    let alphabet: Vec<char> = "ACDEFGHIKLMNPQRSTVWY".chars().collect();
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            (0..length)
                .map(|_| {
                    s ^= s << 13;
                    s ^= s >> 7;
                    s ^= s << 17;
                    alphabet[((s >> 11) % 20) as usize]
                })
                .collect()
        })
        .collect()
}

fn main() {
    mercer::tune_allocator();
    let spectrum = Kernel::from_json(&json!({"type": "spectrum", "k": 3})).unwrap();
    let subsequence = Kernel::from_json(&json!({"type": "subsequence", "length": 2, "decay": 0.5})).unwrap();
    let cases = [
        ("spectrum gram n=5000 len=200 k=3", &spectrum, Points::from_texts(strings(5000, 200, 11)), 5),
        ("subsequence gram n=1000 len=50 p=2", &subsequence, Points::from_texts(strings(1000, 50, 13)), 3),
    ];
    let py = python_timings("python_strings.py");
    for (name, k, x, _) in &cases {
        let first = x.select(&(0..8).collect::<Vec<_>>());
        let got = k.gram(&first, Parallelism::Sequential).sum();
        let kind = name.split(' ').next().unwrap();
        if let Some(want) = py.get(&format!("check {kind} sum of the first 8 x 8")) {
            assert!((got - want).abs() <= 1e-12 * want.abs(), "{kind}: {got} vs Python's {want}");
            println!("{kind}: sum of the first 8 x 8 = {got:.15e}, Python {want:.15e} (the same strings)");
        }
    }
    let mut rows = Vec::new();
    for (name, k, x, reps) in &cases {
        for par in [Parallelism::Sequential, Parallelism::Parallel] {
            let threads = if par.is_parallel() { 2 } else { 1 };
            // From the strings each time: a first Gram prepares its rows (k-mer index,
            // self-kernels), which later ones on the same points would find cached.
            let fresh = || Points::from_texts(x.texts().unwrap().iter().map(|s| s.iter().collect::<String>()));
            rows.push((name.to_string(), threads, median_ms(*reps, || drop(k.gram(&fresh(), par)))));
        }
    }
    // What a single-row predict pays: one row against the training strings (after a first
    // call, as a served model's later predicts).
    for (name, k, x, _) in &cases {
        let q = Points::from_texts(strings(1, if name.starts_with("spectrum") { 200 } else { 50 }, 77));
        let kind = name.split(' ').next().unwrap();
        let ms = median_ms(21, || drop(k.cross(x, &q, Parallelism::Sequential)));
        rows.push((format!("{kind} cross 1 row vs n={}", x.n()), 1, ms));
    }
    println!(
        "{:<38}{:>8}{:>11}{:>16}{:>8}{:>16}{:>9}",
        "operation", "threads", "mercer ms", "countvec ms", "ratio", "python ms", "ratio"
    );
    for (name, threads, ms) in &rows {
        let cv = py.get(&format!("{name} countvectorizer"));
        let plain = py.get(&format!("{name} python"));
        let fmt = |v: Option<&f64>| {
            v.map_or(("-".to_string(), "-".to_string()), |v| (format!("{v:.1}"), format!("{:.1}", v / ms)))
        };
        let ((cv_ms, cv_ratio), (py_ms, py_ratio)) = (fmt(cv), fmt(plain));
        println!("{name:<38}{threads:>8}{ms:>11.2}{cv_ms:>16}{cv_ratio:>8}{py_ms:>16}{py_ratio:>9}");
    }
    println!("ratio = Python time / mercer time (> 1: mercer faster); plain Python extrapolated from a slice of rows");
}

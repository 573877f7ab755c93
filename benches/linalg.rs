//! `cargo bench --bench linalg`: the dense operations every fit and predict goes through,
//! at n = 1000, 2000, 4000, against nalgebra's own and (when a Python with numpy and scipy
//! is found) against numpy/scipy timed in the same run.
//!
//! Python: $MERCER_BENCH_PYTHON, else the peer's venv (~/.cache/mercer-peer-venv), else
//! python3. Figures are medians; the machine is shared, so read ratios, not seconds.
//! The nalgebra Cholesky runs at n <= 2000 only (it takes ~10 s at 4000). The ordered
//! solve (each column's sums in a fixed order, what predictions use) is printed beside
//! faer's solve and faer's product L B as rates: n^2 m flops for a solve, 2 n^2 m for
//! the product.

mod common;

use common::{median_ms, points, python_timings};
use mercer::kernel::Kernel;
use mercer::linalg::{Cholesky, Parallelism};

fn main() {
    mercer::tune_allocator();
    let d = 8;
    let kernel = Kernel::from_json(&serde_json::json!({"type": "rbf", "length_scale": 2.0})).unwrap();
    let mut rows: Vec<(String, f64)> = Vec::new();
    let mut rates: Vec<String> = Vec::new();
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
            let faer_solve = median_ms(reps, || {
                let mut b = ks.clone();
                chol.solve_l_in_place(&mut b, par);
            });
            rows.push((format!("L^-1 B n={n}, 1000 rhs faer ({tag})"), faer_solve));
            let ordered = median_ms(reps, || {
                let mut b = ks.clone();
                mercer::linalg::solve_lower_ordered(chol.l(), &mut b, par);
            });
            rows.push((format!("L^-1 B n={n}, 1000 rhs ordered ({tag})"), ordered));
            let product = median_ms(reps, || drop(mercer::linalg::mul_ab(chol.l(), &ks, par)));
            let flops = (n * n * 1000) as f64;
            rates.push(format!(
                "n={n} ({tag}): ordered solve {:.1} GFLOP/s, faer solve {:.1}, faer product L B {:.1}: ordered = {:.0}% of the product's rate",
                flops / ordered / 1e6,
                flops / faer_solve / 1e6,
                2.0 * flops / product / 1e6,
                100.0 * (flops / ordered) / (2.0 * flops / product)
            ));
        }
        if n <= 2000 {
            rows.push((format!("cholesky n={n} nalgebra"), median_ms(3, || drop(k.clone().cholesky().unwrap()))));
        }
    }

    let py = python_timings("scipy_linalg.py");

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
    for r in &rates {
        println!("{r}");
    }
}

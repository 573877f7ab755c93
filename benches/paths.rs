//! `cargo bench --bench paths`: where the time of each path issue 17 measures goes, part
//! by part, against that part's own rate and the machine's matrix-product rate, in one
//! run (in process: no HTTP, no JSON; `scripts/bench_paths.sh` measures those).
//!
//! - fixed GP fit, n = 4000: Gram, Cholesky, the solve for alpha, against the whole fit;
//! - predict 1000 rows with variance on it: K*, the mean, L^-1 K*, against the whole;
//! - a single-row predict with variance, n = 1000: alone, and per row when 4 or 16 rows
//!   share one call (what the batcher does with concurrent requests);
//! - the hyperparameter search, n = 1000: one likelihood evaluation's parts against the
//!   search's time per evaluation.
//!
//! Data as the peer bench's shape: d = 8, rbf with length scale 2 (1 for the search's
//! C * RBF), noise 0.01 (0.1), seeded points in [-1, 1]^8. Medians; the machine is
//! shared, so compare parts within one run.

mod common;

use common::{median_ms, points};
use mercer::estimator::{Estimator, FitContext, GaussianProcess, PredictOptions, Predictor, TrainingSet};
use mercer::kernel::Kernel;
use mercer::linalg::{Cholesky, Parallelism};
use nalgebra::{DMatrix, DVector};
use serde_json::json;
use std::time::Instant;

const D: usize = 8;
const PAR: Parallelism = Parallelism::Parallel;

fn dataset(n: usize, seed: u64) -> TrainingSet {
    common::smooth_targets(points(D, n, seed))
}

/// Median ms of `f` over `reps`, where `setup` (untimed) makes its input each time.
fn median_ms_with<T>(reps: usize, mut setup: impl FnMut() -> T, mut f: impl FnMut(T)) -> f64 {
    let mut t: Vec<f64> = (0..=reps)
        .map(|_| {
            let input = setup();
            let s = Instant::now();
            f(input);
            s.elapsed().as_secs_f64() * 1e3
        })
        .skip(1)
        .collect();
    t.sort_by(|a, b| a.partial_cmp(b).unwrap());
    t[reps / 2]
}

fn gflops(flops: f64, ms: f64) -> String {
    format!("{:.1} GFLOP/s", flops / ms / 1e6)
}

fn row(part: &str, ms: f64, rate: &str) {
    if ms < 1.0 {
        println!("| {part} | {ms:.3} | {rate} |");
    } else {
        println!("| {part} | {ms:.1} | {rate} |");
    }
}

fn main() {
    mercer::tune_allocator();
    let threads = rayon::current_num_threads();
    // The machine's rate for the operation everything else is built on.
    let nn = 2000;
    let a = faer::Mat::<f64>::from_fn(nn, nn, |i, j| ((i * 7 + j * 3) % 11) as f64);
    let mut c = faer::Mat::<f64>::zeros(nn, nn);
    let product_ms = median_ms(5, || {
        faer::linalg::matmul::matmul(c.as_mut(), faer::Accum::Replace, a.as_ref(), a.as_ref(), 1.0, faer::Par::rayon(0))
    });
    println!("{threads} threads; faer matrix product 2000^3: {}\n", gflops(2.0 * (nn as f64).powi(3), product_ms));

    println!("| part | ms | rate |");
    println!("|---|---|---|");

    // Fixed fit at n = 4000.
    let n = 4000;
    let data = dataset(n, 1);
    let rbf = Kernel::from_json(&json!({"type": "rbf", "length_scale": 2.0})).unwrap();
    let fixed = GaussianProcess::from_json(rbf.clone(), &json!({"noise": 0.01}), "/params").unwrap();
    let gram_ms = median_ms(5, || drop(rbf.gram(&data.x, PAR)));
    let regularised = || {
        let mut k = rbf.gram(&data.x, PAR);
        for i in 0..n {
            k[(i, i)] += 0.01;
        }
        k
    };
    let chol_ms = median_ms_with(5, regularised, |k| drop(Cholesky::factor(k, PAR).unwrap()));
    let chol = Cholesky::factor(regularised(), PAR).unwrap();
    let y = DVector::from_vec(data.y.clone());
    let solve_ms = median_ms(5, || drop(chol.solve_vec(&y)));
    let ctx = FitContext::new(PAR);
    let fit_ms = median_ms(5, || drop(fixed.fit(&data, &ctx).unwrap()));
    let nf = n as f64;
    row(&format!("fit n={n}: Gram (fresh memory)"), gram_ms, &format!("{:.0} M entries/s", nf * nf / gram_ms / 1e3));
    row(&format!("fit n={n}: Cholesky"), chol_ms, &gflops(nf.powi(3) / 3.0, chol_ms));
    row(&format!("fit n={n}: alpha = L^-T L^-1 y"), solve_ms, &gflops(2.0 * nf * nf, solve_ms));
    let parts = gram_ms + chol_ms + solve_ms;
    row(&format!("fit n={n}: whole fit ({:.0}% of it in the parts)", 100.0 * parts / fit_ms), fit_ms, "");

    // Predict 1000 rows with variance on that model.
    let model = fixed.fit(&data, &ctx).unwrap();
    let q = points(D, 1000, 3);
    let m = q.n() as f64;
    let cross_ms = median_ms(5, || drop(rbf.cross(&data.x, &q, PAR)));
    let ks = rbf.cross(&data.x, &q, PAR);
    let alpha = DVector::from_column_slice(model.alpha());
    let mean_ms = median_ms(5, || drop(ks.tr_mul(&alpha)));
    let trsm_ms = median_ms_with(5, || ks.clone(), |mut v: DMatrix<f64>| chol.solve_l_in_place(&mut v, PAR));
    let opts = PredictOptions::default();
    let predict_ms = median_ms(5, || drop(model.predict(&q, &opts, PAR)));
    row("predict 1000 rows: K* (4000 x 1000)", cross_ms, &format!("{:.0} M entries/s", nf * m / cross_ms / 1e3));
    row("predict 1000 rows: mean K*^T alpha", mean_ms, &gflops(2.0 * nf * m, mean_ms));
    row("predict 1000 rows: L^-1 K*", trsm_ms, &gflops(nf * nf * m, trsm_ms));
    let parts = cross_ms + mean_ms + trsm_ms;
    row(&format!("predict 1000 rows: whole ({:.0}% of it in the parts)", 100.0 * parts / predict_ms), predict_ms, "");

    // Single rows at n = 1000, alone and stacked.
    let small = dataset(1000, 2);
    let model = fixed.fit(&small, &FitContext::new(PAR)).unwrap();
    let n1 = small.x.n() as f64;
    for rows in [1usize, 4, 16] {
        let q = points(D, rows, 4);
        let ms = median_ms(301, || drop(model.predict(&q, &opts, Parallelism::Sequential))) / rows as f64;
        row(&format!("1-row predict n=1000, {rows} row(s) per call, per row"), ms, &gflops(n1 * n1, ms));
    }
    let one = points(D, 1, 4);
    let cross1 = median_ms(301, || drop(rbf.cross(&small.x, &one, Parallelism::Sequential)));
    row("1-row predict n=1000: K* (1000 x 1)", cross1, "");

    // The hyperparameter search at n = 1000.
    let c_rbf = Kernel::from_json(&json!({"type": "product", "kernels": [
        {"type": "constant", "value": 1.0}, {"type": "rbf", "length_scale": 1.0}]}))
    .unwrap();
    let search =
        GaussianProcess::from_json(c_rbf.clone(), &json!({"noise": 0.1, "optimize": true}), "/params").unwrap();
    let data = dataset(1000, 5);
    let grad_ms = median_ms(9, || drop(c_rbf.gram_with_gradient(&data.x, PAR)));
    let noisy = || {
        let (mut k, _) = c_rbf.gram_with_gradient(&data.x, PAR);
        for i in 0..data.x.n() {
            k[(i, i)] += 0.1;
        }
        k
    };
    let fchol_ms = median_ms_with(9, noisy, |k| drop(Cholesky::factor(k, PAR).unwrap()));
    let chol = Cholesky::factor(noisy(), PAR).unwrap();
    let inv_ms = median_ms(9, || drop(chol.inverse_lower(PAR)));
    let y = data.y_matrix();
    let lml_ms = median_ms(9, || drop(search.log_marginal_likelihood(&data.x, &y, PAR)));
    let t = Instant::now();
    let fitted = search.fit(&data, &FitContext::new(PAR)).unwrap();
    let search_ms = t.elapsed().as_secs_f64() * 1e3;
    let evals = fitted.report().evaluations.unwrap_or(1) as f64;
    let k = 1000f64;
    row("search n=1000, one evaluation: K and dK/dtheta", grad_ms, "");
    row("search n=1000, one evaluation: Cholesky", fchol_ms, &gflops(k.powi(3) / 3.0, fchol_ms));
    row("search n=1000, one evaluation: K^-1 from L", inv_ms, &gflops(2.0 * k.powi(3) / 3.0, inv_ms));
    let parts = grad_ms + fchol_ms + inv_ms;
    row(
        &format!("search n=1000, one evaluation: whole ({:.0}% of it in the parts)", 100.0 * parts / lml_ms),
        lml_ms,
        "",
    );
    row(&format!("search n=1000: whole search / {evals} evaluations (final fit included)"), search_ms / evals, "");
    println!("\nsearch: {search_ms:.0} ms in all; rows of one part are medians, the search a single run");
}

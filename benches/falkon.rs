//! `cargo bench --bench falkon`: one conjugate-gradient iteration's kernel work (K_Mn W
//! K_nM p over every row, by blocks) of a nystrom kernel_ridge with solver cg, against the
//! bound this machine sets: the block's flops (2d for the distances, 2 + 2 per output for
//! the two products) at the measured matrix-product rate, plus the exponentials at the
//! measured rate of the vectorised exp, both on every core. Also float32 against float64
//! per iteration. d = 10, M = 10,000 (FALKON_M), n = 100,000 rows (FALKON_ROWS), rbf;
//! the per-iteration time scales linearly in n (a million rows: ten times these).

mod common;

use common::{median_ms, points};
use faer::{Accum, Mat, Par};
use mercer::estimator::{kernel_ridge::falkon, FitContext};
use mercer::kernel::{exp_nonpos4, exp_nonpos8, Kernel};
use mercer::linalg::Parallelism;
use nalgebra::DMatrix;
use rayon::prelude::*;
use serde_json::json;
use std::time::Instant;
use wide::{f32x8, f64x4};

const D: usize = 10;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Best-of-3 matrix-product rate (flop/s) of faer on every core, square n = 3072.
fn gemm_rate<T: faer::traits::ComplexField + Copy>(one: T) -> f64 {
    let n = 3072;
    let a = Mat::<T>::from_fn(n, n, |_, _| one);
    let b = Mat::<T>::from_fn(n, n, |_, _| one);
    let mut c = Mat::<T>::zeros(n, n);
    (0..3)
        .map(|_| {
            let t = Instant::now();
            faer::linalg::matmul::matmul(c.as_mut(), Accum::Replace, a.as_ref(), b.as_ref(), one, Par::rayon(0));
            2.0 * (n as f64).powi(3) / t.elapsed().as_secs_f64()
        })
        .fold(0.0, f64::max)
}

/// Exponentials per second on every core, over cache-resident buffers (the kernel maps'
/// exp: `kernel::exp_nonpos`).
fn exp_rate(single: bool) -> f64 {
    let len = 1 << 15;
    let reps = 2000;
    let threads = rayon::current_num_threads();
    let t = Instant::now();
    let sums: Vec<f64> = (0..threads)
        .into_par_iter()
        .map(|k| {
            let mut acc = 0.0;
            if single {
                let mut buf = vec![f32x8::splat(-0.5 - k as f32); len / 8];
                for _ in 0..reps {
                    for v in buf.iter_mut() {
                        *v = exp_nonpos8(*v * f32x8::splat(-1.0) - 1.0) - 1.5;
                    }
                }
                acc += buf.iter().map(|v| v.to_array()[0] as f64).sum::<f64>();
            } else {
                let mut buf = vec![f64x4::splat(-0.5 - k as f64); len / 4];
                for _ in 0..reps {
                    for v in buf.iter_mut() {
                        *v = exp_nonpos4(*v * f64x4::splat(-1.0) - 1.0) - 1.5;
                    }
                }
                acc += buf.iter().map(|v| v.to_array()[0]).sum::<f64>();
            }
            acc
        })
        .collect();
    std::hint::black_box(sums);
    (threads * len * reps) as f64 / t.elapsed().as_secs_f64()
}

fn main() {
    mercer::tune_allocator();
    let (n, m) = (env("FALKON_ROWS", 100_000), env("FALKON_M", 10_000));
    let kernel = Kernel::from_json(&json!({"type": "rbf", "length_scale": 1.5})).unwrap();
    let x = points(D, n, 1);
    let z = points(D, m, 2);
    let p = DMatrix::from_fn(m, 1, |i, _| ((i * 7919) % 1000) as f64 / 1000.0 - 0.5);
    let ctx = FitContext::new(Parallelism::Parallel);
    // FALKON_ONLY=float32 (or float64): that pass alone, for a profiler.
    let only = std::env::var("FALKON_ONLY").ok();
    if let Some(name) = &only {
        let single = name == "float32";
        let ms = median_ms(3, || drop(falkon::kernel_operator(&kernel, &z, &x, &p, single, &ctx).unwrap()));
        println!("{name}: {ms:.0} ms per iteration");
        return;
    }
    let (g64, g32) = (gemm_rate(1.0f64), gemm_rate(1.0f32));
    let (e64, e32) = (exp_rate(false), exp_rate(true));
    let elements = (n * m) as f64;
    let flops = elements * (2 * D + 4) as f64;
    println!(
        "| n = {n}, M = {m}, d = {D}, rbf, {} threads | ms per iteration | bound (ms) | fraction of the bound |",
        rayon::current_num_threads()
    );
    println!("|---|---|---|---|");
    let mut times = Vec::new();
    for (single, name, gemm, exp) in [(false, "float64", g64, e64), (true, "float32", g32, e32)] {
        let ms = median_ms(3, || drop(falkon::kernel_operator(&kernel, &z, &x, &p, single, &ctx).unwrap()));
        let bound = (flops / gemm + elements / exp) * 1e3;
        println!("| {name} | {ms:.0} | {bound:.0} | {:.0}% |", 100.0 * bound / ms);
        times.push(ms);
    }
    println!();
    println!("float32 per iteration: {:.2}x float64", times[0] / times[1]);
    println!(
        "rates: GEMM {:.1} / {:.1} GFLOP/s (f64 / f32), exp {:.2} / {:.2} G/s (f64 / f32)",
        g64 / 1e9,
        g32 / 1e9,
        e64 / 1e9,
        e32 / 1e9
    );
}

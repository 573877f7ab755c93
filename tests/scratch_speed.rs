use mercer::estimator::{FitContext, Limits, ModelKind, ModelSpec, TrainingData, TrainingSet};
use mercer::kernel::{Kernel, Points};
use mercer::linalg::Parallelism;
use nalgebra::DMatrix;
use serde_json::json;

#[test]
fn speed() {
    mercer::tune_allocator();
    let n: usize = std::env::var("N").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let m: usize = std::env::var("M").ok().and_then(|v| v.parse().ok()).unwrap_or(1024);
    let lik = std::env::var("LIK").unwrap_or("gaussian".into());
    let d = 10;
    let mut st = 3u64;
    let x = DMatrix::from_fn(d, n, |_, _| {
        st ^= st << 13;
        st ^= st >> 7;
        st ^= st << 17;
        (st >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    });
    let y: Vec<f64> = (0..n)
        .map(|i| {
            let s: f64 = x.column(i).iter().sum();
            if lik == "gaussian" {
                s.sin()
            } else {
                (s.sin() > 0.0) as u8 as f64
            }
        })
        .collect();
    let data = TrainingData::Regression(TrainingSet::new(Points::from_columns(x), y));
    let params = json!({"approximation": "variational", "inducing_points": m, "epochs": 1, "inducing_selection": "uniform", "precision": std::env::var("PREC").unwrap_or("float64".into())});
    let k = Kernel::from_json(&json!({"type": "rbf", "length_scale": vec![1.0; d]})).unwrap();
    let mut spec = ModelSpec::from_json(ModelKind::GaussianProcess, k, Some(&params)).unwrap();
    spec.admit(&data, Limits { exact_max_rows: 20_000, max_fit_bytes: u64::MAX }).unwrap();
    let t = std::time::Instant::now();
    let f = spec.fit(&data, &FitContext::new(Parallelism::Parallel)).unwrap();
    eprintln!("n {n} m {m}: fit {:.2}s {:?} {}", t.elapsed().as_secs_f64(), f.report().elbo, f.params_json());
    let _ = DMatrix::<f64>::zeros(1, 1);
}

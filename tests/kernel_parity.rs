//! Every kernel against scikit-learn: K(X, X), K(X, Z), diag, theta and dK/dtheta from
//! tests/fixtures/sklearn_reference.json (generate_sklearn.py), to 1e-10 relative.

use mercer::kernel::{Kernel, Points};
use mercer::linalg::Parallelism;
use nalgebra::DMatrix;
use serde_json::Value;

const REL: f64 = 1e-10;

fn fixtures() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/sklearn_reference.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn rows(v: &Value) -> Vec<Vec<f64>> {
    v.as_array().unwrap().iter().map(|r| r.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()).collect()
}

fn matrix(v: &Value) -> DMatrix<f64> {
    let r = rows(v);
    DMatrix::from_fn(r.len(), r[0].len(), |i, j| r[i][j])
}

/// |got - want| <= REL * max(|want|, 1e-3 * max |want|) entry by entry.
fn assert_close(case: &str, what: &str, got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{case}: {what} size");
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        let tol = REL * b.abs().max(1e-3 * scale).max(1e-300);
        assert!((a - b).abs() <= tol, "{case}: {what}[{i}] = {a:e}, scikit-learn {b:e}");
    }
}

#[test]
fn every_kernel_matches_scikit_learn_values_and_gradients() {
    let fx = fixtures();
    let cases = fx["kernels"].as_array().unwrap();
    assert!(cases.len() >= 19, "every kernel type has a case");
    let mut types = std::collections::BTreeSet::new();
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let k = Kernel::from_json(&case["kernel"]).unwrap();
        collect_types(&case["kernel"], &mut types);
        let x = Points::from_rows(&rows(&case["x"]));
        let z = Points::from_rows(&rows(&case["z"]));
        for par in [Parallelism::Sequential, Parallelism::Parallel] {
            assert_close(
                name,
                "gram",
                k.gram(&x, par).transpose().as_slice(),
                matrix(&case["gram"]).transpose().as_slice(),
            );
            assert_close(name, "cross", k.cross(&x, &z, par).as_slice(), matrix(&case["cross"]).as_slice());
        }
        let diag: Vec<f64> = case["diag"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        assert_close(name, "diag", k.diag(&x).as_slice(), &diag);
        let theta: Vec<f64> = case["theta"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        assert_eq!(k.theta().len(), theta.len(), "{name}: theta length");
        for (a, b) in k.theta().iter().zip(&theta) {
            assert!((a - b).abs() <= 1e-14 * b.abs().max(1.0), "{name}: theta {a} vs {b}");
        }
        let (kmat, grads) = k.gram_with_gradient(&x, Parallelism::Sequential);
        assert_close(name, "gram (with gradient)", kmat.as_slice(), matrix(&case["gram"]).as_slice());
        let want = case["gradient"].as_array().unwrap();
        assert_eq!(grads.len(), want.len(), "{name}: gradient count");
        for (j, (g, w)) in grads.iter().zip(want).enumerate() {
            assert_close(name, &format!("gradient[{j}]"), g.as_slice(), matrix(w).as_slice());
        }
    }
    let all = [
        "constant",
        "exponential",
        "inverse_multiquadric",
        "laplacian",
        "linear",
        "matern",
        "periodic",
        "polynomial",
        "product",
        "rational_quadratic",
        "rbf",
        "scale",
        "sigmoid",
        "sum",
        "white",
    ];
    assert_eq!(types.iter().map(String::as_str).collect::<Vec<_>>(), all, "every contract kernel is covered");
}

fn collect_types(v: &Value, out: &mut std::collections::BTreeSet<String>) {
    if let Some(t) = v.get("type").and_then(Value::as_str) {
        out.insert(t.to_string());
    }
    if let Some(parts) = v.get("kernels").and_then(Value::as_array) {
        parts.iter().for_each(|p| collect_types(p, out));
    }
    if let Some(inner) = v.get("kernel") {
        collect_types(inner, out);
    }
}

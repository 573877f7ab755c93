//! The variational GP against GPyTorch (`tests/fixtures/generate_svgp.py`): for each
//! likelihood, the ELBO of a given q(u), kernel, inducing locations and data equals
//! GPyTorch's `VariationalELBO` (times n: GPyTorch's is per row) to 1e-6, and the
//! Gauss-Hermite rule is numpy's. Where conventions differ (GPyTorch's approximate log
//! Phi, the softmax's draws, poisson's closed form) the fixture script says how.

use mercer::estimator::variational::posterior::Posterior;
use mercer::estimator::variational::train::elbo_with_draws;
use mercer::estimator::variational::{quadrature, Likelihood, LikelihoodKind, Targets};
use mercer::kernel::hyper::Hyper;
use mercer::kernel::{Kernel, Points};
use nalgebra::{DMatrix, DVector};
use serde_json::Value;

fn reference() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/svgp_reference.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn numbers(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
}

fn points(v: &Value) -> Points {
    let rows: Vec<Vec<f64>> = v.as_array().unwrap().iter().map(numbers).collect();
    Points::from_rows(&rows)
}

#[test]
fn the_elbo_of_every_likelihood_equals_gpytorchs() {
    let r = reference();
    let n = r["n"].as_f64().unwrap();
    for case in r["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let kind = LikelihoodKind::from_name(case["likelihood"].as_str().unwrap()).unwrap();
        let kernel = Kernel::from_json(&case["kernel"]).unwrap();
        let (x, z) = (points(&case["x"]), points(&case["z"]));
        let y = numbers(&case["y"]);
        let means: Vec<DVector<f64>> =
            case["q_means"].as_array().unwrap().iter().map(|m| DVector::from_vec(numbers(m))).collect();
        let m = z.n();
        let factors: Vec<DMatrix<f64>> = case["q_factors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                let rows: Vec<Vec<f64>> = f.as_array().unwrap().iter().map(numbers).collect();
                DMatrix::from_fn(m, m, |i, j| rows[i][j])
            })
            .collect();
        let q = Posterior::from_mean_and_factor(&means, &factors).unwrap();
        let param = |key: &str, default: f64| case["params"].get(key).and_then(Value::as_f64).unwrap_or(default);
        let lik = Likelihood::new(kind, Hyper::new(param("noise", 1.0)), Hyper::new(param("df", 4.0)), means.len());
        let targets = if kind.classifies() {
            Targets::Classes(y.iter().map(|v| *v as usize).collect())
        } else {
            Targets::Real(y)
        };
        let draws = case.get("draws").map(numbers);
        let got = elbo_with_draws(&kernel, &z, &q, &lik, &x, &targets, draws.as_deref()).unwrap();
        let want = n * case["gpytorch_elbo_per_row"].as_f64().unwrap();
        assert!((got - want).abs() <= 1e-6 * want.abs(), "{name}: mercer {got} vs GPyTorch {want} (x n)");
        if let Some(stock) = case.get("gpytorch_elbo_per_row_stock").and_then(Value::as_f64) {
            // GPyTorch's own log Phi is a series off by up to 3e-4 below -1 (the fixture
            // says so): its stock ELBO is as close as that allows, and no closer.
            let gap = (got - n * stock).abs();
            assert!(gap <= 1e-3 * want.abs() && gap > 1e-6 * want.abs(), "{name}: stock gap {gap}");
        }
        let kl = q.kl(mercer::linalg::Parallelism::Sequential);
        let want_kl = case["gpytorch_kl"].as_f64().unwrap();
        assert!((kl - want_kl).abs() <= 1e-9 * want_kl.abs(), "{name}: KL {kl} vs {want_kl}");
    }
}

#[test]
fn the_quadrature_rule_is_numpys_hermgauss() {
    let r = reference();
    let (nodes, weights) = (numbers(&r["hermgauss_20"]["nodes"]), numbers(&r["hermgauss_20"]["weights"]));
    let (x, w) = quadrature::hermite(20);
    for k in 0..20 {
        assert!((x[k] - nodes[k]).abs() < 1e-13 * nodes[k].abs().max(1.0), "node {k}: {} vs {}", x[k], nodes[k]);
        assert!((w[k] - weights[k]).abs() < 1e-12 * weights[k], "weight {k}: {} vs {}", w[k], weights[k]);
    }
}

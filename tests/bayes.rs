//! The Bayesian optimiser's surrogate and acquisition against an independent reference
//! (tests/fixtures/generate_bayes.py: numpy for the Gaussian process, mpmath at 50
//! digits for log expected improvement), and the acquisition's gradient against finite
//! differences at the same points.

use mercer::selection::bayes::acquisition::log_h;
use mercer::selection::bayes::surrogate::{Hyper, Surrogate};
use mercer::selection::bayes::Fitted;
use nalgebra::DMatrix;
use serde_json::Value;

fn reference() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/bayes_reference.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
}

#[test]
fn mean_variance_and_log_ei_equal_the_reference_and_the_gradient_its_finite_differences() {
    for case in reference()["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let rows: Vec<Vec<f64>> = case["x"].as_array().unwrap().iter().map(floats).collect();
        let d = rows[0].len();
        let x = DMatrix::from_fn(d, rows.len(), |i, j| rows[j][i]);
        let hyper = Hyper {
            length_scales: floats(&case["length_scales"]),
            scale: case["scale"].as_f64().unwrap(),
            noise: case["noise"].as_f64().unwrap(),
        };
        let gp = Surrogate::with_hyper(x, floats(&case["y"]), hyper).unwrap();
        let model = Fitted { gp, best: Some(case["best"].as_f64().unwrap()), limits: Vec::new(), hypervolume: None };
        for q in case["queries"].as_array().unwrap() {
            let at = floats(&q["q"]);
            let p = model.gp.predict(&at);
            let (mean, var) = (q["mean"].as_f64().unwrap(), q["var"].as_f64().unwrap());
            assert!((p.mean - mean).abs() < 1e-9 * (1.0 + mean.abs()), "{name}: mean {} against {mean}", p.mean);
            assert!((p.var - var).abs() < 1e-9 * (1.0 + var), "{name}: variance {} against {var}", p.var);
            let (a, g) = model.log_ei(&at);
            let want = q["log_ei"].as_f64().unwrap();
            assert!((a - want).abs() < 1e-8 * (1.0 + want.abs()), "{name}: log EI {a} against {want}");
            for j in 0..d {
                let h = 1e-6;
                let (mut up, mut down) = (at.clone(), at.clone());
                up[j] += h;
                down[j] -= h;
                let fd = (model.log_ei(&up).0 - model.log_ei(&down).0) / (2.0 * h);
                assert!((g[j] - fd).abs() < 1e-5 * (1.0 + fd.abs()), "{name}: d/dq{j} {} against {fd}", g[j]);
            }
        }
    }
}

#[test]
fn log_h_holds_far_into_the_tail() {
    for t in reference()["log_h"].as_array().unwrap() {
        let (z, want) = (t["z"].as_f64().unwrap(), t["log_h"].as_f64().unwrap());
        let got = log_h(z);
        assert!((got - want).abs() <= 1e-9 * want.abs().max(1.0), "z = {z}: {got} against {want}");
    }
}

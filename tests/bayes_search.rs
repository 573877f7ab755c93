//! `search.method: "bayes"` over HTTP: its initial settings are random's, every later
//! one is the optimiser's, no setting twice, the run determined by `seed`, the report
//! as the contract says, and its errors at their pointers.

mod common;

use common::TestServer;
use serde_json::{json, Value};

/// Two noisy classes in two dimensions, seeded: C and gamma matter.
fn rings(n: usize) -> (Vec<Vec<f64>>, Vec<u32>) {
    let mut s = 11u64;
    let mut u = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    (0..n)
        .map(|_| {
            let (a, r) = (u() * std::f64::consts::TAU, u() * 2.0);
            let noisy = u() < 0.1;
            let c = ((r > 1.0) != noisy) as u32;
            (vec![r * a.cos(), r * a.sin()], c)
        })
        .unzip()
}

fn body(search: Value) -> Value {
    let (x, y) = rings(120);
    json!({"model": "svm", "x": x, "y": y, "search": search})
}

fn space() -> Value {
    json!({"/params/c": {"log_uniform": [0.01, 1000]}, "/kernel/gamma": {"log_uniform": [0.001, 100]}})
}

#[tokio::test]
async fn bayes_starts_as_random_then_climbs_without_repeats_and_is_seeded() {
    let s = TestServer::default().await;
    let search = json!({"method": "bayes", "space": space(), "candidates": 14, "initial": 5, "cv": 3, "seed": 4});
    let a = s.train(&body(search.clone())).await;
    let report = &a["training"]["search"];
    assert_eq!(report["method"], "bayes");
    assert_eq!(report["acquisition"], "log_ei");
    assert_eq!(report["initial"], 5);
    assert!(report["surrogate"]["hyperparameters"]["length_scales"].as_array().is_some_and(|l| l.len() == 2));
    let cands = report["candidates"].as_array().unwrap();
    assert_eq!(cands.len(), 14);
    assert_eq!(report["n_fits"], 14 * 3);
    // The initial settings are exactly random's with candidates = initial and the seed.
    let random = json!({"method": "random", "space": space(), "candidates": 5, "cv": 3, "seed": 4});
    let r = s.train(&body(random)).await;
    let drawn: Vec<&Value> =
        r["training"]["search"]["candidates"].as_array().unwrap().iter().map(|c| &c["values"]).collect();
    let first: Vec<&Value> = cands[..5].iter().map(|c| &c["values"]).collect();
    assert_eq!(first, drawn);
    // No setting twice; the best is the highest mean.
    let mut seen = std::collections::HashSet::new();
    for c in cands {
        assert!(seen.insert(c["values"].to_string()), "{} evaluated twice", c["values"]);
    }
    let means: Vec<f64> = cands.iter().map(|c| c["mean_score"].as_f64().unwrap()).collect();
    let best = report["best_index"].as_u64().unwrap() as usize;
    assert!(means.iter().all(|m| *m <= means[best]));
    assert_eq!(a["params"]["c"], cands[best]["values"]["/params/c"]);
    // The model's later settings reach their random start's best on this smooth
    // landscape in nearly every seed (this one, 4, falls short by one validation row in
    // 120: 0.825 against 0.842), and gain on average; equal accuracies may differ in the
    // last bit, as fold means.
    let (mut reached, mut gain) = (0, 0.0);
    for seed in 0..6u64 {
        let run = json!({"method": "bayes", "space": space(), "candidates": 14, "initial": 5, "cv": 3, "seed": seed});
        let m = s.train(&body(run)).await;
        let means: Vec<f64> = m["training"]["search"]["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["mean_score"].as_f64().unwrap())
            .collect();
        let best_initial = means[..5].iter().copied().fold(f64::MIN, f64::max);
        let best_later = means[5..].iter().copied().fold(f64::MIN, f64::max);
        reached += usize::from(best_later >= best_initial - 1e-12);
        gain += best_later - best_initial;
    }
    assert!(reached >= 5 && gain > 0.0, "{reached} of 6 seeds reached their random start's best; gain {gain}");
    // The same seed, the same run.
    let b = s.train(&body(search)).await;
    assert_eq!(b["training"]["search"]["candidates"].as_array().unwrap().len(), 14);
    let values = |m: &Value| -> Vec<Value> {
        m["training"]["search"]["candidates"].as_array().unwrap().iter().map(|c| c["values"].clone()).collect()
    };
    assert_eq!(values(&a), values(&b));
}

#[tokio::test]
async fn a_finite_space_ends_when_every_setting_is_taken() {
    let s = TestServer::default().await;
    let search = json!({"method": "bayes", "space": {"/params/c": [0.1, 1, 10], "/kernel/gamma": [0.1, 1]},
                        "candidates": 50, "cv": 3});
    let m = s.train(&body(search)).await;
    let cands = m["training"]["search"]["candidates"].as_array().unwrap();
    assert_eq!(cands.len(), 6, "candidates are capped at the grid's size, each setting once");
    let distinct: std::collections::HashSet<String> = cands.iter().map(|c| c["values"].to_string()).collect();
    assert_eq!(distinct.len(), 6);
}

#[tokio::test]
async fn bad_bayes_searches_name_their_place() {
    let s = TestServer::default().await;
    for (search, pointer) in [
        (json!({"method": "bayes", "space": space(), "candidates": 4, "initial": 5}), "/search/initial"),
        (json!({"method": "bayes", "space": space(), "initial": 0}), "/search/initial"),
        (json!({"method": "grid", "space": {"/params/c": [1, 2]}, "initial": 1}), "/search/initial"),
        (json!({"method": "annealing", "space": space()}), "/search/method"),
    ] {
        let r = s.post("/models", &body(search.clone())).await;
        let (status, p) = common::problem(r).await;
        assert_eq!((status, common::pointers(&p)), (422, vec![pointer.to_string()]), "{search}");
    }
}

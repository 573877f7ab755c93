//! Classifiers through the HTTP API: labels of either type in and out, the decision
//! function's shape and sign, probabilities, training reports and bad input.

mod common;

use common::{pointers, problem, TestServer};
use serde_json::{json, Value};

/// Points around `centres`, `per` each, on a fixed lattice of offsets (no randomness).
fn blobs(centres: &[[f64; 2]], per: usize) -> Vec<Vec<f64>> {
    let mut x = Vec::new();
    for c in centres {
        for k in 0..per {
            let (a, r) = (k as f64 * 2.399, 0.15 + 0.6 * (k as f64 / per as f64));
            x.push(vec![c[0] + r * a.cos(), c[1] + r * a.sin()]);
        }
    }
    x
}

async fn predict(s: &TestServer, id: &str, body: Value) -> Value {
    let r = s.post(&format!("/models/{id}/predict"), &body).await;
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

#[tokio::test]
async fn svm_binary_with_string_labels() {
    let s = TestServer::default().await;
    let x = blobs(&[[0.0, 0.0], [3.0, 3.0]], 20);
    let y: Vec<&str> = (0..40).map(|i| if i < 20 { "dog" } else { "cat" }).collect();
    let m = s.train(&json!({"model": "svm", "kernel": {"type": "rbf", "gamma": 0.5}, "x": x, "y": y})).await;
    assert_eq!(m["task"], "classification");
    assert_eq!(m["classes"], json!(["cat", "dog"]), "sorted by code point");
    let n_support = m["n_support"].as_u64().unwrap();
    assert!((2..40).contains(&n_support), "only support vectors are kept: {n_support}");
    assert_eq!(m["training"]["converged"], true);
    assert!(m["training"]["iterations"].as_u64().unwrap() > 0);
    assert_eq!(
        m["params"],
        json!({"c": 1.0, "tol": 1e-3, "max_iter": null, "cache_mb": 100.0, "probability": false, "seed": 0,
               "class_weight": null, "sample_weight": null, "approximation": "exact", "inducing_points": null,
               "inducing_selection": null})
    );
    let per_class: Vec<u64> = serde_json::from_value(m["training"]["n_support_per_class"].clone()).unwrap();
    assert_eq!(per_class.iter().sum::<u64>(), n_support, "support vectors per class, in the order of classes");

    let p = predict(&s, m["id"].as_str().unwrap(), json!({"x": [[0.1, -0.1], [3.1, 2.9]]})).await;
    assert_eq!(p["predictions"], json!(["dog", "cat"]));
    assert_eq!(p["classes"], json!(["cat", "dog"]));
    let d = p["decision_function"].as_array().unwrap();
    // Positive means the second class ("dog"), as scikit-learn.
    assert!(d[0].as_f64().unwrap() > 0.0 && d[1].as_f64().unwrap() < 0.0, "{p}");
    assert!(p.get("probabilities").is_none(), "no probabilities without `probability`: {p}");
    assert!(p.get("variance").is_none());
}

#[tokio::test]
async fn svm_multiclass_votes_and_per_class_scores() {
    let s = TestServer::default().await;
    let x = blobs(&[[0.0, 0.0], [4.0, 0.0], [0.0, 4.0]], 15);
    // Numeric labels, given unsorted and as 3.0 / 3: one class each, returned as integers.
    let y: Vec<Value> = (0..45).map(|i| [json!(3.0), json!(1), json!(2)][i / 15].clone()).collect();
    let m = s
        .train(&json!({"model": "svm", "kernel": {"type": "rbf", "gamma": 0.3}, "params": {"c": 10}, "x": x, "y": y}))
        .await;
    assert_eq!(m["classes"], json!([1, 2, 3]));
    let p = predict(&s, m["id"].as_str().unwrap(), json!({"x": [[4.2, 0.1], [0.1, 4.1], [-0.2, 0.0]]})).await;
    assert_eq!(p["predictions"], json!([1, 2, 3]), "{p}");
    for (row, scores) in p["decision_function"].as_array().unwrap().iter().enumerate() {
        let scores: Vec<f64> = scores.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        assert_eq!(scores.len(), 3);
        let best = (0..3).max_by(|&a, &b| scores[a].partial_cmp(&scores[b]).unwrap()).unwrap();
        assert_eq!(json!(best + 1), p["predictions"][row], "the largest score is the prediction: {p}");
        // Votes plus squashed confidences: the winner of a clear point has both votes.
        assert!(scores[best] > 1.6 && scores[best] < 2.34, "{scores:?}");
    }
}

#[tokio::test]
async fn svm_probabilities_sum_to_one_in_class_order() {
    let s = TestServer::default().await;
    let x = blobs(&[[0.0, 0.0], [2.0, 0.0], [1.0, 2.0]], 20);
    let y: Vec<&str> = (0..60).map(|i| ["a", "b", "c"][i / 20]).collect();
    let body = json!({"model": "svm", "kernel": {"type": "rbf", "gamma": 1.0}, "params": {"probability": true, "seed": 4}, "x": x, "y": y});
    let m = s.train(&body).await;
    assert!(m["training"]["probability_disagreements"].as_u64().unwrap() <= 60);
    let id = m["id"].as_str().unwrap();
    let p = predict(&s, id, json!({"x": [[0.0, 0.0], [2.0, 0.0], [1.0, 2.0]]})).await;
    assert_eq!(p["predictions"], json!(["a", "b", "c"]));
    for (row, probs) in p["probabilities"].as_array().unwrap().iter().enumerate() {
        let probs: Vec<f64> = probs.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        assert!((probs.iter().sum::<f64>() - 1.0).abs() < 1e-9, "{probs:?}");
        assert!(probs[row] > 0.5, "row {row} is most likely its own class: {probs:?}");
    }
    let p = predict(&s, id, json!({"x": [[0.0, 0.0]], "probabilities": false})).await;
    assert!(p.get("probabilities").is_none(), "probabilities can be turned off: {p}");
    // The same seed draws the same folds: the same model.
    let again = s.train(&body).await;
    let q = predict(&s, again["id"].as_str().unwrap(), json!({"x": [[1.0, 0.7]]})).await;
    let p = predict(&s, id, json!({"x": [[1.0, 0.7]]})).await;
    assert_eq!(p, q);
}

#[tokio::test]
async fn svm_max_iter_reports_an_unconverged_fit() {
    let s = TestServer::default().await;
    let x = blobs(&[[0.0, 0.0], [1.0, 1.0]], 30);
    let y: Vec<i64> = (0..60).map(|i| (i / 30) as i64).collect();
    let m = s.train(&json!({"model": "svm", "params": {"max_iter": 2}, "x": x, "y": y})).await;
    assert_eq!(m["training"]["converged"], false);
    assert_eq!(m["training"]["iterations"], 2);
}

#[tokio::test]
async fn classifier_bad_input_is_422_with_pointers() {
    let s = TestServer::default().await;
    let x = blobs(&[[0.0, 0.0]], 4);
    let cases = [
        (json!({"model": "svm", "x": x, "y": ["a", "a", "a", "a"]}), 422, "/y"),
        (json!({"model": "svm", "x": x, "y": [1, 1.0, 1, 1]}), 422, "/y"),
        (json!({"model": "svm", "x": x, "y": ["a", "b", 3, "a"]}), 422, "/y/2"),
        (json!({"model": "svm", "x": x, "y": [0, 1, 0, 1], "params": {"c": 0}}), 422, "/params/c"),
        (json!({"model": "svm", "x": x, "y": [0, 1, 0, 1], "params": {"tol": -1}}), 422, "/params/tol"),
        (json!({"model": "svm", "x": x, "y": [0, 1, 0, 1], "params": {"cache_mb": 0}}), 422, "/params/cache_mb"),
        (json!({"model": "svm", "x": x, "y": [0, 1, 0, 1], "params": {"max_iter": 0}}), 422, "/params/max_iter"),
        (json!({"model": "svm", "x": x, "y": [0, 1, 0, 1], "params": {"max_iter": 1.5}}), 400, "/params/max_iter"),
        (
            json!({"model": "svm", "x": x, "y": [0, 1, 0, 1], "params": {"probability": "yes"}}),
            400,
            "/params/probability",
        ),
        (json!({"model": "svm", "x": x, "y": [0, 1, 0, 1], "params": {"lambda": 1}}), 400, "/params/lambda"),
        (json!({"model": "svm", "x": x, "y": [0, 1, true, 1]}), 400, "/y/2"),
        (json!({"model": "kernel_ridge", "x": x, "y": ["a", "b", "a", "b"]}), 400, "/y/0"),
    ];
    for (body, status, pointer) in cases {
        let (got, p) = problem(s.post("/models", &body).await).await;
        assert_eq!(got, status, "{body}: {p}");
        assert_eq!(pointers(&p), vec![pointer.to_string()], "{body}: {p}");
    }
    let listed: Value = s.get("/models").await.json().await.unwrap();
    assert_eq!(listed["models"], json!([]), "nothing is left behind by refused fits");
}

#[tokio::test]
async fn kernel_perceptron_scores_and_converges() {
    let s = TestServer::default().await;
    let x = blobs(&[[0.0, 0.0], [3.0, 0.0], [0.0, 3.0]], 10);
    let y: Vec<&str> = (0..30).map(|i| ["r", "g", "b"][i / 10]).collect();
    let m = s.train(&json!({"model": "kernel_perceptron", "params": {"seed": 5}, "x": x, "y": y})).await;
    assert_eq!(m["classes"], json!(["b", "g", "r"]));
    assert_eq!(m["training"]["converged"], true, "{m}");
    assert!(m["n_support"].as_u64().unwrap() <= 30);
    assert_eq!(m["params"], json!({"max_epochs": 100, "seed": 5}));
    let p = predict(&s, m["id"].as_str().unwrap(), json!({"x": [[0.1, 0.1], [3.1, 0.0], [0.0, 2.9]]})).await;
    assert_eq!(p["predictions"], json!(["r", "g", "b"]));
    assert_eq!(p["decision_function"].as_array().unwrap()[0].as_array().unwrap().len(), 3, "{p}");
    assert!(p.get("probabilities").is_none(), "a perceptron has no probabilities: {p}");

    let y2: Vec<i64> = (0..20).map(|i| i64::from(i >= 10)).collect();
    let m = s.train(&json!({"model": "kernel_perceptron", "x": x[..20], "y": y2})).await;
    let p = predict(&s, m["id"].as_str().unwrap(), json!({"x": [[0.0, 0.0], [3.0, 0.0]]})).await;
    assert_eq!(p["predictions"], json!([0, 1]));
    let d: Vec<f64> = p["decision_function"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    assert!(d[0] <= 0.0 && d[1] > 0.0, "binary: positive is the second class: {d:?}");
}

#[tokio::test]
async fn kernel_logistic_and_gp_classifier_give_probabilities() {
    let s = TestServer::default().await;
    let x = blobs(&[[0.0, 0.0], [2.5, 0.0], [0.0, 2.5]], 12);
    let y: Vec<i64> = (0..36).map(|i| (i / 12) as i64 * 10).collect();
    for body in [
        json!({"model": "kernel_logistic", "params": {"lambda": 0.1}, "x": x, "y": y}),
        json!({"model": "gp_classifier", "x": x, "y": y}),
        json!({"model": "gp_classifier", "params": {"optimize": true, "restarts": 1, "seed": 2}, "x": x, "y": y}),
    ] {
        let m = s.train(&body).await;
        assert_eq!(m["classes"], json!([0, 10, 20]), "{m}");
        if body["model"] == "gp_classifier" {
            assert!(m["training"]["log_marginal_likelihood"].is_f64(), "{m}");
            if body["params"]["optimize"] == true {
                assert_eq!(m["training"]["class_kernels"].as_array().unwrap().len(), 3, "{m}");
                assert!(m["training"]["iterations"].as_u64().unwrap() > 0, "{m}");
            }
        } else {
            assert_eq!(m["training"]["converged"], true, "{m}");
        }
        let p = predict(&s, m["id"].as_str().unwrap(), json!({"x": [[0.0, 0.0], [2.5, 0.0], [0.0, 2.5]]})).await;
        assert_eq!(p["predictions"], json!([0, 10, 20]), "{body}: {p}");
        assert!(p.get("decision_function").is_none(), "{p}");
        for (row, probs) in p["probabilities"].as_array().unwrap().iter().enumerate() {
            let probs: Vec<f64> = probs.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
            assert!((probs.iter().sum::<f64>() - 1.0).abs() < 1e-9, "{probs:?}");
            assert!(probs[row] == probs.iter().cloned().fold(0.0, f64::max), "{probs:?}");
        }
    }
}

/// The Laplace mode search is iterative: every gp_classifier fit (binary and one-vs-rest,
/// searched or not) says whether it converged and how many steps it took; a `max_iter`
/// too small for the Newton iterations is reported as not converged.
#[tokio::test]
async fn gp_classifier_reports_its_iterations_and_convergence() {
    let s = TestServer::default().await;
    let x3 = blobs(&[[0.0, 0.0], [2.5, 0.0], [0.0, 2.5]], 12);
    let y3: Vec<i64> = (0..36).map(|i| (i / 12) as i64).collect();
    let x2 = blobs(&[[0.0, 0.0], [2.0, 2.0]], 15);
    let y2: Vec<&str> = (0..30).map(|i| if i < 15 { "no" } else { "yes" }).collect();
    for (x, y, machines) in [(json!(x2), json!(y2), 1u64), (json!(x3), json!(y3), 3)] {
        for optimize in [false, true] {
            let m = s.train(&json!({"model": "gp_classifier", "params": {"optimize": optimize}, "x": x, "y": y})).await;
            let t = &m["training"];
            assert_eq!(t["converged"], true, "{t}");
            let modes = t["mode_iterations"].as_u64().unwrap();
            // At least two Newton steps per machine: the second confirms the gain vanished.
            assert!(modes >= 2 * machines, "{t}");
            if optimize {
                assert!(t["iterations"].as_u64().unwrap() >= machines, "{t}");
                assert!(t["evaluations"].as_u64().unwrap() > t["iterations"].as_u64().unwrap(), "{t}");
                assert!(t["stop_reason"].is_string(), "{t}");
            } else {
                assert_eq!(t["iterations"].as_u64().unwrap(), modes, "{t}");
                assert!(t.get("evaluations").is_none(), "{t}");
            }
        }
        let m = s.train(&json!({"model": "gp_classifier", "params": {"max_iter": 1}, "x": x, "y": y})).await;
        assert_eq!(m["training"]["converged"], false, "{m}");
        assert_eq!(m["training"]["iterations"], machines, "{m}");
    }
}

#[tokio::test]
async fn classifier_params_are_checked() {
    let s = TestServer::default().await;
    let x = blobs(&[[0.0, 0.0]], 4);
    let y = json!([0, 1, 0, 1]);
    let cases = [
        (json!({"model": "kernel_perceptron", "params": {"max_epochs": 0}}), 422, "/params/max_epochs"),
        (json!({"model": "kernel_perceptron", "params": {"c": 1}}), 400, "/params/c"),
        (json!({"model": "kernel_logistic", "params": {"lambda": 0}}), 422, "/params/lambda"),
        (json!({"model": "kernel_logistic", "params": {"max_iter": 0}}), 422, "/params/max_iter"),
        (json!({"model": "gp_classifier", "params": {"restarts": 1001}}), 422, "/params/restarts"),
        (json!({"model": "gp_classifier", "params": {"optimize": 1}}), 400, "/params/optimize"),
        (json!({"model": "gp_classifier", "params": {"noise": 0.1}}), 400, "/params/noise"),
        (json!({"model": "gp_classifier", "y": ["a", "a", "a", "a"]}), 422, "/y"),
        (json!({"model": "kernel_logistic", "y": [1, "b", 1, "b"]}), 422, "/y/1"),
    ];
    for (mut body, status, pointer) in cases {
        body["x"] = json!(x);
        if body.get("y").is_none() {
            body["y"] = y.clone();
        }
        let (got, p) = problem(s.post("/models", &body).await).await;
        assert_eq!(got, status, "{body}: {p}");
        assert_eq!(pointers(&p), vec![pointer.to_string()], "{body}: {p}");
    }
}

//! Kernel ridge with `params.sample_weight`, against scikit-learn's
//! `KernelRidge.fit(sample_weight=...)` (tests/fixtures/generate_gp_options.py):
//! predictions to 1e-8, the weighted leave-one-out rmse against a brute-force one, the
//! Nystrom fit with every row as an inducing point equal to the exact one, appends that
//! carry their weights equal to a refit, and each misuse at its pointer.

mod common;

use common::{pointers, problem, TestServer};
use serde_json::{json, Value};

fn fixtures() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/gp_options_reference.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn numbers(v: &Value) -> Vec<f64> {
    match v {
        Value::Array(items) => items.iter().flat_map(numbers).collect(),
        other => vec![other.as_f64().unwrap_or_else(|| panic!("not a number: {other}"))],
    }
}

fn close(got: &Value, want: &Value, tol: f64, what: &str) {
    let (g, w) = (numbers(got), numbers(want));
    assert_eq!(g.len(), w.len(), "{what}: shapes");
    let scale = w.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-300);
    for (a, b) in g.iter().zip(&w) {
        assert!((a - b).abs() <= tol * scale, "{what}: {a} vs {b}");
    }
}

async fn predictions(s: &TestServer, m: &Value, x: &Value) -> Value {
    let r = s.post(&format!("/models/{}/predict", m["id"].as_str().unwrap()), &json!({"x": x})).await;
    assert_eq!(r.status(), 200);
    r.json::<Value>().await.unwrap()["predictions"].clone()
}

#[tokio::test]
async fn weighted_kernel_ridge_is_scikit_learns() {
    let s = TestServer::default().await;
    for case in fixtures()["krr_weights"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let m = s.train(&case["body"]).await;
        assert_eq!(m["params"]["sample_weight"], case["body"]["params"]["sample_weight"], "{name}");
        close(&predictions(&s, &m, &case["query"]).await, &case["predictions"], 1e-8, &format!("{name}: predictions"));
        close(&m["training"]["loo"]["rmse"], &case["loo_rmse"], 1e-8, &format!("{name}: weighted loo rmse"));
        // Nystrom with every row an inducing point is the exact fit.
        let n = case["body"]["x"].as_array().unwrap().len();
        let mut body = case["body"].clone();
        body["params"]["approximation"] = json!("nystrom");
        body["params"]["inducing_points"] = json!(n);
        body["params"]["inducing_selection"] = json!("uniform");
        body["params"]["loo"] = json!(false);
        let ny = s.train(&body).await;
        close(
            &predictions(&s, &ny, &case["query"]).await,
            &case["predictions"],
            1e-6,
            &format!("{name}: nystrom, M = n"),
        );
    }
}

#[tokio::test]
async fn appends_carry_their_weights_and_misuse_names_its_place() {
    let s = TestServer::default().await;
    let x: Vec<Vec<f64>> = (0..25).map(|i| vec![i as f64 / 4.0, (i % 3) as f64]).collect();
    let y: Vec<f64> = x.iter().map(|r| r[0].sin() + r[1]).collect();
    let w: Vec<f64> = (0..25).map(|i| [1.0, 0.0, 2.5, 0.5][i % 4]).collect();
    let body = |x: Value, y: Value, w: Value| {
        json!({"model": "kernel_ridge", "kernel": {"type": "rbf", "gamma": 0.4},
               "params": {"lambda": 0.05, "sample_weight": w, "loo": true}, "x": x, "y": y})
    };
    let refused = |got: (u16, Value), pointer: &str, what: &str| {
        assert_eq!(got.0, 422, "{what}: {}", got.1);
        assert!(pointers(&got.1).iter().any(|p| p == pointer), "{what}: {}", got.1);
    };
    refused(
        problem(s.post("/models", &body(json!(x), json!(y), json!([1.0, 2.0]))).await).await,
        "/params/sample_weight",
        "length",
    );
    refused(
        problem(s.post("/models", &body(json!(x), json!(y), json!(vec![0.0; 25]))).await).await,
        "/params/sample_weight",
        "all zero",
    );
    let mut negative = w.clone();
    negative[7] = -1.0;
    refused(
        problem(s.post("/models", &body(json!(x), json!(y), json!(negative))).await).await,
        "/params/sample_weight/7",
        "negative",
    );

    let m = s.train(&body(json!(x), json!(y), json!(w))).await;
    let path = format!("/models/{}/observations", m["id"].as_str().unwrap());
    let (more_x, more_y, more_w) = (json!([[6.3, 1.0], [0.1, 2.0]]), json!([0.4, 2.2]), json!([1.5, 0.0]));
    refused(problem(s.post(&path, &json!({"x": more_x, "y": more_y})).await).await, "/sample_weight", "missing");
    refused(
        problem(s.post(&path, &json!({"x": more_x, "y": more_y, "sample_weight": [1.0]})).await).await,
        "/sample_weight",
        "wrong length",
    );
    refused(
        problem(s.post(&path, &json!({"x": more_x, "y": more_y, "sample_weight": [1.0, -2.0]})).await).await,
        "/sample_weight/1",
        "negative",
    );
    refused(
        problem(s.post(&path, &json!({"x": more_x, "y": more_y, "sample_weight": more_w, "noise": [0.1, 0.1]})).await)
            .await,
        "/noise",
        "noise for a kernel ridge",
    );
    let r = s.post(&path, &json!({"x": more_x, "y": more_y, "sample_weight": more_w})).await;
    assert_eq!(r.status(), 200);
    let grown: Value = r.json().await.unwrap();
    let all = |a: Value, b: Value| json!(a.as_array().unwrap().iter().chain(b.as_array().unwrap()).collect::<Vec<_>>());
    let refit =
        s.train(&body(all(json!(x), more_x.clone()), all(json!(y), more_y.clone()), all(json!(w), more_w))).await;
    assert_eq!(grown["params"]["sample_weight"], refit["params"]["sample_weight"]);
    close(&grown["training"]["loo"]["rmse"], &refit["training"]["loo"]["rmse"], 1e-9, "weighted loo after an append");
    let q = json!([[0.3, 0.0], [3.3, 1.0], [5.9, 2.0]]);
    close(&predictions(&s, &grown, &q).await, &predictions(&s, &refit, &q).await, 1e-9, "an append is a refit");
    // An unweighted model takes no weights with new rows.
    let plain = s.train(&json!({"model": "kernel_ridge", "x": x, "y": y})).await;
    refused(
        problem(
            s.post(
                &format!("/models/{}/observations", plain["id"].as_str().unwrap()),
                &json!({"x": more_x, "y": more_y, "sample_weight": [1.0, 1.0]}),
            )
            .await,
        )
        .await,
        "/sample_weight",
        "weights for an unweighted model",
    );
}

//! A noise variance per training row (`params.noise` as a list) for exact Gaussian
//! processes, against scikit-learn's `GaussianProcessRegressor(alpha=array)`
//! (tests/fixtures/generate_gp_options.py): likelihood, mean, std and covariance to 1e-8;
//! online updates carrying the new rows' noise equal a refit; a restart changes nothing
//! (nor for a weighted kernel ridge);
//! every misuse at its pointer.

mod common;

use common::{pointers, problem, TestServer};
use serde_json::{json, Value};

fn fixtures() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/gp_options_reference.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn numbers(v: &Value) -> Vec<f64> {
    let mut out = Vec::new();
    match v {
        Value::Array(items) => items.iter().for_each(|i| out.extend(numbers(i))),
        Value::Object(fields) => fields.values().for_each(|i| out.extend(numbers(i))),
        other => out.push(other.as_f64().unwrap_or_else(|| panic!("not a number: {other}"))),
    }
    out
}

/// Every number of `got` within `tol` of `want`'s, relative to the largest of `want`.
fn close(got: &Value, want: &Value, tol: f64, what: &str) {
    let (g, w) = (numbers(got), numbers(want));
    assert_eq!(g.len(), w.len(), "{what}: shapes");
    let scale = w.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-300);
    for (a, b) in g.iter().zip(&w) {
        assert!((a - b).abs() <= tol * scale, "{what}: {a} vs {b}");
    }
}

async fn predict(s: &TestServer, id: &str, body: Value) -> Value {
    let r = s.post(&format!("/models/{id}/predict"), &body).await;
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

/// The fitted model's likelihood and its answers at the case's queries equal
/// scikit-learn's.
async fn same_as_scikit_learn(s: &TestServer, m: &Value, case: &Value, name: &str) {
    close(&m["training"]["log_marginal_likelihood"], &case["lml"], 1e-8, &format!("{name}: LML"));
    let id = m["id"].as_str().unwrap();
    let p = predict(s, id, json!({"x": case["query"], "variance": true})).await;
    close(&p["predictions"], &case["mean"], 1e-8, &format!("{name}: mean"));
    // As variances: at a training row without noise the std is the square root of
    // round-off (1e-8), which no relative tolerance on the std itself can hold.
    let squared = |v: &Value| json!(numbers(v).iter().map(|s| s * s).collect::<Vec<_>>());
    close(&squared(&p["std"]), &squared(&case["std"]), 1e-8, &format!("{name}: std^2"));
    let p = predict(s, id, json!({"x": case["query"], "covariance": true})).await;
    close(&p["covariance"], &case["covariance"], 1e-8, &format!("{name}: covariance"));
}

#[tokio::test]
async fn a_noise_per_row_is_scikit_learns_alpha_array() {
    let s = TestServer::default().await;
    for case in fixtures()["row_noise"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let m = s.train(&case["body"]).await;
        assert_eq!(m["params"]["noise"], case["body"]["params"]["noise"], "{name}: the list comes back as given");
        match case.get("fixed_body") {
            None => same_as_scikit_learn(&s, &m, case, name).await,
            Some(fixed) => {
                // Optimised: the kernel moves, the noise list does not, and the search ends
                // at least as high as scikit-learn's; at scikit-learn's optimum every
                // number is its.
                let ours = m["training"]["log_marginal_likelihood"].as_f64().unwrap();
                let theirs = case["lml"].as_f64().unwrap();
                assert!(ours >= theirs - 1e-3, "{name}: {ours} < {theirs} - 1e-3 ({})", case["sklearn_kernel"]);
                assert_ne!(m["kernel"], case["body"]["kernel"], "{name}: the kernel was optimised");
                let at_theirs = s.train(fixed).await;
                same_as_scikit_learn(&s, &at_theirs, case, &format!("{name} at scikit-learn's optimum")).await;
            }
        }
    }
}

#[tokio::test]
async fn appends_carry_their_noise_and_equal_a_refit() {
    let s = TestServer::default().await;
    let x: Vec<Vec<f64>> = (0..30).map(|i| vec![i as f64 / 5.0]).collect();
    let y: Vec<f64> = x.iter().map(|r| r[0].sin()).collect();
    let noise: Vec<f64> = (0..30).map(|i| 0.01 + 0.01 * (i % 7) as f64).collect();
    let (more_x, more_y, more_noise) = (json!([[6.1], [0.35]]), json!([0.2, 0.4]), json!([0.05, 0.3]));
    let body = |x: Value, y: Value, noise: Value| {
        json!({"model": "gaussian_process", "kernel": {"type": "rbf", "length_scale": 0.8},
               "params": {"noise": noise, "normalize_y": true, "loo": true}, "x": x, "y": y})
    };
    let m = s.train(&body(json!(x), json!(y), json!(noise))).await;
    let id = m["id"].as_str().unwrap();
    let path = format!("/models/{id}/observations");
    let refused = |got: (u16, Value), pointer: &str, what: &str| {
        assert_eq!(got.0, 422, "{what}: {}", got.1);
        assert!(pointers(&got.1).iter().any(|p| p == pointer), "{what}: {}", got.1);
    };
    refused(problem(s.post(&path, &json!({"x": more_x, "y": more_y})).await).await, "/noise", "missing noise");
    refused(
        problem(s.post(&path, &json!({"x": more_x, "y": more_y, "noise": [0.1]})).await).await,
        "/noise",
        "noise of the wrong length",
    );
    refused(
        problem(s.post(&path, &json!({"x": more_x, "y": more_y, "noise": [0.1, -1.0]})).await).await,
        "/noise/1",
        "a negative noise",
    );
    refused(
        problem(s.post(&path, &json!({"x": more_x, "y": more_y, "noise": more_noise, "sample_weight": [1, 1]})).await)
            .await,
        "/sample_weight",
        "weights for a model without them",
    );
    let r = s.post(&path, &json!({"x": more_x, "y": more_y, "noise": more_noise})).await;
    assert_eq!(r.status(), 200);
    let grown: Value = r.json().await.unwrap();
    let all = |a: Value, b: Value| json!(a.as_array().unwrap().iter().chain(b.as_array().unwrap()).collect::<Vec<_>>());
    let refit = s
        .train(&body(
            all(json!(x), more_x.clone()),
            all(json!(y), more_y.clone()),
            all(json!(noise), more_noise.clone()),
        ))
        .await;
    assert_eq!(grown["params"]["noise"], refit["params"]["noise"], "the list grows by the new rows' noise");
    close(&grown["training"]["log_marginal_likelihood"], &refit["training"]["log_marginal_likelihood"], 1e-9, "LML");
    close(&grown["training"]["loo"], &refit["training"]["loo"], 1e-9, "leave-one-out");
    let q = json!({"x": [[0.3], [3.3], [5.9]], "covariance": true});
    let (a, b) = (predict(&s, id, q.clone()).await, predict(&s, refit["id"].as_str().unwrap(), q).await);
    close(&a["predictions"], &b["predictions"], 1e-9, "mean");
    close(&a["covariance"], &b["covariance"], 1e-9, "covariance");
    // One noise for every row: a list in the body is refused.
    let plain = s.train(&body(json!(x), json!(y), json!(0.1))).await;
    refused(
        problem(
            s.post(
                &format!("/models/{}/observations", plain["id"].as_str().unwrap()),
                &json!({"x": more_x, "y": more_y, "noise": more_noise}),
            )
            .await,
        )
        .await,
        "/noise",
        "noise for a model with one noise",
    );
}

#[tokio::test]
async fn misuse_names_its_place_and_a_restart_changes_nothing() {
    let dir = std::env::temp_dir().join(format!("mercer-row-noise-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let config =
        || mercer::config::Config { data_dir: dir.display().to_string(), ..mercer::config::Config::for_tests() };
    let s = TestServer::start(config()).await;
    s.service().wait_ready().await;
    let x: Vec<Vec<f64>> = (0..12).map(|i| vec![i as f64 * 0.4]).collect();
    let y: Vec<f64> = x.iter().map(|r| r[0].cos()).collect();
    let gp = |params: Value| json!({"model": "gaussian_process", "params": params, "x": x, "y": y});
    let refused = |got: (u16, Value), pointer: &str, what: &str| {
        assert_eq!(got.0, 422, "{what}: {}", got.1);
        assert!(pointers(&got.1).iter().any(|p| p == pointer), "{what}: {}", got.1);
    };
    let mut noise = vec![0.1; 12];
    refused(problem(s.post("/models", &gp(json!({"noise": [0.1, 0.2]}))).await).await, "/params/noise", "length");
    noise[3] = -0.5;
    refused(problem(s.post("/models", &gp(json!({"noise": noise}))).await).await, "/params/noise/3", "negative");
    noise[3] = 0.1;
    let mut with_zero = noise.clone();
    with_zero[5] = 0.0;
    refused(
        problem(
            s.post("/models", &gp(json!({"noise": with_zero, "approximation": "nystrom", "inducing_points": 4}))).await,
        )
        .await,
        "/params/noise/5",
        "a zero noise under nystrom",
    );
    let sparse = s.train(&gp(json!({"noise": noise, "approximation": "nystrom", "inducing_points": 4}))).await;
    assert_eq!(sparse["params"]["noise"], json!(noise), "nystrom takes a noise per row");
    assert!(sparse["training"]["evidence_lower_bound"].is_number());
    let m = s.train(&gp(json!({"noise": noise}))).await;
    let id = m["id"].as_str().unwrap().to_string();
    refused(
        problem(s.post(&format!("/models/{id}/predict"), &json!({"x": [[0.5]], "include_noise": true})).await).await,
        "/include_noise",
        "include_noise at predict",
    );
    refused(
        problem(
            s.post(&format!("/models/{id}/posterior_samples"), &json!({"x": [[0.5]], "include_noise": true})).await,
        )
        .await,
        "/include_noise",
        "include_noise at posterior_samples",
    );
    let q = json!({"x": [[0.5], [2.2]], "covariance": true});
    let before = predict(&s, &id, q.clone()).await;
    // A weighted kernel ridge too.
    let w: Vec<f64> = (0..12).map(|i| (i % 3) as f64).collect();
    let krr = s.train(&json!({"model": "kernel_ridge", "params": {"sample_weight": w}, "x": x, "y": y})).await;
    let krr_id = krr["id"].as_str().unwrap().to_string();
    let krr_before = predict(&s, &krr_id, json!({"x": [[0.5], [2.2]]})).await;
    drop(s);
    let s = TestServer::start(config()).await;
    s.service().wait_ready().await;
    assert_eq!(predict(&s, &id, q).await, before, "restored bit for bit");
    assert_eq!(predict(&s, &krr_id, json!({"x": [[0.5], [2.2]]})).await, krr_before, "weighted kernel ridge too");
    let shown: Value = s.get(&format!("/models/{id}")).await.json().await.unwrap();
    assert_eq!(shown["params"]["noise"], json!(noise));
    std::fs::remove_dir_all(&dir).ok();
}

/// A search over a GP with a noise per row: each fold's fit takes its own rows' noise
/// (a list of the wrong length would fail every fold).
#[tokio::test]
async fn a_search_takes_each_folds_own_noise() {
    let s = TestServer::default().await;
    let x: Vec<Vec<f64>> = (0..30).map(|i| vec![i as f64 / 5.0]).collect();
    let y: Vec<f64> = x.iter().map(|r| r[0].sin()).collect();
    let noise: Vec<f64> = (0..30).map(|i| 0.01 + 0.02 * (i % 5) as f64).collect();
    let m = s
        .train(&json!({"model": "gaussian_process", "params": {"noise": noise}, "x": x, "y": y,
                       "search": {"space": {"/kernel/length_scale": [0.3, 1.0, 3.0]}, "cv": 3}}))
        .await;
    let candidates = m["training"]["search"]["candidates"].as_array().unwrap();
    assert_eq!(candidates.len(), 3);
    for c in candidates {
        let folds = numbers(&c["fold_scores"]);
        assert_eq!(folds.len(), 3, "{c}");
        assert!(folds.iter().all(|v| v.is_finite()), "{c}");
    }
    assert_eq!(m["params"]["noise"], json!(noise), "the best is refitted with every row's noise");
}

//! Variational GPs through the API: every likelihood fitted and served (variance,
//! probabilities that sum to one, posterior draws for the Gaussian case only), the
//! training report and its progress, a DELETE that stops the minibatches, a restart
//! that changes no bit, datasets by id, the memory limit, and every bad parameter a 422
//! at its pointer.

mod common;

use common::{delete_and_see_it_stop, pointers, problem, start_and_watch, TestServer};
use mercer::config::Config;
use serde_json::{json, Value};

/// n rows of two features and a smooth function of them.
fn rows(n: usize) -> (Vec<Vec<f64>>, Vec<f64>) {
    let x: Vec<Vec<f64>> =
        (0..n).map(|i| vec![(i as f64 * 0.618).rem_euclid(6.0), (i as f64 * 0.377).rem_euclid(4.0)]).collect();
    let f = x.iter().map(|r| r[0].sin() + 0.5 * r[1].cos()).collect();
    (x, f)
}

fn body(model: &str, params: Value, x: &[Vec<f64>], y: Value) -> Value {
    let mut p = params;
    p["approximation"] = json!("variational");
    json!({"model": model, "kernel": {"type": "rbf", "length_scale": 1.0}, "params": p, "x": x, "y": y})
}

async fn predict(s: &TestServer, id: &str, body: Value) -> Value {
    let r = s.post(&format!("/models/{id}/predict"), &body).await;
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

/// Counts from a log rate, classes from regions; deterministic noise.
fn counts(f: &[f64]) -> Vec<f64> {
    f.iter().enumerate().map(|(i, v)| ((v + 1.5).exp() * (0.6 + 0.8 * ((i * 37 % 11) as f64 / 10.0))).floor()).collect()
}

#[tokio::test]
async fn every_likelihood_fits_and_serves() {
    let s = TestServer::default().await;
    let (x, f) = rows(300);
    let q: Vec<Vec<f64>> = x[..6].to_vec();
    let common = json!({"inducing_points": 20, "batch_size": 64, "epochs": 20, "seed": 4});
    // Regression: gaussian, student_t, poisson.
    let noisy: Vec<f64> = f.iter().enumerate().map(|(i, v)| v + 0.1 * ((i * 13 % 7) as f64 - 3.0) / 3.0).collect();
    for (likelihood, y) in [("gaussian", json!(noisy)), ("student_t", json!(noisy)), ("poisson", json!(counts(&f)))] {
        let mut params = common.clone();
        params["likelihood"] = json!(likelihood);
        let m = s.train(&body("gaussian_process", params, &x, y.clone())).await;
        let t = &m["training"];
        assert_eq!(t["approximation"], "variational", "{m}");
        assert_eq!(
            (t["inducing_points"].as_u64(), t["epochs"].as_u64(), m["n_support"].as_u64()),
            (Some(20), Some(20), Some(20))
        );
        assert_eq!(t["iterations"].as_u64(), Some(20 * 300_u64.div_ceil(64)), "{t}");
        assert!(t["elbo"].as_f64().unwrap().is_finite(), "{t}");
        assert_eq!(m["params"]["likelihood"], likelihood);
        assert_eq!(m["params"]["learn_inducing"], true, "learned by default with optimize");
        assert_eq!(m["params"]["optimize"], true, "a variational fit learns its hyperparameters by default");
        let id = m["id"].as_str().unwrap();
        let p = predict(&s, id, json!({"x": q, "variance": true})).await;
        let (values, variance) = (common::numbers(&p["predictions"]), common::numbers(&p["variance"]));
        assert!(variance.iter().all(|v| *v > 0.0), "{p}");
        let ys = common::numbers(&y);
        let err: f64 = values.iter().zip(&ys).map(|(a, b)| (a - b).abs()).sum::<f64>() / 6.0;
        let spread = if likelihood == "poisson" { 3.0 } else { 0.4 };
        assert!(err < spread, "{likelihood}: mean error {err} ({p})");
        match likelihood {
            "student_t" => {
                let df = m["params"]["df"].as_f64().unwrap();
                assert!(df > 2.0, "{df}");
                // y's variance: the noise's share sigma^2 df / (df - 2) is in it.
                let floor = m["params"]["noise"].as_f64().unwrap() * df / (df - 2.0);
                assert!(variance.iter().all(|v| *v >= floor), "{variance:?} vs {floor}");
            }
            "poisson" => assert!(values.iter().all(|v| *v > 0.0), "rates are positive: {values:?}"),
            _ => {
                // include_noise adds the learned noise to the latent's variance.
                let noisy = predict(&s, id, json!({"x": q, "include_noise": true})).await;
                let noise = m["params"]["noise"].as_f64().unwrap();
                for (a, b) in common::numbers(&noisy["variance"]).iter().zip(&variance) {
                    assert!((a - b - noise).abs() < 1e-9 * a.max(1.0), "{a} vs {b} + {noise}");
                }
            }
        }
        // Joint draws and the covariance are the Gaussian likelihood's only.
        let drawn = s.post(&format!("/models/{id}/posterior_samples"), &json!({"x": q, "n_samples": 3})).await;
        let cov = s.post(&format!("/models/{id}/predict"), &json!({"x": q, "covariance": true})).await;
        if likelihood == "gaussian" {
            assert_eq!((drawn.status(), cov.status()), (reqwest::StatusCode::OK, reqwest::StatusCode::OK));
            let cov: Value = cov.json().await.unwrap();
            for i in 0..6 {
                let c = cov["covariance"][i][i].as_f64().unwrap();
                assert!((c - variance[i]).abs() < 1e-9 * c.max(1e-6), "the covariance's diagonal is the variance");
            }
        } else {
            let (status, p) = problem(drawn).await;
            assert_eq!((status, pointers(&p)), (422, vec!["/model".to_string()]), "{p}");
            let (status, p) = problem(cov).await;
            assert_eq!((status, pointers(&p)), (422, vec!["/covariance".to_string()]), "{p}");
        }
    }
    // Classification: bernoulli for two classes, softmax (the default) for three.
    for (classes, want) in [(2usize, "bernoulli"), (3, "softmax")] {
        let y: Vec<String> = f
            .iter()
            .map(|v| if classes == 2 { (*v > 0.0) as usize } else { ((v + 1.5) as usize).min(2) })
            .map(|c| format!("c{c}"))
            .collect();
        let m = s.train(&body("gp_classifier", common.clone(), &x, json!(y))).await;
        assert_eq!(m["params"]["likelihood"], want, "{m}");
        let p = predict(&s, m["id"].as_str().unwrap(), json!({"x": x[..40].to_vec()})).await;
        let probs = p["probabilities"].as_array().unwrap();
        let labels = p["predictions"].as_array().unwrap();
        let classes_of = m["classes"].as_array().unwrap();
        let mut right = 0;
        for (i, row) in probs.iter().enumerate() {
            let row = common::numbers(row);
            assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-12, "row {i} sums to one: {row:?}");
            let best = (0..row.len()).fold(0, |b, k| if row[k] > row[b] { k } else { b });
            assert_eq!(labels[i], classes_of[best], "the prediction is the most probable class");
            right += usize::from(labels[i] == json!(y[i]));
        }
        assert!(right >= 34, "{classes} classes: {right} of 40 training rows right");
        assert!(p.get("variance").is_none());
    }
}

/// A long fit shows its epoch and ELBO while training, and a DELETE stops it between
/// minibatches.
#[tokio::test]
async fn a_long_fit_reports_its_epochs_and_stops_when_deleted() {
    let s = TestServer::default().await;
    let (x, f) = rows(20_000);
    let b = body("gaussian_process", json!({"inducing_points": 200, "epochs": 1000, "batch_size": 256}), &x, json!(f));
    let (id, seen) = start_and_watch(&s, &b, "epochs").await;
    let p = &seen["progress"];
    assert_eq!(p["total"].as_u64(), Some(1000 * 20_000_u64.div_ceil(256)), "{p}");
    assert!(p["epoch"].as_u64() >= Some(1), "{p}");
    let again = common::eventually(std::time::Duration::from_secs(120), async || {
        let m: Value = s.get(&format!("/models/{id}")).await.json().await.unwrap();
        m["progress"]["epoch"].as_u64() >= Some(2) && m["progress"]["objective"].as_f64().is_some()
    })
    .await;
    assert!(again, "the second epoch starts with the first's ELBO as objective");
    delete_and_see_it_stop(&s, &id).await;
}

#[tokio::test]
async fn variational_models_survive_a_restart_bit_for_bit() {
    let dir = std::env::temp_dir().join(format!("mercer-variational-{}", uuid::Uuid::new_v4()));
    let config = Config { data_dir: dir.display().to_string(), ..Config::for_tests() };
    let (x, f) = rows(200);
    let q = json!({"x": x[..9].to_vec(), "variance": true});
    let labels: Vec<String> = f.iter().map(|v| format!("c{}", ((v + 1.5) as usize).min(2))).collect();
    let mut before = Vec::new();
    {
        let mut s = TestServer::start(config.clone()).await;
        s.service().wait_ready().await;
        let small = json!({"inducing_points": 15, "epochs": 5, "batch_size": 50});
        let mut t = small.clone();
        t["likelihood"] = json!("student_t");
        for b in [
            body("gaussian_process", small.clone(), &x, json!(f)),
            body("gaussian_process", t, &x, json!(f)),
            body("gp_classifier", small.clone(), &x, json!(labels)),
        ] {
            let m = s.train(&b).await;
            let id = m["id"].as_str().unwrap().to_string();
            before.push((id.clone(), m, predict(&s, &id, q.clone()).await));
        }
        assert!(s.server.take().unwrap().shutdown().await);
    }
    let s = TestServer::start(config).await;
    s.service().wait_ready().await;
    for (id, m, p) in before {
        let again: Value = s.get(&format!("/models/{id}")).await.json().await.unwrap();
        assert_eq!(
            (&again["training"], &again["params"], &again["kernel"]),
            (&m["training"], &m["params"], &m["kernel"])
        );
        assert_eq!(predict(&s, &id, q.clone()).await, p, "identical answers after the restart");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn datasets_by_id_fit_variationally() {
    let s = TestServer::default().await;
    let (x, f) = rows(500);
    let mut csv = String::from("a,b,y\n");
    for (r, v) in x.iter().zip(&f) {
        csv.push_str(&format!("{},{},{}\n", r[0], r[1], v));
    }
    let r = s.post_raw("/datasets?target=y", csv, "text/csv").await;
    assert_eq!(r.status(), 201);
    let dataset: Value = r.json().await.unwrap();
    let m = s
        .train(&json!({"model": "gaussian_process", "dataset": dataset["id"],
                       "params": {"approximation": "variational", "inducing_points": 30, "epochs": 3}}))
        .await;
    assert_eq!((m["training"]["approximation"].as_str(), m["n_train"].as_u64()), (Some("variational"), Some(500)));
    let r = s.post_raw(&format!("/models/{}/predict", m["id"].as_str().unwrap()), "a,b\n1,2\n3,1\n", "text/csv").await;
    assert_eq!(r.status(), 200);
}

/// The memory estimate counts M^2 per latent and the minibatch: 413 beyond the limit.
#[tokio::test]
async fn the_memory_limit_counts_the_inducing_points() {
    let s = TestServer::start(Config { max_fit_bytes: 64 << 20, ..Config::for_tests() }).await;
    let (x, f) = rows(3000);
    let r = s.post("/models", &body("gaussian_process", json!({"inducing_points": 2000}), &x, json!(f))).await;
    let (status, p) = problem(r).await;
    assert_eq!(status, 413, "{p}");
    assert!(p["detail"].as_str().unwrap().contains("MERCER_MAX_FIT_BYTES"), "{p}");
    let fits =
        s.post("/models", &body("gaussian_process", json!({"inducing_points": 50, "epochs": 1}), &x, json!(f))).await;
    assert_eq!(fits.status(), 201);
}

#[tokio::test]
async fn every_bad_parameter_is_a_422_at_its_pointer() {
    let s = TestServer::default().await;
    let (x, f) = rows(60);
    let labels: Vec<String> = f.iter().map(|v| format!("c{}", ((v + 1.5) as usize).min(2))).collect();
    let strings: Vec<String> = (0..60).map(|i| format!("row {i}")).collect();
    let gp = |params: Value| body("gaussian_process", params, &x, json!(f));
    let gpc = |params: Value| body("gp_classifier", params, &x, json!(labels));
    let mut cases = vec![
        (gp(json!({"likelihood": "bernoulli"})), "/params/likelihood"),
        (gp(json!({"likelihood": "laplace"})), "/params/likelihood"),
        (gpc(json!({"likelihood": "poisson"})), "/params/likelihood"),
        (gpc(json!({"likelihood": "bernoulli"})), "/params/likelihood"),
        (gp(json!({"inducing_points": 61})), "/params/inducing_points"),
        (gp(json!({"inducing_points": 8193})), "/params/inducing_points"),
        (gp(json!({"batch_size": 0})), "/params/batch_size"),
        (gp(json!({"epochs": 0})), "/params/epochs"),
        (gp(json!({"epochs": 1001})), "/params/epochs"),
        (gp(json!({"learning_rate": 0})), "/params/learning_rate"),
        (gp(json!({"learning_rate": -1})), "/params/learning_rate"),
        (gp(json!({"precision": "float16"})), "/params/precision"),
        (gp(json!({"df": 5})), "/params/df"),
        (gp(json!({"likelihood": "student_t", "df": 2})), "/params/df"),
        (gp(json!({"loo": true})), "/params/loo"),
        (gp(json!({"restarts": 2})), "/params/restarts"),
        (gp(json!({"noise": vec![0.1; 60]})), "/params/noise"),
        (gp(json!({"likelihood": "poisson", "noise": 0.1})), "/params/noise"),
        (gp(json!({"likelihood": "poisson", "normalize_y": true})), "/params/normalize_y"),
        (gp(json!({"likelihood": "poisson"})), "/y"),
        (gpc(json!({"max_iter": 10})), "/params/max_iter"),
        (gpc(json!({"restarts": 1})), "/params/restarts"),
        (
            json!({"model": "gaussian_process", "kernel": {"type": "spectrum", "k": 2},
                   "params": {"approximation": "variational", "learn_inducing": true}, "x": strings, "y": f}),
            "/params/learn_inducing",
        ),
        (
            json!({"model": "kernel_ridge", "params": {"approximation": "variational"}, "x": x, "y": f}),
            "/params/approximation",
        ),
        (json!({"model": "kernel_ridge", "params": {"batch_size": 10}, "x": x, "y": f}), "/params/batch_size"),
        (
            json!({"model": "gp_classifier", "params": {"approximation": "nystrom"}, "x": x, "y": labels}),
            "/params/approximation",
        ),
        (json!({"model": "gaussian_process", "params": {"epochs": 3}, "x": x, "y": f}), "/params/epochs"),
    ];
    // A 2-D y is one output too many.
    let mut two = gp(json!({}));
    two["y"] = json!(f.iter().map(|v| [*v, 2.0 * v]).collect::<Vec<_>>());
    cases.push((two, "/y"));
    for (b, at) in cases {
        let (status, p) = problem(s.post("/models", &b).await).await;
        assert_eq!(status, 422, "{b}: {p}");
        assert_eq!(pointers(&p), vec![at.to_string()], "{}: {p}", b["params"]);
    }
}

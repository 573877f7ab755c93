//! `approximation` through the API: auto resolving by row count and memory, nystrom fits
//! of kernel ridge and the GP (reported, stored, restored), their parameter errors, the
//! search on a subset of rows, and progress and cancellation of a long fit.

mod common;

use common::{delete_and_see_it_stop, pointers, problem, start_and_watch, TestServer};
use mercer::config::Config;
use serde_json::{json, Value};

/// n rows of y = sin(x0) + 0.5 cos(x1), two features on a jittered grid.
fn rows(n: usize) -> (Vec<Vec<f64>>, Vec<f64>) {
    let x: Vec<Vec<f64>> =
        (0..n).map(|i| vec![(i as f64 * 0.618).rem_euclid(6.0), (i as f64 * 0.377).rem_euclid(4.0)]).collect();
    let y = x.iter().map(|r| r[0].sin() + 0.5 * r[1].cos()).collect();
    (x, y)
}

async fn predict(s: &TestServer, id: &str, x: &[Vec<f64>]) -> Value {
    s.post(&format!("/models/{id}/predict"), &json!({"x": x})).await.json().await.unwrap()
}

fn small(exact_max_rows: usize) -> Config {
    Config { exact_max_rows, ..Config::for_tests() }
}

#[tokio::test]
async fn auto_is_exact_up_to_the_row_limit_then_nystrom() {
    let s = TestServer::start(small(100)).await;
    let (x, y) = rows(100);
    let m = s.train(&json!({"model": "kernel_ridge", "params": {"lambda": 0.01}, "x": x, "y": y})).await;
    assert_eq!((m["training"]["approximation"].as_str(), m["n_support"].as_u64()), (Some("exact"), Some(100)));
    let (x, y) = rows(101);
    let m = s
        .train(&json!({"model": "kernel_ridge", "params": {"lambda": 0.01, "inducing_points": 30}, "x": x, "y": y}))
        .await;
    assert_eq!(m["training"]["approximation"], "nystrom");
    assert_eq!((m["training"]["inducing_points"].as_u64(), m["n_support"].as_u64()), (Some(30), Some(30)));
    assert_eq!(m["params"]["approximation"], "nystrom");
    // The default M is min(n, 1024).
    let g = s.train(&json!({"model": "gaussian_process", "params": {"noise": 0.01}, "x": x, "y": y})).await;
    assert_eq!((g["training"]["inducing_points"].as_u64(), g["n_support"].as_u64()), (Some(101), Some(101)));
    assert!(g["training"]["evidence_lower_bound"].as_f64().unwrap().is_finite());
    assert!(g["training"].get("log_marginal_likelihood").is_none());
    let p = predict(&s, g["id"].as_str().unwrap(), &x[..3]).await;
    for i in 0..3 {
        assert!((p["predictions"][i].as_f64().unwrap() - y[i]).abs() < 0.05, "{p}");
        assert!(p["variance"][i].as_f64().unwrap() >= 0.0);
    }
    // Other models are exact whatever n, and say so.
    let labels: Vec<&str> = y.iter().map(|v| if *v > 0.0 { "up" } else { "down" }).collect();
    let c = s
        .train(&json!({"model": "kernel_perceptron", "params": {"approximation": "exact"}, "x": x, "y": labels}))
        .await;
    assert_eq!(c["training"]["approximation"], "exact");
}

#[tokio::test]
async fn auto_goes_nystrom_when_the_exact_fit_would_not_fit_in_memory() {
    // 3000 rows: the exact fit needs 72 MB, over this limit; the Nystrom fit does not.
    let s = TestServer::start(Config { max_fit_bytes: 60 << 20, ..Config::for_tests() }).await;
    let (x, y) = rows(3000);
    let body = json!({"model": "kernel_ridge", "params": {"inducing_points": 50}, "x": x, "y": y});
    let m = s.train(&body).await;
    assert_eq!(m["training"]["approximation"], "nystrom");
    let mut exact = body.clone();
    exact["params"]["approximation"] = json!("exact");
    let (status, p) = problem(s.post("/models", &exact).await).await;
    assert_eq!(status, 413, "{p}");
    // Far beyond memory even for Nystrom: 413 before anything is allocated.
    let s = TestServer::start(Config { max_fit_bytes: 200 << 10, ..Config::for_tests() }).await;
    let (status, p) = problem(s.post("/models", &body).await).await;
    assert_eq!(status, 413, "{p}");
    assert!(p["detail"].as_str().unwrap().contains("MERCER_MAX_FIT_BYTES"));
}

#[tokio::test]
async fn approximation_params_are_checked() {
    let s = TestServer::default().await;
    let (x, y) = rows(20);
    let labels: Vec<&str> = y.iter().map(|v| if *v > 0.0 { "a" } else { "b" }).collect();
    for (body, pointer) in [
        (
            json!({"model": "nu_svm", "params": {"approximation": "nystrom"}, "x": x, "y": labels}),
            "/params/approximation",
        ),
        (
            json!({"model": "svm", "params": {"approximation": "nystrom", "probability": true}, "x": x, "y": labels}),
            "/params/probability",
        ),
        (
            json!({"model": "svm", "params": {"approximation": "nystrom", "inducing_points": 21}, "x": x, "y": labels}),
            "/params/inducing_points",
        ),
        (
            json!({"model": "rbf_network", "params": {"approximation": "nystrom"}, "x": x, "y": y}),
            "/params/approximation",
        ),
        (
            json!({"model": "kernel_ridge", "params": {"approximation": "sparse"}, "x": x, "y": y}),
            "/params/approximation",
        ),
        (
            json!({"model": "kernel_ridge", "params": {"approximation": "nystrom", "inducing_points": 21}, "x": x, "y": y}),
            "/params/inducing_points",
        ),
        (json!({"model": "kernel_ridge", "params": {"inducing_points": 0}, "x": x, "y": y}), "/params/inducing_points"),
        (
            json!({"model": "gaussian_process", "params": {"inducing_selection": "grid"}, "x": x, "y": y}),
            "/params/inducing_selection",
        ),
        (
            json!({"model": "gaussian_process", "params": {"approximation": "nystrom", "noise": 0}, "x": x, "y": y}),
            "/params/noise",
        ),
    ] {
        let (status, p) = problem(s.post("/models", &body).await).await;
        assert_eq!((status, pointers(&p)), (422, vec![pointer.to_string()]), "{body}: {p}");
    }
    // The classifiers have no closed-form leave-one-out: `loo` is not one of their params.
    let body = json!({"model": "kernel_logistic", "params": {"loo": true}, "x": x, "y": labels});
    let (status, p) = problem(s.post("/models", &body).await).await;
    assert_eq!((status, pointers(&p)), (400, vec!["/params/loo".to_string()]), "{p}");
}

/// On the same rows and hyperparameters, Nystrom kernel ridge and the sparse GP come
/// close to the exact fits; kmeans inducing points are reproducible for a seed.
#[tokio::test]
async fn nystrom_fits_approach_the_exact_ones_and_are_seeded() {
    let s = TestServer::default().await;
    let (x, y) = rows(400);
    let (q, truth) = rows(437);
    let q = &q[400..];
    let kernel = json!({"type": "rbf", "length_scale": 1.0});
    let fit = |model: &str, params: Value| json!({"model": model, "kernel": kernel, "params": params, "x": x, "y": y});
    let rmse = |p: &Value| -> f64 {
        let p = p["predictions"].as_array().unwrap();
        (p.iter().zip(&truth[400..]).map(|(a, b)| (a.as_f64().unwrap() - b).powi(2)).sum::<f64>() / p.len() as f64)
            .sqrt()
    };
    for (model, params) in [("kernel_ridge", json!({"lambda": 1e-3})), ("gaussian_process", json!({"noise": 1e-3}))] {
        let exact = s.train(&fit(model, params.clone())).await;
        let mut nys = params.clone();
        nys["approximation"] = json!("nystrom");
        nys["inducing_points"] = json!(60);
        let a = s.train(&fit(model, nys.clone())).await;
        let b = s.train(&fit(model, nys.clone())).await;
        nys["seed"] = json!(1);
        let c = s.train(&fit(model, nys)).await;
        let [pe, pa, pb, pc] = [&exact, &a, &b, &c].map(|m| m["id"].as_str().unwrap().to_string());
        let (pe, pa, pb, pc) = (
            predict(&s, &pe, q).await,
            predict(&s, &pa, q).await,
            predict(&s, &pb, q).await,
            predict(&s, &pc, q).await,
        );
        assert_eq!(pa, pb, "{model}: the same seed, the same inducing points and answers");
        assert_ne!(pa["predictions"], pc["predictions"], "{model}: another seed, other inducing points");
        assert!(rmse(&pa) <= 1.05 * rmse(&pe) + 1e-3, "{model}: nystrom {} vs exact {}", rmse(&pa), rmse(&pe));
    }
}

#[tokio::test]
async fn nystrom_models_survive_a_restart_bit_for_bit() {
    let dir = std::env::temp_dir().join(format!("mercer-nystrom-{}", uuid::Uuid::new_v4()));
    let config = Config { data_dir: dir.display().to_string(), ..Config::for_tests() };
    let (x, y) = rows(200);
    let q = &x[..7];
    let mut before = Vec::new();
    {
        let mut s = TestServer::start(config.clone()).await;
        s.service().wait_ready().await;
        for (model, params) in [
            ("gaussian_process", json!({"noise": 0.01, "normalize_y": true})),
            ("kernel_ridge", json!({"lambda": 0.1, "inducing_selection": "uniform"})),
            ("kernel_ridge", json!({"lambda": 0.1, "inducing_selection": "uniform", "solver": "cg"})),
            ("kernel_ridge", json!({"lambda": 0.1, "solver": "cg", "precision": "float32", "max_iter": 3})),
        ] {
            let mut params = params;
            params["approximation"] = json!("nystrom");
            params["inducing_points"] = json!(25);
            let m = s.train(&json!({"model": model, "params": params, "x": x, "y": y})).await;
            // Uniform selection names the training rows it drew (distinct, in order);
            // k-means centres are not rows.
            match m["training"]["inducing_indices"].as_array() {
                Some(rows) => {
                    let rows: Vec<u64> = rows.iter().map(|r| r.as_u64().unwrap()).collect();
                    assert_eq!(params["inducing_selection"], "uniform", "{m}");
                    assert_eq!(rows.len(), 25);
                    assert!(rows.windows(2).all(|w| w[0] < w[1]) && rows[24] < 200, "{rows:?}");
                }
                None => assert_eq!(m["params"]["inducing_selection"], Value::Null, "{m}"),
            }
            let id = m["id"].as_str().unwrap().to_string();
            before.push((id.clone(), m, predict(&s, &id, q).await));
        }
        assert!(s.server.take().unwrap().shutdown().await);
    }
    let s = TestServer::start(config).await;
    s.service().wait_ready().await;
    for (id, m, p) in before {
        let again: Value = s.get(&format!("/models/{id}")).await.json().await.unwrap();
        assert_eq!(again["training"], m["training"]);
        assert_eq!((again["params"].clone(), again["n_support"].clone()), (m["params"].clone(), json!(25)));
        assert_eq!(predict(&s, &id, q).await, p, "identical answers after the restart");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// Beyond the subset size the search runs on a seeded subset, the fit on every row; the
/// bound improves on the starting hyperparameters.
#[tokio::test]
async fn the_sparse_search_runs_on_a_subset_of_many_rows() {
    let s = TestServer::default().await;
    let n = mercer::estimator::gaussian_process::sparse::OPTIMIZE_SUBSET_ROWS + 500;
    let x: Vec<Vec<f64>> = (0..n).map(|i| vec![(i as f64 * 0.618_034).rem_euclid(10.0)]).collect();
    let y: Vec<f64> = x.iter().enumerate().map(|(i, r)| r[0].sin() + 0.1 * ((i as f64 * 0.7).sin())).collect();
    let base = json!({"model": "gaussian_process", "kernel": {"type": "rbf", "length_scale": 5.0},
                      "params": {"noise": 0.5, "approximation": "nystrom", "inducing_points": 15}, "x": x, "y": y});
    let fixed = s.train(&base).await;
    let mut search = base.clone();
    search["params"]["optimize"] = json!(true);
    let m = s.train(&search).await;
    let t = &m["training"];
    assert_eq!(
        t["optimized_on_rows"].as_u64(),
        Some(mercer::estimator::gaussian_process::sparse::OPTIMIZE_SUBSET_ROWS as u64)
    );
    assert_eq!((m["n_train"].as_u64(), t["approximation"].as_str()), (Some(n as u64), Some("nystrom")));
    assert!(t["iterations"].as_u64().unwrap() > 0, "{t}");
    let (b0, b1) =
        (fixed["training"]["evidence_lower_bound"].as_f64().unwrap(), t["evidence_lower_bound"].as_f64().unwrap());
    assert!(b1 > b0 + 100.0, "the search improves the bound on all rows: {b0} -> {b1}");
    assert!(m["params"]["noise"].as_f64().unwrap() < 0.1, "{}", m["params"]);
}

/// A long fit shows its progress while training, and a DELETE stops it.
#[tokio::test]
async fn a_long_fit_reports_progress_and_stops_when_deleted() {
    let s = TestServer::default().await;
    let (x, y) = rows(60_000);
    let body = json!({"model": "gaussian_process", "params": {"noise": 0.1, "approximation": "nystrom", "optimize": true,
                      "restarts": 50, "inducing_points": 200}, "x": x, "y": y});
    let (id, seen) = start_and_watch(&s, &body, "optimize").await;
    let p = &seen["progress"];
    assert!(p["elapsed_ms"].as_f64().unwrap() > 0.0 && p["objective"].as_f64().unwrap().is_finite(), "{p}");
    delete_and_see_it_stop(&s, &id).await;
}

/// The conjugate-gradient solver through the API: the report and the echo, its progress
/// while training (phase `solve` with the relative residual as objective) and a DELETE
/// that stops it between row blocks, its errors at their pointers, and the memory check
/// that counts its preconditioner.
#[tokio::test]
async fn cg_fits_report_progress_errors_and_memory() {
    let s = TestServer::default().await;
    let (x, y) = rows(3000);
    let body = |params: Value| json!({"model": "kernel_ridge", "params": params, "x": x, "y": y});
    let m = s
        .train(&body(json!({"lambda": 0.01, "approximation": "nystrom", "inducing_points": 200,
                             "inducing_selection": "uniform", "solver": "cg", "precision": "float32"})))
        .await;
    let t = &m["training"];
    assert_eq!((t["solver"].as_str(), t["converged"].as_bool()), (Some("cg"), Some(true)), "{t}");
    assert!(t["iterations"].as_u64().unwrap() >= 2 && t["residual"].as_f64().unwrap() <= 1e-8, "{t}");
    assert_eq!(
        (&m["params"]["solver"], &m["params"]["max_iter"], &m["params"]["tol"], &m["params"]["precision"]),
        (&json!("cg"), &json!(100), &json!(1e-8), &json!("float32"))
    );
    let d = s.train(&body(json!({"lambda": 0.01, "approximation": "nystrom", "inducing_points": 200}))).await;
    assert_eq!((d["training"]["solver"].as_str(), d["params"]["solver"].as_str()), (Some("direct"), Some("direct")));
    assert!(d["training"].get("residual").is_none() && d["params"].get("precision").is_none(), "{d}");
    for (params, at) in [
        (json!({"approximation": "exact", "solver": "cg"}), "/params/solver"),
        (json!({"solver": "cg"}), "/params/solver"),
        (json!({"approximation": "nystrom", "solver": "direct", "precision": "float32"}), "/params/precision"),
        (json!({"approximation": "nystrom", "max_iter": 0}), "/params/max_iter"),
        (json!({"approximation": "nystrom", "inducing_points": 60_000}), "/params/inducing_points"),
    ] {
        let (status, p) = problem(s.post("/models", &body(params.clone())).await).await;
        assert_eq!((status, pointers(&p)), (422, vec![at.to_string()]), "{params}: {p}");
    }
    let gp = json!({"model": "gaussian_process", "params": {"solver": "cg"}, "x": x, "y": y});
    let (status, p) = problem(s.post("/models", &gp).await).await;
    assert_eq!((status, pointers(&p)), (422, vec!["/params/solver".to_string()]), "{p}");
    // The preconditioner (M^2 x 8 bytes: 72 MB at M = 3000) counts against
    // MERCER_MAX_FIT_BYTES.
    let tight = TestServer::start(Config { max_fit_bytes: 60 << 20, ..Config::for_tests() }).await;
    let big = body(json!({"approximation": "nystrom", "inducing_points": 3000, "solver": "cg"}));
    let (status, p) = problem(tight.post("/models", &big).await).await;
    assert_eq!(status, 413, "{p}");

    // Progress, then DELETE: a tolerance it cannot reach and the iteration cap.
    let (x, y) = rows(40_000);
    let long = json!({"model": "kernel_ridge", "x": x, "y": y, "params": {"lambda": 1e-6, "approximation": "nystrom",
                      "inducing_points": 1500, "inducing_selection": "uniform", "solver": "cg",
                      "tol": 1e-300, "max_iter": 10000}});
    let (id, seen) = start_and_watch(&s, &long, "solve").await;
    let r = seen["progress"]["objective"].as_f64().unwrap();
    assert!(r > 0.0 && r < 1.0, "the relative residual: {}", seen["progress"]);
    delete_and_see_it_stop(&s, &id).await;
}

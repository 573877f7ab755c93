//! `GET /models/{id}?include=coefficients` against scikit-learn's fitted attributes:
//! `support_`, `dual_coef_` and `intercept_` of the SVM family (tests/fixtures/
//! generate_svm_family.py, sorted by row, and generate_coefficients.py, in scikit-learn's
//! own order), `offset_` of the one-class SVM as `training.rho`, kernel ridge's
//! `dual_coef_` and a Gaussian process's `alpha_` as `alpha`.

mod common;

use common::{close, TestServer};
use serde_json::{json, Value};

fn fixture(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(format!("tests/fixtures/{name}")).unwrap()).unwrap()
}

async fn coefficients(s: &TestServer, body: &Value) -> (Value, Value) {
    let m = s.train(body).await;
    let id = m["id"].as_str().unwrap();
    let r = s.get(&format!("/models/{id}?include=coefficients")).await;
    assert_eq!(r.status(), 200);
    let shown: Value = r.json().await.unwrap();
    (shown["coefficients"].clone(), shown)
}

/// scikit-learn's own order: support grouped by class, dual_coef and intercept as its
/// public attributes (a binary model's turned around), alpha per row (and per output).
#[tokio::test]
async fn coefficients_are_scikit_learns_attributes() {
    let s = TestServer::default().await;
    for case in fixture("coefficients_reference.json")["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let expect = &case["expect"];
        let (c, shown) = coefficients(&s, &case["body"]).await;
        assert!(c.is_object(), "{name}: {shown}");
        if let Some(support) = expect.get("support") {
            assert_eq!(&c["support"], support, "{name}: support");
            close(&c["dual_coef"], &expect["dual_coef"], 1e-6, &format!("{name}: dual_coef"));
            close(&c["intercept"], &expect["intercept"], 1e-6, &format!("{name}: intercept"));
            assert_eq!(c.as_object().unwrap().len(), 3, "{name}: {c}");
        } else {
            // One list per row for two outputs, as scikit-learn's (n, t).
            assert_eq!(c["alpha"].as_array().unwrap()[0].is_array(), expect["alpha"][0].is_array(), "{name}");
            close(&c["alpha"], &expect["alpha"], 1e-8, &format!("{name}: alpha"));
            let n = case["body"]["x"].as_array().unwrap().len() as u64;
            assert_eq!(c["support"], json!((0..n).collect::<Vec<_>>()), "{name}: every row");
        }
        if let Some(offset) = expect.get("offset") {
            close(&shown["training"]["rho"], offset, 1e-6, &format!("{name}: rho is offset_"));
        }
    }
}

/// Every case of the SVM family's fixture: support, dual_coef (columns in row order) and
/// intercept, rows of sample weight 0 numbered as training rows; kernel ridge's alpha on a
/// precomputed Gram.
#[tokio::test]
async fn the_svm_familys_coefficients_match_every_fixture_case() {
    let s = TestServer::default().await;
    for case in fixture("svm_family_reference.json")["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let expect = &case["expect"];
        if case["body"]["model"] == "kernel_pca" {
            let (c, _) = coefficients(&s, &case["body"]).await;
            assert!(c.is_null(), "{name}: kernel_pca has no coefficients: {c}");
            continue;
        }
        let (c, shown) = coefficients(&s, &case["body"]).await;
        if case["body"]["model"] == "kernel_ridge" {
            close(&c["alpha"], &expect["dual_coef"], 1e-8, &format!("{name}: alpha"));
            continue;
        }
        let support: Vec<u64> = serde_json::from_value(c["support"].clone()).unwrap();
        let mut order: Vec<usize> = (0..support.len()).collect();
        order.sort_by_key(|&i| support[i]);
        let sorted: Vec<u64> = order.iter().map(|&i| support[i]).collect();
        assert_eq!(json!(sorted), expect["support"], "{name}: support");
        let dual: Vec<Vec<f64>> = serde_json::from_value(c["dual_coef"].clone()).unwrap();
        let dual_sorted: Vec<Vec<f64>> = dual.iter().map(|row| order.iter().map(|&i| row[i]).collect()).collect();
        close(&json!(dual_sorted), &expect["dual_coef"], 1e-6, &format!("{name}: dual_coef"));
        close(&c["intercept"], &expect["intercept"], 1e-6, &format!("{name}: intercept"));
        assert_eq!(shown["n_support"], json!(support.len()), "{name}");
        if case["body"]["model"] == "one_class_svm" {
            let rho = shown["training"]["rho"].as_f64().unwrap();
            assert_eq!(rho, -c["intercept"][0].as_f64().unwrap(), "{name}: intercept is -rho");
        }
    }
}

/// Without the query nothing is added; an unknown include is 422 at `/include`; models
/// without coefficients ignore it; a nystrom kernel ridge shows the inducing rows' weights.
#[tokio::test]
async fn include_is_asked_for_and_checked() {
    let s = TestServer::default().await;
    let (x, y) = common::sine(40);
    let m = s.train(&json!({"model": "kernel_ridge", "x": x, "y": y})).await;
    let id = m["id"].as_str().unwrap();
    let plain: Value = s.get(&format!("/models/{id}")).await.json().await.unwrap();
    assert!(plain.get("coefficients").is_none(), "{plain}");
    let listed: Value = s.get("/models").await.json().await.unwrap();
    assert!(listed["models"][0].get("coefficients").is_none());

    let (status, p) = common::problem(s.get(&format!("/models/{id}?include=coefficients,weights")).await).await;
    assert_eq!(status, 422, "{p}");
    assert_eq!(common::pointers(&p), vec!["/include"]);
    // Repeated, or among other parameters: still read.
    let again: Value =
        s.get(&format!("/models/{id}?include=coefficients&include=coefficients&x=1")).await.json().await.unwrap();
    assert!(again["coefficients"]["alpha"].is_array(), "{again}");
    let (status, p) = common::problem(s.get(&format!("/models/{id}?include=null&include=null")).await).await;
    assert_eq!((status, common::pointers(&p)), (422, vec!["/include".to_string()]), "{p}");

    let nw = s.train(&json!({"model": "nadaraya_watson", "x": x, "y": y})).await;
    let r: Value =
        s.get(&format!("/models/{}?include=coefficients", nw["id"].as_str().unwrap())).await.json().await.unwrap();
    assert!(r.get("coefficients").is_none(), "{r}");

    let body = json!({"model": "kernel_ridge", "x": x, "y": y,
        "params": {"approximation": "nystrom", "inducing_points": 8, "inducing_selection": "uniform"}});
    let (c, shown) = coefficients(&s, &body).await;
    assert_eq!(c["support"], shown["training"]["inducing_indices"], "{shown}");
    assert_eq!(c["alpha"].as_array().unwrap().len(), 8);
}

//! Model search over HTTP: fold scores, means and the best candidate against
//! scikit-learn's GridSearchCV / cross_val_score on the same folds
//! (tests/fixtures/generate_search.py writes search_reference.json), and the fold
//! assignments against scikit-learn's splitters.

mod common;

use common::TestServer;
use mercer::selection::Folds;
use serde_json::{json, Value};

fn fixtures() -> Value {
    serde_json::from_str(&std::fs::read_to_string("tests/fixtures/search_reference.json").unwrap()).unwrap()
}

/// Accuracy-like scores are ratios of counts: equal exactly. Continuous ones to 1e-9.
fn exact(scoring: &str) -> bool {
    scoring == "accuracy" || scoring == "balanced_accuracy"
}

fn same_number(got: &Value, want: &Value, exact: bool, what: &str) {
    let (g, w) = (got.as_f64().unwrap_or_else(|| panic!("{what}: {got}")), want.as_f64().unwrap());
    if exact {
        assert_eq!(g, w, "{what}");
    } else {
        assert!((g - w).abs() <= 1e-9 * w.abs().max(1e-12), "{what}: {g} vs {w}");
    }
}

fn same_values(got: &Value, want: &Value, what: &str) {
    let (g, w) = (got.as_object().unwrap(), want.as_object().unwrap());
    assert_eq!(g.keys().collect::<Vec<_>>(), w.keys().collect::<Vec<_>>(), "{what}: pointers in order");
    for (k, wv) in w {
        match wv.as_f64() {
            Some(x) => assert!((g[k].as_f64().unwrap() - x).abs() <= 1e-14 * x.abs(), "{what} {k}: {} vs {x}", g[k]),
            None => assert_eq!(&g[k], wv, "{what} {k}"),
        }
    }
}

/// Every case: each candidate's values, fold scores and mean, the best index and values,
/// and the refitted model's kernel and params holding the best values.
#[tokio::test]
async fn fold_scores_equal_scikit_learns() {
    let s = TestServer::default().await;
    let fx = fixtures();
    for case in fx["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let m = s.train(&case["body"]).await;
        let search = &m["training"]["search"];
        let scoring = case["body"]["search"]["scoring"].as_str().unwrap();
        assert_eq!(search["scoring"], scoring, "{name}");
        assert_eq!(search["method"], "grid", "{name}");
        let want = case["candidates"].as_array().unwrap();
        let got = search["candidates"].as_array().unwrap();
        assert_eq!((got.len(), search["n_candidates"].as_u64()), (want.len(), Some(want.len() as u64)), "{name}");
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            let what = format!("{name} candidate {i}");
            same_values(&g["values"], &w["values"], &what);
            let (gs, ws) = (g["fold_scores"].as_array().unwrap(), w["fold_scores"].as_array().unwrap());
            assert_eq!(gs.len(), ws.len(), "{what}");
            for (f, (a, b)) in gs.iter().zip(ws).enumerate() {
                same_number(a, b, exact(scoring), &format!("{what} fold {f}"));
            }
            same_number(&g["mean_score"], &w["mean_score"], false, &format!("{what} mean"));
            same_number(&g["std_score"], &w["std_score"], false, &format!("{what} std"));
            assert!(g["fit_ms"].as_f64().unwrap() >= 0.0);
        }
        assert_eq!(search["best_index"], case["best_index"], "{name}");
        same_values(&search["best_values"], &case["best_values"], name);
        same_number(&search["best_score"], &case["best_score"], false, name);
        // The refit holds the best values where the body's kernel and params do.
        for (pointer, value) in case["best_values"].as_object().unwrap() {
            let (root, rest) = pointer[1..].split_once('/').unwrap();
            let fitted = m[root].pointer(&format!("/{rest}")).unwrap_or_else(|| panic!("{name}: {pointer} in {m}"));
            match value.as_f64() {
                Some(x) => assert!((fitted.as_f64().unwrap() - x).abs() <= 1e-14 * x.abs(), "{name} {pointer}"),
                None => assert_eq!(fitted, value, "{name} {pointer}"),
            }
        }
        let k = case["folds"].as_array().unwrap().len();
        let cv = &case["body"]["search"]["cv"];
        let fits = if cv == "loo" { want.len() } else { want.len() * k };
        assert_eq!(search["n_fits"].as_u64(), Some(fits as u64), "{name}: closed-form loo counts one fit");
        assert_eq!(search["cv"], if cv == "loo" { json!("loo") } else { json!(k) }, "{name}");
    }
}

/// The held-out rows of every fold equal scikit-learn's KFold / StratifiedKFold /
/// PredefinedSplit / LeaveOneOut on the fixtures' data.
#[test]
fn folds_equal_scikit_learns() {
    let fx = fixtures();
    for case in fx["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let body = &case["body"];
        let n = body["x"].as_array().unwrap().len();
        let want: Vec<Vec<usize>> = serde_json::from_value(case["folds"].clone()).unwrap();
        let classifier = body["model"] != "kernel_ridge" && body["model"] != "gaussian_process";
        let folds = if let Some(f) = body["search"].get("folds") {
            let f: Vec<usize> = serde_json::from_value(f.clone()).unwrap();
            Folds::from_assignment(&f, f.iter().max().unwrap() + 1)
        } else if body["search"]["cv"] == "loo" {
            Folds::leave_one_out(n)
        } else {
            let k = body["search"]["cv"].as_u64().unwrap() as usize;
            if classifier {
                // Class indices in sorted label order, as mercer encodes them.
                let labels: Vec<String> = body["y"].as_array().unwrap().iter().map(|v| v.to_string()).collect();
                let mut sorted = labels.clone();
                sorted.sort();
                sorted.dedup();
                let y: Vec<usize> = labels.iter().map(|l| sorted.binary_search(l).unwrap()).collect();
                Folds::stratified(&y, k, None)
            } else {
                Folds::kfold(n, k, None)
            }
        };
        assert_eq!(folds.k(), want.len(), "{name}");
        for (f, rows) in want.iter().enumerate() {
            assert_eq!(folds.test(f), rows.as_slice(), "{name} fold {f}");
        }
    }
}

/// Halving fits fewer candidates on all the rows than the grid (and fewer rows in all)
/// and picks one of the grid's top three.
#[tokio::test]
async fn halving_fits_fewer_and_picks_near_the_top() {
    let s = TestServer::default().await;
    let fx = fixtures();
    for name in ["svc_c_gamma_accuracy", "krr_lambda_gamma_r2", "svc_multiclass"] {
        let case = fx["cases"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap();
        let mut body = case["body"].clone();
        body["search"]["method"] = json!("halving");
        let m = s.train(&body).await;
        let search = &m["training"]["search"];
        let want = case["candidates"].as_array().unwrap();
        let k = case["folds"].as_array().unwrap().len();
        let mut ranked: Vec<usize> = (0..want.len()).collect();
        ranked.sort_by(|&a, &b| {
            want[b]["mean_score"].as_f64().unwrap().partial_cmp(&want[a]["mean_score"].as_f64().unwrap()).unwrap()
        });
        let best = search["best_index"].as_u64().unwrap() as usize;
        // Within the top three: its grid mean at least the third best (ties count).
        let mean = |c: usize| want[c]["mean_score"].as_f64().unwrap();
        assert!(
            mean(best) >= mean(ranked[2]),
            "{name}: halving chose {best}, the grid's top three are {:?}",
            &ranked[..3]
        );
        let rounds: Vec<u64> =
            search["candidates"].as_array().unwrap().iter().map(|c| c["round"].as_u64().unwrap()).collect();
        let last = *rounds.iter().max().unwrap();
        assert_eq!(rounds[best], last, "{name}: the best comes from the last round");
        // Round r trains on a third of round r + 1's rows: in units of all rows, the
        // grid fits C of them; halving sum_r survivors_r / 3^(last - r).
        let survivors: Vec<usize> = (0..=last).map(|r| rounds.iter().filter(|&&q| q >= r).count()).collect();
        assert!(survivors[last as usize] < want.len(), "{name}: {survivors:?}");
        let rows: f64 =
            survivors.iter().enumerate().map(|(r, &s)| s as f64 / 3f64.powi((last as usize - r) as i32)).sum();
        assert!(rows < want.len() as f64, "{name}: {rows} full-fold equivalents against the grid's {}", want.len());
        assert_eq!(search["n_fits"].as_u64(), Some((survivors.iter().sum::<usize>() * k) as u64), "{name}");
        // The rounds: 1 + floor(log3 C), each keeping ceil(s / 3).
        let c = want.len();
        let mut expect_rounds = 1;
        while 3usize.pow(expect_rounds) <= c {
            expect_rounds += 1;
        }
        assert_eq!(last + 1, expect_rounds as u64, "{name}");
    }
}

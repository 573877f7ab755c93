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

/// Two noisy classes in two dimensions, seeded.
fn blobs(n: usize) -> (Vec<Vec<f64>>, Vec<u32>) {
    let mut s = 7u64;
    let mut u = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5
    };
    (0..n)
        .map(|i| {
            let c = (i % 2) as u32;
            let centre = if c == 0 { -0.6 } else { 0.6 };
            (vec![centre + u(), centre * 0.5 + u()], c)
        })
        .unzip()
}

async fn refused(s: &TestServer, body: &Value) -> (u16, Vec<String>) {
    let r = s.post("/models", body).await;
    let (status, p) = common::problem(r).await;
    (status, common::pointers(&p))
}

/// Bad searches answer 400 or 422 naming the place, never 500, and nothing is queued.
#[tokio::test]
async fn bad_searches_name_their_place() {
    let mut config = mercer::config::Config::for_tests();
    config.max_search_fits = 100;
    let s = TestServer::start(config).await;
    let (x, y) = blobs(40);
    let (rx, ry) = common::sine(30);
    let svm = |search: Value| json!({"model": "svm", "kernel": {"type": "rbf", "gamma": 1.0}, "x": x, "y": y, "search": search});
    let krr = |search: Value| json!({"model": "kernel_ridge", "x": rx, "y": ry, "search": search});
    let three: Vec<u32> = (0..40).map(|i| i % 3).collect();
    let cases: Vec<(Value, u16, &str)> = vec![
        (svm(json!({"space": {"/params/foo": [1]}})), 422, "/search/space/~1params~1foo"),
        (svm(json!({"space": {"/params/c": [1, -1]}})), 422, "/search/space/~1params~1c/1"),
        (svm(json!({"space": {"/params/c": [1, "x"]}})), 422, "/search/space/~1params~1c/1"),
        (svm(json!({"space": {"/x/c": [1]}})), 422, "/search/space/~1x~1c"),
        (svm(json!({"space": {"/kernel/kernels/0/gamma": [1]}})), 422, "/search/space/~1kernel~1kernels~10~1gamma"),
        (svm(json!({"space": {"/kernel": [{"type": "rbf"}], "/kernel/gamma": [1]}})), 422, "/search/space/~1kernel"),
        (
            svm(json!({"space": {"/kernel/gamma": {"log_uniform": [0.1, 1]}}})),
            422,
            "/search/space/~1kernel~1gamma/log_uniform",
        ),
        (svm(json!({"space": {"/params/c": [1]}, "scoring": "r2"})), 422, "/search/scoring"),
        (svm(json!({"space": {"/params/c": [1]}, "scoring": "neg_log_loss"})), 422, "/search/scoring"),
        (svm(json!({"space": {"/params/c": [1]}, "scoring": "nope"})), 422, "/search/scoring"),
        (svm(json!({"space": {"/params/c": [1]}, "cv": 0})), 422, "/search/cv"),
        (svm(json!({"space": {"/params/c": [1]}, "cv": 21})), 422, "/search/cv"),
        (svm(json!({"space": {"/params/c": [1]}, "folds": [0, 1]})), 422, "/search/folds"),
        (svm(json!({"space": {"/params/c": [1]}, "folds": vec![0; 40]})), 422, "/search/folds"),
        (svm(json!({"space": {"/params/c": [1]}, "folds": [0, -1]})), 400, "/search/folds/1"),
        (svm(json!({"space": {"/params/c": {"log_grid": [1, 2, 30]}}, "cv": 4})), 422, "/search"),
        (svm(json!({"space": {"/params/c": [1]}, "method": "annealing"})), 422, "/search/method"),
        (svm(json!({"space": {"/params/c": [1]}, "shuffle": "yes"})), 400, "/search/shuffle"),
        (svm(json!({"space": {"/params/c": [1]}, "extra": 1})), 400, "/search/extra"),
        (svm(json!({"cv": 3})), 400, "/search/space"),
        (svm(json!([1])), 400, "/search"),
        (krr(json!({"space": {"/params/lambda": [1]}, "scoring": "accuracy"})), 422, "/search/scoring"),
        (
            krr(json!({"space": {"/params/lambda": [1]}, "scoring": "mean_log_predictive_density"})),
            422,
            "/search/scoring",
        ),
        (krr(json!({"space": {"/params/lambda": [1, -2]}})), 422, "/search/space/~1params~1lambda/1"),
        (
            json!({"model": "kernel_ridge", "params": {"approximation": "nystrom"}, "x": rx, "y": ry,
                   "search": {"space": {"/params/inducing_points": [5, 50]}, "cv": 2}}),
            422,
            "/search/space/~1params~1inducing_points/1",
        ),
        (
            json!({"model": "svm", "x": x, "y": three, "search": {"space": {"/params/c": [1]}, "scoring": "roc_auc"}}),
            422,
            "/search/scoring",
        ),
        (
            json!({"model": "svm", "x": x, "y": (0..40).collect::<Vec<u32>>(), "search": {"space": {"/params/c": [1]}, "cv": 2}}),
            422,
            "/search/cv",
        ),
        // The body's own params are checked where nothing searched replaces them.
        (
            json!({"model": "svm", "params": {"tol": -1}, "x": x, "y": y, "search": {"space": {"/params/c": [1]}}}),
            422,
            "/params/tol",
        ),
    ];
    for (body, status, pointer) in cases {
        let got = refused(&s, &body).await;
        assert_eq!(got, (status, vec![pointer.to_string()]), "{}", body["search"]);
    }
    let models: Value = s.get("/models").await.json().await.unwrap();
    assert_eq!(models["models"].as_array().unwrap().len(), 0, "nothing was kept");
}

/// Any model, kernel form, approximation and row kind can be searched: a whole kernel, a
/// nested length scale, the approximation, string and set kernels' parameters, every
/// model kind, rows from a dataset, random draws.
#[tokio::test]
async fn any_model_and_any_hyperparameter_can_be_searched() {
    let s = TestServer::default().await;
    let (x, y) = blobs(60);
    let (rx, ry) = common::sine(48);
    let texts: Vec<String> = (0..30)
        .map(|i| if i % 2 == 0 { format!("ab{}ab", "c".repeat(i % 5)) } else { format!("xy{}yx", "z".repeat(i % 4)) })
        .collect();
    let tokens: Vec<Vec<String>> =
        (0..30)
            .map(|i| {
                if i % 2 == 0 {
                    vec!["a".into(), format!("t{}", i % 3)]
                } else {
                    vec!["b".into(), format!("u{}", i % 4)]
                }
            })
            .collect();
    let labels: Vec<u32> = (0..30).map(|i| (i % 2) as u32).collect();
    let sum = json!({"type": "sum", "kernels": [{"type": "rbf", "length_scale": 1.0}, {"type": "linear"}]});
    let cases = vec![
        (
            json!({"model": "kernel_ridge", "x": rx, "y": ry}),
            json!({"/kernel": [{"type": "rbf"}, {"type": "matern", "nu": 2.5}, sum]}),
            3,
        ),
        (
            json!({"model": "kernel_ridge", "kernel": sum, "x": rx, "y": ry}),
            json!({"/kernel/kernels/0/length_scale": {"grid": [0.5, 2, 4]}}),
            4,
        ),
        (
            json!({"model": "kernel_ridge", "params": {"inducing_points": 8}, "x": rx, "y": ry}),
            json!({"/params/approximation": ["exact", "nystrom"], "/params/lambda": [0.01, 0.1]}),
            4,
        ),
        (
            json!({"model": "gaussian_process", "kernel": {"type": "matern"}, "params": {"optimize": true}, "x": rx, "y": ry}),
            json!({"/kernel/nu": [0.5, 2.5]}),
            2,
        ),
        (
            json!({"model": "gaussian_process", "params": {"approximation": "nystrom", "inducing_points": 10}, "x": rx, "y": ry}),
            json!({"/params/noise": {"log_grid": [1e-3, 1e-1, 3]}}),
            3,
        ),
        (json!({"model": "gp_classifier", "x": x, "y": y}), json!({"/kernel/length_scale": [0.5, 2.0]}), 2),
        (json!({"model": "kernel_perceptron", "x": x, "y": y}), json!({"/params/max_epochs": [1, 5]}), 2),
        (json!({"model": "kernel_logistic", "x": x, "y": y}), json!({"/params/lambda": [0.1, 1.0]}), 2),
        (json!({"model": "nadaraya_watson", "x": rx, "y": ry}), json!({"/kernel/length_scale": [0.2, 1.0]}), 2),
        (
            json!({"model": "rbf_network", "params": {"lambda": 0.01}, "x": rx, "y": ry}),
            json!({"/params/centers": [5, 20], "/kernel/length_scale": [0.5, 1.0]}),
            4,
        ),
        (
            json!({"model": "svm", "kernel": {"type": "subsequence"}, "x": texts, "y": labels}),
            json!({"/kernel/decay": [0.3, 0.8], "/kernel/length": [1, 2]}),
            4,
        ),
        (
            json!({"model": "svm", "kernel": {"type": "set"}, "x": tokens, "y": labels}),
            json!({"/kernel/measure": ["jaccard", "intersection"]}),
            2,
        ),
        (json!({"model": "svm", "params": {"probability": true}, "x": x, "y": y}), json!({"/params/c": [0.5, 5.0]}), 2),
    ];
    for (mut body, space, n) in cases {
        body["search"] = json!({"space": space, "cv": 3});
        if body["params"]["probability"] == true {
            body["search"]["scoring"] = json!("neg_log_loss");
        }
        let m = s.train(&body).await;
        let search = &m["training"]["search"];
        assert_eq!(search["n_candidates"], n, "{}: {search}", body["model"]);
        let best = search["best_index"].as_u64().unwrap() as usize;
        assert_eq!(search["candidates"][best]["values"], search["best_values"]);
        assert!(search["best_score"].is_number(), "{search}");
        for (pointer, value) in search["best_values"].as_object().unwrap() {
            let (root, rest) = pointer[1..].split_once('/').unwrap_or((&pointer[1..], ""));
            let fitted = if rest.is_empty() { &m[root] } else { m[root].pointer(&format!("/{rest}")).unwrap() };
            if value.is_object() {
                assert_eq!(fitted["type"], value["type"], "{pointer}");
            } else if !(m["params"]["optimize"] == true && root == "kernel") {
                assert_eq!(fitted, value, "{}: {pointer} of the refit", body["model"]);
            }
        }
    }
    // Random draws, rows from a stored dataset.
    let csv: String = std::iter::once("a,b,y\n".to_string())
        .chain(rx.iter().zip(&ry).map(|(r, t)| format!("{},{},{}\n", r[0], r[0] * r[0], t)))
        .collect();
    let d: Value = s.post_raw("/datasets", csv, "text/csv").await.json().await.unwrap();
    let body = json!({"model": "kernel_ridge", "dataset": d["id"], "search": {"method": "random", "candidates": 7, "seed": 3,
        "space": {"/params/lambda": {"log_uniform": [1e-3, 1.0]}, "/kernel/length_scale": [0.5, 1.0, 2.0]}}});
    let m = s.train(&body).await;
    let search = &m["training"]["search"];
    assert_eq!((search["method"].as_str(), search["n_candidates"].as_u64()), (Some("random"), Some(7)));
    for c in search["candidates"].as_array().unwrap() {
        let l = c["values"]["/params/lambda"].as_f64().unwrap();
        assert!((1e-3..=1.0).contains(&l), "{c}");
    }
    let again = s.train(&body).await;
    let strip = |v: &Value| -> Vec<Value> {
        v["candidates"].as_array().unwrap().iter().map(|c| json!([c["values"], c["fold_scores"]])).collect()
    };
    assert_eq!(strip(&again["training"]["search"]), strip(search), "seeded draws repeat");
}

/// Leave-one-out for a model without a closed form: n folds, scored over all n held-out
/// predictions at once, equal to fitting without each row through the API.
#[tokio::test]
async fn loo_without_a_closed_form_pools_n_refits() {
    let s = TestServer::default().await;
    let (x, y) = blobs(16);
    let body = json!({"model": "svm", "kernel": {"type": "rbf", "gamma": 0.7}, "x": x, "y": y,
                      "search": {"space": {"/params/c": [0.3, 3.0]}, "cv": "loo"}});
    let m = s.train(&body).await;
    let search = &m["training"]["search"];
    assert_eq!((search["cv"].as_str(), search["n_fits"].as_u64()), (Some("loo"), Some(32)));
    for (k, c) in [0.3, 3.0].iter().enumerate() {
        let mut right = 0;
        for i in 0..16 {
            let rows: Vec<usize> = (0..16).filter(|&j| j != i).collect();
            let fold = json!({"model": "svm", "kernel": {"type": "rbf", "gamma": 0.7}, "params": {"c": c},
                              "x": rows.iter().map(|&j| &x[j]).collect::<Vec<_>>(), "y": rows.iter().map(|&j| y[j]).collect::<Vec<_>>()});
            let fitted = s.train(&fold).await;
            let p: Value = s
                .post(&format!("/models/{}/predict", fitted["id"].as_str().unwrap()), &json!({"x": [x[i]]}))
                .await
                .json()
                .await
                .unwrap();
            right += usize::from(p["predictions"][0] == y[i]);
        }
        let scores = &search["candidates"][k]["fold_scores"];
        assert_eq!(scores, &json!([right as f64 / 16.0]), "c = {c}");
    }
}

/// While a search runs its progress says so (phase, fold fits done of planned), and a
/// DELETE stops it; the metrics count it.
#[tokio::test]
async fn a_search_reports_progress_and_stops_when_deleted() {
    let s = TestServer::default().await;
    let (x, y) = blobs(400);
    let body = json!({"model": "svm", "kernel": {"type": "rbf"}, "x": x, "y": y, "search": {
        "space": {"/params/c": {"log_grid": [1e-2, 1e4, 40]}, "/kernel/gamma": {"log_grid": [1e-3, 1e2, 40]}}, "cv": 5}});
    let r = s.http.post(s.url("/models?wait=false")).body(body.to_string()).send().await.unwrap();
    assert_eq!(r.status(), 202);
    let id = r.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_string();
    let seen = tokio::time::timeout(std::time::Duration::from_secs(120), async {
        loop {
            let m: Value = s.get(&format!("/models/{id}")).await.json().await.unwrap();
            if m["status"] == "training"
                && m["progress"]["phase"] == "search"
                && m["progress"]["iteration"].as_u64() > Some(0)
            {
                return m;
            }
            assert!(matches!(m["status"].as_str(), Some("queued" | "training")), "{m}");
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the search starts");
    assert_eq!(seen["progress"]["total"], 8000, "{}", seen["progress"]);
    assert_eq!(seen["kernel"], json!({"type": "rbf"}), "the body's kernel while searching");
    assert_eq!(s.delete(&format!("/models/{id}")).await.status(), 204);
    let pool = s.service().pool.clone();
    tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while pool.running() > 0 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the deleted search stops");
    assert_eq!(s.get(&format!("/models/{id}")).await.status(), 404);
    let metrics = s.get("/metrics").await.text().await.unwrap();
    assert!(metrics.contains(r#"mercer_searches_total{model="svm",outcome="cancelled"} 1"#), "{metrics}");
    // A finished search counts its fold fits.
    let small =
        json!({"model": "svm", "x": x[..40], "y": y[..40], "search": {"space": {"/params/c": [1, 2]}, "cv": 2}});
    s.train(&small).await;
    let metrics = s.get("/metrics").await.text().await.unwrap();
    assert!(metrics.contains(r#"mercer_searches_total{model="svm",outcome="ready"} 1"#), "{metrics}");
    let fits: u64 = metrics
        .lines()
        .find(|l| l.starts_with(r#"mercer_search_fits_total{model="svm"}"#))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!(fits >= 4 + seen["progress"]["iteration"].as_u64().unwrap(), "{fits}");
}

/// Every candidate failing is a 422 fit-failed problem naming the first failure.
#[tokio::test]
async fn a_search_where_every_candidate_fails_is_422() {
    let s = TestServer::default().await;
    let (x, y) = common::sine(12);
    // rbf_network with more centres than a fold's training rows fails in every fold.
    let body =
        json!({"model": "rbf_network", "x": x, "y": y, "search": {"space": {"/params/centers": [10, 11]}, "cv": 3}});
    let (status, p) = common::problem(s.post("/models", &body).await).await;
    assert_eq!((status, p["type"].as_str()), (422, Some("/problems/fit-failed")), "{p}");
    assert!(p["detail"].as_str().unwrap().contains("candidate 0"), "{p}");
}

/// On rows sorted by class, halving's early rounds draw each fold's rows at random with
/// the seed, stratified by class, as HalvingGridSearchCV resamples, instead of taking the
/// first rows (one class, so every first-round fit failed): every candidate of every
/// round scores, and the same seed gives the same search.
#[tokio::test]
async fn halving_on_rows_sorted_by_class_scores_every_round() {
    let s = TestServer::default().await;
    let (x, y) = blobs(90);
    let mut rows: Vec<(Vec<f64>, u32)> = x.into_iter().zip(y).collect();
    rows.sort_by_key(|(_, c)| *c);
    let (x, y): (Vec<Vec<f64>>, Vec<u32>) = rows.into_iter().unzip();
    let body = json!({"model": "svm", "kernel": {"type": "rbf"}, "x": x, "y": y,
        "search": {"method": "halving", "cv": 3, "seed": 5,
                   "space": {"/params/c": [0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30, 100]}}});
    let m = s.train(&body).await;
    let search = &m["training"]["search"];
    let candidates = search["candidates"].as_array().unwrap();
    // Each candidate reports its last round: 9 in round 0, 3 go on, 1 to round 2.
    let last: Vec<u64> = candidates.iter().map(|c| c["round"].as_u64().unwrap()).collect();
    assert_eq!((last.len(), last.iter().filter(|&&r| r == 0).count(), last.iter().max()), (9, 6, Some(&2)));
    for c in candidates {
        assert!(c["mean_score"].is_number(), "round {} unscored: {c}", c["round"]);
    }
    let again = s.train(&body).await;
    let scores = |m: &Value| -> Vec<Value> {
        m["training"]["search"]["candidates"].as_array().unwrap().iter().map(|c| c["fold_scores"].clone()).collect()
    };
    assert_eq!(scores(&again), scores(&m), "the same seed draws the same rows");
}

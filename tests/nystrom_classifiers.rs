//! `svm` and `kernel_logistic` with `approximation: nystrom` against scikit-learn's linear
//! models on the same Nystrom features: tests/fixtures/nystrom_classifiers_reference.json
//! (tests/fixtures/generate_nystrom_classifiers.py: LinearSVC(loss="hinge", dual=True,
//! intercept_scaling=1) and LogisticRegression(C = 1 / lambda) on phi = L^-1 k_M(x), with
//! the inducing rows mercer's uniform selection draws). Also: the logistic model with
//! M = n equals the exact one; features streamed in chunks give the cached fit's model;
//! a stored model predicts as the fitted one.

use mercer::estimator::kernel_logistic::nystrom as logistic;
use mercer::estimator::svm::nystrom as hinge;
use mercer::estimator::{
    ClassLabels, ClassificationSet, FitContext, FittedModel, KernelLogistic, ModelKind, ModelSpec, PredictOptions,
    Prediction, Svm, Target, TrainingData,
};
use mercer::kernel::{Kernel, Points};
use mercer::linalg::Parallelism;
use serde_json::{json, Value};

fn fixtures() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/nystrom_classifiers_reference.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn points(v: &Value) -> Points {
    let rows: Vec<Vec<f64>> = serde_json::from_value(v.clone()).unwrap();
    Points::from_rows(&rows)
}

fn numbers(v: &Value) -> Vec<f64> {
    match v {
        Value::Array(items) => items.iter().flat_map(numbers).collect(),
        Value::Number(n) => vec![n.as_f64().unwrap()],
        other => panic!("not numeric: {other}"),
    }
}

fn data(case: &Value) -> ClassificationSet {
    let targets: Vec<Target> = numbers(&case["y"]).into_iter().map(Target::Number).collect();
    let (classes, y) = ClassLabels::encode(&targets).unwrap();
    ClassificationSet { x: points(&case["x"]), y, classes }
}

/// The case's params with the approximation, M, seed and uniform selection, plus `extra`.
fn params(case: &Value, extra: Value) -> Value {
    let mut p = case["params"].clone();
    let obj = p.as_object_mut().unwrap();
    obj.insert("approximation".into(), json!("nystrom"));
    obj.insert("inducing_points".into(), case["inducing_points"].clone());
    obj.insert("inducing_selection".into(), json!("uniform"));
    obj.insert("seed".into(), case["seed"].clone());
    obj.extend(extra.as_object().unwrap().clone());
    p
}

fn fit(kind: ModelKind, case: &Value, extra: Value) -> FittedModel {
    let kernel = Kernel::from_json(&case["kernel"]).unwrap();
    let mut spec = ModelSpec::from_json(kind, kernel, Some(&params(case, extra))).unwrap();
    let d = data(case);
    spec.resolve_approximation(
        d.y.len(),
        2,
        mercer::estimator::Limits { exact_max_rows: 20_000, max_fit_bytes: u64::MAX },
    )
    .unwrap();
    spec.fit(&TrainingData::Classification(d), &FitContext::new(Parallelism::Parallel)).unwrap()
}

fn predict(model: &FittedModel, q: &Points) -> Prediction {
    model.predictor().predict(q, &PredictOptions::default(), Parallelism::Sequential)
}

/// Decision values as one flat row-major list (binary: one per row).
fn decision(p: &Prediction) -> Vec<f64> {
    match p.decision.as_ref().unwrap() {
        mercer::estimator::Decision::Binary(v) => v.clone(),
        mercer::estimator::Decision::PerClass(m) => m.transpose().as_slice().to_vec(),
    }
}

fn assert_close(case: &str, what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{case}: {what} length");
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!((a - b).abs() <= tol * b.abs().max(1.0), "{case}: {what}[{i}] = {a}, want {b}");
    }
}

#[test]
fn nystrom_svm_equals_linear_svc_on_the_same_features() {
    let fx = fixtures();
    for case in fx["svm"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let q = points(&case["xq"]);
        let tight = fit(ModelKind::Svm, case, json!({"tol": 1e-10, "max_iter": 1_000_000}));
        let report = tight.predictor().report();
        let indices: Vec<u64> = serde_json::from_value(case["inducing_indices"].clone()).unwrap();
        assert_eq!(report.inducing_indices.as_ref(), Some(&indices), "{name}: the inducing rows");
        assert_eq!(report.approximation.as_deref(), Some("nystrom"));
        assert_eq!(report.converged, Some(true), "{name}");
        assert_eq!(tight.predictor().n_support(), indices.len());
        // Both solvers stop at a projected-gradient tolerance of 1e-10: decision values
        // agree to well within 1e-6.
        assert_close(name, "decision values", &decision(&predict(&tight, &q)), &numbers(&case["decision_tight"]), 1e-6);
        let train = points(&case["x"]);
        let got = decision(&predict(&tight, &train));
        assert_close(name, "training decision values", &got, &numbers(&case["decision_train_tight"]), 1e-6);

        // The nystrom defaults (tol 0.1, max_iter 1000), as LIBLINEAR's: the two solvers
        // visit rows in different random orders, so they stop at different points within
        // the tolerance. Their predictions agree wherever scikit-learn's decision is not
        // within that tolerance of a tie.
        let loose = fit(ModelKind::Svm, case, json!({}));
        assert_eq!(loose.predictor().params_json()["tol"], json!(0.1));
        assert_eq!(loose.predictor().params_json()["max_iter"], json!(1000));
        let p = predict(&loose, &q);
        let want = numbers(&case["predict_loose"]);
        let sk = numbers(&case["decision_loose"]);
        let classes = (sk.len() / want.len()).max(1);
        let labels = loose.predictor().classes().unwrap().to_json();
        let mut compared = 0;
        for (r, &class) in p.classes.as_ref().unwrap().iter().enumerate() {
            let row = &sk[r * classes..(r + 1) * classes];
            let margin = if classes == 1 {
                row[0].abs()
            } else {
                let mut s = row.to_vec();
                s.sort_by(|a, b| b.total_cmp(a));
                s[0] - s[1]
            };
            if margin > 0.1 {
                compared += 1;
                assert_eq!(labels[class].as_f64().unwrap(), want[r], "{name}: prediction {r} (margin {margin})");
            }
        }
        assert!(compared >= 30, "{name}: only {compared} of 40 rows away from the boundary");
    }
}

#[test]
fn nystrom_logistic_equals_logistic_regression_on_the_same_features() {
    let fx = fixtures();
    for case in fx["logistic"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let q = points(&case["xq"]);
        let model = fit(ModelKind::KernelLogistic, case, json!({}));
        let indices: Vec<u64> = serde_json::from_value(case["inducing_indices"].clone()).unwrap();
        assert_eq!(model.predictor().report().inducing_indices.as_ref(), Some(&indices), "{name}");
        assert_eq!(model.predictor().report().converged, Some(true), "{name}");
        let p = predict(&model, &q);
        let probs = p.probabilities.as_ref().unwrap();
        let got: Vec<f64> = probs.transpose().as_slice().to_vec();
        // Newton stops at a gradient of 1e-9 n (as the exact model), lbfgs at 1e-12 (its
        // scaled gradient): parameters to about 1e-6, probabilities closer.
        assert_close(name, "probabilities", &got, &numbers(&case["probabilities"]), 1e-6);
        // scikit-learn's decision function is w'phi + b; mercer serves no logistic
        // decision, so compare the binary logit of the probabilities.
        if probs.ncols() == 2 {
            let logit: Vec<f64> = (0..probs.nrows()).map(|r| (probs[(r, 1)] / probs[(r, 0)]).ln()).collect();
            assert_close(name, "decision values", &logit, &numbers(&case["decision"]), 1e-5);
        }
    }
}

/// With every training row an inducing point, the span is the exact model's: the same
/// optimum, so the same probabilities.
#[test]
fn nystrom_logistic_with_m_equal_n_is_the_exact_model() {
    let fx = fixtures();
    for case in fx["logistic"].as_array().unwrap() {
        let n = case["y"].as_array().unwrap().len();
        let q = points(&case["xq"]);
        let nystrom = fit(ModelKind::KernelLogistic, case, json!({"inducing_points": n}));
        let kernel = Kernel::from_json(&case["kernel"]).unwrap();
        let exact = ModelSpec::from_json(
            ModelKind::KernelLogistic,
            kernel,
            Some(&json!({"lambda": case["params"]["lambda"], "approximation": "exact"})),
        )
        .unwrap()
        .fit(&TrainingData::Classification(data(case)), &FitContext::sequential())
        .unwrap();
        let (a, b) = (predict(&nystrom, &q), predict(&exact, &q));
        assert_eq!(a.classes, b.classes);
        let (pa, pb) = (a.probabilities.unwrap(), b.probabilities.unwrap());
        assert!((pa - pb).amax() < 1e-7, "{}", case["name"]);
    }
}

/// Features recomputed chunk by chunk (a budget of a few hundred rows) reach the model
/// the cached features give, to the solvers' tolerance; and a stored model predicts bit
/// for bit as the fitted one.
#[test]
fn streamed_features_reach_the_cached_fit_and_models_survive_storage() {
    let fx = fixtures();
    let ctx = FitContext::new(Parallelism::Parallel);
    for case in fx["svm"].as_array().unwrap() {
        let kernel = Kernel::from_json(&case["kernel"]).unwrap();
        let p = params(case, json!({"tol": 1e-9, "max_iter": 1_000_000}));
        let spec = Svm::from_json(kernel, &p, "/params").unwrap();
        let d = data(case);
        let q = points(&case["xq"]);
        let m = case["inducing_points"].as_u64().unwrap() as usize;
        let cached = hinge::fit_with_budget(&spec, &d, usize::MAX, &ctx).unwrap();
        // 300 rows of (M + 1) features do not fit: chunks of 256 rows, then the rows in play.
        let streamed = hinge::fit_with_budget(&spec, &d, 8 * (m + 1) * 200, &ctx).unwrap();
        let (a, b) = (FittedModel::new(cached), FittedModel::new(streamed));
        assert_close(
            case["name"].as_str().unwrap(),
            "streamed",
            &decision(&predict(&b, &q)),
            &decision(&predict(&a, &q)),
            1e-6,
        );
        let restored = FittedModel::from_stored(a.to_stored()).unwrap();
        assert_eq!(predict(&restored, &q), predict(&a, &q));
        assert_eq!(restored.predictor().report(), a.predictor().report());
    }
    for case in fx["logistic"].as_array().unwrap() {
        let kernel = Kernel::from_json(&case["kernel"]).unwrap();
        let spec = KernelLogistic::from_json(kernel, &params(case, json!({})), "/params").unwrap();
        let d = data(case);
        let q = points(&case["xq"]);
        let cached = logistic::fit_with_budget(&spec, &d, usize::MAX, &ctx).unwrap();
        let streamed = logistic::fit_with_budget(&spec, &d, 0, &ctx).unwrap();
        let (a, b) = (FittedModel::new(cached), FittedModel::new(streamed));
        let (pa, pb) = (predict(&a, &q).probabilities.unwrap(), predict(&b, &q).probabilities.unwrap());
        assert!((&pa - &pb).amax() < 1e-6, "{}: {}", case["name"], (pa - pb).amax());
        let restored = FittedModel::from_stored(a.to_stored()).unwrap();
        assert_eq!(predict(&restored, &q), predict(&a, &q));
    }
}

#[test]
fn nystrom_classifier_params_are_checked() {
    let kernel = mercer::kernel::default_kernel();
    let err = |kind, p: Value| ModelSpec::from_json(kind, kernel.clone(), Some(&p)).unwrap_err().pointer;
    assert_eq!(err(ModelKind::Svm, json!({"approximation": "nystrom", "probability": true})), "/params/probability");
    assert_eq!(err(ModelKind::Svm, json!({"approximation": "nystrom", "loo": true})), "/params/loo");
    assert_eq!(err(ModelKind::NuSvm, json!({"approximation": "nystrom"})), "/params/approximation");
    assert_eq!(err(ModelKind::KernelLogistic, json!({"inducing_selection": "grid"})), "/params/inducing_selection");
    // auto resolving to nystrom: probability refused then, and LIBLINEAR's defaults taken.
    let mut s = ModelSpec::from_json(ModelKind::Svm, kernel.clone(), Some(&json!({"probability": true}))).unwrap();
    assert_eq!(
        s.resolve_approximation(
            30_000,
            2,
            mercer::estimator::Limits { exact_max_rows: 20_000, max_fit_bytes: u64::MAX }
        )
        .unwrap_err()
        .pointer,
        "/params/probability"
    );
    let mut s = ModelSpec::from_json(ModelKind::Svm, kernel.clone(), Some(&json!({"tol": 0.01}))).unwrap();
    s.resolve_approximation(30_000, 2, mercer::estimator::Limits { exact_max_rows: 20_000, max_fit_bytes: u64::MAX })
        .unwrap();
    let p = s.params_json();
    assert_eq!((&p["approximation"], &p["tol"], &p["max_iter"]), (&json!("nystrom"), &json!(0.01), &json!(1000)));
    let mut s = ModelSpec::from_json(ModelKind::Svm, kernel, Some(&json!({}))).unwrap();
    s.resolve_approximation(500, 2, mercer::estimator::Limits { exact_max_rows: 20_000, max_fit_bytes: u64::MAX })
        .unwrap();
    let p = s.params_json();
    assert_eq!((&p["approximation"], &p["tol"], &p["max_iter"]), (&json!("exact"), &json!(0.001), &Value::Null));
}

/// A fit cancelled once its solver has started stops with `Cancelled` rather than
/// finishing: the svm at a tolerance it would take millions of epochs to reach, the
/// logistic model through its streamed Newton steps (cancelled from the progress, as a
/// DELETE does, at its first step).
#[test]
fn cancelled_fits_stop_inside_the_solver() {
    let fx = fixtures();
    let case = &fx["svm"][1];
    let kernel = Kernel::from_json(&case["kernel"]).unwrap();
    let d = data(case);
    let cancel_at_first_step = |fit: &(dyn Fn(&FitContext) -> Result<(), mercer::estimator::FitError> + Sync)| {
        let ctx = FitContext::new(Parallelism::Sequential);
        let watcher = {
            let (progress, cancel) = (ctx.progress.clone(), ctx.cancel.clone());
            std::thread::spawn(move || loop {
                let p = progress.snapshot();
                if p.phase == "solve" && p.iteration >= 1 {
                    cancel.cancel();
                    return;
                }
                std::thread::yield_now();
            })
        };
        let out = fit(&ctx);
        watcher.join().unwrap();
        assert!(
            matches!(out, Err(mercer::estimator::FitError::Cancelled)),
            "not stopped by the cancel: {:?}",
            out.err()
        );
    };
    let svm = Svm::from_json(kernel.clone(), &params(case, json!({"tol": 1e-300, "max_iter": 100_000_000})), "/params")
        .unwrap();
    cancel_at_first_step(&|ctx| hinge::fit_with_budget(&svm, &d, 8 * 51 * 200, ctx).map(drop));
    let p = json!({"lambda": 1e-9, "max_iter": 10_000, "approximation": "nystrom", "inducing_points": 50});
    let logistic = KernelLogistic::from_json(kernel, &p, "/params").unwrap();
    cancel_at_first_step(&|ctx| logistic::fit_with_budget(&logistic, &d, 0, ctx).map(drop));
}

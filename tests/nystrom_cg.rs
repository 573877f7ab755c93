//! Nystrom kernel ridge by preconditioned conjugate gradients (`solver: "cg"`) against the
//! direct solution of the same system computed with numpy from the same inducing rows:
//! tests/fixtures/nystrom_cg_reference.json (tests/fixtures/generate_nystrom_cg.py; rbf,
//! matern 2.5 and 1.5, laplacian, sample weights, a 2-D y). Also: M = n at the training
//! rows equals exact kernel ridge; float32 agrees with float64; `max_iter: 1` stops
//! unconverged with finite predictions; a cancel stops the iterations; the params'
//! errors sit at their pointers.

use mercer::estimator::{
    FitContext, FitError, FittedModel, ModelKind, ModelSpec, PredictOptions, TrainingData, TrainingSet,
};
use mercer::kernel::{Kernel, Points};
use mercer::linalg::Parallelism;
use serde_json::{json, Value};

fn fixtures() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/nystrom_cg_reference.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn points(v: &Value) -> Points {
    let rows: Vec<Vec<f64>> = serde_json::from_value(v.clone()).unwrap();
    Points::from_rows(&rows)
}

/// y as given (a list, or rows of outputs) as a training set over `x`.
fn training_set(x: Points, y: &Value) -> TrainingSet {
    match &y[0] {
        Value::Array(first) => {
            let t = first.len();
            let rows: Vec<Vec<f64>> = serde_json::from_value(y.clone()).unwrap();
            let col_major: Vec<f64> = (0..t).flat_map(|k| rows.iter().map(move |r| r[k])).collect();
            TrainingSet::multi(x, col_major, t)
        }
        _ => TrainingSet::new(x, serde_json::from_value(y.clone()).unwrap()),
    }
}

/// Predictions row-major (one per row, or each row's outputs in turn, as served).
fn predict(model: &FittedModel, q: &Points) -> Vec<f64> {
    model.predictor().predict(q, &PredictOptions::default(), Parallelism::Sequential).values
}

fn flat(v: &Value) -> Vec<f64> {
    match v {
        Value::Array(items) => items.iter().flat_map(flat).collect(),
        Value::Number(n) => vec![n.as_f64().unwrap()],
        other => panic!("not numeric: {other}"),
    }
}

fn fit(kernel: &Value, params: Value, data: &TrainingSet, par: Parallelism) -> Result<FittedModel, FitError> {
    let kernel = Kernel::from_json(kernel).unwrap();
    let mut spec = ModelSpec::from_json(ModelKind::KernelRidge, kernel, Some(&params)).unwrap();
    spec.resolve_approximation(
        data.x.n(),
        data.x.d(),
        mercer::estimator::Limits { exact_max_rows: 20_000, max_fit_bytes: u64::MAX },
    )
    .unwrap();
    spec.fit(&TrainingData::Regression(data.clone()), &FitContext::new(par))
}

/// max |a - b| / max |b|.
fn relative_error(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    got.iter().zip(want).fold(0.0f64, |m, (a, b)| m.max((a - b).abs())) / scale
}

fn case_params(case: &Value, extra: Value) -> Value {
    let mut p = json!({
        "lambda": case["lambda"], "approximation": "nystrom", "inducing_points": case["inducing_points"],
        "inducing_selection": "uniform", "seed": case["seed"],
    });
    if !case["sample_weight"].is_null() {
        p["sample_weight"] = case["sample_weight"].clone();
    }
    p.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    p
}

#[test]
fn converged_cg_equals_the_direct_solution() {
    let fx = fixtures();
    let (x, q) = (points(&fx["x"]), points(&fx["x_query"]));
    for case in fx["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let data = training_set(x.clone(), &case["y"]);
        let want = flat(&case["prediction"]);
        for par in [Parallelism::Sequential, Parallelism::Parallel] {
            let model =
                fit(&case["kernel"], case_params(case, json!({"solver": "cg", "max_iter": 1000})), &data, par).unwrap();
            let report = model.predictor().report();
            assert_eq!(report.solver.as_deref(), Some("cg"), "{name}");
            assert_eq!(report.converged, Some(true), "{name}: {report:?}");
            assert!(report.residual.unwrap() <= 1e-8, "{name}: {report:?}");
            assert!(report.iterations.unwrap() >= 2 && report.iterations.unwrap() <= 100, "{name}: {report:?}");
            let indices: Vec<u64> = serde_json::from_value(case["inducing_indices"].clone()).unwrap();
            assert_eq!(report.inducing_indices.as_ref(), Some(&indices), "{name}: the fixture's inducing rows");
            let err = relative_error(&predict(&model, &q), &want);
            assert!(err <= 1e-6, "{name} ({par:?}): cg is {err:e} from numpy's direct solve");
        }
        // The direct solver of the same system, as a check on the fixture's reading.
        let direct =
            fit(&case["kernel"], case_params(case, json!({"solver": "direct"})), &data, Parallelism::Parallel).unwrap();
        assert_eq!(direct.predictor().report().solver.as_deref(), Some("direct"));
        let err = relative_error(&predict(&direct, &q), &want);
        assert!(err <= 1e-6, "{name}: direct is {err:e} from numpy");
    }
}

/// float32 blocks (rbf and matern natively, laplacian rounded from double), converged at
/// the default tol, agree with float64 (numpy's direct solution) to 1e-4 relative.
#[test]
fn float32_agrees_with_float64() {
    let fx = fixtures();
    let (x, q) = (points(&fx["x"]), points(&fx["x_query"]));
    for case in fx["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let data = training_set(x.clone(), &case["y"]);
        let single = fit(
            &case["kernel"],
            case_params(case, json!({"solver": "cg", "precision": "float32"})),
            &data,
            Parallelism::Parallel,
        )
        .unwrap();
        assert!(single.predictor().report().iterations.unwrap() >= 2, "{name}");
        let want = flat(&case["prediction"]);
        let err = relative_error(&predict(&single, &q), &want);
        assert!(err <= 1e-4, "{name}: float32 is {err:e} from float64");
    }
}

/// With M = n inducing points at the training rows the Nystrom system is the exact one:
/// cg equals exact kernel ridge.
#[test]
fn cg_with_every_row_equals_the_exact_fit() {
    let fx = fixtures();
    let all = points(&fx["x"]);
    let x = all.slice(0, 400);
    let q = points(&fx["x_query"]);
    let case = &fx["cases"][0];
    let y: Vec<f64> = flat(&case["y"])[..400].to_vec();
    let data = TrainingSet::new(x, y);
    let exact =
        fit(&case["kernel"], json!({"lambda": case["lambda"], "approximation": "exact"}), &data, Parallelism::Parallel)
            .unwrap();
    let params = json!({"lambda": case["lambda"], "approximation": "nystrom", "inducing_points": 400,
                        "inducing_selection": "uniform", "solver": "cg", "tol": 1e-12, "max_iter": 500});
    let cg = fit(&case["kernel"], params, &data, Parallelism::Parallel).unwrap();
    assert_eq!(cg.predictor().report().inducing_indices.as_ref().unwrap(), &(0..400).collect::<Vec<u64>>());
    let err = relative_error(&predict(&cg, &q), &predict(&exact, &q));
    assert!(err <= 1e-6, "M = n cg is {err:e} from the exact fit");
}

#[test]
fn one_iteration_is_reported_unconverged_with_finite_predictions() {
    let fx = fixtures();
    let (x, q) = (points(&fx["x"]), points(&fx["x_query"]));
    let case = &fx["cases"][0];
    let data = training_set(x, &case["y"]);
    let model =
        fit(&case["kernel"], case_params(case, json!({"solver": "cg", "max_iter": 1})), &data, Parallelism::Sequential)
            .unwrap();
    let r = model.predictor().report();
    assert_eq!((r.iterations, r.converged), (Some(1), Some(false)), "{r:?}");
    assert!(r.residual.unwrap() > 1e-8 && r.residual.unwrap() < 1.0, "{r:?}");
    let p = predict(&model, &q);
    assert!(p.iter().all(|v| v.is_finite()));
    // A stored model restores bit for bit.
    let restored = FittedModel::from_stored(model.to_stored()).unwrap();
    assert_eq!(predict(&restored, &q), p);
    assert_eq!(restored.predictor().report(), model.predictor().report());
}

/// A cancel once the iterations run stops the fit with `Cancelled`; without it, the
/// same fit (a tolerance it cannot reach, 10,000 iterations) would run for minutes.
#[test]
fn a_cancel_stops_the_iterations() {
    let fx = fixtures();
    let x = points(&fx["x"]);
    let case = &fx["cases"][0];
    let data = training_set(x, &case["y"]);
    let kernel = Kernel::from_json(&case["kernel"]).unwrap();
    let params = case_params(case, json!({"solver": "cg", "tol": 1e-300, "max_iter": 10000}));
    let mut spec = ModelSpec::from_json(ModelKind::KernelRidge, kernel, Some(&params)).unwrap();
    spec.resolve_approximation(
        data.x.n(),
        data.x.d(),
        mercer::estimator::Limits { exact_max_rows: 20_000, max_fit_bytes: u64::MAX },
    )
    .unwrap();
    let ctx = FitContext::new(Parallelism::Sequential);
    let watcher = {
        let (progress, cancel) = (ctx.progress.clone(), ctx.cancel.clone());
        std::thread::spawn(move || loop {
            let p = progress.snapshot();
            if p.phase == "solve" && p.iteration >= 3 {
                cancel.cancel();
                return p;
            }
            std::thread::yield_now();
        })
    };
    let out = spec.fit(&TrainingData::Regression(data), &ctx);
    let seen = watcher.join().unwrap();
    assert!(seen.objective.is_some_and(|r| r > 0.0 && r < 1.0), "the relative residual as objective: {seen:?}");
    assert!(matches!(out, Err(FitError::Cancelled)), "{:?}", out.map(|m| m.predictor().report().clone()));
    assert!(ctx.progress.snapshot().iteration < 10_000);
}

#[test]
fn solver_params_are_checked_at_their_pointers() {
    let k = mercer::kernel::default_kernel();
    let from = |kind, p: Value| ModelSpec::from_json(kind, k.clone(), Some(&p));
    let err = |kind, p: Value| from(kind, p).unwrap_err();
    for (p, at) in [
        (json!({"solver": "lsqr"}), "/params/solver"),
        (json!({"max_iter": 0}), "/params/max_iter"),
        (json!({"max_iter": 10001}), "/params/max_iter"),
        (json!({"tol": 0}), "/params/tol"),
        (json!({"tol": -1e-3}), "/params/tol"),
        (json!({"precision": "float16"}), "/params/precision"),
        (json!({"approximation": "exact", "solver": "cg"}), "/params/solver"),
        (json!({"approximation": "exact", "tol": 1e-3}), "/params/tol"),
        (json!({"inducing_points": 50_001}), "/params/inducing_points"),
    ] {
        let e = err(ModelKind::KernelRidge, p.clone());
        assert_eq!((e.pointer.as_str(), e.kind), (at, mercer::spec::ErrorKind::Invalid), "{p}");
    }
    // Models without these params: 422 at their pointer, not 400 as unknown fields.
    for (kind, p, at) in [
        (ModelKind::GaussianProcess, json!({"solver": "cg"}), "/params/solver"),
        (ModelKind::GaussianProcess, json!({"max_iter": 5}), "/params/max_iter"),
        (ModelKind::Svm, json!({"precision": "float32"}), "/params/precision"),
        (ModelKind::KernelLogistic, json!({"tol": 0.1}), "/params/tol"),
        (ModelKind::NadarayaWatson, json!({"tol": 0.1}), "/params/tol"),
    ] {
        let e = err(kind, p.clone());
        assert_eq!((e.pointer.as_str(), e.kind), (at, mercer::spec::ErrorKind::Invalid), "{kind:?} {p}");
    }
    // The svm family keeps its own max_iter and tol.
    from(ModelKind::Svm, json!({"max_iter": 5, "tol": 0.1})).unwrap();
    // auto resolving to exact: any of them is 422; explicit direct with precision too.
    let resolve = |p: Value, n: usize| {
        let mut s = from(ModelKind::KernelRidge, p).unwrap();
        s.resolve_approximation(n, 2, mercer::estimator::Limits { exact_max_rows: 20_000, max_fit_bytes: u64::MAX })
            .map(|_| s.params_json())
    };
    assert_eq!(resolve(json!({"max_iter": 5}), 100).unwrap_err().pointer, "/params/max_iter");
    assert_eq!(resolve(json!({"precision": "float32"}), 100).unwrap_err().pointer, "/params/precision");
    let e = resolve(json!({"approximation": "nystrom", "solver": "direct", "precision": "float32"}), 100).unwrap_err();
    assert_eq!(e.pointer, "/params/precision");
    // auto: cg above M = 4096, else direct (precision then ignored); the echo says which.
    let p = resolve(json!({"approximation": "nystrom", "precision": "float32"}), 5000).unwrap();
    assert_eq!(p["solver"], "direct");
    let p = resolve(json!({"approximation": "nystrom", "inducing_points": 4097}), 5000).unwrap();
    assert_eq!(
        (&p["solver"], &p["max_iter"], &p["tol"], &p["precision"]),
        (&json!("cg"), &json!(100), &json!(1e-8), &json!("float64"))
    );
    // auto resolving to nystrom (n above MERCER_EXACT_MAX_ROWS) takes them.
    let p = resolve(json!({"solver": "cg", "precision": "float32", "max_iter": 7}), 30_000).unwrap();
    assert_eq!(
        (&p["approximation"], &p["solver"], &p["max_iter"], &p["precision"]),
        (&json!("nystrom"), &json!("cg"), &json!(7), &json!("float32"))
    );
    // The echo reads back as the same spec.
    let again = from(ModelKind::KernelRidge, p.clone()).unwrap();
    assert_eq!(again.params_json(), p);
}

/// Where K_MM is near singular (200 inducing points on a 6 x 4 square, length scale 1),
/// float32 converges as float64 does: K_MM takes a floor of 1e-6 times its mean diagonal
/// in single precision (reported as jitter), without which the blocks' rounding along
/// K_MM's null directions stalled CG at a residual of 1e-2 after 100 iterations.
#[test]
fn float32_converges_where_kmm_is_near_singular() {
    let n = 3000;
    let x: Vec<Vec<f64>> =
        (0..n).map(|i| vec![(i as f64 * 0.618).rem_euclid(6.0), (i as f64 * 0.377).rem_euclid(4.0)]).collect();
    let y: Vec<f64> = x.iter().map(|r| r[0].sin() + 0.5 * r[1].cos()).collect();
    let data = TrainingSet::new(Points::from_rows(&x), y);
    let q = Points::from_rows(&x[..50]);
    let fit_with = |precision: &str| {
        let params = json!({"lambda": 0.01, "approximation": "nystrom", "inducing_points": 200,
                            "inducing_selection": "uniform", "solver": "cg", "precision": precision});
        fit(&json!({"type": "rbf", "length_scale": 1.0}), params, &data, Parallelism::Parallel).unwrap()
    };
    let (double, single) = (fit_with("float64"), fit_with("float32"));
    let (rd, rs) = (double.predictor().report(), single.predictor().report());
    assert_eq!((rd.converged, rs.converged), (Some(true), Some(true)), "{rd:?} {rs:?}");
    assert!(rs.iterations.unwrap() <= rd.iterations.unwrap() + 10, "{rd:?} {rs:?}");
    assert_eq!((rd.jitter, rs.jitter), (Some(0.0), Some(1e-6)));
    let err = relative_error(&predict(&single, &q), &predict(&double, &q));
    assert!(err <= 1e-3, "float32 is {err:e} from float64");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: 300,
        rng_seed: proptest::test_runner::RngSeed::Fixed(20_261_127),
        ..Default::default()
    })]

    /// Any JSON value under solver, max_iter, tol or precision, with any approximation:
    /// no panic; an error names one of the given keys' pointers (or approximation's);
    /// an accepted nystrom spec echoes params that read back as the same spec.
    #[test]
    fn solver_params_never_panic_and_echo_what_they_accept(
        values in proptest::collection::vec(value_strategy(), 4),
        given in proptest::collection::vec(proptest::bool::ANY, 4),
        approx in 0usize..3,
        n in 1usize..9000,
    ) {
        let names = ["solver", "max_iter", "tol", "precision"];
        let mut params = serde_json::Map::new();
        params.insert("approximation".into(), json!(["auto", "exact", "nystrom"][approx]));
        for ((name, value), g) in names.iter().zip(values).zip(&given) {
            if *g {
                params.insert((*name).into(), value);
            }
        }
        let params = Value::Object(params);
        let kernel = mercer::kernel::default_kernel();
        match ModelSpec::from_json(ModelKind::KernelRidge, kernel.clone(), Some(&params)) {
            Err(e) => proptest::prop_assert!(names.iter().any(|k| e.pointer == format!("/params/{k}")), "{params}: {e:?}"),
            Ok(mut spec) => match spec.resolve_approximation(n, 2, mercer::estimator::Limits { exact_max_rows: 5000, max_fit_bytes: u64::MAX }) {
                Err(e) => proptest::prop_assert!(
                    names.iter().chain(&["inducing_points"]).any(|k| e.pointer == format!("/params/{k}")),
                    "{params}: {e:?}"
                ),
                Ok(()) => {
                    let echo = spec.params_json();
                    let again = ModelSpec::from_json(ModelKind::KernelRidge, kernel, Some(&echo)).unwrap();
                    proptest::prop_assert_eq!(again.params_json(), echo);
                }
            },
        }
    }
}

/// Numbers of every kind, strings (valid names among them), booleans, null, arrays.
fn value_strategy() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    prop_oneof![
        Just(json!("cg")),
        Just(json!("direct")),
        Just(json!("auto")),
        Just(json!("float32")),
        Just(json!("float64")),
        "[a-z0-9]{0,8}".prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (0u64..20_000).prop_map(Value::from),
        any::<f64>().prop_filter("finite", |v| v.is_finite()).prop_map(Value::from),
        (-12i32..3).prop_map(|e| json!(10f64.powi(e))),
        any::<bool>().prop_map(Value::from),
        Just(Value::Null),
        Just(json!([1, 2])),
    ]
}

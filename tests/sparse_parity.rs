//! Nystrom kernel ridge and the sparse variational GP against independent references:
//! tests/fixtures/sparse_reference.json (tests/fixtures/generate_sparse.py: scikit-learn's
//! Nystroem + Ridge, GPflow's SGPR formulas in numpy, and central differences of the bound)
//! with the inducing points given, and the exact fits they must equal when M = n.

use mercer::estimator::gaussian_process::sparse::bound_and_gradient;
use mercer::estimator::{
    Estimator, FitContext, GaussianProcess, KernelRidge, PredictOptions, Predictor, SparseGpModel, TrainingSet,
};
use mercer::kernel::{Kernel, Points};
use mercer::linalg::Parallelism;
use serde_json::{json, Value};

fn fixtures() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/sparse_reference.json");
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

/// |got - want| <= rel * max(|want|, 1e-2 max|want|), entry by entry.
fn assert_close(case: &str, what: &str, got: &[f64], want: &[f64], rel: f64) {
    assert_eq!(got.len(), want.len(), "{case}: {what} length");
    let floor = 1e-2 * want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!((a - b).abs() <= rel * b.abs().max(floor).max(1e-300), "{case}: {what}[{i}] = {a}, want {b}");
    }
}

fn data(case: &Value) -> TrainingSet {
    TrainingSet::new(points(&case["x"]), numbers(&case["y"]))
}

fn gp_spec(case: &Value, extra: Value) -> GaussianProcess {
    let kernel = Kernel::from_json(&case["kernel"]).unwrap();
    let mut params = json!({"noise": case["noise"], "normalize_y": case["normalize_y"], "approximation": "nystrom"});
    params.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    GaussianProcess::from_json(kernel, &params, "/params").unwrap()
}

#[test]
fn nystrom_kernel_ridge_matches_nystroem_plus_ridge() {
    let fx = fixtures();
    for case in fx["nystrom_krr"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let kernel = Kernel::from_json(&case["kernel"]).unwrap();
        let spec = KernelRidge::from_json(
            kernel.clone(),
            &json!({"lambda": case["lambda"], "approximation": "nystrom"}),
            "/params",
        )
        .unwrap();
        let train = data(case);
        let q = points(&case["xq"]);
        for ctx in [FitContext::sequential(), FitContext::new(Parallelism::Parallel)] {
            let model = spec.fit_nystrom_at(points(&case["z"]), &train, &ctx).unwrap();
            let p = model.predict(&q, &PredictOptions::default(), Parallelism::Sequential);
            assert_close(name, "predictions", &p.values, &numbers(&case["predictions"]), 1e-8);
            let m = case["z"].as_array().unwrap().len();
            assert_eq!((model.n_support(), model.report().approximation.as_deref()), (m, Some("nystrom")));
        }
        if let Some(exact) = case.get("kernel_ridge_predictions") {
            // M = n inducing points at the training rows: the exact fit, to 1e-8.
            let model = spec.fit_nystrom_at(train.x.clone(), &train, &FitContext::sequential()).unwrap();
            let p = model.predict(&q, &PredictOptions::default(), Parallelism::Sequential);
            assert_close(name, "vs KernelRidge", &p.values, &numbers(exact), 1e-8);
            let exact_spec =
                KernelRidge::from_json(kernel, &json!({"lambda": case["lambda"], "approximation": "exact"}), "/params")
                    .unwrap();
            let ours = exact_spec.fit(&train, &FitContext::sequential()).unwrap();
            let e = ours.predict(&q, &PredictOptions::default(), Parallelism::Sequential);
            assert_close(name, "vs our exact fit", &p.values, &e.values, 1e-8);
        }
    }
}

#[test]
fn sparse_gp_bound_and_predictions_match_gpflows_formulas() {
    let fx = fixtures();
    for case in fx["sgpr"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let spec = gp_spec(case, json!({}));
        let train = data(case);
        let q = points(&case["xq"]);
        let model = SparseGpModel::fit_at(&spec, points(&case["z"]), &train, &FitContext::sequential()).unwrap();
        let bound = model.evidence_lower_bound();
        assert_close(name, "bound", &[bound], &[case["bound"].as_f64().unwrap()], 1e-9);
        assert!(bound <= case["exact_lml"].as_f64().unwrap() + 1e-9, "{name}: the bound is below the LML");
        let opts = PredictOptions { covariance: true, ..Default::default() };
        let p = model.predict(&q, &opts, Parallelism::Sequential);
        assert_close(name, "mean", &p.values, &numbers(&case["mean"]), 1e-8);
        assert_close(
            name,
            "covariance",
            p.covariance.as_ref().unwrap().as_slice(),
            &numbers(&case["covariance"]),
            1e-7,
        );
        let v = model.predict(&q, &PredictOptions::default(), Parallelism::Parallel);
        assert_close(name, "variance", v.variance.as_ref().unwrap(), &numbers(&case["variance"]), 1e-7);
        assert_close(name, "mean (blocked path)", &v.values, &p.values, 1e-12);
    }
}

/// The analytic gradient of the bound (kernel hyperparameters and log noise) against the
/// fixture's central differences, and against our own differences of our own bound.
#[test]
fn bound_gradient_matches_finite_differences() {
    let fx = fixtures();
    for case in fx["sgpr"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let spec = gp_spec(case, json!({}));
        let train = data(case);
        let (y_mean, y_std) = if spec.normalize_y {
            let n = train.y.len() as f64;
            let mean = train.y.iter().sum::<f64>() / n;
            (mean, (train.y.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt())
        } else {
            (0.0, 1.0)
        };
        let y = nalgebra::DMatrix::from_iterator(train.y.len(), 1, train.y.iter().map(|v| (v - y_mean) / y_std));
        let z = points(&case["z"]);
        let theta = spec.theta();
        assert_close(name, "theta", &theta, &numbers(&case["theta"]), 1e-12);
        let ctx = FitContext::sequential();
        let (bound, grad) = bound_and_gradient(&spec, &z, &train.x, &y, &ctx).unwrap();
        assert_close(name, "bound (search path)", &[bound], &[case["bound"].as_f64().unwrap()], 1e-9);
        let fd = numbers(&case["bound_gradient_fd"]);
        let scale = fd.iter().fold(1.0f64, |m, v| m.max(v.abs()));
        for (j, (g, f)) in grad.iter().zip(&fd).enumerate() {
            assert!((g - f).abs() <= 1e-6 * scale, "{name}: d/dtheta[{j}] = {g}, fixture's differences {f}");
            let h = 1e-5;
            let at = |d: f64| {
                let mut t = theta.clone();
                t[j] += d;
                bound_and_gradient(&spec.with_theta(&t), &z, &train.x, &y, &ctx).unwrap().0
            };
            let ours = (at(h) - at(-h)) / (2.0 * h);
            assert!((g - ours).abs() <= 1e-6 * scale, "{name}: d/dtheta[{j}] = {g}, our differences {ours}");
        }
    }
}

#[test]
fn the_bound_rises_to_the_exact_likelihood_as_m_grows() {
    let fx = fixtures();
    let series = &fx["sgpr_growing"];
    let spec = gp_spec(series, json!({}));
    let train = data(series);
    let exact = GaussianProcess::from_json(
        Kernel::from_json(&series["kernel"]).unwrap(),
        &json!({"noise": series["noise"]}),
        "/params",
    )
    .unwrap()
    .fit(&train, &FitContext::sequential())
    .unwrap()
    .log_marginal_likelihood();
    assert_close("growing", "exact LML", &[exact], &[series["exact_lml"].as_f64().unwrap()], 1e-9);
    let mut last = f64::NEG_INFINITY;
    for step in series["steps"].as_array().unwrap() {
        let model = SparseGpModel::fit_at(&spec, points(&step["z"]), &train, &FitContext::sequential()).unwrap();
        let b = model.evidence_lower_bound();
        assert_close("growing", "bound", &[b], &[step["bound"].as_f64().unwrap()], 1e-9);
        assert!(b >= last && b <= exact + 1e-9, "M = {}: {b} after {last}, exact {exact}", step["m"]);
        last = b;
    }
    assert!((last - exact).abs() <= 1e-8 * exact.abs(), "M = n: the bound is the LML");
}

/// With M = n inducing points at the training rows the sparse GP is the exact GP.
#[test]
fn sparse_gp_with_every_row_as_inducing_point_is_the_exact_gp() {
    let fx = fixtures();
    let case = fx["sgpr"].as_array().unwrap().iter().find(|c| c["name"].as_str().unwrap().contains("M=n")).unwrap();
    let spec = gp_spec(case, json!({"inducing_points": 60, "inducing_selection": "uniform"}));
    let train = data(case);
    let q = points(&case["xq"]);
    // Uniform selection of all n rows takes them in order: Z = X.
    let sparse = SparseGpModel::fit(&spec, &train, &FitContext::sequential()).unwrap();
    let mut exact_spec = spec.clone();
    exact_spec.approx.mode = mercer::estimator::approximation::Mode::Exact;
    let exact = exact_spec.fit(&train, &FitContext::sequential()).unwrap();
    let opts = PredictOptions { covariance: true, ..Default::default() };
    let (a, b) =
        (sparse.predict(&q, &opts, Parallelism::Sequential), exact.predict(&q, &opts, Parallelism::Sequential));
    assert_close("M=n", "mean", &a.values, &b.values, 1e-8);
    assert_close("M=n", "covariance", a.covariance.unwrap().as_slice(), b.covariance.unwrap().as_slice(), 1e-6);
    assert_close("M=n", "bound = LML", &[sparse.evidence_lower_bound()], &[exact.log_marginal_likelihood()], 1e-9);
}

/// A noise per row: the bound with every row as an inducing point is the exact GP's
/// likelihood with that noise (and the predictions its), and the bound's gradient with
/// respect to the kernel's hyperparameters matches central differences.
#[test]
fn a_noise_per_row_in_the_sparse_gp() {
    let fx = fixtures();
    let case = fx["sgpr"].as_array().unwrap().iter().find(|c| c["name"].as_str().unwrap().contains("M=n")).unwrap();
    let train = data(case);
    let n = train.y.len();
    let noise: Vec<f64> = (0..n).map(|i| 0.02 + 0.03 * (i % 5) as f64).collect();
    let spec = gp_spec(
        case,
        json!({"noise": noise, "inducing_points": n, "inducing_selection": "uniform", "approximation": "nystrom"}),
    );
    let q = points(&case["xq"]);
    let sparse = SparseGpModel::fit(&spec, &train, &FitContext::sequential()).unwrap();
    let mut exact_spec = spec.clone();
    exact_spec.approx.mode = mercer::estimator::approximation::Mode::Exact;
    let exact = exact_spec.fit(&train, &FitContext::sequential()).unwrap();
    let opts = PredictOptions { covariance: true, ..Default::default() };
    let (a, b) =
        (sparse.predict(&q, &opts, Parallelism::Sequential), exact.predict(&q, &opts, Parallelism::Sequential));
    assert_close("row noise M=n", "mean", &a.values, &b.values, 1e-8);
    assert_close(
        "row noise M=n",
        "covariance",
        a.covariance.unwrap().as_slice(),
        b.covariance.unwrap().as_slice(),
        1e-6,
    );
    assert_close(
        "row noise M=n",
        "bound = LML",
        &[sparse.evidence_lower_bound()],
        &[exact.log_marginal_likelihood()],
        1e-9,
    );
    // The gradient at fewer inducing points (the first 15 rows).
    let z = train.x.slice(0, 15);
    let y = train.y_matrix();
    let ctx = FitContext::sequential();
    let theta = spec.theta();
    assert_eq!(theta.len(), spec.kernel.theta().len(), "a noise per row is not searched");
    let (_, grad) = bound_and_gradient(&spec, &z, &train.x, &y, &ctx).unwrap();
    let scale = grad.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    for (j, g) in grad.iter().enumerate() {
        let h = 1e-5;
        let at = |d: f64| {
            let mut t = theta.clone();
            t[j] += d;
            bound_and_gradient(&spec.with_theta(&t), &z, &train.x, &y, &ctx).unwrap().0
        };
        let fd = (at(h) - at(-h)) / (2.0 * h);
        assert!((g - fd).abs() <= 1e-6 * scale, "d/dtheta[{j}] = {g}, central differences {fd}");
    }
}

/// Several outputs: the bound is the sum of each output's bound at the same
/// hyperparameters (one factorisation, t right-hand sides), and its gradient (kernel and
/// noise) matches central differences.
#[test]
fn the_multi_output_bound_sums_the_outputs_and_its_gradient_is_right() {
    use nalgebra::DMatrix;
    let n = 40;
    let x = Points::from_rows(&(0..n).map(|i| vec![i as f64 * 0.15, (i as f64 * 0.4).cos()]).collect::<Vec<_>>());
    let y = DMatrix::from_fn(n, 3, |i, k| ((i as f64) * 0.3 + k as f64).sin() * (1.0 + k as f64));
    let kernel = Kernel::from_json(
        &json!({"type": "scale", "factor": 1.2, "kernel": {"type": "rbf", "length_scale": [0.9, 1.4]}}),
    )
    .unwrap();
    let spec = GaussianProcess::from_json(kernel, &json!({"noise": 0.08}), "/params").unwrap();
    let z = x.slice(0, 12);
    let ctx = FitContext::sequential();
    let (bound, grad) = bound_and_gradient(&spec, &z, &x, &y, &ctx).unwrap();
    let mut sum = 0.0;
    let mut grad_sum = vec![0.0; grad.len()];
    for k in 0..3 {
        let yk = y.columns(k, 1).into_owned();
        let (b, g) = bound_and_gradient(&spec, &z, &x, &yk, &ctx).unwrap();
        sum += b;
        grad_sum.iter_mut().zip(g).for_each(|(a, v)| *a += v);
    }
    assert_close("three outputs", "bound", &[bound], &[sum], 1e-10);
    assert_close("three outputs", "gradient", &grad, &grad_sum, 1e-8);
    let theta = spec.theta();
    assert_eq!(theta.len(), 4, "factor, two length scales, noise");
    let scale = grad.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    for (j, g) in grad.iter().enumerate() {
        let h = 1e-5;
        let at = |d: f64| {
            let mut t = theta.clone();
            t[j] += d;
            bound_and_gradient(&spec.with_theta(&t), &z, &x, &y, &ctx).unwrap().0
        };
        let fd = (at(h) - at(-h)) / (2.0 * h);
        assert!((g - fd).abs() <= 1e-6 * scale, "d/dtheta[{j}] = {g}, central differences {fd}");
    }
}

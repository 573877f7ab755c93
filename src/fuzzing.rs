//! Entry points of the fuzz targets (`fuzz/`) and of their regression tests
//! (`tests/fuzz_regressions.rs`): raw request bytes through the same decoding and
//! validation as the HTTP layer, then (kept small) a fit and a prediction. Any error is a
//! fine answer; a panic is a bug.

use crate::api::extract::parse_json;
use crate::api::types::{ObservationsBody, PosteriorBody, PredictBody, PredictResponse, TrainBody};
use crate::config::Config;
use crate::estimator::{FitContext, FittedModel, PredictOptions};
use crate::kernel::{Kernel, Points};
use crate::linalg::Parallelism;
use crate::service::{RowExtras, Service, TrainInput, ValidTraining};
use serde_json::{json, Value};
use std::sync::OnceLock;

/// Fits larger than this are only validated: a fuzzer should spend its time on inputs.
const MAX_FIT_ROWS: usize = 48;

fn service() -> &'static Service {
    static SERVICE: OnceLock<Service> = OnceLock::new();
    SERVICE.get_or_init(|| Service::new(Config { data_dir: String::new(), fit_workers: 1, ..Config::for_tests() }))
}

/// Whether a request's params ask for more work than a fuzz iteration should do.
fn too_costly(params: Option<&Value>) -> bool {
    let big =
        |key: &str, limit: u64| params.and_then(|p| p.get(key)).and_then(Value::as_u64).is_some_and(|v| v > limit);
    // A variational fit runs about a thousand minibatch steps unless told otherwise.
    let variational = params.and_then(|p| p.get("approximation")).is_some_and(|a| a == "variational");
    let epochs = params.and_then(|p| p.get("epochs")).and_then(Value::as_u64);
    big("restarts", 2)
        || big("max_epochs", 200)
        || big("max_iter", 200)
        || big("centers", MAX_FIT_ROWS as u64)
        || (variational && epochs.is_none_or(|e| e > 20))
}

/// POST /models: decode, validate, and for small inputs fit, predict on the training
/// points, serialise the answer and restore the stored state.
pub fn train_body(data: &[u8]) {
    let Ok(body) = parse_json::<TrainBody>(data) else { return };
    let Ok(input) = TrainInput::try_from(body) else { return };
    let Ok(ValidTraining { spec, data: training, .. }) = service().validate_training(&input) else { return };
    if training.x().n() > MAX_FIT_ROWS || too_costly(input.params.as_ref()) {
        return;
    }
    let Ok(model) = spec.fit(&training, &FitContext::sequential()) else { return };
    // The model resource is JSON: a non-finite number would become null.
    let report = model.predictor().report();
    assert!(report.log_marginal_likelihood.is_none_or(f64::is_finite), "non-finite LML: {report:?}");
    assert!(report.residual.is_none_or(f64::is_finite), "non-finite cg residual: {report:?}");
    answer(&model, training.x(), &PredictOptions::default());
    FittedModel::from_stored(model.to_stored()).expect("a fitted model's stored state restores");
}

/// POST /models with `search`: decode, validate (every value, the folds, the limits),
/// and for small searches run it, refit the best and check the report.
pub fn search_body(data: &[u8]) {
    let Ok(body) = parse_json::<TrainBody>(data) else { return };
    let Ok(input) = TrainInput::try_from(body) else { return };
    let Ok(ValidTraining { data: training, search: Some(job), .. }) = service().validate_training(&input) else {
        return;
    };
    if training.x().n() > MAX_FIT_ROWS || job.plan.total_fits > 60 || too_costly(input.params.as_ref()) {
        return;
    }
    let env = crate::selection::Environment::new(1, job.table_budget);
    let limits = service().limits();
    let Ok(outcome) = crate::selection::run(&job.plan, &training, &FitContext::sequential(), env, limits) else {
        return;
    };
    let report = &outcome.report;
    if job.plan.bayes.is_none() {
        assert_eq!(report["n_candidates"].as_u64(), Some(job.plan.candidates.len() as u64));
    }
    let best = &report["candidates"][outcome.best];
    assert!(best["mean_score"].as_f64().is_some_and(f64::is_finite), "the best has a finite score: {report}");
    // Halving chooses among its last round; earlier rounds scored smaller subsets.
    for c in report["candidates"].as_array().expect("candidates").iter().filter(|c| c["round"] == best["round"]) {
        if let Some(m) = c["mean_score"].as_f64() {
            assert!(m <= best["mean_score"].as_f64().unwrap(), "the best is the highest mean: {report}");
        }
    }
    // The outcome's spec: a bayes search's best may be a setting the plan never held.
    let Ok(model) = outcome.spec.fit(&training, &FitContext::sequential()) else { return };
    answer(&model, training.x(), &PredictOptions::default());
}

/// POST /models/{id}/predict: decode and answer against one small model of every kind.
pub fn predict_body(data: &[u8]) {
    let Ok(body) = parse_json::<PredictBody>(data) else { return };
    if body.x.len() > 256 {
        return;
    }
    let defaults = PredictOptions::default();
    let opts = PredictOptions {
        variance: body.variance.unwrap_or(defaults.variance),
        covariance: body.covariance.unwrap_or(defaults.covariance),
        include_noise: body.include_noise.unwrap_or(defaults.include_noise),
        probabilities: body.probabilities.unwrap_or(defaults.probabilities),
    };
    for model in models() {
        if let Ok(points) = service().check_query(model, &body.x, &opts) {
            answer(model, &points, &opts);
        }
    }
}

/// POST /models/{id}/posterior_samples: decode, check the rows against every model, and
/// for the Gaussian processes (kept small) draw: finite draws, or a refusal.
pub fn posterior_body(data: &[u8]) {
    let Ok(body) = parse_json::<PosteriorBody>(data) else { return };
    let n_samples = body.n_samples.unwrap_or(1);
    if body.x.len() > 64 || n_samples == 0 || n_samples > 64 {
        return;
    }
    let opts = PredictOptions {
        variance: false,
        covariance: true,
        include_noise: body.include_noise.unwrap_or(false),
        probabilities: false,
    };
    // As the service: the kinds with a posterior, less the fits without one (a
    // variational GP of another likelihood than the Gaussian).
    for model in models().iter().filter(|m| m.kind().can().posterior && m.posterior_refused().is_none()) {
        let Ok(points) = service().check_query(model, &body.x, &opts) else { continue };
        let p = model.predictor().predict(&points, &opts, Parallelism::Sequential);
        use crate::estimator::gaussian_process::posterior::{draw_prediction, Draws};
        let drawn = draw_prediction(&p, n_samples as usize, body.seed.unwrap_or(0), Parallelism::Sequential);
        let shape = (points.n(), n_samples as usize);
        match &drawn {
            Ok(Draws::Single(d)) => assert_eq!(d.shape(), shape),
            Ok(Draws::PerOutput(ds)) => {
                assert_eq!(ds.len(), model.outputs().t());
                assert!(ds.iter().all(|d| d.shape() == shape));
            }
            Err(_) => {}
        }
        if let Ok(d) = &drawn {
            serde_json::to_vec(&crate::api::types::SamplesResponse::new(d)).expect("draws serialise");
        }
    }
}

/// POST /models/{id}/observations: decode, check against every model, and append to the
/// exact GP and kernel ridge models; the grown model predicts and survives the store.
pub fn observations_body(data: &[u8]) {
    let Ok(body) = parse_json::<ObservationsBody>(data) else { return };
    if body.x.len() > MAX_FIT_ROWS {
        return;
    }
    for model in models() {
        let Ok(new) = service().check_observations(model, &body.x, &body.y) else { continue };
        let extras = RowExtras { noise: body.noise.clone(), sample_weight: body.sample_weight.clone() };
        let Ok((noise, weights)) = service().check_row_extras(model, &extras, new.x.n()) else { continue };
        let Ok(grown) = model.append_with(&new, noise.as_deref(), weights.as_deref(), Parallelism::Sequential) else {
            continue;
        };
        let n = model.predictor().n_support() + new.x.n();
        assert_eq!(grown.predictor().n_support(), n, "every appended row is kept");
        let report = grown.predictor().report();
        assert!(report.log_marginal_likelihood.is_none_or(f64::is_finite), "non-finite LML: {report:?}");
        assert!(report.residual.is_none_or(f64::is_finite), "non-finite cg residual: {report:?}");
        answer(&grown, &new.x, &PredictOptions::default());
        FittedModel::from_stored(grown.to_stored()).expect("a grown model's stored state restores");
    }
}

/// A kernel document: parse, and for a valid kernel check its round trip and evaluate it
/// on a few points (including far-out ones).
/// A study's create body and tells: a space that reads is encoded and decoded
/// consistently, its draws are in it, and suggestions over arbitrary told values (non
/// finite ones excluded, as the API refuses them) stay in the space and never repeat.
pub fn study_body(data: &[u8]) {
    use crate::service::studies::{read_tell, Definition};
    use crate::study::{suggest, Goal, State, StudyModel, StudySpace, Trial};
    let Ok(value) = serde_json::from_slice::<Value>(data) else { return };
    // A whole create body when it reads (objectives, constraints, pruner), else its space.
    let definition = Definition::from_json(uuid::Uuid::nil(), &value, String::new()).ok();
    let (space, goal) = match &definition {
        Some(d) => (d.space.clone(), d.goal()),
        None => match StudySpace::from_json(&value["space"]) {
            Ok(space) => (space, Goal::single()),
            Err(_) => return,
        },
    };
    if let (Some(d), Some(tell)) = (&definition, value.get("tell")) {
        // A tell either reads (with one result per objective and constraint) or is refused.
        if let Ok(crate::service::studies::Told::Complete(r)) = read_tell(d, tell) {
            assert_eq!(r.len(), goal.objectives + goal.limits.len());
        }
    }
    let seed = value["seed"].as_u64().unwrap_or(0);
    let mut trials: Vec<Trial> = Vec::new();
    let mut model = StudyModel::default();
    let width = goal.objectives + goal.limits.len();
    for i in 0..6u64 {
        let Some(next) = suggest(&space, seed, 3, &goal, &trials, &mut model) else { break };
        let named = space.named(&next.values);
        let back = space.values_of(&named).expect("a suggestion is in its space");
        assert_eq!(back, next.values, "a suggestion reads back as itself");
        assert!(
            trials.iter().all(|t| t.values != next.values) || space.space.size().is_some(),
            "a continuous space never repeats a setting"
        );
        // Told values from the body when it has them, else a fixed pattern.
        let told = value["values"].get(i as usize).and_then(Value::as_f64).filter(|v| v.is_finite());
        let results = |v: f64| (0..width).map(|j| v * (j as f64 + 1.0).cos()).collect::<Vec<f64>>();
        let state = match (i % 4, told) {
            (2, _) => State::Pending,
            (3, _) => State::Pruned(told),
            (_, Some(v)) => State::Complete(results(v)),
            _ => State::Complete(results((i as f64).sin())),
        };
        trials.push(Trial { values: next.values, suggested: true, state });
    }
}

pub fn kernel_json(data: &[u8]) {
    let Ok(value) = serde_json::from_slice::<Value>(data) else { return };
    let Ok(kernel) = Kernel::from_json(&value) else { return };
    let again = Kernel::from_json(&kernel.to_json()).expect("a kernel's own JSON reads back");
    assert_eq!(again, kernel, "JSON round trip");
    let theta = kernel.theta();
    assert_eq!(kernel.with_theta(&theta).theta().len(), theta.len());
    let mut sets: Vec<Points> =
        (1..=3).map(|d| Points::from_rows(&[vec![0.0; d], vec![1.0; d], vec![-3.5; d], vec![1e150; d]])).collect();
    sets.push(Points::from_texts(["", "ab", "abcabc", "\u{1F600}b"]));
    sets.push(Points::from_tokens(vec![vec![], vec!["a".into()], vec!["a".into(), "b".into(), "a".into()]]));
    for x in sets {
        if kernel.check_rows(x.kind()).is_err() || (x.d() > 0 && kernel.check_features(x.d()).is_err()) {
            continue;
        }
        // Generative and Fisher parts need their mixture, fitted as a model fit would.
        let ctx = FitContext::sequential();
        let fitted = kernel.with_mixtures(&mut |g, _| {
            if g.max_iter > 200 {
                return Err(());
            }
            crate::estimator::mixture::fit(&x, g, &ctx).map(|m| std::sync::Arc::new(m.mixture)).map_err(|_| ())
        });
        let Ok(kernel) = fitted else { continue };
        let kernel = if x.kind() == crate::kernel::RowKind::Numeric { kernel.with_scale(&x) } else { kernel };
        // A precomputed kernel's rows are a training Gram matrix by index (here the linear
        // kernel's of these rows).
        let x = match kernel {
            Kernel::Precomputed if x.kind() == crate::kernel::RowKind::Numeric => {
                let m = x.as_matrix();
                Points::precomputed(m.transpose() * m)
            }
            _ => x,
        };
        let _ = kernel.gram(&x, Parallelism::Sequential);
        let _ = kernel.gram_with_gradient(&x, Parallelism::Sequential);
        let _ = kernel.diag(&x);
        let _ = kernel.diag_with_gradient(&x);
    }
}

/// A dataset upload: CSV (the first byte chooses the target column: none or the first)
/// or JSON (a first byte of `{`), streamed into the stored form; an accepted upload must
/// read back whole with the described shape.
pub fn dataset_upload(data: &[u8]) {
    use crate::dataset::format::read_dataset;
    let parsed = if data.first() == Some(&b'{') {
        crate::dataset::json::ingest(data, Vec::new(), 64)
    } else {
        // A first byte of 1, 3 or 2 mod 8 names the target `a`, the targets `a,b`, or none
        // (`?target=` empty).
        let (target, body) = match data.split_first() {
            Some((b, rest)) if b % 4 == 1 => (Some("a".to_string()), rest),
            Some((b, rest)) if b % 4 == 3 => (Some("a,b".to_string()), rest),
            Some((b, rest)) if b % 8 == 2 => (Some(String::new()), rest),
            _ => (None, data),
        };
        crate::dataset::csv::ingest(body, Vec::new(), crate::dataset::csv::CsvOptions { target, name: None })
    };
    let Ok((info, bytes)) = parsed else { return };
    let back = read_dataset(&bytes[..], bytes.len() as u64).expect("an accepted upload reads back");
    // Streamed (a tail read first, then the stream), it decodes to the same dataset.
    let tail = &bytes[bytes.len() - bytes.len().min(1 << 16)..];
    let streamed = crate::dataset::format::read_dataset_streaming(&bytes[..], tail, bytes.len() as u64)
        .expect("an accepted upload streams back");
    assert_eq!((&streamed.info, &streamed.x, &streamed.y), (&back.info, &back.x, &back.y));
    assert_eq!(back.info, info);
    assert_eq!(back.x.n() as u64, info.n_rows);
    assert_eq!(back.y.len() as u64, if info.has_target() { info.n_rows } else { 0 });
    assert_eq!(info.has_target(), back.y != crate::dataset::Targets::None);
    assert_eq!(info.outputs.is_some_and(|t| t > 0), matches!(back.y, crate::dataset::Targets::Multi { .. }));
    assert_eq!(back.x.numeric().is_some(), info.n_features.is_some());
    assert!(back.x.numeric().is_none_or(|m| m.iter().all(|v| v.is_finite())));
}

/// A CSV predict body, by position and by name.
pub fn predict_csv(data: &[u8]) {
    let names = ["a".to_string(), "b".to_string()];
    for features in [None, Some(&names[..])] {
        if let Ok(q) = crate::dataset::csv::read_query(data, features, 2) {
            assert_eq!(q.d(), 2);
            assert!(q.n() > 0 && q.as_matrix().iter().all(|v| v.is_finite()));
        }
    }
}

fn answer(model: &FittedModel, x: &Points, opts: &PredictOptions) {
    let p = model.predictor().predict(x, opts, Parallelism::Sequential);
    if let Some(e) = &p.embedding {
        assert_eq!(e.nrows(), x.n());
        serde_json::to_vec(&crate::api::types::EmbeddingResponse::new(e)).expect("an embedding serialises");
    } else {
        let body = PredictResponse::new(p, model.predictor().classes());
        serde_json::to_vec(&body).expect("a prediction serialises");
    }
    // A transform's inverse map takes rows as wide as its components.
    if let Some(m) = model.transformer() {
        if m.has_inverse() && x.kind() == crate::kernel::RowKind::Numeric && x.d() == m.n_components() {
            let back = m.inverse_transform(x, Parallelism::Sequential).expect("it has one");
            assert_eq!(back.nrows(), x.n());
        }
    }
}

/// The kinds of the models the predict and posterior targets answer with (every kind in
/// the catalogue: tests/fuzz_regressions.rs holds the list to it).
pub fn model_kinds() -> Vec<crate::estimator::ModelKind> {
    models().iter().map(|m| m.kind()).collect()
}

/// One small fitted model of every kind, on two features, and two over strings and token
/// lists.
fn models() -> &'static [FittedModel] {
    static MODELS: OnceLock<Vec<FittedModel>> = OnceLock::new();
    MODELS.get_or_init(|| {
        let x: Vec<Vec<f64>> = (0..12).map(|i| vec![(i % 4) as f64, (i / 4) as f64 * 0.7]).collect();
        let numbers: Vec<f64> = x.iter().map(|r| (r[0] - r[1]).sin()).collect();
        let labels: Vec<&str> = (0..12).map(|i| ["a", "b", "c"][i % 3]).collect();
        let two: Vec<Vec<f64>> = numbers.iter().map(|v| vec![*v, 10.0 - 3.0 * v]).collect();
        let rbf = Kernel::from_json(&json!({"type": "rbf"})).expect("a kernel");
        let k = rbf.gram(&Points::from_rows(&x), Parallelism::Sequential);
        let gram: Vec<Vec<f64>> = k.row_iter().map(|r| r.iter().copied().collect()).collect();
        let bodies = [
            json!({"model": "kernel_ridge", "x": x, "y": numbers}),
            json!({"model": "kernel_ridge", "params": {"sample_weight": [1, 0, 2, 1, 1, 3, 1, 1, 0.5, 1, 1, 1]}, "x": x, "y": numbers}),
            json!({"model": "gaussian_process", "params": {"noise": 0.1}, "x": x, "y": numbers}),
            json!({"model": "gaussian_process", "params": {"noise": (0..12).map(|i| 0.05 * (i % 3) as f64).collect::<Vec<_>>(),
                   "normalize_y": true}, "x": x, "y": numbers}),
            json!({"model": "gaussian_process", "params": {"noise": 0.1, "approximation": "nystrom", "inducing_points": 4},
                   "x": x, "y": numbers}),
            // Several outputs (a 2-D y): exact and nystrom GPs, kernel ridge.
            json!({"model": "gaussian_process", "params": {"noise": 0.1, "normalize_y": true}, "x": x, "y": two}),
            json!({"model": "gaussian_process", "params": {"noise": 0.1, "approximation": "nystrom", "inducing_points": 4},
                   "x": x, "y": two}),
            json!({"model": "kernel_ridge", "x": x, "y": two}),
            json!({"model": "nadaraya_watson", "x": x, "y": numbers}),
            json!({"model": "rbf_network", "params": {"centers": 5, "lambda": 0.1}, "x": x, "y": numbers}),
            json!({"model": "svm", "params": {"probability": true}, "x": x, "y": labels}),
            json!({"model": "svm", "x": x, "y": labels[..2].iter().cycle().take(12).collect::<Vec<_>>()}),
            json!({"model": "kernel_perceptron", "x": x, "y": labels}),
            json!({"model": "kernel_logistic", "x": x, "y": labels}),
            json!({"model": "gp_classifier", "x": x, "y": labels}),
            // Variational GPs: every likelihood, their own predict paths.
            json!({"model": "gaussian_process", "params": {"approximation": "variational", "inducing_points": 5, "epochs": 3},
                   "x": x, "y": numbers}),
            json!({"model": "gaussian_process", "params": {"approximation": "variational", "inducing_points": 5, "epochs": 3,
                   "likelihood": "student_t", "df": 3.0, "normalize_y": true}, "x": x, "y": numbers}),
            json!({"model": "gaussian_process", "params": {"approximation": "variational", "inducing_points": 5, "epochs": 3,
                   "likelihood": "poisson"}, "x": x, "y": (0..12).map(|i| i % 5).collect::<Vec<_>>()}),
            json!({"model": "gp_classifier", "params": {"approximation": "variational", "inducing_points": 5, "epochs": 3},
                   "x": x, "y": labels}),
            json!({"model": "gp_classifier", "params": {"approximation": "variational", "inducing_points": 5, "epochs": 3},
                   "x": x, "y": labels[..2].iter().cycle().take(12).collect::<Vec<_>>()}),
            json!({"model": "svm", "kernel": {"type": "spectrum", "k": 2}, "x": ["abab", "baba", "cdcd", "dcdc"],
                   "y": ["p", "p", "q", "q"]}),
            json!({"model": "kernel_ridge", "kernel": {"type": "set"}, "x": [["a"], [], ["a", "b"]], "y": [1, 2, 3]}),
            json!({"model": "svr", "params": {"epsilon": 0.05}, "x": x, "y": numbers}),
            json!({"model": "nu_svr", "kernel": {"type": "rbf", "gamma": "scale"}, "x": x, "y": numbers}),
            json!({"model": "nu_svm", "params": {"nu": 0.3, "probability": true}, "x": x, "y": labels}),
            json!({"model": "svm", "params": {"class_weight": "balanced", "sample_weight": [1, 0, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1]},
                   "x": x, "y": labels}),
            json!({"model": "one_class_svm", "params": {"nu": 0.2}, "x": x}),
            json!({"model": "kernel_pca", "params": {"n_components": 2, "fit_inverse_transform": true}, "x": x}),
            json!({"model": "svm", "kernel": {"type": "precomputed"}, "x": gram, "y": labels}),
        ];
        bodies
            .iter()
            .map(|b| {
                let body = serde_json::from_value::<TrainBody>(b.clone()).expect("a valid body");
                let input = TrainInput::try_from(body).expect("a valid body");
                let ValidTraining { spec, data, .. } = service().validate_training(&input).expect("a valid body");
                spec.fit(&data, &FitContext::sequential()).expect("the seed models fit")
            })
            .collect()
    })
}

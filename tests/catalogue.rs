//! Every kind in the catalogue (`ModelKind::ALL`), walked: a small problem fitted,
//! stored and restored bit for bit, predicted; then over HTTP, every capability its
//! catalogue row claims works and every one it denies is refused with the contract's
//! 422 at the contract's pointer - the rows as `GET /models/kinds` serves them, which is
//! what the page and the CLI ask. A new kind gets all of this by being in the table.

mod common;

use common::{pointers, problem, TestServer};
use mercer::estimator::{
    ClassLabels, ClassificationSet, FitContext, FittedModel, Limits, ModelKind, ModelSpec, PredictOptions, Target,
    Task, TrainingData, TrainingSet,
};
use mercer::kernel::{Kernel, Points};
use mercer::linalg::Parallelism;
use nalgebra::DMatrix;
use serde_json::{json, Value};

const N: usize = 40;

/// N points in [0, 3) x [0, 2), spread without a pattern a kernel could resonate with.
fn rows(n: usize, offset: usize) -> Vec<Vec<f64>> {
    (0..n).map(|i| i + offset).map(|i| vec![(i as f64 * 0.618_034) % 3.0, (i as f64 * 0.414_214) % 2.0]).collect()
}

fn regression_y(x: &[Vec<f64>]) -> Vec<f64> {
    x.iter().map(|r| r[0].sin() + 0.5 * r[1]).collect()
}

/// Three classes by region.
fn class_y(x: &[Vec<f64>]) -> Vec<String> {
    x.iter().map(|r| ["low", "mid", "high"][(r[0] as usize).min(2)].to_string()).collect()
}

/// The kind's targets as JSON (none for the kinds without targets).
fn targets(kind: ModelKind, x: &[Vec<f64>]) -> Option<Value> {
    match kind.task() {
        Task::Regression => Some(json!(regression_y(x))),
        Task::Classification => Some(json!(class_y(x))),
        Task::Novelty | Task::Transform => None,
    }
}

/// Params that reach each capability: the svm's probabilities, kernel PCA's inverse map.
fn params(kind: ModelKind) -> Value {
    match kind.name() {
        "svm" | "nu_svm" => json!({"probability": true}),
        "kernel_pca" => json!({"n_components": 2, "fit_inverse_transform": true}),
        "rbf_network" => json!({"lambda": 0.01}),
        _ => json!({}),
    }
}

fn kernel() -> Value {
    json!({"type": "rbf", "gamma": 0.5})
}

fn body(kind: ModelKind, x: &[Vec<f64>], params: Value) -> Value {
    let mut b = json!({"model": kind.name(), "kernel": kernel(), "params": params, "x": x});
    if let Some(y) = targets(kind, x) {
        b["y"] = y;
    }
    b
}

fn training_data(kind: ModelKind, x: &[Vec<f64>]) -> TrainingData {
    let points = Points::from_columns(DMatrix::from_fn(2, x.len(), |k, i| x[i][k]));
    match kind.task() {
        Task::Regression => TrainingData::Regression(TrainingSet::new(points, regression_y(x))),
        Task::Classification => {
            let labels: Vec<Target> = class_y(x).into_iter().map(Target::Text).collect();
            let (classes, y) = ClassLabels::encode(&labels).unwrap();
            TrainingData::Classification(ClassificationSet { x: points, y, classes })
        }
        Task::Novelty | Task::Transform => TrainingData::Unlabelled(points),
    }
}

/// Params that reach each capability, with the kind's variational form where it has one
/// (a few epochs: the walk checks storage and answers, not convergence).
fn variational(kind: ModelKind) -> Value {
    let mut p = params(kind);
    p["approximation"] = json!("variational");
    p["inducing_points"] = json!(12);
    p["epochs"] = json!(3);
    p["batch_size"] = json!(16);
    p
}

#[test]
fn every_kind_fits_stores_restores_bit_for_bit_and_predicts() {
    let x = rows(N, 0);
    let q = Points::from_columns(DMatrix::from_fn(2, 7, |k, i| rows(7, 100)[i][k]));
    let forms = ModelKind::ALL
        .into_iter()
        .map(|k| (k, params(k)))
        .chain(ModelKind::ALL.into_iter().filter(|k| k.can().variational).map(|k| (k, variational(k))));
    for (kind, params) in forms {
        let data = training_data(kind, &x);
        let k = Kernel::from_json(&kernel()).unwrap();
        let mut spec = ModelSpec::from_json(kind, k, Some(&params)).unwrap();
        spec.admit(&data, Limits { exact_max_rows: 20_000, max_fit_bytes: u64::MAX }).unwrap();
        assert_eq!(spec.kind(), kind);
        let approximations = kind.can().nystrom || kind.can().variational;
        assert_eq!(spec.approximation().is_some(), approximations, "{}: approximation params", kind.name());
        let fitted = spec.fit(&data, &FitContext::sequential()).unwrap();
        assert_eq!(fitted.kind(), kind, "the fitted model knows its kind");
        let stored = fitted.to_stored();
        assert_eq!(stored.kind, kind.name());
        let restored = FittedModel::from_stored(stored.clone()).unwrap();
        assert_eq!(restored.to_stored(), stored, "{}: stored again, the same file", kind.name());
        let opts = PredictOptions::default();
        let (a, b) =
            (fitted.predict(&q, &opts, Parallelism::Sequential), restored.predict(&q, &opts, Parallelism::Sequential));
        assert_eq!(a, b, "{}: the restored model predicts bit for bit", kind.name());
        let answered = a
            .values
            .len()
            .max(a.classes.as_ref().map_or(0, Vec::len))
            .max(a.embedding.as_ref().map_or(0, |e| e.nrows()));
        assert!(answered >= 7, "{}: every query row is answered", kind.name());
        assert!(a.is_finite());
        // What the fitted model offers is what the catalogue says.
        let can = kind.can();
        assert_eq!(fitted.transformer().is_some(), can.transform, "{}: transform", kind.name());
        let exact = fitted.report().approximation.as_deref() == Some("exact");
        assert_eq!(fitted.online().is_some(), can.appends && exact, "{}: appends (an exact fit)", kind.name());
        assert_eq!(a.probabilities.is_some(), can.probabilities, "{}: probabilities", kind.name());
        assert_eq!(a.variance.is_some(), can.posterior, "{}: predictive variance", kind.name());
    }
}

/// One request's answer: 2xx, or the 422's pointers.
async fn outcome(r: reqwest::Response) -> Result<Value, Vec<String>> {
    let status = r.status().as_u16();
    if (200..300).contains(&status) {
        return Ok(r.json().await.unwrap());
    }
    let (status, p) = problem(r).await;
    assert_eq!(status, 422, "a refusal is 422: {p}");
    Err(pointers(&p))
}

/// Claimed: the request succeeds. Denied: 422 at `pointer`.
fn check(kind: ModelKind, what: &str, claimed: bool, got: Result<Value, Vec<String>>, pointer: &str) -> Option<Value> {
    match (claimed, got) {
        (true, Ok(v)) => Some(v),
        (false, Err(p)) => {
            assert!(p.iter().any(|p| p == pointer), "{} {what}: refused at {pointer}, got {p:?}", kind.name());
            None
        }
        (true, Err(p)) => panic!("{} claims {what}, but it was refused at {p:?}", kind.name()),
        (false, Ok(v)) => panic!("{} denies {what}, but it was served: {v}", kind.name()),
    }
}

#[tokio::test]
async fn every_capability_claimed_works_and_every_one_denied_is_a_422_at_its_pointer() {
    let s = TestServer::default().await;
    let x = rows(N, 0);
    let q = rows(5, 100);
    let served: Value = s.get("/models/kinds").await.json().await.unwrap();
    let served = served["kinds"].as_array().unwrap();
    let names: Vec<&str> = served.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ModelKind::ALL.map(ModelKind::name), "GET /models/kinds lists the catalogue in order");
    for (kind, row) in ModelKind::ALL.into_iter().zip(served) {
        let name = kind.name();
        let claims =
            |capability: &str| row[capability].as_bool().unwrap_or_else(|| panic!("{name}: {capability} in {row}"));
        let can = Claims {
            transform: claims("transform"),
            probabilities: claims("probabilities"),
            posterior: claims("posterior"),
            appends: claims("appends"),
            several_outputs: claims("several_outputs"),
            nystrom: claims("nystrom"),
            variational: claims("variational"),
            precomputed_kernel: claims("precomputed_kernel"),
        };
        assert_eq!(row["task"], json!(kind.task()), "{name}: task");
        // The kinds without targets are fitted without y just below (`body`).
        assert_eq!(claims("targets"), targets(kind, &x).is_some(), "{name}: targets");
        assert_eq!(
            row.get("precomputed_kernel_refused").is_some(),
            !can.precomputed_kernel,
            "{name}: a refusal's reason, where it is refused"
        );
        let model = s.train(&body(kind, &x, params(kind))).await;
        let id = model["id"].as_str().unwrap().to_string();

        // transform instead of predict.
        let predicted = outcome(s.post(&format!("/models/{id}/predict"), &json!({"x": q})).await).await;
        let answer = check(kind, "predict", !can.transform, predicted, "/model");
        let transformed = outcome(s.post(&format!("/models/{id}/transform"), &json!({"x": q})).await).await;
        check(kind, "transform", can.transform, transformed, "/model");

        // Probabilities and the predictive variance are fields of the answer.
        if let Some(answer) = answer {
            assert_eq!(answer.get("probabilities").is_some(), can.probabilities, "{name}: probabilities");
            assert_eq!(answer.get("variance").is_some(), can.posterior, "{name}: variance");
        }
        let drawn =
            outcome(s.post(&format!("/models/{id}/posterior_samples"), &json!({"x": q, "n_samples": 2})).await).await;
        check(kind, "posterior draws", can.posterior, drawn, "/model");

        // Online appends, to the exact fit.
        let more = rows(3, 200);
        // The body is well-formed whatever the kind (y is required): the refusal is the kind's.
        let y = targets(kind, &more).unwrap_or_else(|| json!(regression_y(&more)));
        let rows_body = json!({"x": more, "y": y});
        let appended = outcome(s.post(&format!("/models/{id}/observations"), &rows_body).await).await;
        check(kind, "appends", can.appends, appended, "/model");

        // Several outputs: a 2-D y of numbers.
        let mut two = body(kind, &x, params(kind));
        two["y"] = json!(regression_y(&x).iter().map(|v| [*v, 2.0 * v]).collect::<Vec<_>>());
        let fitted = outcome(s.post("/models", &two).await).await;
        check(kind, "several outputs", can.several_outputs, fitted, "/y");

        // A Nystrom approximation (the svm's probabilities are exact-only).
        let mut nystrom = params(kind);
        nystrom.as_object_mut().unwrap().remove("probability");
        nystrom["approximation"] = json!("nystrom");
        let fitted = outcome(s.post("/models", &body(kind, &x, nystrom)).await).await;
        check(kind, "approximation nystrom", can.nystrom, fitted, "/params/approximation");
        let mut variational = params(kind);
        variational.as_object_mut().unwrap().remove("probability");
        variational["approximation"] = json!("variational");
        let fitted = outcome(s.post("/models", &body(kind, &x, variational)).await).await;
        check(kind, "approximation variational", can.variational, fitted, "/params/approximation");

        // A precomputed kernel: x holds the training rows' kernel values.
        let gram: Vec<Vec<f64>> = x
            .iter()
            .map(|a| x.iter().map(|b| (-0.5 * ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2))).exp()).collect())
            .collect();
        // (Kernel PCA's map back needs rows as points.)
        let mut pre_params = params(kind);
        pre_params.as_object_mut().unwrap().remove("fit_inverse_transform");
        let mut pre = body(kind, &x, pre_params);
        pre["kernel"] = json!({"type": "precomputed"});
        pre["x"] = json!(gram);
        let fitted = outcome(s.post("/models", &pre).await).await;
        check(kind, "a precomputed kernel", can.precomputed_kernel, fitted, "/kernel");
    }
}

/// A served catalogue row's claims.
struct Claims {
    transform: bool,
    probabilities: bool,
    posterior: bool,
    appends: bool,
    several_outputs: bool,
    nystrom: bool,
    variational: bool,
    precomputed_kernel: bool,
}

/// The kinds a user-facing list names, in its order.
fn listed(text: &str, start: &str, end: &str) -> Vec<String> {
    let from = text.find(start).unwrap_or_else(|| panic!("{start:?} not found")) + start.len();
    let to = from + text[from..].find(end).unwrap_or_else(|| panic!("{end:?} not found after {start:?}"));
    text[from..to]
        .split(|c: char| !(c.is_ascii_lowercase() || c == '_'))
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// Every list of kinds that users read names exactly the catalogue's kinds: a new row
/// in the table fails here until openapi.yaml and docs/api.md know it. The page and the
/// CLI keep no list: they ask `GET /models/kinds` (the page names one kind, its form's
/// default choice, and no capability by a kind's name).
#[test]
fn every_list_of_kinds_users_read_names_the_catalogue() {
    let read = |path: &str| std::fs::read_to_string(format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let mut kinds: Vec<String> = ModelKind::ALL.iter().map(|k| k.name().to_string()).collect();
    kinds.sort();
    let client_help = read("src/client/mod.rs").replace("\n    ///", "");
    let lists = [
        ("openapi.yaml", listed(&read("openapi.yaml"), "enum: [kernel_ridge", "]")),
        ("docs/api.md", listed(&read("docs/api.md"), "| `model` | string | yes | the model kind:", "([")),
    ];
    for (path, mut names) in lists {
        if path == "openapi.yaml" {
            names.insert(0, "kernel_ridge".into());
        }
        names.sort();
        assert_eq!(names, kinds, "{path} lists the catalogue's kinds");
    }
    let page = read("src/api/ui/app.js");
    let named: Vec<&String> = kinds.iter().filter(|k| page.contains(&format!("\"{k}\""))).collect();
    assert_eq!(named, ["gaussian_process"], "the page names only its default kind");
    assert!(page.contains("const DEFAULT_MODEL = \"gaussian_process\";"), "the default is the page's one kind name");
    assert!(client_help.contains("(`mercer kinds` lists the server's)"), "the CLI's help sends to the served list");
}

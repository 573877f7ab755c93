//! MERCER_MAX_ROW_CHARS: a string row longer than the limit (in code points) or a token
//! list with more tokens is 413 at /x/i wherever rows come in (training, datasets,
//! predict, posterior draws, observations, OIP), so that one request cannot buy minutes of
//! string-kernel work; rows at the limit are fine.

mod common;

use common::{pointers, problem, TestServer};
use mercer::config::Config;
use serde_json::{json, Value};

fn too_large(got: (u16, Value), pointer: &str, what: &str) {
    assert_eq!(got.0, 413, "{what}: {}", got.1);
    assert_eq!(pointers(&got.1), [pointer], "{what}: {}", got.1);
    assert!(got.1["detail"].as_str().unwrap().contains("MERCER_MAX_ROW_CHARS"), "{what}: {}", got.1);
}

#[tokio::test]
async fn rows_over_the_limit_are_413_at_their_index() {
    let s = TestServer::start(Config { max_row_chars: 10, ..Config::for_tests() }).await;
    // Ten code points (twenty bytes) is at the limit; eleven is over it.
    let at_limit = "é".repeat(10);
    let over = "é".repeat(11);
    let spectrum = json!({"type": "spectrum", "k": 2});
    let body = |x: Value| json!({"model": "kernel_ridge", "kernel": spectrum, "x": x, "y": [1.0, 2.0, 3.0]});
    too_large(problem(s.post("/models", &body(json!(["abc", over, "abd"]))).await).await, "/x/1", "training");
    let tokens: Vec<String> = (0..11).map(|i| format!("t{i}")).collect();
    let set = json!({"model": "kernel_ridge", "kernel": {"type": "set"}, "x": [["a"], ["b"], tokens], "y": [1, 2, 3]});
    too_large(problem(s.post("/models", &set).await).await, "/x/2", "training, a token list");
    let m = s.train(&body(json!(["abcabc", at_limit, "abdabd"]))).await;
    let id = m["id"].as_str().unwrap();
    let path = format!("/models/{id}/predict");
    too_large(problem(s.post(&path, &json!({"x": [over]})).await).await, "/x/0", "predict");
    assert_eq!(s.post(&path, &json!({"x": [at_limit]})).await.status(), 200, "at the limit");
    too_large(
        problem(s.post(&format!("/models/{id}/observations"), &json!({"x": ["ab", over], "y": [1, 2]})).await).await,
        "/x/1",
        "observations",
    );
    too_large(
        problem(s.post("/datasets", &json!({"x": ["ab", "cd", over], "y": [1, 2, 3]})).await).await,
        "/x/2",
        "a JSON dataset",
    );
    let gp = s
        .train(&json!({"model": "gaussian_process", "kernel": spectrum, "params": {"noise": 0.1}, "x": ["abab", "baba", "abba"], "y": [1, 2, 3]}))
        .await;
    too_large(
        problem(
            s.post(&format!("/models/{}/posterior_samples", gp["id"].as_str().unwrap()), &json!({"x": ["ab", over]}))
                .await,
        )
        .await,
        "/x/1",
        "posterior draws",
    );
    let req = json!({"inputs": [{"name": "x", "shape": [1], "datatype": "BYTES", "data": [over]}]});
    let r = s.post(&format!("/v2/models/{id}/infer"), &req).await;
    assert_eq!(r.status(), 413, "OIP");
    let e: Value = r.json().await.unwrap();
    assert!(e["error"].as_str().unwrap().contains("MERCER_MAX_ROW_CHARS"), "{e}");
}

/// A string model's support index (the k-mer index an SVM's predictions read) is built
/// and counted at the fit: its memory_bytes, which the registry accounts when it takes the
/// model, do not grow at the first predict, nor after a restore from the stored form.
#[test]
fn a_string_svms_support_index_is_counted_at_the_fit() {
    use mercer::estimator::{
        ClassLabels, ClassificationSet, FitContext, FittedModel, ModelKind, ModelSpec, PredictOptions, Target,
        TrainingData,
    };
    use mercer::kernel::{Kernel, Points};
    use mercer::linalg::Parallelism;
    let texts: Vec<String> =
        (0..40).map(|i| if i % 2 == 0 { format!("abab{i}cdcd") } else { format!("xyxy{i}zwzw") }).collect();
    let labels: Vec<Target> = (0..40).map(|i| Target::Text(if i % 2 == 0 { "p" } else { "q" }.into())).collect();
    let (classes, y) = ClassLabels::encode(&labels).unwrap();
    let data = TrainingData::Classification(ClassificationSet { x: Points::from_texts(texts), y, classes });
    let kernel = Kernel::from_json(&json!({"type": "spectrum", "k": 3})).unwrap();
    let spec = ModelSpec::from_json(ModelKind::Svm, kernel, None).unwrap();
    let fitted = spec.fit(&data, &FitContext::sequential()).unwrap();
    let restored = FittedModel::from_stored(fitted.to_stored()).unwrap();
    let q = Points::from_texts(["abab7cd", "xyxyzw"]);
    for model in [fitted, restored] {
        let before = model.predictor().memory_bytes();
        model.predictor().predict(&q, &PredictOptions::default(), Parallelism::Sequential);
        assert_eq!(model.predictor().memory_bytes(), before, "the first predict built nothing uncounted");
    }
}

//! A served model answers a row the same bits whatever rows share its predict call
//! (the batcher stacks concurrent requests into one call) and whatever parallelism
//! computes it: every kind of the catalogue, exact and approximate, with every output.

use mercer::estimator::{
    ClassLabels, ClassificationSet, Decision, FitContext, Limits, ModelKind, ModelSpec, PredictOptions, Prediction,
    Target, Task, TrainingData, TrainingSet,
};
use mercer::kernel::{Kernel, Points};
use mercer::linalg::Parallelism;
use nalgebra::DMatrix;
use serde_json::{json, Value};

fn rows(n: usize, offset: usize, d: usize) -> Vec<Vec<f64>> {
    (0..n)
        .map(|i| i + offset)
        .map(|i| (0..d).map(|k| ((i * (k + 3)) as f64 * 0.618_034 + k as f64 * 0.3) % 3.0).collect())
        .collect()
}

fn points(x: &[Vec<f64>]) -> Points {
    Points::from_columns(DMatrix::from_fn(x[0].len(), x.len(), |k, i| x[i][k]))
}

fn data(kind: ModelKind, x: &[Vec<f64>]) -> TrainingData {
    let p = points(x);
    match kind.task() {
        Task::Regression => {
            TrainingData::Regression(TrainingSet::new(p, x.iter().map(|r| r[0].sin() + 0.3 * r[1]).collect()))
        }
        Task::Classification => {
            let labels: Vec<Target> =
                x.iter().map(|r| Target::Text(["low", "mid", "high"][(r[0] as usize).min(2)].into())).collect();
            let (classes, y) = ClassLabels::encode(&labels).unwrap();
            TrainingData::Classification(ClassificationSet { x: p, y, classes })
        }
        Task::Novelty | Task::Transform => TrainingData::Unlabelled(p),
    }
}

fn params(kind: ModelKind) -> Value {
    match kind.name() {
        "svm" | "nu_svm" => json!({"probability": true}),
        "kernel_pca" => json!({"n_components": 3}),
        "rbf_network" => json!({"lambda": 0.01}),
        "gaussian_process" => json!({"noise": 0.01}),
        _ => json!({}),
    }
}

/// Each row's part of a prediction, as bits.
fn row_bits(p: &Prediction, m: usize) -> Vec<Vec<u64>> {
    let mut out = vec![Vec::new(); m];
    let t = p.values.len().checked_div(m).unwrap_or(0);
    for (i, row) in out.iter_mut().enumerate() {
        row.extend(p.values[i * t..(i + 1) * t].iter().map(|v| v.to_bits()));
        if let Some(v) = &p.variance {
            row.extend(v[i * t..(i + 1) * t].iter().map(|v| v.to_bits()));
        }
        if let Some(c) = &p.classes {
            row.push(c[i] as u64);
        }
        for mat in [&p.probabilities, &p.embedding].into_iter().flatten() {
            row.extend(mat.row(i).iter().map(|v| v.to_bits()));
        }
        if let Some(s) = &p.score_samples {
            row.push(s[i].to_bits());
        }
        match &p.decision {
            Some(Decision::Binary(v)) => row.push(v[i].to_bits()),
            Some(Decision::PerClass(mat)) => row.extend(mat.row(i).iter().map(|v| v.to_bits())),
            None => {}
        }
    }
    out
}

#[test]
fn a_row_gets_the_same_bits_alone_in_a_batch_and_in_parallel() {
    let d = 3;
    let x = rows(300, 0, d);
    let q = rows(64, 1000, d);
    let qp = points(&q);
    let mut failures = Vec::new();
    let approximate = |kind: ModelKind, form: &str| {
        let mut p = params(kind);
        if let Some(o) = p.as_object_mut() {
            o.remove("probability");
        }
        p["approximation"] = json!(form);
        p["inducing_points"] = json!(40);
        if form == "variational" {
            p["epochs"] = json!(3);
            p["batch_size"] = json!(64);
        }
        (kind, p, form.to_string())
    };
    let forms = ModelKind::ALL
        .into_iter()
        .map(|k| (k, params(k), "exact".to_string()))
        .chain(ModelKind::ALL.into_iter().filter(|k| k.can().nystrom).map(|k| approximate(k, "nystrom")))
        .chain(ModelKind::ALL.into_iter().filter(|k| k.can().variational).map(|k| approximate(k, "variational")));
    for (kind, params, form) in forms {
        let data = data(kind, &x);
        let k = Kernel::from_json(&json!({"type": "rbf", "gamma": 0.5})).unwrap();
        let mut spec = ModelSpec::from_json(kind, k, Some(&params)).unwrap();
        spec.admit(&data, Limits { exact_max_rows: 20_000, max_fit_bytes: u64::MAX }).unwrap();
        let fitted = spec.fit(&data, &FitContext::sequential()).unwrap();
        let opts = PredictOptions {
            variance: kind.can().posterior,
            probabilities: kind.can().probabilities && !(form != "exact" && kind.name().contains("svm")),
            ..PredictOptions::default()
        };
        let batch = row_bits(&fitted.predict(&qp, &opts, Parallelism::Sequential), q.len());
        let parallel = row_bits(&fitted.predict(&qp, &opts, Parallelism::Parallel), q.len());
        let mut differ = (0, 0);
        for (i, r) in q.iter().enumerate() {
            let alone = row_bits(&fitted.predict(&points(std::slice::from_ref(r)), &opts, Parallelism::Sequential), 1);
            differ.0 += usize::from(alone[0] != batch[i]);
            differ.1 += usize::from(parallel[i] != batch[i]);
        }
        if differ != (0, 0) {
            failures.push(format!("{} {form}: {} rows differ alone, {} in parallel", kind.name(), differ.0, differ.1));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

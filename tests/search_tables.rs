//! A search's shared Gram tables change how many kernel values are computed, never the
//! answer: SVM searches with the whole table, with a lazy table that holds only part of
//! the columns (and evicts), and with no table give every candidate the same scores.

use mercer::estimator::{ClassLabels, ClassificationSet, FitContext, ModelKind, Target, TrainingData};
use mercer::kernel::{GramTable, Points};
use mercer::linalg::Parallelism;
use mercer::selection::{self, Admission, Document, Environment, Plan, Rows, SearchSpec, Tables};
use serde_json::{json, Value};

/// Two noisy classes of 400 points in 5 dimensions.
fn data() -> TrainingData {
    let n = 400;
    let cols: Vec<f64> = (0..n * 5).map(|i| ((i as f64 * 0.618_033_988_7).fract() - 0.5) * 4.0).collect();
    let x = Points::from_columns(nalgebra::DMatrix::from_vec(5, n, cols));
    let y: Vec<Target> = (0..n)
        .map(|i| {
            let p = x.point(i);
            let flip = i % 9 == 0;
            Target::Number(if ((p[0] * 1.3).sin() + p[1] * p[2] * 0.3 > 0.0) != flip { 1.0 } else { 0.0 })
        })
        .collect();
    let (classes, y) = ClassLabels::encode(&y).unwrap();
    TrainingData::Classification(ClassificationSet { x, y, classes })
}

fn scores(data: &TrainingData, budget: u64) -> Vec<Value> {
    let body = json!({"kernel": {"type": "rbf", "gamma": 0.5}, "params": {"c": 1.0}, "search": {
        "space": {"/params/c": [0.1, 1.0, 10.0, 100.0], "/kernel/gamma": [0.5, 2.0]}, "cv": 5}});
    let limits = mercer::estimator::Limits { exact_max_rows: 20_000, max_fit_bytes: u64::MAX };
    let admission = Admission { kind: ModelKind::Svm, data, limits };
    let TrainingData::Classification(c) = data else { unreachable!() };
    let rows = Rows { n: data.x().n(), classes: Some((c.y.as_slice(), c.classes.len())), several_outputs: false };
    let spec = SearchSpec::from_json(&body["search"]).unwrap();
    let base = Document::new(body.get("kernel"), body.get("params"));
    let plan = Plan::new(&spec, ModelKind::Svm, &base, rows, 1_000, &admission).unwrap();
    let ctx = FitContext::new(Parallelism::Parallel);
    let out = selection::run(&plan, data, &ctx, Environment::new(0, budget), limits).unwrap();
    out.report["candidates"].as_array().unwrap().iter().map(|c| c["fold_scores"].clone()).collect()
}

#[test]
fn whole_lazy_and_no_table_give_the_same_scores() {
    let data = data();
    let n = data.x().n();
    let whole = GramTable::bytes(n);
    // 120 columns of 400: fits on different folds and values of C evict each other's.
    let lazy = 120 * 4 * n as u64;
    assert_eq!(Tables::for_budget(n, whole), Tables { whole: true, lazy: false });
    assert_eq!(Tables::for_budget(n, lazy), Tables { whole: false, lazy: true });
    assert_eq!(Tables::for_budget(n, 50 * 4 * n as u64), Tables { whole: false, lazy: false }, "under n / 4 columns");
    let reference = scores(&data, whole);
    assert_eq!(reference.len(), 8);
    assert!(reference.iter().all(|s| s.as_array().is_some_and(|f| f.len() == 5)), "{reference:?}");
    assert_eq!(scores(&data, lazy), reference);
    assert_eq!(scores(&data, 0), reference);
}

//! `cargo bench --bench search`: what each reuse of a model search contributes, in
//! process, on the shapes of the benchmarks (scripts/bench_search.py times the
//! same searches over HTTP against scikit-learn's GridSearchCV):
//!
//! - SVC over grid.py's default grid (110 candidates, 5-fold, n = 2000, d = 20): every
//!   reuse; without the shared Gram table; and one fit at a time on one core.
//! - kernel ridge, 30 lambdas x 2 length scales, 5-fold, n = 2000 (1600 training rows per
//!   fold) and n = 4000 (3200): with the eigen path, with one Cholesky per value from the
//!   table, without the table; and leave-one-out in closed form.
//! - SVC over 3 values of C, 5-fold, n = 30,000: lazy tables of part and of all of the
//!   columns, the whole table, no table (`MERCER_BENCH_ONLY=lazy` runs these rows alone).
//!
//! Each row is one run (they take seconds); the machine is shared, so compare rows of
//! one run, not runs.

mod common;

use common::points;
use mercer::estimator::{
    ClassLabels, ClassificationSet, FitContext, Limits, ModelKind, Target, TrainingData, TrainingSet,
};
use mercer::kernel::GramTable;
use mercer::linalg::Parallelism;
use mercer::selection::{self, Admission, Document, Environment, Plan, Rows, SearchSpec};
use serde_json::{json, Value};
use std::time::Instant;

/// What the service admits (approximation resolved for n rows).
const LIMITS: Limits = Limits { exact_max_rows: 20_000, max_fit_bytes: u64::MAX };

fn plan(kind: ModelKind, body: &Value, data: &TrainingData) -> Plan {
    let n = data.x().n();
    let admission = Admission { kind, data, limits: LIMITS };
    let classes = match data {
        TrainingData::Classification(c) => Some((c.y.as_slice(), c.classes.len())),
        TrainingData::Regression(_) | TrainingData::Unlabelled(_) => None,
    };
    let spec = SearchSpec::from_json(&body["search"]).unwrap();
    let base = Document::new(body.get("kernel"), body.get("params"));
    Plan::new(&spec, kind, &base, Rows { n, classes, several_outputs: false }, 1_000_000, &admission).unwrap()
}

/// Seconds of one search, and its best candidate's values.
fn time(plan: &Plan, data: &TrainingData, env: Environment) -> (f64, Value) {
    let started = Instant::now();
    let out = selection::run(plan, data, &FitContext::new(Parallelism::Parallel), env, LIMITS).unwrap();
    (started.elapsed().as_secs_f64(), out.report["best_values"].clone())
}

fn classification(n: usize) -> TrainingData {
    classification_in(20, n)
}

fn classification_in(d: usize, n: usize) -> TrainingData {
    let x = points(d, n, 17);
    let y: Vec<Target> = (0..n)
        .map(|i| {
            let p = x.point(i);
            let f = p[..10].iter().map(|v| (2.0 * v).sin()).sum::<f64>() + p[10] * p[11];
            // One label in ten flipped: the large-C fits then take as many SMO
            // iterations as real data makes them take.
            let flip = (i.wrapping_mul(2_654_435_761) >> 7) % 10 == 0;
            Target::Number(if (f > 0.0) != flip { 1.0 } else { 0.0 })
        })
        .collect();
    let (classes, y) = ClassLabels::encode(&y).unwrap();
    TrainingData::Classification(ClassificationSet { x, y, classes })
}

fn regression(n: usize) -> TrainingData {
    let x = points(8, n, 23);
    let y = (0..n)
        .map(|i| x.point(i).iter().map(|v| (2.0 * v).sin()).sum::<f64>() + 0.1 * ((i * 37 % 11) as f64 - 5.0) / 5.0)
        .collect();
    TrainingData::Regression(TrainingSet::new(x, y))
}

fn main() {
    mercer::tune_allocator();
    let budget = 4 * GramTable::bytes(4000);
    let all = Environment::new(0, budget);
    let mut rows: Vec<(String, f64, f64)> = Vec::new();

    let only = std::env::var("MERCER_BENCH_ONLY").unwrap_or_default();
    let data = classification(2000);
    let body = json!({"kernel": {"type": "rbf", "gamma": 1.0}, "params": {"c": 1.0, "cache_mb": 200}, "search": {
        "space": {"/params/c": {"log_grid": [0.03125, 32768.0, 11]}, "/kernel/gamma": {"log_grid": [8.0, 3.0517578125e-05, 10]}},
        "cv": 5}});
    let p = plan(ModelKind::Svm, &body, &data);
    let run = |part: &str| only.is_empty() || only == part;
    let (base, best) = if !run("svc") { (0.0, Value::Null) } else { time(&p, &data, all) };
    let svc: Vec<(&str, f64)> = if !run("svc") {
        vec![]
    } else {
        vec![
            ("every reuse (the service)", base),
            ("without the shared Gram table", time(&p, &data, Environment { table_budget: 0, ..all }).0),
            ("one fit at a time, one core", time(&p, &data, Environment { busy: 1, ..all }).0),
        ]
    };
    for (name, s) in svc {
        rows.push((format!("SVC grid.py grid, 110 x 5 folds, n = 2000: {name}"), s, s / base));
    }
    println!("SVC best: {best}");

    for n in [2000usize, 4000].into_iter().filter(|_| run("krr")) {
        let data = regression(n);
        let body = json!({"kernel": {"type": "rbf", "gamma": 1.0}, "params": {"lambda": 1.0, "approximation": "exact"}, "search": {
            "space": {"/params/lambda": {"log_grid": [1e-4, 10.0, 30]}, "/kernel/gamma": {"log_grid": [0.01, 0.1, 2]}},
            "cv": 5}});
        let p = plan(ModelKind::KernelRidge, &body, &data);
        let (eigen, _) = time(&p, &data, all);
        let cholesky = time(&p, &data, Environment { eigen: false, ..all }).0;
        let untabled = time(&p, &data, Environment { eigen: false, table_budget: 0, ..all }).0;
        for (name, s) in [("eigen path", eigen), ("a Cholesky per value, table", cholesky), ("no table", untabled)] {
            rows.push((format!("KRR 30 lambdas x 2 gammas x 5 folds, n = {n}: {name}"), s, s / eigen));
        }
        let mut loo = body.clone();
        loo["search"]["cv"] = json!("loo");
        let p = plan(ModelKind::KernelRidge, &loo, &data);
        let swept = time(&p, &data, all).0;
        let factored = time(&p, &data, Environment { eigen: false, ..all }).0;
        for (name, s) in [("closed-form LOO, eigen path", swept), ("closed-form LOO, a factor per value", factored)] {
            rows.push((format!("KRR 30 lambdas x 2 gammas, n = {n}: {name}"), s, s / eigen));
        }
    }

    // Past the whole table: an SVC search over C at n = 30,000 (24,000 rows per fold),
    // with a lazy table of 18,000 columns (f32, 2.2 GB), a lazy table of all of them
    // (3.6 GB), the whole table (f64, 7.2 GB), none. MERCER_BENCH_D sets the dimension
    // (20); MERCER_BENCH_TABLES picks rows (lazy,all,whole,none).
    if run("lazy") {
        let n = 30_000;
        let d: usize = std::env::var("MERCER_BENCH_D").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
        let pick = std::env::var("MERCER_BENCH_TABLES").unwrap_or_else(|_| "lazy,all,whole,none".into());
        let data = classification_in(d, n);
        let body = json!({"kernel": {"type": "rbf", "gamma": 1.0 / d as f64}, "params": {"c": 1.0, "cache_mb": 200, "approximation": "exact"},
            "search": {"space": {"/params/c": [0.1, 1.0, 10.0]}, "cv": 5}});
        let p = plan(ModelKind::Svm, &body, &data);
        let configs = [
            ("lazy", "lazy table, 18,000 columns (2.2 GB)", 18_000 * 4 * n as u64),
            ("all", "lazy table, every column (3.6 GB)", 4 * (n * n) as u64),
            ("whole", "whole table (7.2 GB)", GramTable::bytes(n)),
            ("none", "no table", 0),
        ];
        for (key, name, budget) in configs.into_iter().filter(|c| pick.split(',').any(|p| p == c.0)) {
            let s = time(&p, &data, Environment::new(0, budget)).0;
            eprintln!("SVC 3 values of C x 5 folds, n = {n}, d = {d}: {name}: {s:.2} s");
            rows.push((format!("SVC 3 values of C x 5 folds, n = {n}, d = {d}: {key}: {name}"), s, 1.0));
        }
    }

    println!("{:<100}{:>10}{:>12}", "search", "seconds", "vs first");
    for (name, s, r) in rows {
        println!("{name:<100}{s:>10.2}{r:>11.2}x");
    }
}

//! Studies beyond one unconstrained objective (issue 53), over HTTP: several objectives
//! with their Pareto front and hypervolume, constraints, pruners and intermediate
//! reports; every bad body at its pointer; replicas and a restart that keep all of it.

mod common;

use common::{pointers, problem, TestServer};
use serde_json::{json, Value};

async fn created(s: &TestServer, body: &Value) -> Value {
    let r = s.post("/studies", body).await;
    assert_eq!(r.status().as_u16(), 201);
    r.json().await.unwrap()
}

async fn suggest(s: &TestServer, id: &str) -> Value {
    let r = s.post(&format!("/studies/{id}/suggest"), &json!({"count": 1})).await;
    assert_eq!(r.status().as_u16(), 200);
    let v: Value = r.json().await.unwrap();
    v["trials"][0].clone()
}

async fn post(s: &TestServer, path: &str, body: &Value) -> (u16, Value) {
    let r = s.post(path, body).await;
    (r.status().as_u16(), r.json().await.unwrap())
}

async fn study(s: &TestServer, id: &str) -> Value {
    s.get(&format!("/studies/{id}")).await.json().await.unwrap()
}

/// Two objectives minimised on [0, 1]^2: f1 = x, f2 = 1 - sqrt(x) + y (ZDT1-like: the
/// front is y = 0).
fn two(v: &Value) -> (f64, f64) {
    let (x, y) = (v["x"].as_f64().unwrap(), v["y"].as_f64().unwrap());
    (x, 1.0 - x.sqrt() + y)
}

/// The hypervolume of minimised pairs against a reference, by the staircase (sorted by
/// f1, each point adds the strip up to the previous point's f2).
fn staircase(mut points: Vec<(f64, f64)>, r: (f64, f64)) -> f64 {
    points.retain(|p| p.0 < r.0 && p.1 < r.1);
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut total, mut ceiling) = (0.0, r.1);
    for (f1, f2) in points {
        if f2 < ceiling {
            total += (r.0 - f1) * (ceiling - f2);
            ceiling = f2;
        }
    }
    total
}

#[tokio::test]
async fn two_objectives_report_their_front_and_its_hypervolume() {
    let s = TestServer::default().await;
    let space = json!({"x": {"uniform": [0, 1]}, "y": {"uniform": [0, 1]}});
    let objectives = json!([{"name": "f1", "direction": "minimize"}, {"name": "f2", "direction": "minimize"}]);
    let st = created(
        &s,
        &json!({"space": space, "objectives": objectives, "reference": {"f1": 1.1, "f2": 2.1}, "seed": 2, "initial": 6}),
    )
    .await;
    let id = st["id"].as_str().unwrap().to_string();
    assert_eq!(st["objectives"], objectives);
    assert!(st.get("direction").is_none() && st["best"].is_null());
    assert_eq!((st["hypervolume"].as_f64(), st["reference_derived"].as_bool()), (Some(0.0), Some(false)));
    let mut told = Vec::new();
    for _ in 0..24 {
        let t = suggest(&s, &id).await;
        let (f1, f2) = two(&t["values"]);
        let (status, back) =
            post(&s, &format!("/studies/{id}/trials/{}", t["id"]), &json!({"values": {"f1": f1, "f2": f2}})).await;
        assert_eq!((status, back["state"].as_str()), (200, Some("complete")), "{back}");
        assert_eq!(back["results"], json!({"f1": f1, "f2": f2}));
        assert!(back.get("value").is_none());
        told.push((f1, f2));
    }
    let got = study(&s, &id).await;
    let front: Vec<(f64, f64)> = got["pareto"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["results"]["f1"].as_f64().unwrap(), t["results"]["f2"].as_f64().unwrap()))
        .collect();
    assert!(!front.is_empty());
    // Exactly the non-dominated told pairs.
    let dominated = |p: &(f64, f64)| told.iter().any(|q| q.0 <= p.0 && q.1 <= p.1 && (q.0 < p.0 || q.1 < p.1));
    let expected: Vec<&(f64, f64)> = told.iter().filter(|p| !dominated(p)).collect();
    assert_eq!(front.len(), expected.len(), "{front:?}");
    assert!(front.iter().all(|p| !dominated(p)));
    let hv = staircase(told.clone(), (1.1, 2.1));
    assert!((got["hypervolume"].as_f64().unwrap() - hv).abs() < 1e-9, "{} against {hv}", got["hypervolume"]);
    assert_eq!(got["reference"], json!({"f1": 1.1, "f2": 2.1}));
    // The modelled suggestions beat the random start: the final front dominates more.
    let random_hv = staircase(told[..6].to_vec(), (1.1, 2.1));
    assert!(hv > random_hv + 0.05, "{hv} against the first six's {random_hv}");

    // Without a reference one is derived: the worst value pushed out by a tenth of the range.
    let derived =
        created(&s, &json!({"space": {"x": {"uniform": [0, 1]}, "y": {"uniform": [0, 1]}}, "objectives": objectives}))
            .await;
    let did = derived["id"].as_str().unwrap().to_string();
    assert!(derived["reference"].is_null());
    for (x, y) in [(0.0, 0.0), (1.0, 0.0), (0.25, 0.5)] {
        let (f1, f2) = two(&json!({"x": x, "y": y}));
        let body = json!({"values": {"x": x, "y": y}, "results": {"f1": f1, "f2": f2}});
        assert_eq!(post(&s, &format!("/studies/{did}/trials"), &body).await.0, 201);
    }
    let got = study(&s, &did).await;
    // f1 in [0, 1], f2 in [0, 1]: reference (1.1, 1.1).
    assert!((got["reference"]["f1"].as_f64().unwrap() - 1.1).abs() < 1e-12, "{}", got["reference"]);
    assert!((got["reference"]["f2"].as_f64().unwrap() - 1.1).abs() < 1e-12);
    assert_eq!(got["reference_derived"], true);
    let hv = staircase(vec![(0.0, 1.0), (1.0, 0.0), (0.25, 1.0)], (1.1, 1.1));
    assert!((got["hypervolume"].as_f64().unwrap() - hv).abs() < 1e-12);
    assert_eq!(got["pareto"].as_array().unwrap().len(), 2);
}

/// Gelbart et al. (2014)'s constrained Branin: `best` is always feasible, infeasible
/// trials say so, and the modelled search finds the constrained minimum's basin.
#[tokio::test]
async fn constraints_keep_the_best_feasible() {
    let s = TestServer::default().await;
    let space = json!({"x1": {"uniform": [-5, 10]}, "x2": {"uniform": [0, 15]}});
    let st =
        created(&s, &json!({"space": space, "constraints": [{"name": "c", "max": 50}], "seed": 4, "initial": 8})).await;
    let id = st["id"].as_str().unwrap().to_string();
    assert_eq!(st["constraints"], json!([{"name": "c", "max": 50.0}]));
    let mut infeasible = 0;
    for _ in 0..30 {
        let t = suggest(&s, &id).await;
        let (x1, x2) = (t["values"]["x1"].as_f64().unwrap(), t["values"]["x2"].as_f64().unwrap());
        let pi = std::f64::consts::PI;
        let f = (x2 - 5.1 / (4.0 * pi * pi) * x1 * x1 + 5.0 / pi * x1 - 6.0).powi(2)
            + 10.0 * (1.0 - 1.0 / (8.0 * pi)) * x1.cos()
            + 10.0;
        let c = (x1 - 2.5).powi(2) + (x2 - 7.5).powi(2);
        let (status, back) =
            post(&s, &format!("/studies/{id}/trials/{}", t["id"]), &json!({"value": f, "values": {"c": c}})).await;
        assert_eq!(status, 200, "{back}");
        assert_eq!(back["feasible"], c <= 50.0);
        assert_eq!(back["results"], json!({"c": c}));
        infeasible += usize::from(c > 50.0);
        let got = study(&s, &id).await;
        if !got["best"].is_null() {
            assert!(got["best"]["results"]["c"].as_f64().unwrap() <= 50.0, "an infeasible best: {}", got["best"]);
            assert_eq!(got["best"]["feasible"], true);
        }
    }
    let got = study(&s, &id).await;
    let best = got["best"]["value"].as_f64().unwrap();
    assert!(best < 1.0, "best feasible {best} (the constrained minimum is 0.398)");
    assert!(infeasible > 0, "some of the random start lies outside the disc");
    // A better infeasible value never becomes the best.
    let t = suggest(&s, &id).await;
    post(&s, &format!("/studies/{id}/trials/{}", t["id"]), &json!({"value": -100.0, "values": {"c": 51.0}})).await;
    let after = study(&s, &id).await;
    assert_eq!(after["best"]["value"].as_f64(), Some(best));
}

#[tokio::test]
async fn the_median_pruner_stops_a_trial_worse_than_the_median() {
    let s = TestServer::default().await;
    let space = json!({"lr": {"log_uniform": [1e-4, 1]}});
    let pruner = json!({"type": "median", "startup_trials": 2});
    let st = created(&s, &json!({"space": space, "pruner": pruner, "initial": 10})).await;
    let id = st["id"].as_str().unwrap().to_string();
    assert_eq!(
        st["pruner"],
        json!({"type": "median", "startup_trials": 2, "warmup_steps": 0, "interval_steps": 1, "min_trials": 1})
    );
    let report = |trial: u64, step: u64, value: f64| {
        let (s, id) = (&s, id.clone());
        async move {
            post(s, &format!("/studies/{id}/trials/{trial}/reports"), &json!({"step": step, "value": value})).await
        }
    };
    // Two complete trials with losses 10 - step and 12 - step.
    for (trial, base) in [(0u64, 10.0), (1, 12.0)] {
        assert_eq!(suggest(&s, &id).await["id"], trial);
        for step in 0..4u64 {
            let (status, answer) = report(trial, step, base - step as f64).await;
            assert_eq!((status, answer["prune"].as_bool()), (200, Some(false)), "fewer complete trials than startup");
        }
        post(&s, &format!("/studies/{id}/trials/{trial}"), &json!({"value": base - 3.0})).await;
    }
    // Medians at step 1: 9 and 11 -> 10.
    assert_eq!(suggest(&s, &id).await["id"], 2);
    assert_eq!(report(2, 0, 9.5).await.1, json!({"trial": 2, "step": 0, "prune": false}));
    assert_eq!(report(2, 1, 10.5).await.1["prune"], false, "its best so far (9.5) is below the median");
    assert_eq!(suggest(&s, &id).await["id"], 3);
    assert_eq!(report(3, 1, 10.5).await.1["prune"], true);
    // The same step again keeps the first value (and answers alike).
    assert_eq!(report(3, 1, 0.0).await.1["prune"], true);
    let (status, pruned) = post(&s, &format!("/studies/{id}/trials/3"), &json!({"state": "pruned"})).await;
    assert_eq!((status, pruned["state"].as_str(), pruned["value"].as_f64()), (200, Some("pruned"), Some(10.5)));
    assert_eq!(pruned["reports"], json!([{"step": 1, "value": 10.5}]));
    let (status, p) = report(3, 2, 1.0).await;
    assert_eq!(status, 409, "a trial no longer pending takes no reports: {p}");
    let got = study(&s, &id).await;
    assert_eq!((got["n_pruned"].as_u64(), got["n_complete"].as_u64()), (Some(1), Some(2)));
    let metrics = s.get("/metrics").await.text().await.unwrap();
    assert!(metrics.contains("mercer_study_pruned_total 1"), "{metrics}");
    assert!(metrics.contains("mercer_study_prune_advice_total 2"));
}

#[tokio::test]
async fn successive_halving_prunes_outside_the_best_quarter() {
    let s = TestServer::default().await;
    let st = created(
        &s,
        &json!({"space": {"a": {"uniform": [0, 1]}}, "pruner": {"type": "halving", "min_resource": 1}, "direction": "maximize"}),
    )
    .await;
    let id = st["id"].as_str().unwrap().to_string();
    assert_eq!(
        st["pruner"],
        json!({"type": "halving", "min_resource": 1, "reduction_factor": 4, "min_early_stopping_rate": 0})
    );
    // Rung 0 at step 1: values 1..8 in turn. With 4 to 7 competitors, the best one is
    // promoted; with 8, the best two.
    let mut decisions = Vec::new();
    for (trial, value) in [5.0, 1.0, 2.0, 8.0, 3.0, 4.0, 7.0, 6.0].into_iter().enumerate() {
        suggest(&s, &id).await;
        let (_, a) =
            post(&s, &format!("/studies/{id}/trials/{trial}/reports"), &json!({"step": 1, "value": value})).await;
        decisions.push(a["prune"].as_bool().unwrap());
    }
    // 5 (alone: kept), 1 (< 5), 2 (< 5), 8 (best of 4), 3, 4 (< 8), 7 (< 8 of 7), 6 (8 values: the
    // second best is 7, so 6 is pruned).
    assert_eq!(decisions, [false, true, true, false, true, true, true, true]);
}

#[tokio::test]
async fn bad_bodies_are_refused_at_their_pointers() {
    let s = TestServer::default().await;
    let space = json!({"x": {"uniform": [0, 1]}});
    let two = json!([{"name": "f1"}, {"name": "f2", "direction": "maximize"}]);
    let cases = [
        (json!({"space": space, "objectives": [{"name": "f1"}]}), "/objectives", 422),
        (json!({"space": space, "objectives": two, "direction": "minimize"}), "/direction", 422),
        (json!({"space": space, "objectives": [{"name": "f"}, {"name": "f"}]}), "/objectives/1/name", 422),
        (
            json!({"space": space, "objectives": [{"name": "f"}, {"name": "g", "direction": "up"}]}),
            "/objectives/1/direction",
            422,
        ),
        (json!({"space": space, "objectives": [{"name": ""}, {"name": "g"}]}), "/objectives/0/name", 422),
        (json!({"space": space, "reference": {"value": 1}}), "/reference", 422),
        (json!({"space": space, "objectives": two, "reference": {"f1": 1, "f3": 2}}), "/reference/f3", 422),
        (json!({"space": space, "objectives": two, "reference": {"f1": 1}}), "/reference/f2", 422),
        (json!({"space": space, "constraints": [{"name": "c"}]}), "/constraints/0/max", 400),
        (
            json!({"space": space, "objectives": two, "constraints": [{"name": "f2", "max": 1}]}),
            "/constraints/0/name",
            422,
        ),
        (json!({"space": space, "pruner": "sometimes"}), "/pruner", 422),
        (json!({"space": space, "pruner": {"type": "median", "interval_steps": 0}}), "/pruner/interval_steps", 422),
        (
            json!({"space": space, "pruner": {"type": "halving", "reduction_factor": 1}}),
            "/pruner/reduction_factor",
            422,
        ),
        (json!({"space": space, "pruner": {"type": "halving", "min_resource": 0}}), "/pruner/min_resource", 422),
        (json!({"space": space, "pruner": {"type": "median", "patience": 3}}), "/pruner/patience", 400),
        (json!({"space": space, "objectives": two, "pruner": "median"}), "/pruner", 422),
    ];
    for (body, at, want) in cases {
        let (status, p) = problem(s.post("/studies", &body).await).await;
        assert_eq!((status, pointers(&p)), (want, vec![at.to_string()]), "{body}: {p}");
    }
    // Tells.
    let multi =
        created(&s, &json!({"space": space, "objectives": two, "constraints": [{"name": "c", "max": 0}]})).await;
    let mid = multi["id"].as_str().unwrap().to_string();
    suggest(&s, &mid).await;
    let tells = [
        (json!({"value": 1.0}), "/value"),
        (json!({"values": {"f1": 1.0, "c": 0.0}}), "/values/f2"),
        (json!({"values": {"f1": 1.0, "f2": 2.0}}), "/values/c"),
        (json!({"values": {"f1": 1.0, "f2": 2.0, "c": 0.0, "z": 1}}), "/values/z"),
        (json!({"values": {"f1": 1.0, "f2": "2", "c": 0.0}}), "/values/f2"),
        (json!({"state": "pruned", "values": {}}), "/values"),
        (json!({"state": "stopped"}), "/state"),
    ];
    for (body, at) in tells {
        let (status, p) = problem(s.post(&format!("/studies/{mid}/trials/0"), &body).await).await;
        assert_eq!((status, pointers(&p)), (422, vec![at.to_string()]), "{body}: {p}");
    }
    let (status, p) =
        problem(s.post(&format!("/studies/{mid}/trials/0/reports"), &json!({"step": 0, "value": 1})).await).await;
    assert_eq!((status, pointers(&p)), (422, vec!["/step".to_string()]), "{p}");
    let ok = post(&s, &format!("/studies/{mid}/trials/0"), &json!({"values": {"f1": 1.0, "f2": 2.0, "c": 0.5}})).await;
    assert_eq!((ok.0, ok.1["feasible"].as_bool()), (200, Some(false)));
    // Reports on an unknown trial, and bad report bodies.
    let single = created(&s, &json!({"space": space, "pruner": "median"})).await;
    let sid = single["id"].as_str().unwrap().to_string();
    assert_eq!(
        s.post(&format!("/studies/{sid}/trials/7/reports"), &json!({"step": 0, "value": 1})).await.status().as_u16(),
        404
    );
    suggest(&s, &sid).await;
    let (status, p) =
        problem(s.post(&format!("/studies/{sid}/trials/0/reports"), &json!({"step": 0, "value": "x"})).await).await;
    assert_eq!((status, pointers(&p)), (422, vec!["/value".to_string()]), "{p}");
    let (status, p) = problem(s.post(&format!("/studies/{sid}/trials/0/reports"), &json!({"value": 1})).await).await;
    assert_eq!(pointers(&p), vec!["/step".to_string()], "{status} {p}");
}

/// Reports, pruned trials, results and the front are stored: another replica reads
/// them, and a restart keeps them.
#[tokio::test]
async fn replicas_and_restarts_keep_reports_results_and_fronts() {
    let dir = std::env::temp_dir().join(format!("mercer-goals-{}", uuid::Uuid::new_v4()));
    let config =
        mercer::config::Config { data_dir: dir.to_str().unwrap().into(), ..mercer::config::Config::for_tests() };
    let space = json!({"x": {"uniform": [0, 1]}, "y": {"uniform": [0, 1]}});
    let (single, multi, before);
    {
        let a = TestServer::start(config.clone()).await;
        a.service().wait_ready().await;
        let st =
            created(&a, &json!({"space": space, "pruner": "median", "constraints": [{"name": "c", "max": 1}]})).await;
        single = st["id"].as_str().unwrap().to_string();
        suggest(&a, &single).await;
        suggest(&a, &single).await;
        post(&a, &format!("/studies/{single}/trials/0/reports"), &json!({"step": 3, "value": 0.5})).await;
        post(&a, &format!("/studies/{single}/trials/0"), &json!({"value": 0.25, "values": {"c": 2.0}})).await;
        post(&a, &format!("/studies/{single}/trials/1/reports"), &json!({"step": 1, "value": 0.75})).await;
        post(&a, &format!("/studies/{single}/trials/1"), &json!({"state": "pruned"})).await;
        let objectives = json!([{"name": "f1"}, {"name": "f2"}]);
        let mt = created(&a, &json!({"space": space, "objectives": objectives, "initial": 2})).await;
        multi = mt["id"].as_str().unwrap().to_string();
        for _ in 0..4 {
            let t = suggest(&a, &multi).await;
            let (f1, f2) = two(&t["values"]);
            post(&a, &format!("/studies/{multi}/trials/{}", t["id"]), &json!({"values": {"f1": f1, "f2": f2}})).await;
        }
        before = (study(&a, &single).await, study(&a, &multi).await);
    }
    let b = TestServer::start(config).await;
    b.service().wait_ready().await;
    let after = (study(&b, &single).await, study(&b, &multi).await);
    assert_eq!(after, before);
    assert_eq!(after.0["trials"][0]["feasible"], false);
    assert_eq!(after.0["best"], Value::Null, "the one complete trial is infeasible");
    assert_eq!(after.0["trials"][1]["state"], "pruned");
    assert_eq!(after.0["trials"][1]["value"], 0.75);
    assert!(after.1["hypervolume"].as_f64().unwrap() > 0.0);
    // Suggestions go on from the stored trials (a pruned one is not suggested again).
    let next = suggest(&b, &single).await;
    assert_eq!(next["id"], 2);
    drop(b);
    let _ = std::fs::remove_dir_all(&dir);
}

//! The command-line client end to end: the built `mercer` binary against a server started
//! in-process, from a CSV file to a model, predictions, listings and a delete; and its
//! failures: a bad CSV, a wrong token, an unreachable server, each a non-zero exit with
//! the reason on stderr.

mod common;

use assert_cmd::Command;
use common::TestServer;
use mercer::config::Config;
use serde_json::Value;
use std::path::PathBuf;

fn temp_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mercer-cli-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs the client off the async threads (the server lives on them) and returns
/// (exit code, stdout, stderr).
async fn mercer(url: &str, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::cargo_bin("mercer").unwrap();
    cmd.env_remove("MERCER_TOKEN").env("MERCER_URL", url).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap()).await.unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

fn sine_csv(n: usize) -> String {
    let mut s = String::from("x,noise,y\n");
    for i in 0..n {
        let x = i as f64 * 6.0 / n as f64;
        s.push_str(&format!("{x},{},{}\n", (i % 3) as f64 * 0.01, x.sin()));
    }
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_a_csv_file_to_predictions_listings_and_a_delete() {
    let s = TestServer::default().await;
    let train = temp_file("train.csv", &sine_csv(40));
    let path = train.to_str().unwrap();
    let (code, out, err) = mercer(
        &s.url,
        &[
            "train",
            path,
            "--target",
            "y",
            "--model",
            "gaussian_process",
            "--kernel",
            "rbf",
            "--param",
            "noise=0.01",
            "--param",
            "normalize_y=true",
            "--optimize",
            "--name",
            "sine",
            "--json",
        ],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let model: Value = serde_json::from_str(&out).unwrap();
    assert_eq!((model["status"].as_str(), model["name"].as_str()), (Some("ready"), Some("sine")));
    assert_eq!(model["params"]["normalize_y"], true);
    assert_eq!(model["params"]["optimize"], true);
    assert_ne!(model["kernel"]["length_scale"], 1.0, "optimised");
    assert!(err.is_empty(), "no progress bar when stderr is not a terminal: {err:?}");
    let id = model["id"].as_str().unwrap();

    // Query columns by name, in another order, with an extra one.
    let query = temp_file("query.csv", "y,x,noise\n0,1.0,0\n0,2.5,0\n");
    let (code, out, err) = mercer(&s.url, &["predict", id, query.to_str().unwrap(), "--variance"], &[]).await;
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "prediction,variance,std");
    let first: Vec<f64> = lines[1].split(',').map(|v| v.parse().unwrap()).collect();
    assert!((first[0] - 1f64.sin()).abs() < 0.05 && first[1] >= 0.0, "{out}");
    let out_file = query.with_file_name("out.csv");
    let (code, out, _) =
        mercer(&s.url, &["predict", id, query.to_str().unwrap(), "-o", out_file.to_str().unwrap()], &[]).await;
    assert_eq!((code, out.as_str()), (0, ""));
    assert_eq!(std::fs::read_to_string(&out_file).unwrap().lines().next(), Some("prediction"));

    // New rows by name, in another order: version 2 with 42 rows. A bad cell names its
    // line and column.
    let more = temp_file("more.csv", "noise,y,x\n0,0.1411,3.0\n0.02,-0.9589,5.0\n");
    let (code, out, err) = mercer(&s.url, &["observe", id, more.to_str().unwrap(), "--target", "y"], &[]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("version     2") && out.contains("n_train     42"), "{out}");
    let bad = temp_file("bad.csv", "x,noise,y\n1.0,0,oops\n");
    let (code, _, err) = mercer(&s.url, &["observe", id, bad.to_str().unwrap()], &[]).await;
    assert_eq!(code, 1);
    assert!(err.contains("line 2") && err.contains("`y`"), "{err}");

    let (code, out, _) = mercer(&s.url, &["models"], &[]).await;
    assert_eq!(code, 0);
    assert!(
        out.starts_with("ID") && out.contains(id) && out.contains("gaussian_process") && out.contains("sine"),
        "{out}"
    );
    let (code, out, _) = mercer(&s.url, &["datasets", "--json"], &[]).await;
    let datasets: Value = serde_json::from_str(&out).unwrap();
    assert_eq!((code, datasets["datasets"][0]["target"].as_str()), (0, Some("y")));
    let (code, out, _) = mercer(&s.url, &["show", id], &[]).await;
    assert_eq!(code, 0);
    assert!(out.contains("status      ready") && out.contains("kernel:") && out.contains("\"type\": \"rbf\""), "{out}");
    let (code, out, _) = mercer(&s.url, &["delete", id], &[]).await;
    assert_eq!((code, out.trim()), (0, format!("deleted {id}").as_str()));
    let (code, _, err) = mercer(&s.url, &["show", id], &[]).await;
    assert_eq!(code, 1);
    assert!(err.contains("Not Found (404)"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_exit_non_zero_with_the_reason() {
    let s = TestServer::start(Config { api_keys: "right-token".into(), ..Config::for_tests() }).await;
    let bad = temp_file("bad.csv", "a,b,y\n1,2,3\n4,oops,6\n");
    let args = ["train", bad.to_str().unwrap(), "--model", "kernel_ridge"];
    let (code, _, err) = mercer(&s.url, &args, &[("MERCER_TOKEN", "right-token")]).await;
    assert_eq!(code, 1);
    assert!(err.contains("Unprocessable Entity (422)") && err.contains("at /line/3"), "{err}");
    assert!(err.contains("column `b`"), "the message names the column: {err}");

    let good = temp_file("good.csv", &sine_csv(10));
    let (code, _, err) =
        mercer(&s.url, &["train", good.to_str().unwrap(), "--model", "kernel_ridge", "--token", "wrong"], &[]).await;
    assert_eq!(code, 1);
    assert!(err.contains("Unauthorized (401)"), "{err}");
    assert!(!err.contains("wrong"), "the token is never printed: {err}");

    let (code, _, err) = mercer(
        &s.url,
        &["train", good.to_str().unwrap(), "--model", "kernel_ridge", "--param", "lambda=-1"],
        &[("MERCER_TOKEN", "right-token")],
    )
    .await;
    assert_eq!(code, 1);
    assert!(err.contains("at /params/lambda"), "{err}");

    let (code, _, err) = mercer("http://127.0.0.1:9", &["models"], &[]).await;
    assert_eq!(code, 1);
    assert!(err.contains("cannot reach http://127.0.0.1:9"), "{err}");

    let (code, _, err) =
        mercer(&s.url, &["train", "/nonexistent.csv", "--model", "svm"], &[("MERCER_TOKEN", "right-token")]).await;
    assert_eq!(code, 1);
    assert!(err.contains("cannot read /nonexistent.csv"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_name_every_subcommand() {
    for shell in ["bash", "zsh", "fish"] {
        let (code, out, _) = mercer("http://unused", &["completions", shell], &[]).await;
        assert_eq!(code, 0);
        for sub in [
            "train",
            "predict",
            "transform",
            "sample",
            "observe",
            "models",
            "kinds",
            "show",
            "delete",
            "datasets",
            "study",
            "alias",
        ] {
            assert!(out.contains(sub), "{shell} completions lack {sub}");
        }
    }
}

/// `mercer train --grid ... --cv ... --scoring ...` searches on the server; `show` prints
/// the candidates ranked, the best first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn train_searches_with_grid_flags_and_show_ranks_the_candidates() {
    let s = TestServer::default().await;
    let train = temp_file("train.csv", &sine_csv(40));
    let path = train.to_str().unwrap();
    let args = [
        "train",
        path,
        "--target",
        "y",
        "--model",
        "kernel_ridge",
        "--grid",
        "/params/lambda=log:1e-4:1:5",
        "--grid",
        "/kernel/length_scale=0.5,2",
        "--cv",
        "4",
        "--scoring",
        "neg_mean_squared_error",
        "--json",
    ];
    let (code, out, err) = mercer(&s.url, &args, &[]).await;
    assert_eq!(code, 0, "{err}");
    let model: Value = serde_json::from_str(&out).unwrap();
    let search = &model["training"]["search"];
    assert_eq!((search["n_candidates"].as_u64(), search["cv"].as_u64()), (Some(10), Some(4)), "{search}");
    assert_eq!(search["scoring"], "neg_mean_squared_error");
    assert_eq!(model["params"]["lambda"], search["best_values"]["/params/lambda"]);
    let id = model["id"].as_str().unwrap();
    let (code, out, err) = mercer(&s.url, &["show", id], &[]).await;
    assert_eq!(code, 0, "{err}");
    let best = search["best_index"].as_u64().unwrap();
    let first_row = out.lines().skip_while(|l| !l.contains("RANK")).nth(1).unwrap();
    assert!(
        first_row.split_whitespace().take(2).eq(["1".to_string(), best.to_string()].iter().map(String::as_str)),
        "{out}"
    );
    assert!(!out.contains("\"fold_scores\""), "the candidates are a table, not JSON: {out}");
    // --cv without a space is refused before anything is sent.
    let (code, _, err) = mercer(&s.url, &["train", path, "--model", "kernel_ridge", "--cv", "3"], &[]).await;
    assert_eq!(code, 1);
    assert!(err.contains("--grid"), "{err}");
}

/// A model without targets from a CSV file: every column is a feature (no target column
/// taken away), and `mercer transform` prints the components as CSV, equal to the API's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kernel_pca_from_a_csv_file_and_its_components() {
    let s = TestServer::default().await;
    let mut text = String::from("a,b,c\n");
    for i in 0..30 {
        let t = i as f64 * 0.2;
        text.push_str(&format!("{},{},{}\n", t.sin(), t.cos(), (i % 4) as f64 * 0.3));
    }
    let train = temp_file("rows.csv", &text);
    let path = train.to_str().unwrap();
    let (code, out, err) = mercer(
        &s.url,
        &[
            "train",
            path,
            "--model",
            "kernel_pca",
            "--kernel-json",
            r#"{"type": "rbf", "gamma": 0.5}"#,
            "--param",
            "n_components=2",
            "--json",
        ],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let model: Value = serde_json::from_str(&out).unwrap();
    assert_eq!((model["n_features"].as_u64(), model["task"].as_str()), (Some(3), Some("transform")), "{model}");
    let id = model["id"].as_str().unwrap();
    let (code, out, err) = mercer(&s.url, &["transform", id, path], &[]).await;
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "component_1,component_2");
    assert_eq!(lines.len(), 31);
    let rows: Vec<Vec<f64>> =
        text.lines().skip(1).map(|l| l.split(',').map(|v| v.parse().unwrap()).collect()).collect();
    let api: Value =
        s.post(&format!("/models/{id}/transform"), &serde_json::json!({"x": rows})).await.json().await.unwrap();
    for (line, want) in lines[1..].iter().zip(api["embedding"].as_array().unwrap()) {
        let got: Vec<f64> = line.split(',').map(|v| v.parse().unwrap()).collect();
        let want: Vec<f64> = want.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        assert_eq!(got, want);
    }
    let (code, _, err) = mercer(&s.url, &["transform", id, "/nonexistent.csv"], &[]).await;
    assert_ne!(code, 0);
    assert!(err.contains("/nonexistent.csv"), "{err}");
}

/// `mercer config` prints the effective settings with each key's name and scope, never
/// its secret (the output lands in terminals, tickets and CI logs); the other settings
/// as read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_prints_the_settings_without_the_keys_secrets() {
    let keys =
        "ops=s3cr3t-token:admin,reader=sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08:predict";
    let env = [("MERCER_API_KEYS", keys), ("MERCER_FIT_WORKERS", "3")];
    let (code, out, err) = mercer("http://unused", &["config"], &env).await;
    assert_eq!(code, 0, "{err}");
    let shown: toml::Value = toml::from_str(&out).unwrap();
    assert_eq!(shown["api_keys"].as_str(), Some("ops=<redacted>:admin,reader=<redacted>:predict"), "{out}");
    assert_eq!(shown["fit_workers"].as_integer(), Some(3), "{out}");
    assert!(!out.contains("s3cr3t") && !out.contains("9f86d081"), "{out}");
}

/// `mercer kinds` prints the server's catalogue: one line per kind, in its order, with
/// its task, whether it takes a target and what it can do; `--json` the served body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kinds_lists_the_servers_catalogue() {
    let s = TestServer::default().await;
    let served: Value = s.get("/models/kinds").await.json().await.unwrap();
    let (code, out, err) = mercer(&s.url, &["kinds", "--json"], &[]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), served);
    let (code, out, err) = mercer(&s.url, &["kinds"], &[]).await;
    assert_eq!(code, 0, "{err}");
    let lines: Vec<Vec<&str>> = out.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(lines[0], ["MODEL", "TASK", "TARGET", "CAN"]);
    let rows = served["kinds"].as_array().unwrap();
    assert_eq!(lines.len(), rows.len() + 1, "{out}");
    for (line, row) in lines[1..].iter().zip(rows) {
        assert_eq!(line[0], row["name"].as_str().unwrap(), "{out}");
        assert_eq!(line[1], row["task"].as_str().unwrap(), "{out}");
        assert_eq!(line[2], if row["targets"] == true { "y" } else { "-" }, "{out}");
        let can = line[3..].join(" ");
        for capability in ["several_outputs", "appends", "nystrom", "posterior", "transform"] {
            assert_eq!(can.contains(capability), row[capability] == true, "{}: {capability} in {out}", line[0]);
        }
    }
}

/// `mercer sample ID FILE.csv -n 4 --seed 2` prints the draws as CSV (a column per draw),
/// the same numbers the API draws from that seed; a model that is not a GP exits non-zero
/// with the problem's pointer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sample_prints_the_draws_of_a_gp() {
    let s = TestServer::default().await;
    let x: Vec<Vec<f64>> = (0..20).map(|i| vec![i as f64 / 4.0]).collect();
    let y: Vec<f64> = x.iter().map(|r| r[0].sin()).collect();
    let gp =
        s.train(&serde_json::json!({"model": "gaussian_process", "params": {"noise": 0.01}, "x": x, "y": y})).await;
    let id = gp["id"].as_str().unwrap();
    let queries = temp_file("queries.csv", "x\n0.3\n2.2\n4.1\n");
    let (code, out, err) =
        mercer(&s.url, &["sample", id, queries.to_str().unwrap(), "-n", "4", "--seed", "2"], &[]).await;
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "sample_1,sample_2,sample_3,sample_4");
    let api: Value = s
        .post(
            &format!("/models/{id}/posterior_samples"),
            &serde_json::json!({"x": [[0.3], [2.2], [4.1]], "n_samples": 4, "seed": 2}),
        )
        .await
        .json()
        .await
        .unwrap();
    let want = api["samples"].as_array().unwrap();
    assert_eq!(lines.len(), 1 + want.len());
    for (line, row) in lines[1..].iter().zip(want) {
        let got: Vec<f64> = line.split(',').map(|v| v.parse().unwrap()).collect();
        let row: Vec<f64> = row.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        assert_eq!(got, row);
    }
    let svm = s.train(&serde_json::json!({"model": "svm", "x": [[0.0], [1.0], [2.0], [3.0]], "y": [0, 0, 1, 1]})).await;
    let (code, _, err) = mercer(&s.url, &["sample", svm["id"].as_str().unwrap(), queries.to_str().unwrap()], &[]).await;
    assert_ne!(code, 0);
    assert!(err.contains("/model"), "{err}");
}

/// Several targets: `--target a,b` trains a multi-output model from a CSV file, predict
/// answers a column per output named by the targets, observe appends rows of both, and
/// sample writes sample_<j>_<k>.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_targets_from_a_csv_file() {
    let s = TestServer::default().await;
    let mut csv = String::from("x,a,b\n");
    for i in 0..30 {
        let x = i as f64 / 5.0;
        csv.push_str(&format!("{x},{},{}\n", x.sin(), 10.0 + x.cos()));
    }
    let train = temp_file("two.csv", &csv);
    let args = [
        "train",
        train.to_str().unwrap(),
        "--target",
        "a,b",
        "--model",
        "gaussian_process",
        "--param",
        "noise=0.01",
        "--json",
    ];
    let (code, out, err) = mercer(&s.url, &args, &[]).await;
    assert_eq!(code, 0, "{err}");
    let model: Value = serde_json::from_str(&out).unwrap();
    let id = model["id"].as_str().unwrap();
    let (code, out, _) = mercer(&s.url, &["datasets", "--json"], &[]).await;
    let datasets: Value = serde_json::from_str(&out).unwrap();
    assert_eq!((code, &datasets["datasets"][0]["target"]), (0, &serde_json::json!(["a", "b"])));
    let query = temp_file("q.csv", "x\n1.0\n2.5\n");
    let (code, out, err) = mercer(&s.url, &["predict", id, query.to_str().unwrap(), "--variance"], &[]).await;
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "prediction_a,prediction_b,variance_a,variance_b,std_a,std_b");
    let first: Vec<f64> = lines[1].split(',').map(|v| v.parse().unwrap()).collect();
    assert!((first[0] - 1f64.sin()).abs() < 0.05 && (first[1] - 10.0 - 1f64.cos()).abs() < 0.05, "{out}");
    let more = temp_file("more.csv", "b,x,a\n9.01,3.1,0.04\n");
    let (code, out, err) = mercer(&s.url, &["observe", id, more.to_str().unwrap(), "--target", "a,b"], &[]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("version     2") && out.contains("n_train     31"), "{out}");
    let (code, out, err) = mercer(&s.url, &["sample", id, query.to_str().unwrap(), "-n", "2"], &[]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().next(), Some("sample_1_0,sample_2_0,sample_1_1,sample_2_1"));
    assert_eq!(out.lines().count(), 3);
}

/// A shell loop's study: create, suggest, tell (and fail), record, show, list, delete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_study_from_the_command_line() {
    let s = TestServer::default().await;
    let space = r#"{"x": {"uniform": [-2, 2]}, "k": {"int_uniform": [1, 3]}}"#;
    let (code, out, err) =
        mercer(&s.url, &["study", "create", "--space", space, "--name", "quad", "--initial", "3"], &[]).await;
    assert_eq!(code, 0, "{err}");
    let id = out.trim().to_string();
    assert_eq!(id.len(), 36, "{out}");
    for round in 0..5u64 {
        let (code, out, err) = mercer(&s.url, &["study", "suggest", &id], &[]).await;
        assert_eq!(code, 0, "{err}");
        let (trial, values) = out.trim().split_once('\t').unwrap();
        assert_eq!(trial, round.to_string());
        let v: serde_json::Value = serde_json::from_str(values).unwrap();
        let f = v["x"].as_f64().unwrap().powi(2) + v["k"].as_f64().unwrap();
        let args: Vec<String> = if round == 1 {
            vec!["study".into(), "tell".into(), id.clone(), trial.into(), "--failed".into()]
        } else {
            vec!["study".into(), "tell".into(), id.clone(), trial.into(), f.to_string()]
        };
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, out, err) = mercer(&s.url, &args, &[]).await;
        assert_eq!(code, 0, "{err}");
        assert!(out.contains(if round == 1 { "failed" } else { "complete" }), "{out}");
    }
    let (code, _, err) = mercer(&s.url, &["study", "record", &id, r#"{"x": 0.0, "k": 1}"#, "-0.5"], &[]).await;
    assert_eq!(code, 0, "{err}");
    let (code, out, _) = mercer(&s.url, &["study", "show", &id], &[]).await;
    assert_eq!(code, 0);
    assert!(out.contains("best: -0.5 at trial 5"), "{out}");
    assert_eq!(out.lines().filter(|l| l.contains("complete")).count(), 5, "{out}");
    let (code, out, _) = mercer(&s.url, &["study", "list"], &[]).await;
    assert!(code == 0 && out.contains(&id) && out.contains("quad"), "{out}");
    let (code, _, err) = mercer(&s.url, &["study", "tell", &id, "0", "1.0"], &[]).await;
    assert_eq!(code, 1);
    assert!(err.contains("409") || err.to_lowercase().contains("conflict"), "{err}");
    let (code, out, _) = mercer(&s.url, &["study", "delete", &id], &[]).await;
    assert!(code == 0 && out.contains("deleted"), "{out}");
}

/// Several objectives, a constraint and a pruner from the command line: create with
/// flags, tell results by name, report steps, tell a trial pruned, show the front.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_study_with_objectives_constraints_and_a_pruner_from_the_command_line() {
    let s = TestServer::default().await;
    let space = r#"{"x": {"uniform": [0, 1]}}"#;
    let args = [
        "study",
        "create",
        "--space",
        space,
        "--objective",
        "cost:minimize",
        "--objective",
        "gain:maximize",
        "--constraint",
        "c:0.5",
        "--reference",
        "cost=2",
        "--reference",
        "gain=-1",
        "--initial",
        "2",
    ];
    let (code, out, err) = mercer(&s.url, &args, &[]).await;
    assert_eq!(code, 0, "{err}");
    let id = out.trim().to_string();
    for round in 0..4u64 {
        let (code, out, err) = mercer(&s.url, &["study", "suggest", &id], &[]).await;
        assert_eq!(code, 0, "{err}");
        let (trial, values) = out.trim().split_once('\t').unwrap();
        let x = serde_json::from_str::<serde_json::Value>(values).unwrap()["x"].as_f64().unwrap();
        let c = if round == 0 { "1.0" } else { "0.0" };
        let (cost, gain) = (format!("cost={x}"), format!("gain={}", x.sqrt()));
        let tell = ["study", "tell", &id, trial, "--result", &cost, "--result", &gain, "--result", &format!("c={c}")];
        let (code, out, err) = mercer(&s.url, &tell, &[]).await;
        assert!(code == 0 && out.contains("complete"), "{out} {err}");
    }
    let (code, out, _) = mercer(&s.url, &["study", "show", &id], &[]).await;
    assert_eq!(code, 0);
    assert!(out.contains("minimize cost, maximize gain") && out.contains("constraints: c <= 0.5"), "{out}");
    assert!(out.contains("pareto front: trials") && out.contains("hypervolume:"), "{out}");
    assert_eq!(out.lines().filter(|l| l.contains("infeasible")).count(), 1, "{out}");
    let got = s.get(&format!("/studies/{id}")).await.json::<serde_json::Value>().await.unwrap();
    assert_eq!(got["reference"], serde_json::json!({"cost": 2.0, "gain": -1.0}));

    // A pruner: two complete trials report 1.0 at step 0; a third's 5.0 is worse than
    // their median.
    let pruner = r#"{"type": "median", "startup_trials": 2}"#;
    let (_, out, err) = mercer(&s.url, &["study", "create", "--space", space, "--pruner", pruner], &[]).await;
    let pid = out.trim().to_string();
    assert_eq!(pid.len(), 36, "{err}");
    for trial in ["0", "1"] {
        mercer(&s.url, &["study", "suggest", &pid], &[]).await;
        let (code, out, err) = mercer(&s.url, &["study", "report", &pid, trial, "0", "1.0"], &[]).await;
        assert_eq!((code, out.trim()), (0, "continue"), "{err}");
        mercer(&s.url, &["study", "tell", &pid, trial, "1.0"], &[]).await;
    }
    mercer(&s.url, &["study", "suggest", &pid], &[]).await;
    let (code, out, _) = mercer(&s.url, &["study", "report", &pid, "2", "0", "5.0"], &[]).await;
    assert_eq!((code, out.trim()), (0, "prune"));
    let (code, out, err) = mercer(&s.url, &["study", "tell", &pid, "2", "--pruned"], &[]).await;
    assert!(code == 0 && out.contains("pruned"), "{out} {err}");
}

/// `mercer study optimize`: a command per trial, its values substituted into its
/// arguments and environment; its result line told, a failing run told failed, and a
/// report the median pruner answers prune kills the run and tells it pruned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn study_optimize_runs_a_command_per_trial() {
    let s = TestServer::default().await;
    let space = r#"{"x": {"uniform": [0, 1]}}"#;
    let (_, out, err) = mercer(&s.url, &["study", "create", "--space", space, "--initial", "3"], &[]).await;
    let id = out.trim().to_string();
    assert_eq!(id.len(), 36, "{err}");
    // (x - 0.3)^2 from the argument, checked against the environment; trial 2 fails.
    let script = r#"[ "{x}" = "$MERCER_PARAM_X" ] || exit 3; [ {trial} = 2 ] && exit 1; echo "working on {x}"; awk "BEGIN { print ({x} - 0.3) ^ 2 }""#;
    let (code, out, err) =
        mercer(&s.url, &["study", "optimize", &id, "--trials", "6", "--", "sh", "-c", script], &[]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().filter(|l| l.starts_with("trial ") && l.contains(" complete ")).count(), 5, "{out}");
    assert!(out.contains("trial 2 failed") && err.contains("working on"), "{out}\n{err}");
    let study = s.get(&format!("/studies/{id}")).await.json::<serde_json::Value>().await.unwrap();
    for t in study["trials"].as_array().unwrap().iter().filter(|t| t["state"] == "complete") {
        let x = t["values"]["x"].as_f64().unwrap();
        assert!((t["value"].as_f64().unwrap() - (x - 0.3).powi(2)).abs() < 1e-5, "{t}");
    }

    // The pruner: trial 0 reports 1 and completes; trial 1 reports 5 at the same step,
    // is told to stop, and would otherwise sleep for a minute (the test would wait for
    // the sleep, which holds the output open, if only the shell were killed).
    let pruner = r#"{"type": "median", "startup_trials": 1}"#;
    let (_, out, _) = mercer(&s.url, &["study", "create", "--space", space, "--pruner", pruner], &[]).await;
    let pid = out.trim().to_string();
    let script = r#"if [ {trial} = 0 ]; then echo "report 0 1"; echo 1; else echo "report 0 5"; sleep 60; echo 1; fi"#;
    let (code, out, err) =
        mercer(&s.url, &["study", "optimize", &pid, "--trials", "2", "--", "sh", "-c", script], &[]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("trial 0 complete") && out.contains("trial 1 pruned"), "{out}");
    let study = s.get(&format!("/studies/{pid}")).await.json::<serde_json::Value>().await.unwrap();
    assert_eq!(study["trials"][1]["reports"], serde_json::json!([{"step": 0, "value": 5.0}]));
}

/// `mercer train --approximation variational --likelihood ... --epochs ...` fits a
/// variational GP; `show` prints its ELBO.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn train_fits_a_variational_gp_from_its_flags() {
    let s = TestServer::default().await;
    let file = temp_file("counts.csv", &{
        let mut text = String::from("x,y\n");
        for i in 0..80 {
            text.push_str(&format!("{},{}\n", i as f64 / 10.0, (i % 7) / 2));
        }
        text
    });
    let args = [
        "train",
        file.to_str().unwrap(),
        "--model",
        "gaussian_process",
        "--approximation",
        "variational",
        "--likelihood",
        "poisson",
        "--inducing-points",
        "12",
        "--epochs",
        "3",
        "--batch-size",
        "20",
    ];
    let (code, out, err) = mercer(&s.url, &args, &[]).await;
    assert_eq!(code, 0, "{err}");
    let id = out.split_whitespace().find(|w| w.len() == 36).unwrap_or_else(|| panic!("an id in {out}"));
    let m: Value = s.get(&format!("/models/{id}")).await.json().await.unwrap();
    let (p, t) = (&m["params"], &m["training"]);
    assert_eq!(
        (p["likelihood"].as_str(), p["batch_size"].as_u64(), p["epochs"].as_u64()),
        (Some("poisson"), Some(20), Some(3))
    );
    assert_eq!(
        (t["approximation"].as_str(), t["inducing_points"].as_u64(), t["epochs"].as_u64()),
        (Some("variational"), Some(12), Some(3))
    );
    let (code, out, _) = mercer(&s.url, &["show", id], &[]).await;
    assert_eq!(code, 0);
    assert!(out.contains("elbo"), "{out}");
}

/// Deploying from the command line: an alias set to one model, a canary and a shadow,
/// a stale --if-match refused, the list, a rollback, the delete guard and --force.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alias_from_the_command_line() {
    let s = TestServer::default().await;
    let (x, y) = common::sine(10);
    let mut ids = Vec::new();
    for lambda in [0.1, 1.0, 3.0] {
        let m =
            s.train(&serde_json::json!({"model": "kernel_ridge", "params": {"lambda": lambda}, "x": x, "y": y})).await;
        ids.push(m["id"].as_str().unwrap().to_string());
    }
    let (a, b, c) = (&ids[0], &ids[1], &ids[2]);
    let (code, out, err) = mercer(&s.url, &["alias", "set", "champion", a], &[]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("generation 1") && out.contains(&format!("{a} 100%")), "{out}");
    let canary = format!("{b}:10");
    let (code, out, err) =
        mercer(&s.url, &["alias", "set", "champion", a, "--canary", &canary, "--shadow", c, "--if-match", "1"], &[])
            .await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("{a} 90%, {b} 10%")) && out.contains(&format!("shadow: {c}")), "{out}");
    let (code, _, err) = mercer(&s.url, &["alias", "set", "champion", b, "--if-match", "1"], &[]).await;
    assert_eq!(code, 1);
    assert!(err.contains("412"), "{err}");
    let (code, out, _) = mercer(&s.url, &["alias", "list"], &[]).await;
    assert!(code == 0 && out.contains("champion") && out.contains(&c[..8]), "{out}");
    let (code, out, _) = mercer(&s.url, &["alias", "get", "champion"], &[]).await;
    assert!(code == 0 && out.lines().filter(|l| l.contains(" set ")).count() == 2, "{out}");
    let (code, out, err) = mercer(&s.url, &["alias", "rollback", "champion"], &[]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("generation 3") && out.contains(&format!("{a} 100%")) && out.contains("shadow: none"),
        "{out}"
    );
    let (code, _, err) = mercer(&s.url, &["delete", a], &[]).await;
    assert_eq!(code, 1);
    assert!(err.contains("champion"), "{err}");
    let (code, _, err) = mercer(&s.url, &["delete", a, "--force"], &[]).await;
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = mercer(&s.url, &["alias", "get", "champion"], &[]).await;
    assert_eq!(code, 1, "deleted with its only model");
    assert!(err.contains("404"), "{err}");
    let (code, out, _) = mercer(&s.url, &["alias", "delete", "nope"], &[]).await;
    assert_eq!(code, 1, "{out}");
}

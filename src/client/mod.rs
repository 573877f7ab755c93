//! The command-line client: `mercer train`, `predict`, `transform`, `sample`, `observe`, `models`,
//! `show`, `delete`, `datasets`, over the HTTP API with reqwest. Tables for people, `--json` for scripts;
//! progress bars on a terminal only; exit status 0 on success, 1 with the server's
//! problem (title, detail, pointers) or the transport error on stderr otherwise.

pub mod alias;
mod http;
mod output;
pub mod study;
pub mod study_loop;

pub use http::{Api, ClientError};

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{json, Map, Value};
use std::path::PathBuf;
use std::time::Duration;

/// Where the server is and how to authenticate: every client subcommand takes these.
#[derive(Args, Debug, Clone)]
pub struct Connection {
    /// The server's base URL.
    #[arg(long, env = "MERCER_URL", default_value = "http://127.0.0.1:8080", global = true)]
    pub url: String,
    /// Bearer token, when the server has API keys (MERCER_TOKEN; never printed).
    #[arg(long, env = "MERCER_TOKEN", hide_env_values = true, global = true)]
    pub token: Option<String>,
    /// Print the server's JSON instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct TrainArgs {
    /// A CSV file: a header row, then one row per sample.
    pub file: PathBuf,
    /// The target column (default: the last one); `a,b` names several (a multi-output
    /// kernel_ridge or gaussian_process).
    #[arg(long)]
    pub target: Option<String>,
    /// The model kind (`mercer kinds` lists the server's). Kinds without targets
    /// (one_class_svm, kernel_pca) take every column as a feature unless --target names one
    /// (kept with the dataset, e.g. to colour the page's plots).
    #[arg(long)]
    pub model: String,
    /// A kernel type with its defaults (rbf, matern, laplacian, ...).
    #[arg(long, conflicts_with = "kernel_json")]
    pub kernel: Option<String>,
    /// A whole kernel as JSON, e.g. '{"type": "matern", "nu": 2.5}'.
    #[arg(long, value_name = "JSON")]
    pub kernel_json: Option<String>,
    /// A model parameter, key=value; the value is read as JSON where it parses
    /// (numbers, true, {"value": 1, "fixed": true}), else as a string. Repeatable.
    #[arg(long = "param", value_name = "KEY=VALUE")]
    pub params: Vec<String>,
    /// Fit the kernel's hyperparameters (params.optimize = true).
    #[arg(long)]
    pub optimize: bool,
    /// params.approximation: auto, exact, nystrom or variational (a variational GP:
    /// gaussian_process, gp_classifier).
    #[arg(long, value_name = "FORM")]
    pub approximation: Option<String>,
    /// params.inducing_points (M) of a nystrom or variational fit.
    #[arg(long, value_name = "M")]
    pub inducing_points: Option<u64>,
    /// params.likelihood of a variational GP: gaussian, student_t, poisson (regression),
    /// bernoulli, softmax (classes).
    #[arg(long)]
    pub likelihood: Option<String>,
    /// params.epochs of a variational GP: passes over the rows.
    #[arg(long)]
    pub epochs: Option<u64>,
    /// params.batch_size of a variational GP: rows per minibatch.
    #[arg(long)]
    pub batch_size: Option<u64>,
    /// A label for the dataset and the model.
    #[arg(long)]
    pub name: Option<String>,
    /// Choose hyperparameters by cross-validation: a whole `search` object, e.g.
    /// '{"space": {"/params/c": [0.1, 1, 10]}, "cv": 5}'. --grid, --cv, --scoring and
    /// --search-method add to it.
    #[arg(long, value_name = "JSON")]
    pub search_json: Option<String>,
    /// A searched hyperparameter, POINTER=VALUES: a comma-separated list
    /// (/params/c=0.1,1,10; each value read as JSON where it parses), or
    /// log:LO:HI:COUNT / lin:LO:HI:COUNT for an evenly spaced grid
    /// (/kernel/gamma=log:1e-3:1e1:9). Repeatable.
    #[arg(long = "grid", value_name = "POINTER=VALUES")]
    pub grid: Vec<String>,
    /// Cross-validation folds of the search: a number, or loo.
    #[arg(long, value_name = "K|loo")]
    pub cv: Option<String>,
    /// How the search scores candidates (r2, neg_mean_squared_error, accuracy, roc_auc, ...).
    #[arg(long)]
    pub scoring: Option<String>,
    /// grid (default), random, halving or bayes.
    #[arg(long, value_name = "METHOD")]
    pub search_method: Option<String>,
}

/// The `search` object of `mercer train`'s flags; None when none asks for a search.
pub fn search_of(args: &TrainArgs) -> Result<Option<Value>, String> {
    let mut search = match &args.search_json {
        Some(text) => serde_json::from_str::<Value>(text).map_err(|e| format!("--search-json: {e}"))?,
        None if args.grid.is_empty() => {
            if args.cv.is_some() || args.scoring.is_some() || args.search_method.is_some() {
                return Err("--cv, --scoring and --search-method need a search: add --grid or --search-json".into());
            }
            return Ok(None);
        }
        None => json!({}),
    };
    let obj = search.as_object_mut().ok_or("--search-json: expected a JSON object")?;
    for g in &args.grid {
        let (pointer, values) = g.split_once('=').ok_or_else(|| format!("--grid {g}: expected POINTER=VALUES"))?;
        let space = obj.entry("space").or_insert_with(|| json!({}));
        let space = space.as_object_mut().ok_or("--search-json: `space` must be an object")?;
        space.insert(pointer.to_string(), grid_values(values).map_err(|e| format!("--grid {g}: {e}"))?);
    }
    if let Some(cv) = &args.cv {
        obj.insert("cv".into(), cv.parse::<u64>().map_or_else(|_| json!(cv), |k| json!(k)));
    }
    if let Some(s) = &args.scoring {
        obj.insert("scoring".into(), json!(s));
    }
    if let Some(m) = &args.search_method {
        obj.insert("method".into(), json!(m));
    }
    Ok(Some(search))
}

/// `0.1,1,10` (values as JSON where they parse), `log:LO:HI:COUNT` or `lin:LO:HI:COUNT`.
fn grid_values(text: &str) -> Result<Value, String> {
    for (prefix, form) in [("log:", "log_grid"), ("lin:", "grid")] {
        if let Some(rest) = text.strip_prefix(prefix) {
            let parts: Vec<&str> = rest.split(':').collect();
            let [lo, hi, count] = parts[..] else {
                return Err(format!("{prefix}LO:HI:COUNT needs three numbers"));
            };
            let num = |s: &str| s.trim().parse::<f64>().map_err(|_| format!("`{s}` is not a number"));
            let count = count.trim().parse::<u64>().map_err(|_| format!("`{count}` is not a count"))?;
            return Ok(json!({form: [num(lo)?, num(hi)?, count]}));
        }
    }
    let values: Vec<Value> = text
        .split(',')
        .map(|v| serde_json::from_str(v.trim()).unwrap_or_else(|_| Value::String(v.trim().to_string())))
        .collect();
    if text.trim().is_empty() {
        return Err("no values".into());
    }
    Ok(Value::Array(values))
}

#[derive(Args, Debug)]
pub struct PredictArgs {
    /// The model's id.
    pub id: String,
    /// A CSV file of query rows (a header row; columns matched by name for models fitted on
    /// a CSV dataset).
    pub file: PathBuf,
    /// Add the variance and standard deviation (Gaussian processes).
    #[arg(long)]
    pub variance: bool,
    /// Write the predictions here instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "OUT.csv")]
    pub output: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct TransformArgs {
    /// The model's id (a ready kernel_pca).
    pub id: String,
    /// A CSV file of rows (a header row; columns matched by name for models fitted on a
    /// CSV dataset).
    pub file: PathBuf,
    /// Write the components here instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "OUT.csv")]
    pub output: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct SampleArgs {
    /// The model's id (a ready gaussian_process, exact or nystrom).
    pub id: String,
    /// A CSV file of query rows (a header row; columns matched by name for models fitted
    /// on a CSV dataset).
    pub file: PathBuf,
    /// Draws per row.
    #[arg(short = 'n', long = "n-samples", default_value_t = 1)]
    pub n_samples: u64,
    /// Seeds the draws: the same seed gives the same draws.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Draw noisy observations (the latent function plus the noise).
    #[arg(long)]
    pub include_noise: bool,
    /// Write the draws here instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "OUT.csv")]
    pub output: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct ObserveArgs {
    /// The model's id (a ready exact gaussian_process or kernel_ridge).
    pub id: String,
    /// A CSV file of new rows: a header row, then the model's feature columns (by name for
    /// a model fitted on a CSV dataset, else by position) and the target.
    pub file: PathBuf,
    /// The target column (default: the last one); `a,b` names several, for a model
    /// fitted on several targets.
    #[arg(long)]
    pub target: Option<String>,
}

/// Appends the CSV's rows to the model (an online update); returns its next version.
pub async fn observe(api: &Api, args: &ObserveArgs) -> Result<Value, ClientError> {
    let path = format!("/models/{}", encode(&args.id));
    let model = api.get_json(&path).await?;
    let features: Option<Vec<String>> =
        model["features"].as_array().map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect());
    let text = tokio::fs::read_to_string(&args.file)
        .await
        .map_err(|e| ClientError::Other(format!("cannot read {}: {e}", args.file.display())))?;
    let (x, y) = observations_of(&text, features.as_deref(), args.target.as_deref())
        .map_err(|e| ClientError::Other(format!("{}: {e}", args.file.display())))?;
    api.post_json(&format!("{path}/observations"), &json!({"x": x, "y": y})).await
}

/// The rows and targets of a CSV text: the target column named (or the last; `a,b`
/// several, giving a list per row), features by the model's names when it has them, else
/// every other column in order.
fn observations_of(
    text: &str,
    features: Option<&[String]>,
    target: Option<&str>,
) -> Result<(Vec<Vec<f64>>, Value), String> {
    let mut reader = csv::ReaderBuilder::new().from_reader(text.as_bytes());
    let header: Vec<String> =
        reader.headers().map_err(|e| e.to_string())?.iter().map(|h| h.trim().to_string()).collect();
    let column = |name: &str| header.iter().position(|h| h == name);
    // An exact column name wins over splitting at commas, as the server's datasets do.
    let targets: Vec<usize> = match target {
        Some(name) if column(name).is_none() && name.contains(',') => name
            .split(',')
            .map(|n| column(n).ok_or_else(|| format!("no column `{n}` in the header")))
            .collect::<Result<_, _>>()?,
        Some(name) => vec![column(name).ok_or_else(|| format!("no column `{name}` in the header"))?],
        None => vec![header.len().checked_sub(1).ok_or("the header is empty")?],
    };
    let several = targets.len() > 1;
    let columns: Vec<usize> = match features {
        Some(names) => names
            .iter()
            .map(|n| column(n).ok_or_else(|| format!("the model's feature column `{n}` is not in the header")))
            .collect::<Result<_, _>>()?,
        None => (0..header.len()).filter(|c| !targets.contains(c)).collect(),
    };
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for record in reader.records() {
        let record = record.map_err(|e| e.to_string())?;
        let line = record.position().map_or(0, |p| p.line());
        let number = |c: usize| {
            let cell = record.get(c).unwrap_or("").trim();
            cell.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| format!("line {line}, column `{}`: `{cell}` is not a number", header[c]))
        };
        x.push(columns.iter().map(|&c| number(c)).collect::<Result<Vec<f64>, _>>()?);
        let row = targets.iter().map(|&c| number(c)).collect::<Result<Vec<f64>, _>>()?;
        y.push(if several { json!(row) } else { json!(row[0]) });
    }
    if x.is_empty() {
        return Err("no rows after the header".into());
    }
    Ok((x, Value::Array(y)))
}

/// Uploads the CSV as a dataset, fits on it, and waits (with a progress bar) until the
/// model is ready; returns the model resource.
pub async fn train(api: &Api, args: &TrainArgs) -> Result<Value, ClientError> {
    let search = search_of(args).map_err(ClientError::Other)?;
    let kernel = match (&args.kernel, &args.kernel_json) {
        (Some(t), _) => Some(json!({"type": t})),
        (None, Some(text)) => {
            Some(serde_json::from_str::<Value>(text).map_err(|e| ClientError::Other(format!("--kernel-json: {e}")))?)
        }
        (None, None) => None,
    };
    let mut params = Map::new();
    for p in &args.params {
        let (key, raw) =
            p.split_once('=').ok_or_else(|| ClientError::Other(format!("--param {p}: expected KEY=VALUE")))?;
        let value = serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string()));
        params.insert(key.to_string(), value);
    }
    if args.optimize {
        params.insert("optimize".into(), Value::Bool(true));
    }
    let flags = [
        ("approximation", args.approximation.as_ref().map(|v| json!(v))),
        ("inducing_points", args.inducing_points.map(|v| json!(v))),
        ("likelihood", args.likelihood.as_ref().map(|v| json!(v))),
        ("epochs", args.epochs.map(|v| json!(v))),
        ("batch_size", args.batch_size.map(|v| json!(v))),
    ];
    for (key, value) in flags {
        if let Some(v) = value {
            params.insert(key.into(), v);
        }
    }
    // Kinds without targets, as the server's catalogue says; an unknown name is the
    // server's to refuse.
    let untargeted = args.target.is_none() && takes_no_target(api, &args.model).await?;
    let mut body = json!({"model": args.model, "params": params});
    if let Some(k) = kernel {
        body["kernel"] = k;
    }
    if let Some(n) = &args.name {
        body["name"] = json!(n);
    }
    if let Some(s) = search {
        body["search"] = s;
    }
    let mut query = Vec::new();
    match &args.target {
        Some(t) => query.push(format!("target={}", encode(t))),
        // These models take no target: every column is a feature (`?target=` empty).
        None if untargeted => query.push("target=".into()),
        None => {}
    }
    if let Some(n) = &args.name {
        query.push(format!("name={}", encode(n)));
    }
    let path = if query.is_empty() { "/datasets".to_string() } else { format!("/datasets?{}", query.join("&")) };
    let dataset = api.upload_csv(&path, &args.file).await?;
    body["dataset"] = dataset["id"].clone();
    fit(api, &body).await
}

/// Whether the server's catalogue (`GET /models/kinds`) lists `model` as a kind without
/// targets. A server that does not know the name, or is too old to serve the catalogue,
/// answers for itself when the fit is asked.
async fn takes_no_target(api: &Api, model: &str) -> Result<bool, ClientError> {
    let kinds = match api.get_json("/models/kinds").await {
        Ok(v) => v,
        Err(ClientError::Problem { status: 404, .. }) => return Ok(false),
        Err(e) => return Err(e),
    };
    let row = kinds["kinds"].as_array().and_then(|rows| rows.iter().find(|r| r["name"] == model));
    Ok(row.is_some_and(|r| r["targets"] == false))
}

/// Starts the fit of `body` and waits for it.
async fn fit(api: &Api, body: &Value) -> Result<Value, ClientError> {
    let model = api.post_json("/models?wait=false", body).await?;
    let id = model["id"].as_str().ok_or_else(|| ClientError::Other("the server answered no model id".into()))?;
    wait_ready(api, id).await
}

/// Polls the model until it is ready (returned) or failed (its problem as the error).
async fn wait_ready(api: &Api, id: &str) -> Result<Value, ClientError> {
    let bar = ProgressBar::new_spinner()
        .with_style(ProgressStyle::with_template("{spinner} fitting {msg}").expect("a valid template"));
    bar.enable_steady_tick(Duration::from_millis(120));
    let mut delay = Duration::from_millis(50);
    let result = loop {
        let model = match api.get_json(&format!("/models/{id}")).await {
            Ok(m) => m,
            Err(e) => break Err(e),
        };
        match model["status"].as_str() {
            Some("ready") => break Ok(model),
            Some("failed") => {
                let e = &model["error"];
                let text = |k: &str| e[k].as_str().unwrap_or("").to_string();
                break Err(ClientError::Problem {
                    status: e["status"].as_u64().unwrap_or(422) as u16,
                    title: text("title"),
                    detail: text("detail"),
                    pointers: Vec::new(),
                });
            }
            status => {
                let p = &model["progress"];
                let mut msg = format!("{} ({})", id, status.unwrap_or("?"));
                if let (Some("search"), Some(total)) = (p["phase"].as_str(), p["total"].as_u64()) {
                    msg = format!("{msg}: search, {} of {total} fold fits", p["iteration"]);
                } else if let (Some("epochs"), Some(epoch)) = (p["phase"].as_str(), p["epoch"].as_u64()) {
                    // A variational fit: its epoch, its minibatch steps, the last epoch's ELBO.
                    msg = format!("{msg}: epoch {epoch}, step {} of {}", p["iteration"], p["total"]);
                    if let Some(o) = p["objective"].as_f64() {
                        msg.push_str(&format!(", ELBO {o:.6e}"));
                    }
                } else if let Some(phase) = p["phase"].as_str() {
                    msg = format!("{msg}: {phase}, iteration {}", p["iteration"]);
                    if let Some(o) = p["objective"].as_f64() {
                        // A cg fit's relative residual runs down to 1e-8: fixed
                        // decimals would show it as 0.000000.
                        let shown = if o != 0.0 && o.abs() < 1e-3 { format!("{o:.3e}") } else { format!("{o:.6}") };
                        msg.push_str(&format!(", objective {shown}"));
                    }
                }
                bar.set_message(msg);
            }
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_millis(500));
    };
    bar.finish_and_clear();
    result
}

/// POSTs the CSV to the model and returns the CSV answer.
pub async fn predict(api: &Api, args: &PredictArgs) -> Result<Vec<u8>, ClientError> {
    let body = tokio::fs::read(&args.file)
        .await
        .map_err(|e| ClientError::Other(format!("cannot read {}: {e}", args.file.display())))?;
    let path = format!("/models/{}/predict?variance={}", encode(&args.id), args.variance);
    api.predict_csv(&path, body).await
}

/// POSTs the CSV to a kernel PCA; returns the server's `{"embedding"}`.
pub async fn transform(api: &Api, args: &TransformArgs) -> Result<Value, ClientError> {
    let body = tokio::fs::read(&args.file)
        .await
        .map_err(|e| ClientError::Other(format!("cannot read {}: {e}", args.file.display())))?;
    api.post_csv_json(&format!("/models/{}/transform", encode(&args.id)), body).await
}

/// POSTs the CSV to a GP's posterior_samples; returns the server's `{"samples"}`.
pub async fn sample(api: &Api, args: &SampleArgs) -> Result<Value, ClientError> {
    let body = tokio::fs::read(&args.file)
        .await
        .map_err(|e| ClientError::Other(format!("cannot read {}: {e}", args.file.display())))?;
    let path = format!(
        "/models/{}/posterior_samples?n_samples={}&seed={}&include_noise={}",
        encode(&args.id),
        args.n_samples,
        args.seed,
        args.include_noise
    );
    api.post_csv_json(&path, body).await
}

/// Draws as CSV: `sample_1, ..., sample_n`, one row per query row; a multi-output
/// model's (m x t x n) have `sample_<j>_<k>` for output k (0-based), output by output.
pub fn samples_csv(answer: &Value) -> String {
    let rows = answer["samples"].as_array().cloned().unwrap_or_default();
    let first = rows.first().and_then(Value::as_array);
    let Some(outputs) = first.filter(|r| r.first().is_some_and(Value::is_array)) else {
        return matrix_csv(answer, "samples", "sample");
    };
    let (t, n) = (outputs.len(), outputs[0].as_array().map_or(0, Vec::len));
    let header: Vec<String> = (0..t).flat_map(|k| (1..=n).map(move |j| format!("sample_{j}_{k}"))).collect();
    let mut out = header.join(",");
    out.push('\n');
    for row in &rows {
        let cells: Vec<String> = row
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|o| o.as_array().into_iter().flatten().map(|v| v.to_string()))
            .collect();
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out
}

/// An embedding as CSV: `component_1, ..., component_k`, one row per input row.
pub fn embedding_csv(answer: &Value) -> String {
    matrix_csv(answer, "embedding", "component")
}

/// The rows of the matrix at `key` as CSV with columns `<column>_1, ...`.
fn matrix_csv(answer: &Value, key: &str, column: &str) -> String {
    let rows = answer[key].as_array().cloned().unwrap_or_default();
    let k = rows.first().and_then(Value::as_array).map_or(0, Vec::len);
    let mut out = (1..=k).map(|j| format!("{column}_{j}")).collect::<Vec<_>>().join(",");
    out.push('\n');
    for row in &rows {
        let cells: Vec<String> = row.as_array().into_iter().flatten().map(|v| v.to_string()).collect();
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out
}

pub use output::{dataset_table, kind_table, model_details, model_table};

/// Percent-encodes a query value or path segment.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// An id as one path segment: anything but the characters of a UUID is escaped.
pub fn path_segment(id: &str) -> String {
    id.bytes()
        .map(|b| if b.is_ascii_alphanumeric() || b == b'-' { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_are_read_by_name_or_position() {
        let csv = "b,y,a\n1,10,2\n3,30,4\n";
        let names = ["a".to_string(), "b".to_string()];
        assert_eq!(
            observations_of(csv, Some(&names), Some("y")).unwrap(),
            (vec![vec![2.0, 1.0], vec![4.0, 3.0]], json!([10.0, 30.0]))
        );
        assert_eq!(
            observations_of(csv, None, None).unwrap(),
            (vec![vec![1.0, 10.0], vec![3.0, 30.0]], json!([2.0, 4.0]))
        );
        assert_eq!(
            observations_of(csv, None, Some("b,y")).unwrap(),
            (vec![vec![2.0], vec![4.0]], json!([[1.0, 10.0], [3.0, 30.0]]))
        );
        let e = observations_of("a,y\n1,x\n", None, None).unwrap_err();
        assert!(e.contains("line 2") && e.contains("`y`"), "{e}");
        let e = observations_of(csv, Some(&["c".to_string()]), Some("y")).unwrap_err();
        assert!(e.contains("`c`"), "{e}");
        assert!(observations_of("a,y\n", None, None).unwrap_err().contains("no rows"));
    }

    fn train_args(extra: &[&str]) -> TrainArgs {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            train: TrainArgs,
        }
        let mut argv = vec!["mercer", "data.csv", "--model", "svm"];
        argv.extend_from_slice(extra);
        Cli::parse_from(argv).train
    }

    #[test]
    fn search_flags_make_a_search_object() {
        assert_eq!(search_of(&train_args(&[])).unwrap(), None);
        let s = search_of(&train_args(&[
            "--grid",
            "/params/c=0.1,1,10",
            "--grid",
            "/kernel/gamma=log:1e-3:1e1:9",
            "--grid",
            "/kernel/type=rbf,laplacian",
            "--cv",
            "3",
            "--scoring",
            "roc_auc",
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            s,
            json!({"space": {"/params/c": [0.1, 1, 10], "/kernel/gamma": {"log_grid": [1e-3, 10.0, 9]},
                             "/kernel/type": ["rbf", "laplacian"]}, "cv": 3, "scoring": "roc_auc"})
        );
        let s = search_of(&train_args(&["--search-json", r#"{"space": {"/params/c": [1]}, "cv": 4}"#, "--cv", "loo"]))
            .unwrap()
            .unwrap();
        assert_eq!(s, json!({"space": {"/params/c": [1]}, "cv": "loo"}));
        assert!(search_of(&train_args(&["--cv", "3"])).is_err(), "--cv without a space");
        assert!(search_of(&train_args(&["--grid", "/params/c=log:1:2"])).is_err());
        assert!(search_of(&train_args(&["--grid", "nopointer"])).is_err());
    }
}

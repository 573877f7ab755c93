//! `mercer study create|suggest|tell|report|optimize|record|show|list|delete`: a study over the
//! HTTP API, for a shell loop that evaluates something and tells the value back (several
//! objectives and constraints as NAME=VALUE pairs; intermediate values for a pruner).

use super::{path_segment as segment, Api, ClientError};
use clap::{Args, Subcommand};
use serde_json::{json, Value};

#[derive(Args, Debug, Clone)]
pub struct StudyArgs {
    #[command(subcommand)]
    pub command: StudyCommand,
}

#[derive(Subcommand, Debug, Clone)]
pub enum StudyCommand {
    /// Create a study; prints its id.
    Create {
        /// The space as JSON, e.g. '{"x": {"uniform": [-5, 10]}, "act": ["relu", "tanh"]}'
        /// (uniform, log_uniform, int_uniform, a list, grid, log_grid).
        #[arg(long)]
        space: String,
        #[arg(long)]
        name: Option<String>,
        /// minimize (default) or maximize.
        #[arg(long, conflicts_with = "objective")]
        direction: Option<String>,
        /// Several objectives, each NAME:minimize or NAME:maximize (2 to 4 of them).
        #[arg(long, value_name = "NAME:DIRECTION")]
        objective: Vec<String>,
        /// The hypervolume's reference point, NAME=VALUE per objective (else derived).
        #[arg(long, value_name = "NAME=VALUE", allow_negative_numbers = true)]
        reference: Vec<String>,
        /// A constraint, NAME:MAX (feasible when the told value is <= MAX).
        #[arg(long, value_name = "NAME:MAX", allow_negative_numbers = true)]
        constraint: Vec<String>,
        /// none, median or halving, or the pruner as JSON (e.g. '{"type": "median",
        /// "startup_trials": 10}').
        #[arg(long)]
        pruner: Option<String>,
        #[arg(long)]
        seed: Option<u64>,
        /// The seeded random trials suggested first (default max(5, 2 x dimensions)).
        #[arg(long)]
        initial: Option<u64>,
    },
    /// Ask for the next points; prints one line per trial: its id and values (JSON).
    Suggest {
        id: String,
        #[arg(long, default_value_t = 1)]
        count: u64,
    },
    /// Tell a trial's value (one objective), its results (--result, for several
    /// objectives and for constraints), or that it --failed or was --pruned.
    Tell {
        id: String,
        trial: u64,
        /// The value the function took there.
        #[arg(allow_negative_numbers = true, required_unless_present_any = ["failed", "pruned", "result"])]
        value: Option<f64>,
        /// A named result: each objective's (when several) and each constraint's.
        #[arg(long, value_name = "NAME=VALUE", allow_negative_numbers = true)]
        result: Vec<String>,
        /// The evaluation failed: the trial is not modelled.
        #[arg(long, conflicts_with_all = ["value", "result", "pruned"])]
        failed: bool,
        /// The trial stopped early (its last report stands for its value).
        #[arg(long, conflicts_with_all = ["value", "result"])]
        pruned: bool,
    },
    /// Report a running trial's intermediate value at a step; prints "prune" (stop it, then
    /// tell it --pruned) or "continue".
    Report {
        id: String,
        trial: u64,
        step: u64,
        #[arg(allow_negative_numbers = true)]
        value: f64,
    },
    /// Run COMMAND for each of --trials trials: `{name}` in its arguments (and
    /// MERCER_PARAM_<NAME> in its environment) holds the trial's values; it prints
    /// `report STEP VALUE` lines for the pruner (a trial to prune is killed) and its
    /// result last: a number, or NAME=VALUE pairs. A non-zero exit fails the trial.
    Optimize {
        id: String,
        #[arg(long)]
        trials: u64,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Record an evaluation the study did not suggest (a warm start).
    Record {
        id: String,
        /// The values as JSON, e.g. '{"x": 1.5, "act": "relu"}'.
        values: String,
        #[arg(allow_negative_numbers = true, required_unless_present = "result")]
        value: Option<f64>,
        /// A named result: each objective's (when several) and each constraint's.
        #[arg(long, value_name = "NAME=VALUE", allow_negative_numbers = true)]
        result: Vec<String>,
    },
    /// Show a study: its trials and its best.
    Show { id: String },
    /// List the studies.
    List,
    /// Delete a study.
    Delete { id: String },
}

fn json_arg(text: &str, what: &str) -> Result<Value, ClientError> {
    serde_json::from_str(text).map_err(|e| ClientError::Other(format!("{what} is not JSON: {e}")))
}

/// NAME<sep>VALUE pairs; VALUE a number unless `text` (a direction).
fn pairs(items: &[String], sep: char, what: &str) -> Result<Vec<(String, Value)>, ClientError> {
    items
        .iter()
        .map(|item| {
            let (name, value) = item
                .rsplit_once(sep)
                .ok_or_else(|| ClientError::Other(format!("{what} `{item}` is not NAME{sep}VALUE")))?;
            let value = match value.parse::<f64>() {
                Ok(v) => json!(v),
                Err(_) => Value::from(value),
            };
            Ok((name.to_string(), value))
        })
        .collect()
}

fn named(items: &[String], what: &str) -> Result<Value, ClientError> {
    Ok(Value::Object(pairs(items, '=', what)?.into_iter().collect()))
}

/// Runs one study command; the server's JSON, and the text to print for people.
pub async fn run(api: &Api, args: &StudyArgs) -> Result<(Value, String), ClientError> {
    match &args.command {
        StudyCommand::Create { space, name, direction, objective, reference, constraint, pruner, seed, initial } => {
            let mut body = json!({"space": json_arg(space, "--space")?});
            for (k, v) in [("name", name.clone().map(Value::from)), ("direction", direction.clone().map(Value::from))] {
                if let Some(v) = v {
                    body[k] = v;
                }
            }
            if !objective.is_empty() {
                body["objectives"] = pairs(objective, ':', "--objective")?
                    .into_iter()
                    .map(|(name, direction)| json!({"name": name, "direction": direction}))
                    .collect();
            }
            if !reference.is_empty() {
                body["reference"] = named(reference, "--reference")?;
            }
            if !constraint.is_empty() {
                body["constraints"] = pairs(constraint, ':', "--constraint")?
                    .into_iter()
                    .map(|(name, max)| json!({"name": name, "max": max}))
                    .collect();
            }
            if let Some(p) = pruner {
                body["pruner"] = if p.trim_start().starts_with('{') { json_arg(p, "--pruner")? } else { json!(p) };
            }
            if let Some(s) = seed {
                body["seed"] = json!(s);
            }
            if let Some(i) = initial {
                body["initial"] = json!(i);
            }
            let study = api.post_json("/studies", &body).await?;
            let text = format!("{}\n", study["id"].as_str().unwrap_or_default());
            Ok((study, text))
        }
        StudyCommand::Suggest { id, count } => {
            let v = api.post_json(&format!("/studies/{}/suggest", segment(id)), &json!({"count": count})).await?;
            let text = v["trials"]
                .as_array()
                .map_or(&[][..], Vec::as_slice)
                .iter()
                .map(|t| format!("{}\t{}\n", t["id"], t["values"]))
                .collect();
            Ok((v, text))
        }
        StudyCommand::Tell { id, trial, value, result, failed, pruned } => {
            let body = if *failed {
                json!({"state": "failed"})
            } else if *pruned {
                json!({"state": "pruned"})
            } else {
                let mut body = json!({});
                if let Some(v) = value {
                    body["value"] = json!(v);
                }
                if !result.is_empty() {
                    body["values"] = named(result, "--result")?;
                }
                body
            };
            let t = api.post_json(&format!("/studies/{}/trials/{trial}", segment(id)), &body).await?;
            let text = format!("trial {} {}\n", t["id"], t["state"].as_str().unwrap_or_default());
            Ok((t, text))
        }
        StudyCommand::Report { id, trial, step, value } => {
            let body = json!({"step": step, "value": value});
            let v = api.post_json(&format!("/studies/{}/trials/{trial}/reports", segment(id)), &body).await?;
            let text = if v["prune"].as_bool() == Some(true) { "prune\n" } else { "continue\n" };
            Ok((v, text.to_string()))
        }
        StudyCommand::Optimize { id, trials, command } => {
            let (study, mut text) = super::study_loop::optimize(api, id, *trials, command).await?;
            text.push_str(&study_details(&study));
            Ok((study, text))
        }
        StudyCommand::Record { id, values, value, result } => {
            let mut body = json!({"values": json_arg(values, "the values")?});
            if let Some(v) = value {
                body["value"] = json!(v);
            }
            if !result.is_empty() {
                body["results"] = named(result, "--result")?;
            }
            let t = api.post_json(&format!("/studies/{}/trials", segment(id)), &body).await?;
            let text = format!("trial {} complete\n", t["id"]);
            Ok((t, text))
        }
        StudyCommand::Show { id } => {
            let s = api.get_json(&format!("/studies/{}", segment(id))).await?;
            let text = study_details(&s);
            Ok((s, text))
        }
        StudyCommand::List => {
            let v = api.get_json("/studies").await?;
            let mut text = format!("{:<36}  {:<16}  {:>6}  {:>8}  {}\n", "ID", "NAME", "TRIALS", "COMPLETE", "BEST");
            for s in v["studies"].as_array().map_or(&[][..], Vec::as_slice) {
                text.push_str(&format!(
                    "{:<36}  {:<16}  {:>6}  {:>8}  {}\n",
                    s["id"].as_str().unwrap_or_default(),
                    s["name"].as_str().unwrap_or("-"),
                    s["trials"].as_array().map_or(0, Vec::len),
                    s["n_complete"],
                    match (s["best"]["value"].as_f64(), s["pareto"].as_array()) {
                        (Some(b), _) => b.to_string(),
                        (None, Some(front)) => format!("front of {}", front.len()),
                        (None, None) => "-".into(),
                    },
                ));
            }
            Ok((v, text))
        }
        StudyCommand::Delete { id } => {
            api.delete(&format!("/studies/{}", segment(id))).await?;
            Ok((Value::Null, format!("deleted {id}\n")))
        }
    }
}

/// A study for people: its definition, best (or front and hypervolume), and a line per
/// trial with its results.
pub fn study_details(s: &Value) -> String {
    let goal = match s["objectives"].as_array() {
        Some(o) => o
            .iter()
            .map(|o| {
                format!("{} {}", o["direction"].as_str().unwrap_or_default(), o["name"].as_str().unwrap_or_default())
            })
            .collect::<Vec<_>>()
            .join(", "),
        None => s["direction"].as_str().unwrap_or_default().to_string(),
    };
    let mut out = format!(
        "study {} ({}, {})\nspace: {}\n",
        s["id"].as_str().unwrap_or_default(),
        s["name"].as_str().unwrap_or("unnamed"),
        goal,
        s["space"]
    );
    let constraints = s["constraints"].as_array().map_or(&[][..], Vec::as_slice);
    if !constraints.is_empty() {
        let list: Vec<String> =
            constraints.iter().map(|c| format!("{} <= {}", c["name"].as_str().unwrap_or_default(), c["max"])).collect();
        out.push_str(&format!("constraints: {}\n", list.join(", ")));
    }
    if s["pruner"]["type"].as_str().is_some_and(|t| t != "none") {
        out.push_str(&format!("pruner: {}\n", s["pruner"]));
    }
    if let Some(front) = s["pareto"].as_array() {
        let ids: Vec<String> = front.iter().map(|t| t["id"].to_string()).collect();
        out.push_str(&format!(
            "pareto front: trials {}\nhypervolume: {} against {}{}\n",
            if ids.is_empty() { "none yet".to_string() } else { ids.join(", ") },
            s["hypervolume"],
            s["reference"],
            if s["reference_derived"] == true { " (derived)" } else { "" }
        ));
    } else {
        match s["best"]["value"].as_f64() {
            Some(b) => out.push_str(&format!("best: {b} at trial {} {}\n", s["best"]["id"], s["best"]["values"])),
            None => out.push_str("best: none yet\n"),
        }
    }
    out.push_str(&format!("{:>5}  {:<10}  {:>14}  VALUES\n", "TRIAL", "STATE", "VALUE"));
    for t in s["trials"].as_array().map_or(&[][..], Vec::as_slice) {
        let state = match (t["state"].as_str().unwrap_or_default(), t["feasible"].as_bool()) {
            ("complete", Some(false)) => "infeasible",
            (state, _) => state,
        };
        let value = match (t["value"].as_f64(), t.get("results")) {
            (Some(v), _) => format!("{v:.6}"),
            (None, Some(r)) => r.to_string(),
            (None, None) => "-".into(),
        };
        out.push_str(&format!("{:>5}  {:<10}  {:>14}  {}\n", t["id"], state, value, t["values"]));
    }
    out
}

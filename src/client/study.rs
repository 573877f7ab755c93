//! `mercer study create|suggest|tell|record|show|list|delete`: a study over the HTTP API,
//! for a shell loop that evaluates something and tells the value back.

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
        #[arg(long)]
        direction: Option<String>,
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
    /// Tell a trial's value (or --failed).
    Tell {
        id: String,
        trial: u64,
        /// The value the function took there.
        #[arg(allow_negative_numbers = true, required_unless_present = "failed")]
        value: Option<f64>,
        /// The evaluation failed: the trial is not modelled.
        #[arg(long, conflicts_with = "value")]
        failed: bool,
    },
    /// Record an evaluation the study did not suggest (a warm start).
    Record {
        id: String,
        /// The values as JSON, e.g. '{"x": 1.5, "act": "relu"}'.
        values: String,
        #[arg(allow_negative_numbers = true)]
        value: f64,
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

/// Runs one study command; the server's JSON, and the text to print for people.
pub async fn run(api: &Api, args: &StudyArgs) -> Result<(Value, String), ClientError> {
    match &args.command {
        StudyCommand::Create { space, name, direction, seed, initial } => {
            let mut body = json!({"space": json_arg(space, "--space")?});
            for (k, v) in [("name", name.clone().map(Value::from)), ("direction", direction.clone().map(Value::from))] {
                if let Some(v) = v {
                    body[k] = v;
                }
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
        StudyCommand::Tell { id, trial, value, failed } => {
            let body = if *failed { json!({"state": "failed"}) } else { json!({"value": value}) };
            let t = api.post_json(&format!("/studies/{}/trials/{trial}", segment(id)), &body).await?;
            let text = format!("trial {} {}\n", t["id"], t["state"].as_str().unwrap_or_default());
            Ok((t, text))
        }
        StudyCommand::Record { id, values, value } => {
            let body = json!({"values": json_arg(values, "the values")?, "value": value});
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
                    s["best"]["value"].as_f64().map_or("-".into(), |b| b.to_string()),
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

/// A study for people: its definition, best, and a line per trial.
pub fn study_details(s: &Value) -> String {
    let mut out = format!(
        "study {} ({}, {})\nspace: {}\n",
        s["id"].as_str().unwrap_or_default(),
        s["name"].as_str().unwrap_or("unnamed"),
        s["direction"].as_str().unwrap_or_default(),
        s["space"]
    );
    match s["best"]["value"].as_f64() {
        Some(b) => out.push_str(&format!("best: {b} at trial {} {}\n", s["best"]["id"], s["best"]["values"])),
        None => out.push_str("best: none yet\n"),
    }
    out.push_str(&format!("{:>5}  {:<9}  {:>14}  VALUES\n", "TRIAL", "STATE", "VALUE"));
    for t in s["trials"].as_array().map_or(&[][..], Vec::as_slice) {
        out.push_str(&format!(
            "{:>5}  {:<9}  {:>14}  {}\n",
            t["id"],
            t["state"].as_str().unwrap_or_default(),
            t["value"].as_f64().map_or("-".into(), |v| format!("{v:.6}")),
            t["values"]
        ));
    }
    out
}

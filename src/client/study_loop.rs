//! `mercer study optimize ID --trials N -- COMMAND...`: the ask-evaluate-tell loop from
//! the shell, so that a study needs no HTTP written by hand.
//!
//! Each trial runs COMMAND once. `{name}` in an argument becomes the trial's value of
//! `name` (`{trial}` its id); the environment carries MERCER_TRIAL, MERCER_PARAMS (the
//! values as JSON) and MERCER_PARAM_<NAME> (upper-cased, other characters as `_`). The
//! command answers on its standard output:
//! - `report STEP VALUE`: an intermediate value, reported to the study's pruner; when it
//!   answers prune, the command is killed and the trial told pruned;
//! - its last other line is the result: a number, or `NAME=VALUE` pairs separated by
//!   spaces (several objectives and constraints; `value=` for a single objective).
//!
//! A command that exits non-zero, or prints no result, makes the trial failed; so does a
//! result the study refuses (the problem is shown and the loop goes on). Other output
//! lines pass through to standard error. Each command runs in a process group of its
//! own, killed whole when its trial is pruned.

use super::{path_segment as segment, Api, ClientError};
use serde_json::{json, Map, Value};
use std::process::Stdio;
use tokio::io::{AsyncBufReadExt, BufReader};

/// A command's result line as a tell body, None when the line is not one.
fn result_body(line: &str) -> Option<Value> {
    if let Ok(v) = line.parse::<f64>() {
        return v.is_finite().then(|| json!({"value": v}));
    }
    let mut body = json!({});
    let mut named = Map::new();
    for pair in line.split_whitespace() {
        let (name, value) = pair.split_once('=')?;
        let value: f64 = value.parse().ok().filter(|v: &f64| v.is_finite())?;
        if name == "value" {
            body["value"] = json!(value);
        } else {
            named.insert(name.to_string(), json!(value));
        }
    }
    if !named.is_empty() {
        body["values"] = Value::Object(named);
    }
    (body != json!({})).then_some(body)
}

/// A value as it goes into an argument or the environment: strings bare, else JSON.
fn plain(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_string)
}

fn env_name(name: &str) -> String {
    let upper: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' }).collect();
    format!("MERCER_PARAM_{upper}")
}

/// `{name}` and `{trial}` in an argument replaced.
fn substitute(arg: &str, values: &Map<String, Value>, trial: u64) -> String {
    let mut out = arg.replace("{trial}", &trial.to_string());
    for (name, v) in values {
        out = out.replace(&format!("{{{name}}}"), &plain(v));
    }
    out
}

/// Kills a trial's command and whatever it started: it runs in a process group of its
/// own, so that a shell's children (which hold its output open) stop with it.
async fn stop(child: &mut tokio::process::Child) {
    if let Some(pid) = child.id() {
        // SAFETY: kill(2) with a negative pid signals the process group the child leads
        // (it was spawned with process_group(0)); it touches no memory of ours.
        unsafe {
            libc::kill(-(pid as libc::pid_t), libc::SIGKILL);
        }
    }
    let _ = child.kill().await;
}

/// Runs COMMAND for `trials` trials; the study as it ends, and a line per trial.
pub async fn optimize(api: &Api, id: &str, trials: u64, command: &[String]) -> Result<(Value, String), ClientError> {
    let Some((program, args)) = command.split_first() else {
        return Err(ClientError::Other("a command to run is needed after --".into()));
    };
    let mut text = String::new();
    for _ in 0..trials {
        let answer = api.post_json(&format!("/studies/{}/suggest", segment(id)), &json!({"count": 1})).await?;
        let trial = &answer["trials"][0];
        let tid = trial["id"].as_u64().ok_or_else(|| ClientError::Other(format!("no trial in {answer}")))?;
        let values = trial["values"].as_object().cloned().unwrap_or_default();
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args.iter().map(|a| substitute(a, &values, tid)))
            .env("MERCER_TRIAL", tid.to_string())
            .env("MERCER_PARAMS", Value::Object(values.clone()).to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        for (name, v) in &values {
            cmd.env(env_name(name), plain(v));
        }
        let mut child = cmd.spawn().map_err(|e| ClientError::Other(format!("cannot run {program}: {e}")))?;
        let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
        let (mut result, mut pruned) = (None, false);
        while let Some(line) = lines.next_line().await.map_err(|e| ClientError::Other(e.to_string()))? {
            let t = line.trim();
            if let Some(rest) = t.strip_prefix("report ") {
                let mut parts = rest.split_whitespace();
                let (step, value) = (
                    parts.next().and_then(|s| s.parse::<u64>().ok()),
                    parts.next().and_then(|s| s.parse::<f64>().ok()),
                );
                if let (Some(step), Some(value)) = (step, value) {
                    let path = format!("/studies/{}/trials/{tid}/reports", segment(id));
                    let decision = api.post_json(&path, &json!({"step": step, "value": value})).await?;
                    if decision["prune"] == true {
                        stop(&mut child).await;
                        pruned = true;
                        break;
                    }
                    continue;
                }
            }
            match result_body(t) {
                Some(body) => result = Some(body),
                None if !t.is_empty() => eprintln!("{line}"),
                None => {}
            }
        }
        let status = child.wait().await.map_err(|e| ClientError::Other(e.to_string()))?;
        let body = match (pruned, status.success(), result) {
            (true, _, _) => json!({"state": "pruned"}),
            (false, true, Some(body)) => body,
            (false, ok, _) => {
                eprintln!("trial {tid}: {}", if ok { "no result line" } else { "the command failed" });
                json!({"state": "failed"})
            }
        };
        let path = format!("/studies/{}/trials/{tid}", segment(id));
        let told = match api.post_json(&path, &body).await {
            Ok(t) => t,
            Err(ClientError::Problem { status: 422, detail, .. }) => {
                eprintln!("trial {tid}: the study refused {body}: {detail}");
                api.post_json(&path, &json!({"state": "failed"})).await?
            }
            Err(e) => return Err(e),
        };
        let shown = told.get("results").or(told.get("value")).map_or(String::new(), |v| format!(" {v}"));
        let line = format!("trial {tid} {}{shown}\n", told["state"].as_str().unwrap_or_default());
        eprint!("{line}");
        text.push_str(&line);
    }
    let study = api.get_json(&format!("/studies/{}", segment(id))).await?;
    Ok((study, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_lines_and_substitutions_read_as_documented() {
        assert_eq!(result_body("0.25"), Some(json!({"value": 0.25})));
        assert_eq!(result_body("f1=1 f2=-2.5"), Some(json!({"values": {"f1": 1.0, "f2": -2.5}})));
        assert_eq!(result_body("value=3 mem=4"), Some(json!({"value": 3.0, "values": {"mem": 4.0}})));
        for not in ["", "epoch 3 done", "x=abc", "nan", "inf"] {
            assert_eq!(result_body(not), None, "{not:?}");
        }
        let values: Map<String, Value> = serde_json::from_value(json!({"lr": 0.01, "act": "relu"})).unwrap();
        assert_eq!(substitute("--lr={lr} --act {act} #{trial}", &values, 7), "--lr=0.01 --act relu #7");
        assert_eq!(env_name("learning-rate"), "MERCER_PARAM_LEARNING_RATE");
    }
}

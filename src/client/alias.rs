//! `mercer alias set|get|list|rollback|delete`: stable names for models over the HTTP
//! API (a canary share and a shadow on `set`; `--if-match` for compare-and-set).

use super::{path_segment as segment, Api, ClientError};
use clap::{Args, Subcommand};
use reqwest::Method;
use serde_json::{json, Value};

#[derive(Args, Debug, Clone)]
pub struct AliasArgs {
    #[command(subcommand)]
    pub command: AliasCommand,
}

#[derive(Subcommand, Debug, Clone)]
pub enum AliasCommand {
    /// Point NAME at model ID (all of its traffic, or what the canaries leave).
    Set {
        name: String,
        /// The model that answers (the rest after the canaries' shares).
        id: String,
        /// A canary: ID:PERCENT of the requests to another model (repeatable).
        #[arg(long, value_name = "ID:PERCENT")]
        canary: Vec<String>,
        /// A model that predicts the same rows after each answer, for comparison only.
        #[arg(long, value_name = "ID")]
        shadow: Option<String>,
        /// Only if the alias is still at this generation (else 412, nothing changed).
        #[arg(long, value_name = "GENERATION")]
        if_match: Option<u64>,
    },
    /// Show an alias: its routes, shadow and the history of its settings.
    Get { name: String },
    /// List the aliases and their routes.
    List,
    /// Put an alias back to the setting before the one in effect.
    Rollback {
        name: String,
        #[arg(long, value_name = "GENERATION")]
        if_match: Option<u64>,
    },
    /// Delete an alias (its models stay).
    Delete {
        name: String,
        #[arg(long, value_name = "GENERATION")]
        if_match: Option<u64>,
    },
}

/// The body of `alias set`: one model, or routes with the canaries' shares taken from
/// the main model's 100.
pub fn set_body(id: &str, canary: &[String], shadow: Option<&str>) -> Result<Value, ClientError> {
    let mut body = if canary.is_empty() {
        json!({"model": id})
    } else {
        let mut routes = Vec::new();
        let mut rest = 100.0;
        for c in canary {
            let bad = || ClientError::Other(format!("--canary {c:?}: expected ID:PERCENT, e.g. 2f1c...:10"));
            let (model, percent) = c.rsplit_once(':').ok_or_else(bad)?;
            let percent: f64 = percent.trim_end_matches('%').parse().map_err(|_| bad())?;
            rest -= percent;
            routes.push(json!({"model": model, "weight": weight(percent)}));
        }
        if rest <= 0.0 {
            return Err(ClientError::Other("the canaries' shares leave nothing for the main model".into()));
        }
        routes.insert(0, json!({"model": id, "weight": weight(rest)}));
        json!({"routes": routes})
    };
    if let Some(s) = shadow {
        body["shadow"] = json!(s);
    }
    Ok(body)
}

/// A whole percentage as an integer (as the server shows it).
fn weight(p: f64) -> Value {
    if p.fract() == 0.0 {
        json!(p as i64)
    } else {
        json!(p)
    }
}

pub async fn run(api: &Api, args: &AliasArgs) -> Result<(Value, String), ClientError> {
    let path = |name: &str| format!("/aliases/{}", segment(name));
    match &args.command {
        AliasCommand::Set { name, id, canary, shadow, if_match } => {
            let body = set_body(id, canary, shadow.as_deref())?;
            let v = api.conditional(Method::PUT, &path(name), Some(&body), *if_match).await?;
            let text = alias_details(&v, false);
            Ok((v, text))
        }
        AliasCommand::Get { name } => {
            let v = api.get_json(&path(name)).await?;
            let text = alias_details(&v, true);
            Ok((v, text))
        }
        AliasCommand::List => {
            let v = api.get_json("/aliases").await?;
            let mut text = format!("{:<24}  {:>4}  {:<16}  {}\n", "NAME", "GEN", "SHADOW", "ROUTES");
            for a in v["aliases"].as_array().map_or(&[][..], Vec::as_slice) {
                text.push_str(&format!(
                    "{:<24}  {:>4}  {:<16}  {}\n",
                    a["name"].as_str().unwrap_or_default(),
                    a["generation"],
                    a["shadow"].as_str().map_or("-".to_string(), short),
                    routes_text(&a["routes"]),
                ));
            }
            Ok((v, text))
        }
        AliasCommand::Rollback { name, if_match } => {
            let v = api.conditional(Method::POST, &format!("{}/rollback", path(name)), None, *if_match).await?;
            let text = alias_details(&v, false);
            Ok((v, text))
        }
        AliasCommand::Delete { name, if_match } => {
            api.conditional(Method::DELETE, &path(name), None, *if_match).await?;
            Ok((Value::Null, format!("deleted alias {name}\n")))
        }
    }
}

/// The first 8 characters of a model id.
fn short(id: &str) -> String {
    id.chars().take(8).collect()
}

fn routes_text(routes: &Value) -> String {
    let parts: Vec<String> = routes
        .as_array()
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .map(|r| format!("{} {}%", r["model"].as_str().unwrap_or_default(), r["weight"]))
        .collect();
    parts.join(", ")
}

/// An alias for people: generation, routes, shadow, and (`history`) its settings.
pub fn alias_details(a: &Value, history: bool) -> String {
    let mut out = format!(
        "alias {} generation {} (set {}{})\nroutes: {}\nshadow: {}\n",
        a["name"].as_str().unwrap_or_default(),
        a["generation"],
        a["updated_at"].as_str().unwrap_or_default(),
        a["updated_by"].as_str().map(|k| format!(" by {k}")).unwrap_or_default(),
        routes_text(&a["routes"]),
        a["shadow"].as_str().unwrap_or("none"),
    );
    if history {
        out.push_str(&format!("{:>5}  {:<9}  {:<24}  ROUTES\n", "GEN", "ACTION", "AT"));
        for h in a["history"].as_array().map_or(&[][..], Vec::as_slice) {
            out.push_str(&format!(
                "{:>5}  {:<9}  {:<24}  {}\n",
                h["generation"],
                h["action"].as_str().unwrap_or_default(),
                h["at"].as_str().unwrap_or_default(),
                routes_text(&h["routes"]),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canaries_take_their_share_from_the_main_model() {
        let b = set_body("a", &["b:10".into(), "c:2.5%".into()], Some("d")).unwrap();
        assert_eq!(
            b,
            json!({"routes": [{"model": "a", "weight": 87.5}, {"model": "b", "weight": 10}, {"model": "c", "weight": 2.5}], "shadow": "d"})
        );
        assert_eq!(set_body("a", &[], None).unwrap(), json!({"model": "a"}));
        assert!(set_body("a", &["b".into()], None).is_err());
        assert!(set_body("a", &["b:100".into()], None).is_err());
    }
}

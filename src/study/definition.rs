//! A study's definition (its space, objectives, constraints and pruner) and the bodies
//! that tell it something (a tell, a warm start, a report), read with errors pointing
//! into them.

use super::pruner::Pruner;
use super::{Goal, StudySpace};
use crate::spec::{json_type_name, pointer_token, FieldError, ObjectReader};
use serde_json::{json, Map, Value};
use uuid::Uuid;

/// Objectives a study may have at most, and constraints.
pub const MAX_OBJECTIVES: usize = 4;
pub const MAX_CONSTRAINTS: usize = 8;

/// One objective: its name (`value` for a study's only one) and direction.
#[derive(Debug, Clone, PartialEq)]
pub struct Objective {
    pub name: String,
    pub maximize: bool,
}

/// One constraint: feasible when the told value is at most `max`.
#[derive(Debug, Clone, PartialEq)]
pub struct Constraint {
    pub name: String,
    pub max: f64,
}

/// A study's definition, as created.
#[derive(Debug, Clone)]
pub struct Definition {
    pub id: Uuid,
    pub name: Option<String>,
    /// The space as the client wrote it.
    pub space_json: Value,
    pub space: StudySpace,
    /// One objective (named `value`), or 2 to [`MAX_OBJECTIVES`] named ones.
    pub objectives: Vec<Objective>,
    /// The hypervolume's reference point as given, in the objectives' order.
    pub reference: Option<Vec<f64>>,
    pub constraints: Vec<Constraint>,
    pub pruner: Pruner,
    pub seed: u64,
    pub initial: u64,
    pub created_at: String,
}

fn direction(v: Option<&str>, at: &str) -> Result<bool, FieldError> {
    match v {
        None | Some("minimize") => Ok(false),
        Some("maximize") => Ok(true),
        Some(other) => Err(FieldError::invalid(at, format!("`{other}` is neither \"minimize\" nor \"maximize\""))),
    }
}

/// A name of an objective or constraint: 1 to 64 characters, not taken.
fn check_name(name: &str, at: String, taken: &[&str]) -> Result<(), FieldError> {
    let chars = name.chars().count();
    if chars == 0 || chars > 64 {
        return Err(FieldError::invalid(at, "a name has 1 to 64 characters"));
    }
    if taken.contains(&name) {
        return Err(FieldError::invalid(at, format!("`{name}` names another objective or constraint")));
    }
    Ok(())
}

fn list<'a>(v: &'a Value, at: &str, what: &str) -> Result<&'a Vec<Value>, FieldError> {
    v.as_array().ok_or_else(|| FieldError::shape(at, format!("expected a list of {what}, found {}", json_type_name(v))))
}

fn objectives(v: &Value) -> Result<Vec<Objective>, FieldError> {
    let items = list(v, "/objectives", "objectives")?;
    if !(2..=MAX_OBJECTIVES).contains(&items.len()) {
        return Err(FieldError::invalid(
            "/objectives",
            format!("{} objectives; a study has 2 to {MAX_OBJECTIVES} (one: use `direction`)", items.len()),
        ));
    }
    let mut out: Vec<Objective> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("/objectives/{i}");
        let mut obj = ObjectReader::new(item, &at)?;
        let name = obj.str("name")?.ok_or_else(|| FieldError::shape(format!("{at}/name"), "missing field `name`"))?;
        let taken: Vec<&str> = out.iter().map(|o| o.name.as_str()).collect();
        check_name(name, format!("{at}/name"), &taken)?;
        let maximize = direction(obj.str("direction")?, &format!("{at}/direction"))?;
        obj.finish()?;
        out.push(Objective { name: name.to_string(), maximize });
    }
    Ok(out)
}

fn constraints(v: &Value, objectives: &[Objective]) -> Result<Vec<Constraint>, FieldError> {
    let items = list(v, "/constraints", "constraints")?;
    if items.len() > MAX_CONSTRAINTS {
        return Err(FieldError::invalid(
            "/constraints",
            format!("{} constraints; at most {MAX_CONSTRAINTS}", items.len()),
        ));
    }
    let mut out: Vec<Constraint> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("/constraints/{i}");
        let mut obj = ObjectReader::new(item, &at)?;
        let name = obj.str("name")?.ok_or_else(|| FieldError::shape(format!("{at}/name"), "missing field `name`"))?;
        let mut taken: Vec<&str> = out.iter().map(|c| c.name.as_str()).collect();
        if objectives.len() > 1 {
            taken.extend(objectives.iter().map(|o| o.name.as_str()));
        }
        check_name(name, format!("{at}/name"), &taken)?;
        let max = obj.f64("max")?.ok_or_else(|| FieldError::shape(format!("{at}/max"), "missing field `max`"))?;
        if !max.is_finite() {
            return Err(FieldError::invalid(format!("{at}/max"), "must be a finite number"));
        }
        obj.finish()?;
        out.push(Constraint { name: name.to_string(), max });
    }
    Ok(out)
}

fn pruner(v: &Value) -> Result<Pruner, FieldError> {
    let kind = match v {
        Value::String(s) => s.as_str(),
        Value::Object(m) => m
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| FieldError::invalid("/pruner/type", "missing: \"none\", \"median\" or \"halving\""))?,
        other => {
            return Err(FieldError::shape(
                "/pruner",
                format!("expected \"none\", \"median\", \"halving\" or an object, found {}", json_type_name(other)),
            ))
        }
    };
    let mut pruner = match kind {
        "none" => Pruner::None,
        "median" => Pruner::MEDIAN,
        "halving" => Pruner::HALVING,
        other => {
            let at = if v.is_string() { "/pruner" } else { "/pruner/type" };
            return Err(FieldError::invalid(at, format!("`{other}` is not \"none\", \"median\" or \"halving\"")));
        }
    };
    if v.is_object() {
        let mut obj = ObjectReader::new(v, "/pruner")?;
        obj.take("type");
        match &mut pruner {
            Pruner::None => {}
            Pruner::Median { startup_trials, warmup_steps, interval_steps, min_trials } => {
                *startup_trials = obj.u64("startup_trials")?.unwrap_or(*startup_trials);
                *warmup_steps = obj.u64("warmup_steps")?.unwrap_or(*warmup_steps);
                *interval_steps = obj.u64("interval_steps")?.unwrap_or(*interval_steps);
                *min_trials = obj.u64("min_trials")?.unwrap_or(*min_trials);
                if *interval_steps == 0 {
                    return Err(FieldError::invalid("/pruner/interval_steps", "must be at least 1"));
                }
                if *min_trials == 0 {
                    return Err(FieldError::invalid("/pruner/min_trials", "must be at least 1"));
                }
            }
            Pruner::Halving { min_resource, reduction_factor, min_early_stopping_rate } => {
                match obj.take("min_resource") {
                    None | Some(Value::String(_)) if obj_is_auto(v) => *min_resource = None,
                    None => {}
                    Some(r) => match r.as_u64() {
                        Some(r) if r >= 1 => *min_resource = Some(r),
                        _ => return Err(FieldError::invalid("/pruner/min_resource", "\"auto\" or an integer >= 1")),
                    },
                }
                *reduction_factor = obj.u64("reduction_factor")?.unwrap_or(*reduction_factor);
                if *reduction_factor < 2 {
                    return Err(FieldError::invalid("/pruner/reduction_factor", "must be at least 2"));
                }
                *min_early_stopping_rate = obj.u64("min_early_stopping_rate")?.unwrap_or(*min_early_stopping_rate);
                if *min_early_stopping_rate > 30 {
                    return Err(FieldError::invalid("/pruner/min_early_stopping_rate", "at most 30"));
                }
            }
        }
        obj.finish()?;
    }
    Ok(pruner)
}

/// Whether a halving pruner's `min_resource` is absent or "auto".
fn obj_is_auto(v: &Value) -> bool {
    matches!(v.get("min_resource"), None | Some(Value::Null)) || v["min_resource"] == "auto"
}

/// The pruner as a study reports it, every setting filled in.
pub fn pruner_json(p: &Pruner) -> Value {
    match p {
        Pruner::None => json!({"type": "none"}),
        Pruner::Median { startup_trials, warmup_steps, interval_steps, min_trials } => json!({
            "type": "median", "startup_trials": startup_trials, "warmup_steps": warmup_steps,
            "interval_steps": interval_steps, "min_trials": min_trials,
        }),
        Pruner::Halving { min_resource, reduction_factor, min_early_stopping_rate } => json!({
            "type": "halving", "min_resource": min_resource.map_or(json!("auto"), |r| json!(r)),
            "reduction_factor": reduction_factor, "min_early_stopping_rate": min_early_stopping_rate,
        }),
    }
}

impl Definition {
    /// Reads a create body; errors point into it.
    /// A body read as a study created at `created_at` (RFC 3339).
    pub fn from_json(id: Uuid, body: &Value, created_at: String) -> Result<Definition, FieldError> {
        let mut obj = ObjectReader::new(body, "")?;
        let name = obj.str("name")?.map(str::to_owned);
        let space_json =
            obj.take("space").cloned().ok_or_else(|| FieldError::shape("/space", "missing field `space`"))?;
        let space = StudySpace::from_json(&space_json)?;
        let single = obj.str("direction")?.map(str::to_owned);
        let objectives = match obj.take("objectives") {
            Some(v) => {
                if single.is_some() {
                    return Err(FieldError::invalid("/direction", "give `direction` or `objectives`, not both"));
                }
                objectives(v)?
            }
            None => vec![Objective { name: "value".into(), maximize: direction(single.as_deref(), "/direction")? }],
        };
        let reference = match obj.take("reference") {
            None => None,
            Some(_) if objectives.len() == 1 => {
                return Err(FieldError::invalid("/reference", "only a study with several objectives has one"))
            }
            Some(v) => {
                Some(named_numbers(v, "/reference", &objectives.iter().map(|o| o.name.as_str()).collect::<Vec<_>>())?)
            }
        };
        let constraints = match obj.take("constraints") {
            None => Vec::new(),
            Some(v) => constraints(v, &objectives)?,
        };
        let pruner = match obj.take("pruner") {
            None => Pruner::None,
            Some(v) => pruner(v)?,
        };
        if objectives.len() > 1 && pruner != Pruner::None {
            return Err(FieldError::invalid("/pruner", "a study with several objectives has no pruner (as Optuna)"));
        }
        let seed = obj.u64("seed")?.unwrap_or(0);
        let initial = obj.u64("initial")?.unwrap_or((2 * space.names.len() as u64).max(5));
        if initial == 0 {
            return Err(FieldError::invalid("/initial", "must be at least 1"));
        }
        obj.finish()?;
        Ok(Definition {
            id,
            name,
            space_json,
            space,
            objectives,
            reference,
            constraints,
            pruner,
            seed,
            initial,
            created_at,
        })
    }

    /// Whether the study has several objectives.
    pub fn multi(&self) -> bool {
        self.objectives.len() > 1
    }

    /// The single objective's direction (the first's, with several).
    pub fn maximize(&self) -> bool {
        self.objectives[0].maximize
    }

    /// The create body's fields as stored and reported.
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "id": self.id, "name": self.name, "space": self.space_json,
            "constraints": self.constraints.iter().map(|c| json!({"name": c.name, "max": c.max})).collect::<Vec<_>>(),
            "pruner": pruner_json(&self.pruner),
            "seed": self.seed, "initial": self.initial, "created_at": self.created_at,
        });
        if self.multi() {
            v["objectives"] = self
                .objectives
                .iter()
                .map(|o| json!({"name": o.name, "direction": if o.maximize { "maximize" } else { "minimize" }}))
                .collect();
            if let Some(r) = &self.reference {
                v["reference"] = self.named(r);
            }
        } else {
            v["direction"] = json!(if self.maximize() { "maximize" } else { "minimize" });
        }
        v
    }

    pub fn from_stored(bytes: &[u8]) -> Result<Definition, String> {
        let v: Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        let id = v["id"].as_str().and_then(|s| Uuid::parse_str(s).ok()).ok_or("no id")?;
        let mut body = json!({"name": v["name"], "space": v["space"], "seed": v["seed"], "initial": v["initial"]});
        for field in ["direction", "objectives", "reference", "constraints", "pruner"] {
            if !v[field].is_null() {
                body[field] = v[field].clone();
            }
        }
        let created_at = v["created_at"].as_str().unwrap_or_default().to_string();
        Definition::from_json(id, &body, created_at).map_err(|e| e.to_string())
    }

    /// What the surrogate optimises.
    pub fn goal(&self) -> Goal {
        Goal {
            objectives: self.objectives.len(),
            limits: self.constraints.iter().map(|c| c.max).collect(),
            reference: self.reference.as_ref().map(|r| self.oriented(r)),
        }
    }

    /// Whether told results (objectives, then constraints) meet every constraint.
    pub fn feasible(&self, results: &[f64]) -> bool {
        self.constraints.iter().zip(&results[self.objectives.len()..]).all(|(c, v)| *v <= c.max)
    }

    /// Told results (objectives, then constraints) as the surrogate sees them: objectives
    /// "greater is better".
    pub fn oriented(&self, results: &[f64]) -> Vec<f64> {
        results
            .iter()
            .enumerate()
            .map(|(i, &v)| match self.objectives.get(i) {
                Some(o) if !o.maximize => -v,
                _ => v,
            })
            .collect()
    }

    /// The names of the results told by name: the objectives (when several), then the
    /// constraints. (A single objective is told as `value`.)
    pub fn result_names(&self) -> Vec<&str> {
        let objectives = if self.multi() { &self.objectives[..] } else { &[] };
        objectives.iter().map(|o| o.name.as_str()).chain(self.constraints.iter().map(|c| c.name.as_str())).collect()
    }

    /// Results (objectives then constraints; a single objective's value left out) as
    /// `{name: value}`; also a reference point (objectives only).
    pub fn named(&self, results: &[f64]) -> Value {
        let skip = if self.multi() || results.len() == self.objectives.len() { 0 } else { 1 };
        Value::Object(
            self.result_names()
                .into_iter()
                .zip(&results[skip..])
                .map(|(n, v)| (n.to_string(), json!(v)))
                .collect::<Map<_, _>>(),
        )
    }

    /// A tell's or a warm start's results, in order: `value` (one objective) and
    /// `{name: number}` at `at` (`/values` or `/results`) for the other names.
    pub fn read_results(&self, value: Option<&Value>, named: Option<&Value>, at: &str) -> Result<Vec<f64>, FieldError> {
        let by_name = self.result_names();
        let mut out = Vec::with_capacity(by_name.len() + 1);
        if self.multi() {
            if value.is_some() {
                return Err(FieldError::invalid(
                    "/value",
                    format!("this study has several objectives: tell them in `{}`", &at[1..]),
                ));
            }
        } else {
            let v = value.ok_or_else(|| FieldError::invalid("/value", "missing: tell a value, or state \"failed\""))?;
            out.push(finite(v, "/value")?);
        }
        let empty = json!({});
        let named = match named {
            Some(n) => n,
            None if by_name.is_empty() => &empty,
            None => return Err(FieldError::invalid(at, format!("missing: {}", by_name.join(", ")))),
        };
        out.extend(named_numbers(named, at, &by_name)?);
        Ok(out)
    }
}

/// `{name: number}` holding exactly these names, in their order; 422 at `at/<name>`.
fn named_numbers(v: &Value, at: &str, names: &[&str]) -> Result<Vec<f64>, FieldError> {
    let Value::Object(map) = v else {
        return Err(FieldError::shape(at, format!("expected an object of name: number, found {}", json_type_name(v))));
    };
    if let Some(extra) = map.keys().find(|k| !names.contains(&k.as_str())) {
        return Err(FieldError::invalid(
            format!("{at}/{}", pointer_token(extra)),
            format!("not a name of this study's objectives or constraints ({})", names.join(", ")),
        ));
    }
    names
        .iter()
        .map(|n| {
            let p = format!("{at}/{}", pointer_token(n));
            match map.get(*n) {
                None => Err(FieldError::invalid(p, "missing: every objective and constraint needs a value")),
                Some(v) => finite(v, &p),
            }
        })
        .collect()
}

pub fn finite(v: &Value, at: &str) -> Result<f64, FieldError> {
    match v.as_f64() {
        Some(x) if x.is_finite() => Ok(x),
        _ => Err(FieldError::invalid(at, format!("must be a finite number, not {v}"))),
    }
}

/// What a tell says.
#[derive(Debug, Clone, PartialEq)]
pub enum Told {
    /// The results, objectives then constraints, as told.
    Complete(Vec<f64>),
    Failed,
    Pruned,
}

/// A tell body: `{"value"}` and/or `{"values"}`, `{"state": "failed"}` or `{"state": "pruned"}`.
pub fn read_tell(d: &Definition, body: &Value) -> Result<Told, FieldError> {
    let mut obj = ObjectReader::new(body, "")?;
    let state = obj.str("state")?.map(str::to_owned);
    let value = obj.take("value");
    let values = obj.take("values");
    obj.finish()?;
    match state.as_deref() {
        Some(s @ ("failed" | "pruned")) => {
            if value.is_some() {
                return Err(FieldError::invalid("/value", format!("a {s} trial has no value")));
            }
            if values.is_some() {
                return Err(FieldError::invalid("/values", format!("a {s} trial has no values")));
            }
            Ok(if s == "failed" { Told::Failed } else { Told::Pruned })
        }
        Some("complete") | None => d.read_results(value, values, "/values").map(Told::Complete),
        Some(other) => {
            Err(FieldError::invalid("/state", format!("`{other}` is neither \"complete\", \"failed\" nor \"pruned\"")))
        }
    }
}

/// A tell as stored.
pub fn tell_json(d: &Definition, told: &Told, now: String) -> Value {
    match told {
        Told::Complete(results) => {
            let mut v = json!({"state": "complete", "told_at": now});
            if !d.multi() {
                v["value"] = json!(results[0]);
            }
            if !d.result_names().is_empty() {
                v["results"] = d.named(results);
            }
            v
        }
        Told::Failed => json!({"state": "failed", "told_at": now}),
        Told::Pruned => json!({"state": "pruned", "told_at": now}),
    }
}

/// A stored tell read back (None when it is damaged or no longer fits the study).
pub fn tell_from_stored(d: &Definition, v: &Value) -> Option<Told> {
    match v["state"].as_str() {
        Some("failed") => Some(Told::Failed),
        Some("pruned") => Some(Told::Pruned),
        _ => {
            let value = (!d.multi()).then(|| v.get("value")).flatten();
            d.read_results(value, v.get("results"), "/results").ok().map(Told::Complete)
        }
    }
}

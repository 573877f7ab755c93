//! What an alias is: its settings (routes with weights, a shadow, who set them and
//! when), the body of a PUT checked into one, its stored form, and the choice of a
//! route for a request.

use crate::spec::FieldError;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use uuid::Uuid;

/// Settings a client is shown (the one in effect and those before it).
pub const HISTORY: usize = 50;

/// Routes one alias may have.
pub const MAX_ROUTES: usize = 16;

/// One model an alias sends a share of its requests to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Route {
    pub model: Uuid,
    /// Percent of the requests, > 0; an alias's weights sum to 100.
    pub weight: f64,
}

/// What made a setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// PUT /aliases/{name}.
    Set,
    /// POST /aliases/{name}/rollback: an earlier setting again.
    Rollback,
    /// DELETE /aliases/{name}: no routes, and the name answers 404.
    Delete,
    /// A forced model delete took one of its models out.
    Unroute,
}

/// One generation of an alias.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Setting {
    pub generation: u64,
    pub action: Action,
    pub routes: Vec<Route>,
    pub shadow: Option<Uuid>,
    /// RFC 3339, milliseconds.
    pub at: String,
    /// The API key that made it (None without keys).
    pub by: Option<String>,
    /// A rollback's: the generation whose routes and shadow it restored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restores: Option<u64>,
}

impl Action {
    pub fn name(self) -> &'static str {
        match self {
            Action::Set => "set",
            Action::Rollback => "rollback",
            Action::Delete => "delete",
            Action::Unroute => "unroute",
        }
    }
}

impl Setting {
    pub fn is_deleted(&self) -> bool {
        self.action == Action::Delete
    }

    /// The generation whose setting this one is in effect: a rollback's is the one it
    /// restored, so that a second rollback goes on back rather than undoing the first.
    fn origin(&self) -> u64 {
        self.restores.unwrap_or(self.generation)
    }

    /// Every model it names: routes, then the shadow.
    pub fn models(&self) -> impl Iterator<Item = Uuid> + '_ {
        self.routes.iter().map(|r| r.model).chain(self.shadow)
    }

    pub fn names(&self, id: Uuid) -> bool {
        self.models().any(|m| m == id)
    }

    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "generation": self.generation,
            "action": self.action,
            "routes": routes_json(&self.routes),
            "shadow": self.shadow,
            "at": self.at,
            "by": self.by,
        });
        if let Some(r) = self.restores {
            v["restores"] = json!(r);
        }
        v
    }

    /// The routes left once `id` is taken out, their weights scaled back to 100, and
    /// the shadow unless it was `id`.
    pub fn without(&self, id: Uuid) -> (Vec<Route>, Option<Uuid>) {
        let kept: Vec<Route> = self.routes.iter().filter(|r| r.model != id).cloned().collect();
        let total: f64 = kept.iter().map(|r| r.weight).sum();
        let routes = kept.into_iter().map(|r| Route { model: r.model, weight: r.weight * 100.0 / total }).collect();
        (routes, self.shadow.filter(|&s| s != id))
    }

    /// The route a request takes: `draw` in [0, 1) against the cumulative weights.
    pub fn choose(&self, draw: f64) -> Uuid {
        let total: f64 = self.routes.iter().map(|r| r.weight).sum();
        let mut at = draw * total;
        for r in &self.routes {
            if at < r.weight {
                return r.model;
            }
            at -= r.weight;
        }
        self.routes.last().expect("a live alias has a route").model
    }
}

/// Weights as the client wrote them: a whole number as an integer.
fn routes_json(routes: &[Route]) -> Value {
    routes
        .iter()
        .map(|r| {
            let weight =
                if r.weight.fract() == 0.0 && r.weight.abs() < 1e15 { json!(r.weight as i64) } else { json!(r.weight) };
            json!({"model": r.model, "weight": weight})
        })
        .collect()
}

/// An alias as stored and cached: its name, the setting in effect and the ones before
/// it (newest first, at most [`HISTORY`] in all, the one in effect first).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alias {
    pub name: String,
    pub history: Vec<Setting>,
}

impl Alias {
    pub fn current(&self) -> &Setting {
        &self.history[0]
    }

    pub fn generation(&self) -> u64 {
        self.current().generation
    }

    pub fn is_live(&self) -> bool {
        !self.current().is_deleted()
    }

    /// The setting a rollback brings back: the newest one before the one in effect
    /// that had routes (deletes are skipped); None when none is left in the history.
    pub fn rollback_target(&self) -> Option<&Setting> {
        let before = self.current().origin();
        self.history.iter().find(|s| s.generation < before && !s.is_deleted())
    }

    /// The alias with `next` in effect (its history cut to [`HISTORY`]).
    pub fn then(&self, next: Setting) -> Alias {
        let mut history = Vec::with_capacity(HISTORY);
        history.push(next);
        history.extend(self.history.iter().take(HISTORY - 1).cloned());
        Alias { name: self.name.clone(), history }
    }

    /// The resource: name, generation, routes, shadow, when and by whom; with the
    /// history when `with_history`.
    pub fn to_json(&self, with_history: bool) -> Value {
        let c = self.current();
        let mut v = json!({
            "name": self.name,
            "generation": c.generation,
            "routes": routes_json(&c.routes),
            "shadow": c.shadow,
            "updated_at": c.at,
            "updated_by": c.by,
        });
        if with_history {
            v["history"] = self.history.iter().map(Setting::to_json).collect();
        }
        v
    }

    pub fn to_bytes(&self) -> bytes::Bytes {
        serde_json::to_vec(self).expect("an alias serialises").into()
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Alias, String> {
        let a: Alias = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        if a.history.is_empty() {
            return Err("an alias setting without a history".into());
        }
        Ok(a)
    }
}

/// The one name a path `/models/{name}` cannot take: `GET /models/kinds` is the catalogue.
const RESERVED: &str = "kinds";

/// Whether `name` may name an alias: 1 to 64 of `[A-Za-z0-9._-]`, not a UUID (which
/// names a model), and not `kinds`.
pub fn check_name(name: &str) -> Result<(), FieldError> {
    let ok_chars = name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if name.is_empty() || name.len() > 64 || !ok_chars {
        return Err(FieldError::invalid("/name", "an alias name is 1 to 64 of A-Z, a-z, 0-9, '.', '_' and '-'"));
    }
    if Uuid::parse_str(name).is_ok() {
        return Err(FieldError::invalid("/name", "an alias name cannot be a UUID: those name models"));
    }
    if name.chars().all(|c| c == '.') {
        return Err(FieldError::invalid("/name", "an alias name cannot be only dots"));
    }
    if name == RESERVED {
        return Err(FieldError::invalid(
            "/name",
            "an alias name cannot be `kinds`: GET /models/kinds lists the model kinds",
        ));
    }
    Ok(())
}

/// A PUT's body, its shape checked (the models are checked against the registry by the
/// caller): routes with weights summing to 100, and a shadow.
#[derive(Debug, Clone, PartialEq)]
pub struct Wanted {
    pub routes: Vec<Route>,
    pub shadow: Option<Uuid>,
    /// Where each route's model was given (`/model`, or `/routes/i/model`).
    pub pointers: Vec<String>,
}

fn model_at(v: &Value, pointer: &str) -> Result<Uuid, FieldError> {
    let s = v.as_str().ok_or_else(|| FieldError::shape(pointer, "must be a model id (a string)"))?;
    Uuid::parse_str(s).map_err(|_| FieldError::invalid(pointer, format!("{s:?} is not a model id")))
}

impl Wanted {
    pub fn from_json(body: &Value) -> Result<Wanted, FieldError> {
        let obj = body.as_object().ok_or_else(|| FieldError::shape("", "the body must be a JSON object"))?;
        if let Some(k) = obj.keys().find(|k| !matches!(k.as_str(), "model" | "routes" | "shadow")) {
            return Err(FieldError::shape(
                format!("/{}", crate::spec::pointer_token(k)),
                "unknown field: an alias takes `model` or `routes`, and `shadow`",
            ));
        }
        let (routes, pointers) = match (obj.get("model"), obj.get("routes")) {
            (Some(_), Some(_)) => return Err(FieldError::shape("/routes", "give `model` or `routes`, not both")),
            (None, None) => return Err(FieldError::shape("", "give `model` (one model) or `routes`")),
            (Some(m), None) => (vec![Route { model: model_at(m, "/model")?, weight: 100.0 }], vec!["/model".into()]),
            (None, Some(r)) => Self::routes(r)?,
        };
        let shadow = match obj.get("shadow") {
            None | Some(Value::Null) => None,
            Some(v) => Some(model_at(v, "/shadow")?),
        };
        if let Some(s) = shadow.filter(|s| routes.iter().any(|r| r.model == *s)) {
            return Err(FieldError::invalid(
                "/shadow",
                format!("model {s} is a route of this alias: a shadow must be another model"),
            ));
        }
        Ok(Wanted { routes, shadow, pointers })
    }

    fn routes(r: &Value) -> Result<(Vec<Route>, Vec<String>), FieldError> {
        let list =
            r.as_array().ok_or_else(|| FieldError::shape("/routes", "must be a list of {\"model\", \"weight\"}"))?;
        if list.is_empty() || list.len() > MAX_ROUTES {
            return Err(FieldError::invalid(
                "/routes",
                format!("must hold 1 to {MAX_ROUTES} routes; got {}", list.len()),
            ));
        }
        let mut routes: Vec<Route> = Vec::with_capacity(list.len());
        let mut pointers = Vec::with_capacity(list.len());
        for (i, item) in list.iter().enumerate() {
            let at = format!("/routes/{i}");
            let o = item.as_object().ok_or_else(|| FieldError::shape(&at, "must be {\"model\", \"weight\"}"))?;
            if let Some(k) = o.keys().find(|k| !matches!(k.as_str(), "model" | "weight")) {
                return Err(FieldError::shape(
                    format!("{at}/{}", crate::spec::pointer_token(k)),
                    "unknown field: a route is {\"model\", \"weight\"}",
                ));
            }
            let model = model_at(
                o.get("model").ok_or_else(|| FieldError::shape(format!("{at}/model"), "is required"))?,
                &format!("{at}/model"),
            )?;
            let weight = o
                .get("weight")
                .ok_or_else(|| FieldError::shape(format!("{at}/weight"), "is required"))?
                .as_f64()
                .ok_or_else(|| FieldError::shape(format!("{at}/weight"), "must be a number"))?;
            if !(weight > 0.0 && weight <= 100.0) {
                return Err(FieldError::invalid(
                    format!("{at}/weight"),
                    format!("must be > 0 and <= 100; got {weight}"),
                ));
            }
            if routes.iter().any(|r| r.model == model) {
                return Err(FieldError::invalid(format!("{at}/model"), format!("model {model} is routed twice")));
            }
            routes.push(Route { model, weight });
            pointers.push(format!("{at}/model"));
        }
        let total: f64 = routes.iter().map(|r| r.weight).sum();
        if (total - 100.0).abs() > 1e-9 {
            return Err(FieldError::invalid("/routes", format!("the weights must sum to 100; they sum to {total}")));
        }
        Ok((routes, pointers))
    }
}

/// Where in [0, 1) a request falls, from its request id: the same id always falls at
/// the same place (FNV-1a, stable across builds and replicas).
pub fn draw(request_id: &str, alias: &str) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in alias.bytes().chain([0u8]).chain(request_id.bytes()) {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    // FNV's low bits mix poorly: finish with a 64-bit mixer (splitmix64's).
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    (h >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setting(generation: u64, action: Action, restores: Option<u64>) -> Setting {
        Setting {
            generation,
            action,
            routes: vec![Route { model: Uuid::from_u128(generation as u128), weight: 100.0 }],
            shadow: None,
            at: String::new(),
            by: None,
            restores,
        }
    }

    #[test]
    fn rollbacks_walk_back_and_skip_deletes() {
        let mut a = Alias { name: "a".into(), history: vec![setting(1, Action::Set, None)] };
        assert!(a.rollback_target().is_none());
        a = a.then(setting(2, Action::Set, None));
        a = a.then(setting(3, Action::Delete, None));
        a = a.then(setting(4, Action::Set, None));
        assert_eq!(a.rollback_target().unwrap().generation, 2);
        a = a.then(setting(5, Action::Rollback, Some(2)));
        assert_eq!(a.rollback_target().unwrap().generation, 1);
        a = a.then(setting(6, Action::Rollback, Some(1)));
        assert!(a.rollback_target().is_none());
    }

    #[test]
    fn the_history_keeps_fifty() {
        let mut a = Alias { name: "a".into(), history: vec![setting(1, Action::Set, None)] };
        for g in 2..=80 {
            a = a.then(setting(g, Action::Set, None));
        }
        assert_eq!(a.history.len(), HISTORY);
        assert_eq!(a.history[0].generation, 80);
        assert_eq!(a.history[HISTORY - 1].generation, 31);
    }

    #[test]
    fn choices_follow_the_weights() {
        let s = Setting {
            routes: vec![
                Route { model: Uuid::from_u128(1), weight: 90.0 },
                Route { model: Uuid::from_u128(2), weight: 10.0 },
            ],
            ..setting(1, Action::Set, None)
        };
        assert_eq!(s.choose(0.0), Uuid::from_u128(1));
        assert_eq!(s.choose(0.8999), Uuid::from_u128(1));
        assert_eq!(s.choose(0.9001), Uuid::from_u128(2));
        assert_eq!(s.choose(0.999_999_999), Uuid::from_u128(2));
        // Draws from distinct request ids spread evenly.
        let n = 20_000;
        let below: usize = (0..n).filter(|i| draw(&format!("req-{i}"), "champion") < 0.1).count();
        let p = below as f64 / n as f64;
        assert!((p - 0.1).abs() < 4.0 * (0.1f64 * 0.9 / n as f64).sqrt(), "{p}");
        assert_eq!(draw("abc", "x"), draw("abc", "x"));
        assert_ne!(draw("abc", "x"), draw("abd", "x"));
    }

    #[test]
    fn taking_a_model_out_scales_the_rest_back_to_100() {
        let s = Setting {
            routes: vec![
                Route { model: Uuid::from_u128(1), weight: 80.0 },
                Route { model: Uuid::from_u128(2), weight: 10.0 },
                Route { model: Uuid::from_u128(3), weight: 10.0 },
            ],
            shadow: Some(Uuid::from_u128(3)),
            ..setting(1, Action::Set, None)
        };
        let (routes, shadow) = s.without(Uuid::from_u128(3));
        assert_eq!(shadow, None);
        let total: f64 = routes.iter().map(|r| r.weight).sum();
        assert!((total - 100.0).abs() < 1e-12);
        assert!((routes[0].weight - 800.0 / 9.0).abs() < 1e-12);
    }

    #[test]
    fn bodies_are_checked_at_their_pointers() {
        let id = Uuid::from_u128(7).to_string();
        let bad = |body: Value| Wanted::from_json(&body).unwrap_err().pointer;
        assert_eq!(bad(json!({})), "");
        assert_eq!(bad(json!({"model": id, "routes": []})), "/routes");
        assert_eq!(bad(json!({"model": 3})), "/model");
        assert_eq!(bad(json!({"model": "nope"})), "/model");
        assert_eq!(bad(json!({"routes": []})), "/routes");
        assert_eq!(bad(json!({"routes": [{"model": id, "weight": 0}]})), "/routes/0/weight");
        assert_eq!(bad(json!({"routes": [{"model": id, "weight": 60}]})), "/routes");
        assert_eq!(
            bad(json!({"routes": [{"model": id, "weight": 50}, {"model": id, "weight": 50}]})),
            "/routes/1/model"
        );
        assert_eq!(bad(json!({"model": id, "shadow": id})), "/shadow");
        assert_eq!(bad(json!({"model": id, "extra": 1})), "/extra");
        let w = Wanted::from_json(&json!({"model": id})).unwrap();
        assert_eq!(w.routes, vec![Route { model: Uuid::from_u128(7), weight: 100.0 }]);
        for name in ["", "a/b", &"x".repeat(65), &id, "..", "a b", "kinds"] {
            assert!(check_name(name).is_err(), "{name}");
        }
        for name in ["champion", "v1.2", "a_b-c", &"x".repeat(64)] {
            assert!(check_name(name).is_ok(), "{name}");
        }
    }
}

//! A study's space and its next suggestion, from the trials it holds.
//!
//! The first `initial` suggested trials are the seeded random draws (as `random`
//! draws them); after that, the complete trials are modelled and the next point maximises
//! log EI, the pending ones counted at the model's mean. The surrogate is kept between
//! suggestions ([`Model`]): its hyperparameters and standardisation are refitted after
//! every newly complete trial while a refit is cheap, and then every [`refit_interval`]
//! trials; in between it grows by a Cholesky row per trial, O(t^2) instead of O(t^3).

use super::surrogate::{Hyper, Surrogate};
use super::{key, Fitted, History, Space, Suggester, Suggestion};
use crate::optimize::SplitMix64;
use crate::selection::space::{read_axis, Axis, Method};
use crate::spec::{json_type_name, pointer_token, FieldError};
use nalgebra::DMatrix;
use serde_json::{Map, Value};
use std::collections::HashSet;

/// Complete trials between hyperparameter refits, the last refit having seen `held`:
/// one while there are few (stale length scales cost a 50-evaluation study its fine
/// convergence, and a refit of 40 trials takes about a millisecond), then a twentieth
/// of them, so that a refit's O(t^3) stays a small share of the suggestions between;
/// at most [`MAX_GROWN`], as refits hold at most [`MAX_MODELLED`] trials.
pub fn refit_interval(held: usize) -> usize {
    (held / 20).clamp(1, MAX_GROWN)
}
/// Dimensions a study's space may have.
pub const MAX_DIMENSIONS: usize = 32;

/// A study's space: names (sorted) and their axes.
#[derive(Debug, Clone, PartialEq)]
pub struct StudySpace {
    pub names: Vec<String>,
    pub axes: Vec<Axis>,
    pub space: Space,
}

impl StudySpace {
    /// Reads a body's `space` (pointer `/space`): names of 1..64 characters, values as a
    /// `bayes` search's, at most [`MAX_DIMENSIONS`].
    pub fn from_json(v: &Value) -> Result<StudySpace, FieldError> {
        let Value::Object(map) = v else {
            return Err(FieldError::shape(
                "/space",
                format!("expected an object of name: values, found {}", json_type_name(v)),
            ));
        };
        if map.is_empty() {
            return Err(FieldError::invalid("/space", "needs at least one dimension"));
        }
        if map.len() > MAX_DIMENSIONS {
            return Err(FieldError::invalid("/space", format!("{} dimensions; at most {MAX_DIMENSIONS}", map.len())));
        }
        let mut entries: Vec<(&String, &Value)> = map.iter().collect();
        entries.sort_by(|a, b| a.0.cmp(b.0));
        let mut names = Vec::new();
        let mut axes = Vec::new();
        for (name, spec) in entries {
            let at = format!("/space/{}", pointer_token(name));
            let chars = name.chars().count();
            if chars == 0 || chars > 64 {
                return Err(FieldError::invalid(at, "a name has 1 to 64 characters"));
            }
            axes.push(read_axis(spec, Method::Bayes, &at)?);
            names.push(name.clone());
        }
        if let Err(width) = super::check_width(&axes) {
            return Err(FieldError::invalid(
                "/space",
                format!(
                    "a study's space is at most {} coordinates (a number range is one, each value of a list or grid one); this one has {width}",
                    super::MAX_WIDTH
                ),
            ));
        }
        let space = Space::of(&axes);
        Ok(StudySpace { names, axes, space })
    }

    /// A told setting, `{name: value}`, in the space's order; 422 at `/values/<name>`.
    pub fn values_of(&self, v: &Value) -> Result<Vec<Value>, FieldError> {
        let Value::Object(map) = v else {
            return Err(FieldError::shape(
                "/values",
                format!("expected an object of name: value, found {}", json_type_name(v)),
            ));
        };
        if let Some(extra) = map.keys().find(|k| !self.names.contains(k)) {
            return Err(FieldError::invalid(format!("/values/{}", pointer_token(extra)), "not a name of the space"));
        }
        let mut out = Vec::with_capacity(self.names.len());
        for (i, name) in self.names.iter().enumerate() {
            let at = format!("/values/{}", pointer_token(name));
            let value = map.get(name).ok_or_else(|| FieldError::invalid(&at, "missing: every name needs a value"))?;
            let one = Space { dims: vec![self.space.dims[i].clone()] };
            let point = one.encode(std::slice::from_ref(value)).filter(|_| in_range(&self.axes[i], value));
            if point.is_none() {
                return Err(FieldError::invalid(at, format!("{value} is not in this dimension")));
            }
            out.push(value.clone());
        }
        Ok(out)
    }

    /// Values in the space's order as `{name: value}`.
    pub fn named(&self, values: &[Value]) -> Value {
        Value::Object(self.names.iter().cloned().zip(values.iter().cloned()).collect::<Map<String, Value>>())
    }

    /// The i-th of the study's seeded random draws (as `random` draws). Each draw's
    /// generator starts from a scrambled (seed, i): seeding with seed + i x the
    /// generator's own increment would make draw i + 1 draw i shifted by a coordinate.
    pub fn draw(&self, seed: u64, i: u64) -> Vec<Value> {
        let start = SplitMix64::new(seed ^ i.wrapping_mul(0xD1B5_4A32_D192_ED03)).next_u64();
        let mut rng = SplitMix64::new(start);
        self.axes.iter().map(|a| a.draw(&mut rng)).collect()
    }
}

/// Whether a number is inside a range axis (lists are checked by encoding).
fn in_range(axis: &Axis, v: &Value) -> bool {
    use crate::selection::space::Draw;
    match axis {
        Axis::Draw(Draw::Uniform(lo, hi) | Draw::LogUniform(lo, hi)) => {
            v.as_f64().is_some_and(|x| x >= *lo && x <= *hi)
        }
        Axis::Draw(Draw::IntUniform(lo, hi)) => v.as_i64().is_some_and(|x| x >= *lo && x <= *hi),
        Axis::List(_) | Axis::Grid { .. } => true,
    }
}

/// A trial as the suggestion sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Trial {
    pub values: Vec<Value>,
    /// Suggested by the study (not a warm start).
    pub suggested: bool,
    pub state: State,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum State {
    Pending,
    /// The told value, "greater is better" (a minimised study's values negated).
    Complete(f64),
    Failed,
}

/// The surrogate a replica keeps for a study between suggestions.
#[derive(Debug, Clone)]
pub struct Model {
    fitted: Option<Kept>,
    /// Complete trials a refit models at most ([`MAX_MODELLED`]).
    cap: usize,
}

impl Default for Model {
    fn default() -> Model {
        Model { fitted: None, cap: MAX_MODELLED }
    }
}

/// Complete trials a refit models at most: the best half and the most recent half.
/// The GP's O(t^3) refit and O(t^2) prediction stay bounded (a refit of 1,000 trials
/// takes seconds; of a study's 100,000 allowed, hours), and the trials that shape EI
/// near the best and around the newest evaluations are the ones kept.
pub const MAX_MODELLED: usize = 1000;
/// Trials grown onto a refit's GP at most before the next refit.
const MAX_GROWN: usize = 100;

#[derive(Debug, Clone)]
struct Kept {
    gp: Surrogate,
    /// Keys of the trials the GP holds, of every trial it has considered (held or left
    /// out at the refit), and how many complete trials there were at its last refit.
    held: HashSet<String>,
    seen: HashSet<String>,
    at_refit: usize,
    mean: f64,
    std: f64,
    best: f64,
}

impl Model {
    /// A model whose refits hold at most `cap` trials (tests use small ones).
    pub fn with_cap(cap: usize) -> Model {
        Model { fitted: None, cap: cap.max(2) }
    }

    /// The GP of a study's complete trials: refitted (hyperparameters and
    /// standardisation, on at most the model's cap of them) when there is none or
    /// [`refit_interval`] trials came since, else grown by the new ones. `points` are the
    /// complete trials' unit-cube points with their values, in trial order.
    pub fn update(&mut self, points: &[(String, Vec<f64>, f64)], seed: u64) -> Option<Fitted> {
        if points.is_empty() {
            return None;
        }
        let stale = self.fitted.as_ref().is_none_or(|k| {
            points.len() >= k.at_refit + refit_interval(k.at_refit)
                || points.iter().filter(|p| k.held.contains(&p.0)).count() != k.held.len()
        });
        // A refit starts afresh (the priors' mode and seeded draws), so that it equals a
        // fresh fit on the same trials whatever came before.
        if stale {
            self.fitted = refit(points, seed, self.cap);
        } else if let Some(k) = self.fitted.as_mut() {
            let new: Vec<&(String, Vec<f64>, f64)> = points.iter().filter(|p| !k.seen.contains(&p.0)).collect();
            for (name, u, v) in new {
                let y = (v - k.mean) / k.std;
                match k.gp.extended(u, y) {
                    Some(gp) => {
                        k.gp = gp;
                        k.held.insert(name.clone());
                        k.seen.insert(name.clone());
                        k.best = k.best.max(y);
                    }
                    None => {
                        self.fitted = refit(points, seed, self.cap);
                        break;
                    }
                }
            }
        }
        self.fitted.as_ref().map(|k| Fitted { gp: k.gp.clone(), best: k.best })
    }

    /// The hyperparameters as last fitted.
    pub fn hyper(&self) -> Option<&Hyper> {
        self.fitted.as_ref().map(|k| &k.gp.hyper)
    }
}

/// The trials a refit models (indices into `points`, in order): all of them up to
/// `cap`, else the best cap/2 and the most recent of the rest.
fn modelled(points: &[(String, Vec<f64>, f64)], cap: usize) -> Vec<usize> {
    let t = points.len();
    if t <= cap {
        return (0..t).collect();
    }
    let mut by_value: Vec<usize> = (0..t).collect();
    by_value.sort_by(|&a, &b| points[b].2.total_cmp(&points[a].2).then(a.cmp(&b)));
    let mut keep = vec![false; t];
    for &i in by_value.iter().take(cap / 2) {
        keep[i] = true;
    }
    let mut recent = cap - cap / 2;
    for i in (0..t).rev() {
        if recent == 0 {
            break;
        }
        if !keep[i] {
            keep[i] = true;
            recent -= 1;
        }
    }
    (0..t).filter(|&i| keep[i]).collect()
}

fn refit(points: &[(String, Vec<f64>, f64)], seed: u64, cap: usize) -> Option<Kept> {
    let chosen = modelled(points, cap);
    let values: Vec<f64> = chosen.iter().map(|&i| points[i].2).collect();
    let (mean, std) = crate::estimator::targets::outputs::normalisation(&values);
    let y: Vec<f64> = values.iter().map(|v| (v - mean) / std).collect();
    let width = points[0].1.len();
    let x = DMatrix::from_fn(width, chosen.len(), |i, j| points[chosen[j]].1[i]);
    let gp = Surrogate::fit(x, y.clone(), None, seed ^ points.len() as u64)?;
    let best = y.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some(Kept {
        gp,
        held: chosen.iter().map(|&i| points[i].0.clone()).collect(),
        seen: points.iter().map(|p| p.0.clone()).collect(),
        at_refit: points.len(),
        mean,
        std,
        best,
    })
}

/// The next trial's values: a seeded draw while fewer than `initial` trials were
/// suggested, else the optimiser's. None when a finite space has no setting left.
pub fn suggest(space: &StudySpace, seed: u64, initial: u64, trials: &[Trial], model: &mut Model) -> Option<Suggestion> {
    let suggested = trials.iter().filter(|t| t.suggested).count() as u64;
    if suggested < initial {
        let values = space.draw(seed, suggested);
        let point = space.space.encode(&values).expect("a draw is in the space");
        return Some(Suggestion { values, point, log_ei: None });
    }
    let taken: HashSet<String> = trials.iter().map(|t| key(&t.values)).collect();
    let mut observed = Vec::new();
    let mut held = Vec::new();
    let mut pending = Vec::new();
    for t in trials {
        let Some(u) = space.space.encode(&t.values) else { continue };
        match t.state {
            State::Complete(v) => {
                held.push((key(&t.values), u.clone(), v));
                observed.push((u, v));
            }
            State::Pending => pending.push(u),
            State::Failed => {}
        }
    }
    let fitted = model.update(&held, seed);
    let suggester = Suggester { space: &space.space, seed };
    let history = History { observed: &observed, pending: &pending, taken: &taken };
    suggester.next(fitted.as_ref(), &history, trials.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn space() -> StudySpace {
        StudySpace::from_json(&json!({"x1": {"uniform": [-5, 10]}, "x2": {"uniform": [0, 15]}})).unwrap()
    }

    fn branin(v: &[Value]) -> f64 {
        let (x1, x2) = (v[0].as_f64().unwrap(), v[1].as_f64().unwrap());
        let pi = std::f64::consts::PI;
        let (b, c) = (5.1 / (4.0 * pi * pi), 5.0 / pi);
        (x2 - b * x1 * x1 + c * x1 - 6.0).powi(2) + 10.0 * (1.0 - 1.0 / (8.0 * pi)) * x1.cos() + 10.0
    }

    #[test]
    fn spaces_and_told_values_are_checked_at_their_pointers() {
        let bad = |v: Value| StudySpace::from_json(&v).unwrap_err().pointer;
        assert_eq!(bad(json!({})), "/space");
        assert_eq!(bad(json!([1])), "/space");
        assert_eq!(bad(json!({"lr": {"log_uniform": [0, 1]}})), "/space/lr/log_uniform");
        assert_eq!(bad(json!({"a/b": []})), "/space/a~1b");
        let s = space();
        assert_eq!(s.values_of(&json!({"x1": 1, "x2": 2})).unwrap(), vec![json!(1), json!(2)]);
        assert_eq!(s.values_of(&json!({"x1": 11, "x2": 2})).unwrap_err().pointer, "/values/x1");
        assert_eq!(s.values_of(&json!({"x1": 1})).unwrap_err().pointer, "/values/x2");
        assert_eq!(s.values_of(&json!({"x1": 1, "x2": 2, "x3": 0})).unwrap_err().pointer, "/values/x3");
    }

    /// Branin in 30 evaluations: the model beats its random start; and (with 15 random
    /// points more, to pass 40) between refits the kept GP is the one a fresh fit at the
    /// last refit gives, grown.
    #[test]
    fn a_study_minimises_branin_and_its_gp_equals_a_fresh_fit_after_a_refit() {
        let s = space();
        let mut model = Model::default();
        let mut trials: Vec<Trial> = Vec::new();
        for _ in 0..30 {
            let next = suggest(&s, 1, 8, &trials, &mut model).unwrap();
            let v = branin(&next.values);
            trials.push(Trial { values: next.values, suggested: true, state: State::Complete(-v) });
        }
        let best = trials
            .iter()
            .map(|t| match t.state {
                State::Complete(v) => -v,
                _ => f64::INFINITY,
            })
            .fold(f64::INFINITY, f64::min);
        let best_random = trials[..8]
            .iter()
            .map(|t| match t.state {
                State::Complete(v) => -v,
                _ => f64::INFINITY,
            })
            .fold(f64::INFINITY, f64::min);
        assert!(best < best_random && best < 1.0, "best {best}, random {best_random} (optimum 0.398)");
        // Grown one trial at a time, the kept GP is refitted as `refit_interval` says
        // (every trial up to 40, then every other one); at a refit it equals a fresh fit
        // on the same trials, and in between it is that fit grown by a row per trial.
        let mut held: Vec<(String, Vec<f64>, f64)> = trials
            .iter()
            .map(|t| {
                let v = match t.state {
                    State::Complete(v) => v,
                    _ => unreachable!(),
                };
                (key(&t.values), s.space.encode(&t.values).unwrap(), v)
            })
            .collect();
        for i in 0..15 {
            let values = s.draw(9, i);
            held.push((key(&values), s.space.encode(&values).unwrap(), -branin(&values)));
        }
        let mut grown = Model::default();
        let q = [0.3, 0.6];
        let (mut last_refit, mut grown_steps) = (1, 0);
        let mut fresh = Model::default().update(&held[..1], 1).unwrap();
        for n in 1..=held.len() {
            let g = grown.update(&held[..n], 1).unwrap();
            if n >= last_refit + refit_interval(last_refit) {
                last_refit = n;
                fresh = Model::default().update(&held[..n], 1).unwrap();
            }
            assert_eq!(g.gp.len(), n);
            assert_eq!(g.gp.hyper, fresh.gp.hyper, "{n} trials: the hyperparameters of the refit at {last_refit}");
            if last_refit == n {
                let (a, b) = (g.gp.predict(&q), fresh.gp.predict(&q));
                assert!((a.mean - b.mean).abs() < 1e-12 && (a.var - b.var).abs() < 1e-12);
            } else {
                grown_steps += 1;
            }
        }
        assert!(grown_steps >= 2, "{grown_steps}");
    }

    /// Issue 53's report: 6 values told on the unit square, two single suggestions left
    /// pending, then a batch of 4 (each suggested with the ones before it pending). No two
    /// of the six pending points are closer than MIN_APART, over 20 seeds and with noisy
    /// values (the learned noise is what left a believed point's neighbourhood
    /// attractive).
    #[test]
    fn pending_points_and_batches_keep_apart() {
        let s = StudySpace::from_json(&json!({"a": {"uniform": [0, 1]}, "b": {"uniform": [0, 1]}})).unwrap();
        let mut closest = f64::INFINITY;
        for seed in 0..20u64 {
            let mut rng = SplitMix64::new(seed);
            let mut trials: Vec<Trial> = (0..6)
                .map(|i| {
                    let values = s.draw(seed, i);
                    let (a, b) = (values[0].as_f64().unwrap(), values[1].as_f64().unwrap());
                    let v = -((a - 0.3).powi(2) + (b - 0.7).powi(2)) + 0.05 * rng.normal();
                    Trial { values, suggested: true, state: State::Complete(v) }
                })
                .collect();
            let mut model = Model::default();
            for _ in 0..6 {
                let next = suggest(&s, seed, 6, &trials, &mut model).expect("a suggestion");
                trials.push(Trial { values: next.values, suggested: true, state: State::Pending });
            }
            let pending: Vec<Vec<f64>> = trials[6..].iter().map(|t| s.space.encode(&t.values).unwrap()).collect();
            for (i, p) in pending.iter().enumerate() {
                for q in &pending[..i] {
                    let d = p.iter().zip(q).map(|(a, b)| (a - b) * (a - b)).sum::<f64>().sqrt();
                    closest = closest.min(d);
                    assert!(d >= super::super::MIN_APART, "seed {seed}: {p:?} and {q:?} are {d:e} apart");
                }
            }
        }
        assert!(closest.is_finite());
    }

    /// Past its cap a refit models the best half and the most recent half of the
    /// trials, grows by the ones that come after, and equals a fresh fit with the same
    /// cap on the same trials.
    #[test]
    fn a_capped_model_keeps_the_best_and_the_recent_trials() {
        let s = space();
        let points: Vec<(String, Vec<f64>, f64)> = (0..60)
            .map(|i| {
                let values = s.draw(5, i);
                (key(&values), s.space.encode(&values).unwrap(), -branin(&values))
            })
            .collect();
        let cap = 20;
        let mut model = Model::with_cap(cap);
        let (mut last_refit, mut fresh) = (1, Model::with_cap(cap).update(&points[..1], 3).unwrap());
        for n in 1..=points.len() {
            let g = model.update(&points[..n], 3).unwrap();
            if n >= last_refit + refit_interval(last_refit) {
                last_refit = n;
                fresh = Model::with_cap(cap).update(&points[..n], 3).unwrap();
            }
            assert_eq!(g.gp.len(), last_refit.min(cap) + (n - last_refit), "{n} trials");
            assert_eq!(g.gp.hyper, fresh.gp.hyper, "{n} trials");
        }
        // The modelled trials: the 10 best and the 10 most recent of the others.
        let chosen = modelled(&points, cap);
        assert_eq!(chosen.len(), cap);
        let mut by_value: Vec<usize> = (0..points.len()).collect();
        by_value.sort_by(|&a, &b| points[b].2.total_cmp(&points[a].2));
        assert!(by_value[..cap / 2].iter().all(|i| chosen.contains(i)));
        let rest: Vec<usize> =
            (0..points.len()).rev().filter(|i| !by_value[..cap / 2].contains(i)).take(cap / 2).collect();
        assert!(rest.iter().all(|i| chosen.contains(i)));
        assert_eq!(refit_interval(100_000), MAX_GROWN);
    }

    #[test]
    fn pending_trials_are_not_suggested_again() {
        let s = space();
        let mut model = Model::default();
        let mut trials: Vec<Trial> = Vec::new();
        for i in 0..12 {
            let next = suggest(&s, 2, 5, &trials, &mut model).unwrap();
            let state = if i % 2 == 0 { State::Pending } else { State::Complete(-branin(&next.values)) };
            trials.push(Trial { values: next.values, suggested: true, state });
        }
        let keys: HashSet<String> = trials.iter().map(|t| key(&t.values)).collect();
        assert_eq!(keys.len(), trials.len());
    }
}

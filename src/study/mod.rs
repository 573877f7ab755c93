//! Studies: Bayesian optimisation of anything a client evaluates. This room holds what a
//! study is - its definition and the bodies that tell it something (`definition`), its
//! objectives' Pareto front and scalarisations (`pareto`), its pruners (`pruner`) - and,
//! here, its space and its next suggestion from the trials it holds. The optimiser it
//! suggests with is the one model search shares (`selection::bayes`); serving studies
//! (the store's objects, the cache of each study's surrogate) is `service::studies`.
//!
//! The first `initial` suggested trials are the seeded random draws (as `random`
//! draws them); after that, the complete trials are modelled and the next point maximises
//! log EI, the pending ones counted at the model's mean. The surrogate is kept between
//! suggestions ([`Model`]): its hyperparameters and warp are refitted after
//! every newly complete trial while a refit is cheap, and then every [`refit_interval`]
//! trials; in between it grows by a Cholesky row per trial, O(t^2) instead of O(t^3).

pub mod definition;
pub mod pareto;
pub mod pruner;

use crate::optimize::SplitMix64;
use crate::selection::bayes::{key, Fitted, History, Space, Suggester, Suggestion};
pub use crate::selection::bayes::{refit_interval, Model, MAX_MODELLED};
use crate::selection::space::{read_axis, Axis, Method};
use crate::spec::{json_type_name, pointer_token, FieldError};
use serde_json::{Map, Value};
use std::collections::HashSet;

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
        if let Err(width) = crate::selection::bayes::check_width(&axes) {
            return Err(FieldError::invalid(
                "/space",
                format!(
                    "a study's space is at most {} coordinates (a number range is one, each value of a list or grid one); this one has {width}",
                    crate::selection::bayes::MAX_WIDTH
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

#[derive(Debug, Clone, PartialEq)]
pub enum State {
    Pending,
    /// The told objectives, "greater is better" (minimised ones negated), then the told
    /// constraint values as they were told.
    Complete(Vec<f64>),
    /// Stopped early: its last reported value ("greater is better"), if it reported.
    Pruned(Option<f64>),
    Failed,
}

/// What a study optimises: how many objectives, and the largest feasible value of each
/// constraint.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Goal {
    pub objectives: usize,
    pub limits: Vec<f64>,
    /// The hypervolume's reference point, "greater is better", when given.
    pub reference: Option<Vec<f64>>,
}

impl Goal {
    /// One objective, no constraints.
    pub fn single() -> Goal {
        Goal { objectives: 1, limits: Vec::new(), reference: None }
    }

    /// Whether a complete trial's told values meet every constraint.
    pub fn feasible(&self, told: &[f64]) -> bool {
        self.limits.iter().zip(&told[self.objectives..]).all(|(max, v)| v <= max)
    }
}

/// What a replica keeps of a study between suggestions: the objective's surrogate (one
/// objective; three or four are scalarised afresh at each suggestion), one per objective
/// when there are two, and one per constraint.
#[derive(Debug, Clone, Default)]
pub struct StudyModel {
    objective: Model,
    objectives: Vec<Model>,
    limits: Vec<Model>,
}

/// The next trial's values: a seeded draw while fewer than `initial` trials were
/// suggested, else the optimiser's. None when a finite space has no setting left.
///
/// One objective is modelled by the kept surrogate (complete trials, and pruned ones at
/// their last report) and improved by log EI over the best feasible complete trial. Two
/// have a kept surrogate each and are improved together by log EHVI over the feasible
/// trials' front (against the study's reference point, else one derived from the
/// trials). Three or four are scalarised afresh at each suggestion (ParEGO: the weights
/// are drawn from the simplex, seeded by the study's seed and the trial count). Each
/// constraint has its own kept surrogate, whose probability of feasibility weighs the
/// acquisition.
pub fn suggest(
    space: &StudySpace,
    seed: u64,
    initial: u64,
    goal: &Goal,
    trials: &[Trial],
    model: &mut StudyModel,
) -> Option<Suggestion> {
    let suggested = trials.iter().filter(|t| t.suggested).count() as u64;
    if suggested < initial {
        let values = space.draw(seed, suggested);
        let point = space.space.encode(&values).expect("a draw is in the space");
        return Some(Suggestion { values, point, log_ei: None });
    }
    let taken: HashSet<String> = trials.iter().map(|t| key(&t.values)).collect();
    let mut complete: Vec<(String, Vec<f64>, &[f64])> = Vec::new();
    let mut pruned = Vec::new();
    let mut pending = Vec::new();
    for t in trials {
        let Some(u) = space.space.encode(&t.values) else { continue };
        match &t.state {
            State::Complete(told) => complete.push((key(&t.values), u, told)),
            State::Pruned(Some(v)) => pruned.push((key(&t.values), u, *v)),
            State::Pending => pending.push(u),
            State::Pruned(None) | State::Failed => {}
        }
    }
    let (fitted, observed) = if goal.objectives == 2 {
        two_objectives(goal, &complete, model, seed)
    } else {
        one_objective(goal, &complete, pruned, trials.len() as u64, model, seed)
    };
    let fitted = fitted.and_then(|mut fitted| {
        model.limits.resize_with(goal.limits.len(), Model::default);
        for (j, (limit, max)) in model.limits.iter_mut().zip(&goal.limits).enumerate() {
            // Oriented as the objective: -value, feasible when at least -max.
            let points: Vec<(String, Vec<f64>, f64)> =
                complete.iter().map(|c| (c.0.clone(), c.1.clone(), -c.2[goal.objectives + j])).collect();
            if let (Some(f), Some(at_least)) = (limit.update(&points, seed ^ (j as u64 + 1)), limit.standardise(-max)) {
                fitted.limits.push(crate::selection::bayes::Limit { gp: f.gp, at_least });
            }
        }
        (fitted.best.is_some() || fitted.hypervolume.is_some() || !fitted.limits.is_empty()).then_some(fitted)
    });
    let suggester = Suggester { space: &space.space, seed };
    let history = History { observed: &observed, pending: &pending, taken: &taken };
    suggester.next(fitted.as_ref(), &history, trials.len() as u64)
}

type Point<'a> = (String, Vec<f64>, &'a [f64]);

/// One objective (as told) or three or four (scalarised): the kept or a fresh surrogate,
/// its incumbent, and the modelled points.
fn one_objective(
    goal: &Goal,
    complete: &[Point<'_>],
    pruned: Vec<(String, Vec<f64>, f64)>,
    round: u64,
    model: &mut StudyModel,
    seed: u64,
) -> (Option<Fitted>, Vec<(Vec<f64>, f64)>) {
    let values: Vec<f64> = if goal.objectives == 1 {
        complete.iter().map(|c| c.2[0]).collect()
    } else {
        let mut rng = SplitMix64::new(seed ^ 0x9A2E_60C0 ^ round.wrapping_mul(0x2545_F491_4F6C_DD1D));
        let w = pareto::weights(goal.objectives, &mut rng);
        let objectives: Vec<Vec<f64>> = complete.iter().map(|c| c.2[..goal.objectives].to_vec()).collect();
        // The scalarisation changes at every suggestion: nothing to keep.
        model.objective = Model::default();
        pareto::scalarised(&objectives, &w)
    };
    let mut held: Vec<(String, Vec<f64>, f64)> =
        complete.iter().zip(&values).map(|(c, v)| (c.0.clone(), c.1.clone(), *v)).collect();
    held.extend(pruned);
    let observed = held.iter().map(|h| (h.1.clone(), h.2)).collect();
    let fitted = model.objective.update(&held, seed).map(|mut fitted| {
        fitted.best = complete
            .iter()
            .zip(&values)
            .filter(|(c, _)| goal.feasible(c.2))
            .filter_map(|(_, v)| model.objective.standardise(*v))
            .reduce(f64::max);
        fitted
    });
    (fitted, observed)
}

/// Two objectives: a kept surrogate each, and the cells where the feasible front would
/// improve, in the surrogates' (warped) units; the front's points are the incumbents.
fn two_objectives(
    goal: &Goal,
    complete: &[Point<'_>],
    model: &mut StudyModel,
    seed: u64,
) -> (Option<Fitted>, Vec<(Vec<f64>, f64)>) {
    model.objectives.resize_with(2, Model::default);
    let mut gps = Vec::with_capacity(2);
    for (j, m) in model.objectives.iter_mut().enumerate() {
        let points: Vec<(String, Vec<f64>, f64)> =
            complete.iter().map(|c| (c.0.clone(), c.1.clone(), c.2[j])).collect();
        match m.update(&points, seed ^ (0x0B1E_C700 + j as u64)) {
            Some(f) => gps.push(f.gp),
            None => return (None, Vec::new()),
        }
    }
    let warp = |j: usize, v: f64| model.objectives[j].standardise(v).expect("fitted");
    let feasible: Vec<&Point<'_>> = complete.iter().filter(|c| goal.feasible(c.2)).collect();
    let warped: Vec<Vec<f64>> = feasible.iter().map(|c| vec![warp(0, c.2[0]), warp(1, c.2[1])]).collect();
    let front = pareto::front(&warped);
    let observed = front.iter().map(|&i| (feasible[i].1.clone(), 0.0)).collect();
    let hypervolume = (!warped.is_empty()).then(|| {
        let reference = match &goal.reference {
            Some(r) => vec![warp(0, r[0]), warp(1, r[1])],
            None => pareto::derived_reference(&warped, 2),
        };
        let points: Vec<[f64; 2]> = front.iter().map(|&i| [-warped[i][0], -warped[i][1]]).collect();
        crate::selection::bayes::Hypervolume {
            gps: gps.clone(),
            cells: crate::selection::bayes::ehvi::cells(&points, [-reference[0], -reference[1]]),
        }
    });
    let fitted = Fitted { gp: gps[0].clone(), best: None, limits: Vec::new(), hypervolume };
    (Some(fitted), observed)
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
        let mut model = StudyModel::default();
        let mut trials: Vec<Trial> = Vec::new();
        for _ in 0..30 {
            let next = suggest(&s, 1, 8, &Goal::single(), &trials, &mut model).unwrap();
            let v = branin(&next.values);
            trials.push(Trial { values: next.values, suggested: true, state: State::Complete(vec![-v]) });
        }
        let best = trials
            .iter()
            .map(|t| match t.state {
                State::Complete(ref v) => -v[0],
                _ => f64::INFINITY,
            })
            .fold(f64::INFINITY, f64::min);
        let best_random = trials[..8]
            .iter()
            .map(|t| match t.state {
                State::Complete(ref v) => -v[0],
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
                    State::Complete(ref v) => v[0],
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
                    Trial { values, suggested: true, state: State::Complete(vec![v]) }
                })
                .collect();
            let mut model = StudyModel::default();
            for _ in 0..6 {
                let next = suggest(&s, seed, 6, &Goal::single(), &trials, &mut model).expect("a suggestion");
                trials.push(Trial { values: next.values, suggested: true, state: State::Pending });
            }
            let pending: Vec<Vec<f64>> = trials[6..].iter().map(|t| s.space.encode(&t.values).unwrap()).collect();
            for (i, p) in pending.iter().enumerate() {
                for q in &pending[..i] {
                    let d = p.iter().zip(q).map(|(a, b)| (a - b) * (a - b)).sum::<f64>().sqrt();
                    closest = closest.min(d);
                    assert!(d >= crate::selection::bayes::MIN_APART, "seed {seed}: {p:?} and {q:?} are {d:e} apart");
                }
            }
        }
        assert!(closest.is_finite());
    }

    /// Past its cap a refit models the best half and the most recent half of the
    /// trials, grows by the ones that come after, and equals a fresh fit with the same
    /// cap on the same trials.
    #[test]
    fn pending_trials_are_not_suggested_again() {
        let s = space();
        let mut model = StudyModel::default();
        let mut trials: Vec<Trial> = Vec::new();
        for i in 0..12 {
            let next = suggest(&s, 2, 5, &Goal::single(), &trials, &mut model).unwrap();
            let state = if i % 2 == 0 { State::Pending } else { State::Complete(vec![-branin(&next.values)]) };
            trials.push(Trial { values: next.values, suggested: true, state });
        }
        let keys: HashSet<String> = trials.iter().map(|t| key(&t.values)).collect();
        assert_eq!(keys.len(), trials.len());
    }
}

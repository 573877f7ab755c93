//! The surrogate a replica keeps for a series of a study's told values (an objective or
//! a constraint) between suggestions: its hyperparameters and warp are refitted after
//! every newly complete trial while a refit is cheap, and then every [`refit_interval`]
//! trials; in between it grows by a Cholesky row per trial, O(t^2) instead of O(t^3).

use super::surrogate::{Hyper, Surrogate};
use super::warp::Warp;
use super::Fitted;
use nalgebra::DMatrix;
use std::collections::HashSet;

/// Complete trials between hyperparameter refits, the last refit having seen `held`:
/// one while there are few (stale length scales cost a 50-evaluation study its fine
/// convergence, and a refit of 40 trials takes about a millisecond), then a twentieth
/// of them, so that a refit's O(t^3) stays a small share of the suggestions between;
/// at most [`MAX_GROWN`], as refits hold at most [`MAX_MODELLED`] trials.
pub fn refit_interval(held: usize) -> usize {
    (held / 20).clamp(1, MAX_GROWN)
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
    warp: Warp,
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
                let y = k.warp.apply(*v);
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
        self.fitted.as_ref().map(|k| Fitted {
            gp: k.gp.clone(),
            best: Some(k.best),
            limits: Vec::new(),
            hypervolume: None,
        })
    }

    /// A value in the standardised units of the last refit.
    pub fn standardise(&self, v: f64) -> Option<f64> {
        self.fitted.as_ref().map(|k| k.warp.apply(v))
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
    let warp = Warp::fit(&values);
    let y: Vec<f64> = values.iter().map(|&v| warp.apply(v)).collect();
    let width = points[0].1.len();
    let x = DMatrix::from_fn(width, chosen.len(), |i, j| points[chosen[j]].1[i]);
    let gp = Surrogate::fit(x, y.clone(), None, seed ^ points.len() as u64)?;
    let best = y.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some(Kept {
        gp,
        held: chosen.iter().map(|&i| points[i].0.clone()).collect(),
        seen: points.iter().map(|p| p.0.clone()).collect(),
        at_refit: points.len(),
        warp,
        best,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selection::bayes::key;
    use crate::study::StudySpace;
    use serde_json::{json, Value};

    fn branin(v: &[Value]) -> f64 {
        let (x1, x2) = (v[0].as_f64().unwrap(), v[1].as_f64().unwrap());
        let pi = std::f64::consts::PI;
        let (b, c) = (5.1 / (4.0 * pi * pi), 5.0 / pi);
        (x2 - b * x1 * x1 + c * x1 - 6.0).powi(2) + 10.0 * (1.0 - 1.0 / (8.0 * pi)) * x1.cos() + 10.0
    }

    fn space() -> StudySpace {
        StudySpace::from_json(&json!({"x1": {"uniform": [-5, 10]}, "x2": {"uniform": [0, 15]}})).unwrap()
    }

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
}

//! Running a plan: every candidate on every fold, as few kernel evaluations and
//! factorisations as the candidates allow, small fits side by side on the cores and
//! large ones one at a time with both, progress and cancellation throughout; then the
//! best candidate and the report.
//!
//! Work shared across candidates and folds:
//! - candidates with one kernel share a Gram table of all n rows (when it fits the
//!   memory budget and the kernel's values do not depend on the subset), from which
//!   every fold's training and held-out blocks are gathered: the SVM reads its columns
//!   there, kernel ridge and fixed-kernel GPs factorise a block of it; past the budget,
//!   the SVMs share a lazy table of the columns they ask for (computed once for every
//!   fold and value of C, the most recently used held);
//! - kernel ridge and GP candidates that differ only in `lambda` / `noise` share one
//!   eigendecomposition per fold (`ridge_path.rs`) where that is cheaper than a factor each;
//! - leave-one-out of those models is in closed form, one factor (or decomposition) for
//!   all n rows.

use super::budget::{Environment, Tables};
use super::evaluate::{self, FoldError, Ridge};
use super::plan::{Admission, Candidate, Plan};
use super::scoring::{Held, Needs};
use super::space::{Cv, Method};
use crate::estimator::{FitContext, Limits, ModelSpec, Progress, TrainingData};
use crate::kernel::GramTable;
use crate::linalg::Parallelism;
use rayon::prelude::*;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

#[derive(Debug)]
pub enum SearchError {
    Cancelled,
    /// Every candidate failed; the first failure, in candidate and fold order.
    AllFailed(String),
}

/// The best candidate, its model and `training.search`.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub best: usize,
    pub spec: ModelSpec,
    pub report: Value,
}

/// A candidate's scores from its last round.
#[derive(Debug, Clone, Default)]
struct Entry {
    scores: Vec<Option<f64>>,
    fit_ms: f64,
    round: Option<usize>,
}

impl Entry {
    fn mean(&self) -> Option<f64> {
        let all: Option<Vec<f64>> = self.scores.iter().copied().collect();
        all.filter(|s| !s.is_empty()).map(|s| s.iter().sum::<f64>() / s.len() as f64)
    }

    fn std(&self) -> Option<f64> {
        let mean = self.mean()?;
        let n = self.scores.len() as f64;
        Some((self.scores.iter().map(|s| (s.unwrap_or(mean) - mean).powi(2)).sum::<f64>() / n).sqrt())
    }
}

/// One piece of work: a fold fit, or several that share a decomposition.
enum Unit {
    Plain {
        c: usize,
        f: usize,
    },
    Ridge {
        c: usize,
        f: usize,
    },
    /// A fit whose kernel values come from the table ([`crate::estimator::TableFit`]).
    Table {
        c: usize,
        f: usize,
    },
    Sweep {
        cands: Vec<usize>,
        f: usize,
    },
    Loo {
        c: usize,
    },
    LooSweep {
        cands: Vec<usize>,
    },
}

impl Unit {
    fn fits(&self) -> u64 {
        match self {
            Unit::Sweep { cands, .. } | Unit::LooSweep { cands } => cands.len() as u64,
            _ => 1,
        }
    }
}

/// (candidate, fold, predictions or why not, milliseconds).
type Done = (usize, usize, Result<Held, FoldError>, f64);

struct Search<'a> {
    plan: &'a Plan,
    data: &'a TrainingData,
    ctx: &'a FitContext,
    env: Environment,
    needs: Needs,
    done: &'a AtomicU64,
    failures: &'a Mutex<BTreeMap<(usize, usize), String>>,
}

/// Runs the plan on `data` (the rows it was planned for): progress in `ctx.progress`
/// (phase `search`), cancelled through `ctx.cancel`. A `bayes` search admits the
/// candidates it picks as it goes under `limits`, as the plan admitted its own.
pub fn run(
    plan: &Plan,
    data: &TrainingData,
    ctx: &FitContext,
    env: Environment,
    limits: Limits,
) -> Result<Outcome, SearchError> {
    ctx.progress.search(plan.total_fits);
    let (done, failures) = (AtomicU64::new(0), Mutex::default());
    let s = Search { plan, data, ctx, env, needs: plan.scoring.needs(), done: &done, failures: &failures };
    if plan.method == Method::Bayes {
        return s.bayes(Admission { kind: plan.kind, data, limits });
    }
    let all: Vec<usize> = (0..plan.candidates.len()).collect();
    let (entries, finalists) = match plan.method {
        Method::Halving => {
            let rounds = plan.rounds.len();
            let mut entries = vec![Entry::default(); all.len()];
            let mut alive = all;
            for r in 0..rounds {
                let divisor = 3usize.pow((rounds - 1 - r) as u32);
                let cut = |m: usize| (m / divisor).max(1);
                for (c, mut e) in alive.iter().zip(s.evaluate(&alive, &cut, r + 1 == rounds)?) {
                    e.round = Some(r);
                    entries[*c] = e;
                }
                if r + 1 < rounds {
                    let mut ranked = alive.clone();
                    ranked.sort_by(|&a, &b| {
                        rank(&entries[a], a).partial_cmp(&rank(&entries[b], b)).expect("ranks are ordered")
                    });
                    ranked.truncate(alive.len().div_ceil(3));
                    ranked.sort_unstable();
                    alive = ranked;
                }
            }
            (entries, alive)
        }
        Method::Grid | Method::Random | Method::Bayes => (s.evaluate(&all, &|m| m, true)?, all),
    };
    s.outcome(&entries, &finalists, Map::new())
}

/// Halving's order: scored before failed, higher mean first, earlier first.
fn rank(e: &Entry, c: usize) -> (bool, f64, usize) {
    match e.mean() {
        Some(m) => (false, -m, c),
        None => (true, 0.0, c),
    }
}

impl Search<'_> {
    /// The best of `finalists` (the highest mean, ties to the earlier) and the report,
    /// with `extra` fields; every candidate failed is an error naming the first failure.
    fn outcome(
        &self,
        entries: &[Entry],
        finalists: &[usize],
        extra: Map<String, Value>,
    ) -> Result<Outcome, SearchError> {
        let best =
            finalists.iter().copied().filter(|&c| entries[c].mean().is_some()).fold(None, |best: Option<usize>, c| {
                match best {
                    Some(b) if entries[b].mean() >= entries[c].mean() => Some(b),
                    _ => Some(c),
                }
            });
        let Some(best) = best else {
            let failures = self.failures.lock().expect("failures");
            let first = failures.values().next().cloned().unwrap_or_else(|| "no candidate has a score".into());
            return Err(SearchError::AllFailed(format!("every search candidate failed; the first failure: {first}")));
        };
        let mut report = self.report(entries, best);
        report.as_object_mut().expect("an object").extend(extra);
        let spec = self.plan.candidates[best].spec.clone().expect("the best candidate has a spec");
        Ok(Outcome { best, spec, report })
    }

    fn n(&self) -> usize {
        self.data.x().n()
    }

    fn pooled(&self) -> bool {
        self.plan.cv == Cv::Loo
    }

    /// Whether candidate `spec`'s leave-one-out comes from the closed form (every row
    /// kept, one output).
    fn closed_form(&self, spec: &ModelSpec, full: bool) -> bool {
        full && self.plan.closed_form(spec)
    }

    fn advance(&self, fits: u64) {
        let done = self.done.fetch_add(fits, Ordering::Relaxed) + fits;
        self.ctx.progress.iteration(done);
    }

    /// Candidates `cands` on every fold, each fold's training rows cut to `cut(m)` of
    /// them, drawn at random with the seed (stratified for classifiers: see
    /// [`super::folds::subsample`]); `full` when nothing is cut (closed forms need every
    /// row).
    fn evaluate(&self, cands: &[usize], cut: &dyn Fn(usize) -> usize, full: bool) -> Result<Vec<Entry>, SearchError> {
        let folds = &self.plan.folds;
        let trains: Vec<Vec<usize>> = (0..folds.k())
            .map(|f| {
                let t = folds.train(f);
                let seed = self.plan.seed ^ (f as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                super::folds::subsample(&t, cut(t.len()), seed, self.plan.class_of.as_deref())
            })
            .collect();
        let n_train = trains.iter().map(Vec::len).max().unwrap_or(0);
        // The whole table when the budget holds it; else, for fits that read columns
        // (the SVMs), a lazy table of the columns the budget holds, if that is at least
        // a fit's own share of them (a fit's kernel cache holds about that many anyway).
        let Tables { whole, lazy } = Tables::for_budget(self.n(), self.env.table_budget);
        let mut plain = Vec::new();
        let mut tabled: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        let mut order: Vec<String> = Vec::new();
        let mut results: Vec<Done> = Vec::new();
        for &c in cands {
            let spec = match &self.plan.candidates[c].spec {
                Ok(spec) => spec,
                Err(why) => {
                    self.failures.lock().expect("failures").insert((c, 0), format!("candidate {c}: {why}"));
                    let fits = if self.pooled() { folds.k() } else { trains.len() };
                    self.advance(fits as u64);
                    continue;
                }
            };
            // Closed-form leave-one-out factorises the Gram matrix of all rows, which is
            // the table (and what a direct fit would hold).
            let closed = self.closed_form(spec, full);
            let shares = closed
                // The table's fits (ridge sweeps) take one output: several are fitted plainly.
                || !self.plan.several_outputs
                    && GramTable::suits(spec.kernel())
                    && match (Ridge::of(spec).is_some(), spec.table_fit().is_some()) {
                        (true, _) => whole,
                        (false, true) => whole || lazy,
                        (false, false) => false,
                    };
            if shares {
                let key = spec.kernel().to_json().to_string();
                if !tabled.contains_key(&key) {
                    order.push(key.clone());
                }
                tabled.entry(key).or_default().push(c);
            } else {
                plain.extend((0..folds.k()).map(|f| Unit::Plain { c, f }));
            }
        }
        // Kernel settings are taken a few at a time, as many tables as the budget holds
        // (at most two per core): their units then run as one batch, so that one
        // setting's slow fits overlap another's instead of ending each batch alone.
        let mut batch: Vec<(Unit, Option<Arc<GramTable>>)> = plain.into_iter().map(|u| (u, None)).collect();
        // A lazy table takes the whole budget: one kernel setting at a time.
        let per_table = if whole { GramTable::bytes(self.n()).max(1) } else { u64::MAX };
        let most = (self.env.table_budget / per_table).clamp(1, 2 * rayon::current_num_threads() as u64) as usize;
        let mut keys = order.into_iter().peekable();
        while keys.peek().is_some() || !batch.is_empty() {
            let chunk: Vec<String> = keys.by_ref().take(most).collect();
            let par = Parallelism::for_problem(self.n(), self.env.busy);
            for key in chunk {
                let group = &tabled[&key];
                let kernel = self.plan.candidates[group[0]].spec.as_ref().expect("tabled specs are valid").kernel();
                self.ctx.cancel.check().map_err(|_| SearchError::Cancelled)?;
                let table = Arc::new(match whole {
                    true => GramTable::new(kernel, self.data.x(), par),
                    false => GramTable::lazy(kernel, self.data.x(), self.env.table_budget),
                });
                batch.extend(self.table_units(group, full, &trains).into_iter().map(|u| (u, Some(table.clone()))));
            }
            results.extend(self.execute(&batch, &trains, n_train)?);
            batch.clear();
        }
        Ok(self.collect(cands, results, full))
    }

    /// The units of one kernel's candidates: sweeps where a decomposition pays off,
    /// single fits from the table otherwise.
    fn table_units(&self, group: &[usize], full: bool, trains: &[Vec<usize>]) -> Vec<Unit> {
        let mut units = Vec::new();
        let mut sweeps: BTreeMap<(String, bool, bool), Vec<usize>> = BTreeMap::new();
        for &c in group {
            let spec = self.plan.candidates[c].spec.as_ref().expect("tabled specs are valid");
            match (Ridge::of(spec), spec) {
                (Some(r), _) => sweeps.entry(r.sweep_key()).or_default().push(c),
                (None, spec) if spec.table_fit().is_some() => {
                    units.extend((0..trains.len()).map(|f| Unit::Table { c, f }))
                }
                (None, _) => units.extend((0..trains.len()).map(|f| Unit::Plain { c, f })),
            }
        }
        let loo = self.pooled() && full;
        for cands in sweeps.into_values() {
            let n = if loo { self.n() } else { trains.iter().map(Vec::len).max().unwrap_or(0) };
            let sweep = self.env.eigen && super::ridge_path::pays_off(cands.len(), n, loo, !self.needs.variance);
            match (loo, sweep) {
                (true, true) => units.push(Unit::LooSweep { cands }),
                (true, false) => units.extend(cands.into_iter().map(|c| Unit::Loo { c })),
                (false, true) => units.extend((0..trains.len()).map(|f| Unit::Sweep { cands: cands.clone(), f })),
                (false, false) => {
                    units.extend(cands.iter().flat_map(|&c| (0..trains.len()).map(move |f| Unit::Ridge { c, f })))
                }
            }
        }
        units
    }

    /// Runs units side by side (small fits, idle cores) or one at a time with every core.
    fn execute(
        &self,
        units: &[(Unit, Option<Arc<GramTable>>)],
        trains: &[Vec<usize>],
        n_train: usize,
    ) -> Result<Vec<Done>, SearchError> {
        let side_by_side = self.env.busy == 0
            && rayon::current_num_threads() > 1
            && !self.gains_from_threads(n_train)
            && units.len() > 1;
        let par = if side_by_side { Parallelism::Sequential } else { Parallelism::for_problem(n_train, self.env.busy) };
        let run = |(u, table): &(Unit, Option<Arc<GramTable>>)| self.run_unit(u, table.as_ref(), trains, par);
        // One task per unit, so that idle cores steal single units.
        let out: Result<Vec<Vec<Done>>, SearchError> = if side_by_side {
            units.par_iter().with_max_len(1).map(run).collect()
        } else {
            units.iter().map(run).collect()
        };
        Ok(out?.into_iter().flatten().collect())
    }

    /// Whether one fit of this size runs faster on every core than fits side by side.
    /// Every candidate is of one kind; its spec knows its solver.
    fn gains_from_threads(&self, n_train: usize) -> bool {
        match self.plan.candidates.iter().find_map(|c| c.spec.as_ref().ok()) {
            Some(spec) => spec.gains_from_threads(n_train),
            None => Parallelism::for_problem(n_train, 0).is_parallel(),
        }
    }

    fn run_unit(
        &self,
        unit: &Unit,
        table: Option<&Arc<GramTable>>,
        trains: &[Vec<usize>],
        par: Parallelism,
    ) -> Result<Vec<Done>, SearchError> {
        // Candidates may run side by side: each keeps to the built-in budgets, which the
        // search's memory estimate assumes (the final refit may take more).
        let ctx = FitContext { par, cancel: self.ctx.cancel.clone(), progress: Progress::default(), memory: None };
        ctx.cancel.check().map_err(|_| SearchError::Cancelled)?;
        let started = Instant::now();
        let spec = |c: usize| self.plan.candidates[c].spec.as_ref().expect("units are made for valid specs");
        let y = || match self.data {
            TrainingData::Regression(d) => d.y.as_slice(),
            TrainingData::Classification(_) | TrainingData::Unlabelled(_) => {
                unreachable!("ridge units are regressions")
            }
        };
        let table = || table.expect("table units have a table");
        let ridge = |c: usize| Ridge::of(spec(c)).expect("a ridge unit");
        let folds = &self.plan.folds;
        let mut out: Vec<Done> = match unit {
            Unit::Plain { c, f } => {
                vec![(*c, *f, evaluate::plain(spec(*c), self.data, &trains[*f], folds.test(*f), self.needs, &ctx), 0.0)]
            }
            Unit::Ridge { c, f } => {
                let held = evaluate::ridge(&ridge(*c), table(), y(), &trains[*f], folds.test(*f), self.needs, &ctx);
                vec![(*c, *f, held, 0.0)]
            }
            Unit::Table { c, f } => {
                let held =
                    evaluate::from_table(spec(*c), table(), self.data, &trains[*f], folds.test(*f), self.needs, &ctx);
                vec![(*c, *f, held, 0.0)]
            }
            Unit::Sweep { cands, f } => {
                let values: Vec<f64> = cands.iter().map(|&c| ridge(c).diagonal).collect();
                let r = ridge(cands[0]);
                let held = super::ridge_path::sweep_fold(
                    &r,
                    &values,
                    table(),
                    y(),
                    &trains[*f],
                    folds.test(*f),
                    self.needs,
                    &ctx,
                )
                .map_err(|_| SearchError::Cancelled)?;
                cands.iter().zip(held).map(|(&c, h)| (c, *f, h, 0.0)).collect()
            }
            Unit::Loo { c } => vec![(*c, 0, evaluate::ridge_loo(&ridge(*c), table(), y(), self.needs, &ctx), 0.0)],
            Unit::LooSweep { cands } => {
                let values: Vec<f64> = cands.iter().map(|&c| ridge(c).diagonal).collect();
                let held = super::ridge_path::sweep_loo(&ridge(cands[0]), &values, table(), y(), self.needs, &ctx)
                    .map_err(|_| SearchError::Cancelled)?;
                cands.iter().zip(held).map(|(&c, h)| (c, 0, h, 0.0)).collect()
            }
        };
        if out.iter().any(|(_, _, h, _)| matches!(h, Err(FoldError::Cancelled))) {
            return Err(SearchError::Cancelled);
        }
        // Shared work is shared out evenly among the candidates it served.
        let ms = started.elapsed().as_secs_f64() * 1e3 / out.len().max(1) as f64;
        out.iter_mut().for_each(|d| d.3 = ms);
        self.advance(unit.fits());
        Ok(out)
    }

    /// Scores per candidate and fold (leave-one-out: all n predictions as one fold).
    fn collect(&self, cands: &[usize], results: Vec<Done>, full: bool) -> Vec<Entry> {
        let k = self.plan.folds.k();
        let closed = |c: usize| self.plan.candidates[c].spec.as_ref().is_ok_and(|s| self.closed_form(s, full));
        let mut held: BTreeMap<usize, BTreeMap<usize, Held>> = BTreeMap::new();
        let mut entries: BTreeMap<usize, Entry> = cands
            .iter()
            .map(|&c| {
                let slots = if self.pooled() { 1 } else { k };
                (c, Entry { scores: vec![None; slots], ..Entry::default() })
            })
            .collect();
        let mut failed_pool = std::collections::BTreeSet::new();
        for (c, f, result, ms) in results {
            let entry = entries.get_mut(&c).expect("a planned candidate");
            entry.fit_ms += ms;
            match result {
                Ok(h) if self.pooled() && !closed(c) => {
                    held.entry(c).or_default().insert(f, h);
                }
                Ok(h) => {
                    let slot = if self.pooled() { 0 } else { f };
                    entry.scores[slot] = self.plan.scoring.score(&h);
                    if entry.scores[slot].is_none() {
                        self.fail(c, f, format!("{} is not defined on its held-out rows", self.plan.scoring.name()));
                    }
                }
                Err(FoldError::Failed(why)) => {
                    failed_pool.insert(c);
                    self.fail(c, f, why);
                }
                Err(FoldError::Cancelled) => unreachable!("cancellation ends the search"),
            }
        }
        for (c, parts) in held {
            if failed_pool.contains(&c) || parts.len() != k {
                continue;
            }
            let pooled = Held::concat(parts.into_values().collect());
            let entry = entries.get_mut(&c).expect("a planned candidate");
            entry.scores[0] = self.plan.scoring.score(&pooled);
            if entry.scores[0].is_none() {
                self.fail(
                    c,
                    0,
                    format!("{} is not defined on the leave-one-out predictions", self.plan.scoring.name()),
                );
            }
        }
        entries.into_values().collect()
    }

    fn fail(&self, c: usize, f: usize, why: String) {
        let values = Value::Object(self.plan.candidates[c].values.clone());
        self.failures
            .lock()
            .expect("failures")
            .entry((c, f))
            .or_insert(format!("candidate {c} {values}, fold {f}: {why}"));
    }

    /// `bayes`: the initial candidates (all at once), then one candidate at a time where
    /// the optimiser's log expected improvement of the mean score is highest, until the
    /// budget is spent or a finite space has no setting left.
    fn bayes(self, admission: Admission<'_>) -> Result<Outcome, SearchError> {
        use super::bayes::{key, History, Suggester};
        let bp = self.plan.bayes.as_ref().expect("a bayes search has its plan");
        let initial: Vec<usize> = (0..self.plan.candidates.len()).collect();
        let mut entries = self.evaluate(&initial, &|m| m, true)?;
        let mut plan = self.plan.clone();
        let setting = |c: &Candidate| -> Vec<Value> { bp.pointers.iter().map(|p| c.values[&p.text].clone()).collect() };
        let mut taken: std::collections::HashSet<String> = plan.candidates.iter().map(|c| key(&setting(c))).collect();
        let suggester = Suggester { space: &bp.space, seed: bp.seed };
        // The surrogate is refitted every few candidates and grown by a row in between,
        // as a study's is.
        let mut model = super::bayes::Model::default();
        while plan.candidates.len() < bp.budget {
            self.ctx.cancel.check().map_err(|_| SearchError::Cancelled)?;
            // A failed candidate counts as the worst mean seen so far.
            let means: Vec<Option<f64>> = entries.iter().map(Entry::mean).collect();
            let worst = means.iter().flatten().copied().fold(f64::INFINITY, f64::min);
            let held: Vec<(String, Vec<f64>, f64)> = plan
                .candidates
                .iter()
                .zip(&means)
                .filter_map(|(c, m)| {
                    let value = m.or(worst.is_finite().then_some(worst))?;
                    let values = setting(c);
                    Some((key(&values), bp.space.encode(&values)?, value))
                })
                .collect();
            let observed: Vec<(Vec<f64>, f64)> = held.iter().map(|(_, u, v)| (u.clone(), *v)).collect();
            let round = plan.candidates.len() as u64;
            let fitted = model.update(&held, bp.seed);
            let history = History { observed: &observed, pending: &[], taken: &taken };
            let Some(next) = suggester.next(fitted.as_ref(), &history, round) else { break };
            taken.insert(key(&next.values));
            let (values, doc) = bp.candidate(&next.values);
            let spec = admission.spec(&doc).map_err(|e| e.to_string());
            plan.candidates.push(Candidate { values, spec });
            let step = Search { plan: &plan, ..self };
            entries.extend(step.evaluate(&[plan.candidates.len() - 1], &|m| m, true)?);
        }
        let all: Vec<usize> = (0..plan.candidates.len()).collect();
        let mut extra = Map::new();
        extra.insert("acquisition".into(), json!("log_ei"));
        extra.insert("initial".into(), json!(initial.len()));
        extra.insert(
            "surrogate".into(),
            json!({
                "hyperparameters": model.hyper().map(super::bayes::surrogate::Hyper::to_json),
                "priors": super::bayes::surrogate::priors_json(bp.space.width()),
            }),
        );
        Search { plan: &plan, ..self }.outcome(&entries, &all, extra)
    }

    fn report(&self, entries: &[Entry], best: usize) -> Value {
        let cv = match self.plan.cv {
            Cv::KFold(k) => json!(k),
            Cv::Loo => json!("loo"),
        };
        let candidates: Vec<Value> = self
            .plan
            .candidates
            .iter()
            .zip(entries)
            .map(|(c, e)| {
                let mut v = json!({
                    "values": c.values, "fold_scores": e.scores, "mean_score": e.mean(), "std_score": e.std(),
                    "fit_ms": e.fit_ms,
                });
                if let Some(r) = e.round {
                    v["round"] = json!(r);
                }
                v
            })
            .collect();
        json!({
            "method": self.plan.method.name(), "cv": cv, "scoring": self.plan.scoring.name(),
            "n_candidates": self.plan.candidates.len(), "n_fits": self.done.load(Ordering::Relaxed),
            "best_index": best, "best_values": self.plan.candidates[best].values,
            "best_score": entries[best].mean(), "candidates": candidates,
        })
    }
}

//! A search checked against its training rows: the folds, the scoring, every candidate
//! as a model spec, and the number of fold fits it will run (held to the limit) — all
//! before anything is queued.

use super::folds::Folds;
use super::pointer::Document;
use super::scoring::Scoring;
use super::space::{Cv, Method, SearchSpec};
use crate::estimator::{Limits, ModelKind, ModelSpec, Task, TrainingData};
use crate::spec::{pointer_token, ErrorKind, FieldError};
use serde_json::{Map, Value};

/// One candidate setting: its values (pointer -> value, in pointer order) and the model
/// they make, or why the fields do not take that combination (it then fails).
#[derive(Debug, Clone)]
pub struct Candidate {
    pub values: Map<String, Value>,
    pub spec: Result<ModelSpec, String>,
}

/// What the rows say to the plan.
pub struct Rows<'a> {
    pub n: usize,
    /// Classifiers: each row's class index; None for regression.
    pub classes: Option<(&'a [usize], usize)>,
    /// Regression with a 2-D y: scored by the mean over outputs, fitted plainly.
    pub several_outputs: bool,
}

/// A checked search, ready to run.
#[derive(Debug, Clone)]
pub struct Plan {
    pub kind: ModelKind,
    pub method: Method,
    pub cv: Cv,
    pub folds: Folds,
    pub scoring: Scoring,
    pub candidates: Vec<Candidate>,
    /// Candidates evaluated per round (one round unless halving).
    pub rounds: Vec<usize>,
    /// Fold fits planned (closed-form leave-one-out counts one per candidate).
    pub total_fits: u64,
    pub n_classes: Option<usize>,
    /// `halving`: the seed of each round's draw of rows, and (classifiers) each row's
    /// class, by which the draw is stratified.
    pub seed: u64,
    pub class_of: Option<std::sync::Arc<[usize]>>,
    /// A 2-D y: no closed form nor table fits (they take one output).
    pub several_outputs: bool,
    /// `bayes`: what the run needs to make the candidates after the initial ones.
    pub bayes: Option<BayesPlan>,
}

/// How a candidate's document becomes a model: the estimator's own admission of the
/// search's rows under the server's limits (selection never asks the layers above).
#[derive(Debug, Clone, Copy)]
pub struct Admission<'a> {
    pub kind: ModelKind,
    pub data: &'a TrainingData,
    pub limits: Limits,
}

impl Admission<'_> {
    /// The candidate's model, checked as the body's own is (errors point into the body).
    pub fn spec(&self, doc: &Document) -> Result<ModelSpec, FieldError> {
        ModelSpec::admitted(self.kind, doc.kernel(), doc.params(), self.data, self.limits)
    }
}

/// The part of a `bayes` search decided as it runs: each next candidate is a setting of
/// `space` that the optimiser picks, made into a document from `base`.
#[derive(Debug, Clone)]
pub struct BayesPlan {
    pub space: super::bayes::Space,
    pub pointers: Vec<super::pointer::Pointer>,
    pub base: Document,
    /// Candidates in all, the initial ones included.
    pub budget: usize,
    pub seed: u64,
}

impl BayesPlan {
    /// A setting (in pointer order) as a candidate's values and its document.
    pub fn candidate(&self, values: &[Value]) -> (Map<String, Value>, Document) {
        let mut doc = self.base.clone();
        let mut named = Map::new();
        for (pointer, v) in self.pointers.iter().zip(values) {
            doc.set(pointer, v.clone()).expect("every pointer was checked to name a place");
            named.insert(pointer.text.clone(), v.clone());
        }
        (named, doc)
    }
}

impl Plan {
    /// Checks `search` against the rows and expands it. `admission` turns a document of
    /// kernel and params into a model spec as the body's own are checked (its errors point
    /// into the body); it is asked for every value of every pointer (with the other
    /// pointers at their first values) and then for every candidate.
    pub fn new(
        search: &SearchSpec,
        kind: ModelKind,
        base: &Document,
        rows: Rows<'_>,
        max_fits: u64,
        admission: &Admission<'_>,
    ) -> Result<Plan, FieldError> {
        if matches!(kind.task(), Task::Novelty | Task::Transform) {
            return Err(FieldError::invalid(
                "/search",
                format!("a search scores predictions of targets; {} has none", kind.name()),
            ));
        }
        let (folds, cv) = plan_folds(search, &rows)?;
        let scoring = plan_scoring(search, kind, rows.classes.map(|(_, k)| k))?;
        let fits_per_candidate = |closed: bool| match search.cv {
            Cv::Loo if closed => 1u128,
            _ => folds.k() as u128,
        };
        let n_candidates = search.n_candidates();
        let too_many = |total: u128| {
            FieldError::invalid(
                "/search",
                format!("this search needs {total} candidate fits x folds, over the limit of {max_fits} (MERCER_MAX_SEARCH_FITS)"),
            )
        };
        // Every candidate needs at least one fit: refuse before expanding anything.
        if n_candidates.saturating_mul(fits_per_candidate(true)) > max_fits as u128 {
            return Err(too_many(n_candidates.saturating_mul(fits_per_candidate(true))));
        }
        check_values(search, base, admission)?;
        let pointers: Vec<super::pointer::Pointer> = search.axes.iter().map(|(p, _)| p.clone()).collect();
        let candidate = |values: &[Value]| -> (Map<String, Value>, Document) {
            let mut doc = base.clone();
            let mut named = Map::new();
            for (pointer, v) in pointers.iter().zip(values) {
                doc.set(pointer, v.clone()).expect("every pointer was checked to name a place");
                named.insert(pointer.text.clone(), v.clone());
            }
            (named, doc)
        };
        let candidates: Vec<Candidate> = search
            .expand()
            .into_iter()
            .map(|values| {
                let (named, doc) = candidate(&values);
                let spec = admission.spec(&doc).map_err(|e| e.to_string());
                Candidate { values: named, spec }
            })
            .collect();
        let rounds = search.rounds(candidates.len());
        // Closed-form leave-one-out counts one fit; a round of halving fits its survivors.
        let closed = |c: &Candidate| !rows.several_outputs && c.spec.as_ref().is_ok_and(|s| s.closed_form_loo());
        let total: u128 = match search.method {
            Method::Halving => rounds.iter().map(|&r| r as u128 * folds.k() as u128).sum(),
            // The candidates after the initial ones are of the same model: as the first.
            Method::Bayes => n_candidates * fits_per_candidate(candidates.first().is_some_and(closed)),
            Method::Grid | Method::Random => candidates.iter().map(|c| fits_per_candidate(closed(c))).sum(),
        };
        if total > max_fits as u128 {
            return Err(too_many(total));
        }
        if scoring == Scoring::NegLogLoss {
            if let Some(c) = candidates.iter().find(|c| c.spec.as_ref().is_ok_and(|s| !s.gives_probabilities())) {
                return Err(FieldError::invalid(
                    "/search/scoring",
                    format!(
                        "neg_log_loss needs probabilities; the {} candidate {} gives none (set params.probability true)",
                        kind.name(),
                        Value::Object(c.values.clone())
                    ),
                ));
            }
        }
        Ok(Plan {
            kind,
            method: search.method,
            cv,
            folds,
            scoring,
            candidates,
            rounds,
            total_fits: total as u64,
            n_classes: rows.classes.map(|(_, k)| k),
            seed: search.seed,
            class_of: (search.method == Method::Halving).then(|| rows.classes.map(|(y, _)| y.into())).flatten(),
            several_outputs: rows.several_outputs,
            // The unit cube's width was checked with the search (`bayes` only).
            bayes: (search.method == Method::Bayes).then(|| BayesPlan {
                space: super::bayes::Space::of(search.axes.iter().map(|(_, a)| a)),
                pointers: pointers.clone(),
                base: base.clone(),
                budget: n_candidates as usize,
                seed: search.seed,
            }),
        })
    }

    /// Whether leave-one-out is taken in closed form for this candidate.
    pub fn closed_form(&self, spec: &ModelSpec) -> bool {
        self.cv == Cv::Loo && !self.several_outputs && spec.closed_form_loo()
    }
}

fn plan_folds(search: &SearchSpec, rows: &Rows<'_>) -> Result<(Folds, Cv), FieldError> {
    let n = rows.n;
    // `cv` is checked even when `folds` overrides it.
    if let Cv::KFold(k) = search.cv {
        if k > n {
            return Err(FieldError::invalid("/search/cv", format!("{k} folds for {n} training rows; at most {n}")));
        }
        if let Some((y, classes)) = rows.classes {
            let mut count = vec![0usize; classes];
            for &c in y {
                count[c] += 1;
            }
            let largest = count.iter().copied().max().unwrap_or(0);
            if largest < k {
                return Err(FieldError::invalid(
                    "/search/cv",
                    format!("{k} stratified folds need a class with at least {k} rows; the largest has {largest}"),
                ));
            }
        }
    }
    if let Some(fold_of) = &search.folds {
        if fold_of.len() != n {
            return Err(FieldError::invalid(
                "/search/folds",
                format!("has {} fold numbers for {n} training rows", fold_of.len()),
            ));
        }
        let k = fold_of.iter().copied().max().unwrap_or(0) as usize + 1;
        if k < 2 {
            return Err(FieldError::invalid("/search/folds", "needs at least two folds (numbers 0 and 1)"));
        }
        let mut used = vec![false; k];
        for &f in fold_of {
            used[f as usize] = true;
        }
        if let Some(empty) = used.iter().position(|u| !u) {
            return Err(FieldError::invalid(
                "/search/folds",
                format!("fold {empty} is empty: folds are numbered 0..{} and each needs a row", k - 1),
            ));
        }
        let assignment: Vec<usize> = fold_of.iter().map(|&f| f as usize).collect();
        return Ok((Folds::from_assignment(&assignment, k), Cv::KFold(k)));
    }
    let shuffle = search.shuffle.then_some(search.seed);
    let folds = match (search.cv, rows.classes) {
        (Cv::Loo, _) => Folds::leave_one_out(n),
        (Cv::KFold(k), None) => Folds::kfold(n, k, shuffle),
        (Cv::KFold(k), Some((y, _))) => Folds::stratified(y, k, shuffle),
    };
    Ok((folds, search.cv))
}

fn plan_scoring(search: &SearchSpec, kind: ModelKind, classes: Option<usize>) -> Result<Scoring, FieldError> {
    let regression = kind.task() == Task::Regression;
    let scoring = search.scoring.unwrap_or(if regression { Scoring::R2 } else { Scoring::Accuracy });
    let refuse = |why: String| Err(FieldError::invalid("/search/scoring", why));
    if scoring.is_regression() != regression {
        let task = if regression { "a regression" } else { "a classifier" };
        return refuse(format!("{} does not score {task} ({})", scoring.name(), kind.name()));
    }
    if scoring == Scoring::MeanLogPredictiveDensity && !kind.can().posterior {
        return refuse(format!(
            "mean_log_predictive_density needs a predictive variance: {} only, not {}",
            ModelKind::names_that(|c| c.posterior),
            kind.name()
        ));
    }
    if scoring == Scoring::RocAuc && classes != Some(2) {
        return refuse(format!("roc_auc is for two classes; this problem has {}", classes.unwrap_or(0)));
    }
    Ok(scoring)
}

/// Every value of every pointer, put alone into the base (the other pointers at their
/// first values), must be one its field takes.
fn check_values(search: &SearchSpec, base: &Document, admission: &Admission<'_>) -> Result<(), FieldError> {
    let mut first = base.clone();
    for (pointer, axis) in &search.axes {
        let at = format!("/search/space/{}", pointer_token(&pointer.text));
        if !first.has_place(pointer) {
            return Err(FieldError::invalid(
                at,
                format!("`{}` names no place in the body's kernel or params", pointer.text),
            ));
        }
        let v = axis.probes().swap_remove(0);
        first.set(pointer, v).expect("has a place");
    }
    for (pointer, axis) in &search.axes {
        let at = format!("/search/space/{}", pointer_token(&pointer.text));
        for (i, v) in axis.probes().into_iter().enumerate() {
            let mut doc = first.clone();
            doc.set(pointer, v.clone()).expect("has a place");
            let Err(e) = admission.spec(&doc) else { continue };
            if e.is_unknown_field() && pointer.covers(&e.pointer) {
                return Err(FieldError::invalid(at, format!("the {} has no field `{}`", owner(pointer), pointer.text)));
            }
            let other = search.axes.iter().find(|(q, _)| q != pointer && q.covers(&e.pointer));
            if pointer.covers(&e.pointer)
                || e.pointer.len() < pointer.text.len() && pointer.text.starts_with(&e.pointer)
            {
                return Err(FieldError::invalid(format!("{at}/{i}"), format!("{v}: {}", e.message)));
            }
            if let Some((q, _)) = other {
                // The other pointer's first value is at fault: it is checked in its turn.
                let qat = format!("/search/space/{}", pointer_token(&q.text));
                let kind = if e.is_unknown_field() { ErrorKind::Invalid } else { e.kind };
                return Err(FieldError { kind, pointer: format!("{qat}/0"), message: e.message });
            }
            // Nothing searched is there: the body itself is at fault.
            return Err(e);
        }
    }
    Ok(())
}

fn owner(pointer: &super::pointer::Pointer) -> &'static str {
    if pointer.tokens[0] == "kernel" {
        "kernel"
    } else {
        "model's params"
    }
}

//! What a running fit is given and gives back: how parallel it may be, the token that
//! cancels it, where it reports its progress, and how it fails.

use crate::linalg::{LinalgError, Parallelism};
use crate::spec::FieldError;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Lets a fit be abandoned between its phases (the model was deleted, or the server is
/// shutting down). Cheap to clone; all clones share one flag.
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Release);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// The shared flag, for kernel loops that check it ([`crate::kernel::cancel`]).
    pub fn flag(&self) -> Arc<AtomicBool> {
        self.0.clone()
    }

    /// `Err(Cancelled)` once cancelled: estimators call it between phases with `?`.
    pub fn check(&self) -> Result<(), FitError> {
        if self.is_cancelled() {
            Err(FitError::Cancelled)
        } else {
            Ok(())
        }
    }
}

/// What a running fit says of itself: its phase, the iteration within it, and where the
/// fit has one the objective being optimised. Shared between the fit and whoever shows
/// it (the model resource while training); cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Progress(Arc<Mutex<ProgressState>>);

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ProgressState {
    pub phase: &'static str,
    pub iteration: u64,
    /// Iterations planned, where the phase knows (a search's fold fits).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub objective: Option<f64>,
    /// A minibatch fit's current epoch (1-based), `iteration` then counting minibatch steps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
}

impl Progress {
    fn lock(&self) -> std::sync::MutexGuard<'_, ProgressState> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Enters a phase: its iteration count starts at 0, and no objective yet.
    pub fn phase(&self, phase: &'static str) {
        *self.lock() = ProgressState { phase, iteration: 0, total: None, objective: None, epoch: None };
    }

    /// Enters a model search of `total` fold fits (`iteration` then counts those done).
    pub fn search(&self, total: u64) {
        *self.lock() =
            ProgressState { phase: "search", iteration: 0, total: Some(total), objective: None, epoch: None };
    }

    /// Enters a minibatch phase of `total` steps (`iteration` then counts those done).
    pub fn minibatches(&self, phase: &'static str, total: u64) {
        *self.lock() = ProgressState { phase, iteration: 0, total: Some(total), objective: None, epoch: None };
    }

    /// Enters epoch `epoch` of a minibatch phase; `objective`, when given, is where the
    /// last epoch ended.
    pub fn epoch(&self, epoch: u64, objective: Option<f64>) {
        let mut p = self.lock();
        p.epoch = Some(epoch);
        if objective.is_some_and(f64::is_finite) {
            p.objective = objective;
        }
    }

    pub fn iteration(&self, iteration: u64) {
        self.lock().iteration = iteration;
    }

    /// One more iteration, with the objective's value there when the phase has one.
    pub fn step(&self, objective: Option<f64>) {
        let mut p = self.lock();
        p.iteration += 1;
        if objective.is_some_and(f64::is_finite) {
            p.objective = objective;
        }
    }

    pub fn snapshot(&self) -> ProgressState {
        self.lock().clone()
    }
}

/// What a fit may use: how parallel it may be, how it learns it is no longer wanted,
/// where it reports how far it has got, and how much memory it may hold.
#[derive(Debug, Clone)]
pub struct FitContext {
    pub par: Parallelism,
    pub cancel: CancelToken,
    pub progress: Progress,
    /// Bytes of working memory the fit may use (MERCER_MAX_FIT_BYTES; the service has
    /// already refused fits whose estimate exceeds it). A fit that can trade memory for
    /// time (the Nystrom classifiers holding every row's features) takes more than its
    /// minimum when this allows; None: the built-in budgets.
    pub memory: Option<u64>,
}

impl FitContext {
    pub fn sequential() -> FitContext {
        FitContext::new(Parallelism::Sequential)
    }

    pub fn new(par: Parallelism) -> FitContext {
        FitContext { par, cancel: CancelToken::default(), progress: Progress::default(), memory: None }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FitError {
    #[error("the fit was cancelled")]
    Cancelled,
    /// Never `LinalgError::Interrupted`: that is `Cancelled`.
    #[error("{0}")]
    Factorisation(LinalgError),
    /// A parameter that is only found invalid against the data (e.g. an ARD list).
    #[error("{0}")]
    Invalid(FieldError),
    /// No optimiser start could be evaluated.
    #[error("hyperparameter optimisation failed: {0}")]
    Optimisation(String),
    /// A model search found no candidate with a score.
    #[error("{0}")]
    Search(String),
}

impl From<LinalgError> for FitError {
    fn from(e: LinalgError) -> FitError {
        match e {
            LinalgError::Interrupted => FitError::Cancelled,
            other => FitError::Factorisation(other),
        }
    }
}

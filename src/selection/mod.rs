//! Model selection: cross-validated search over any hyperparameter of a training body.
//!
//! A body's `search` names JSON pointers into its `kernel` and `params` and the values
//! to try. This module owns what happens between the request and the final fit: reading
//! the search (`space.rs`, `pointer.rs`), checking it against the rows and expanding the
//! candidates (`plan.rs`), assigning folds as scikit-learn does (`folds.rs`), fitting
//! and scoring every candidate on every fold while reusing the work candidates share
//! (`run.rs`, `evaluate.rs`, `ridge_path.rs`, within `budget.rs`'s means), and scoring as scikit-learn's scorers
//! (`scoring.rs`). It sits above the estimators and below the service: it knows models,
//! kernels and factorisations, nothing of HTTP or storage. The service refits the best
//! candidate on all rows and reports `training.search`.

pub mod bayes;
mod budget;
mod evaluate;
mod folds;
mod plan;
mod pointer;
mod ridge_path;
mod run;
mod scoring;
pub mod space;

pub use budget::{Environment, Tables};
pub use folds::Folds;
pub use plan::{Admission, Candidate, Plan, Rows};
pub use pointer::{Document, Pointer};
pub use run::{run, Outcome, SearchError};
pub use scoring::Scoring;
pub use space::{Cv, Method, SearchSpec};

impl Plan {
    /// Bytes the search's fits hold at their peak with `at_once` fold fits running side
    /// by side: the largest candidate fit (at all n rows, which also bounds the final
    /// refit), times `at_once`. Shared Gram tables take what the limit leaves.
    pub fn memory_estimate(&self, n: usize, d: usize, at_once: usize) -> u64 {
        let largest = self
            .candidates
            .iter()
            .filter_map(|c| c.spec.as_ref().ok())
            .map(|s| s.fit_memory_estimate(n, d) as u64)
            .max()
            .unwrap_or(0);
        largest.saturating_mul(at_once.max(1) as u64)
    }
}

//! What a fit reports: the model resource's `training` object, and the closed-form
//! leave-one-out figures of an exact fit.

use crate::linalg::Parallelism;
use nalgebra::DMatrix;
use serde::Serialize;
use serde_json::Value;

/// How a fit went, as reported in the model resource's `training`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct TrainingReport {
    pub duration_ms: f64,
    /// `exact` or `nystrom`: what `approximation` resolved to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approximation: Option<String>,
    /// Nystrom fits: M.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inducing_points: Option<u64>,
    /// Nystrom fits with uniform selection: the training rows' positions (0-based) that
    /// are the inducing points, in the order used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inducing_indices: Option<Vec<u64>>,
    /// Nystrom GP: Titsias' collapsed bound (normalised units under normalize_y).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence_lower_bound: Option<f64>,
    /// Variational GP: the ELBO over every row at the fitted q(u), hyperparameters and
    /// inducing locations (normalised units under normalize_y).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elbo: Option<f64>,
    /// Variational GP: passes over the rows (0 when nothing was learned by minibatches:
    /// the Gaussian likelihood's q(u) at fixed hyperparameters is found in one pass).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epochs: Option<u64>,
    /// Nystrom GP with optimize on many rows: the rows of the seeded subset the
    /// hyperparameter search ran on (the final fit uses every row).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optimized_on_rows: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_marginal_likelihood: Option<f64>,
    /// Closed-form leave-one-out of an exact fit (`params.loo`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loo: Option<LeaveOneOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub converged: Option<bool>,
    /// Nystrom kernel_ridge: `cg` or `direct`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub solver: Option<String>,
    /// Nystrom kernel_ridge by cg: the final relative preconditioned residual (the
    /// largest over outputs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub residual: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iterations: Option<u64>,
    /// Hyperparameter search: objective evaluations of the search that produced the
    /// returned hyperparameters (line-search trials and failed points included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluations: Option<u64>,
    /// Hyperparameter search: the rule that ended it (`projected_gradient`,
    /// `relative_reduction`, `max_iterations`, `max_evaluations`, `line_search`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// gp_classifier: Newton steps of the final Laplace mode searches (summed over the
    /// one-vs-rest machines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode_iterations: Option<u64>,
    /// Optimiser starts that could not be evaluated (non-finite or not factorisable).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restarts_failed: Option<u64>,
    /// Pointers of optimised hyperparameters that ended on a bound (scikit-learn warns
    /// about these; we report them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hyperparameters_at_bounds: Option<Vec<String>>,
    /// SVM with `probability`: training rows whose most probable class is not the
    /// predicted one (Platt scaling and voting can disagree, as in LIBSVM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probability_disagreements: Option<u64>,
    /// gp_classifier with more than two classes: each one-vs-rest machine's kernel as
    /// fitted, in the order of `classes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_kernels: Option<Vec<Value>>,
    /// SVM classifiers: support vectors per class, in the order of `classes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n_support_per_class: Option<Vec<u64>>,
    /// one_class_svm: LIBSVM's rho (the decision function is the raw score minus rho;
    /// scikit-learn's `offset_`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rho: Option<f64>,
    /// nu-SVR: the epsilon its solver found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epsilon: Option<f64>,
    /// kernel_pca: the kept eigenvalues of the centred kernel matrix, descending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eigenvalues: Option<Vec<f64>>,
    /// kernel_pca: the components kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n_components: Option<u64>,
    /// A searched fit: the model search that chose these hyperparameters (every
    /// candidate's fold scores), as `selection` reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<Value>,
}

/// Leave-one-out figures of an exact fit with its hyperparameters fixed, in y's units:
/// each training row predicted by the model fitted on the others, from the one fit
/// (Rasmussen & Williams section 5.4.2; for kernel ridge, Allen's PRESS residuals).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LeaveOneOut {
    pub rmse: f64,
    /// GP: the mean over rows of log N(y_i; mu_-i, s2_-i), noise included in s2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_log_predictive_density: Option<f64>,
}

impl LeaveOneOut {
    /// From a factor of A = K + s I and alpha = A^-1 y', y' = (y - m) / scale per output
    /// (n x t): the residuals y'_ik - mu_ik = alpha_ik / [A^-1]_ii and variances
    /// 1 / [A^-1]_ii, reported times output k's `scales[k]` (and the density per unit of
    /// y), averaged over every row and output. One pass for diag(A^-1): n^3 / 3.
    pub fn from_factor(
        chol: &crate::linalg::Cholesky,
        alpha: &DMatrix<f64>,
        scales: &[f64],
        density: bool,
        par: Parallelism,
    ) -> LeaveOneOut {
        let inv_diag = chol.inverse_diagonal(par);
        let count = alpha.len().max(1) as f64;
        let residual = |i: usize, k: usize| alpha[(i, k)] / inv_diag[i];
        let cells = || (0..alpha.ncols()).flat_map(|k| (0..alpha.nrows()).map(move |i| (i, k)));
        let mse = cells().map(|(i, k)| (residual(i, k) * scales[k]).powi(2)).sum::<f64>() / count;
        let mean_log_predictive_density = density.then(|| {
            let ln_2pi = (2.0 * std::f64::consts::PI).ln();
            let total: f64 = cells()
                .map(|(i, k)| {
                    let s2 = 1.0 / inv_diag[i];
                    let r = residual(i, k);
                    -0.5 * (ln_2pi + s2.ln()) - r * r / (2.0 * s2) - scales[k].ln()
                })
                .sum();
            total / count
        });
        LeaveOneOut { rmse: mse.sqrt(), mean_log_predictive_density }
    }

    /// Kernel ridge with sample weights, from the factor of S K S + lambda I and b, its
    /// solution for S y (n x t): the scaled residuals b_ik / [A^-1]_ii are sqrt(w_i) e_ik,
    /// and the rmse is sqrt(sum_i w_i |e_i|^2 / (t sum_i w_i)) (rows of weight 0 count
    /// nothing).
    pub fn weighted_from_factor(
        chol: &crate::linalg::Cholesky,
        b: &DMatrix<f64>,
        total_weight: f64,
        par: Parallelism,
    ) -> LeaveOneOut {
        let inv_diag = chol.inverse_diagonal(par);
        let press: f64 =
            b.column_iter().map(|c| c.iter().zip(&inv_diag).map(|(b, d)| (b / d) * (b / d)).sum::<f64>()).sum();
        let t = b.ncols().max(1) as f64;
        LeaveOneOut { rmse: (press / (t * total_weight)).sqrt(), mean_log_predictive_density: None }
    }
}

//! A fitted model's coefficients as scikit-learn names them (`?include=coefficients`):
//! what a user compares with `SVC.dual_coef_` or `KernelRidge.dual_coef_`, or uses to
//! evaluate the model elsewhere.

use super::{Outputs, TrainingReport};
use serde::Serialize;

/// The coefficients of the kinds that have them; the others have none.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Coefficients {
    /// The SVM family: scikit-learn's `support_`, `dual_coef_` and `intercept_`.
    Svm {
        /// Training rows of the support vectors (grouped by class for classifiers, as
        /// scikit-learn's `support_`); None for a model stored before they were kept.
        support: Option<Vec<u64>>,
        /// (classes - 1) x support vectors (one row for regression and one-class).
        dual_coef: Vec<Vec<f64>>,
        /// One per machine.
        intercept: Vec<f64>,
    },
    /// Kernel ridge and Gaussian processes: f(x) = sum_i alpha_i k(x_i, x) over the rows
    /// in `support` (every training row for an exact fit, the inducing rows for nystrom).
    Dual {
        alpha: Alpha,
        /// None where the rows are not training rows (k-means inducing points).
        support: Option<Vec<u64>>,
    },
}

/// One coefficient per row, or one list of t per row for several outputs.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Alpha {
    Single(Vec<f64>),
    Multi(Vec<Vec<f64>>),
}

impl Alpha {
    /// From n x t values stored column-major (one column per output).
    pub fn from_columns(values: &[f64], n: usize, multi: bool) -> Alpha {
        if !multi {
            return Alpha::Single(values[..n].to_vec());
        }
        let t = values.len().checked_div(n).unwrap_or(0);
        Alpha::Multi((0..n).map(|i| (0..t).map(|c| values[c * n + i]).collect()).collect())
    }
}

/// Kernel ridge's or a Gaussian process's alpha (n x t column-major over `n` rows) over
/// every training row (exact), or over the inducing rows (nystrom; None for k-means
/// centres, which are not rows).
pub(crate) fn dual(alpha: &[f64], n: usize, outputs: Outputs, report: &TrainingReport) -> Coefficients {
    let support = match report.approximation.as_deref() {
        Some("nystrom") => report.inducing_indices.clone(),
        _ => Some((0..n as u64).collect()),
    };
    Coefficients::Dual { alpha: Alpha::from_columns(alpha, n, outputs.is_multi()), support }
}

/// Row indices as the contract writes them.
pub(crate) fn rows(rows: &[usize]) -> Vec<u64> {
    rows.iter().map(|&r| r as u64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_become_one_list_per_row() {
        // 3 rows, 2 outputs, column-major: output 0 is 1, 2, 3; output 1 is 4, 5, 6.
        let a = Alpha::from_columns(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 3, true);
        assert_eq!(a, Alpha::Multi(vec![vec![1.0, 4.0], vec![2.0, 5.0], vec![3.0, 6.0]]));
        assert_eq!(Alpha::from_columns(&[1.0, 2.0], 2, false), Alpha::Single(vec![1.0, 2.0]));
        assert_eq!(serde_json::to_string(&Alpha::Single(vec![0.5])).unwrap(), "[0.5]");
    }
}

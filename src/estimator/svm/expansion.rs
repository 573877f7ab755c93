//! One machine's support-vector expansion, f(x) = sum_i coef_i k(sv_i, x) - rho: what a
//! fitted SVR and one-class SVM keep, store and evaluate.

use crate::estimator::coefficients;
use crate::estimator::{predict_block_rows, weighted_columns, Coefficients, RestoreError, StoredArrays, StoredFit};
use crate::kernel::{Kernel, Points};
use crate::linalg::Parallelism;

#[derive(Debug, Clone)]
pub(crate) struct Expansion {
    pub sv: Points,
    pub coef: Vec<f64>,
    pub rho: f64,
    /// The training rows of the support vectors (None when stored before they were kept).
    pub rows: Option<Vec<usize>>,
}

impl Expansion {
    /// f(x) for every query row, by blocks of rows (the cross matrix stays bounded).
    pub fn decision(&self, kernel: &Kernel, x: &Points, par: Parallelism) -> Vec<f64> {
        let block = predict_block_rows(self.sv.n().max(1));
        let mut out = Vec::with_capacity(x.n());
        for start in (0..x.n()).step_by(block) {
            let q = x.slice(start, block.min(x.n() - start));
            let k = kernel.cross(&self.sv, &q, par);
            out.extend(weighted_columns(&k, &self.coef).into_iter().map(|f| f - self.rho));
        }
        out
    }

    pub fn store_into(&self, s: &mut StoredFit) {
        s.put_points(&self.sv);
        s.alpha = self.coef.clone();
        s.arrays = vec![("rho".into(), vec![self.rho])];
        if let Some(rows) = &self.rows {
            s.arrays.push(("support_rows".into(), rows.iter().map(|&r| r as f64).collect()));
        }
    }

    pub fn restore(sv: Points, coef: Vec<f64>, arrays: &mut StoredArrays) -> Result<Expansion, RestoreError> {
        if coef.len() != sv.n() {
            return Err(RestoreError("one coefficient per support vector".into()));
        }
        let rho = arrays.take("rho", Some(1))?[0];
        let rows = super::stored_rows(arrays, sv.n())?;
        Ok(Expansion { sv, coef, rho, rows })
    }

    pub fn memory_bytes(&self) -> usize {
        self.sv.memory_bytes() + 8 * (2 * self.coef.len() + 1)
    }

    /// scikit-learn's `support_`, `dual_coef_` and `intercept_` (-rho) for one machine.
    pub fn coefficients(&self) -> Coefficients {
        Coefficients::Svm {
            support: self.rows.as_deref().map(coefficients::rows),
            dual_coef: vec![self.coef.clone()],
            intercept: vec![-self.rho],
        }
    }

    pub fn predict_cost(&self, kernel: &Kernel, m: usize) -> f64 {
        (m * self.sv.n()) as f64 * (kernel.pair_cost(&self.sv) + 2.0)
    }
}

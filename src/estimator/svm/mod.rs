//! C-support vector classification, as scikit-learn's `SVC` (LIBSVM).
//!
//! Two classes: one dual problem solved by SMO (`crate::smo`). More: one-vs-one, a
//! machine per pair of classes, each trained on that pair's rows with the lower class as
//! +1, and predictions by voting (ties to the lower class, as LIBSVM). Only support
//! vectors are kept, once each however many machines use them, grouped by class, with
//! LIBSVM's coefficient layout: the machine for classes (i, j) reads its coefficients of
//! class-i vectors from row j - 1 and of class-j vectors from row i of a
//! (classes - 1) x support-vectors matrix.
//!
//! `probability`: Platt's sigmoid per machine, fitted on 5-fold cross-validated decision
//! values (folds drawn with `seed`), with the Newton method of Lin, Lin & Weng (2007);
//! more than two classes are coupled pairwise (Wu, Lin & Weng 2004, method 2). As in
//! LIBSVM, predictions still come from the decision values, so argmax(probabilities) can
//! disagree with them; the fit counts how often on the training set.
//!
//! `model.rs` holds the fitted state and prediction, `probability.rs` Platt's sigmoid
//! and the pairwise coupling.

mod model;
mod probability;

pub use model::SvmModel;
use probability::sigmoid_train;

use super::labels::ClassificationSet;
use super::{Estimator, FitContext, FitError, PredictOptions, TrainingReport};
use crate::kernel::column::ColumnKernel;
use crate::kernel::{GramTable, Kernel, Points};
use crate::linalg::Parallelism;
use crate::optimize::SplitMix64;
use crate::smo::{self, SmoOptions};
use crate::spec::{FieldError, ObjectReader};
use nalgebra::DMatrix;
use serde_json::{json, Value};
use std::sync::Arc;

/// Folds of the cross-validation behind Platt scaling (LIBSVM's choice).
const PLATT_FOLDS: usize = 5;

/// Checked parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Svm {
    pub kernel: Kernel,
    pub c: f64,
    pub tol: f64,
    pub max_iter: Option<u64>,
    pub probability: bool,
    pub cache_mb: f64,
    /// Shuffles the Platt cross-validation folds.
    pub seed: u64,
}

impl Svm {
    pub fn from_json(kernel: Kernel, params: &Value, path: &str) -> Result<Svm, FieldError> {
        let mut obj = ObjectReader::new(params, path)?;
        let positive = |obj: &ObjectReader, key: &str, v: Option<f64>, default: f64| match v {
            Some(v) if v <= 0.0 => Err(FieldError::invalid(obj.pointer(key), "must be positive")),
            v => Ok(v.unwrap_or(default)),
        };
        let c = obj.f64("c")?;
        let c = positive(&obj, "c", c, 1.0)?;
        let tol = obj.f64("tol")?;
        let tol = positive(&obj, "tol", tol, 1e-3)?;
        let max_iter = obj.u64("max_iter")?;
        if max_iter == Some(0) {
            return Err(FieldError::invalid(obj.pointer("max_iter"), "must be at least 1 (omit it for no limit)"));
        }
        let probability = obj.bool("probability")?.unwrap_or(false);
        let cache_mb = obj.f64("cache_mb")?;
        let cache_mb = positive(&obj, "cache_mb", cache_mb, 100.0)?;
        if cache_mb > 1e6 {
            return Err(FieldError::invalid(obj.pointer("cache_mb"), "must be at most 1000000 (1 TB)"));
        }
        let seed = obj.u64("seed")?.unwrap_or(0);
        super::approx::Approximation::read_exact_only(&mut obj)?;
        obj.finish()?;
        Ok(Svm { kernel, c, tol, max_iter, probability, cache_mb, seed })
    }

    pub fn params_json(&self) -> Value {
        json!({
            "c": self.c, "tol": self.tol, "max_iter": self.max_iter, "probability": self.probability,
            "cache_mb": self.cache_mb, "seed": self.seed,
        })
    }

    fn cache_bytes(&self) -> usize {
        (self.cache_mb * (1u64 << 20) as f64) as usize
    }

    /// Peak bytes of a fit: the column cache (at least two columns) and O(n) arrays.
    pub fn fit_memory_estimate(&self, n: usize, d: usize) -> usize {
        self.cache_bytes().max(8 * n) + n * (3 * d * 8 + 96)
    }

    fn smo_options(&self, par: Parallelism) -> SmoOptions {
        SmoOptions {
            c: self.c,
            tol: self.tol,
            max_iter: self.max_iter,
            cache_bytes: self.cache_bytes(),
            shrinking: true,
            par,
        }
    }

    /// One binary machine on data rows `rows` with labels +-1: (coef = y a, rho,
    /// iterations, converged).
    fn solve(
        &self,
        src: &Source<'_>,
        rows: &[usize],
        y: &[f64],
        ctx: &FitContext,
    ) -> Result<smo::SmoSolution, FitError> {
        let cancel = ctx.cancel.clone();
        smo::solve(src.columns(&self.kernel, rows), y, &self.smo_options(ctx.par), &move || cancel.is_cancelled())
            .map_err(|_| FitError::Cancelled)
    }

    /// Platt's (A, B) for one machine (data rows `rows`, labels y) from cross-validated
    /// decision values.
    fn platt(&self, src: &Source<'_>, rows: &[usize], y: &[f64], ctx: &FitContext) -> Result<(f64, f64), FitError> {
        let n = y.len();
        let mut rng = SplitMix64::new(self.seed);
        let mut perm: Vec<usize> = (0..n).collect();
        for i in 0..n {
            let j = i + (rng.next_u64() % (n - i) as u64) as usize;
            perm.swap(i, j);
        }
        let mut dec = vec![0.0; n];
        for fold in 0..PLATT_FOLDS {
            let (begin, end) = (fold * n / PLATT_FOLDS, (fold + 1) * n / PLATT_FOLDS);
            let held = &perm[begin..end];
            let train: Vec<usize> = perm[..begin].iter().chain(&perm[end..]).copied().collect();
            let ty: Vec<f64> = train.iter().map(|&i| y[i]).collect();
            let positives = ty.iter().filter(|&&v| v > 0.0).count();
            let fixed = match (positives, ty.len() - positives) {
                (0, 0) => Some(0.0),
                (_, 0) => Some(1.0),
                (0, _) => Some(-1.0),
                _ => None,
            };
            if let Some(v) = fixed {
                held.iter().for_each(|&i| dec[i] = v);
                continue;
            }
            let train_rows: Vec<usize> = train.iter().map(|&t| rows[t]).collect();
            let sol = self.solve(src, &train_rows, &ty, ctx)?;
            let sv: Vec<usize> = (0..train.len()).filter(|&k| sol.coef[k] != 0.0).collect();
            let sv_rows: Vec<usize> = sv.iter().map(|&s| train_rows[s]).collect();
            let held_rows: Vec<usize> = held.iter().map(|&h| rows[h]).collect();
            let k = src.cross(&self.kernel, &sv_rows, &held_rows, ctx.par);
            for (col, &i) in held.iter().enumerate() {
                dec[i] = sv.iter().enumerate().map(|(r, &s)| sol.coef[s] * k[(r, col)]).sum::<f64>() - sol.rho;
            }
        }
        Ok(sigmoid_train(&dec, y))
    }

    /// The fit with kernel values from `table` (a Gram matrix over a superset of the
    /// rows: `rows[i]` is data row i's place in it), as a search shares one table among
    /// its candidates and folds. Returns the model and its support vectors' data rows.
    pub fn fit_from_table(
        &self,
        data: &ClassificationSet,
        table: &Arc<GramTable>,
        rows: &[usize],
        ctx: &FitContext,
    ) -> Result<(SvmModel, Vec<usize>), FitError> {
        self.fit_with(data, &Source::Table { table, rows }, ctx)
    }
}

/// Where a fit reads kernel values: computed over the data's points, or gathered from a
/// table over a superset of them.
enum Source<'a> {
    Points(&'a Points),
    Table { table: &'a Arc<GramTable>, rows: &'a [usize] },
}

impl Source<'_> {
    /// The kernel over data rows `rows`, column by column.
    fn columns(&self, kernel: &Kernel, rows: &[usize]) -> ColumnKernel {
        match self {
            Source::Points(x) => ColumnKernel::new(kernel, &x.select(rows)),
            Source::Table { table, rows: at } => {
                ColumnKernel::from_table(Arc::clone(table), rows.iter().map(|&r| at[r]).collect())
            }
        }
    }

    /// k(data row a_i, data row b_j).
    fn cross(&self, kernel: &Kernel, a: &[usize], b: &[usize], par: Parallelism) -> DMatrix<f64> {
        match self {
            Source::Points(x) => kernel.cross(&x.select(a), &x.select(b), par),
            Source::Table { table, rows: at } => {
                let a: Vec<usize> = a.iter().map(|&r| at[r]).collect();
                let b: Vec<usize> = b.iter().map(|&r| at[r]).collect();
                table.block(&a, &b, par)
            }
        }
    }
}

impl Estimator for Svm {
    type Data = ClassificationSet;
    type Fitted = SvmModel;

    fn fit(&self, data: &ClassificationSet, ctx: &FitContext) -> Result<SvmModel, FitError> {
        self.fit_with(data, &Source::Points(&data.x), ctx).map(|(model, _)| model)
    }
}

impl Svm {
    fn fit_with(
        &self,
        data: &ClassificationSet,
        src: &Source<'_>,
        ctx: &FitContext,
    ) -> Result<(SvmModel, Vec<usize>), FitError> {
        let groups = data.rows_by_class();
        let k = groups.len();
        let n = data.y.len();
        let mut nonzero = vec![false; n];
        let mut machines = Vec::with_capacity(k * (k - 1) / 2);
        let (mut prob_a, mut prob_b) = (Vec::new(), Vec::new());
        let (mut iterations, mut converged) = (0u64, true);
        for i in 0..k {
            for j in i + 1..k {
                ctx.cancel.check()?;
                let rows: Vec<usize> = groups[i].iter().chain(&groups[j]).copied().collect();
                let y: Vec<f64> = (0..rows.len()).map(|r| if r < groups[i].len() { 1.0 } else { -1.0 }).collect();
                if self.probability {
                    let (a, b) = self.platt(src, &rows, &y, ctx)?;
                    prob_a.push(a);
                    prob_b.push(b);
                }
                let sol = self.solve(src, &rows, &y, ctx)?;
                iterations += sol.iterations;
                converged &= sol.converged;
                for (r, &row) in rows.iter().enumerate() {
                    nonzero[row] |= sol.coef[r] != 0.0;
                }
                machines.push((rows, sol));
            }
        }
        // Support vectors grouped by class, in row order within a class.
        let mut position = vec![usize::MAX; n];
        let mut sv_rows = Vec::new();
        let mut sv_start = vec![0];
        for g in &groups {
            for &row in g {
                if nonzero[row] {
                    position[row] = sv_rows.len();
                    sv_rows.push(row);
                }
            }
            sv_start.push(sv_rows.len());
        }
        let mut coef = DMatrix::zeros(k - 1, sv_rows.len());
        let mut rho = Vec::with_capacity(machines.len());
        let mut p = 0;
        for i in 0..k {
            for j in i + 1..k {
                let (rows, sol) = &machines[p];
                for (r, &row) in rows.iter().enumerate() {
                    if sol.coef[r] != 0.0 {
                        let coef_row = if data.y[row] == i { j - 1 } else { i };
                        coef[(coef_row, position[row])] = sol.coef[r];
                    }
                }
                rho.push(sol.rho);
                p += 1;
            }
        }
        let mut model = SvmModel {
            spec: self.clone(),
            classes: data.classes.clone(),
            sv: data.x.select(&sv_rows),
            sv_start,
            coef,
            rho,
            prob_a,
            prob_b,
            report: TrainingReport { converged: Some(converged), iterations: Some(iterations), ..Default::default() },
        };
        if self.probability {
            ctx.cancel.check()?;
            let opts = PredictOptions { probabilities: true, ..PredictOptions::default() };
            let all: Vec<usize> = (0..n).collect();
            let p = model.predict_cross(&src.cross(&self.kernel, &sv_rows, &all, ctx.par), &opts);
            let (labels, probs) =
                (p.classes.unwrap_or_default(), p.probabilities.expect("probabilities were asked for"));
            let disagree = labels
                .iter()
                .enumerate()
                .filter(|&(r, &c)| crate::estimator::first_max(probs.row(r).iter().copied()) != c)
                .count();
            model.report.probability_disagreements = Some(disagree as u64);
        }
        Ok((model, sv_rows))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parameters_are_checked_and_echoed() {
        let k = crate::kernel::default_kernel();
        let svm = Svm::from_json(k.clone(), &json!({"c": 2, "max_iter": 50, "cache_mb": 0.5}), "/params").unwrap();
        assert_eq!((svm.c, svm.max_iter, svm.cache_bytes()), (2.0, Some(50), 1 << 19));
        assert_eq!(Svm::from_json(k.clone(), &svm.params_json(), "/params").unwrap(), svm);
        for (bad, pointer) in [
            (json!({"c": -1}), "/params/c"),
            (json!({"tol": 0}), "/params/tol"),
            (json!({"cache_mb": 2e6}), "/params/cache_mb"),
            (json!({"max_iter": 0}), "/params/max_iter"),
        ] {
            assert_eq!(Svm::from_json(k.clone(), &bad, "/params").unwrap_err().pointer, pointer);
        }
    }
}

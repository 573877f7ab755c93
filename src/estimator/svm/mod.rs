//! The SVM family, as LIBSVM (as scikit-learn ships it) builds and solves it:
//! C-SVC and nu-SVC (`svc.rs`, one-vs-one, predictions by voting, `model.rs`), epsilon-
//! and nu-SVR (`regression.rs`) and the one-class SVM (`one_class.rs`). Every member's
//! dual is a [`crate::smo::Problem`] for the one SMO solver; what differs is the data
//! (signs, linear terms, bounds, the start point) and how the solution is read back.
//! `weights.rs` holds `class_weight` and `sample_weight`; `probability.rs` Platt's
//! sigmoid and the pairwise coupling.
//!
//! What every member shares lives here: the solver's parameters and where a fit reads
//! its kernel values (the points, or a Gram table a model search shares).

mod expansion;
mod kinds;
mod model;
pub mod nystrom;
mod one_class;
mod probability;
mod regression;
mod svc;
mod svc_fit;

pub use crate::estimator::weights::{ClassWeight, SampleWeight};
pub(crate) use kinds::{restore_one_class, restore_svc, restore_svr};
pub use model::SvmModel;
pub use one_class::{OneClassModel, OneClassSvm};
pub use regression::{Svr, SvrModel};
pub use svc::Svm;

use crate::kernel::column::ColumnKernel;
use crate::kernel::{GramTable, Kernel, Points};
use crate::linalg::Parallelism;
use crate::smo::{self, Problem, SmoOptions};
use crate::spec::{FieldError, ObjectReader};
use nalgebra::DMatrix;
use serde_json::{Map, Value};
use std::sync::Arc;

use super::{FitContext, FitError};

/// The solver's parameters, common to the family: LIBSVM's `eps`, a cap on iterations,
/// and the kernel cache.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SolverParams {
    pub tol: f64,
    pub max_iter: Option<u64>,
    pub cache_mb: f64,
}

impl SolverParams {
    pub fn read(obj: &mut ObjectReader<'_>) -> Result<SolverParams, FieldError> {
        let tol = positive(obj, "tol", 1e-3)?;
        let max_iter = obj.u64("max_iter")?;
        if max_iter == Some(0) {
            return Err(FieldError::invalid(obj.pointer("max_iter"), "must be at least 1 (omit it for no limit)"));
        }
        let cache_mb = positive(obj, "cache_mb", 100.0)?;
        if cache_mb > 1e6 {
            return Err(FieldError::invalid(obj.pointer("cache_mb"), "must be at most 1000000 (1 TB)"));
        }
        Ok(SolverParams { tol, max_iter, cache_mb })
    }

    pub fn write(&self, out: &mut Map<String, Value>) {
        out.insert("tol".into(), Value::from(self.tol));
        out.insert("max_iter".into(), self.max_iter.map_or(Value::Null, Value::from));
        out.insert("cache_mb".into(), Value::from(self.cache_mb));
    }

    pub fn cache_bytes(&self) -> usize {
        (self.cache_mb * (1u64 << 20) as f64) as usize
    }

    fn options(&self, par: Parallelism) -> SmoOptions {
        SmoOptions { tol: self.tol, max_iter: self.max_iter, cache_bytes: self.cache_bytes(), shrinking: true, par }
    }

    /// Peak bytes of a fit over n rows (2n variables for SVR): the kernel cache (at least
    /// the solver's floor) and O(n) arrays.
    pub fn fit_memory_estimate(&self, n: usize, d: usize) -> usize {
        self.cache_bytes().max(smo::cache_floor_bytes(n)) + n * (3 * d * 8 + 192)
    }

    /// Solves `problem` over data rows `rows` (one or two variables per row).
    fn solve(
        &self,
        kernel: &Kernel,
        src: &Source<'_>,
        rows: &[usize],
        problem: &Problem,
        ctx: &FitContext,
    ) -> Result<smo::SmoSolution, FitError> {
        let cancel = ctx.cancel.clone();
        smo::solve(src.columns(kernel, rows), problem, &self.options(ctx.par), &move || cancel.is_cancelled())
            .map_err(|_| FitError::Cancelled)
    }
}

/// A parameter that must be > 0, with its default.
fn positive(obj: &mut ObjectReader<'_>, key: &'static str, default: f64) -> Result<f64, FieldError> {
    match obj.f64(key)? {
        Some(v) if v <= 0.0 => Err(FieldError::invalid(obj.pointer(key), "must be positive")),
        v => Ok(v.unwrap_or(default)),
    }
}

/// `nu`, in (0, 1] (default 0.5).
fn read_nu(obj: &mut ObjectReader<'_>) -> Result<f64, FieldError> {
    match obj.f64("nu")? {
        Some(v) if v <= 0.0 || v > 1.0 => Err(FieldError::invalid(obj.pointer("nu"), "must be in (0, 1]")),
        v => Ok(v.unwrap_or(0.5)),
    }
}

/// Where a fit reads kernel values: computed over the data's points, or gathered from a
/// table over a superset of them (`rows[i]` is data row i's place in it).
enum Source<'a> {
    Points(&'a Points),
    /// `x`: the data's points, for the columns a lazy table does not hold.
    Table {
        table: &'a Arc<GramTable>,
        rows: &'a [usize],
        x: &'a Points,
    },
}

impl Source<'_> {
    /// The kernel over data rows `rows`, column by column.
    fn columns(&self, kernel: &Kernel, rows: &[usize]) -> ColumnKernel {
        match self {
            Source::Points(x) => ColumnKernel::new(kernel, &x.select(rows)),
            Source::Table { table, rows: at, x } => {
                let places = rows.iter().map(|&r| at[r]).collect();
                match table.is_lazy() {
                    true => ColumnKernel::from_lazy_table(Arc::clone(table), places, kernel, &x.select(rows)),
                    false => ColumnKernel::from_table(Arc::clone(table), places),
                }
            }
        }
    }

    /// k(data row a_i, data row b_j).
    fn cross(&self, kernel: &Kernel, a: &[usize], b: &[usize], par: Parallelism) -> DMatrix<f64> {
        match self {
            Source::Points(x) => kernel.cross(&x.select(a), &x.select(b), par),
            Source::Table { table, rows: at, .. } => {
                let a: Vec<usize> = a.iter().map(|&r| at[r]).collect();
                let b: Vec<usize> = b.iter().map(|&r| at[r]).collect();
                table.block(&a, &b, par)
            }
        }
    }
}

/// The support vectors' training rows as stored (`support_rows`), one per support vector;
/// None for a model stored before they were kept.
fn stored_rows(arrays: &mut super::StoredArrays, n_sv: usize) -> Result<Option<Vec<usize>>, super::RestoreError> {
    let Ok(rows) = arrays.take("support_rows", None) else {
        return Ok(None);
    };
    if rows.len() != n_sv || rows.iter().any(|r| !(r.fract() == 0.0 && *r >= 0.0)) {
        return Err(super::RestoreError("support rows do not match the support vectors".into()));
    }
    Ok(Some(rows.into_iter().map(|r| r as usize).collect()))
}

/// The support vectors of a dual expansion f(x) = sum_i coef_i k(x_i, x) - rho over
/// `rows`: those with |coef| > 0, as LIBSVM keeps them, in row order.
fn support(rows: &[usize], coef: &[f64]) -> (Vec<usize>, Vec<f64>) {
    rows.iter().zip(coef).filter(|(_, c)| c.abs() > 0.0).map(|(&r, &c)| (r, c)).unzip()
}

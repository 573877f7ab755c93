//! A fitted model as plain data, the form the store's file format carries: [`StoredFit`]
//! (header, points and arrays), [`StoredAppend`] (an online update's rows) and, on the way
//! back, [`Restoring`]: the header read and checked, handed to the kind's restore
//! (`fitted.rs` keeps the table of them).

use super::{ModelKind, TrainingReport};
use crate::kernel::{Kernel, Points, RowKind};
use crate::spec::FieldError;
use nalgebra::DMatrix;
use serde::Serialize;
use serde_json::Value;

/// A fitted model's state in plain data, for the durable store. Kernel, params and the
/// training report travel as their JSON text (re-checked on load); arrays as f64,
/// bit-exact.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct StoredFit {
    pub kind: String,
    pub kernel: String,
    pub params: String,
    pub report: String,
    /// Training points, d x n column-major.
    pub d: u64,
    pub x: Vec<f64>,
    pub alpha: Vec<f64>,
    /// GP only: the Cholesky factor (n x n column-major), its jitter, y normalisation.
    pub factor: Vec<f64>,
    pub jitter: f64,
    pub y_mean: f64,
    pub y_std: f64,
    /// JSON text of the classes ("null" for regression).
    pub classes: String,
    /// Further named arrays a model needs (format version 2).
    pub arrays: Vec<(String, Vec<f64>)>,
    /// Training points that are not numbers (format version 5); `d` is then 0.
    pub rows: StoredRows,
}

/// Training points of the kinds that do not fit `StoredFit::x`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub enum StoredRows {
    /// The points are `x` (d x n).
    #[default]
    Numeric,
    Text(Vec<String>),
    Tokens(Vec<Vec<String>>),
    /// A precomputed kernel's training rows by index, of a training set of `width` rows
    /// (format version 6).
    Indices {
        rows: Vec<u64>,
        width: u64,
    },
}

/// Rows an online update appended, in plain data (an append's stored delta): replayed
/// through [`super::FittedModel::append_with`] they give the appended model again, bit for bit.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct StoredAppend {
    /// The new points as [`StoredFit`] keeps points: `x` (d x k) or `rows`.
    pub d: u64,
    pub x: Vec<f64>,
    pub rows: StoredRows,
    /// Targets, k x t column-major.
    pub y: Vec<f64>,
    /// 0 for a 1-D y, else t.
    pub outputs: u64,
    pub noise: Option<Vec<f64>>,
    pub sample_weight: Option<Vec<f64>>,
}

/// A stored fit's named arrays, taken out one by one on restore.
pub(crate) struct StoredArrays(Vec<(String, Vec<f64>)>);

impl StoredArrays {
    /// The array called `name`, checked to have `len` entries when given.
    pub(crate) fn take(&mut self, name: &str, len: Option<usize>) -> Result<Vec<f64>, RestoreError> {
        let at =
            self.0.iter().position(|(n, _)| n == name).ok_or_else(|| RestoreError(format!("no array `{name}`")))?;
        let (_, values) = self.0.swap_remove(at);
        match len {
            Some(len) if values.len() != len => {
                Err(RestoreError(format!("array `{name}` has {} entries, expected {len}", values.len())))
            }
            _ => Ok(values),
        }
    }
}

/// Why stored state could not be turned back into a model.
#[derive(Debug, thiserror::Error)]
#[error("stored model is inconsistent: {0}")]
pub struct RestoreError(pub String);

impl StoredFit {
    /// Stores `p` as the model's points.
    pub(crate) fn put_points(&mut self, p: &Points) {
        if let Some((rows, _)) = p.indexed() {
            self.rows = StoredRows::Indices { rows: rows.iter().map(|&r| r as u64).collect(), width: p.d() as u64 };
            return;
        }
        match p.kind() {
            RowKind::Numeric => {
                self.d = p.d() as u64;
                self.x = p.as_matrix().as_slice().to_vec();
            }
            RowKind::Text => {
                let texts = p.texts().expect("text points");
                self.rows = StoredRows::Text(texts.iter().map(|s| s.iter().collect()).collect());
            }
            RowKind::Tokens => {
                let lists = p.token_lists().expect("token points");
                self.rows = StoredRows::Tokens(lists.iter().map(|r| r.to_vec()).collect());
            }
        }
    }

    /// The stored points; none only where `may_be_empty`: an SVM-family model may keep no
    /// support vector (an SVR whose epsilon tube holds every target, a weighted nu-SVC
    /// whose weights zero every row of a pair) and then answers from its intercepts.
    pub(crate) fn take_points(&mut self, may_be_empty: bool) -> Result<Points, RestoreError> {
        let some = |len: usize| len > 0 || may_be_empty;
        match std::mem::take(&mut self.rows) {
            StoredRows::Numeric => {}
            StoredRows::Text(t) if some(t.len()) => return Ok(Points::from_texts(t)),
            StoredRows::Tokens(t) if some(t.len()) => return Ok(Points::from_tokens(t)),
            StoredRows::Indices { rows, width } if some(rows.len()) && width > 0 && rows.iter().all(|&r| r < width) => {
                return Ok(Points::indices(rows.iter().map(|&r| r as usize).collect(), width as usize))
            }
            _ => return Err(RestoreError("no training points".into())),
        }
        let d = self.d as usize;
        if d == 0 || !self.x.len().is_multiple_of(d) || !some(self.x.len()) {
            return Err(RestoreError(format!("{} values do not make points of dimension {d}", self.x.len())));
        }
        let x = std::mem::take(&mut self.x);
        Ok(Points::from_columns(DMatrix::from_vec(d, x.len() / d, x)))
    }

    fn kernel(&self) -> Result<Kernel, RestoreError> {
        let v: Value = serde_json::from_str(&self.kernel).map_err(|e| RestoreError(format!("kernel: {e}")))?;
        Kernel::from_json(&v).map_err(|e| RestoreError(format!("kernel: {e}")))
    }

    fn params(&self) -> Result<Value, RestoreError> {
        serde_json::from_str(&self.params).map_err(|e| RestoreError(format!("params: {e}")))
    }

    fn report(&self) -> Result<TrainingReport, RestoreError> {
        serde_json::from_str(&self.report).map_err(|e| RestoreError(format!("report: {e}")))
    }
}

/// A stored fit on its way back to a model: the header read (kind, kernel, params,
/// report), the rest as stored. A kind's restore takes what it keeps and checks it.
pub(crate) struct Restoring {
    pub kind: ModelKind,
    pub kernel: Kernel,
    pub params: Value,
    pub report: TrainingReport,
    /// The fit was an approximation (`training.approximation: nystrom`).
    pub nystrom: bool,
    /// The fit was variational (`training.approximation: variational`).
    pub variational: bool,
    pub arrays: StoredArrays,
    /// Points, coefficients, factor and the rest of the file.
    pub fit: StoredFit,
}

impl Restoring {
    /// Reads the header of `s`. Models stored before approximations existed were exact.
    pub(crate) fn read(mut s: StoredFit) -> Result<Restoring, RestoreError> {
        let kind = ModelKind::from_name(&s.kind).ok_or_else(|| RestoreError(format!("unknown model {}", s.kind)))?;
        let (kernel, params, mut report) = (s.kernel()?, s.params()?, s.report()?);
        let nystrom = report.approximation.as_deref() == Some("nystrom");
        let variational = report.approximation.as_deref() == Some("variational");
        report.approximation.get_or_insert_with(|| "exact".into());
        let arrays = StoredArrays(std::mem::take(&mut s.arrays));
        Ok(Restoring { kind, kernel, params, report, nystrom, variational, arrays, fit: s })
    }

    /// The kind's params, read by its own reader and checked again.
    pub fn spec<T>(&self, read: fn(Kernel, &Value, &str) -> Result<T, FieldError>) -> Result<T, RestoreError> {
        read(self.kernel.clone(), &self.params, "/params").map_err(|e| RestoreError(format!("params: {e}")))
    }

    /// The training points (or centres) kept; none only where `may_be_empty` (see
    /// [`StoredFit::take_points`]).
    pub fn points(&mut self, may_be_empty: bool) -> Result<Points, RestoreError> {
        self.fit.take_points(may_be_empty)
    }

    /// The classes' JSON text, null for other tasks.
    pub fn classes_json(&self) -> Result<Value, RestoreError> {
        serde_json::from_str(&self.fit.classes).map_err(|e| RestoreError(format!("classes: {e}")))
    }

    /// The stored n x n Cholesky factor, with `jitter`.
    pub fn factor(&mut self, n: usize, jitter: f64) -> Result<crate::linalg::Cholesky, RestoreError> {
        factor_of(std::mem::take(&mut self.fit.factor), n, jitter)
    }
}

/// A stored n x n Cholesky factor (column-major), checked for its size.
fn factor_of(values: Vec<f64>, n: usize, jitter: f64) -> Result<crate::linalg::Cholesky, RestoreError> {
    if values.len() != n * n {
        return Err(RestoreError(format!("factor has {} entries, expected {}", values.len(), n * n)));
    }
    Ok(crate::linalg::Cholesky::from_factor(DMatrix::from_vec(n, n, values), jitter))
}

//! Training sets uploaded once (POST /datasets) and fitted any number of times.
//!
//! This module owns turning an upload into the stored binary form without ever holding
//! the upload whole: CSV ([`csv`]) and JSON ([`json`]) bodies are parsed as they stream
//! in, each row going straight to a [`format::DatasetWriter`]; only the targets (one
//! number or label per row) are kept in memory until the end. It knows nothing of HTTP
//! or of where the bytes end up (`store::datasets` decides that).

pub mod csv;
pub mod format;
pub mod json;
pub mod rows;

use crate::estimator::Target;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use uuid::Uuid;

/// What GET /datasets/{id} describes (the contract's dataset resource, less formatting).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatasetInfo {
    pub id: Uuid,
    pub name: Option<String>,
    pub n_rows: u64,
    /// None for rows that are not numeric vectors.
    pub n_features: Option<u64>,
    /// CSV column names of the features; None for JSON uploads.
    pub features: Option<Vec<String>>,
    /// The CSV target column's name; None for JSON uploads and several targets.
    pub target: Option<String>,
    pub target_kind: TargetKind,
    /// Several numeric targets per row (`?target=a,b`, or a JSON 2-D y): how many; 0 for
    /// a dataset without a target. Kept in the stored form's targets suffix, not in the
    /// trailer's encoding.
    #[serde(skip)]
    pub outputs: Option<u32>,
    /// The CSV target columns' names when there are several.
    #[serde(skip)]
    pub targets: Option<Vec<String>>,
    /// Size of the stored form.
    pub bytes: u64,
    pub created_at_unix_nanos: u128,
}

impl DatasetInfo {
    pub fn new(name: Option<String>) -> DatasetInfo {
        let created = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        DatasetInfo {
            id: Uuid::new_v4(),
            name,
            n_rows: 0,
            n_features: None,
            features: None,
            target: None,
            target_kind: TargetKind::Numeric,
            outputs: None,
            targets: None,
            bytes: 0,
            created_at_unix_nanos: created.as_nanos(),
        }
    }

    /// Whether the rows have a target (`?target=` empty, or a JSON body without `y`: not).
    pub fn has_target(&self) -> bool {
        self.outputs != Some(0)
    }

    pub fn created_at(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_nanos(self.created_at_unix_nanos.min(u64::MAX as u128) as u64)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetKind {
    /// Every target is a finite number.
    Numeric,
    /// Class labels (strings).
    Labels,
}

/// One target per row.
#[derive(Debug, Clone, PartialEq)]
pub enum Targets {
    Numeric(Vec<f64>),
    /// Each row's index into `labels` (distinct labels in order of first appearance).
    Labels {
        labels: Vec<String>,
        codes: Vec<u32>,
    },
    /// t numeric targets per row (a multi-output regression's 2-D y), n x t column-major.
    Multi {
        t: usize,
        values: Vec<f64>,
    },
    /// No target: rows for the models that take none (`one_class_svm`, `kernel_pca`).
    None,
}

impl Targets {
    pub fn kind(&self) -> TargetKind {
        match self {
            // No target holds nothing but numbers (the contract's rule, vacuously).
            Targets::Numeric(_) | Targets::Multi { .. } | Targets::None => TargetKind::Numeric,
            Targets::Labels { .. } => TargetKind::Labels,
        }
    }

    /// Rows with a target (0 without one).
    pub fn len(&self) -> usize {
        match self {
            Targets::Numeric(y) => y.len(),
            Targets::Labels { codes, .. } => codes.len(),
            Targets::Multi { t, values } => values.len() / (*t).max(1),
            Targets::None => 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Interns per-row labels.
    pub fn from_labels<'a>(rows: impl IntoIterator<Item = &'a str>) -> Targets {
        let mut index: HashMap<&str, u32> = HashMap::new();
        let mut labels = Vec::new();
        let codes = rows
            .into_iter()
            .map(|l| {
                *index.entry(l).or_insert_with(|| {
                    labels.push(l.to_string());
                    labels.len() as u32 - 1
                })
            })
            .collect();
        Targets::Labels { labels, codes }
    }

    /// The targets as a training body would carry them (none without a target).
    pub fn to_targets(&self) -> Vec<Target> {
        match self {
            Targets::None => Vec::new(),
            Targets::Numeric(y) => y.iter().map(|v| Target::Number(*v)).collect(),
            Targets::Labels { labels, codes } => {
                codes.iter().map(|&c| Target::Text(labels[c as usize].clone())).collect()
            }
            Targets::Multi { t, values } => {
                let n = self.len();
                (0..n).map(|i| Target::Row((0..*t).map(|k| values[k * n + i]).collect())).collect()
            }
        }
    }
}

/// Why an upload was refused. Pointers are the contract's: `/line/N` for CSV, JSON
/// pointers into the body for JSON.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// Well-formed but unacceptable content (422).
    #[error("{pointer}: {message}")]
    Invalid { pointer: String, message: String },
    /// Not the documented shape (400).
    #[error("{pointer}: {message}")]
    Malformed { pointer: String, message: String },
    /// A row over the row size limit (413).
    #[error("{pointer}: {message}")]
    TooLarge { pointer: String, message: String },
    /// Reading the body or writing the stored form failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl IngestError {
    pub fn invalid(pointer: impl Into<String>, message: impl Into<String>) -> IngestError {
        IngestError::Invalid { pointer: pointer.into(), message: message.into() }
    }

    pub fn malformed(pointer: impl Into<String>, message: impl Into<String>) -> IngestError {
        IngestError::Malformed { pointer: pointer.into(), message: message.into() }
    }
}

/// The finite number a text cell holds (surrounding ASCII spaces allowed), or None.
pub fn parse_number(cell: &[u8]) -> Option<f64> {
    let t = cell.trim_ascii();
    // fast-float2 accepts "inf" and "nan" spellings; the finiteness check refuses them.
    let v: f64 = fast_float2::parse(t).ok()?;
    v.is_finite().then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_finite_decimals_only() {
        for (cell, want) in [
            (&b"1.5"[..], Some(1.5)),
            (b" -2e3 ", Some(-2000.0)),
            (b"+.5", Some(0.5)),
            (b"7.", Some(7.0)),
            (b"1e400", None),
            (b"nan", None),
            (b"inf", None),
            (b"-Infinity", None),
            (b"", None),
            (b"1,5", None),
            (b"0x10", None),
            (b"1.5abc", None),
            (b"abc", None),
        ] {
            assert_eq!(parse_number(cell), want, "{:?}", String::from_utf8_lossy(cell));
        }
    }

    #[test]
    fn labels_are_interned_in_order_of_appearance() {
        let t = Targets::from_labels(["b", "a", "b", "c"]);
        assert_eq!(t, Targets::Labels { labels: vec!["b".into(), "a".into(), "c".into()], codes: vec![0, 1, 0, 2] });
        assert_eq!(t.to_targets()[3], Target::Text("c".into()));
    }
}

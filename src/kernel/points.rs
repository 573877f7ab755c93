//! The point sets kernels are evaluated over: numeric rows, strings, or token sets.
//!
//! Numeric points are the columns of a d x n matrix, which keeps each point's features
//! contiguous for the pointwise kernels and lets the matrix-product kernels hand the same
//! storage to faer without copying. Strings are kept as code points (the string kernels
//! index and compare characters, never bytes); token lists as given. Both sit behind an
//! `Arc`: models clone their training points freely. What the string and set kernels
//! derive from a point set (k-mer indexes, self-kernels) is kept with it in a cache the
//! clones share, so a served model prepares its training rows once, not per request.

use faer::MatRef;
use nalgebra::DMatrix;
use std::any::Any;
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::hyper::Scales;
use super::GramTable;

/// A set of n points of one kind.
#[derive(Debug, Clone)]
pub struct Points(Repr, Option<Arc<Prepared>>);

impl PartialEq for Points {
    /// The same points; what was derived from them does not matter.
    fn eq(&self, other: &Points) -> bool {
        self.0 == other.0
    }
}

/// Which derived value of a point set: one per kernel setting that needs one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum PrepKey {
    /// The k-mer index of the spectrum kernel with this k.
    Spectrum(usize),
    /// Subsequence self-kernels for (length, decay's bits).
    SubsequenceSelf(usize, u64),
    /// The token index of the set kernels.
    Sets,
    /// Numeric points divided by length scales (this fingerprint of them) and centred,
    /// with their squared norms: the training side of a distance kernel's cross matrix.
    Centred(u64),
    /// Numeric points packed in panels for pairwise inner products (`pairwise`).
    Panels,
}

/// Values derived from a point set, built on first use.
/// A derived value, type-erased, with the bytes it holds.
type Derived = (Arc<dyn Any + Send + Sync>, usize);

#[derive(Default)]
pub(super) struct Prepared(Mutex<HashMap<PrepKey, Derived>>);

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.lock().map_or(0, |m| m.len());
        write!(f, "Prepared({n} entries)")
    }
}

#[derive(Debug, Clone)]
enum Repr {
    Numeric(DMatrix<f64>),
    Text(Arc<[Box<[char]>]>),
    Tokens(Arc<[Box<[String]>]>),
    /// Training rows of a precomputed kernel: each point is a row of the training Gram
    /// matrix, named by its index. The matrix is here while the model trains; a model
    /// restored from the store keeps the indices alone, which is all a prediction needs
    /// (the query rows carry their own kernel values).
    Indexed {
        rows: Arc<[usize]>,
        table: Option<Arc<GramTable>>,
        width: usize,
    },
}

impl PartialEq for Repr {
    fn eq(&self, other: &Repr) -> bool {
        match (self, other) {
            (Repr::Numeric(a), Repr::Numeric(b)) => a == b,
            (Repr::Text(a), Repr::Text(b)) => a == b,
            (Repr::Tokens(a), Repr::Tokens(b)) => a == b,
            (Repr::Indexed { rows: a, width: wa, .. }, Repr::Indexed { rows: b, width: wb, .. }) => a == b && wa == wb,
            _ => false,
        }
    }
}

/// What a row is: the contract's three kinds of `x`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowKind {
    Numeric,
    Text,
    Tokens,
}

impl RowKind {
    /// How error messages name the kind.
    pub fn describe(self) -> &'static str {
        match self {
            RowKind::Numeric => "numeric rows",
            RowKind::Text => "strings",
            RowKind::Tokens => "token lists",
        }
    }
}

impl Points {
    fn new(repr: Repr) -> Points {
        Points(repr, Some(Default::default()))
    }

    /// The value derived from these points for `key`, built by `make` (the value and the
    /// bytes it holds) on first use and shared by every clone of them.
    pub(super) fn prepared<T: Any + Send + Sync>(&self, key: PrepKey, make: impl FnOnce() -> (T, usize)) -> Arc<T> {
        let cache = self.1.as_ref().expect("every constructor makes a cache");
        // Held while building: concurrent predicts wait for one build instead of each
        // doing it.
        let mut map = cache.0.lock().unwrap_or_else(|p| p.into_inner());
        if let PrepKey::Centred(_) = key {
            // One centred copy at a time: a hyperparameter search meets new length
            // scales at every step, and a served model needs only its own.
            map.retain(|k, _| !matches!(k, PrepKey::Centred(_)) || *k == key);
        }
        let (value, _) = map.entry(key).or_insert_with(|| {
            let (value, bytes) = make();
            (Arc::new(value), bytes)
        });
        value.clone().downcast::<T>().expect("one type per key")
    }

    /// From rows of equal length (the JSON layout); `rows` must be non-empty and rectangular.
    pub fn from_rows(rows: &[Vec<f64>]) -> Points {
        let d = rows.first().map_or(0, Vec::len);
        let mut data = Vec::with_capacity(rows.len() * d);
        for r in rows {
            assert_eq!(r.len(), d, "ragged rows reached Points::from_rows");
            data.extend_from_slice(r);
        }
        Points::new(Repr::Numeric(DMatrix::from_vec(d, rows.len(), data)))
    }

    /// From a d x n matrix whose columns are the points.
    pub fn from_columns(m: DMatrix<f64>) -> Points {
        Points::new(Repr::Numeric(m))
    }

    /// One point per string, as its code points.
    pub fn from_texts<S: AsRef<str>>(rows: impl IntoIterator<Item = S>) -> Points {
        Points::new(Repr::Text(rows.into_iter().map(|s| s.as_ref().chars().collect()).collect()))
    }

    /// One point per token list (duplicates and order kept as given; the set kernels
    /// ignore both).
    pub fn from_tokens(rows: impl IntoIterator<Item = Vec<String>>) -> Points {
        Points::new(Repr::Tokens(rows.into_iter().map(Vec::into_boxed_slice).collect()))
    }

    /// The n training rows of a precomputed kernel, `gram` being their n x n kernel
    /// matrix (entry (a, b) = x[b][a]: the request's row b is column b).
    pub fn precomputed(gram: DMatrix<f64>) -> Points {
        let n = gram.ncols();
        Points::new(Repr::Indexed {
            rows: (0..n).collect(),
            table: Some(Arc::new(GramTable::from_matrix(gram))),
            width: n,
        })
    }

    /// Rows `rows` of a precomputed kernel's training set of `width` rows, without their
    /// kernel values (a stored model's support).
    pub fn indices(rows: Vec<usize>, width: usize) -> Points {
        Points::new(Repr::Indexed { rows: rows.into(), table: None, width })
    }

    /// The training-row indices of precomputed-kernel points, with the training Gram
    /// matrix when it is still held; None for other points.
    pub fn indexed(&self) -> Option<(&[usize], Option<&Arc<GramTable>>)> {
        match &self.0 {
            Repr::Indexed { rows, table, .. } => Some((rows, table.as_ref())),
            _ => None,
        }
    }

    pub fn kind(&self) -> RowKind {
        match &self.0 {
            // A query of a precomputed kernel is a numeric row of kernel values.
            Repr::Numeric(_) | Repr::Indexed { .. } => RowKind::Numeric,
            Repr::Text(_) => RowKind::Text,
            Repr::Tokens(_) => RowKind::Tokens,
        }
    }

    pub fn n(&self) -> usize {
        match &self.0 {
            Repr::Numeric(m) => m.ncols(),
            Repr::Text(t) => t.len(),
            Repr::Tokens(t) => t.len(),
            Repr::Indexed { rows, .. } => rows.len(),
        }
    }

    /// Features per point: d for numeric rows, 0 for strings and token lists, the
    /// training row count for a precomputed kernel's rows (a query's width).
    pub fn d(&self) -> usize {
        match &self.0 {
            Repr::Numeric(m) => m.nrows(),
            Repr::Indexed { width, .. } => *width,
            _ => 0,
        }
    }

    /// The numeric d x n matrix; None for strings and token lists.
    pub fn numeric(&self) -> Option<&DMatrix<f64>> {
        match &self.0 {
            Repr::Numeric(m) => Some(m),
            _ => None,
        }
    }

    /// The strings, as code points; None for other kinds.
    pub fn texts(&self) -> Option<&[Box<[char]>]> {
        match &self.0 {
            Repr::Text(t) => Some(t),
            _ => None,
        }
    }

    /// The token lists; None for other kinds.
    pub fn token_lists(&self) -> Option<&[Box<[String]>]> {
        match &self.0 {
            Repr::Tokens(t) => Some(t),
            _ => None,
        }
    }

    /// Point i of numeric rows. Panics on other kinds: callers that reach here have
    /// checked the kind (numeric kernels are refused over strings at validation).
    pub fn point(&self, i: usize) -> &[f64] {
        let m = self.as_matrix();
        let d = m.nrows();
        &m.as_slice()[i * d..(i + 1) * d]
    }

    /// The numeric d x n matrix; panics on other kinds, as [`Points::point`].
    pub fn as_matrix(&self) -> &DMatrix<f64> {
        self.numeric().expect("a numeric operation reached non-numeric points")
    }

    /// Points start..start + len, copied.
    pub fn slice(&self, start: usize, len: usize) -> Points {
        Points::new(match &self.0 {
            Repr::Numeric(m) => Repr::Numeric(m.columns(start, len).into_owned()),
            Repr::Text(t) => Repr::Text(t[start..start + len].into()),
            Repr::Tokens(t) => Repr::Tokens(t[start..start + len].into()),
            Repr::Indexed { rows, table, width } => {
                Repr::Indexed { rows: rows[start..start + len].into(), table: table.clone(), width: *width }
            }
        })
    }

    /// The points of every part, in order, as one set; the parts must be of one kind (and
    /// numeric parts of one width). For stacking concurrent requests into one batch.
    pub fn concat(parts: &[&Points]) -> Points {
        let first = parts.first().expect("at least one part");
        Points::new(match &first.0 {
            Repr::Numeric(m) => {
                let (d, n) = (m.nrows(), parts.iter().map(|p| p.n()).sum::<usize>());
                let mut data = Vec::with_capacity(n * d);
                for p in parts {
                    let m = p.as_matrix();
                    assert_eq!(m.nrows(), d, "points of different widths reached Points::concat");
                    data.extend_from_slice(m.as_slice());
                }
                Repr::Numeric(DMatrix::from_vec(d, n, data))
            }
            Repr::Text(_) => {
                Repr::Text(parts.iter().flat_map(|p| p.texts().expect("one kind per batch").iter().cloned()).collect())
            }
            Repr::Tokens(_) => Repr::Tokens(
                parts.iter().flat_map(|p| p.token_lists().expect("one kind per batch").iter().cloned()).collect(),
            ),
            Repr::Indexed { table, width, .. } => Repr::Indexed {
                rows: parts.iter().flat_map(|p| p.indexed().expect("one kind per batch").0.iter().copied()).collect(),
                table: table.clone(),
                width: *width,
            },
        })
    }

    /// The points at `indices`, in that order, copied.
    pub fn select(&self, indices: &[usize]) -> Points {
        Points::new(match &self.0 {
            Repr::Numeric(m) => {
                let d = m.nrows();
                let mut data = Vec::with_capacity(indices.len() * d);
                for &i in indices {
                    data.extend_from_slice(&m.as_slice()[i * d..(i + 1) * d]);
                }
                Repr::Numeric(DMatrix::from_vec(d, indices.len(), data))
            }
            Repr::Text(t) => Repr::Text(indices.iter().map(|&i| t[i].clone()).collect()),
            Repr::Tokens(t) => Repr::Tokens(indices.iter().map(|&i| t[i].clone()).collect()),
            Repr::Indexed { rows, table, width } => {
                Repr::Indexed { rows: indices.iter().map(|&i| rows[i]).collect(), table: table.clone(), width: *width }
            }
        })
    }

    /// Bytes held, roughly (string headers and the kernels' derived values included).
    pub fn memory_bytes(&self) -> usize {
        let derived = self.1.as_ref().map_or(0, |c| c.0.lock().map_or(0, |m| m.values().map(|(_, b)| b).sum()));
        derived
            + match &self.0 {
                Repr::Numeric(m) => m.len() * std::mem::size_of::<f64>(),
                Repr::Text(t) => t.iter().map(|s| 16 + 4 * s.len()).sum(),
                Repr::Tokens(t) => t.iter().map(|r| 16 + r.iter().map(|s| 24 + s.len()).sum::<usize>()).sum(),
                Repr::Indexed { rows, table, .. } => rows.len() * 8 + table.as_ref().map_or(0, |t| t.n() * t.n() * 8),
            }
    }

    /// (p - shift) / scale feature by feature.
    pub(super) fn affine(&self, shift: &[f64], scale: &[f64]) -> Points {
        let mut m = self.as_matrix().clone();
        for mut col in m.column_iter_mut() {
            for (k, v) in col.iter_mut().enumerate() {
                *v = (*v - shift[k]) / scale[k];
            }
        }
        Points::new(Repr::Numeric(m))
    }

    /// Each feature divided by its length scale (a copy; borrowed when all scales are 1).
    pub(super) fn scaled(&self, scales: &Scales) -> Cow<'_, Points> {
        let zero = vec![0.0; self.d()];
        match scales {
            Scales::Isotropic(l) if *l == 1.0 => Cow::Borrowed(self),
            Scales::Isotropic(l) => Cow::Owned(self.affine(&zero, &vec![*l; self.d()])),
            Scales::PerFeature(ls) => Cow::Owned(self.affine(&zero, ls)),
        }
    }

    pub(super) fn mean(&self) -> Vec<f64> {
        let n = self.n().max(1) as f64;
        self.as_matrix().column_sum().iter().map(|s| s / n).collect()
    }

    pub(super) fn view(&self) -> MatRef<'_, f64> {
        let m = self.as_matrix();
        MatRef::from_column_major_slice(m.as_slice(), m.nrows(), m.ncols())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_slices_and_selects_in_order() {
        let t = Points::from_texts(["héllo", "", "ab"]);
        assert_eq!((t.kind(), t.n(), t.d()), (RowKind::Text, 3, 0));
        assert_eq!(t.texts().unwrap()[0].len(), 5, "code points, not bytes");
        let s = t.select(&[2, 0]);
        assert_eq!(s.texts().unwrap()[0].iter().collect::<String>(), "ab");
        assert_eq!(t.slice(1, 2).texts().unwrap()[0].len(), 0);
        let k = Points::from_tokens(vec![vec!["a".into()], vec![], vec!["b".into(), "a".into()]]);
        assert_eq!(k.select(&[2]).token_lists().unwrap()[0].len(), 2);
        assert!(k.numeric().is_none() && t.token_lists().is_none());
        let x = Points::from_rows(&[vec![1.0, 2.0], vec![3.0, 4.0]]);
        assert_eq!(x.select(&[1]).point(0), &[3.0, 4.0]);
    }
}

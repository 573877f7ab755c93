//! Rows as sparse non-negative vectors over interned features (k-mers, tokens), and their
//! inner products: the common core of the spectrum and set kernels.
//!
//! A Gram matrix is built column by column from an inverted index (Gustavson's
//! row-by-row sparse product): column j adds w_if w_jf into entry i for every feature f
//! of row j and every row i holding f. The work is the sum over features of (rows
//! holding it)^2, never n^2 times the vocabulary, and each column is owned by one task,
//! so the columns run in parallel without locks. Weights are small integers, so every
//! sum is exact and the result does not depend on the order of the additions.

use crate::linalg::Parallelism;
use nalgebra::DMatrix;
use rayon::prelude::*;
use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;

/// One row: (feature id, weight), sorted by id, ids distinct.
pub(super) type SparseRow = Vec<(u32, f64)>;

/// foldhash: several times faster than SipHash on the short keys interned here, and
/// seeded per map, so client-chosen k-mers and tokens cannot be made to collide.
type IdMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// How a row's features become weights.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Weights {
    /// How often each feature occurs (k-mer counts).
    Counts,
    /// 1 for each distinct feature (token sets).
    Presence,
}

/// One point set's rows as sparse vectors over interned features, with an inverted index
/// (feature -> rows holding it) for products against any other rows.
pub(super) struct Index<K> {
    ids: IdMap<K, u32>,
    pub rows: Vec<SparseRow>,
    /// Each row's inner product with itself (its size, for token sets).
    pub selfs: Vec<f64>,
    /// For each feature, the rows holding it, each row repeated as often as it holds
    /// it: 4 bytes per occurrence (counts are nearly always 1), and no multiply.
    postings: Vec<Vec<u32>>,
    weights: Weights,
}

impl<K: Hash + Eq> Index<K> {
    /// Interns every row's features, first seen first. Features are borrowed while
    /// interning; only the distinct ones are copied into the index.
    pub fn new<'a, B, R>(rows: impl IntoIterator<Item = R>, weights: Weights) -> Index<K>
    where
        R: IntoIterator<Item = &'a B>,
        B: ?Sized + Hash + Eq + ToOwned<Owned = K> + 'a,
    {
        let mut interned: IdMap<&'a B, u32> = HashMap::default();
        let rows: Vec<SparseRow> = rows
            .into_iter()
            .map(|r| {
                let row_ids = r.into_iter().map(|key| {
                    let next = interned.len() as u32;
                    *interned.entry(key).or_insert(next)
                });
                to_row(row_ids.collect(), weights)
            })
            .collect();
        let ids: IdMap<K, u32> = interned.into_iter().map(|(k, id)| (k.to_owned(), id)).collect();
        let selfs = rows.iter().map(|r| self_dot(r)).collect();
        let mut postings: Vec<Vec<u32>> = vec![Vec::new(); ids.len()];
        for (i, row) in rows.iter().enumerate() {
            for &(f, w) in row {
                let list = &mut postings[f as usize];
                list.extend(std::iter::repeat_n(i as u32, w as usize));
            }
        }
        Index { ids, rows, selfs, postings, weights }
    }

    /// Another row in this index's ids. Features the index never saw get ids past its
    /// vocabulary (`unseen` numbers them across one batch of rows): they count in the
    /// row's own norm or size but match nothing.
    pub fn query<'q, Q>(&self, features: impl IntoIterator<Item = &'q Q>, unseen: &mut IdMap<&'q Q, u32>) -> SparseRow
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + 'q,
    {
        let vocab = self.postings.len() as u32;
        let ids = features
            .into_iter()
            .map(|f| match self.ids.get(f) {
                Some(&id) => id,
                None => {
                    let next = vocab + unseen.len() as u32;
                    *unseen.entry(f).or_insert(next)
                }
            })
            .collect();
        to_row(ids, self.weights)
    }

    /// `finish` of the inner products of this index's rows with `z`'s (z None: with its
    /// own, a symmetric result), n x m. `finish` runs on each column while it is in cache.
    pub fn products(&self, z: Option<&[SparseRow]>, par: Parallelism, finish: Finish<'_>) -> DMatrix<f64> {
        let n = self.rows.len();
        let symmetric = z.is_none();
        let z = z.unwrap_or(&self.rows);
        let mut out = crate::linalg::zeros(n, z.len());
        if n == 0 || z.is_empty() {
            return out;
        }
        let postings = &self.postings;
        let fill = |(j, col): (usize, &mut [f64])| {
            // Symmetric: the lower triangle only (rows i >= j), mirrored below.
            let first = if symmetric { j } else { 0 };
            for &(f, wj) in &z[j] {
                let Some(list) = postings.get(f as usize) else { continue };
                let from = if symmetric { list.partition_point(|&i| (i as usize) < j) } else { 0 };
                // Sums of small integers: exact, whatever the order.
                for &i in &list[from..] {
                    col[i as usize] += wj;
                }
            }
            for (i, v) in col.iter_mut().enumerate().skip(first) {
                *v = finish(i, j, *v);
            }
        };
        if par.is_parallel() {
            out.as_mut_slice().par_chunks_mut(n).enumerate().with_min_len(16).for_each(fill);
        } else {
            out.as_mut_slice().chunks_mut(n).enumerate().for_each(fill);
        }
        if symmetric {
            crate::linalg::mirror_lower(&mut out, par);
        }
        out
    }

    /// Bytes held, roughly.
    pub fn memory_bytes(&self) -> usize {
        let entries: usize = self.rows.iter().map(Vec::len).sum();
        entries * (16 + 4) + self.ids.len() * 48
    }
}

fn to_row(mut ids: Vec<u32>, weights: Weights) -> SparseRow {
    ids.sort_unstable();
    let mut out: SparseRow = Vec::with_capacity(ids.len());
    for id in ids {
        match out.last_mut() {
            Some((last, w)) if *last == id => {
                if weights == Weights::Counts {
                    *w += 1.0
                }
            }
            _ => out.push((id, 1.0)),
        }
    }
    out
}

/// sum_f a_f b_f over two sorted rows.
pub(super) fn dot(a: &[(u32, f64)], b: &[(u32, f64)]) -> f64 {
    let (mut i, mut j, mut acc) = (0, 0, 0.0);
    while i < a.len() && j < b.len() {
        match a[i].0.cmp(&b[j].0) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                acc += a[i].1 * b[j].1;
                i += 1;
                j += 1;
            }
        }
    }
    acc
}

pub(super) fn self_dot(a: &[(u32, f64)]) -> f64 {
    a.iter().map(|(_, w)| w * w).sum()
}

/// Turns an inner product into the kernel's entry: `finish(i, j, x_i . z_j)`.
pub(super) type Finish<'a> = &'a (dyn Fn(usize, usize, f64) -> f64 + Sync);

/// A fresh numbering of unseen query features, for [`Index::query`].
pub(super) fn unseen<'q, Q: ?Sized>() -> IdMap<&'q Q, u32> {
    HashMap::default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products_match_merged_dots_in_both_modes() {
        let rows = [vec!["a", "b", "b", "d"], vec![], vec!["d", "d", "c"], vec!["b"]];
        let index: Index<String> = Index::new(rows.iter().map(|r| r.iter().copied()), Weights::Counts);
        let mut fresh = unseen();
        let z: Vec<SparseRow> = [vec!["b", "x"], vec!["d", "a", "x", "y"]]
            .iter()
            .map(|r| index.query(r.iter().copied(), &mut fresh))
            .collect();
        assert_eq!(z[1].len(), 4, "unseen features count in the row");
        for par in [Parallelism::Sequential, Parallelism::Parallel] {
            let g = index.products(None, par, &|_, _, v| v);
            let c = index.products(Some(&z), par, &|_, _, v| v);
            for i in 0..rows.len() {
                for j in 0..rows.len() {
                    assert_eq!(g[(i, j)], dot(&index.rows[i], &index.rows[j]));
                }
                for j in 0..z.len() {
                    assert_eq!(c[(i, j)], dot(&index.rows[i], &z[j]));
                }
            }
        }
        assert_eq!(self_dot(&index.rows[0]), 1.0 + 4.0 + 1.0);
        let sets: Index<String> = Index::new(rows.iter().map(|r| r.iter().copied()), Weights::Presence);
        assert_eq!(sets.selfs[2], 2.0, "distinct tokens count once");
    }
}

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
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};

/// One row: (feature id, weight), sorted by id, ids distinct.
pub(super) type SparseRow = Vec<(u32, f64)>;

/// Interns features to consecutive ids, first seen first.
pub(super) struct Interner<K> {
    ids: HashMap<K, u32, BuildHasherDefault<FxHasher>>,
}

impl<K: Hash + Eq> Interner<K> {
    pub fn new() -> Self {
        Interner { ids: HashMap::default() }
    }

    pub fn id(&mut self, key: K) -> u32 {
        let next = self.ids.len() as u32;
        *self.ids.entry(key).or_insert(next)
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }
}

/// Sorts ids and counts repeats: the sparse count vector of one row.
pub(super) fn counts(mut ids: Vec<u32>) -> SparseRow {
    ids.sort_unstable();
    let mut out: SparseRow = Vec::with_capacity(ids.len());
    for id in ids {
        match out.last_mut() {
            Some((last, w)) if *last == id => *w += 1.0,
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

/// The inner products of `x`'s rows with `z`'s (z None: with x's own, a symmetric
/// result), n x m. Ids of `z` beyond `vocab` were never seen in `x` and add nothing.
pub(super) fn products(x: &[SparseRow], z: Option<&[SparseRow]>, vocab: usize, par: Parallelism) -> DMatrix<f64> {
    let n = x.len();
    let mut postings: Vec<Vec<(u32, f64)>> = vec![Vec::new(); vocab];
    for (i, row) in x.iter().enumerate() {
        for &(f, w) in row {
            postings[f as usize].push((i as u32, w));
        }
    }
    let symmetric = z.is_none();
    let z = z.unwrap_or(x);
    let mut out = crate::linalg::zeros(n, z.len());
    if n == 0 || z.is_empty() {
        return out;
    }
    let fill = |(j, col): (usize, &mut [f64])| {
        for &(f, wj) in &z[j] {
            let Some(list) = postings.get(f as usize) else { continue };
            // Symmetric: the lower triangle only (rows i >= j), mirrored below.
            let from = if symmetric { list.partition_point(|&(i, _)| (i as usize) < j) } else { 0 };
            for &(i, wi) in &list[from..] {
                col[i as usize] += wi * wj;
            }
        }
    };
    if par.is_parallel() {
        out.as_mut_slice().par_chunks_mut(n).enumerate().with_min_len(16).for_each(fill);
    } else {
        out.as_mut_slice().chunks_mut(n).enumerate().for_each(fill);
    }
    if symmetric {
        super::super::gram::mirror_lower(&mut out, par);
    }
    out
}

/// FxHash (rustc's): a multiply-rotate hash, several times faster than SipHash on the
/// short keys interned here. Keys come from the client, but a collision only costs time
/// within one request's own Gram build.
#[derive(Default, Clone, Copy)]
pub(super) struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut buf = [0u8; 8];
            buf[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(buf));
        }
    }

    fn write_u32(&mut self, v: u32) {
        self.add(v as u64);
    }

    fn write_u64(&mut self, v: u64) {
        self.add(v);
    }

    fn write_usize(&mut self, v: usize) {
        self.add(v as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl FxHasher {
    fn add(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products_match_merged_dots_in_both_modes() {
        let rows: Vec<SparseRow> =
            vec![counts(vec![0, 1, 1, 3]), counts(vec![]), counts(vec![3, 3, 2]), counts(vec![1])];
        let z: Vec<SparseRow> = vec![counts(vec![1, 7]), counts(vec![3, 0])];
        for par in [Parallelism::Sequential, Parallelism::Parallel] {
            let g = products(&rows, None, 4, par);
            let c = products(&rows, Some(&z), 4, par);
            for i in 0..rows.len() {
                for j in 0..rows.len() {
                    assert_eq!(g[(i, j)], dot(&rows[i], &rows[j]));
                }
                for j in 0..z.len() {
                    assert_eq!(c[(i, j)], dot(&rows[i], &z[j]));
                }
            }
        }
        assert_eq!(dot(&rows[0], &rows[0]), 1.0 + 4.0 + 1.0);
    }
}

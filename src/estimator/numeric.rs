//! Small numerical pieces several families share.

use crate::kernel::{Kernel, Points};
use crate::linalg::Parallelism;
use nalgebra::DMatrix;

/// 1 / (1 + e^-z) without overflow for any z.
pub(crate) fn sigmoid(z: f64) -> f64 {
    if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        e / (1.0 + e)
    }
}

/// log(1 + e^z) without overflow.
pub(crate) fn log1p_exp(z: f64) -> f64 {
    if z > 0.0 {
        z + (-z).exp().ln_1p()
    } else {
        z.exp().ln_1p()
    }
}

/// The index of the first largest value: ties go to the lowest index (LIBSVM's votes, and
/// classes in sorted order).
pub(crate) fn first_max(values: impl IntoIterator<Item = f64>) -> usize {
    let mut best = (0, f64::NEG_INFINITY);
    for (i, v) in values.into_iter().enumerate() {
        if v > best.1 {
            best = (i, v);
        }
    }
    best.0
}

/// K(X, X) + s I, lower triangle only: it is only ever factorised.
pub fn regularised_gram(kernel: &Kernel, x: &Points, s: f64, par: Parallelism) -> DMatrix<f64> {
    let mut k = kernel.gram_lower(x, par);
    for i in 0..k.nrows() {
        k[(i, i)] += s;
    }
    k
}

/// K(X*, X)^T-style products: out[j] = sum_i k[(i, j)] w[i], for a n x m cross matrix.
pub(crate) fn weighted_columns(k: &DMatrix<f64>, w: &[f64]) -> Vec<f64> {
    k.column_iter().map(|col| col.iter().zip(w).map(|(a, b)| a * b).sum()).collect()
}

/// Query rows per block at predict, so that the n x block cross matrix stays bounded
/// (about 64 MB) whatever m is.
pub(crate) fn predict_block_rows(n_train: usize) -> usize {
    ((8 << 20) / n_train.max(1)).clamp(64, 8192)
}

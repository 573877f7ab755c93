//! The precomputed kernel: the client brings the kernel values. Training rows are the
//! training Gram matrix's rows named by index ([`Points::precomputed`]); a query is a
//! numeric row of its kernel values against every training row, in training order. Every
//! matrix a model needs is a gather: training x training from the Gram matrix, training x
//! query from the query rows. A k(query, query) does not exist, which is why the models
//! that need one refuse this kernel before fitting.

use super::Points;
use crate::linalg::Parallelism;
use crate::spec::FieldError;
use nalgebra::{DMatrix, DVector};

/// A precomputed kernel's training rows from the request's `x`: n rows of n numbers,
/// symmetric to 1e-12 of the largest magnitude. Errors point at `/x`.
pub fn training_rows(x: &Points) -> Result<Points, FieldError> {
    let Some(m) = x.numeric() else {
        return Err(FieldError::invalid("/x", "a precomputed kernel takes rows of kernel values (numbers)"));
    };
    let (d, n) = (m.nrows(), m.ncols());
    if d != n {
        return Err(FieldError::invalid(
            "/x",
            format!("a precomputed kernel's x is the n x n kernel matrix, but its {n} rows have {d} values"),
        ));
    }
    let tol = 1e-12 * m.amax();
    for j in 0..n {
        for i in 0..j {
            if (m[(i, j)] - m[(j, i)]).abs() > tol {
                return Err(FieldError::invalid(
                    "/x",
                    format!(
                        "a precomputed kernel matrix must be symmetric, but x[{i}][{j}] = {} and x[{j}][{i}] = {}",
                        m[(j, i)],
                        m[(i, j)]
                    ),
                ));
            }
        }
    }
    Ok(Points::precomputed(m.clone()))
}

/// K(x, z) (or K(x, x)), each side training rows by index or queries.
pub(super) fn build(x: &Points, z: Option<&Points>, par: Parallelism) -> DMatrix<f64> {
    let z = z.unwrap_or(x);
    match (x.indexed(), z.indexed()) {
        (Some((rows, Some(table))), Some((cols, _))) => table.block(rows, cols, par),
        (Some((rows, None)), Some((cols, Some(table)))) => table.block(rows, cols, par),
        (Some((rows, _)), None) => DMatrix::from_fn(rows.len(), z.n(), |i, j| z.point(j)[rows[i]]),
        (None, Some((cols, _))) => DMatrix::from_fn(x.n(), cols.len(), |i, j| x.point(i)[cols[j]]),
        _ => unreachable!("a precomputed kernel is only evaluated against training rows with their values"),
    }
}

/// k(x_i, x_i) of training rows.
pub(super) fn diag(x: &Points) -> DVector<f64> {
    match x.indexed() {
        Some((rows, Some(table))) => DVector::from_vec(table.diag(rows)),
        _ => unreachable!("k(x, x) of a precomputed kernel is known only at training rows"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::Kernel;
    use serde_json::json;

    /// The precomputed kernel over an rbf Gram matrix answers what the rbf kernel does,
    /// for training subsets and for queries given as kernel rows.
    #[test]
    fn gathers_equal_the_kernel_they_were_computed_from() {
        let x = Points::from_columns(crate::test_support::seeded_matrix(2, 12, 3));
        let rbf = Kernel::from_json(&json!({"type": "rbf", "gamma": 0.7})).unwrap();
        let pre = Kernel::from_json(&json!({"type": "precomputed"})).unwrap();
        let par = Parallelism::Sequential;
        let train = Points::precomputed(rbf.gram(&x, par));
        let (a, b) = (vec![1, 4, 7, 8], vec![0, 2, 11]);
        let close = |p: DMatrix<f64>, q: DMatrix<f64>| assert!((p - q).amax() < 1e-15);
        close(pre.gram(&train.select(&a), par), rbf.gram(&x.select(&a), par));
        close(pre.cross(&train.select(&a), &train.select(&b), par), rbf.cross(&x.select(&a), &x.select(&b), par));
        // Queries: rows of k(query, every training row); here the training rows again.
        let q = Points::from_columns(rbf.cross(&x, &x.select(&b), par));
        close(pre.cross(&train.select(&a), &q, par), rbf.cross(&x.select(&a), &x.select(&b), par));
        close(pre.cross(&q, &train.select(&a), par), rbf.cross(&x.select(&b), &x.select(&a), par));
        // A stored model's support has indices only, and still predicts.
        let support = Points::indices(a.clone(), 12);
        close(pre.cross(&support, &q, par), rbf.cross(&x.select(&a), &x.select(&b), par));
        assert_eq!(pre.diag(&train.select(&b)), rbf.diag(&x.select(&b)));
        assert_eq!(train.select(&a).d(), 12);
    }

    #[test]
    fn training_rows_must_be_a_symmetric_square() {
        let ok = Points::from_rows(&[vec![2.0, 1.0], vec![1.0 + 1e-13, 2.0]]);
        assert_eq!(training_rows(&ok).unwrap().indexed().unwrap().0, &[0, 1]);
        let wide = Points::from_rows(&[vec![1.0, 0.0, 0.0], vec![0.0, 1.0, 0.0]]);
        assert!(training_rows(&wide).unwrap_err().message.contains("2 rows have 3 values"));
        let skew = Points::from_rows(&[vec![2.0, 1.0], vec![1.1, 2.0]]);
        let e = training_rows(&skew).unwrap_err();
        assert_eq!(e.pointer, "/x");
        assert!(e.message.contains("symmetric"), "{}", e.message);
        assert!(training_rows(&Points::from_texts(["a"])).is_err());
    }
}

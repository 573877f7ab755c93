//! A kernel's Gram matrix over one point set, computed once and read by blocks: a model
//! search fits many candidates on many subsets of the same rows, and every subset's
//! training block and held-out cross block are a gather from this one table.
//!
//! The table is built by [`Kernel::gram`] over all the rows (`GramTable::new`, beside it in
//! `gram.rs`, so that points may carry a table without the table knowing points), so an entry equals the one a
//! fit over a subset computes up to round-off in the last place (distance kernels centre
//! the points they are given). Kernels whose values depend on more than the pair of
//! points (`white`, which counts coincident rows, and the mixture kernels fitted to the
//! training rows) must not be tabled: see [`GramTable::suits`].

use super::Kernel;
use crate::linalg::Parallelism;
use nalgebra::DMatrix;
use rayon::prelude::*;

pub struct GramTable {
    k: DMatrix<f64>,
}

impl std::fmt::Debug for GramTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GramTable({0} x {0})", self.n())
    }
}

impl GramTable {
    /// A table of given values (a precomputed kernel's training matrix).
    pub fn from_matrix(k: DMatrix<f64>) -> GramTable {
        GramTable { k }
    }

    /// Bytes a table over n rows holds.
    pub fn bytes(n: usize) -> u64 {
        (n as u64).saturating_mul(n as u64).saturating_mul(8)
    }

    /// Whether a kernel's value at a pair of rows is the same whichever subset holds
    /// them: false for `white` (it counts coincident rows of one set only) and for
    /// mixture kernels that a fit fits to its own training rows, nor for a `"scale"`
    /// gamma (each fit decides it from its own training rows).
    pub fn suits(kernel: &Kernel) -> bool {
        if kernel.has_scale() {
            return false;
        }
        match kernel {
            Kernel::White { .. } => false,
            Kernel::Generative(m) | Kernel::Fisher(m) => m.mixture.is_some(),
            Kernel::Sum(ks) | Kernel::Product(ks) => ks.iter().all(GramTable::suits),
            Kernel::Scale { kernel, .. } => GramTable::suits(kernel),
            _ => true,
        }
    }

    pub fn n(&self) -> usize {
        self.k.nrows()
    }

    pub fn get(&self, i: usize, j: usize) -> f64 {
        self.k[(i, j)]
    }

    /// k(x_j, x_i) for every j: column i.
    pub fn column(&self, i: usize) -> &[f64] {
        let n = self.n();
        &self.k.as_slice()[i * n..(i + 1) * n]
    }

    /// k(rows[i], cols[j]), |rows| x |cols|.
    pub fn block(&self, rows: &[usize], cols: &[usize], par: Parallelism) -> DMatrix<f64> {
        let mut out = crate::linalg::zeros(rows.len(), cols.len());
        let gather = |(j, col): (usize, &mut [f64])| {
            let src = self.k.column(cols[j]);
            for (o, &r) in col.iter_mut().zip(rows) {
                *o = src[r];
            }
        };
        let m = rows.len().max(1);
        if par.is_parallel() && rows.len() * cols.len() >= 1 << 16 {
            out.as_mut_slice().par_chunks_mut(m).enumerate().for_each(gather);
        } else {
            out.as_mut_slice().chunks_mut(m).enumerate().for_each(gather);
        }
        out
    }

    /// k(rows[i], rows[i]).
    pub fn diag(&self, rows: &[usize]) -> Vec<f64> {
        rows.iter().map(|&r| self.k[(r, r)]).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::Points;
    use serde_json::json;

    /// Blocks of the table equal the Gram and cross matrices computed on the subsets.
    #[test]
    fn blocks_equal_the_subsets_own_matrices() {
        let x = Points::from_columns(crate::test_support::seeded_matrix(3, 60, 5));
        let k = Kernel::from_json(&json!({"type": "matern", "nu": 2.5, "length_scale": 0.8})).unwrap();
        let t = GramTable::new(&k, &x, Parallelism::Sequential);
        let rows: Vec<usize> = (0..60).filter(|i| i % 3 != 0).collect();
        let held: Vec<usize> = (0..60).filter(|i| i % 3 == 0).collect();
        let (xr, xh) = (x.select(&rows), x.select(&held));
        for par in [Parallelism::Sequential, Parallelism::Parallel] {
            let b = t.block(&rows, &rows, par);
            assert!((b - k.gram(&xr, par)).amax() < 1e-14);
            let c = t.block(&held, &rows, par);
            assert!((c - k.cross(&xh, &xr, par)).amax() < 1e-14);
        }
        assert_eq!(t.diag(&held), k.diag(&xh).as_slice());
        assert!(!GramTable::suits(
            &Kernel::from_json(&json!({"type": "sum", "kernels": [{"type": "rbf"}, {"type": "white"}]})).unwrap()
        ));
        assert!(GramTable::suits(&k));
    }
}

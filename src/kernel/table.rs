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
//!
//! When the whole table does not fit the memory budget, a lazy table
//! ([`GramTable::lazy`]) serves the same columns computed on first use and keeps the most
//! first of them up to the budget: SVM fits of one kernel on several folds and
//! values of C ask for largely the same columns (the support vectors'), which are then
//! computed once for all of them instead of once per fit.

use super::Kernel;
use crate::linalg::Parallelism;
use nalgebra::DMatrix;
use rayon::prelude::*;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub struct GramTable {
    store: Store,
}

enum Store {
    Full(DMatrix<f64>),
    Lazy(Box<Lazy>),
}

/// What a lazy table computes its values with (a kernel over the table's points,
/// `column.rs`: the table itself knows neither).
pub trait Source: Send + Sync {
    fn n(&self) -> usize;
    /// out[p] = k(x_i, x_p) for every p.
    fn column(&self, i: usize, out: &mut [f64], par: Parallelism);
    fn diag(&self, i: usize) -> f64;
    /// k(rows[i], cols[j]), computed as one product of exactly its size.
    fn block(&self, rows: &[usize], cols: &[usize], par: Parallelism) -> DMatrix<f64>;
}

/// Columns computed on demand, the first `capacity` of them kept, in f32: the SMO
/// solver, the one reader of a lazy table's columns, rounds every kernel value to f32
/// (LIBSVM's Qfloat), so a value rounded here is the value it would have used, and the
/// budget holds twice the columns. Not an LRU: SMO fits
/// sweep over more columns than a budget short of the whole table holds, and a sweep
/// evicts every column of an LRU before its next use; columns kept once hit every
/// later sweep that reaches them (the first asked for are the first violators, often
/// support vectors of every fit).
struct Lazy {
    source: Box<dyn Source>,
    capacity: usize,
    cache: Mutex<Cache>,
}

#[derive(Default)]
struct Cache {
    held: HashMap<usize, Arc<[f32]>>,
    computed: u64,
}

/// One column of a table: borrowed from a full one, or shared from a lazy one's cache
/// (f32).
pub enum Column<'a> {
    Borrowed(&'a [f64]),
    Shared(Arc<[f32]>),
}

impl Column<'_> {
    pub fn at(&self, p: usize) -> f64 {
        match self {
            Column::Borrowed(c) => c[p],
            Column::Shared(c) => c[p] as f64,
        }
    }

    /// out[k] = the value at places[k].
    pub fn gather(&self, places: &[usize], out: &mut [f64]) {
        match self {
            Column::Borrowed(c) => out.iter_mut().zip(places).for_each(|(o, &p)| *o = c[p]),
            Column::Shared(c) => out.iter_mut().zip(places).for_each(|(o, &p)| *o = c[p] as f64),
        }
    }
}

impl std::fmt::Debug for GramTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.store {
            Store::Full(_) => write!(f, "GramTable({0} x {0})", self.n()),
            Store::Lazy(l) => write!(f, "GramTable({0} x {0}, lazy, {1} columns held)", self.n(), l.capacity),
        }
    }
}

impl GramTable {
    /// A table of given values (a precomputed kernel's training matrix).
    pub fn from_matrix(k: DMatrix<f64>) -> GramTable {
        GramTable { store: Store::Full(k) }
    }

    /// A table of `source`'s values, columns computed when first asked for, at most
    /// `budget` bytes of them held (`GramTable::lazy`, in `column.rs`, over a kernel
    /// and points).
    pub fn from_source(source: Box<dyn Source>, budget: u64) -> GramTable {
        let capacity = GramTable::lazy_capacity(source.n(), budget);
        let cache = Mutex::new(Cache::default());
        GramTable { store: Store::Lazy(Box::new(Lazy { source, capacity, cache })) }
    }

    /// Columns of n rows (in f32) that `budget` bytes hold.
    pub fn lazy_capacity(n: usize, budget: u64) -> usize {
        (budget / (4 * n.max(1) as u64)).min(n as u64) as usize
    }

    /// Columns a lazy table has computed so far (0 for a full table).
    pub fn computed_columns(&self) -> u64 {
        match &self.store {
            Store::Full(_) => 0,
            Store::Lazy(l) => l.cache.lock().expect("column cache").computed,
        }
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
        match &self.store {
            Store::Full(k) => k.nrows(),
            Store::Lazy(l) => l.source.n(),
        }
    }

    pub fn get(&self, i: usize, j: usize) -> f64 {
        match &self.store {
            Store::Full(k) => k[(i, j)],
            Store::Lazy(_) => self.column(j, Parallelism::Sequential).at(i),
        }
    }

    /// k(x_j, x_i) for every j: column i. A lazy table computes it (on every core `par`
    /// allows) unless it holds it, and answers it in f32.
    pub fn column(&self, i: usize, par: Parallelism) -> Column<'_> {
        match &self.store {
            Store::Full(k) => {
                let n = k.nrows();
                Column::Borrowed(&k.as_slice()[i * n..(i + 1) * n])
            }
            Store::Lazy(l) => {
                if let Some(held) = l.cache.lock().expect("column cache").held.get(&i) {
                    return Column::Shared(Arc::clone(held));
                }
                // Computed outside the lock: fits side by side do not wait on each other.
                let mut values = vec![0.0; l.source.n()];
                l.source.column(i, &mut values, par);
                let values: Arc<[f32]> = values.iter().map(|&v| v as f32).collect();
                let mut cache = l.cache.lock().expect("column cache");
                cache.computed += 1;
                if cache.held.len() < l.capacity {
                    cache.held.insert(i, Arc::clone(&values));
                }
                Column::Shared(values)
            }
        }
    }

    /// Column i if the table holds it or has room for it (computing it then, on every
    /// core `par` allows); None from a lazy table that is full and lacks it.
    pub fn column_if_held(&self, i: usize, par: Parallelism) -> Option<Column<'_>> {
        match &self.store {
            Store::Full(_) => Some(self.column(i, par)),
            Store::Lazy(l) => {
                let cache = l.cache.lock().expect("column cache");
                if let Some(held) = cache.held.get(&i) {
                    return Some(Column::Shared(Arc::clone(held)));
                }
                (cache.held.len() < l.capacity).then(|| {
                    drop(cache);
                    self.column(i, par)
                })
            }
        }
    }

    /// Whether columns are computed on first use (and not all held).
    pub fn is_lazy(&self) -> bool {
        matches!(self.store, Store::Lazy(_))
    }

    /// k(rows[i], cols[j]), |rows| x |cols|.
    pub fn block(&self, rows: &[usize], cols: &[usize], par: Parallelism) -> DMatrix<f64> {
        let k = match &self.store {
            Store::Full(k) => k,
            // A cross block (held-out rows against support vectors) is computed as one
            // product of exactly its size; its columns are rarely a fit's.
            Store::Lazy(l) => return l.source.block(rows, cols, par),
        };
        let mut out = crate::linalg::zeros(rows.len(), cols.len());
        let gather = |(j, col): (usize, &mut [f64])| {
            let src = k.column(cols[j]);
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
        match &self.store {
            Store::Full(k) => rows.iter().map(|&r| k[(r, r)]).collect(),
            Store::Lazy(l) => rows.iter().map(|&r| l.source.diag(r)).collect(),
        }
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

    /// A lazy table answers what the whole one does (columns to round-off, blocks and
    /// the diagonal), holds the first columns up to its capacity, and computes the
    /// others at every request.
    #[test]
    fn a_lazy_table_equals_the_whole_one_and_holds_its_budget() {
        let x = Points::from_columns(crate::test_support::seeded_matrix(4, 90, 8).add_scalar(2.0));
        let k = Kernel::from_json(&json!({"type": "rbf", "length_scale": 0.9})).unwrap();
        let whole = GramTable::new(&k, &x, Parallelism::Sequential);
        let lazy = GramTable::lazy(&k, &x, 10 * 4 * 90);
        assert_eq!((lazy.n(), GramTable::lazy_capacity(90, 10 * 4 * 90)), (90, 10));
        for par in [Parallelism::Sequential, Parallelism::Parallel] {
            for i in [0, 17, 89] {
                let (a, b) = (whole.column(i, par), lazy.column(i, par));
                let places: Vec<usize> = (0..90).collect();
                let (mut va, mut vb) = (vec![0.0; 90], vec![0.0; 90]);
                a.gather(&places, &mut va);
                b.gather(&places, &mut vb);
                // The f32 of the value: within half an f32 ulp.
                assert!(va.iter().zip(&vb).all(|(a, b)| (a - b).abs() <= 6e-8 * a.abs()), "column {i}");
                assert!(vb.iter().all(|&b| b as f32 as f64 == b));
                assert_eq!(b.at(40), vb[40]);
            }
        }
        // Columns 0, 17, 89 were each computed once; asking again hits.
        assert_eq!(lazy.computed_columns(), 3);
        let rows: Vec<usize> = (0..90).step_by(7).collect();
        let cols = [3, 50, 61];
        assert!(
            (lazy.block(&rows, &cols, Parallelism::Sequential) - whole.block(&rows, &cols, Parallelism::Sequential))
                .amax()
                < 1e-14
        );
        assert_eq!(lazy.diag(&rows), whole.diag(&rows));
        assert_eq!(lazy.computed_columns(), 3, "blocks and the diagonal compute no column");
        // Seven more fill it; past that, columns are computed at every request.
        for i in 20..30 {
            lazy.column(i, Parallelism::Sequential);
        }
        assert_eq!(lazy.computed_columns(), 13);
        lazy.column(26, Parallelism::Sequential);
        assert_eq!(lazy.computed_columns(), 13, "held");
        lazy.column(27, Parallelism::Sequential);
        lazy.column(29, Parallelism::Sequential);
        assert_eq!(lazy.computed_columns(), 15, "past the capacity");
        lazy.column(0, Parallelism::Sequential);
        assert_eq!(lazy.computed_columns(), 15, "the first stay");
        let Store::Lazy(l) = &lazy.store else { unreachable!() };
        assert_eq!(l.cache.lock().unwrap().held.len(), 10);
    }
}

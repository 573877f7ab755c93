//! Kernel columns one at a time, for solvers that visit a few columns of the Gram matrix
//! per step (SMO) and could not hold all of it.
//!
//! [`ColumnKernel`] prepares a point set once (scaled, centred, squared norms) and then
//! computes k(x_i, x_p) for a range of positions p, SIMD within a column and split across
//! cores for long columns. Solvers that reorder their working set (shrinking) swap points
//! with [`ColumnKernel::swap`], so positions stay contiguous.

use super::gram::{leaf, Base, LeafMap};
use super::structured::{feature_map, PairKernel};
use super::{Kernel, Points};
use crate::linalg::Parallelism;
use faer::{Accum, MatMut, MatRef, Par};
use rayon::prelude::*;
use std::ops::Range;
use wide::f64x4;

/// Entries per parallel task: long enough that a task outweighs rayon's hand-off.
const CHUNK: usize = 2048;
/// Positions per block of [`ColumnKernel::rows`]: a block's products for a few hundred
/// rows stay within the core's cache.
const BLOCK: usize = 512;

/// A kernel over a fixed point set, answering one column (or part of one) at a time.
pub struct ColumnKernel {
    root: Node,
    n: usize,
}

enum Node {
    Leaf {
        base: Base,
        /// Feature-major (feature k of point p at k * n + p): scaled by the length scales
        /// and, for distance kernels, centred (distances do not change; cancellation
        /// shrinks). Feature-major lets a column's inner products run four points per
        /// vector with no horizontal sums.
        xt: Vec<f64>,
        d: usize,
        n: usize,
        /// Squared norms of the prepared points (distance kernels only).
        norms: Vec<f64>,
        map: LeafMap,
    },
    /// A string or set kernel, entry by entry; `order[p]` is the row at position p.
    Pairs {
        kernel: PairKernel,
        order: Vec<usize>,
    },
    /// Read from a table of the kernel over a superset; `order[p]` is the table row at
    /// position p. `own` computes the columns a lazy table will not hold, over these
    /// positions only.
    Table {
        table: std::sync::Arc<super::GramTable>,
        order: Vec<usize>,
        own: Option<Box<Node>>,
    },
    Constant(f64),
    White(f64),
    Sum(Vec<Node>),
    Product(Vec<Node>),
    Scale(f64, Box<Node>),
}

impl ColumnKernel {
    pub fn new(kernel: &Kernel, points: &Points) -> ColumnKernel {
        ColumnKernel { root: Node::new(kernel, points), n: points.n() }
    }

    /// The kernel over rows `rows` of a precomputed table (a search's shared Gram).
    pub fn from_table(table: std::sync::Arc<super::GramTable>, rows: Vec<usize>) -> ColumnKernel {
        let n = rows.len();
        ColumnKernel { root: Node::Table { table, order: rows, own: None }, n }
    }

    /// The kernel over rows `rows` of a lazy table, whose columns it does not hold are
    /// computed over `points` (the same rows, in the same order) as [`ColumnKernel::new`]
    /// would: only the positions asked for, not the table's n.
    pub fn from_lazy_table(
        table: std::sync::Arc<super::GramTable>,
        rows: Vec<usize>,
        kernel: &Kernel,
        points: &Points,
    ) -> ColumnKernel {
        assert_eq!(rows.len(), points.n(), "a point per row");
        let own = Some(Box::new(Node::new(kernel, points)));
        let n = rows.len();
        ColumnKernel { root: Node::Table { table, order: rows, own }, n }
    }

    pub fn n(&self) -> usize {
        self.n
    }

    /// out[k] = k(x_i, x_{range.start + k}); `white` counts where the position is i.
    pub fn column(&self, i: usize, range: Range<usize>, out: &mut [f64], par: Parallelism) {
        debug_assert_eq!(out.len(), range.len());
        let mut node = &self.root;
        if let Node::Table { table, order, own } = &self.root {
            // The table's column once (a lazy table computes it on every core), then
            // one gather; a column a lazy table will not hold is the fit's own.
            match (table.column_if_held(order[i], par), own) {
                (Some(column), _) => return column.gather(&order[range], out),
                (None, Some(own)) => node = own,
                (None, None) => unreachable!("a whole table holds every column"),
            }
        }
        if par.is_parallel() && range.len() >= 2 * CHUNK {
            out.par_chunks_mut(CHUNK).enumerate().for_each(|(c, part)| {
                let start = range.start + c * CHUNK;
                node.fill(i, start..start + part.len(), part);
            });
        } else {
            node.fill(i, range, out);
        }
    }

    /// Whole rows at once: `out[r * n + p] = f32(k(x_{at[r]}, x_p))` for every position p.
    /// A plain distance or inner-product kernel computes them as a matrix product (the
    /// points read once per block of rows, not once per row); any other kernel row by
    /// row. Blocks of positions are split across cores when `par` allows.
    pub fn rows(&self, at: &[usize], out: &mut [f32], par: Parallelism) {
        let n = self.n;
        assert_eq!(out.len(), at.len() * n, "a row of n values per point");
        if at.is_empty() || n == 0 {
            return;
        }
        if let Node::Leaf { base: base @ (Base::Inner | Base::SqDist), xt, d, norms, map, .. } = &self.root {
            let (d, q) = (*d, at.len());
            // The rows' points, feature-major (q x d column-major).
            let a: Vec<f64> = (0..d).flat_map(|k| at.iter().map(move |&i| xt[k * n + i])).collect();
            let x = MatRef::from_column_major_slice(xt.as_slice(), n, d);
            let av = MatRef::from_column_major_slice(a.as_slice(), q, d);
            let out = crate::partner::SplitSlice::new(out);
            let block = |start: usize| {
                let len = BLOCK.min(n - start);
                let mut c = vec![0.0; len * q];
                let mut cv = MatMut::from_column_major_slice_mut(c.as_mut_slice(), len, q);
                faer::linalg::matmul::matmul(
                    cv.as_mut(),
                    Accum::Replace,
                    x.subrows(start, len),
                    av.transpose(),
                    1.0,
                    Par::Seq,
                );
                for (r, &i) in at.iter().enumerate() {
                    let col = &mut c[r * len..(r + 1) * len];
                    if let Base::SqDist = base {
                        for (k, o) in col.iter_mut().enumerate() {
                            let p = start + k;
                            let scale = norms[i] + norms[p];
                            let d2 = (scale - 2.0 * *o).max(0.0);
                            // As `fill`: nearby points summed by differences.
                            *o = if p == i {
                                0.0
                            } else if d2 < 1e-4 * scale {
                                (0..d).map(|f| (xt[f * n + i] - xt[f * n + p]).powi(2)).sum()
                            } else {
                                d2
                            };
                        }
                    }
                    crate::linalg::clear_upper_vector_state();
                    map(col);
                    // SAFETY: blocks cover disjoint position ranges of every row.
                    let row = unsafe { out.range(r * n + start..r * n + start + len) };
                    row.iter_mut().zip(col.iter()).for_each(|(o, v)| *o = *v as f32);
                }
            };
            let starts: Vec<usize> = (0..n).step_by(BLOCK).collect();
            if par.is_parallel() && starts.len() > 1 {
                starts.into_par_iter().for_each(block);
            } else {
                starts.into_iter().for_each(block);
            }
            return;
        }
        let row = |(o, &i): (&mut [f32], &usize), buf: &mut Vec<f64>| {
            self.root.fill(i, 0..n, buf);
            o.iter_mut().zip(buf.iter()).for_each(|(o, v)| *o = *v as f32);
        };
        if par.is_parallel() && at.len() > 1 {
            out.par_chunks_mut(n).zip(at).for_each_init(|| vec![0.0; n], |buf, pair| row(pair, buf));
        } else {
            let mut buf = vec![0.0; n];
            out.chunks_mut(n).zip(at).for_each(|pair| row(pair, &mut buf));
        }
    }

    /// k(x_i, x_i).
    pub fn diag(&self, i: usize) -> f64 {
        if let Node::Table { table, order, .. } = &self.root {
            // Not a column's worth: a lazy table would compute all of it.
            return table.diag(&order[i..i + 1])[0];
        }
        let mut v = [0.0];
        self.root.fill(i, i..i + 1, &mut v);
        v[0]
    }

    /// Exchanges the points at positions i and j.
    pub fn swap(&mut self, i: usize, j: usize) {
        self.root.swap(i, j);
    }
}

impl Node {
    fn new(kernel: &Kernel, points: &Points) -> Node {
        if let Kernel::Precomputed = kernel {
            let (rows, table) = points.indexed().expect("a precomputed kernel trains on indexed rows");
            let table = table.expect("a training set holds its kernel values").clone();
            return Node::Table { table, order: rows.to_vec(), own: None };
        }
        if let Some((base, map)) = feature_map(kernel) {
            return Node::new(&base, &map(points));
        }
        if let Some(pairs) = PairKernel::new(kernel, points) {
            return Node::Pairs { kernel: pairs, order: (0..points.n()).collect() };
        }
        if let Some(leaf) = leaf(kernel) {
            let scaled = match &leaf.scales {
                Some(s) => points.scaled(s).into_owned(),
                None => points.clone(),
            };
            let prepared = match leaf.base {
                Base::SqDist => {
                    let mu = scaled.mean();
                    scaled.affine(&mu, &vec![1.0; mu.len()])
                }
                Base::Inner | Base::L1 => scaled,
            };
            let norms = match leaf.base {
                Base::SqDist => (0..prepared.n()).map(|p| dot(prepared.point(p), prepared.point(p))).collect(),
                Base::Inner | Base::L1 => Vec::new(),
            };
            let (d, n) = (prepared.d(), prepared.n());
            let xt = prepared.as_matrix().transpose().as_slice().to_vec();
            return Node::Leaf { base: leaf.base, xt, d, n, norms, map: leaf.map };
        }
        match kernel {
            Kernel::Constant { value } => Node::Constant(value.value),
            Kernel::White { noise } => Node::White(noise.value),
            Kernel::Sum(ks) => Node::Sum(ks.iter().map(|k| Node::new(k, points)).collect()),
            Kernel::Product(ks) => Node::Product(ks.iter().map(|k| Node::new(k, points)).collect()),
            Kernel::Scale { factor, kernel } => Node::Scale(factor.value, Box::new(Node::new(kernel, points))),
            _ => unreachable!("every other kernel type is a leaf"),
        }
    }

    fn fill(&self, i: usize, range: Range<usize>, out: &mut [f64]) {
        match self {
            Node::Leaf { base, xt, d, n, norms, map } => {
                let (d, n) = (*d, *n);
                let xi: Vec<f64> = (0..d).map(|k| xt[k * n + i]).collect();
                match base {
                    Base::Inner => inner_products(xt, n, &xi, range.start, out),
                    Base::SqDist => {
                        inner_products(xt, n, &xi, range.start, out);
                        let ni = norms[i];
                        for (p, (o, np)) in range.clone().zip(out.iter_mut().zip(&norms[range.clone()])) {
                            let scale = ni + np;
                            let d2 = (scale - 2.0 * *o).max(0.0);
                            // As in the Gram builder: nearby points lose accuracy to
                            // cancellation in the product form; sum their differences.
                            *o = if d2 < 1e-4 * scale {
                                (0..d).map(|k| (xi[k] - xt[k * n + p]).powi(2)).sum()
                            } else {
                                d2
                            };
                        }
                        if range.contains(&i) {
                            out[i - range.start] = 0.0;
                        }
                    }
                    Base::L1 => {
                        out.fill(0.0);
                        for (k, &a) in xi.iter().enumerate() {
                            let feature = &xt[k * n + range.start..k * n + range.end];
                            out.iter_mut().zip(feature).for_each(|(o, b)| *o += (a - b).abs());
                        }
                    }
                }
                crate::linalg::clear_upper_vector_state();
                map(out);
            }
            Node::Pairs { kernel, order } => {
                let mut scratch = Vec::new();
                for (o, p) in out.iter_mut().zip(range) {
                    *o = kernel.pair(order[i], order[p], &mut scratch);
                }
            }
            Node::Table { table, order, own } => match (table.column_if_held(order[i], Parallelism::Sequential), own) {
                (Some(column), _) => column.gather(&order[range], out),
                (None, Some(own)) => own.fill(i, range, out),
                (None, None) => unreachable!("a whole table holds every column"),
            },
            Node::Constant(v) => out.fill(*v),
            Node::White(noise) => {
                out.fill(0.0);
                if range.contains(&i) {
                    out[i - range.start] = *noise;
                }
            }
            Node::Sum(parts) => {
                parts[0].fill(i, range.clone(), out);
                let mut tmp = vec![0.0; out.len()];
                for part in &parts[1..] {
                    part.fill(i, range.clone(), &mut tmp);
                    out.iter_mut().zip(&tmp).for_each(|(o, t)| *o += t);
                }
            }
            Node::Product(parts) => {
                parts[0].fill(i, range.clone(), out);
                let mut tmp = vec![0.0; out.len()];
                for part in &parts[1..] {
                    part.fill(i, range.clone(), &mut tmp);
                    out.iter_mut().zip(&tmp).for_each(|(o, t)| *o *= t);
                }
            }
            Node::Scale(factor, inner) => {
                inner.fill(i, range, out);
                out.iter_mut().for_each(|o| *o *= factor);
            }
        }
    }

    fn swap(&mut self, i: usize, j: usize) {
        match self {
            Node::Leaf { xt, d, n, norms, .. } => {
                for k in 0..*d {
                    xt.swap(k * *n + i, k * *n + j);
                }
                if !norms.is_empty() {
                    norms.swap(i, j);
                }
            }
            Node::Pairs { order, .. } => order.swap(i, j),
            Node::Table { order, own, .. } => {
                order.swap(i, j);
                if let Some(own) = own {
                    own.swap(i, j);
                }
            }
            Node::Constant(_) | Node::White(_) => {}
            Node::Sum(parts) | Node::Product(parts) => parts.iter_mut().for_each(|p| p.swap(i, j)),
            Node::Scale(_, inner) => inner.swap(i, j),
        }
    }
}

/// x.z, four lanes at a time (for the squared norms).
fn dot(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = f64x4::ZERO;
    let (ca, cb) = (a.chunks_exact(4), b.chunks_exact(4));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, z) in ca.zip(cb) {
        acc = f64x4::new([x[0], x[1], x[2], x[3]]).mul_add(f64x4::new([z[0], z[1], z[2], z[3]]), acc);
    }
    acc.reduce_add() + ra.iter().zip(rb).map(|(x, z)| x * z).sum::<f64>()
}

/// Points per tile of [`inner_products`]: eight four-lane accumulators stay in registers.
const TILE: usize = 32;

/// out[q] = xi . x_{start + q} for a feature-major point set of n points.
fn inner_products(xt: &[f64], n: usize, xi: &[f64], start: usize, out: &mut [f64]) {
    let tiles = out.len() / TILE;
    for t in 0..tiles {
        let p0 = start + t * TILE;
        let mut acc = [f64x4::ZERO; TILE / 4];
        for (k, &a) in xi.iter().enumerate() {
            let a = f64x4::splat(a);
            let row = &xt[k * n + p0..k * n + p0 + TILE];
            for (v, acc) in acc.iter_mut().enumerate() {
                let b = f64x4::new([row[4 * v], row[4 * v + 1], row[4 * v + 2], row[4 * v + 3]]);
                *acc = a.mul_add(b, *acc);
            }
        }
        for (v, acc) in acc.iter().enumerate() {
            out[t * TILE + 4 * v..t * TILE + 4 * v + 4].copy_from_slice(&acc.to_array());
        }
    }
    for (q, o) in out.iter_mut().enumerate().skip(tiles * TILE) {
        let p = start + q;
        *o = xi.iter().enumerate().fold(0.0, |acc, (k, &a)| a.mul_add(xt[k * n + p], acc));
    }
}

/// A lazy table's values: columns from a [`ColumnKernel`] over all its points, blocks
/// from the kernel's own cross products.
struct LazySource {
    columns: ColumnKernel,
    kernel: Kernel,
    points: Points,
}

impl super::table::Source for LazySource {
    fn n(&self) -> usize {
        self.columns.n()
    }

    fn column(&self, i: usize, out: &mut [f64], par: Parallelism) {
        self.columns.column(i, 0..self.columns.n(), out, par);
    }

    fn diag(&self, i: usize) -> f64 {
        self.columns.diag(i)
    }

    fn block(&self, rows: &[usize], cols: &[usize], par: Parallelism) -> nalgebra::DMatrix<f64> {
        self.kernel.cross(&self.points.select(rows), &self.points.select(cols), par)
    }
}

impl super::GramTable {
    /// `kernel`'s table over `x`, its columns computed when first asked for and at most
    /// `budget` bytes of them held.
    pub fn lazy(kernel: &Kernel, x: &Points, budget: u64) -> super::GramTable {
        let source = LazySource { columns: ColumnKernel::new(kernel, x), kernel: kernel.clone(), points: x.clone() };
        super::GramTable::from_source(Box::new(source), budget)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Whole rows (the matrix-product path and the row-by-row one) equal the columns,
    /// to the f32 they are stored in, across block boundaries and after swaps.
    #[test]
    fn rows_equal_columns() {
        let specs = [
            json!({"type": "rbf", "gamma": 0.3}),
            json!({"type": "rbf", "length_scale": [0.5, 1.0, 2.0]}),
            json!({"type": "linear", "c": 0.5}),
            json!({"type": "polynomial", "degree": 3, "gamma": 0.2, "coef0": 1.0}),
            json!({"type": "laplacian", "length_scale": 2.0}),
            json!({"type": "sum", "kernels": [{"type": "rbf"}, {"type": "white", "noise": 0.1}]}),
        ];
        for n in [7usize, 2 * BLOCK + 37] {
            let pts = Points::from_columns(crate::test_support::seeded_matrix(3, n, n as u64).add_scalar(2.0));
            for spec in &specs {
                let k = Kernel::from_json(spec).unwrap();
                let mut ck = ColumnKernel::new(&k, &pts);
                ck.swap(0, n - 2);
                let at = [0, n / 2, n - 1, n / 2];
                for par in [Parallelism::Sequential, Parallelism::Parallel] {
                    let mut rows = vec![0f32; at.len() * n];
                    ck.rows(&at, &mut rows, par);
                    for (r, &i) in at.iter().enumerate() {
                        let mut col = vec![0.0; n];
                        ck.column(i, 0..n, &mut col, Parallelism::Sequential);
                        for p in 0..n {
                            let (got, want) = (rows[r * n + p] as f64, col[p] as f32 as f64);
                            assert!(
                                (got - want).abs() <= 1e-6 * want.abs().max(1.0),
                                "{spec} n={n} ({i},{p}): {got} vs {want}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// Every kernel family and combinator, against the pointwise definition, at lengths
    /// below and above the parallel split, before and after swaps.
    #[test]
    fn columns_match_pointwise_definition_and_follow_swaps() {
        let specs = [
            json!({"type": "linear", "c": 0.5}),
            json!({"type": "polynomial", "degree": 3, "gamma": 0.2, "coef0": 1.0}),
            json!({"type": "sigmoid", "gamma": 0.05, "coef0": -0.2}),
            json!({"type": "rbf", "gamma": 0.3}),
            json!({"type": "rbf", "length_scale": [0.5, 1.0, 2.0]}),
            json!({"type": "laplacian", "length_scale": 2.0}),
            json!({"type": "matern", "nu": 2.5, "length_scale": 1.4}),
            json!({"type": "rational_quadratic", "length_scale": 1.2, "alpha": 0.7}),
            json!({"type": "periodic", "length_scale": 0.9, "period": 2.5}),
            json!({"type": "inverse_multiquadric", "c": 1.5}),
            json!({"type": "sum", "kernels": [{"type": "rbf"}, {"type": "white", "noise": 0.1}, {"type": "constant"}]}),
            json!({"type": "product", "kernels": [{"type": "constant", "value": 2.0}, {"type": "matern"}]}),
            json!({"type": "scale", "factor": 3.0, "kernel": {"type": "exponential"}}),
        ];
        for n in [7usize, 2 * CHUNK + 37] {
            let pts = Points::from_columns(crate::test_support::seeded_matrix(3, n, n as u64).add_scalar(2.0));
            for spec in &specs {
                let k = Kernel::from_json(spec).unwrap();
                let mut ck = ColumnKernel::new(&k, &pts);
                let mut order: Vec<usize> = (0..n).collect();
                for round in 0..2 {
                    for par in [Parallelism::Sequential, Parallelism::Parallel] {
                        for i in [0, n / 2, n - 1] {
                            let mut out = vec![0.0; n - 1];
                            ck.column(i, 1..n, &mut out, par);
                            for (k_, p) in (1..n).enumerate() {
                                let want = k.eval(pts.point(order[i]), pts.point(order[p]), i == p);
                                assert!(
                                    (out[k_] - want).abs() <= 1e-12 * want.abs().max(1.0),
                                    "{spec} n={n} round {round} ({i},{p}): {} vs {want}",
                                    out[k_]
                                );
                            }
                            let want = k.eval(pts.point(order[i]), pts.point(order[i]), true);
                            assert!((ck.diag(i) - want).abs() <= 1e-12 * want.abs().max(1.0));
                        }
                    }
                    ck.swap(0, n - 2);
                    order.swap(0, n - 2);
                    ck.swap(1, 3);
                    order.swap(1, 3);
                }
            }
        }
    }
}

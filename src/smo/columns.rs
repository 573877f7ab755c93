//! Columns of Q for the solver, in its position order, as f32 (LIBSVM's Qfloat):
//! Q_ts = y_t y_s k(x_point(t), x_point(s)).
//!
//! Two layouts, as LIBSVM has them:
//! - one variable per point (C-SVC, nu-SVC, one-class: `SVC_Q`, `ONE_CLASS_Q`): Q's own
//!   columns cached as prefixes over positions, the kernel's points swapped with the
//!   solver's positions;
//! - two variables per point (epsilon- and nu-SVR: `SVR_Q`): kernel columns cached whole,
//!   by point, in the points' own order (never swapped), and each requested Q column
//!   built from one of them into one of two buffers with the variables' signs.
//!
//! Either way a value is the f32 of the kernel value with the signs applied exactly, so
//! the solver sees LIBSVM's numbers whichever layout serves them.

use super::cache::ColumnCache;
use super::MIN_SPLIT;
use crate::kernel::column::ColumnKernel;
use crate::linalg::Parallelism;
use crate::partner::{Partner, SplitSlice};
use std::ops::Range;

pub(super) enum Columns {
    PerPosition { cache: ColumnCache, kernel: ColumnKernel },
    PerPoint { cache: ColumnCache, kernel: ColumnKernel, point: Vec<usize>, buffers: [Vec<f32>; 2], points: usize },
}

impl Columns {
    /// `variables` variables over the kernel's points: one each, or two each (SVR, the
    /// second half mirroring the first).
    pub(super) fn new(kernel: ColumnKernel, variables: usize, cache_bytes: usize) -> Columns {
        let points = kernel.n();
        if variables == points {
            Columns::PerPosition { cache: ColumnCache::new(points, cache_bytes), kernel }
        } else {
            assert_eq!(variables, 2 * points, "one or two variables per point");
            Columns::PerPoint {
                cache: ColumnCache::new(points, cache_bytes),
                kernel,
                point: (0..variables).map(|t| t % points).collect(),
                buffers: [vec![0.0; variables], vec![0.0; variables]],
                points,
            }
        }
    }

    /// k(x_point(t), x_point(t)) for every variable, in position order.
    pub(super) fn diagonal(&self, variables: usize) -> Vec<f64> {
        match self {
            Columns::PerPosition { kernel, .. } => (0..variables).map(|t| kernel.diag(t)).collect(),
            Columns::PerPoint { kernel, point, .. } => point.iter().map(|&p| kernel.diag(p)).collect(),
        }
    }

    /// Makes Q_i[0..len] available (in `slot`, 0 or 1, where the layout builds columns
    /// into buffers); `y` holds the variables' signs in position order.
    pub(super) fn load(
        &mut self,
        i: usize,
        len: usize,
        slot: usize,
        y: &[f64],
        scratch: &mut Vec<f64>,
        partner: Option<&Partner<'_>>,
    ) {
        match self {
            Columns::PerPosition { cache, kernel } => cache.fill(i, len, |start, out| {
                kernel_values(kernel, i, start..len, out, scratch, partner, |p| y[i] * y[p]);
            }),
            Columns::PerPoint { cache, kernel, point, buffers, points } => {
                let (real, n) = (point[i], *points);
                cache.fill(real, n, |start, out| {
                    kernel_values(kernel, real, start..n, out, scratch, partner, |_| 1.0);
                });
                let data = cache.get(real, n);
                let yi = y[i] as f32;
                for ((b, &p), &yp) in buffers[slot][..len].iter_mut().zip(&point[..len]).zip(&y[..len]) {
                    *b = yi * yp as f32 * data[p];
                }
            }
        }
    }

    /// Q_i[0..len], after `load` with the same slot.
    pub(super) fn get(&self, i: usize, len: usize, slot: usize) -> &[f32] {
        match self {
            Columns::PerPosition { cache, .. } => cache.get(i, len),
            Columns::PerPoint { buffers, .. } => &buffers[slot][..len],
        }
    }

    /// Q_i and Q_j over 0..len, loaded in slots 0 and 1.
    pub(super) fn pair(&self, i: usize, j: usize, len: usize) -> (&[f32], &[f32]) {
        match self {
            Columns::PerPosition { cache, .. } => cache.pair(i, j, len),
            Columns::PerPoint { buffers, .. } => (&buffers[0][..len], &buffers[1][..len]),
        }
    }

    /// Follows the solver's swap of positions i and j.
    pub(super) fn swap(&mut self, i: usize, j: usize) {
        match self {
            Columns::PerPosition { cache, kernel } => {
                kernel.swap(i, j);
                cache.swap(i, j);
            }
            // Kernel columns stay in the points' order; only the map moves.
            Columns::PerPoint { point, .. } => point.swap(i, j),
        }
    }
}

/// out[k] = f32(sign(p) k(x_i, x_p)) for p in `r` (p = r.start + k), split with the
/// partner for long ranges.
fn kernel_values(
    kernel: &ColumnKernel,
    i: usize,
    r: Range<usize>,
    out: &mut [f32],
    scratch: &mut Vec<f64>,
    partner: Option<&Partner<'_>>,
    sign: impl Fn(usize) -> f64 + Sync,
) {
    let start = r.start;
    scratch.resize(out.len(), 0.0);
    let fill = |r: Range<usize>, k: &mut [f64], o: &mut [f32]| {
        kernel.column(i, r.clone(), k, Parallelism::Sequential);
        for ((o, k), p) in o.iter_mut().zip(k.iter()).zip(r) {
            *o = (sign(p) * k) as f32;
        }
    };
    match partner {
        Some(p) if out.len() >= MIN_SPLIT => {
            let (k, o) = (SplitSlice::new(scratch), SplitSlice::new(out));
            p.split(r, &|_, r| {
                let local = r.start - start..r.end - start;
                // SAFETY: `split` hands the two threads disjoint ranges.
                unsafe { fill(r, k.range(local.clone()), o.range(local)) }
            });
        }
        _ => fill(r, scratch, out),
    }
}

//! Inner products x_i . z_j whose bits depend on the pair alone: each is summed over
//! the features in order (a multiply, then an add, each rounded), whatever the number
//! of query points computed with it and however they are split between threads. A
//! served model then answers a row the same bits alone, stacked with other requests'
//! rows by the batcher, or on another replica (a GEMM's blocking would change the
//! order of its sums with the shape).
//!
//! The kept points are packed once into panels of [`PANEL`] rows, feature-major (kept
//! with them, see `PrepKey::Panels`); a microkernel holds an 8 x 4 block of sums in
//! registers, SIMD across kept points. The last panel is padded with zeros, so every
//! kept point goes through the same lanes' arithmetic.

use super::points::PrepKey;
use super::Points;
use std::sync::Arc;
use wide::f64x4;

/// Kept points per panel (two 4-lane vectors).
const PANEL: usize = 8;
/// Query points per microkernel call.
const COLS: usize = 4;

/// x's points in panels: panel p holds rows 8p..8p+8 as [k * 8 + r].
fn panels(x: &Points) -> Arc<Vec<f64>> {
    x.prepared(PrepKey::Panels, || {
        let (n, d) = (x.n(), x.d());
        let count = n.div_ceil(PANEL);
        let mut out = vec![0.0; count * PANEL * d];
        for i in 0..n {
            let (p, r) = (i / PANEL, i % PANEL);
            for (k, &v) in x.point(i).iter().enumerate() {
                out[p * PANEL * d + k * PANEL + r] = v;
            }
        }
        let bytes = out.len() * 8;
        (out, bytes)
    })
}

/// `out` (n x cols, column-major) = alpha * x_i . z_j for the kept points x and query
/// points j0..j0+cols of z.
pub(super) fn inner_block(x: &Points, z: &Points, j0: usize, cols: usize, alpha: f64, out: &mut [f64]) {
    let (n, d) = (x.n(), x.d());
    debug_assert_eq!(out.len(), n * cols);
    let packed = panels(x);
    let alpha = f64x4::splat(alpha);
    for p in 0..n.div_ceil(PANEL) {
        let panel = &packed[p * PANEL * d..(p + 1) * PANEL * d];
        let rows = PANEL.min(n - p * PANEL);
        let mut c = 0;
        while c < cols {
            let width = COLS.min(cols - c);
            // Constant widths: the block of sums stays in registers.
            match width {
                4 => panel_block::<4>(panel, z, j0 + c, d, alpha, &mut out[c * n..], n, p, rows),
                3 => panel_block::<3>(panel, z, j0 + c, d, alpha, &mut out[c * n..], n, p, rows),
                2 => panel_block::<2>(panel, z, j0 + c, d, alpha, &mut out[c * n..], n, p, rows),
                _ => panel_block::<1>(panel, z, j0 + c, d, alpha, &mut out[c * n..], n, p, rows),
            }
            c += width;
        }
    }
}

/// Panel `p` against query points j..j+W, written (times alpha) to `out`'s first W
/// columns of n.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn panel_block<const W: usize>(
    panel: &[f64],
    z: &Points,
    j: usize,
    d: usize,
    alpha: f64x4,
    out: &mut [f64],
    n: usize,
    p: usize,
    rows: usize,
) {
    let mut zs: [&[f64]; W] = [&[]; W];
    for (w, slot) in zs.iter_mut().enumerate() {
        *slot = z.point(j + w);
    }
    let mut acc = [[f64x4::ZERO; 2]; W];
    for k in 0..d {
        let x: &[f64; PANEL] = panel[k * PANEL..(k + 1) * PANEL].try_into().expect("a panel of 8");
        let lo = f64x4::new([x[0], x[1], x[2], x[3]]);
        let hi = f64x4::new([x[4], x[5], x[6], x[7]]);
        for w in 0..W {
            let zk = f64x4::splat(zs[w][k]);
            acc[w][0] += lo * zk;
            acc[w][1] += hi * zk;
        }
    }
    for (w, [lo, hi]) in acc.iter().enumerate() {
        let (lo, hi) = ((*lo * alpha).to_array(), (*hi * alpha).to_array());
        let col = &mut out[w * n + p * PANEL..];
        for r in 0..rows {
            col[r] = if r < 4 { lo[r] } else { hi[r - 4] };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::DMatrix;

    fn pts(d: usize, n: usize, seed: f64) -> Points {
        Points::from_columns(DMatrix::from_fn(d, n, |k, i| ((i * 7 + k * 3) as f64 * seed).sin()))
    }

    #[test]
    fn each_product_is_the_ordered_sum_whatever_the_block() {
        for (d, n, m) in [(1, 1, 1), (3, 13, 9), (20, 17, 6), (7, 8, 4)] {
            let (x, z) = (pts(d, n, 0.37), pts(d, m, 0.91));
            let mut all = vec![0.0; n * m];
            inner_block(&x, &z, 0, m, -2.0, &mut all);
            for j in 0..m {
                let mut one = vec![0.0; n];
                inner_block(&x, &z, j, 1, -2.0, &mut one);
                for i in 0..n {
                    let mut s = 0.0;
                    for k in 0..d {
                        s += x.point(i)[k] * z.point(j)[k];
                    }
                    assert_eq!(all[j * n + i].to_bits(), (-2.0 * s).to_bits(), "{d} {n} {m}");
                    assert_eq!(one[i].to_bits(), all[j * n + i].to_bits());
                }
            }
        }
    }
}

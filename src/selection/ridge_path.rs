//! The regularisation path of kernel ridge and fixed-kernel GPs: candidates that differ
//! only in the value s added to the diagonal (`lambda`, `noise`) share one symmetric
//! eigendecomposition K = Q diag(e) Q' per fold, after which each s costs O(n^2):
//!
//! - alpha = Q (Q'y / (e + s)), and the held-out means K_vt alpha = (K_vt Q)(Q'y / (e + s));
//! - the GP variance k_vv - sum_i (K_vt Q)_vi^2 / (e_i + s);
//! - the log marginal likelihood -1/2 sum_i (Q'y)_i^2 / (e_i + s) - 1/2 sum_i ln(e_i + s)
//!   - n/2 ln 2 pi, in O(n);
//! - leave-one-out over all rows: diag(A^-1) = (Q o Q)(1 / (e + s)) and the residuals
//!   alpha_i / [A^-1]_ii (R&W 5.4.2), with no refit.
//!
//! Sweeps that predict means only (no variance) keep K = Q T Q' factored instead
//! (`Reduced`): Q'y once, (T + s I)^-1 Q'y and ln det(T + s I) in O(n) per s, Q applied
//! to every s's solution at once; no eigenvectors are formed.
//!
//! Where K + s I is too ill-conditioned for the decomposition to match a Cholesky fit
//! (or would need the contract's jitter), that s takes the direct path instead.

use super::evaluate::{self, FoldError, Ridge};
use super::scoring::{Held, Needs};
use crate::estimator::FitContext;
use crate::kernel::GramTable;
use crate::linalg::{mul_ab, SymmetricEigen, Tridiagonal};
use nalgebra::{DMatrix, DVector};

/// Above this condition number of K + s I the decomposition's answer and a Cholesky
/// fit's may differ by more than the search's 1e-8; such values are fitted directly.
const MAX_CONDITION: f64 = 1e10;

/// A fold's decomposition, ready for any s.
pub struct Path {
    eig: SymmetricEigen,
    /// Q' y (normalised targets).
    qty: Vec<f64>,
    ymean: f64,
    ystd: f64,
}

impl Path {
    /// The decomposition of K over `train` (None if the eigensolver does not converge).
    pub fn new(r: &Ridge, table: &GramTable, y: &[f64], train: &[usize], ctx: &FitContext) -> Option<Path> {
        let k = table.block(train, train, ctx.par);
        let eig = SymmetricEigen::new(&k, ctx.par)?;
        let (yt, ymean, ystd) = r.targets(&train.iter().map(|&i| y[i]).collect::<Vec<_>>());
        let qty = eig.project(&DMatrix::from_column_slice(yt.len(), 1, &yt), ctx.par).as_slice().to_vec();
        Some(Path { eig, qty, ymean, ystd })
    }

    /// Whether K + s I is well enough conditioned for this path (else fit directly).
    pub fn suits(&self, s: f64) -> bool {
        let (lo, hi) = (self.eig.values[0] + s, self.eig.values[self.eig.values.len() - 1] + s);
        lo > 0.0 && hi / lo <= MAX_CONDITION
    }

    /// Q' y / (e + s): the coefficients of alpha in the eigenbasis.
    fn coefficients(&self, s: f64) -> Vec<f64> {
        self.qty.iter().zip(&self.eig.values).map(|(b, e)| b / (e + s)).collect()
    }

    /// The log marginal likelihood of the (normalised) targets at diagonal s.
    pub fn log_marginal_likelihood(&self, s: f64) -> f64 {
        let n = self.qty.len() as f64;
        let fit: f64 = self.qty.iter().zip(&self.eig.values).map(|(b, e)| b * b / (e + s)).sum();
        let log_det: f64 = self.eig.values.iter().map(|e| (e + s).ln()).sum();
        -0.5 * fit - 0.5 * log_det - 0.5 * n * (2.0 * std::f64::consts::PI).ln()
    }

    /// alpha = Q (Q'y / (e + s)), in the training rows' order.
    pub fn alpha(&self, s: f64) -> Vec<f64> {
        let c = DVector::from_vec(self.coefficients(s));
        (&self.eig.vectors * c).as_slice().to_vec()
    }
}

/// The held-out side of one fold: K_vt Q and the prior variances.
pub struct HeldOut {
    kq: DMatrix<f64>,
    prior: Vec<f64>,
    y: Vec<f64>,
}

impl HeldOut {
    pub fn new(
        path: &Path,
        table: &GramTable,
        y: &[f64],
        train: &[usize],
        test: &[usize],
        ctx: &FitContext,
    ) -> HeldOut {
        let kvt = table.block(test, train, ctx.par);
        HeldOut {
            kq: mul_ab(&kvt, &path.eig.vectors, ctx.par),
            prior: table.diag(test),
            y: test.iter().map(|&i| y[i]).collect(),
        }
    }

    /// The fold's held-out predictions at diagonal s.
    pub fn predict(&self, r: &Ridge, path: &Path, s: f64, needs: Needs) -> Result<Held, FoldError> {
        r.check_likelihood(path.log_marginal_likelihood(s))?;
        let c = DVector::from_vec(path.coefficients(s));
        let mean = (&self.kq * c).iter().map(|f| f * path.ystd + path.ymean).collect();
        let var = needs.variance.then(|| {
            let scale = path.ystd * path.ystd;
            (0..self.kq.nrows())
                .map(|v| {
                    let explained: f64 =
                        self.kq.row(v).iter().zip(&path.eig.values).map(|(p, e)| p * p / (e + s)).sum();
                    (self.prior[v] - explained).max(0.0) * scale + s * scale
                })
                .collect()
        });
        Ok(Held::Regression { y: self.y.clone(), mean, var, outputs: 1 })
    }
}

/// Every candidate of one sweep (`values`: their diagonals) on one fold: one
/// decomposition, then O(n^2) per value; values the path does not suit are fitted
/// directly from the table.
#[allow(clippy::too_many_arguments)]
pub fn sweep_fold(
    r: &Ridge,
    values: &[f64],
    table: &GramTable,
    y: &[f64],
    train: &[usize],
    test: &[usize],
    needs: Needs,
    ctx: &FitContext,
) -> Result<Vec<Result<Held, FoldError>>, FoldError> {
    ctx.cancel.check()?;
    let direct = |s: f64| {
        let direct = Ridge { diagonal: s, ..r.clone() };
        match evaluate::ridge(&direct, table, y, train, test, needs, ctx) {
            Err(FoldError::Cancelled) => Err(FoldError::Cancelled),
            other => Ok(other),
        }
    };
    if !needs.variance {
        let reduced = Reduced::new(r, table, y, train, ctx);
        ctx.cancel.check()?;
        let means = reduced.as_ref().map(|p| p.means(r, values, table, train, test, ctx));
        let y_test: Vec<f64> = test.iter().map(|&i| y[i]).collect();
        return values
            .iter()
            .enumerate()
            .map(|(v, &s)| match means.as_ref().and_then(|m| m[v].as_ref()) {
                Some(Ok(mean)) => {
                    Ok(Ok(Held::Regression { y: y_test.clone(), mean: mean.clone(), var: None, outputs: 1 }))
                }
                Some(Err(e)) => Ok(Err(e.clone())),
                None => direct(s),
            })
            .collect();
    }
    let path = Path::new(r, table, y, train, ctx);
    ctx.cancel.check()?;
    let held = path.as_ref().map(|p| HeldOut::new(p, table, y, train, test, ctx));
    values
        .iter()
        .map(|&s| match (&path, &held) {
            (Some(p), Some(h)) if p.suits(s) => Ok(h.predict(r, p, s, needs)),
            _ => direct(s),
        })
        .collect()
}

/// A fold's tridiagonal reduction K = Q T Q', for sweeps that need held-out means only.
struct Reduced {
    tri: Tridiagonal,
    /// Q' y (normalised targets).
    qty: Vec<f64>,
    ymean: f64,
    ystd: f64,
}

impl Reduced {
    fn new(r: &Ridge, table: &GramTable, y: &[f64], train: &[usize], ctx: &FitContext) -> Option<Reduced> {
        let k = table.block(train, train, ctx.par);
        let tri = Tridiagonal::new(&k, ctx.par)?;
        let (yt, ymean, ystd) = r.targets(&train.iter().map(|&i| y[i]).collect::<Vec<_>>());
        let mut b = DMatrix::from_column_slice(yt.len(), 1, &yt);
        tri.q_transpose(&mut b, ctx.par);
        Some(Reduced { tri, qty: b.as_slice().to_vec(), ymean, ystd })
    }

    /// Each value's held-out means (or the direct fit's refusal); None where K + s I is
    /// too ill-conditioned for this path (fit directly). The solutions of every value
    /// are taken back from T's basis together, and predicted by one product.
    #[allow(clippy::type_complexity)]
    fn means(
        &self,
        r: &Ridge,
        values: &[f64],
        table: &GramTable,
        train: &[usize],
        test: &[usize],
        ctx: &FitContext,
    ) -> Vec<Option<Result<Vec<f64>, FoldError>>> {
        let n = self.qty.len();
        let e = &self.tri.values;
        let half_log_2pi = 0.5 * n as f64 * (2.0 * std::f64::consts::PI).ln();
        // Per value: its column of solutions, or why it has none.
        let mut columns: Vec<Vec<f64>> = Vec::new();
        let mut out: Vec<Option<Result<usize, FoldError>>> = Vec::with_capacity(values.len());
        for &s in values {
            let (lo, hi) = (e[0] + s, e[n - 1] + s);
            let solved = (lo > 0.0 && hi / lo <= MAX_CONDITION).then(|| self.tri.shifted_solve(s, &self.qty)).flatten();
            out.push(solved.map(|(z, log_det)| {
                let fit: f64 = z.iter().zip(&self.qty).map(|(a, b)| a * b).sum();
                r.check_likelihood(-0.5 * fit - 0.5 * log_det - half_log_2pi)?;
                columns.push(z);
                Ok(columns.len() - 1)
            }));
        }
        let mut alpha = DMatrix::from_fn(n, columns.len(), |i, j| columns[j][i]);
        self.tri.q(&mut alpha, ctx.par);
        let kvt = table.block(test, train, ctx.par);
        let means = mul_ab(&kvt, &alpha, ctx.par);
        out.into_iter()
            .map(|o| o.map(|r| r.map(|j| means.column(j).iter().map(|f| f * self.ystd + self.ymean).collect())))
            .collect()
    }
}

/// Leave-one-out over all rows for every value of a sweep, from one decomposition of K.
pub fn sweep_loo(
    r: &Ridge,
    values: &[f64],
    table: &GramTable,
    y: &[f64],
    needs: Needs,
    ctx: &FitContext,
) -> Result<Vec<Result<Held, FoldError>>, FoldError> {
    ctx.cancel.check()?;
    let all: Vec<usize> = (0..y.len()).collect();
    let path = Path::new(r, table, y, &all, ctx);
    ctx.cancel.check()?;
    // Q o Q, for diag(A^-1) = (Q o Q) (1 / (e + s)).
    let squares = path.as_ref().map(|p| p.eig.vectors.map(|q| q * q));
    let (yt, _, _) = r.targets(y);
    values
        .iter()
        .map(|&s| match (&path, &squares) {
            (Some(p), Some(sq)) if p.suits(s) => {
                if let Err(e) = r.check_likelihood(p.log_marginal_likelihood(s)) {
                    return Ok(Err(e));
                }
                let inverse = DVector::from_iterator(p.eig.values.len(), p.eig.values.iter().map(|e| 1.0 / (e + s)));
                let inv_diag = sq * inverse;
                let alpha = p.alpha(s);
                Ok(Ok(evaluate::loo_held(y, &yt, &alpha, inv_diag.as_slice(), p.ymean, p.ystd, needs)))
            }
            _ => {
                let direct = Ridge { diagonal: s, ..r.clone() };
                match evaluate::ridge_loo(&direct, table, y, needs, ctx) {
                    Err(FoldError::Cancelled) => Err(FoldError::Cancelled),
                    other => Ok(other),
                }
            }
        })
        .collect()
}

/// Whether one decomposition is cheaper than a factorisation per value. Measured here
/// (benches/search.rs): a symmetric eigendecomposition costs about 15 Cholesky
/// factorisations of the same size at n = 1600 and 30-37 at n = 3200, because its
/// tridiagonal reduction reads the trailing matrix once per column and is bound by memory
/// bandwidth; the ratio grows with n. The reduction alone (a fold sweep that needs no
/// variance) costs about 8.4 at n = 1600 and 21 at n = 3200 (RATIO_REDUCED of the full
/// decomposition's). Leave-one-out by factor also needs diag(A^-1), a
/// second n^3/3.
pub fn pays_off(values: usize, n: usize, loo: bool, means_only: bool) -> bool {
    let full = 14.0 + 21.0 * (n.saturating_sub(1600) as f64 / 1600.0);
    let ratio = if means_only && !loo { RATIO_REDUCED * full } else { full };
    let per_value = if loo { 2.0 } else { 1.0 };
    values >= 2 && values as f64 * per_value >= ratio
}

/// The tridiagonal reduction's cost against a full decomposition's, in factorisations
/// (benches/search.rs, 2026-11-27: 30 values x 5 folds at n = 1600 in 1.57 s against
/// 5.64 s by Cholesky, at n = 3200 in 21.95 s against 31.52 s).
const RATIO_REDUCED: f64 = 0.6;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimator::{Estimator, GaussianProcess, TrainingSet};
    use crate::kernel::{Kernel, Points};
    use crate::linalg::Parallelism;
    use serde_json::json;

    fn setup(n: usize) -> (TrainingSet, Kernel) {
        let x = Points::from_columns(crate::test_support::seeded_matrix(3, n, 21));
        let y = (0..n).map(|i| 10.0 + 3.0 * (x.point(i)[0] * 3.0).sin() + x.point(i)[2]).collect();
        (TrainingSet::new(x, y), Kernel::from_json(&json!({"type": "rbf", "length_scale": 0.8})).unwrap())
    }

    fn rel(a: &[f64], b: &[f64]) -> f64 {
        let scale = b.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        a.iter().zip(b).fold(0.0f64, |m, (x, y)| m.max((x - y).abs())) / scale
    }

    /// Without a variance to predict, the sweep keeps K factored as Q T Q': its means
    /// equal direct fits for every value, ill-conditioned ones included (fitted directly).
    #[test]
    fn means_only_sweeps_equal_direct_fits_without_eigenvectors() {
        let (set, kernel) = setup(70);
        let table = GramTable::new(&kernel, &set.x, Parallelism::Sequential);
        let train: Vec<usize> = (0..70).filter(|i| i % 5 != 2).collect();
        let test: Vec<usize> = (0..70).filter(|i| i % 5 == 2).collect();
        // 1e-14: K + s I too ill-conditioned for the path (the direct fit, with its jitter).
        let values = [1e-14, 1e-3, 1e-2, 0.1, 1.0, 10.0];
        let ctx = FitContext::sequential();
        for (normalize_y, gaussian_process) in [(false, false), (true, true)] {
            let r = Ridge { kernel: kernel.clone(), diagonal: 0.0, normalize_y, gaussian_process };
            let needs = Needs::default();
            let swept = sweep_fold(&r, &values, &table, &set.y, &train, &test, needs, &ctx).unwrap();
            for (s, held) in values.iter().zip(swept) {
                let direct =
                    evaluate::ridge(&Ridge { diagonal: *s, ..r.clone() }, &table, &set.y, &train, &test, needs, &ctx)
                        .unwrap();
                let (Held::Regression { mean: a, var: None, .. }, Held::Regression { mean: b, .. }) =
                    (held.unwrap(), direct)
                else {
                    panic!("means only")
                };
                assert!(rel(&a, &b) < 1e-8, "s = {s}: mean {}", rel(&a, &b));
            }
        }
        // The reduced path's likelihood check refuses what the direct fit refuses.
        let huge: Vec<f64> = set.y.iter().map(|v| v * 1e200).collect();
        let r = Ridge { kernel: kernel.clone(), diagonal: 0.0, normalize_y: false, gaussian_process: true };
        let swept = sweep_fold(&r, &[0.1], &table, &huge, &train, &test, Needs::default(), &ctx).unwrap();
        let direct = evaluate::ridge(
            &Ridge { diagonal: 0.1, ..r.clone() },
            &table,
            &huge,
            &train,
            &test,
            Needs::default(),
            &ctx,
        );
        assert!(matches!(&swept[0], Err(FoldError::Failed(_))), "{:?}", swept[0]);
        assert_eq!(swept[0].as_ref().err(), direct.as_ref().err());
    }

    /// Every value on the path equals a fold fit by Cholesky from the table (means and GP
    /// variances to 1e-8 relative), and the likelihood equals the direct GP fit's.
    #[test]
    fn the_path_equals_direct_fits_for_every_value() {
        let (set, kernel) = setup(70);
        let table = GramTable::new(&kernel, &set.x, Parallelism::Sequential);
        let r = Ridge { kernel: kernel.clone(), diagonal: 0.0, normalize_y: true, gaussian_process: true };
        let train: Vec<usize> = (14..70).collect();
        let test: Vec<usize> = (0..14).collect();
        let values = [1e-3, 1e-2, 0.1, 1.0, 10.0];
        let needs = Needs { variance: true, ..Needs::default() };
        let ctx = FitContext::sequential();
        let swept = sweep_fold(&r, &values, &table, &set.y, &train, &test, needs, &ctx).unwrap();
        for (s, held) in values.iter().zip(swept) {
            let direct =
                evaluate::ridge(&Ridge { diagonal: *s, ..r.clone() }, &table, &set.y, &train, &test, needs, &ctx)
                    .unwrap();
            let (Held::Regression { mean: a, var: va, .. }, Held::Regression { mean: b, var: vb, .. }) =
                (held.unwrap(), direct)
            else {
                unreachable!()
            };
            assert!(rel(&a, &b) < 1e-8, "s = {s}: mean {}", rel(&a, &b));
            assert!(rel(va.as_ref().unwrap(), vb.as_ref().unwrap()) < 1e-8, "s = {s}: variance");
        }
        let path = Path::new(&r, &table, &set.y, &train, &ctx).unwrap();
        let fold = TrainingSet::new(set.x.select(&train), train.iter().map(|&i| set.y[i]).collect());
        for s in values {
            let gp = GaussianProcess::from_json(kernel.clone(), &json!({"noise": s, "normalize_y": true}), "/params")
                .unwrap()
                .fit(&fold, &ctx)
                .unwrap();
            let (a, b) = (path.log_marginal_likelihood(s), gp.log_marginal_likelihood());
            assert!((a - b).abs() < 1e-8 * b.abs(), "s = {s}: {a} vs {b}");
        }
    }

    /// Leave-one-out on the path equals the closed form by Cholesky for every value.
    #[test]
    fn loo_on_the_path_equals_the_factor_closed_form() {
        let (set, kernel) = setup(50);
        let table = GramTable::new(&kernel, &set.x, Parallelism::Sequential);
        let r = Ridge { kernel, diagonal: 0.0, normalize_y: false, gaussian_process: false };
        let values = [0.01, 0.3, 3.0];
        let needs = Needs::default();
        let ctx = FitContext::sequential();
        for (s, held) in values.iter().zip(sweep_loo(&r, &values, &table, &set.y, needs, &ctx).unwrap()) {
            let direct =
                evaluate::ridge_loo(&Ridge { diagonal: *s, ..r.clone() }, &table, &set.y, needs, &ctx).unwrap();
            let (Held::Regression { mean: a, .. }, Held::Regression { mean: b, .. }) = (held.unwrap(), direct) else {
                unreachable!()
            };
            assert!(rel(&a, &b) < 1e-8, "s = {s}");
        }
    }

    /// A value too small for the path is fitted directly (here it needs jitter).
    #[test]
    fn ill_conditioned_values_take_the_direct_path() {
        let (set, _) = setup(40);
        let kernel = Kernel::from_json(&json!({"type": "rbf", "length_scale": 5.0})).unwrap();
        let table = GramTable::new(&kernel, &set.x, Parallelism::Sequential);
        let r = Ridge { kernel, diagonal: 0.0, normalize_y: false, gaussian_process: false };
        let all: Vec<usize> = (0..40).collect();
        let path = Path::new(&r, &table, &set.y, &all, &FitContext::sequential()).unwrap();
        assert!(!path.suits(0.0) && path.suits(1.0));
    }
}

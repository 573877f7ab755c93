//! Online updates: rows appended to a fitted exact Gaussian process or kernel ridge model
//! with its hyperparameters unchanged, equal to a refit on all the rows.
//!
//! The Cholesky factor of K + s I grows by a block ([`Cholesky::extend`]): O(n^2 k + k^3)
//! for k rows instead of O((n + k)^3 / 3). A refit chooses its jitter afresh, so the
//! block update is used only when the refit would choose the jitter the factor already
//! has; otherwise (the grown matrix needs more jitter, or a mean diagonal moved the
//! jitter's scale) the grown matrix is factorised anew, exactly as the refit would.

use super::{FitError, Outputs, RestoreError, StoredAppend, StoredFit, TrainingSet};
use crate::kernel::{Kernel, Points};
use crate::linalg::{Cholesky, LinalgError, Parallelism};
use nalgebra::DMatrix;

/// Why rows could not be appended.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    /// This model cannot take rows (another kind, an approximation, or a model stored
    /// before online updates kept its targets).
    #[error("{0}")]
    Unsupported(String),
    /// The grown problem cannot be solved (not positive definite even with jitter).
    #[error(transparent)]
    Fit(#[from] FitError),
}

impl AppendError {
    pub(super) fn without_targets() -> AppendError {
        AppendError::Unsupported(
            "this model was stored by a version of mercer that did not keep its training targets; refit it to append rows"
                .into(),
        )
    }
}

/// New rows must have the model's outputs (2-D y of its t columns, or 1-D y).
pub(super) fn check_outputs(model: Outputs, new: &TrainingSet) -> Result<(), AppendError> {
    if new.outputs == model {
        return Ok(());
    }
    let want = match model {
        super::Outputs::Single => "one number per row".to_string(),
        super::Outputs::Multi(t) => format!("one list of {t} numbers per row"),
    };
    Err(AppendError::Unsupported(format!("`y` must take the model's shape: {want}")))
}

/// The factor of K(old ++ new) + D, D diagonal with `diag(i)` for row i of `all`, given
/// `chol`, the factor over `old` (None: there is none, factorise anew). `all` is old ++
/// new. True with it when it is `chol` grown by a block (its first rows are `chol`'s),
/// false when it was factorised anew.
#[allow(clippy::too_many_arguments)]
pub(super) fn grown_factor(
    kernel: &Kernel,
    diag: &dyn Fn(usize) -> f64,
    scale: Option<&[f64]>,
    chol: Option<&Cholesky>,
    old: &Points,
    new: &Points,
    all: &Points,
    par: Parallelism,
) -> Result<(Cholesky, bool), FitError> {
    // With `scale` (square roots of sample weights) the matrix is S K S + D.
    let n = all.n();
    let s = |i: usize| scale.map_or(1.0, |s| s[i]);
    let full = || {
        let mut k = kernel.gram_lower(all, par);
        if scale.is_some() {
            for j in 0..n {
                for i in j..n {
                    k[(i, j)] *= s(i) * s(j);
                }
            }
        }
        for i in 0..n {
            k[(i, i)] += diag(i);
        }
        k
    };
    if let Some(chol) = chol {
        let kdiag = kernel.diag(all);
        let mean_diag =
            ((0..n).map(|i| kdiag[i] * s(i) * s(i)).sum::<f64>() + (0..n).map(diag).sum::<f64>()) / n as f64;
        if chol.jitter_rule_holds(mean_diag) {
            let mut cross = kernel.cross(old, new, par);
            let mut corner = kernel.gram(new, par);
            if scale.is_some() {
                let o = old.n();
                for j in 0..new.n() {
                    for i in 0..o {
                        cross[(i, j)] *= s(i) * s(o + j);
                    }
                    for i in 0..new.n() {
                        corner[(i, j)] *= s(o + i) * s(o + j);
                    }
                }
            }
            for i in 0..new.n() {
                corner[(i, i)] += diag(old.n() + i);
            }
            match chol.extend(cross, corner, par) {
                Ok(grown) => return Ok((grown, true)),
                // The refit would need (more) jitter: it factorises the whole matrix anew.
                Err(LinalgError::NotPositiveDefinite { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok((Cholesky::factor_with_jitter(full, par)?, false))
}

/// A model's state after appends: the grown factor and training set, and z = L^-1 b
/// for the model's right-hand side b when it is kept.
pub(super) struct Grown {
    pub chol: Cholesky,
    pub data: TrainingSet,
    pub z: Option<DMatrix<f64>>,
}

/// What one append step gives [`grow_all`]: the grown factor, whether it grew by a block,
/// and the model's right-hand side over all rows when z is kept (None: not kept).
pub(super) type Step = (Cholesky, bool, Option<DMatrix<f64>>);

/// The state after appending `batches` in turn to (`x`, `y`), factor `chol` and kept z
/// (`z`): `grow(new, extra, old, grown, factor)` checks a batch's extra (its noise or
/// weights) and returns the [`Step`] over `grown` from `factor` over `old`. None for no
/// batch. The models' `append_all` share this loop; each step is one append, so that
/// batches appended at once equal appends one by one, bit for bit.
///
/// z grows as the factor does: when the factor grew by a block, only the new rows of z
/// are solved (O(n k)) and the coefficients then take one triangular pass, not two;
/// otherwise z is solved anew, as a fit does.
pub(super) fn grow_all<E: Copy>(
    (x, y, outputs): (&Points, &[f64], super::Outputs),
    (chol, z): (Option<&Cholesky>, Option<&DMatrix<f64>>),
    batches: &[(&TrainingSet, E)],
    par: Parallelism,
    mut grow: impl FnMut(&TrainingSet, E, &Points, &TrainingSet, Option<&Cholesky>) -> Result<Step, AppendError>,
) -> Result<Option<Grown>, AppendError> {
    let mut data = TrainingSet { x: x.clone(), y: y.to_vec(), outputs };
    let mut grown: Option<Cholesky> = None;
    let mut z = z.cloned();
    for (new, extra) in batches {
        check_outputs(outputs, new)?;
        let next = grown_set(&data.x, &data.y, new);
        let (factor, extended, rhs) = grow(new, *extra, &data.x, &next, grown.as_ref().or(chol))?;
        z = rhs.map(|mut b| {
            match z.take() {
                Some(before) if extended && before.nrows() == data.x.n() => {
                    b.rows_mut(0, before.nrows()).copy_from(&before);
                    factor.forward_rows_from(before.nrows(), &mut b);
                }
                _ => factor.forward_columns_in_place(&mut b, par),
            }
            b
        });
        (grown, data) = (Some(factor), next);
    }
    Ok(grown.map(|chol| Grown { chol, data, z }))
}

/// The training set with `new` appended to `x`, `y` (n x t column-major, t being
/// `new`'s outputs).
pub(super) fn grown_set(x: &Points, y: &[f64], new: &TrainingSet) -> TrainingSet {
    TrainingSet {
        x: Points::concat(&[x, &new.x]),
        y: crate::estimator::targets::outputs::stack_targets(y, new),
        outputs: new.outputs,
    }
}

/// An append's rows, targets, noise variances and sample weights.
pub type AppendRows = (TrainingSet, Option<Vec<f64>>, Option<Vec<f64>>);

/// One batch of appended rows with the extra its kind takes.
pub(crate) type Batch<'a> = (&'a TrainingSet, Option<&'a [f64]>);

/// What a kind's appended rows carry besides their targets: a noise variance per row (a
/// Gaussian process) or a sample weight per row (kernel ridge). The other is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Extra {
    Noise,
    Weights,
}

impl Extra {
    /// The extra this kind takes of an append's, refusing the other.
    pub(crate) fn pick<'a>(
        self,
        noise: Option<&'a [f64]>,
        weights: Option<&'a [f64]>,
    ) -> Result<Option<&'a [f64]>, AppendError> {
        let (taken, other, name) = match self {
            Extra::Noise => (noise, weights, "sample weights"),
            Extra::Weights => (weights, noise, "noise"),
        };
        match other {
            Some(_) => Err(AppendError::Unsupported(format!("this model takes no {name} with new rows"))),
            None => Ok(taken),
        }
    }

    /// Stored batches as (rows, this kind's extra), refused as one append would be.
    pub(crate) fn batches(self, batches: &[AppendRows]) -> Result<Vec<Batch<'_>>, AppendError> {
        batches.iter().map(|(x, noise, weights)| Ok((x, self.pick(noise.as_deref(), weights.as_deref())?))).collect()
    }
}

impl StoredAppend {
    pub fn of(new: &TrainingSet, noise: Option<&[f64]>, sample_weight: Option<&[f64]>) -> StoredAppend {
        let mut points = StoredFit::default();
        points.put_points(&new.x);
        StoredAppend {
            d: points.d,
            x: points.x,
            rows: points.rows,
            y: new.y.clone(),
            outputs: match new.outputs {
                Outputs::Single => 0,
                Outputs::Multi(t) => t as u64,
            },
            noise: noise.map(<[f64]>::to_vec),
            sample_weight: sample_weight.map(<[f64]>::to_vec),
        }
    }

    /// The rows back, checked for consistent lengths.
    pub fn restore(self) -> Result<AppendRows, RestoreError> {
        let mut points = StoredFit { d: self.d, x: self.x, rows: self.rows, ..StoredFit::default() };
        let x = points.take_points(false)?;
        let (outputs, t) = match self.outputs {
            0 => (Outputs::Single, 1),
            t => (Outputs::Multi(t as usize), t as usize),
        };
        let k = x.n();
        if self.y.len() != k * t {
            return Err(RestoreError(format!("{} targets for {k} rows of {t} outputs", self.y.len())));
        }
        for (name, v) in [("noise", &self.noise), ("sample_weight", &self.sample_weight)] {
            if v.as_ref().is_some_and(|v| v.len() != k) {
                return Err(RestoreError(format!("{name} does not have one entry per row")));
            }
        }
        Ok((TrainingSet { x, y: self.y, outputs }, self.noise, self.sample_weight))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimator::{FitContext, FittedModel, ModelKind, ModelSpec, PredictOptions, TrainingData};
    use serde_json::{json, Value};

    fn rows(n: usize, seed: f64) -> TrainingSet {
        let x: Vec<Vec<f64>> =
            (0..n).map(|i| vec![((i as f64 + seed) * 0.731).sin() * 3.0, ((i as f64) * 0.37 + seed).cos()]).collect();
        let y = x.iter().map(|r| r[0].sin() + 0.5 * r[1] + 3.0).collect();
        TrainingSet::new(Points::from_rows(&x), y)
    }

    fn fit(model: ModelKind, kernel: Value, params: Value, data: &TrainingSet) -> FittedModel {
        let spec = ModelSpec::from_json(model, Kernel::from_json(&kernel).unwrap(), Some(&params)).unwrap();
        spec.fit(&TrainingData::Regression(data.clone()), &FitContext::sequential()).unwrap()
    }

    fn close(a: f64, b: f64, scale: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(scale)
    }

    /// Predictions (and variances), the report's likelihood, jitter and leave-one-out of
    /// `grown` equal those of `refit` to 1e-9 relative.
    fn assert_same(grown: &FittedModel, refit: &FittedModel, what: &str) {
        let q = rows(17, 9.5).x;
        let opts = PredictOptions::default();
        let (a, b) = (grown.predictor(), refit.predictor());
        assert_eq!(a.n_support(), b.n_support(), "{what}");
        let (pa, pb) = (a.predict(&q, &opts, Parallelism::Sequential), b.predict(&q, &opts, Parallelism::Sequential));
        for (x, y) in pa.values.iter().zip(&pb.values) {
            assert!(close(*x, *y, 1.0), "{what}: prediction {x} vs refit {y}");
        }
        if let (Some(va), Some(vb)) = (&pa.variance, &pb.variance) {
            for (x, y) in va.iter().zip(vb) {
                assert!(close(*x, *y, 1e-3), "{what}: variance {x} vs refit {y}");
            }
        }
        let (ra, rb) = (a.report(), b.report());
        assert_eq!(ra.jitter, rb.jitter, "{what}: jitter");
        if let (Some(x), Some(y)) = (ra.log_marginal_likelihood, rb.log_marginal_likelihood) {
            assert!(close(x, y, 1.0), "{what}: lml {x} vs refit {y}");
        }
        assert_eq!(ra.loo.is_some(), rb.loo.is_some(), "{what}: loo");
        if let (Some(x), Some(y)) = (&ra.loo, &rb.loo) {
            assert!(close(x.rmse, y.rmse, 1e-6), "{what}: loo rmse {} vs refit {}", x.rmse, y.rmse);
        }
    }

    /// Many small appends in a row (1, 1, 3, 5, 10 rows) equal one refit on all rows after
    /// each step, for a GP with normalize_y (its mean and scale move with every append)
    /// and kernel ridge with leave-one-out; the grown model also survives the store.
    #[test]
    fn many_small_appends_equal_refits() {
        let all = rows(60, 0.0);
        let cases = [
            (ModelKind::GaussianProcess, json!({"noise": 0.01, "normalize_y": true, "loo": true})),
            (ModelKind::GaussianProcess, json!({"noise": 1e-6})),
            (ModelKind::KernelRidge, json!({"lambda": 0.1, "loo": true})),
        ];
        for (kind, params) in cases {
            let kernel = json!({"type": "rbf", "length_scale": 1.3});
            let mut n = 40;
            let head = TrainingSet::new(all.x.slice(0, n), all.y[..n].to_vec());
            let mut model = fit(kind, kernel.clone(), params.clone(), &head);
            for k in [1, 1, 3, 5, 10] {
                let new = TrainingSet::new(all.x.slice(n, k), all.y[n..n + k].to_vec());
                model = model.append(&new, Parallelism::Sequential).unwrap();
                n += k;
                let refit = fit(
                    kind,
                    kernel.clone(),
                    params.clone(),
                    &TrainingSet::new(all.x.slice(0, n), all.y[..n].to_vec()),
                );
                assert_same(&model, &refit, &format!("{params} at n = {n}"));
            }
            let restored = FittedModel::from_stored(model.to_stored()).unwrap();
            let more = TrainingSet::new(rows(3, 4.0).x, vec![1.0, 2.0, 3.5]);
            let a = restored.append(&more, Parallelism::Sequential).unwrap();
            let b = model.append(&more, Parallelism::Sequential).unwrap();
            assert_same(&a, &b, &format!("{params} after the store"));
        }
    }

    /// A GP without noise, fitted without jitter; a new row repeating a training row makes
    /// the grown matrix singular, so the append needs jitter, which a refit chooses afresh;
    /// later appends then grow the jittered factor, still equal to refits.
    /// Batches appended at once (the replay of stored updates) give the model that
    /// appending them one by one gives, bit for bit: per-row noise with normalize_y and
    /// leave-one-out, sample weights on a kernel ridge without a kept factor, and a
    /// batch that needs jitter (a repeated row without noise) in the middle.
    #[test]
    fn batches_appended_at_once_equal_one_by_one_bit_for_bit() {
        let all = rows(52, 0.0);
        let head = TrainingSet::new(all.x.slice(0, 40), all.y[..40].to_vec());
        let batch = |from: usize, k: usize| TrainingSet::new(all.x.slice(from, k), all.y[from..from + k].to_vec());
        let repeated = TrainingSet::new(all.x.slice(0, 1), vec![all.y[0] + 0.1]);
        let batches = [batch(40, 3), batch(43, 1), repeated, batch(44, 8)];
        let noise: Vec<f64> = (0..40).map(|i| 0.01 + 0.001 * i as f64).collect();
        let weights: Vec<f64> = (0..40).map(|i| 0.5 + (i % 3) as f64).collect();
        let kernel = json!({"type": "rbf", "length_scale": 1.3});
        let cases = [
            (ModelKind::GaussianProcess, json!({"noise": noise, "normalize_y": true, "loo": true}), true),
            (ModelKind::GaussianProcess, json!({"noise": 0.0}), false),
            (ModelKind::KernelRidge, json!({"lambda": 0.1, "sample_weight": weights}), false),
        ];
        for (kind, params, per_row_noise) in cases {
            let model = fit(kind, kernel.clone(), params.clone(), &head);
            let weighted = params.get("sample_weight").is_some();
            let extras = |b: &TrainingSet, i: usize| {
                let per_row: Vec<f64> = (0..b.x.n()).map(|j| 0.02 + 0.01 * (i + j) as f64).collect();
                (per_row_noise.then(|| per_row.clone()), weighted.then_some(per_row))
            };
            let mut one_by_one = model.clone();
            let mut all_rows = Vec::new();
            for (i, b) in batches.iter().enumerate() {
                let (n, w) = extras(b, i);
                one_by_one = one_by_one.append_with(b, n.as_deref(), w.as_deref(), Parallelism::Sequential).unwrap();
                all_rows.push((b.clone(), n, w));
            }
            let at_once = model.append_all(&all_rows, Parallelism::Parallel).unwrap();
            let bits = |m: &FittedModel| {
                let s = m.to_stored();
                let mut v: Vec<u64> =
                    [&s.x, &s.alpha, &s.factor].iter().flat_map(|a| a.iter().map(|x| x.to_bits())).collect();
                v.extend(s.arrays.iter().flat_map(|(_, a)| a.iter().map(|x| x.to_bits())));
                v.extend([s.jitter.to_bits()]);
                (v, s.report)
            };
            assert_eq!(bits(&at_once), bits(&one_by_one), "{params}");
            if params["noise"] == json!(0.0) {
                let (before, after) = (model.predictor().report().jitter, at_once.predictor().report().jitter);
                assert!(after > before, "the repeated row needs more jitter: {before:?} -> {after:?}");
            }
        }
    }

    #[test]
    fn an_append_that_needs_jitter_equals_the_refit() {
        let all = rows(30, 1.0);
        let kernel = json!({"type": "matern", "nu": 2.5, "length_scale": 0.5});
        let params = json!({"noise": 0.0});
        let model = fit(ModelKind::GaussianProcess, kernel.clone(), params.clone(), &all);
        assert_eq!(model.predictor().report().jitter, Some(0.0));
        let dup = TrainingSet::new(all.x.slice(4, 1), vec![all.y[4]]);
        let grown = model.append(&dup, Parallelism::Sequential).unwrap();
        let data = grown_set(&all.x, &all.y, &dup);
        let refit = fit(ModelKind::GaussianProcess, kernel.clone(), params.clone(), &data);
        assert!(grown.predictor().report().jitter.unwrap() > 0.0);
        assert_same(&grown, &refit, "the duplicate row");
        let later = rows(4, 7.0);
        let grown = grown.append(&later, Parallelism::Sequential).unwrap();
        let data = grown_set(&data.x, &data.y, &later);
        let refit = fit(ModelKind::GaussianProcess, kernel, params, &data);
        assert_same(&grown, &refit, "rows after the jitter");
    }

    #[test]
    fn other_models_and_approximations_cannot_append() {
        let data = rows(30, 2.0);
        let new = rows(2, 3.0);
        let kernel = json!({"type": "rbf"});
        let nystrom = json!({"approximation": "nystrom", "inducing_points": 10});
        for (kind, params, says) in [
            (ModelKind::GaussianProcess, nystrom.clone(), "approximation nystrom"),
            (ModelKind::KernelRidge, nystrom, "approximation nystrom"),
            (ModelKind::NadarayaWatson, json!({}), "not nadaraya_watson"),
        ] {
            let e = fit(kind, kernel.clone(), params, &data).append(&new, Parallelism::Sequential).unwrap_err();
            assert!(matches!(&e, AppendError::Unsupported(m) if m.contains(says)), "{e}");
        }
        // A file of a version before online updates has no targets.
        let mut stored = fit(ModelKind::GaussianProcess, kernel, json!({}), &data).to_stored();
        stored.arrays.retain(|(name, _)| name != "y");
        let e = FittedModel::from_stored(stored).unwrap().append(&new, Parallelism::Sequential).unwrap_err();
        assert!(matches!(&e, AppendError::Unsupported(m) if m.contains("refit")), "{e}");
    }
}

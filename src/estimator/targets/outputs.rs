//! The output axis of regression targets. One output (1-D y) answers flat lists; t
//! outputs (2-D y, kernel ridge and Gaussian processes) answer a list of t numbers per
//! row, even when t = 1, as scikit-learn keeps the axis of a 2-D y. The outputs share
//! one kernel and one factorisation: each is one more right-hand side.

use crate::estimator::stored::{RestoreError, StoredArrays, StoredFit};
use crate::estimator::TrainingSet;
use nalgebra::DMatrix;

/// How many outputs a regression has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Outputs {
    /// 1-D y.
    #[default]
    Single,
    /// 2-D y with t >= 1 columns.
    Multi(usize),
}

impl Outputs {
    pub fn t(self) -> usize {
        match self {
            Outputs::Single => 1,
            Outputs::Multi(t) => t,
        }
    }

    pub fn is_multi(self) -> bool {
        matches!(self, Outputs::Multi(_))
    }

    /// Kept as the array `outputs`; files without it (every one written before several
    /// outputs existed) have one output.
    pub(crate) fn store(self, s: &mut StoredFit) {
        if let Outputs::Multi(t) = self {
            s.arrays.push(("outputs".into(), vec![t as f64]));
        }
    }

    pub(crate) fn restore(arrays: &mut StoredArrays) -> Result<Outputs, RestoreError> {
        match arrays.take("outputs", Some(1)) {
            Err(_) => Ok(Outputs::Single),
            Ok(v) if v[0] >= 1.0 && v[0].fract() == 0.0 && v[0] <= 1e9 => Ok(Outputs::Multi(v[0] as usize)),
            Ok(v) => Err(RestoreError(format!("{} outputs", v[0]))),
        }
    }
}

/// Each output's centre and scale: y was fitted as (y - mean) / std, per output
/// (scikit-learn's `normalize_y` on a 2-D y), or (0, 1) for each when not normalising.
#[derive(Debug, Clone, PartialEq)]
pub struct Normalisation {
    pub mean: Vec<f64>,
    pub std: Vec<f64>,
}

impl Normalisation {
    pub fn of(data: &TrainingSet, normalize: bool) -> Normalisation {
        let t = data.outputs.t();
        if !normalize {
            return Normalisation::identity(t);
        }
        let (mean, std) = (0..t).map(|k| normalisation(data.output(k))).unzip();
        Normalisation { mean, std }
    }

    pub fn identity(t: usize) -> Normalisation {
        Normalisation { mean: vec![0.0; t], std: vec![1.0; t] }
    }

    /// The normalised targets, n x t.
    pub fn apply(&self, data: &TrainingSet) -> DMatrix<f64> {
        self.apply_to(&data.y, data.x.n())
    }

    /// As [`Normalisation::apply`] for targets `y` of `n` rows (n x t column-major).
    pub fn apply_to(&self, y: &[f64], n: usize) -> DMatrix<f64> {
        let mut y = DMatrix::from_column_slice(n, self.mean.len(), y);
        for (k, mut col) in y.column_iter_mut().enumerate() {
            let (m, s) = (self.mean[k], self.std[k]);
            col.apply(|v| *v = (*v - m) / s);
        }
        y
    }

    /// Output k's value in y's units from a normalised one.
    pub fn unscale(&self, k: usize, v: f64) -> f64 {
        v * self.std[k] + self.mean[k]
    }

    /// Each output's variance factor std^2.
    pub fn variance_scales(&self) -> Vec<f64> {
        self.std.iter().map(|s| s * s).collect()
    }

    /// Output 0's in the file's scalar fields (what one-output files hold), the rest as
    /// arrays for several outputs.
    pub(crate) fn store(&self, outputs: Outputs, s: &mut StoredFit) {
        s.y_mean = self.mean[0];
        s.y_std = self.std[0];
        if outputs.is_multi() {
            s.arrays.push(("y_means".into(), self.mean.clone()));
            s.arrays.push(("y_stds".into(), self.std.clone()));
        }
    }

    pub(crate) fn restore(
        outputs: Outputs,
        s: &StoredFit,
        arrays: &mut StoredArrays,
    ) -> Result<Normalisation, RestoreError> {
        match outputs {
            Outputs::Single => Ok(Normalisation { mean: vec![s.y_mean], std: vec![s.y_std] }),
            Outputs::Multi(t) => {
                Ok(Normalisation { mean: arrays.take("y_means", Some(t))?, std: arrays.take("y_stds", Some(t))? })
            }
        }
    }
}

/// Row i's t values of a column-major n x t matrix, appended to `out` row-major.
pub(crate) fn push_rows(out: &mut Vec<f64>, m: &DMatrix<f64>) {
    for i in 0..m.nrows() {
        out.extend(m.row(i).iter());
    }
}

/// K*' alpha for every output, row-major m x t: `cross` is n x m (K(X, X*)), `alpha` n x t
/// column-major.
pub(crate) fn mean_rows(cross: &DMatrix<f64>, alpha: &[f64], t: usize) -> Vec<f64> {
    if t == 1 {
        return crate::estimator::weighted_columns(cross, alpha);
    }
    let a = DMatrix::from_column_slice(cross.nrows(), t, alpha);
    let mut out = Vec::with_capacity(cross.ncols() * t);
    push_rows(&mut out, &crate::linalg::mul_at_b_ordered(cross, &a));
    out
}

/// Targets `old` (n x t column-major) with `new`'s appended below, output by output.
pub(crate) fn stack_targets(old: &[f64], new: &TrainingSet) -> Vec<f64> {
    let t = new.outputs.t();
    let n = old.len() / t;
    (0..t).flat_map(|k| old[k * n..(k + 1) * n].iter().chain(new.output(k)).copied()).collect()
}

/// A Gaussian process's answer from its pieces in normalised units: `mean` m x t
/// row-major, and either the m x m covariance `cov` (the variance is then its diagonal,
/// when `want_variance`) or each row's variance `var`. Variances are clipped at 0 and get
/// `noise` (include_noise) before they are scaled to each output's units.
pub(crate) fn gp_prediction(
    outputs: Outputs,
    norm: &Normalisation,
    mean: Vec<f64>,
    want_variance: bool,
    cov: Option<DMatrix<f64>>,
    var: Option<Vec<f64>>,
    noise: f64,
) -> crate::estimator::Prediction {
    let t = outputs.t();
    let values = mean.iter().enumerate().map(|(j, v)| norm.unscale(j % t, *v)).collect();
    let cov = cov.map(|mut c| {
        for i in 0..c.nrows() {
            c[(i, i)] = c[(i, i)].max(0.0) + noise;
        }
        c
    });
    let base: Option<Vec<f64>> = match &cov {
        Some(c) => want_variance.then(|| c.diagonal().iter().copied().collect()),
        None => var.map(|v| v.into_iter().map(|v| v.max(0.0) + noise).collect()),
    };
    let scales = norm.variance_scales();
    match outputs {
        Outputs::Single => crate::estimator::Prediction {
            values,
            variance: base.map(|v| v.into_iter().map(|v| v * scales[0]).collect()),
            covariance: cov.map(|c| c * scales[0]),
            ..Default::default()
        },
        Outputs::Multi(t) => crate::estimator::Prediction {
            values,
            variance: base.map(|v| v.iter().flat_map(|v| scales.iter().map(move |s| v * s)).collect()),
            covariance: cov,
            outputs: Some(t),
            output_scales: Some(scales),
            ..Default::default()
        },
    }
}

/// Mean and ddof-0 standard deviation of y, with scikit-learn's rule that a zero
/// standard deviation becomes 1 (a constant target must not divide by zero).
pub fn normalisation(y: &[f64]) -> (f64, f64) {
    let n = y.len() as f64;
    let mean = y.iter().sum::<f64>() / n;
    let var = y.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    let std = var.sqrt();
    (mean, if std == 0.0 { 1.0 } else { std })
}

/// A stored regression's outputs, its coefficients (a column per output) and its
/// targets when kept for online updates.
pub(crate) type Columns = (Outputs, Vec<f64>, Option<Vec<f64>>);

/// The coefficients of a regression kept a column per output (kernel ridge, Gaussian
/// processes and the one-output regressions), checked against the `n` points, and the
/// targets when kept for online updates (absent from files written before them).
pub(crate) fn restore_columns(r: &mut crate::estimator::Restoring, n: usize) -> Result<Columns, RestoreError> {
    let outputs = Outputs::restore(&mut r.arrays)?;
    let t = outputs.t();
    let alpha = std::mem::take(&mut r.fit.alpha);
    if alpha.len() != n * t {
        return Err(RestoreError(format!("{} coefficients for {n} points and {t} outputs", alpha.len())));
    }
    let y = r.arrays.take("y", Some(n * t)).ok();
    Ok((outputs, alpha, y))
}

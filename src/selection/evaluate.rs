//! One candidate on one fold: fit on the training rows, predict the held-out rows, and
//! hand back what the scoring needs. Three ways, all giving the direct fit's numbers:
//! the model's own fit on the selected rows ([`plain`]); kernel ridge and fixed-kernel
//! GPs factorised from a block of the search's shared Gram table ([`ridge`]); and the SVM
//! solved over columns read from that table ([`svm`]).

use super::scoring::{Held, HeldClasses, Needs};
use crate::estimator::targets::outputs::normalisation;
use crate::estimator::{
    ClassificationSet, Decision, FitContext, FitError, Limits, ModelSpec, PredictOptions, Prediction, TrainingData,
    TrainingSet,
};
use crate::kernel::{GramTable, Kernel};
use crate::linalg::Cholesky;
use nalgebra::{DMatrix, DVector};
use std::sync::Arc;

/// Why a fold gave no predictions.
#[derive(Debug, Clone, PartialEq)]
pub enum FoldError {
    /// The search was cancelled: stop everything.
    Cancelled,
    /// This fold fit failed (its score is null); the message says why.
    Failed(String),
}

impl From<crate::linalg::LinalgError> for FoldError {
    fn from(e: crate::linalg::LinalgError) -> FoldError {
        FitError::from(e).into()
    }
}

impl From<FitError> for FoldError {
    fn from(e: FitError) -> FoldError {
        match e {
            FitError::Cancelled => FoldError::Cancelled,
            other => FoldError::Failed(other.to_string()),
        }
    }
}

/// A fold's training rows as a training set. A classifier's fold may lack some classes:
/// its model then knows only those present (as scikit-learn's would), and `present`
/// maps its class indices back to the whole problem's.
pub struct FoldSet {
    pub data: TrainingData,
    present: Option<Vec<usize>>,
}

impl FoldSet {
    pub fn new(data: &TrainingData, train: &[usize]) -> Result<FoldSet, FoldError> {
        let x = data.x().select(train);
        Ok(match data {
            TrainingData::Regression(d) => {
                // y is n x t column-major: output by output, the training rows'.
                let n = d.x.n();
                let y = (0..d.outputs.t()).flat_map(|k| train.iter().map(move |&i| d.y[k * n + i])).collect();
                let set = match d.outputs.is_multi() {
                    true => TrainingSet::multi(x, y, d.outputs.t()),
                    false => TrainingSet::new(x, y),
                };
                FoldSet { data: TrainingData::Regression(set), present: None }
            }
            TrainingData::Unlabelled(_) => FoldSet { data: TrainingData::Unlabelled(x), present: None },
            TrainingData::Classification(d) => {
                let mut seen = vec![false; d.classes.len()];
                for &i in train {
                    seen[d.y[i]] = true;
                }
                let present: Vec<usize> = (0..seen.len()).filter(|&c| seen[c]).collect();
                if present.len() < 2 {
                    return Err(FoldError::Failed(format!(
                        "the {} training rows of this fold hold one class only",
                        train.len()
                    )));
                }
                let mut local = vec![usize::MAX; seen.len()];
                for (l, &c) in present.iter().enumerate() {
                    local[c] = l;
                }
                let y = train.iter().map(|&i| local[d.y[i]]).collect();
                let classes = d.classes.subset(&present);
                FoldSet {
                    data: TrainingData::Classification(ClassificationSet { x, y, classes }),
                    present: Some(present),
                }
            }
        })
    }

    /// The held-out rows' targets with what the fold's model predicted for them.
    pub fn held(&self, all: &TrainingData, test: &[usize], p: Prediction, needs: Needs) -> Held {
        match all {
            // Row-major, t per row, as the prediction's values.
            TrainingData::Regression(d) => Held::Regression {
                y: test.iter().flat_map(|&i| (0..d.outputs.t()).map(move |k| d.y[k * d.x.n() + i])).collect(),
                mean: p.values,
                var: if needs.variance { p.variance } else { None },
                outputs: d.outputs.t(),
            },
            TrainingData::Unlabelled(_) => unreachable!("a search refuses models without targets (plan.rs)"),
            TrainingData::Classification(d) => {
                let present = self.present.as_deref().expect("a classifier's fold");
                let k = d.classes.len();
                let predicted = p.classes.unwrap_or_default().into_iter().map(|c| present[c]).collect();
                let probabilities = p.probabilities.filter(|_| needs.probabilities).map(|q| {
                    let mut full = DMatrix::zeros(q.nrows(), k);
                    for (l, &c) in present.iter().enumerate() {
                        full.set_column(c, &q.column(l));
                    }
                    full
                });
                let decision = match p.decision {
                    Some(Decision::Binary(v)) if needs.decision && present.len() == k => Some(v),
                    _ => None,
                };
                Held::Classification(HeldClasses {
                    classes: k,
                    y: test.iter().map(|&i| d.y[i]).collect(),
                    predicted,
                    probabilities,
                    decision,
                })
            }
        }
    }
}

fn predict_options(needs: Needs) -> PredictOptions {
    PredictOptions {
        variance: needs.variance,
        covariance: false,
        // The density scores y itself, noise and all.
        include_noise: needs.variance,
        probabilities: needs.probabilities,
    }
}

/// The model's own fit on the training rows and prediction of the held-out ones.
pub fn plain(
    spec: &ModelSpec,
    data: &TrainingData,
    train: &[usize],
    test: &[usize],
    needs: Needs,
    ctx: &FitContext,
) -> Result<Held, FoldError> {
    ctx.cancel.check()?;
    let fold = FoldSet::new(data, train)?;
    let mut spec = spec.for_rows(train);
    let d = data.x().d();
    // The approximation was resolved for all rows; its checks against this fold's rows
    // (inducing points above n) still apply.
    let unlimited = Limits { exact_max_rows: usize::MAX, max_fit_bytes: u64::MAX };
    spec.resolve_approximation(train.len(), d, unlimited).map_err(|e| FoldError::Failed(e.to_string()))?;
    spec.check_data(train.len()).map_err(|e| FoldError::Failed(e.to_string()))?;
    let fitted = spec.fit(&fold.data, ctx)?;
    let x = data.x().select(test);
    let p = fitted.predictor().predict(&x, &predict_options(needs), ctx.par);
    Ok(fold.held(data, test, p, needs))
}

/// Kernel ridge, or a Gaussian process with fixed hyperparameters: one kernel, the
/// value added to the diagonal, and whether y is normalised (GP) and a variance exists.
#[derive(Debug, Clone, PartialEq)]
pub struct Ridge {
    pub kernel: Kernel,
    pub diagonal: f64,
    pub normalize_y: bool,
    pub gaussian_process: bool,
}

impl Ridge {
    /// The exact models whose fold fits need nothing but K + s I (the spec's answer).
    pub fn of(spec: &ModelSpec) -> Option<Ridge> {
        spec.ridge().map(|r| Ridge {
            kernel: r.kernel,
            diagonal: r.diagonal,
            normalize_y: r.normalize_y,
            gaussian_process: r.gaussian_process,
        })
    }

    /// Candidates with equal keys differ only in the diagonal value.
    pub fn sweep_key(&self) -> (String, bool, bool) {
        (self.kernel.to_json().to_string(), self.normalize_y, self.gaussian_process)
    }

    /// The training targets as fitted: centred and scaled under normalize_y.
    pub fn targets(&self, y: &[f64]) -> (Vec<f64>, f64, f64) {
        let (mean, std) = if self.normalize_y { normalisation(y) } else { (0.0, 1.0) };
        (y.iter().map(|v| (v - mean) / std).collect(), mean, std)
    }

    /// The direct fit's refusal of targets whose likelihood overflows.
    pub fn check_likelihood(&self, lml: f64) -> Result<(), FoldError> {
        if self.gaussian_process && !lml.is_finite() {
            return Err(FoldError::Failed(
                "the targets are too large: the log marginal likelihood overflows; rescale y or set normalize_y".into(),
            ));
        }
        Ok(())
    }
}

/// The factor of K + s I over `rows` (the contract's jitter rule, as the direct fit),
/// alpha for the (normalised) targets, and their normalisation; the GP's refusal of an
/// overflowing likelihood.
struct Factored {
    chol: Cholesky,
    yt: DVector<f64>,
    alpha: DVector<f64>,
    mean: f64,
    std: f64,
}

impl Ridge {
    fn factor(&self, table: &GramTable, y: &[f64], rows: &[usize], ctx: &FitContext) -> Result<Factored, FoldError> {
        ctx.cancel.check()?;
        let par = ctx.par;
        let (yt, mean, std) = self.targets(&rows.iter().map(|&i| y[i]).collect::<Vec<_>>());
        let chol = Cholesky::factor_with_jitter_until(
            || {
                let mut k = table.block(rows, rows, par);
                for i in 0..rows.len() {
                    k[(i, i)] += self.diagonal;
                }
                k
            },
            par,
            &|| ctx.cancel.is_cancelled(),
        )?;
        let yt = DVector::from_vec(yt);
        let alpha = chol.solve_vec(&yt);
        let n = rows.len() as f64;
        let lml = -0.5 * yt.dot(&alpha) - 0.5 * chol.log_det() - 0.5 * n * (2.0 * std::f64::consts::PI).ln();
        self.check_likelihood(lml)?;
        Ok(Factored { chol, yt, alpha, mean, std })
    }
}

/// The fold fit of a [`Ridge`] model from the table: K + s I factorised with the
/// contract's jitter rule, as the direct fit does.
pub fn ridge(
    r: &Ridge,
    table: &GramTable,
    y: &[f64],
    train: &[usize],
    test: &[usize],
    needs: Needs,
    ctx: &FitContext,
) -> Result<Held, FoldError> {
    let Factored { chol, alpha, mean, std, .. } = r.factor(table, y, train, ctx)?;
    let mut cross = table.block(train, test, ctx.par);
    let values = crate::estimator::weighted_columns(&cross, alpha.as_slice()).iter().map(|f| f * std + mean).collect();
    let var = needs.variance.then(|| {
        chol.solve_l_in_place(&mut cross, ctx.par);
        let prior = table.diag(test);
        cross
            .column_iter()
            .zip(prior)
            .map(|(v, kxx)| (kxx - v.norm_squared()).max(0.0) * std * std + r.diagonal * std * std)
            .collect()
    });
    Ok(Held::Regression { y: test.iter().map(|&i| y[i]).collect(), mean: values, var, outputs: 1 })
}

/// A fold fit whose kernel values come from the table (the kinds whose spec has a
/// [`crate::estimator::TableFit`]: the exact SVC), predicted from a block of it.
pub fn from_table(
    spec: &ModelSpec,
    table: &Arc<GramTable>,
    data: &TrainingData,
    train: &[usize],
    test: &[usize],
    needs: Needs,
    ctx: &FitContext,
) -> Result<Held, FoldError> {
    ctx.cancel.check()?;
    let fold = FoldSet::new(data, train)?;
    let spec = spec.for_rows(train);
    let fit = spec
        .table_fit()
        .ok_or_else(|| FoldError::Failed(format!("a {} does not fit from a table", spec.kind().name())))?;
    let (model, sv_rows) = fit.fit_from_table(&fold.data, table, train, ctx)?;
    let sv: Vec<usize> = sv_rows.iter().map(|&r| train[r]).collect();
    let p = model.predict_cross(&table.block(&sv, test, ctx.par), &predict_options(needs));
    Ok(fold.held(data, test, p, needs))
}

/// Leave-one-out of a [`Ridge`] model in closed form from one factor of all n rows: the
/// residual of row i is alpha_i / [A^-1]_ii and its predictive variance (noise
/// included) 1 / [A^-1]_ii, A = K + s I (R&W 5.4.2; Allen's PRESS for kernel ridge).
pub fn ridge_loo(r: &Ridge, table: &GramTable, y: &[f64], needs: Needs, ctx: &FitContext) -> Result<Held, FoldError> {
    let all: Vec<usize> = (0..y.len()).collect();
    let Factored { chol, yt, alpha, mean, std } = r.factor(table, y, &all, ctx)?;
    let inv_diag = chol.inverse_diagonal(ctx.par);
    Ok(loo_held(y, yt.as_slice(), alpha.as_slice(), &inv_diag, mean, std, needs))
}

/// Held-out predictions of every row from the closed form (normalised targets `yt`,
/// alpha = A^-1 yt and diag(A^-1)), in y's units.
pub fn loo_held(y: &[f64], yt: &[f64], alpha: &[f64], inv_diag: &[f64], mean: f64, std: f64, needs: Needs) -> Held {
    let pred = (0..y.len()).map(|i| (yt[i] - alpha[i] / inv_diag[i]) * std + mean).collect();
    let var = needs.variance.then(|| inv_diag.iter().map(|d| std * std / d).collect());
    Held::Regression { y: y.to_vec(), mean: pred, var, outputs: 1 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimator::{ClassLabels, Target};
    use crate::kernel::Points;
    use crate::linalg::Parallelism;
    use serde_json::json;

    fn regression(n: usize) -> TrainingData {
        let x = Points::from_columns(crate::test_support::seeded_matrix(2, n, 11));
        let y = (0..n).map(|i| (x.point(i)[0] * 2.0).sin() + 0.3 * x.point(i)[1]).collect();
        TrainingData::Regression(TrainingSet::new(x, y))
    }

    fn spec(model: &str, kernel: serde_json::Value, params: serde_json::Value) -> ModelSpec {
        let kind = crate::estimator::ModelKind::from_name(model).unwrap();
        let mut s = ModelSpec::from_json(kind, Kernel::from_json(&kernel).unwrap(), Some(&params)).unwrap();
        s.resolve_approximation(1000, 2, Limits { exact_max_rows: 20_000, max_fit_bytes: u64::MAX }).unwrap();
        s
    }

    fn close(a: &[f64], b: &[f64], tol: f64) {
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= tol * y.abs().max(1e-3), "{x} vs {y}");
        }
    }

    /// The table paths give the direct fit's numbers: a GP's mean and variance (noise
    /// included, normalize_y) and kernel ridge's mean.
    #[test]
    fn ridge_from_the_table_equals_the_direct_fold_fit() {
        let data = regression(60);
        let TrainingData::Regression(set) = &data else { unreachable!() };
        let train: Vec<usize> = (0..60).filter(|i| i % 4 != 1).collect();
        let test: Vec<usize> = (0..60).filter(|i| i % 4 == 1).collect();
        let needs = Needs { variance: true, ..Needs::default() };
        let ctx = FitContext::sequential();
        for (model, params) in [
            ("gaussian_process", json!({"noise": 0.05, "normalize_y": true})),
            ("kernel_ridge", json!({"lambda": 0.1})),
        ] {
            let s = spec(model, json!({"type": "rbf", "length_scale": 0.7}), params);
            let r = Ridge::of(&s).unwrap();
            let table = GramTable::new(&r.kernel, &data.x().clone(), Parallelism::Sequential);
            let direct = plain(&s, &data, &train, &test, needs, &ctx).unwrap();
            let tabled = ridge(&r, &table, &set.y, &train, &test, needs, &ctx).unwrap();
            let (Held::Regression { mean: a, var: va, .. }, Held::Regression { mean: b, var: vb, .. }) =
                (&tabled, &direct)
            else {
                unreachable!()
            };
            close(a, b, 1e-10);
            if model == "gaussian_process" {
                close(va.as_ref().unwrap(), vb.as_ref().unwrap(), 1e-10);
            }
        }
    }

    /// The closed-form leave-one-out equals n refits without each row.
    #[test]
    fn closed_form_loo_equals_refits() {
        let data = regression(25);
        let TrainingData::Regression(set) = &data else { unreachable!() };
        let s = spec("gaussian_process", json!({"type": "matern", "length_scale": 0.9}), json!({"noise": 0.02}));
        let r = Ridge::of(&s).unwrap();
        let table = GramTable::new(&r.kernel, &set.x, Parallelism::Sequential);
        let needs = Needs { variance: true, ..Needs::default() };
        let ctx = FitContext::sequential();
        let Held::Regression { mean, var, .. } = ridge_loo(&r, &table, &set.y, needs, &ctx).unwrap() else {
            unreachable!()
        };
        for i in 0..25 {
            let train: Vec<usize> = (0..25).filter(|&j| j != i).collect();
            let Held::Regression { mean: m, var: v, .. } = plain(&s, &data, &train, &[i], needs, &ctx).unwrap() else {
                unreachable!()
            };
            close(&mean[i..=i], &m, 1e-9);
            close(&var.as_ref().unwrap()[i..=i], v.as_ref().unwrap(), 1e-9);
        }
    }

    /// The SVM over table columns equals its fit over the points, and a fold missing a
    /// class maps its predictions back to the problem's classes.
    #[test]
    fn svm_from_the_table_and_folds_missing_a_class() {
        let x = Points::from_columns(crate::test_support::seeded_matrix(2, 45, 3));
        let labels: Vec<Target> = (0..45)
            .map(|i| {
                Target::Number(if i == 44 {
                    2.0
                } else if x.point(i)[0] > 0.0 {
                    1.0
                } else {
                    0.0
                })
            })
            .collect();
        let (classes, y) = ClassLabels::encode(&labels).unwrap();
        let data = TrainingData::Classification(ClassificationSet { x: x.clone(), y, classes });
        let s = spec("svm", json!({"type": "rbf", "gamma": 0.5}), json!({"c": 3.0}));
        let table = Arc::new(GramTable::new(s.kernel(), &x, Parallelism::Sequential));
        // Row 44, the only one of class 2, is held out: the fold trains on two classes.
        let train: Vec<usize> = (0..45).filter(|i| i % 5 != 4).collect();
        let test: Vec<usize> = (0..45).filter(|i| i % 5 == 4).collect();
        let needs = Needs { probabilities: true, decision: true, ..Needs::default() };
        let ctx = FitContext::sequential();
        let direct = plain(&s, &data, &train, &test, needs, &ctx).unwrap();
        let tabled = from_table(&s, &table, &data, &train, &test, needs, &ctx).unwrap();
        assert_eq!(direct, tabled);
        let Held::Classification(c) = direct else { unreachable!() };
        assert_eq!(c.classes, 3);
        assert!(c.predicted.iter().all(|&p| p < 2), "the fold's model knows classes 0 and 1 only");
        assert_eq!(c.y.last(), Some(&2));
        assert!(c.decision.is_none(), "a binary decision of a 3-class problem is not scored");
        let only_one: Vec<usize> = (0..45).filter(|&i| data_class(&data, i) == 0).collect();
        assert!(matches!(plain(&s, &data, &only_one, &test, needs, &ctx), Err(FoldError::Failed(_))));
    }

    fn data_class(d: &TrainingData, i: usize) -> usize {
        match d {
            TrainingData::Classification(c) => c.y[i],
            _ => unreachable!(),
        }
    }
}

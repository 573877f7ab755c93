//! What a predict request asks for and what a fitted model answers: values, variances,
//! classes, decisions, probabilities, embeddings, as one shape for every kind.

use nalgebra::DMatrix;

/// What a predict request asks for; fields a model does not produce are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PredictOptions {
    pub variance: bool,
    pub covariance: bool,
    pub include_noise: bool,
    pub probabilities: bool,
}

impl Default for PredictOptions {
    fn default() -> Self {
        PredictOptions { variance: true, covariance: false, include_noise: false, probabilities: true }
    }
}

/// Predictions for m query points.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Prediction {
    /// Regression: one value per row.
    pub values: Vec<f64>,
    /// Predictive variance, clipped at 0 (GP).
    pub variance: Option<Vec<f64>>,
    /// m x m predictive covariance (GP, on request).
    pub covariance: Option<DMatrix<f64>>,
    /// Classification: each row's predicted class, an index into the model's classes.
    pub classes: Option<Vec<usize>>,
    pub decision: Option<Decision>,
    /// m x classes, rows summing to 1.
    pub probabilities: Option<DMatrix<f64>>,
    /// one_class_svm: the decision function plus rho.
    pub score_samples: Option<Vec<f64>>,
    /// kernel_pca: m x n_components (and nothing else).
    pub embedding: Option<DMatrix<f64>>,
    /// Regression with t outputs (2-D y): `values` and `variance` are m x t, row-major,
    /// and output k's covariance is `covariance` times `output_scales[k]`.
    pub outputs: Option<usize>,
    pub output_scales: Option<Vec<f64>>,
}

impl Prediction {
    /// Cuts a prediction of stacked rows back into one per part, `sizes` giving each
    /// part's row count in order. Not for covariances, which span the parts.
    pub fn split(self, sizes: &[usize]) -> Vec<Prediction> {
        debug_assert!(self.covariance.is_none(), "a covariance cannot be split by rows");
        let t = self.outputs.unwrap_or(1);
        debug_assert_eq!(
            sizes.iter().sum::<usize>(),
            (self.values.len() / t)
                .max(self.classes.as_ref().map_or(0, Vec::len))
                .max(self.embedding.as_ref().map_or(0, DMatrix::nrows))
        );
        let rows = |m: &DMatrix<f64>, at: usize, len: usize| m.rows(at, len).into_owned();
        let mut at = 0;
        sizes
            .iter()
            .map(|&len| {
                let range = at * t..(at + len) * t;
                let part = Prediction {
                    values: self.values.get(range.clone()).map_or_else(Vec::new, <[f64]>::to_vec),
                    variance: self.variance.as_ref().map(|v| v[range.clone()].to_vec()),
                    covariance: None,
                    classes: self.classes.as_ref().map(|c| c[range.clone()].to_vec()),
                    decision: self.decision.as_ref().map(|d| match d {
                        Decision::Binary(v) => Decision::Binary(v[range.clone()].to_vec()),
                        Decision::PerClass(m) => Decision::PerClass(rows(m, at, len)),
                    }),
                    probabilities: self.probabilities.as_ref().map(|p| rows(p, at, len)),
                    score_samples: self.score_samples.as_ref().map(|v| v[range.clone()].to_vec()),
                    embedding: self.embedding.as_ref().map(|e| rows(e, at, len)),
                    outputs: self.outputs,
                    output_scales: self.output_scales.clone(),
                };
                at += len;
                part
            })
            .collect()
    }

    /// The parts' rows stacked in order (the inverse of [`Prediction::split`]); `parts`
    /// must be non-empty, all of one model and without covariances.
    pub fn stack(parts: Vec<Prediction>) -> Prediction {
        let mut parts = parts.into_iter();
        let first = parts.next().expect("at least one part");
        let cat = |a: DMatrix<f64>, b: &DMatrix<f64>| {
            let m = a.nrows();
            let mut out = a.resize_vertically(m + b.nrows(), 0.0);
            out.rows_mut(m, b.nrows()).copy_from(b);
            out
        };
        parts.fold(first, |mut acc, p| {
            acc.values.extend(p.values);
            if let (Some(a), Some(b)) = (acc.variance.as_mut(), p.variance) {
                a.extend(b);
            }
            if let (Some(a), Some(b)) = (acc.classes.as_mut(), p.classes) {
                a.extend(b);
            }
            if let (Some(a), Some(b)) = (acc.score_samples.as_mut(), p.score_samples) {
                a.extend(b);
            }
            acc.decision = match (acc.decision.take(), p.decision) {
                (Some(Decision::Binary(mut a)), Some(Decision::Binary(b))) => {
                    a.extend(b);
                    Some(Decision::Binary(a))
                }
                (Some(Decision::PerClass(a)), Some(Decision::PerClass(b))) => Some(Decision::PerClass(cat(a, &b))),
                _ => None,
            };
            acc.probabilities = match (acc.probabilities.take(), p.probabilities) {
                (Some(a), Some(b)) => Some(cat(a, &b)),
                _ => None,
            };
            acc.embedding = match (acc.embedding.take(), p.embedding) {
                (Some(a), Some(b)) => Some(cat(a, &b)),
                _ => None,
            };
            acc
        })
    }

    /// Whether every number in it is finite (JSON has no NaN or infinity).
    pub fn is_finite(&self) -> bool {
        let all = |v: &[f64]| v.iter().all(|x| x.is_finite());
        all(&self.values)
            && self.variance.as_deref().is_none_or(all)
            && self.covariance.as_ref().is_none_or(|c| all(c.as_slice()))
            && self.probabilities.as_ref().is_none_or(|p| all(p.as_slice()))
            && self.score_samples.as_deref().is_none_or(all)
            && self.embedding.as_ref().is_none_or(|e| all(e.as_slice()))
            && match &self.decision {
                None => true,
                Some(Decision::Binary(d)) => all(d),
                Some(Decision::PerClass(d)) => all(d.as_slice()),
            }
    }
}

/// A classifier's decision function.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Two classes: one score per row, positive for the second class.
    Binary(Vec<f64>),
    /// More: m x classes, the largest score per row being the prediction.
    PerClass(DMatrix<f64>),
}

//! The scorings of a search, each "greater is better" and computed as scikit-learn's
//! scorer of the same name computes it on the held-out rows of one fold (or on every
//! leave-one-out prediction at once).

use nalgebra::DMatrix;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scoring {
    R2,
    NegMeanSquaredError,
    NegRootMeanSquaredError,
    NegMeanAbsoluteError,
    /// Mean log N(y; mean, latent variance + noise): Gaussian processes only.
    MeanLogPredictiveDensity,
    Accuracy,
    BalancedAccuracy,
    NegLogLoss,
    RocAuc,
}

impl Scoring {
    pub const ALL: [Scoring; 9] = [
        Scoring::R2,
        Scoring::NegMeanSquaredError,
        Scoring::NegRootMeanSquaredError,
        Scoring::NegMeanAbsoluteError,
        Scoring::MeanLogPredictiveDensity,
        Scoring::Accuracy,
        Scoring::BalancedAccuracy,
        Scoring::NegLogLoss,
        Scoring::RocAuc,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Scoring::R2 => "r2",
            Scoring::NegMeanSquaredError => "neg_mean_squared_error",
            Scoring::NegRootMeanSquaredError => "neg_root_mean_squared_error",
            Scoring::NegMeanAbsoluteError => "neg_mean_absolute_error",
            Scoring::MeanLogPredictiveDensity => "mean_log_predictive_density",
            Scoring::Accuracy => "accuracy",
            Scoring::BalancedAccuracy => "balanced_accuracy",
            Scoring::NegLogLoss => "neg_log_loss",
            Scoring::RocAuc => "roc_auc",
        }
    }

    pub fn from_name(name: &str) -> Option<Scoring> {
        Scoring::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Whether it scores a regression (else a classifier).
    pub fn is_regression(self) -> bool {
        matches!(
            self,
            Scoring::R2
                | Scoring::NegMeanSquaredError
                | Scoring::NegRootMeanSquaredError
                | Scoring::NegMeanAbsoluteError
                | Scoring::MeanLogPredictiveDensity
        )
    }

    /// What the held-out predictions must carry for it.
    pub fn needs(self) -> Needs {
        Needs {
            variance: self == Scoring::MeanLogPredictiveDensity,
            probabilities: self == Scoring::NegLogLoss || self == Scoring::RocAuc,
            decision: self == Scoring::RocAuc,
        }
    }

    /// The score of held-out predictions; None where it is not defined (a roc_auc over
    /// one class, a non-finite value).
    pub fn score(self, held: &Held) -> Option<f64> {
        let v = match (self, held) {
            (_, Held::Regression { y, mean, var, outputs: 1 }) => regression(self, y, mean, var.as_deref())?,
            // Several outputs: the mean over outputs of each one's score (scikit-learn's
            // multioutput="uniform_average"; for the density, over rows and outputs).
            (_, Held::Regression { y, mean, var, outputs }) => {
                let t = *outputs;
                let column = |v: &[f64], k: usize| v.iter().skip(k).step_by(t).copied().collect::<Vec<f64>>();
                let mut sum = 0.0;
                for k in 0..t {
                    let var_k = var.as_deref().map(|v| column(v, k));
                    sum += regression(self, &column(y, k), &column(mean, k), var_k.as_deref())?;
                }
                sum / t as f64
            }
            (_, Held::Classification(c)) => classification(self, c)?,
        };
        v.is_finite().then_some(v)
    }
}

/// Outputs a scoring needs besides point predictions. `decision` is preferred to
/// probabilities for roc_auc where the model has one (as scikit-learn's scorer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Needs {
    pub variance: bool,
    pub probabilities: bool,
    pub decision: bool,
}

/// Held-out targets and what the model predicted for them.
#[derive(Debug, Clone, PartialEq)]
pub enum Held {
    /// `outputs` values per row, row-major (1 for a 1-D y).
    Regression {
        y: Vec<f64>,
        mean: Vec<f64>,
        /// Predictive variance with the noise included (for the density).
        var: Option<Vec<f64>>,
        outputs: usize,
    },
    Classification(HeldClasses),
}

/// A classifier's held-out rows: class indices into the whole problem's classes.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldClasses {
    pub classes: usize,
    pub y: Vec<usize>,
    pub predicted: Vec<usize>,
    /// m x classes (zero columns for classes the fold's training rows lacked).
    pub probabilities: Option<DMatrix<f64>>,
    /// Binary problems: positive for the second class.
    pub decision: Option<Vec<f64>>,
}

impl Held {
    /// The rows of every part as one (leave-one-out pools its n predictions).
    pub fn concat(parts: Vec<Held>) -> Held {
        let mut parts = parts.into_iter();
        let first = parts.next().expect("at least one part");
        parts.fold(first, |acc, part| match (acc, part) {
            (
                Held::Regression { mut y, mut mean, mut var, outputs },
                Held::Regression { y: y2, mean: m2, var: v2, .. },
            ) => {
                y.extend(y2);
                mean.extend(m2);
                if let (Some(v), Some(v2)) = (var.as_mut(), v2) {
                    v.extend(v2);
                }
                Held::Regression { y, mean, var, outputs }
            }
            (Held::Classification(mut a), Held::Classification(b)) => {
                a.y.extend(b.y);
                a.predicted.extend(b.predicted);
                a.probabilities = match (a.probabilities, b.probabilities) {
                    (Some(p), Some(q)) => {
                        let (m, k) = p.shape();
                        let mut out = p.resize_vertically(m + q.nrows(), 0.0);
                        out.rows_mut(m, q.nrows()).copy_from(&q);
                        debug_assert_eq!(out.ncols(), k);
                        Some(out)
                    }
                    _ => None,
                };
                a.decision = match (a.decision, b.decision) {
                    (Some(mut d), Some(e)) => {
                        d.extend(e);
                        Some(d)
                    }
                    _ => None,
                };
                Held::Classification(a)
            }
            _ => unreachable!("one task per search"),
        })
    }
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (mut sum, mut n) = (0.0, 0usize);
    for v in values {
        sum += v;
        n += 1;
    }
    sum / n as f64
}

fn regression(scoring: Scoring, y: &[f64], pred: &[f64], var: Option<&[f64]>) -> Option<f64> {
    let errors = || y.iter().zip(pred).map(|(a, b)| a - b);
    Some(match scoring {
        Scoring::R2 => {
            // scikit-learn's r2_score with force_finite: 1 for a perfect fit of a
            // constant target, 0 for an imperfect one.
            let ybar = mean(y.iter().copied());
            let num: f64 = errors().map(|e| e * e).sum();
            let den: f64 = y.iter().map(|v| (v - ybar) * (v - ybar)).sum();
            if den == 0.0 {
                if num == 0.0 {
                    1.0
                } else {
                    0.0
                }
            } else {
                1.0 - num / den
            }
        }
        Scoring::NegMeanSquaredError => -mean(errors().map(|e| e * e)),
        Scoring::NegRootMeanSquaredError => -mean(errors().map(|e| e * e)).sqrt(),
        Scoring::NegMeanAbsoluteError => -mean(errors().map(f64::abs)),
        Scoring::MeanLogPredictiveDensity => {
            let var = var?;
            let ln_2pi = (2.0 * std::f64::consts::PI).ln();
            mean(errors().zip(var).map(|(e, v)| -0.5 * (ln_2pi + v.ln()) - e * e / (2.0 * v)))
        }
        _ => return None,
    })
}

fn classification(scoring: Scoring, c: &HeldClasses) -> Option<f64> {
    let m = c.y.len();
    Some(match scoring {
        Scoring::Accuracy => c.y.iter().zip(&c.predicted).filter(|(a, b)| a == b).count() as f64 / m as f64,
        Scoring::BalancedAccuracy => {
            // The mean recall over the classes present in y (scikit-learn drops the
            // others, with a warning).
            let mut count = vec![0usize; c.classes];
            let mut right = vec![0usize; c.classes];
            for (&t, &p) in c.y.iter().zip(&c.predicted) {
                count[t] += 1;
                right[t] += usize::from(t == p);
            }
            mean((0..c.classes).filter(|&k| count[k] > 0).map(|k| right[k] as f64 / count[k] as f64))
        }
        Scoring::NegLogLoss => {
            let p = c.probabilities.as_ref()?;
            // The negated log loss, probabilities clipped to [eps, 1 - eps] (scikit-learn).
            let eps = f64::EPSILON;
            mean(c.y.iter().enumerate().map(|(i, &t)| p[(i, t)].clamp(eps, 1.0 - eps).ln()))
        }
        Scoring::RocAuc => {
            if c.classes != 2 {
                return None;
            }
            let scores: Vec<f64> = match (&c.decision, &c.probabilities) {
                (Some(d), _) => d.clone(),
                (None, Some(p)) => p.column(1).iter().copied().collect(),
                (None, None) => return None,
            };
            roc_auc(&c.y, &scores)?
        }
        _ => return None,
    })
}

/// The area under the ROC curve of `scores` for class 1 against class 0: the
/// Mann-Whitney statistic with ties counted half, which equals scikit-learn's trapezoid
/// area. None when either class is absent.
fn roc_auc(y: &[usize], scores: &[f64]) -> Option<f64> {
    let mut order: Vec<usize> = (0..y.len()).collect();
    order.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]));
    // Mid-ranks (1-based) of tied runs.
    let mut rank = vec![0.0; y.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && scores[order[j + 1]] == scores[order[i]] {
            j += 1;
        }
        let mid = (i + j) as f64 / 2.0 + 1.0;
        for &o in &order[i..=j] {
            rank[o] = mid;
        }
        i = j + 1;
    }
    let positives = y.iter().filter(|&&t| t == 1).count();
    let negatives = y.len() - positives;
    if positives == 0 || negatives == 0 {
        return None;
    }
    let rank_sum: f64 = y.iter().zip(&rank).filter(|(&t, _)| t == 1).map(|(_, r)| r).sum();
    let p = positives as f64;
    Some((rank_sum - p * (p + 1.0) / 2.0) / (p * negatives as f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(y: &[f64], mean: &[f64]) -> Held {
        Held::Regression { y: y.to_vec(), mean: mean.to_vec(), var: None, outputs: 1 }
    }

    fn cls(y: &[usize], predicted: &[usize], k: usize) -> HeldClasses {
        HeldClasses { classes: k, y: y.to_vec(), predicted: predicted.to_vec(), probabilities: None, decision: None }
    }

    #[test]
    fn regression_scores_follow_their_definitions() {
        let h = reg(&[1.0, 2.0, 4.0], &[1.5, 2.0, 3.0]);
        // Errors -0.5, 0, 1: squares 0.25, 0, 1; |.| 0.5, 0, 1; y mean 7/3.
        let ss_tot = (1.0f64 - 7.0 / 3.0).powi(2) + (2.0f64 - 7.0 / 3.0).powi(2) + (4.0f64 - 7.0 / 3.0).powi(2);
        assert!((Scoring::R2.score(&h).unwrap() - (1.0 - 1.25 / ss_tot)).abs() < 1e-15);
        assert!((Scoring::NegMeanSquaredError.score(&h).unwrap() + 1.25 / 3.0).abs() < 1e-15);
        assert!((Scoring::NegRootMeanSquaredError.score(&h).unwrap() + (1.25f64 / 3.0).sqrt()).abs() < 1e-15);
        assert!((Scoring::NegMeanAbsoluteError.score(&h).unwrap() + 0.5).abs() < 1e-15);
        // A constant target: 1 when predicted exactly, else 0 (scikit-learn's force_finite).
        assert_eq!(Scoring::R2.score(&reg(&[2.0, 2.0], &[2.0, 2.0])), Some(1.0));
        assert_eq!(Scoring::R2.score(&reg(&[2.0, 2.0], &[2.0, 1.0])), Some(0.0));
        let dens = Held::Regression { y: vec![0.0], mean: vec![0.0], var: Some(vec![1.0]), outputs: 1 };
        let want = -0.5 * (2.0 * std::f64::consts::PI).ln();
        assert!((Scoring::MeanLogPredictiveDensity.score(&dens).unwrap() - want).abs() < 1e-15);
    }

    #[test]
    fn classification_scores_follow_their_definitions() {
        let c = cls(&[0, 0, 0, 1, 2, 2], &[0, 1, 0, 1, 2, 0], 3);
        let h = Held::Classification(c.clone());
        assert_eq!(Scoring::Accuracy.score(&h), Some(4.0 / 6.0));
        let want = (2.0 / 3.0 + 1.0 + 0.5) / 3.0;
        assert!((Scoring::BalancedAccuracy.score(&h).unwrap() - want).abs() < 1e-15);
        // A class missing from y is left out of the mean.
        let two = Held::Classification(cls(&[0, 0, 1], &[0, 2, 1], 3));
        assert!((Scoring::BalancedAccuracy.score(&two).unwrap() - 0.75).abs() < 1e-15);
        let p = DMatrix::from_row_slice(2, 2, &[0.8, 0.2, 0.0, 1.0]);
        let ll = HeldClasses { probabilities: Some(p), ..cls(&[0, 0], &[0, 1], 2) };
        // scikit-learn's log_loss of these is 18.13339847021568; its scorer negates it.
        let want = (0.8f64.ln() + f64::EPSILON.ln()) / 2.0;
        assert!((want + 18.13339847021568).abs() < 1e-12);
        assert!((Scoring::NegLogLoss.score(&Held::Classification(ll)).unwrap() - want).abs() < 1e-12);
    }

    #[test]
    fn roc_auc_counts_ties_half_and_needs_both_classes() {
        // Pairs (pos, neg): positives 0.8, 0.4; negatives 0.4, 0.1: 0.8 beats both, 0.4 ties
        // one and beats one: (2 + 1.5) / 4.
        let d = HeldClasses { decision: Some(vec![0.8, 0.4, 0.4, 0.1]), ..cls(&[1, 1, 0, 0], &[1, 1, 1, 0], 2) };
        assert_eq!(Scoring::RocAuc.score(&Held::Classification(d)), Some(0.875));
        let one = HeldClasses { decision: Some(vec![0.1, 0.2]), ..cls(&[1, 1], &[1, 1], 2) };
        assert_eq!(Scoring::RocAuc.score(&Held::Classification(one)), None);
    }

    #[test]
    fn pooled_parts_keep_their_rows_in_order() {
        let a = Held::Regression { y: vec![1.0], mean: vec![2.0], var: Some(vec![0.5]), outputs: 1 };
        let b = Held::Regression { y: vec![3.0], mean: vec![4.0], var: Some(vec![0.25]), outputs: 1 };
        assert_eq!(
            Held::concat(vec![a, b]),
            Held::Regression { y: vec![1.0, 3.0], mean: vec![2.0, 4.0], var: Some(vec![0.5, 0.25]), outputs: 1 }
        );
    }
}

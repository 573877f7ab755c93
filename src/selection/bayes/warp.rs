//! The told values as the surrogate sees them: a monotone warp that keeps the good end
//! linear and compresses the bad tail logarithmically, then standardisation.
//!
//! A cross-validated score has a narrow good region and huge losses elsewhere (an r2 of
//! -1e3 next to 0.83): standardised as they are, the good values sit in a sliver at the
//! top, the GP sees them as flat, and expected improvement wanders (issue 53: `bayes`
//! found worse kernel ridges than `random`). Here a value v becomes z = (v - median) / s,
//! s a robust spread (the interquartile range / 1.349, else the standard deviation);
//! z >= -2 is kept and below, z becomes -2 - ln(1 + (-2 - z)), continuous with slope 1,
//! so a loss a hundred spreads below the median lands at -6.6. Values with no such tail
//! (Hartmann6's) are only standardised. The warp's parameters are fixed at a refit, so
//! that the values told between refits are warped alike.

/// Spreads below the median where the compression starts.
const KNEE: f64 = 2.0;

/// A fitted warp: median, spread, and the mean and standard deviation of the warped values.
#[derive(Debug, Clone, PartialEq)]
pub struct Warp {
    median: f64,
    spread: f64,
    mean: f64,
    std: f64,
}

/// numpy's quantile with linear interpolation, of sorted values (q in 0..=1).
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    let at = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (at - lo as f64)
}

impl Warp {
    /// The warp of these values (at least one).
    pub fn fit(values: &[f64]) -> Warp {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let median = quantile(&sorted, 0.5);
        let iqr = quantile(&sorted, 0.75) - quantile(&sorted, 0.25);
        let (_, std) = crate::estimator::targets::outputs::normalisation(values);
        let spread = if iqr > 0.0 { iqr / 1.349 } else { std };
        let mut warp = Warp { median, spread, mean: 0.0, std: 1.0 };
        let bent: Vec<f64> = values.iter().map(|&v| warp.bend(v)).collect();
        let (mean, std) = crate::estimator::targets::outputs::normalisation(&bent);
        warp.mean = mean;
        warp.std = std;
        warp
    }

    fn bend(&self, v: f64) -> f64 {
        let z = (v - self.median) / self.spread;
        if z >= -KNEE {
            z
        } else {
            -KNEE - (-KNEE - z).ln_1p()
        }
    }

    /// A value as the surrogate models it.
    pub fn apply(&self, v: f64) -> f64 {
        (self.bend(v) - self.mean) / self.std
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_warp_is_monotone_standardises_and_compresses_only_the_bad_tail() {
        let values = [0.83, 0.82, 0.8, 0.75, 0.6, 0.1, -3.0, -1000.0];
        let w = Warp::fit(&values);
        let y: Vec<f64> = values.iter().map(|&v| w.apply(v)).collect();
        assert!(y.windows(2).all(|p| p[0] > p[1]), "{y:?}");
        let mean = y.iter().sum::<f64>() / y.len() as f64;
        let var = y.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / y.len() as f64;
        assert!(mean.abs() < 1e-12 && (var - 1.0).abs() < 1e-12);
        // The good values stay apart: 0.83 and 0.82 a hundred times farther than plain
        // standardisation leaves them (0.01 over a standard deviation of about 350).
        let (_, std) = crate::estimator::targets::outputs::normalisation(&values);
        assert!(y[0] - y[1] > 100.0 * 0.01 / std, "{y:?}");
        // Linear above the knee: equal steps give equal warped steps, and values without
        // a far tail are only standardised.
        let w = Warp::fit(&[0.0, 1.0, 2.0, 3.0, 4.0]);
        assert!(((w.apply(4.0) - w.apply(3.0)) - (w.apply(1.0) - w.apply(0.0))).abs() < 1e-12);
        // Constant values: no division by zero.
        let w = Warp::fit(&[2.0, 2.0]);
        assert_eq!(w.apply(2.0), 0.0);
    }
}

//! The kernel against the rows it meets: what can only be checked once they are known
//! (their kind, the feature count, string lengths), the mixtures fitted to them, and the
//! cost of one kernel value over them.

use super::hyper::{Hyper, Scales};
use super::{Kernel, Mixture, MixtureKernel, Points, RbfWidth, RowKind};
use crate::spec::FieldError;

/// Fits (or finds) the mixture of a generative or Fisher part, given its settings and its
/// pointer within the kernel document.
pub type MixtureFitter<'a, E> = dyn FnMut(&MixtureKernel, &str) -> Result<std::sync::Arc<Mixture>, E> + 'a;

impl Kernel {
    /// Checks what can only be checked once the feature count d is known (ARD lists).
    /// Errors point into the kernel document (`/length_scale`, `/kernels/1/length_scale`).
    pub fn check_features(&self, d: usize) -> Result<(), FieldError> {
        self.check_features_at(d, "")
    }

    fn check_features_at(&self, d: usize, path: &str) -> Result<(), FieldError> {
        let ard = match self {
            Kernel::Rbf(RbfWidth::LengthScale(h))
            | Kernel::Exponential { length_scale: h }
            | Kernel::Matern { length_scale: h, .. } => Some(h),
            _ => None,
        };
        if let Some(Hyper { value: Scales::PerFeature(ls), .. }) = ard {
            if ls.len() != d {
                return Err(FieldError::invalid(
                    format!("{path}/length_scale"),
                    format!("has {} entries but the data has {d} features", ls.len()),
                ));
            }
        }
        let fixed_width = match self {
            Kernel::Mahalanobis(m) => Some(("matrix", m.matrix().nrows())),
            Kernel::Generative(g) | Kernel::Fisher(g) => g.mixture.as_ref().map(|m| ("mixture/means", m.d())),
            _ => None,
        };
        if let Some((field, width)) = fixed_width.filter(|&(_, w)| w != d) {
            return Err(FieldError::invalid(
                format!("{path}/{field}"),
                format!("is for {width} features but the data has {d}"),
            ));
        }
        match self {
            Kernel::Sum(ks) | Kernel::Product(ks) => {
                for (i, k) in ks.iter().enumerate() {
                    k.check_features_at(d, &format!("{path}/kernels/{i}"))?;
                }
                Ok(())
            }
            Kernel::Scale { kernel, .. } => kernel.check_features_at(d, &format!("{path}/kernel")),
            _ => Ok(()),
        }
    }

    /// Errors (pointing at the part that disagrees) when a part of this kernel needs rows
    /// of another kind than `rows`; constant and white take any kind.
    pub fn check_rows(&self, rows: RowKind) -> Result<(), FieldError> {
        self.check_rows_at(rows, "")
    }

    fn check_rows_at(&self, rows: RowKind, path: &str) -> Result<(), FieldError> {
        let needs = match self {
            Kernel::Sum(ks) | Kernel::Product(ks) => {
                for (i, k) in ks.iter().enumerate() {
                    k.check_rows_at(rows, &format!("{path}/kernels/{i}"))?;
                }
                return Ok(());
            }
            Kernel::Scale { kernel, .. } => return kernel.check_rows_at(rows, &format!("{path}/kernel")),
            Kernel::Constant { .. } | Kernel::White { .. } => return Ok(()),
            Kernel::Spectrum { .. } | Kernel::Subsequence { .. } => RowKind::Text,
            Kernel::Set { .. } => RowKind::Tokens,
            _ => RowKind::Numeric,
        };
        if needs == rows {
            return Ok(());
        }
        Err(FieldError::invalid(
            path,
            format!("a {} kernel takes {}, but the rows are {}", self.type_name(), needs.describe(), rows.describe()),
        ))
    }

    /// Rough flops of one kernel value between a point of `x` and a query point, for
    /// deciding where a prediction runs: d for numeric rows (whatever the kernel, as the
    /// matrix-product paths make it), and for strings and token sets what the kernel's
    /// own work grows with: the length (spectrum, set), or length times |x| |z|
    /// (subsequence), taking x's average row as the query's.
    pub fn pair_cost(&self, x: &Points) -> f64 {
        if x.kind() == RowKind::Numeric {
            return x.d() as f64;
        }
        let n = x.n().max(1) as f64;
        let mean_len = match (x.texts(), x.token_lists()) {
            (Some(t), _) => t.iter().map(|s| s.len()).sum::<usize>() as f64 / n,
            (_, Some(t)) => t.iter().map(|r| r.len()).sum::<usize>() as f64 / n,
            _ => 0.0,
        };
        self.pair_cost_at(mean_len)
    }

    fn pair_cost_at(&self, len: f64) -> f64 {
        match self {
            Kernel::Sum(ks) | Kernel::Product(ks) => ks.iter().map(|k| k.pair_cost_at(len)).sum(),
            Kernel::Scale { kernel, .. } => kernel.pair_cost_at(len),
            Kernel::Subsequence { length, .. } => 2.0 * *length as f64 * len * len,
            Kernel::Constant { .. } | Kernel::White { .. } => 1.0,
            _ => len,
        }
    }

    /// Errors (at `/x`) when a string kernel sees nothing in any row: every string is
    /// shorter than its k-mers or subsequences, so that part is 0 everywhere and nothing
    /// can be learnt from it. Single short strings are fine (their kernel values are 0).
    pub fn check_lengths(&self, x: &Points) -> Result<(), FieldError> {
        let Some(texts) = x.texts() else { return Ok(()) };
        let longest = texts.iter().map(|s| s.len()).max().unwrap_or(0);
        self.check_lengths_at(longest)
    }

    fn check_lengths_at(&self, longest: usize) -> Result<(), FieldError> {
        let (what, need) = match self {
            Kernel::Sum(ks) | Kernel::Product(ks) => return ks.iter().try_for_each(|k| k.check_lengths_at(longest)),
            Kernel::Scale { kernel, .. } => return kernel.check_lengths_at(longest),
            Kernel::Spectrum { k, .. } => ("k-mers", *k),
            Kernel::Subsequence { length, .. } => ("subsequences", *length),
            _ => return Ok(()),
        };
        if longest >= need {
            return Ok(());
        }
        Err(FieldError::invalid(
            "/x",
            format!(
                "every string has fewer than {need} characters, so the {} kernel's {what} of {need} find nothing in any row",
                self.type_name()
            ),
        ))
    }

    /// The same kernel with every generative and Fisher part's mixture set by `fit`
    /// (called with the part's settings and pointer; parts given a mixture keep it).
    pub fn with_mixtures<E>(&self, fit: &mut MixtureFitter<'_, E>) -> Result<Kernel, E> {
        self.with_mixtures_at("", fit)
    }

    fn with_mixtures_at<E>(&self, path: &str, fit: &mut MixtureFitter<'_, E>) -> Result<Kernel, E> {
        Ok(match self {
            Kernel::Generative(g) | Kernel::Fisher(g) if g.mixture.is_none() => {
                let g = MixtureKernel { mixture: Some(fit(g, path)?), ..g.clone() };
                if matches!(self, Kernel::Generative(_)) {
                    Kernel::Generative(g)
                } else {
                    Kernel::Fisher(g)
                }
            }
            Kernel::Sum(ks) => Kernel::Sum(
                ks.iter()
                    .enumerate()
                    .map(|(i, k)| k.with_mixtures_at(&format!("{path}/kernels/{i}"), fit))
                    .collect::<Result<_, _>>()?,
            ),
            Kernel::Product(ks) => Kernel::Product(
                ks.iter()
                    .enumerate()
                    .map(|(i, k)| k.with_mixtures_at(&format!("{path}/kernels/{i}"), fit))
                    .collect::<Result<_, _>>()?,
            ),
            Kernel::Scale { factor, kernel } => Kernel::Scale {
                factor: factor.clone(),
                kernel: Box::new(kernel.with_mixtures_at(&format!("{path}/kernel"), fit)?),
            },
            other => other.clone(),
        })
    }

    /// Whether this kernel is defined on numeric rows of any width, as kernel PCA's
    /// inverse map needs (it runs the kernel on the embeddings): not for a precomputed
    /// kernel, string and set kernels, per-feature length scales, a Mahalanobis matrix or
    /// a mixture fitted to the rows.
    pub fn any_width(&self) -> bool {
        match self {
            Kernel::Sum(ks) | Kernel::Product(ks) => ks.iter().all(Kernel::any_width),
            Kernel::Scale { kernel, .. } => kernel.any_width(),
            Kernel::Rbf(RbfWidth::LengthScale(h))
            | Kernel::Exponential { length_scale: h }
            | Kernel::Matern { length_scale: h, .. } => matches!(h.value, Scales::Isotropic(_)),
            Kernel::Precomputed
            | Kernel::Spectrum { .. }
            | Kernel::Subsequence { .. }
            | Kernel::Set { .. }
            | Kernel::Mahalanobis(_)
            | Kernel::Generative(_)
            | Kernel::Fisher(_) => false,
            _ => true,
        }
    }

    /// Whether a part of this kernel has `gamma: "scale"` still to decide.
    pub fn has_scale(&self) -> bool {
        match self {
            Kernel::Rbf(RbfWidth::Gamma(g))
            | Kernel::Polynomial { gamma: g, .. }
            | Kernel::Sigmoid { gamma: g, .. } => g.is_scale(),
            Kernel::Sum(ks) | Kernel::Product(ks) => ks.iter().any(Kernel::has_scale),
            Kernel::Scale { kernel, .. } => kernel.has_scale(),
            _ => false,
        }
    }

    /// This kernel with every `gamma: "scale"` decided for the training rows `x`:
    /// 1 / (d var(x)) over all of x's values (population variance), or 1 when they are
    /// all equal, as scikit-learn. `x` must be numeric ([`Kernel::check_rows`] says so
    /// first: every kernel with a gamma takes numbers).
    pub fn with_scale(&self, x: &Points) -> Kernel {
        if !self.has_scale() {
            return self.clone();
        }
        let m = x.as_matrix();
        let count = m.len() as f64;
        let mean = m.iter().sum::<f64>() / count;
        let var = m.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / count;
        let gamma = if var == 0.0 { 1.0 } else { 1.0 / (x.d() as f64 * var) };
        self.with_gamma(gamma)
    }

    fn with_gamma(&self, value: f64) -> Kernel {
        match self {
            Kernel::Rbf(RbfWidth::Gamma(g)) => Kernel::Rbf(RbfWidth::Gamma(g.resolved(value))),
            Kernel::Polynomial { degree, gamma, coef0 } => {
                Kernel::Polynomial { degree: *degree, gamma: gamma.resolved(value), coef0: coef0.clone() }
            }
            Kernel::Sigmoid { gamma, coef0 } => Kernel::Sigmoid { gamma: gamma.resolved(value), coef0: coef0.clone() },
            Kernel::Sum(ks) => Kernel::Sum(ks.iter().map(|k| k.with_gamma(value)).collect()),
            Kernel::Product(ks) => Kernel::Product(ks.iter().map(|k| k.with_gamma(value)).collect()),
            Kernel::Scale { factor, kernel } => {
                Kernel::Scale { factor: factor.clone(), kernel: Box::new(kernel.with_gamma(value)) }
            }
            other => other.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scale_gammas_are_decided_by_the_rows_everywhere_in_the_kernel() {
        let k = Kernel::from_json(&json!({"type": "sum", "kernels": [
            {"type": "rbf", "gamma": "scale"},
            {"type": "scale", "factor": 2.0, "kernel": {"type": "polynomial", "gamma": "scale", "degree": 2}},
            {"type": "sigmoid", "gamma": 0.5}
        ]}))
        .unwrap();
        assert!(k.has_scale());
        assert_eq!(k.to_json()["kernels"][0]["gamma"], json!("scale"));
        // Values 0, 2, 4, 6 over d = 2: mean 3, population variance 5.
        let x = Points::from_rows(&[vec![0.0, 2.0], vec![4.0, 6.0]]);
        let fitted = k.with_scale(&x).to_json();
        assert_eq!(fitted["kernels"][0]["gamma"], json!(0.1));
        assert_eq!(fitted["kernels"][1]["kernel"]["gamma"], json!(0.1));
        assert_eq!(fitted["kernels"][2]["gamma"], json!(0.5));
        let flat = Points::from_rows(&[vec![3.0, 3.0], vec![3.0, 3.0]]);
        assert_eq!(k.with_scale(&flat).to_json()["kernels"][0]["gamma"], json!(1.0));
        assert!(!k.with_scale(&x).has_scale());
    }

    #[test]
    fn ard_length_must_match_feature_count_at_any_depth() {
        let k = Kernel::from_json(&json!({"type": "rbf", "length_scale": [1.0, 2.0]})).unwrap();
        assert!(k.check_features(2).is_ok());
        assert_eq!(k.check_features(3).unwrap_err().pointer, "/length_scale");
        let nested = json!({"type": "sum", "kernels": [
            {"type": "white"},
            {"type": "scale", "factor": 2.0, "kernel": {"type": "matern", "length_scale": [1.0, 2.0, 3.0]}}
        ]});
        let k = Kernel::from_json(&nested).unwrap();
        assert!(k.check_features(3).is_ok());
        assert_eq!(k.check_features(2).unwrap_err().pointer, "/kernels/1/kernel/length_scale");
    }

    /// Where a prediction runs depends on this: a subsequence kernel over long strings must
    /// not pass for cheap (it would run on the async threads).
    #[test]
    fn pair_cost_grows_with_the_string_kernels_work() {
        let k = |v| Kernel::from_json(&v).unwrap();
        let x = Points::from_rows(&[vec![0.0; 7]]);
        assert_eq!(k(json!({"type": "sum", "kernels": [{"type": "rbf"}, {"type": "linear"}]})).pair_cost(&x), 7.0);
        let t = Points::from_texts(["a".repeat(40), "b".repeat(60)]);
        let spectrum = k(json!({"type": "spectrum"})).pair_cost(&t);
        let subsequence = k(json!({"type": "subsequence", "length": 3})).pair_cost(&t);
        assert_eq!(spectrum, 50.0);
        assert_eq!(subsequence, 2.0 * 3.0 * 50.0 * 50.0);
    }
}

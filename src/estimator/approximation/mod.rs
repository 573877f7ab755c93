//! Approximations: the `approximation` params of every kind - whether a kernel_ridge,
//! gaussian_process, svm or kernel_logistic fit solves the n x n problem or works through
//! M inducing points (Nystrom; for the GP kinds also a variational GP), and how those
//! are chosen. Other models accept only `auto` and `exact`; which kind takes which form
//! is the catalogue's (`ModelSpec::from_json` refuses the others).
//!
//! The room also holds what the approximate fits share: the inducing points (`inducing`:
//! k-means and row sampling), and Nystrom's own solve with the streamed kernel statistics
//! the sparse GP shares (`nystrom`). The linear machines on Nystrom features that the
//! classifiers at scale fit are `estimator/nystrom_features.rs` (they answer as dual
//! expansions, which the params here must not depend on); the variational GP has its own
//! room (`estimator/variational/`).

pub mod inducing;
pub mod nystrom;

use crate::spec::{FieldError, ObjectReader};
use serde_json::{json, Map, Value};

/// `inducing_points` when not given: min(n, this).
pub const DEFAULT_INDUCING_POINTS: usize = 1024;
/// The most inducing points any fit takes (above: 422, before the memory estimate).
pub const MAX_INDUCING_POINTS: u64 = 50_000;
/// A variational fit's `inducing_points` when not given: min(n, this).
pub const VARIATIONAL_INDUCING_POINTS: usize = 512;
/// The most inducing points a variational fit takes (M^2 per latent, and M^3 per step).
pub const MAX_VARIATIONAL_INDUCING_POINTS: u64 = 8192;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Exact up to `MERCER_EXACT_MAX_ROWS` rows when the exact fit's memory fits, else
    /// nystrom; resolved before the fit (`ModelSpec::resolve_approximation`).
    Auto,
    Exact,
    Nystrom,
    /// A stochastic variational GP (`estimator/variational/`).
    Variational,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Auto => "auto",
            Mode::Exact => "exact",
            Mode::Nystrom => "nystrom",
            Mode::Variational => "variational",
        }
    }
}

/// How inducing points are chosen from the training rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selection {
    /// Rows drawn without replacement with the seed.
    Uniform,
    /// k-means++ from the seed, then Lloyd iterations; the centres.
    Kmeans,
}

impl Selection {
    pub fn name(self) -> &'static str {
        match self {
            Selection::Uniform => "uniform",
            Selection::Kmeans => "kmeans",
        }
    }
}

/// Checked approximation params of kernel_ridge and gaussian_process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Approximation {
    pub mode: Mode,
    /// M; None: min(n, 1024).
    pub inducing_points: Option<u64>,
    /// None: the default for the rows ([`Approximation::selection_for`]).
    pub selection: Option<Selection>,
    /// Exact fits: report the closed-form leave-one-out in `training.loo`.
    pub loo: bool,
}

impl Default for Approximation {
    fn default() -> Self {
        Approximation { mode: Mode::Auto, inducing_points: None, selection: None, loo: false }
    }
}

impl Approximation {
    /// Reads `approximation`, `inducing_points`, `inducing_selection` and `loo`.
    pub fn read(obj: &mut ObjectReader<'_>) -> Result<Approximation, FieldError> {
        let mut approx = Approximation::read_without_loo(obj)?;
        approx.loo = obj.bool("loo")?.unwrap_or(false);
        approx.check_loo(&obj.pointer("loo"))?;
        Ok(approx)
    }

    /// The classifiers' form (`svm`, `kernel_logistic`): no `loo`, which they do not have.
    pub fn read_without_loo(obj: &mut ObjectReader<'_>) -> Result<Approximation, FieldError> {
        let mode = match obj.str("approximation")? {
            None | Some("auto") => Mode::Auto,
            Some("exact") => Mode::Exact,
            Some("nystrom") => Mode::Nystrom,
            Some("variational") => Mode::Variational,
            Some(other) => {
                return Err(FieldError::invalid(
                    obj.pointer("approximation"),
                    format!("unknown approximation `{other}`; expected auto, exact, nystrom or variational"),
                ))
            }
        };
        let inducing_points = obj.u64("inducing_points")?;
        if inducing_points == Some(0) {
            return Err(FieldError::invalid(obj.pointer("inducing_points"), "must be at least 1"));
        }
        let most = if mode == Mode::Variational { MAX_VARIATIONAL_INDUCING_POINTS } else { MAX_INDUCING_POINTS };
        if inducing_points.is_some_and(|m| m > most) {
            return Err(FieldError::invalid(obj.pointer("inducing_points"), format!("must be at most {most}")));
        }
        let selection = match obj.str("inducing_selection")? {
            None => None,
            Some("kmeans") => Some(Selection::Kmeans),
            Some("uniform") => Some(Selection::Uniform),
            Some(other) => {
                return Err(FieldError::invalid(
                    obj.pointer("inducing_selection"),
                    format!("unknown inducing_selection `{other}`; expected uniform or kmeans"),
                ))
            }
        };
        Ok(Approximation { mode, inducing_points, selection, loo: false })
    }

    /// `loo` needs the exact solve: with nystrom or variational (asked for, or what auto
    /// resolved to) there is no n x n factor to read it from.
    pub fn check_loo(&self, pointer: &str) -> Result<(), FieldError> {
        if self.loo && matches!(self.mode, Mode::Nystrom | Mode::Variational) {
            return Err(FieldError::invalid(
                pointer,
                format!(
                    "leave-one-out is computed from the exact fit only; this fit is {} (set approximation to exact, or loo to false)",
                    self.mode.name()
                ),
            ));
        }
        Ok(())
    }

    /// For models without an approximate form: `approximation` may only be auto or exact.
    pub fn read_exact_only(obj: &mut ObjectReader<'_>) -> Result<(), FieldError> {
        match obj.str("approximation")? {
            None | Some("auto" | "exact") => Ok(()),
            Some(other) => Err(FieldError::invalid(
                obj.pointer("approximation"),
                format!("`{other}` is not available for this model: only auto and exact are"),
            )),
        }
    }

    /// How the inducing points are chosen from rows of `kind`: as asked, else k-means for
    /// numbers and uniform for strings and token lists (k-means needs coordinates).
    pub fn selection_for(&self, kind: crate::kernel::RowKind) -> Selection {
        self.selection.unwrap_or(match kind {
            crate::kernel::RowKind::Numeric => Selection::Kmeans,
            _ => Selection::Uniform,
        })
    }

    /// M for n training rows.
    pub fn m(&self, n: usize) -> usize {
        let default = match self.mode {
            Mode::Variational => VARIATIONAL_INDUCING_POINTS,
            _ => DEFAULT_INDUCING_POINTS,
        };
        self.inducing_points.map_or(n.min(default), |m| m as usize)
    }

    /// Adds the params' JSON form to `out`.
    pub fn write_json(&self, out: &mut Map<String, Value>) {
        self.write_json_without_loo(out);
        out.insert("loo".into(), json!(self.loo));
    }

    /// The classifiers' JSON form: [`Approximation::write_json`] without `loo`.
    pub fn write_json_without_loo(&self, out: &mut Map<String, Value>) {
        out.insert("approximation".into(), json!(self.mode.name()));
        out.insert("inducing_points".into(), json!(self.inducing_points));
        // null: the default for the rows (kmeans for numbers, uniform for strings).
        out.insert("inducing_selection".into(), json!(self.selection.map(Selection::name)));
    }

    pub fn is_nystrom(&self) -> bool {
        self.mode == Mode::Nystrom
    }

    /// Whether the fit works through inducing points (nystrom or variational).
    pub fn is_sparse(&self) -> bool {
        matches!(self.mode, Mode::Nystrom | Mode::Variational)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(v: Value) -> Result<Approximation, FieldError> {
        let mut obj = ObjectReader::new(&v, "/params").unwrap();
        let a = Approximation::read(&mut obj)?;
        obj.finish()?;
        Ok(a)
    }

    #[test]
    fn params_are_read_checked_and_echoed() {
        assert_eq!(read(json!({})).unwrap(), Approximation::default());
        let a =
            read(json!({"approximation": "nystrom", "inducing_points": 7, "inducing_selection": "uniform"})).unwrap();
        assert_eq!((a.mode, a.m(100), a.selection), (Mode::Nystrom, 7, Some(Selection::Uniform)));
        let default = read(json!({"approximation": "nystrom"})).unwrap();
        assert_eq!(default.selection_for(crate::kernel::RowKind::Numeric), Selection::Kmeans);
        assert_eq!(default.selection_for(crate::kernel::RowKind::Text), Selection::Uniform);
        assert_eq!(default.selection_for(crate::kernel::RowKind::Tokens), Selection::Uniform);
        assert_eq!(Approximation::default().m(5000), 1024);
        assert_eq!(Approximation::default().m(50), 50);
        let mut out = Map::new();
        a.write_json(&mut out);
        assert_eq!(read(Value::Object(out)).unwrap(), a);
        for (v, at) in [
            (json!({"approximation": "sparse"}), "/params/approximation"),
            (json!({"inducing_points": 0}), "/params/inducing_points"),
            (json!({"inducing_points": 50_001}), "/params/inducing_points"),
            (json!({"inducing_selection": "random"}), "/params/inducing_selection"),
            (json!({"loo": 1}), "/params/loo"),
            (json!({"loo": true, "approximation": "nystrom"}), "/params/loo"),
        ] {
            assert_eq!(read(v).unwrap_err().pointer, at);
        }
        let v = json!({"approximation": "nystrom"});
        let mut obj = ObjectReader::new(&v, "/params").unwrap();
        assert_eq!(Approximation::read_exact_only(&mut obj).unwrap_err().pointer, "/params/approximation");
    }
}

//! Stochastic variational Gaussian processes (SVGP: Hensman, Fusi & Lawrence 2013;
//! Hensman, Matthews & Ghahramani 2015), `approximation: "variational"` of
//! `gaussian_process` and `gp_classifier`: M inducing locations Z shared by every latent
//! function, whitened inducing values u_c = L v_c (K_MM = L L'), and a full-covariance
//! q(v_c) = N(m_c, S_c) per latent. The ELBO
//!
//!   sum_i E_q[log p(y_i | f_i)] - sum_c KL(q(v_c) || N(0, I))
//!
//! is maximised from minibatches: natural-gradient steps on q (Salimbeni, Eleftheriadis
//! & Hensman 2018) and Adam on the kernel's log hyperparameters, Z and the likelihood's
//! parameters. Any likelihood with a one-dimensional expectation works; here gaussian,
//! student_t (robust regression), poisson (counts, log link), bernoulli (probit) and
//! softmax (one latent per class).
//!
//! Where things live: `likelihood.rs` (each row's expectation and its derivatives),
//! `quadrature.rs` (Gauss-Hermite), `posterior.rs` (q in natural form, the natural step,
//! the KL), `pass.rs` (one pass over rows: the ELBO's terms and every gradient),
//! `train.rs` (the minibatch loop and the final q and ELBO), `model.rs` (the fitted
//! model: predictions, storage). This folder is shared machinery: the two GP families
//! read their params into a [`train::Setup`] and keep a [`model::VariationalModel`].

pub mod likelihood;
pub mod model;
mod pass;
pub mod posterior;
pub mod quadrature;
pub mod train;

#[cfg(test)]
mod tests;

pub use likelihood::{Likelihood, LikelihoodKind};
pub use model::VariationalModel;
pub use pass::Targets;

use crate::kernel::hyper::Hyper;
use crate::spec::{FieldError, ObjectReader};
use serde_json::{json, Map, Value};

pub const DEFAULT_BATCH_SIZE: u64 = 1024;
pub const MAX_BATCH_SIZE: u64 = 1 << 20;
pub const DEFAULT_LEARNING_RATE: f64 = 0.01;
/// Student-t degrees of freedom to start from.
pub const DEFAULT_DF: f64 = 4.0;
/// The noise (gaussian) or squared scale (student_t) to start from when none is given.
pub const DEFAULT_NOISE: f64 = 1.0;

/// The params of a variational fit beyond the inducing points' (`inducing_points`,
/// `inducing_selection`, `seed`, read with the other approximations').
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// None: the kind's default (gaussian; bernoulli for two classes, else softmax).
    pub likelihood: Option<LikelihoodKind>,
    pub batch_size: u64,
    /// None: about a thousand minibatch steps ([`train::default_epochs`]).
    pub epochs: Option<u64>,
    pub learning_rate: f64,
    /// None: learned when the hyperparameters are (`optimize`), the rows are numbers and
    /// the kernel has a derivative in its inputs.
    pub learn_inducing: Option<bool>,
    /// student_t's degrees of freedom (learned with `optimize` unless fixed).
    pub df: Hyper,
    /// The minibatch steps in single precision (`precision: "float32"`); the final q(u)
    /// and ELBO are computed in double either way.
    pub single: bool,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            likelihood: None,
            batch_size: DEFAULT_BATCH_SIZE,
            epochs: None,
            learning_rate: DEFAULT_LEARNING_RATE,
            learn_inducing: None,
            df: Hyper::new(DEFAULT_DF),
            single: false,
        }
    }
}

/// The params only a variational fit reads.
pub const KEYS: [&str; 7] =
    ["likelihood", "batch_size", "epochs", "learning_rate", "learn_inducing", "df", "precision"];

impl Params {
    /// Reads the variational params, `likelihood` among `takes`. When the fit is not
    /// variational (`variational` false), any of them given is 422 at its pointer.
    pub fn read(obj: &mut ObjectReader<'_>, variational: bool, takes: &[LikelihoodKind]) -> Result<Params, FieldError> {
        if !variational {
            for key in KEYS {
                if obj.take(key).is_some() {
                    return Err(FieldError::invalid(
                        obj.pointer(key),
                        format!("`{key}` belongs to approximation \"variational\"; this fit is not variational"),
                    ));
                }
            }
            return Ok(Params::default());
        }
        let mut p = Params::default();
        if let Some(name) = obj.str("likelihood")? {
            let names: Vec<&str> = takes.iter().map(|k| k.name()).collect();
            match LikelihoodKind::from_name(name).filter(|k| takes.contains(k)) {
                Some(k) => p.likelihood = Some(k),
                None => {
                    return Err(FieldError::invalid(
                        obj.pointer("likelihood"),
                        format!("unknown likelihood `{name}` for this model; expected {}", names.join(", ")),
                    ))
                }
            }
        }
        if let Some(b) = obj.u64("batch_size")? {
            if !(1..=MAX_BATCH_SIZE).contains(&b) {
                return Err(FieldError::invalid(obj.pointer("batch_size"), format!("must be in 1..={MAX_BATCH_SIZE}")));
            }
            p.batch_size = b;
        }
        if let Some(e) = obj.u64("epochs")? {
            if !(1..=train::MAX_EPOCHS).contains(&e) {
                return Err(FieldError::invalid(
                    obj.pointer("epochs"),
                    format!("must be in 1..={}", train::MAX_EPOCHS),
                ));
            }
            p.epochs = Some(e);
        }
        if let Some(r) = obj.f64("learning_rate")? {
            if !(r > 0.0 && r <= 1.0) {
                return Err(FieldError::invalid(obj.pointer("learning_rate"), "must be in (0, 1]"));
            }
            p.learning_rate = r;
        }
        p.learn_inducing = obj.bool("learn_inducing")?;
        p.single = match obj.str("precision")? {
            None | Some("float64") => false,
            Some("float32") => true,
            Some(other) => {
                return Err(FieldError::invalid(
                    obj.pointer("precision"),
                    format!("unknown precision `{other}`; expected float64 or float32"),
                ))
            }
        };
        let df_ptr = obj.pointer("df");
        if let Some(v) = obj.take("df") {
            if p.likelihood != Some(LikelihoodKind::StudentT) {
                return Err(FieldError::invalid(df_ptr, "`df` is the student_t likelihood's degrees of freedom"));
            }
            let h = Hyper::<f64>::read(v, &df_ptr)?;
            let at = if v.is_object() { format!("{df_ptr}/value") } else { df_ptr.clone() };
            if !(h.value > 2.0 && h.value.is_finite()) {
                return Err(FieldError::invalid(at, "must be above 2 (y then has a variance)"));
            }
            if let Some((lo, _)) = h.bounds.filter(|b| b.0 <= 2.0) {
                return Err(FieldError::invalid(
                    format!("{df_ptr}/bounds/0"),
                    format!("must be above 2, not {lo} (y then has a variance)"),
                ));
            }
            p.df = h;
        }
        Ok(p)
    }

    /// Adds the params' JSON form to `out` (a variational fit's only).
    pub fn write_json(&self, out: &mut Map<String, Value>) {
        out.insert("likelihood".into(), json!(self.likelihood.map(LikelihoodKind::name)));
        out.insert("batch_size".into(), json!(self.batch_size));
        out.insert("epochs".into(), json!(self.epochs));
        out.insert("learning_rate".into(), json!(self.learning_rate));
        out.insert("learn_inducing".into(), json!(self.learn_inducing));
        out.insert("precision".into(), json!(if self.single { "float32" } else { "float64" }));
        if self.likelihood == Some(LikelihoodKind::StudentT) {
            out.insert("df".into(), self.df.to_json());
        }
    }

    /// Whether the inducing locations are learned, for rows of `kind` and `kernel`.
    pub fn learns_inducing(&self, optimize: bool, numeric: bool, kernel: &crate::kernel::Kernel) -> bool {
        self.learn_inducing.unwrap_or(optimize && numeric && kernel.has_input_gradient())
    }

    /// The refusal of `learn_inducing: true` where it cannot be done.
    pub fn check_inducing(&self, numeric: bool, kernel: &crate::kernel::Kernel) -> Result<(), FieldError> {
        if self.learn_inducing == Some(true) {
            if !numeric {
                return Err(FieldError::invalid(
                    "/params/learn_inducing",
                    "inducing locations are learned in feature space; these rows are not numbers (use false)",
                ));
            }
            if !kernel.has_input_gradient() {
                return Err(FieldError::invalid(
                    "/params/learn_inducing",
                    "this kernel has no derivative with respect to its inputs (mahalanobis, generative, fisher): use false",
                ));
            }
        }
        Ok(())
    }

    /// Bytes a variational fit holds at its peak: the data (and the request's copy); per
    /// latent q's precision, its factor, the step's statistics and the predict factor
    /// (M^2 each); K_MM, its derivatives and adjoint; a minibatch's M x b blocks (its
    /// kernel, whitened and adjoint columns, one per latent) and gradient blocks; the
    /// inducing points' sample.
    pub fn fit_memory_estimate(&self, n: usize, d: usize, m: usize, latents: usize, hypers: usize) -> usize {
        let b = (self.batch_size as usize).min(n.max(1));
        let data = n * (d + 2) * 8 * 2;
        let squares = (4 * latents + hypers + 5) * m * m * 8;
        let batch = (4 + latents) * m * b * 8 + (b * (d + 2) * 8) + b * train::MC_SAMPLES * latents * 8;
        let threads = rayon::current_num_threads().max(1);
        let gradient_blocks = threads * (hypers + 1) * m * 256 * 8;
        let sample = crate::estimator::approximation::inducing::sample_bytes(n, d, m);
        data + squares + batch + gradient_blocks + sample
    }
}

#[cfg(test)]
mod params_tests {
    use super::*;

    fn read(v: Value, variational: bool) -> Result<Params, FieldError> {
        let mut obj = ObjectReader::new(&v, "/params").unwrap();
        let takes = [LikelihoodKind::Gaussian, LikelihoodKind::StudentT, LikelihoodKind::Poisson];
        let p = Params::read(&mut obj, variational, &takes)?;
        obj.finish()?;
        Ok(p)
    }

    #[test]
    fn params_are_read_checked_and_echoed() {
        assert_eq!(read(json!({}), true).unwrap(), Params::default());
        let p = read(
            json!({"likelihood": "student_t", "batch_size": 64, "epochs": 3, "learning_rate": 0.05,
                   "learn_inducing": false, "df": {"value": 5.0, "bounds": [2.5, 50.0]}, "precision": "float32"}),
            true,
        )
        .unwrap();
        assert_eq!(
            (p.likelihood, p.batch_size, p.epochs, p.learn_inducing),
            (Some(LikelihoodKind::StudentT), 64, Some(3), Some(false))
        );
        let mut out = Map::new();
        p.write_json(&mut out);
        assert_eq!(read(Value::Object(out), true).unwrap(), p);
        for (v, at) in [
            (json!({"likelihood": "bernoulli"}), "/params/likelihood"),
            (json!({"likelihood": "laplace"}), "/params/likelihood"),
            (json!({"batch_size": 0}), "/params/batch_size"),
            (json!({"epochs": 0}), "/params/epochs"),
            (json!({"epochs": 1001}), "/params/epochs"),
            (json!({"learning_rate": 0.0}), "/params/learning_rate"),
            (json!({"learning_rate": 2.0}), "/params/learning_rate"),
            (json!({"df": 5.0}), "/params/df"),
            (json!({"likelihood": "student_t", "df": 1.5}), "/params/df"),
            (json!({"likelihood": "student_t", "df": {"value": 3.0, "bounds": [1.0, 9.0]}}), "/params/df/bounds/0"),
            (json!({"precision": "float16"}), "/params/precision"),
        ] {
            assert_eq!(read(v.clone(), true).unwrap_err().pointer, at, "{v}");
        }
        let e = read(json!({"batch_size": 10}), false).unwrap_err();
        assert_eq!((e.kind, e.pointer.as_str()), (crate::spec::ErrorKind::Invalid, "/params/batch_size"));
    }
}

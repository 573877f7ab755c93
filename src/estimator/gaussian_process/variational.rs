//! `gaussian_process` with `approximation: "variational"`: its params checked and settled,
//! the fit through the shared variational GP (`estimator/variational/`) with the gaussian,
//! student_t or poisson likelihood, and its restore.

use super::GaussianProcess;
use crate::estimator::approximation::Mode;
use crate::estimator::targets::outputs::Normalisation;
use crate::estimator::variational::model::Answer;
use crate::estimator::variational::train::{self, Setup};
use crate::estimator::variational::{self, Likelihood, LikelihoodKind, Targets, VariationalModel};
use crate::estimator::{
    FitContext, FitError, Fitted, ModelKind, Outputs, RestoreError, Restoring, TrainingData, TrainingReport,
    TrainingSet,
};
use crate::kernel::RowKind;
use crate::spec::FieldError;

impl GaussianProcess {
    fn is_variational(&self) -> bool {
        self.approx.mode == Mode::Variational
    }

    fn likelihood_kind(&self) -> LikelihoodKind {
        self.variational.likelihood.unwrap_or(LikelihoodKind::Gaussian)
    }

    /// What the params alone rule out for a variational fit.
    pub(super) fn check_variational(&self) -> Result<(), FieldError> {
        if !self.is_variational() {
            return Ok(());
        }
        if self.noise_rows.is_some() {
            return Err(FieldError::invalid(
                "/params/noise",
                "a variational fit takes one noise variance (learned with optimize), not one per row",
            ));
        }
        if self.restarts > 0 {
            return Err(FieldError::invalid(
                "/params/restarts",
                "restarts belong to the exact and nystrom fits' L-BFGS-B search; a variational fit learns by Adam",
            ));
        }
        if self.likelihood_kind() == LikelihoodKind::Poisson {
            if self.given.noise {
                return Err(FieldError::invalid("/params/noise", "the poisson likelihood has no noise"));
            }
            if self.normalize_y {
                return Err(FieldError::invalid(
                    "/params/normalize_y",
                    "the poisson likelihood models counts as they are; normalize_y would make them not counts",
                ));
            }
        }
        Ok(())
    }

    /// What the data rules out: several outputs, counts that are not counts, inducing
    /// locations that cannot move.
    pub(super) fn check_variational_targets(&self, data: &TrainingData) -> Result<(), FieldError> {
        if !self.is_variational() {
            return Ok(());
        }
        if let TrainingData::Regression(set) = data {
            if set.outputs.is_multi() {
                return Err(FieldError::invalid("/y", "a variational fit has one output: send y as a list of numbers"));
            }
            if self.likelihood_kind() == LikelihoodKind::Poisson {
                if let Some(i) = set.y.iter().position(|v| !(*v >= 0.0 && v.fract() == 0.0 && *v < 1e15)) {
                    return Err(FieldError::invalid(
                        "/y",
                        format!(
                            "the poisson likelihood models counts: y must be integers >= 0 (row {i} is {})",
                            set.y[i]
                        ),
                    ));
                }
            }
        }
        self.variational.check_inducing(data.x().kind() == RowKind::Numeric, &self.kernel)
    }

    /// A variational fit's defaults: the hyperparameters learned, the noise from 1.
    pub(super) fn settle_variational(&mut self) {
        if !self.is_variational() {
            return;
        }
        if !self.given.optimize {
            self.optimize = true;
        }
        if !self.given.noise && self.likelihood_kind() != LikelihoodKind::Poisson {
            self.noise.value = variational::DEFAULT_NOISE;
        }
    }

    fn likelihood(&self) -> Likelihood {
        Likelihood::new(self.likelihood_kind(), self.noise.clone(), self.variational.df.clone(), 1)
    }

    pub(super) fn fit_variational(&self, data: &TrainingSet, ctx: &FitContext) -> Result<VariationalModel, FitError> {
        let mut spec = self.clone();
        spec.settle_variational();
        let norm = Normalisation::of(data, spec.normalize_y);
        let y = norm.apply(data);
        let numeric = data.x.kind() == RowKind::Numeric;
        let learn_inducing = spec.variational.learns_inducing(spec.optimize, numeric, &spec.kernel);
        let setup = Setup {
            kernel: spec.kernel.clone(),
            likelihood: spec.likelihood(),
            approx: spec.approx,
            seed: spec.seed,
            batch_size: spec.variational.batch_size as usize,
            epochs: spec.variational.epochs,
            learning_rate: spec.variational.learning_rate,
            optimize: spec.optimize,
            learn_inducing,
            single: spec.variational.single,
        };
        let fit = train::train(&setup, &data.x, &Targets::Real(y.as_slice().to_vec()), ctx)?;
        // The params as fitted: the learned kernel, noise and degrees of freedom, the
        // likelihood and whether the inducing locations moved.
        spec.kernel = fit.kernel.clone();
        spec.noise = fit.likelihood.noise.clone();
        spec.variational.df = fit.likelihood.df.clone();
        spec.variational.likelihood = Some(fit.likelihood.kind);
        spec.variational.learn_inducing = Some(learn_inducing);
        let report = TrainingReport {
            approximation: Some("variational".into()),
            inducing_points: Some(fit.z.n() as u64),
            inducing_indices: fit.inducing_indices.clone(),
            elbo: Some(fit.elbo),
            epochs: Some(fit.epochs),
            iterations: Some(fit.iterations),
            jitter: Some(fit.l.jitter()),
            ..Default::default()
        };
        Ok(VariationalModel::new(ModelKind::GaussianProcess, spec.params_json(), fit, Answer::Regression(norm), report))
    }

    pub(super) fn restore_variational(self, mut r: Restoring) -> Result<Box<dyn Fitted>, RestoreError> {
        let z = r.points(false)?;
        let outputs = Outputs::restore(&mut r.arrays)?;
        if outputs.is_multi() {
            return Err(RestoreError("a variational gaussian_process has one output".into()));
        }
        let norm = Normalisation::restore(outputs, &r.fit, &mut r.arrays)?;
        let model = VariationalModel::restore(
            ModelKind::GaussianProcess,
            r.kernel.clone(),
            r.params.clone(),
            self.likelihood(),
            z,
            &mut r.fit,
            &mut r.arrays,
            Answer::Regression(norm),
            r.report,
        )?;
        Ok(Box::new(model))
    }
}

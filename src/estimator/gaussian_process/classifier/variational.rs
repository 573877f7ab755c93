//! `gp_classifier` with `approximation: "variational"`: one latent GP with the bernoulli
//! (probit) likelihood for two classes, or one per class jointly through the softmax,
//! fitted by the shared variational GP (`estimator/variational/`); its restore.

use super::GpClassifier;
use crate::estimator::approximation::Mode;
use crate::estimator::targets::labels::{ClassLabels, ClassificationSet};
use crate::estimator::variational::model::Answer;
use crate::estimator::variational::train::{self, Setup};
use crate::estimator::variational::{Likelihood, LikelihoodKind, Targets, VariationalModel};
use crate::estimator::{
    FitContext, FitError, Fitted, ModelKind, RestoreError, Restoring, TrainingData, TrainingReport,
};
use crate::kernel::hyper::Hyper;
use crate::kernel::RowKind;
use crate::spec::FieldError;

impl GpClassifier {
    fn is_variational(&self) -> bool {
        self.approx.mode == Mode::Variational
    }

    /// The likelihood for `classes` classes: as asked, else bernoulli for two and
    /// softmax for more.
    fn likelihood_kind(&self, classes: usize) -> LikelihoodKind {
        self.variational.likelihood.unwrap_or(if classes == 2 {
            LikelihoodKind::Bernoulli
        } else {
            LikelihoodKind::Softmax
        })
    }

    fn likelihood(&self, classes: usize) -> Likelihood {
        let kind = self.likelihood_kind(classes);
        let latents = if kind == LikelihoodKind::Softmax { classes } else { 1 };
        Likelihood::new(kind, Hyper::new(1.0), Hyper::new(1.0), latents)
    }

    /// The exact fit's own params given to a variational one.
    pub(super) fn check_variational(&self, restarts_given: bool, max_iter_given: bool) -> Result<(), FieldError> {
        if !self.is_variational() {
            return Ok(());
        }
        if restarts_given && self.restarts > 0 {
            return Err(FieldError::invalid(
                "/params/restarts",
                "restarts belong to the exact fit's L-BFGS-B search; a variational fit learns by Adam",
            ));
        }
        if max_iter_given {
            return Err(FieldError::invalid(
                "/params/max_iter",
                "max_iter bounds the exact fit's Newton steps; a variational fit runs `epochs` passes",
            ));
        }
        Ok(())
    }

    pub(super) fn check_variational_targets(&self, data: &TrainingData) -> Result<(), FieldError> {
        if !self.is_variational() {
            return Ok(());
        }
        if let TrainingData::Classification(set) = data {
            if self.variational.likelihood == Some(LikelihoodKind::Bernoulli) && set.classes.len() != 2 {
                return Err(FieldError::invalid(
                    "/params/likelihood",
                    format!("bernoulli is for two classes; these rows have {}: use softmax", set.classes.len()),
                ));
            }
        }
        self.variational.check_inducing(data.x().kind() == RowKind::Numeric, &self.kernel)
    }

    /// A variational fit learns its hyperparameters unless told not to.
    pub(super) fn settle_variational(&mut self) {
        if self.is_variational() && !self.optimize_given {
            self.optimize = true;
        }
    }

    pub(super) fn variational_memory_estimate(&self, n: usize, d: usize) -> usize {
        // The classes are not known here: a softmax over a handful of classes is the
        // usual case, and the estimate is checked again by nothing finer.
        let latents = match self.variational.likelihood {
            Some(LikelihoodKind::Bernoulli) => 1,
            _ => 4,
        };
        self.variational.fit_memory_estimate(n, d, self.approx.m(n), latents, self.kernel.theta().len())
    }

    pub(super) fn fit_variational(
        &self,
        data: &ClassificationSet,
        ctx: &FitContext,
    ) -> Result<VariationalModel, FitError> {
        let mut spec = self.clone();
        spec.settle_variational();
        let classes = data.classes.len();
        let numeric = data.x.kind() == RowKind::Numeric;
        let learn_inducing = spec.variational.learns_inducing(spec.optimize, numeric, &spec.kernel);
        let setup = Setup {
            kernel: spec.kernel.clone(),
            likelihood: spec.likelihood(classes),
            approx: spec.approx,
            seed: spec.seed,
            batch_size: spec.variational.batch_size as usize,
            epochs: spec.variational.epochs,
            learning_rate: spec.variational.learning_rate,
            optimize: spec.optimize,
            learn_inducing,
            single: spec.variational.single,
        };
        let fit = train::train(&setup, &data.x, &Targets::Classes(data.y.clone()), ctx)?;
        spec.kernel = fit.kernel.clone();
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
        let answer = Answer::Classes(data.classes.clone());
        Ok(VariationalModel::new(ModelKind::GpClassifier, spec.params_json(), fit, answer, report))
    }

    pub(super) fn restore_variational(
        self,
        mut r: Restoring,
        classes: ClassLabels,
    ) -> Result<Box<dyn Fitted>, RestoreError> {
        let z = r.points(false)?;
        let lik = self.likelihood(classes.len());
        let model = VariationalModel::restore(
            ModelKind::GpClassifier,
            r.kernel.clone(),
            r.params.clone(),
            lik,
            z,
            &mut r.fit,
            &mut r.arrays,
            Answer::Classes(classes),
            r.report,
        )?;
        Ok(Box::new(model))
    }
}

//! [`ModelSpec`]: a request's model, kernel and params checked into one value, behind the
//! [`Spec`] trait. This file holds what every kind shares: the table that reads a kind's
//! params, the admission sequence run before a fit is queued (data, targets, the
//! approximation resolved, rows against the kernel), and the fit's common steps (the
//! kernel's mixtures fitted first, cancellation around the kind's own fit).

use super::approximation::{self as approx, Approximation};
use super::{
    mixture, FitContext, FitError, FittedModel, GaussianProcess, GpClassifier, KernelLogistic, KernelPca,
    KernelPerceptron, KernelRidge, ModelKind, NadarayaWatson, OneClassSvm, Precomputed, RbfNetwork, Spec, Svm, Svr,
    TrainingData,
};
use crate::kernel::{Kernel, Points, RowKind};
use crate::spec::FieldError;
use serde_json::Value;
use std::ops::{Deref, DerefMut};

/// Checked hyperparameters of any model: one kind's [`Spec`].
#[derive(Debug)]
pub struct ModelSpec(Box<dyn Spec>);

/// A kind's reader: its params from JSON (`/params`), the kernel already checked.
type Read = fn(Kernel, &Value, &str) -> Result<Box<dyn Spec>, FieldError>;

/// The reader of each kind.
fn reader(kind: ModelKind) -> Read {
    fn boxed<S: Spec + 'static>(r: Result<S, FieldError>) -> Result<Box<dyn Spec>, FieldError> {
        r.map(|s| Box::new(s) as Box<dyn Spec>)
    }
    match kind {
        ModelKind::KernelRidge => |k, p, at| boxed(KernelRidge::from_json(k, p, at)),
        ModelKind::GaussianProcess => |k, p, at| boxed(GaussianProcess::from_json(k, p, at)),
        ModelKind::GpClassifier => |k, p, at| boxed(GpClassifier::from_json(k, p, at)),
        ModelKind::Svm => |k, p, at| boxed(Svm::from_json(k, p, at)),
        ModelKind::NuSvm => |k, p, at| boxed(Svm::from_json_nu(k, p, at)),
        ModelKind::KernelPerceptron => |k, p, at| boxed(KernelPerceptron::from_json(k, p, at)),
        ModelKind::KernelLogistic => |k, p, at| boxed(KernelLogistic::from_json(k, p, at)),
        ModelKind::NadarayaWatson => |k, p, at| boxed(NadarayaWatson::from_json(k, p, at)),
        ModelKind::RbfNetwork => |k, p, at| boxed(RbfNetwork::from_json(k, p, at)),
        ModelKind::Svr => |k, p, at| boxed(Svr::from_json(k, p, at)),
        ModelKind::NuSvr => |k, p, at| boxed(Svr::from_json_nu(k, p, at)),
        ModelKind::OneClassSvm => |k, p, at| boxed(OneClassSvm::from_json(k, p, at)),
        ModelKind::KernelPca => |k, p, at| boxed(KernelPca::from_json(k, p, at)),
    }
}

/// The service's limits on a fit, for resolving `approximation: auto`.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Rows up to which `auto` may stay exact.
    pub exact_max_rows: usize,
    /// The fit's working memory (MERCER_MAX_FIT_BYTES).
    pub max_fit_bytes: u64,
}

impl Clone for ModelSpec {
    fn clone(&self) -> ModelSpec {
        ModelSpec(self.0.clone_box())
    }
}

impl Deref for ModelSpec {
    type Target = dyn Spec;
    fn deref(&self) -> &(dyn Spec + 'static) {
        &*self.0
    }
}

impl DerefMut for ModelSpec {
    fn deref_mut(&mut self) -> &mut (dyn Spec + 'static) {
        &mut *self.0
    }
}

impl ModelSpec {
    /// Reads `params` (the request's `params` object, pointer `/params`) for `kind`.
    /// The kernel is already checked. Errors point into the request document.
    pub fn from_json(kind: ModelKind, kernel: Kernel, params: Option<&Value>) -> Result<ModelSpec, FieldError> {
        let empty = Value::Object(Default::default());
        let params = params.unwrap_or(&empty);
        let spec = reader(kind)(kernel, params, "/params").map_err(solver_param_elsewhere)?;
        ModelSpec(spec).check_approximation()?.check_precomputed()
    }

    /// The same model for rows `rows` of its data (a cross-validation fold's training
    /// rows): parameters given per row are taken at those rows.
    pub fn for_rows(&self, rows: &[usize]) -> ModelSpec {
        ModelSpec(self.0.for_rows(rows))
    }

    /// The approximation asked for is one the kind has (the catalogue's `nystrom` and
    /// `variational`).
    fn check_approximation(self) -> Result<ModelSpec, FieldError> {
        let (kind, can) = (self.kind(), self.kind().can());
        let Some(mode) = self.approximation().map(|a| a.mode) else { return Ok(self) };
        let (taken, who) = match mode {
            approx::Mode::Nystrom => (can.nystrom, ModelKind::names_that(|c| c.nystrom)),
            approx::Mode::Variational => (can.variational, ModelKind::names_that(|c| c.variational)),
            approx::Mode::Auto | approx::Mode::Exact => (true, String::new()),
        };
        if !taken {
            return Err(FieldError::invalid(
                "/params/approximation",
                format!("approximation `{}` is for {who}, not {}", mode.name(), kind.name()),
            ));
        }
        Ok(self)
    }

    /// A precomputed kernel serves the kinds whose catalogue row takes it, and no
    /// approximation (which would place inducing points between rows); `auto` is then
    /// exact.
    fn check_precomputed(mut self) -> Result<ModelSpec, FieldError> {
        if !matches!(self.kernel(), Kernel::Precomputed) {
            return Ok(self);
        }
        if let Precomputed::Refused(why) = self.kind().can().precomputed_kernel {
            return Err(FieldError::invalid("/kernel", format!("{} {why}", self.kind().name())));
        }
        if let Some(a) = self.approximation_mut() {
            match a.mode {
                approx::Mode::Nystrom | approx::Mode::Variational => {
                    return Err(FieldError::invalid(
                        "/kernel",
                        "a precomputed kernel has no values between inducing points: use approximation \"exact\"",
                    ))
                }
                approx::Mode::Auto => a.mode = approx::Mode::Exact,
                approx::Mode::Exact => {}
            }
        }
        Ok(self)
    }

    /// A model of `kind` from a body's kernel and params, admitted for `data` under
    /// `limits`: what a training request and each of a search's candidates go through
    /// (errors point into the body: `/kernel/...`, `/params/...`).
    pub fn admitted(
        kind: ModelKind,
        kernel: &Value,
        params: &Value,
        data: &TrainingData,
        limits: Limits,
    ) -> Result<ModelSpec, FieldError> {
        let kernel = Kernel::from_json(kernel).map_err(|e| e.under("/kernel"))?;
        let mut spec = ModelSpec::from_json(kind, kernel, Some(params))?;
        spec.admit(data, limits)?;
        Ok(spec)
    }

    /// Everything checked before a fit of `data` is queued, in the order the errors are
    /// reported: the data's size, the targets, the approximation resolved (and what the
    /// kind settles with it), the rows against the kernel.
    pub fn admit(&mut self, data: &TrainingData, limits: Limits) -> Result<(), FieldError> {
        let (n, d) = (data.x().n(), data.x().d());
        self.check_data(n)?;
        self.check_targets(data)?;
        self.resolve_approximation(n, d, limits)?;
        self.check_rows(data.x())
    }

    /// Turns `approximation: auto` into exact (n <= `exact_max_rows` and the exact fit's
    /// memory estimate within `max_fit_bytes`) or the kind's approximation (nystrom where
    /// it has one, else variational), checks M against n, and lets the kind settle what
    /// depends on it.
    pub fn resolve_approximation(&mut self, n: usize, d: usize, limits: Limits) -> Result<(), FieldError> {
        let exact_fits = {
            let mut exact = self.clone();
            if let Some(a) = exact.approximation_mut() {
                a.mode = approx::Mode::Exact;
            }
            exact.fit_memory_estimate(n, d) as u64 <= limits.max_fit_bytes
        };
        let has_nystrom = self.kind().can().nystrom;
        if let Some(a) = self.approximation_mut() {
            if a.mode == approx::Mode::Auto {
                let exact = n <= limits.exact_max_rows && exact_fits;
                a.mode = match (exact, has_nystrom) {
                    (true, _) => approx::Mode::Exact,
                    (false, true) => approx::Mode::Nystrom,
                    (false, false) => approx::Mode::Variational,
                };
            }
            a.check_loo("/params/loo")?;
            check_inducing_points(a, n)?;
        }
        self.0.admit(n)
    }

    /// What can only be checked once the rows are known: the kernel against their kind
    /// and width, and k-means inducing points against non-numeric rows. Pointers are
    /// within the request.
    pub fn check_rows(&self, x: &Points) -> Result<(), FieldError> {
        let precomputed = matches!(self.kernel(), Kernel::Precomputed);
        if precomputed != x.indexed().is_some() {
            let why = if precomputed {
                "a precomputed kernel needs the body's `kernel` to be precomputed, so that x is read as kernel values"
            } else {
                "x holds precomputed kernel values: the kernel must be precomputed"
            };
            return Err(FieldError::invalid("/kernel", why));
        }
        if precomputed {
            return Ok(());
        }
        let (kind, d) = (x.kind(), x.d());
        self.kernel().check_rows(kind).map_err(|e| e.under("/kernel"))?;
        self.kernel().check_lengths(x)?;
        if kind == RowKind::Numeric {
            self.kernel().check_features(d).map_err(|e| e.under("/kernel"))?;
        } else if let Some(a) = self.approximation().filter(|a| a.mode != approx::Mode::Exact) {
            if a.selection == Some(approx::Selection::Kmeans) {
                return Err(FieldError::invalid(
                    "/params/inducing_selection",
                    format!("k-means needs numeric rows, not {}; use \"uniform\"", kind.describe()),
                ));
            }
        }
        Ok(())
    }

    /// This spec with every generative and Fisher kernel's mixture fitted to `x` and
    /// every `gamma: "scale"` decided by it.
    fn with_fitted_mixtures(&self, x: &Points, ctx: &FitContext) -> Result<Option<ModelSpec>, FitError> {
        let mut fit = |g: &crate::kernel::MixtureKernel,
                       path: &str|
         -> Result<std::sync::Arc<crate::kernel::Mixture>, FitError> {
            match mixture::fit(x, g, ctx) {
                Ok(m) => Ok(std::sync::Arc::new(m.mixture)),
                Err(FitError::Invalid(e)) => Err(FitError::Invalid(e.under(path).under("/kernel"))),
                Err(e) => Err(e),
            }
        };
        let kernel = self.kernel().with_mixtures(&mut fit)?.with_scale(x);
        if &kernel == self.kernel() {
            return Ok(None);
        }
        let mut spec = self.clone();
        *spec.kernel_mut() = kernel;
        Ok(Some(spec))
    }

    pub fn fit(&self, data: &TrainingData, ctx: &FitContext) -> Result<FittedModel, FitError> {
        // The kernel may be well-formed but inconsistent with the data (ARD list length,
        // a string kernel over numbers).
        self.check_rows(data.x()).map_err(FitError::Invalid)?;
        // Long kernel loops (a string Gram) see the fit's cancellation between columns.
        crate::kernel::cancel::with_cancel(ctx.cancel.flag(), || {
            let fitted = match self.with_fitted_mixtures(data.x(), ctx)? {
                Some(spec) => spec.fit_prepared(data, ctx),
                None => self.fit_prepared(data, ctx),
            };
            // A matrix cut short by a cancellation must not become a model.
            ctx.cancel.check()?;
            fitted
        })
    }

    fn fit_prepared(&self, data: &TrainingData, ctx: &FitContext) -> Result<FittedModel, FitError> {
        let mut fitted = self.0.fit_checked(data, ctx)?;
        fitted.report_mut().approximation.get_or_insert_with(|| "exact".into());
        let fitted = FittedModel::from(fitted);
        fitted.prepare_support();
        Ok(fitted)
    }
}

/// M against n for a nystrom or variational fit.
fn check_inducing_points(a: &Approximation, n: usize) -> Result<(), FieldError> {
    if a.is_sparse() && a.m(n) > n {
        return Err(FieldError::invalid(
            "/params/inducing_points",
            format!("{} inducing points requested but there are only {n} training rows", a.m(n)),
        ));
    }
    Ok(())
}

/// `solver`, `max_iter`, `tol` and `precision` belong to nystrom kernel_ridge (and
/// `max_iter`, `tol` to the models with their own params of those names), the
/// variational params to the variational GPs: on a model that does not read them they are
/// 422 at their pointer, not 400 as unknown fields.
fn solver_param_elsewhere(e: FieldError) -> FieldError {
    const NAMES: [&str; 4] = ["solver", "max_iter", "tol", "precision"];
    match e.pointer.strip_prefix("/params/") {
        Some("precision") if e.is_unknown_field() => FieldError::invalid(
            e.pointer.clone(),
            format!(
                "`precision` belongs to the nystrom kernel_ridge cg solve and to approximation \"variational\" of {}; \
                 this model does not take it",
                ModelKind::names_that(|c| c.variational)
            ),
        ),
        Some(name) if e.is_unknown_field() && NAMES.contains(&name) => FieldError::invalid(
            e.pointer.clone(),
            format!(
                "`{name}` belongs to the nystrom kernel_ridge solve (solver cg or direct); this model does not take it"
            ),
        ),
        Some(name) if e.is_unknown_field() && super::variational::KEYS.contains(&name) => FieldError::invalid(
            e.pointer.clone(),
            format!(
                "`{name}` belongs to approximation \"variational\" of {}; this model does not take it",
                ModelKind::names_that(|c| c.variational)
            ),
        ),
        _ => e,
    }
}

//! The closed set of model specs: a request's model, kernel and params checked into one
//! value, what can be checked against the data before a fit is queued, and the fit's
//! dispatch to its estimator (with the kernel's mixtures fitted first).

use super::{
    mixture, nystrom, nystrom::approx, Estimator, FitContext, FitError, FittedModel, GaussianProcess, GpClassifier,
    KernelLogistic, KernelPca, KernelPerceptron, KernelRidge, ModelKind, NadarayaWatson, OneClassSvm, RbfNetwork,
    SparseGpModel, Svm, Svr, TrainingData,
};
use crate::kernel::{Kernel, Points, RowKind};
use crate::spec::FieldError;
use serde_json::Value;

/// Checked hyperparameters of any model.
#[derive(Debug, Clone)]
pub enum ModelSpec {
    KernelRidge(KernelRidge),
    GaussianProcess(GaussianProcess),
    Svm(Svm),
    KernelPerceptron(KernelPerceptron),
    KernelLogistic(KernelLogistic),
    GpClassifier(GpClassifier),
    NadarayaWatson(NadarayaWatson),
    RbfNetwork(RbfNetwork),
    /// epsilon- and nu-SVR.
    Svr(Svr),
    OneClassSvm(OneClassSvm),
    KernelPca(KernelPca),
}

impl ModelSpec {
    /// Reads `params` (the request's `params` object, pointer `/params`) for `kind`.
    /// The kernel is already checked. Errors point into the request document.
    pub fn from_json(kind: ModelKind, kernel: Kernel, params: Option<&Value>) -> Result<ModelSpec, FieldError> {
        let empty = Value::Object(Default::default());
        let params = params.unwrap_or(&empty);
        match kind {
            ModelKind::KernelRidge => KernelRidge::from_json(kernel, params, "/params").map(ModelSpec::KernelRidge),
            ModelKind::GaussianProcess => {
                GaussianProcess::from_json(kernel, params, "/params").map(ModelSpec::GaussianProcess)
            }
            ModelKind::Svm => Svm::from_json(kernel, params, "/params").map(ModelSpec::Svm),
            ModelKind::NadarayaWatson => {
                NadarayaWatson::from_json(kernel, params, "/params").map(ModelSpec::NadarayaWatson)
            }
            ModelKind::KernelPerceptron => {
                KernelPerceptron::from_json(kernel, params, "/params").map(ModelSpec::KernelPerceptron)
            }
            ModelKind::KernelLogistic => {
                KernelLogistic::from_json(kernel, params, "/params").map(ModelSpec::KernelLogistic)
            }
            ModelKind::GpClassifier => GpClassifier::from_json(kernel, params, "/params").map(ModelSpec::GpClassifier),
            ModelKind::RbfNetwork => RbfNetwork::from_json(kernel, params, "/params").map(ModelSpec::RbfNetwork),
            ModelKind::NuSvm => Svm::from_json_nu(kernel, params, "/params").map(ModelSpec::Svm),
            ModelKind::Svr => Svr::from_json(kernel, params, "/params").map(ModelSpec::Svr),
            ModelKind::NuSvr => Svr::from_json_nu(kernel, params, "/params").map(ModelSpec::Svr),
            ModelKind::OneClassSvm => OneClassSvm::from_json(kernel, params, "/params").map(ModelSpec::OneClassSvm),
            ModelKind::KernelPca => KernelPca::from_json(kernel, params, "/params").map(ModelSpec::KernelPca),
        }
        .map_err(solver_param_elsewhere)
        .and_then(ModelSpec::check_precomputed)
    }

    /// A precomputed kernel serves the models that need kernel values between training
    /// rows and from queries to training rows only, and no approximation (which would
    /// place inducing points between rows); `auto` is then exact.
    fn check_precomputed(mut self) -> Result<ModelSpec, FieldError> {
        if !matches!(self.kernel(), Kernel::Precomputed) {
            return Ok(self);
        }
        let why = match self {
            ModelSpec::GaussianProcess(_) | ModelSpec::GpClassifier(_) => {
                Some("needs k(x, x) at a query, which a precomputed kernel does not have")
            }
            ModelSpec::NadarayaWatson(_) | ModelSpec::RbfNetwork(_) => {
                Some("needs rows as points, which a precomputed kernel does not have")
            }
            _ => None,
        };
        if let Some(why) = why {
            return Err(FieldError::invalid("/kernel", format!("{} {why}", self.kind().name())));
        }
        if let Some(a) = self.approximation_mut() {
            match a.mode {
                approx::Mode::Nystrom => {
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

    pub fn kind(&self) -> ModelKind {
        match self {
            ModelSpec::KernelRidge(_) => ModelKind::KernelRidge,
            ModelSpec::GaussianProcess(_) => ModelKind::GaussianProcess,
            ModelSpec::Svm(p) if p.nu.is_some() => ModelKind::NuSvm,
            ModelSpec::Svm(_) => ModelKind::Svm,
            ModelSpec::Svr(p) if p.nu.is_some() => ModelKind::NuSvr,
            ModelSpec::Svr(_) => ModelKind::Svr,
            ModelSpec::OneClassSvm(_) => ModelKind::OneClassSvm,
            ModelSpec::KernelPca(_) => ModelKind::KernelPca,
            ModelSpec::KernelPerceptron(_) => ModelKind::KernelPerceptron,
            ModelSpec::KernelLogistic(_) => ModelKind::KernelLogistic,
            ModelSpec::GpClassifier(_) => ModelKind::GpClassifier,
            ModelSpec::NadarayaWatson(_) => ModelKind::NadarayaWatson,
            ModelSpec::RbfNetwork(_) => ModelKind::RbfNetwork,
        }
    }

    pub fn kernel(&self) -> &Kernel {
        match self {
            ModelSpec::KernelRidge(p) => &p.kernel,
            ModelSpec::GaussianProcess(p) => &p.kernel,
            ModelSpec::Svm(p) => &p.kernel,
            ModelSpec::KernelPerceptron(p) => &p.kernel,
            ModelSpec::KernelLogistic(p) => &p.kernel,
            ModelSpec::GpClassifier(p) => &p.kernel,
            ModelSpec::NadarayaWatson(p) => &p.kernel,
            ModelSpec::RbfNetwork(p) => &p.kernel,
            ModelSpec::Svr(p) => &p.kernel,
            ModelSpec::OneClassSvm(p) => &p.kernel,
            ModelSpec::KernelPca(p) => &p.kernel,
        }
    }

    fn kernel_mut(&mut self) -> &mut Kernel {
        match self {
            ModelSpec::KernelRidge(p) => &mut p.kernel,
            ModelSpec::GaussianProcess(p) => &mut p.kernel,
            ModelSpec::Svm(p) => &mut p.kernel,
            ModelSpec::KernelPerceptron(p) => &mut p.kernel,
            ModelSpec::KernelLogistic(p) => &mut p.kernel,
            ModelSpec::GpClassifier(p) => &mut p.kernel,
            ModelSpec::NadarayaWatson(p) => &mut p.kernel,
            ModelSpec::RbfNetwork(p) => &mut p.kernel,
            ModelSpec::Svr(p) => &mut p.kernel,
            ModelSpec::OneClassSvm(p) => &mut p.kernel,
            ModelSpec::KernelPca(p) => &mut p.kernel,
        }
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

    pub fn params_json(&self) -> Value {
        match self {
            ModelSpec::KernelRidge(p) => p.params_json(),
            ModelSpec::GaussianProcess(p) => p.params_json(),
            ModelSpec::Svm(p) => p.params_json(),
            ModelSpec::KernelPerceptron(p) => p.params_json(),
            ModelSpec::KernelLogistic(p) => p.params_json(),
            ModelSpec::GpClassifier(p) => p.params_json(),
            ModelSpec::NadarayaWatson(p) => p.params_json(),
            ModelSpec::RbfNetwork(p) => p.params_json(),
            ModelSpec::Svr(p) => p.params_json(),
            ModelSpec::OneClassSvm(p) => p.params_json(),
            ModelSpec::KernelPca(p) => p.params_json(),
        }
    }

    /// The approximation params of the models that have them.
    fn approximation_mut(&mut self) -> Option<&mut approx::Approximation> {
        match self {
            ModelSpec::KernelRidge(p) => Some(&mut p.approx),
            ModelSpec::GaussianProcess(p) => Some(&mut p.approx),
            ModelSpec::Svm(p) if p.nu.is_none() => Some(&mut p.approx),
            ModelSpec::KernelLogistic(p) => Some(&mut p.approx),
            _ => None,
        }
    }

    fn approximation(&self) -> Option<approx::Approximation> {
        match self {
            ModelSpec::KernelRidge(p) => Some(p.approx),
            ModelSpec::GaussianProcess(p) => Some(p.approx),
            ModelSpec::Svm(p) if p.nu.is_none() => Some(p.approx),
            ModelSpec::KernelLogistic(p) => Some(p.approx),
            _ => None,
        }
    }

    /// Turns `approximation: auto` into exact (n <= `exact_max_rows` and the exact fit's
    /// memory estimate within `max_fit_bytes`) or nystrom, and checks M against n.
    pub fn resolve_approximation(
        &mut self,
        n: usize,
        d: usize,
        exact_max_rows: usize,
        max_fit_bytes: u64,
    ) -> Result<(), FieldError> {
        let exact_fits = {
            let mut exact = self.clone();
            if let Some(a) = exact.approximation_mut() {
                a.mode = approx::Mode::Exact;
            }
            exact.fit_memory_estimate(n, d) as u64 <= max_fit_bytes
        };
        let Some(a) = self.approximation_mut() else { return Ok(()) };
        if a.mode == approx::Mode::Auto {
            a.mode = if n <= exact_max_rows && exact_fits { approx::Mode::Exact } else { approx::Mode::Nystrom };
        }
        a.check_loo("/params/loo")?;
        if a.mode == approx::Mode::Nystrom && a.m(n) > n {
            return Err(FieldError::invalid(
                "/params/inducing_points",
                format!("{} inducing points requested but there are only {n} training rows", a.m(n)),
            ));
        }
        if let ModelSpec::Svm(p) = self {
            p.settle_approximation()?;
        }
        if let ModelSpec::KernelRidge(p) = self {
            p.settle_solver(n)?;
        }
        if let ModelSpec::GaussianProcess(p) = self {
            let rows = p.noise_rows.as_deref().filter(|_| p.approx.mode == approx::Mode::Nystrom);
            if let Some(i) = rows.and_then(|r| r.iter().position(|s| s.is_nan() || *s <= 0.0)) {
                return Err(FieldError::invalid(
                    format!("/params/noise/{i}"),
                    "a nystrom gaussian_process needs every noise > 0 (the variational bound divides by it)",
                ));
            }
        }
        Ok(())
    }

    /// Bytes the fit will hold at its peak, for admission decisions.
    pub fn fit_memory_estimate(&self, n: usize, d: usize) -> usize {
        if let Some(a) = self.approximation().filter(|a| a.mode == approx::Mode::Nystrom) {
            if matches!(self, ModelSpec::Svm(_) | ModelSpec::KernelLogistic(_)) {
                return crate::estimator::nystrom::classifiers::fit_memory_estimate(n, d, a.m(n));
            }
            if let ModelSpec::KernelRidge(p) = self {
                return p.nystrom_memory_estimate(n, d);
            }
            let search = match self {
                ModelSpec::GaussianProcess(gp) if gp.optimize => Some(nystrom::SearchSize {
                    params: gp.theta().len(),
                    subset_rows: super::gaussian_process::sparse::OPTIMIZE_SUBSET_ROWS,
                }),
                _ => None,
            };
            return nystrom::fit_memory_estimate(n, d, a.m(n), search);
        }
        match self {
            ModelSpec::Svm(svm) => return svm.fit_memory_estimate(n, d),
            ModelSpec::Svr(svr) => return svr.fit_memory_estimate(n, d),
            ModelSpec::OneClassSvm(oc) => return oc.fit_memory_estimate(n, d),
            ModelSpec::KernelPca(p) => return p.fit_memory_estimate(n, d),
            ModelSpec::RbfNetwork(net) => return net.fit_memory_estimate(n, d),
            ModelSpec::KernelLogistic(klr) => return klr.fit_memory_estimate(n, d),
            ModelSpec::GpClassifier(gpc) => return gpc.fit_memory_estimate(n, d),
            ModelSpec::NadarayaWatson(_) | ModelSpec::KernelPerceptron(_) => return n * (d + 4) * 8 * 2,
            _ => {}
        }
        // One n x n matrix (K, factorised in place) plus the data; the hyperparameter
        // search holds K, one gradient matrix per free hyperparameter, the inverse and W.
        let matrices = match self {
            ModelSpec::GaussianProcess(gp) if gp.optimize => gp.theta().len() + 4,
            _ => 1,
        };
        matrices * n * n * 8 + n * d * 8 * 2
    }

    /// What can only be checked against the data's size, before a fit is queued.
    pub fn check_data(&self, n: usize) -> Result<(), FieldError> {
        match self {
            ModelSpec::RbfNetwork(RbfNetwork { centers: Some(c), .. }) if *c as usize > n => Err(FieldError::invalid(
                "/params/centers",
                format!("{c} centres requested but there are only {n} training rows"),
            )),
            ModelSpec::Svm(Svm { sample_weight: Some(w), .. }) => w.check_len(n, "/params/sample_weight"),
            ModelSpec::Svr(p) => p.check_data(n),
            ModelSpec::OneClassSvm(p) => p.check_data(n),
            ModelSpec::KernelPca(p) => p.check_data(n),
            ModelSpec::GaussianProcess(p) => p.check_data(n),
            ModelSpec::KernelRidge(p) => p.check_data(n),
            _ => Ok(()),
        }
    }

    /// What can only be checked against the targets: class weights' labels, classes
    /// left without weight, nu feasibility.
    pub fn check_targets(&self, data: &TrainingData) -> Result<(), FieldError> {
        match (self, data) {
            (ModelSpec::Svm(p), TrainingData::Classification(d)) => p.check_targets(d),
            _ => Ok(()),
        }
    }

    /// The same model for rows `rows` of its data (a cross-validation fold's training
    /// rows): parameters given per row are taken at those rows.
    pub fn for_rows(&self, rows: &[usize]) -> ModelSpec {
        match self {
            ModelSpec::Svm(p) => ModelSpec::Svm(p.for_rows(rows)),
            ModelSpec::Svr(p) => ModelSpec::Svr(p.for_rows(rows)),
            ModelSpec::GaussianProcess(p) => ModelSpec::GaussianProcess(p.for_rows(rows)),
            ModelSpec::KernelRidge(p) => ModelSpec::KernelRidge(p.for_rows(rows)),
            other => other.clone(),
        }
    }

    pub fn fit(&self, data: &TrainingData, ctx: &FitContext) -> Result<FittedModel, FitError> {
        // The kernel may be well-formed but inconsistent with the data (ARD list length,
        // a string kernel over numbers).
        self.check_rows(data.x()).map_err(FitError::Invalid)?;
        // Long kernel loops (a string Gram) see the fit's cancellation between columns.
        crate::kernel::cancel::with_cancel(ctx.cancel.flag(), || {
            let fitted = match self.with_fitted_mixtures(data.x(), ctx)? {
                Some(spec) => spec.fit_checked(data, ctx),
                None => self.fit_checked(data, ctx),
            };
            // A matrix cut short by a cancellation must not become a model.
            ctx.cancel.check()?;
            fitted
        })
    }

    fn fit_checked(&self, data: &TrainingData, ctx: &FitContext) -> Result<FittedModel, FitError> {
        let mut fitted = match (self, data) {
            (ModelSpec::KernelRidge(p), TrainingData::Regression(d)) => FittedModel::KernelRidge(p.fit(d, ctx)?),
            (ModelSpec::GaussianProcess(p), TrainingData::Regression(d)) if p.approx.mode == approx::Mode::Nystrom => {
                FittedModel::SparseGp(SparseGpModel::fit(p, d, ctx)?)
            }
            (ModelSpec::GaussianProcess(p), TrainingData::Regression(d)) => {
                FittedModel::GaussianProcess(p.fit(d, ctx)?)
            }
            (ModelSpec::Svm(p), TrainingData::Classification(d)) if p.approx.is_nystrom() => {
                FittedModel::NystromSvm(crate::estimator::svm::nystrom::fit(p, d, ctx)?)
            }
            (ModelSpec::Svm(p), TrainingData::Classification(d)) => FittedModel::Svm(p.fit(d, ctx)?),
            (ModelSpec::KernelPerceptron(p), TrainingData::Classification(d)) => {
                FittedModel::KernelPerceptron(p.fit(d, ctx)?)
            }
            (ModelSpec::KernelLogistic(p), TrainingData::Classification(d)) => {
                FittedModel::KernelLogistic(p.fit(d, ctx)?)
            }
            (ModelSpec::GpClassifier(p), TrainingData::Classification(d)) => FittedModel::GpClassifier(p.fit(d, ctx)?),
            (ModelSpec::NadarayaWatson(p), TrainingData::Regression(d)) => FittedModel::NadarayaWatson(p.fit(d, ctx)?),
            (ModelSpec::RbfNetwork(p), TrainingData::Regression(d)) => FittedModel::RbfNetwork(p.fit(d, ctx)?),
            (ModelSpec::Svr(p), TrainingData::Regression(d)) => FittedModel::Svr(p.fit(d, ctx)?),
            (ModelSpec::OneClassSvm(p), TrainingData::Unlabelled(x)) => FittedModel::OneClassSvm(p.fit(x, ctx)?),
            (ModelSpec::KernelPca(p), TrainingData::Unlabelled(x)) => FittedModel::KernelPca(p.fit(x, ctx)?),
            _ => {
                return Err(FitError::Invalid(FieldError::invalid(
                    "/y",
                    format!("these targets do not suit a {} model", self.kind().name()),
                )))
            }
        };
        let report = fitted.predictor_mut().report_mut();
        report.approximation.get_or_insert_with(|| "exact".into());
        fitted.prepare_support();
        Ok(fitted)
    }
}

/// `solver`, `max_iter`, `tol` and `precision` belong to nystrom kernel_ridge (and
/// `max_iter`, `tol` to the models with their own params of those names): on a model
/// that does not read them they are 422 at their pointer, not 400 as unknown fields.
fn solver_param_elsewhere(e: FieldError) -> FieldError {
    const NAMES: [&str; 4] = ["solver", "max_iter", "tol", "precision"];
    match e.pointer.strip_prefix("/params/") {
        Some(name) if e.is_unknown_field() && NAMES.contains(&name) => FieldError::invalid(
            e.pointer.clone(),
            format!(
                "`{name}` belongs to the nystrom kernel_ridge solve (solver cg or direct); this model does not take it"
            ),
        ),
        _ => e,
    }
}

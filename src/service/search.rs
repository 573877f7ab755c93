//! Training bodies with `search`: the search checked against the rows before the fit is
//! queued (every value, the folds, the scoring, the limits, the memory it will hold),
//! then run on the fit's worker, and the best candidate refitted on all rows.

use super::{SearchJob, Service, ServiceError, TrainInput, ValidTraining};
use crate::estimator::{FitContext, FitError, FittedModel, Limits, ModelKind, TrainingData};
use crate::registry::Origin;
use crate::selection::{self, Admission, Document, Plan, Rows, SearchError, SearchSpec};
use crate::spec::FieldError;
use serde_json::Value;

impl Service {
    /// The checked search of a training body whose rows are `data`.
    pub(super) fn plan_search(
        &self,
        kind: ModelKind,
        input: &TrainInput,
        search: &Value,
        data: TrainingData,
        origin: Origin,
    ) -> Result<ValidTraining, ServiceError> {
        let spec = SearchSpec::from_json(search)?;
        let base = Document::new(input.kernel.as_ref(), input.params.as_ref());
        let (n, d) = (data.x().n(), data.x().d());
        let limit = self.config.effective_max_fit_bytes();
        let admission = Admission { kind, data: &data, limits: self.limits() };
        let classes = match &data {
            TrainingData::Classification(c) => Some((c.y.as_slice(), c.classes.len())),
            TrainingData::Regression(_) | TrainingData::Unlabelled(_) => None,
        };
        let several_outputs = matches!(&data, TrainingData::Regression(d) if d.outputs.is_multi());
        let rows = Rows { n, classes, several_outputs };
        let plan = Plan::new(&spec, kind, &base, rows, self.config.max_search_fits, &admission)?;
        let first = plan.candidates.iter().find_map(|c| c.spec.as_ref().ok().cloned()).ok_or_else(|| {
            let why = plan.candidates.first().and_then(|c| c.spec.as_ref().err()).cloned().unwrap_or_default();
            FieldError::invalid("/search/space", format!("no candidate is a valid setting of the model: {why}"))
        })?;
        // Fold fits run side by side on every core.
        let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
        let fits = plan.memory_estimate(n, d, cores);
        if fits > limit {
            return Err(ServiceError::TooLarge {
                detail: format!(
                    "this search needs an estimated {fits} bytes of working memory for {cores} fits at once (n = {n}), \
                     over the limit of {limit} bytes (MERCER_MAX_FIT_BYTES)"
                ),
            });
        }
        // What the fits leave of the limit may hold shared Gram tables: whole ones if
        // one fits, else the columns a lazy table holds (the search decides).
        let table_budget = limit.saturating_sub(fits);
        let job = SearchJob { plan, table_budget, kernel: base.kernel().clone(), params: base.params().clone() };
        Ok(ValidTraining { spec: first, data, origin, search: Some(Box::new(job)), labels: None })
    }

    /// What admission of a fit allows on this server (MERCER_EXACT_MAX_ROWS,
    /// MERCER_MAX_FIT_BYTES).
    pub fn limits(&self) -> Limits {
        Limits { exact_max_rows: self.config.exact_max_rows, max_fit_bytes: self.config.effective_max_fit_bytes() }
    }

    /// Runs a search on a fit worker, then fits its best candidate on every row; the
    /// model's report carries `training.search`.
    pub(super) fn search_and_fit(
        &self,
        job: &SearchJob,
        data: &TrainingData,
        ctx: &FitContext,
        busy: usize,
    ) -> Result<FittedModel, FitError> {
        let env = selection::Environment::new(busy, job.table_budget);
        let model = job.plan.kind.name();
        let outcome = match selection::run(&job.plan, data, ctx, env, self.limits()) {
            Ok(outcome) => outcome,
            Err(e) => {
                let fits = ctx.progress.snapshot().iteration;
                return Err(match e {
                    SearchError::Cancelled => {
                        self.metrics.record_search(model, "cancelled", fits);
                        FitError::Cancelled
                    }
                    SearchError::AllFailed(why) => {
                        self.metrics.record_search(model, "failed", fits);
                        FitError::Search(why)
                    }
                });
            }
        };
        let fits = outcome.report["n_fits"].as_u64().unwrap_or(0);
        self.metrics.record_search(model, "ready", fits);
        ctx.progress.phase("fit");
        let mut fitted = outcome.spec.fit(data, ctx)?;
        fitted.predictor_mut().report_mut().search = Some(outcome.report);
        Ok(fitted)
    }
}

//! The hyperparameter search the Gaussian-process models share: L-BFGS-B from the
//! given start and from seeded restarts, best start kept, reported in `training`.

use crate::estimator::{FitContext, FitError, TrainingReport};

/// A search for the hyperparameters (log space) that maximise a log marginal likelihood:
/// from `theta`, then from `restarts` more starts drawn log-uniformly within `bounds`
/// with `seed`, each by L-BFGS-B; starts that cannot be evaluated are skipped and
/// counted. `pointers` name the entries of theta in the request, for the report.
pub(crate) struct HyperSearch {
    pub theta: Vec<f64>,
    pub bounds: Vec<(f64, f64)>,
    pub pointers: Vec<String>,
    pub restarts: u64,
    pub seed: u64,
}

impl HyperSearch {
    /// The best theta and the report (iterations, converged, restarts_failed,
    /// hyperparameters_at_bounds). `lml` gives the objective and its gradient, or None
    /// where it cannot be evaluated.
    pub fn maximise(
        &self,
        ctx: &FitContext,
        lml: impl Fn(&[f64]) -> Option<(f64, Vec<f64>)>,
    ) -> Result<(Vec<f64>, TrainingReport), FitError> {
        if self.bounds.is_empty() {
            return Ok((self.theta.clone(), TrainingReport::default()));
        }
        let mut rng = crate::optimize::SplitMix64::new(self.seed);
        let mut starts = vec![self.theta.clone()];
        for _ in 0..self.restarts {
            starts.push(self.bounds.iter().map(|(lo, hi)| rng.uniform(*lo, *hi)).collect());
        }
        ctx.progress.phase("optimize");
        let mut best: Option<crate::optimize::Outcome> = None;
        let mut failed = 0u64;
        for start in &starts {
            ctx.cancel.check()?;
            let objective = |t: &[f64]| {
                if ctx.cancel.is_cancelled() {
                    return None;
                }
                let value = lml(t);
                ctx.progress.step(value.as_ref().map(|(l, _)| *l));
                value.map(|(l, g)| (-l, g.into_iter().map(|v| -v).collect()))
            };
            match crate::optimize::minimize(objective, start, &self.bounds, &crate::optimize::Options::default()) {
                Some(r) if best.as_ref().is_none_or(|b| r.f < b.f) => best = Some(r),
                Some(_) => {}
                None => failed += 1,
            }
        }
        ctx.cancel.check()?;
        let best = best.ok_or_else(|| {
            FitError::Optimisation(format!(
                "none of the {} starts could be evaluated (kernel matrix not positive definite)",
                starts.len()
            ))
        })?;
        let at_bounds = self
            .pointers
            .iter()
            .zip(best.x.iter().zip(&self.bounds))
            .filter(|(_, (v, (lo, hi)))| (*v - lo).abs() <= 1e-8 || (hi - *v).abs() <= 1e-8)
            .map(|(p, _)| p.clone())
            .collect();
        let report = TrainingReport {
            iterations: Some(best.iterations as u64),
            evaluations: Some(best.evaluations as u64),
            stop_reason: Some(best.stop.name().to_string()),
            converged: Some(best.converged()),
            restarts_failed: Some(failed),
            hyperparameters_at_bounds: Some(at_bounds),
            ..Default::default()
        };
        Ok((best.x, report))
    }
}

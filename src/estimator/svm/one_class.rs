//! The one-class SVM (Schölkopf et al. 2001), as scikit-learn's `OneClassSVM` (LIBSVM
//! `-s 2`): min 1/2 a'Ka subject to 0 <= a_i <= w_i, e'a = nu sum(w), started from
//! LIBSVM's point (nu sum(w) spent in row order) and solved by the one SMO solver.
//! decision_function(x) = sum_i a_i k(x_i, x) - rho (negative: an outlier), predictions
//! +1 / -1, score_samples = decision_function + rho. No targets.

use super::expansion::Expansion;
use super::{read_nu, support, SolverParams, Source};
use crate::estimator::weights::{rows_and_weights, SampleWeight};
use crate::estimator::{
    Decision, FitContext, FitError, PredictOptions, Prediction, Predictor, RestoreError, StoredFit, TrainingReport,
};
use crate::kernel::{Kernel, Points};
use crate::linalg::Parallelism;
use crate::smo::Problem;
use crate::spec::{FieldError, ObjectReader};
use serde_json::{json, Value};

/// Checked parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct OneClassSvm {
    pub kernel: Kernel,
    pub nu: f64,
    pub solver: SolverParams,
    pub sample_weight: Option<SampleWeight>,
}

impl OneClassSvm {
    pub fn from_json(kernel: Kernel, params: &Value, path: &str) -> Result<OneClassSvm, FieldError> {
        let mut obj = ObjectReader::new(params, path)?;
        let nu = read_nu(&mut obj)?;
        let solver = SolverParams::read(&mut obj)?;
        let sample_weight = SampleWeight::read(&mut obj)?;
        crate::estimator::approximation::Approximation::read_exact_only(&mut obj)?;
        obj.finish()?;
        Ok(OneClassSvm { kernel, nu, solver, sample_weight })
    }

    pub fn params_json(&self) -> Value {
        let mut out = json!({"nu": self.nu});
        let map = out.as_object_mut().expect("an object");
        self.solver.write(map);
        map.insert("sample_weight".into(), self.sample_weight.as_ref().map_or(Value::Null, SampleWeight::to_json));
        out
    }

    pub fn fit_memory_estimate(&self, n: usize, d: usize) -> usize {
        self.solver.fit_memory_estimate(n, d)
    }

    pub fn check_data(&self, n: usize) -> Result<(), FieldError> {
        match &self.sample_weight {
            Some(w) => w.check_len(n, "/params/sample_weight"),
            None => Ok(()),
        }
    }

    /// LIBSVM's solve_one_class problem for the kept rows' weights.
    fn problem(&self, w: &[f64]) -> Problem {
        let l = w.len();
        let mut nu_l: f64 = w.iter().map(|c| c * self.nu).sum();
        let mut start = vec![0.0; l];
        let mut i = 0;
        // LIBSVM runs `while (nu_l > 0)`; nu <= 1 keeps i inside the rows but for
        // round-off, which the bound on i absorbs.
        while nu_l > 0.0 && i < l {
            start[i] = w[i].min(nu_l);
            nu_l -= start[i];
            i += 1;
        }
        Problem { y: vec![1.0; l], p: vec![0.0; l], c: w.to_vec(), start, nu: false }
    }

    pub fn fit(&self, x: &Points, ctx: &FitContext) -> Result<OneClassModel, FitError> {
        ctx.cancel.check()?;
        let n = x.n();
        self.check_data(n).map_err(FitError::Invalid)?;
        let (kept, w) = rows_and_weights(self.sample_weight.as_ref(), n);
        let kw: Vec<f64> = kept.iter().map(|&r| w[r]).collect();
        ctx.progress.phase("solve");
        let sol = self.solver.solve(&self.kernel, &Source::Points(x), &kept, &self.problem(&kw), ctx)?;
        let (sv_rows, coef) = support(&kept, &sol.alpha);
        let report = TrainingReport {
            converged: Some(sol.converged),
            iterations: Some(sol.iterations),
            rho: Some(sol.rho),
            ..Default::default()
        };
        Ok(OneClassModel {
            spec: self.clone(),
            machine: Expansion { sv: x.select(&sv_rows), coef, rho: sol.rho, rows: Some(sv_rows) },
            report,
        })
    }
}

/// A fitted one-class SVM: support vectors, their a_i, and rho.
#[derive(Debug, Clone)]
pub struct OneClassModel {
    spec: OneClassSvm,
    machine: Expansion,
    report: TrainingReport,
}

impl OneClassModel {
    pub fn rho(&self) -> f64 {
        self.machine.rho
    }

    pub(super) fn expansion(&self) -> &Expansion {
        &self.machine
    }

    pub(crate) fn store_into(&self, s: &mut StoredFit) {
        self.machine.store_into(s);
    }

    pub(crate) fn restore(
        spec: OneClassSvm,
        sv: Points,
        coef: Vec<f64>,
        mut arrays: crate::estimator::StoredArrays,
        mut report: TrainingReport,
    ) -> Result<OneClassModel, RestoreError> {
        let machine = Expansion::restore(sv, coef, &mut arrays)?;
        // Models stored before rho was reported.
        report.rho = Some(machine.rho);
        Ok(OneClassModel { spec, machine, report })
    }
}

impl Predictor for OneClassModel {
    /// `values`: +1 (inlier) or -1 (outlier); `decision`: the decision function;
    /// `score_samples`: decision + rho.
    fn predict(&self, x: &Points, _opts: &PredictOptions, par: Parallelism) -> Prediction {
        let dec = self.machine.decision(&self.spec.kernel, x, par);
        let values = dec.iter().map(|&d| if d > 0.0 { 1.0 } else { -1.0 }).collect();
        let score_samples = Some(dec.iter().map(|d| d + self.machine.rho).collect());
        Prediction { values, decision: Some(Decision::Binary(dec)), score_samples, ..Default::default() }
    }

    crate::estimator::spec_and_report_accessors!();

    fn n_support(&self) -> usize {
        self.machine.sv.n()
    }

    fn support(&self) -> &Points {
        &self.machine.sv
    }

    fn memory_bytes(&self) -> usize {
        self.machine.memory_bytes()
    }

    fn predict_cost(&self, m: usize, _opts: &PredictOptions) -> f64 {
        self.machine.predict_cost(&self.spec.kernel, m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// LIBSVM's start: nu sum(w) spent in row order, each a_i <= w_i.
    #[test]
    fn the_start_spends_nu_l_in_order() {
        let k = crate::kernel::default_kernel();
        let oc = OneClassSvm::from_json(k.clone(), &json!({"nu": 0.25}), "/params").unwrap();
        let p = oc.problem(&[1.0, 2.0, 1.0, 4.0]);
        // nu sum(w) = 2: row 0 takes 1, row 1 the remaining 1.
        assert_eq!(p.start, vec![1.0, 1.0, 0.0, 0.0]);
        assert_eq!(OneClassSvm::from_json(k.clone(), &oc.params_json(), "/params").unwrap(), oc);
        assert_eq!(OneClassSvm::from_json(k, &json!({"c": 1}), "/params").unwrap_err().pointer, "/params/c");
    }
}

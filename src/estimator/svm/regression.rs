//! Support vector regression, as scikit-learn's `SVR` (epsilon-SVR, LIBSVM `-s 3`) and
//! `NuSVR` (`-s 4`): the 2n-variable dual over (a, a*) with a_i and a*_i both on point
//! i (signs +1 and -1), solved by the one SMO solver; f(x) = sum_i (a_i - a*_i) k(x_i,
//! x) - rho. nu-SVR finds its epsilon (-r of the nu solver), reported as
//! `training.epsilon`. Rows of sample weight 0 are left out; the others bound their
//! variables by C x weight.

use super::expansion::Expansion;
use super::{positive, read_nu, support, SolverParams, Source};
use crate::estimator::weights::{rows_and_weights, SampleWeight};
use crate::estimator::{
    Estimator, FitContext, FitError, PredictOptions, Prediction, Predictor, RestoreError, StoredFit, TrainingReport,
    TrainingSet,
};
use crate::kernel::{Kernel, Points};
use crate::linalg::Parallelism;
use crate::smo::Problem;
use crate::spec::{FieldError, ObjectReader};
use serde_json::{json, Value};

/// Checked parameters of either regression: `nu` None is epsilon-SVR, Some is nu-SVR.
#[derive(Debug, Clone, PartialEq)]
pub struct Svr {
    pub kernel: Kernel,
    pub c: f64,
    /// epsilon-SVR's tube half-width (unused by nu-SVR, which finds its own).
    pub epsilon: f64,
    pub nu: Option<f64>,
    pub solver: SolverParams,
    pub sample_weight: Option<SampleWeight>,
}

impl Svr {
    /// `svr` params.
    pub fn from_json(kernel: Kernel, params: &Value, path: &str) -> Result<Svr, FieldError> {
        Svr::read(kernel, params, path, false)
    }

    /// `nu_svr` params.
    pub fn from_json_nu(kernel: Kernel, params: &Value, path: &str) -> Result<Svr, FieldError> {
        Svr::read(kernel, params, path, true)
    }

    fn read(kernel: Kernel, params: &Value, path: &str, nu: bool) -> Result<Svr, FieldError> {
        let mut obj = ObjectReader::new(params, path)?;
        let (epsilon, nu) = if nu {
            (0.0, Some(read_nu(&mut obj)?))
        } else {
            let eps = match obj.f64("epsilon")? {
                Some(e) if e < 0.0 => return Err(FieldError::invalid(obj.pointer("epsilon"), "must not be negative")),
                e => e.unwrap_or(0.1),
            };
            (eps, None)
        };
        let c = positive(&mut obj, "c", 1.0)?;
        let solver = SolverParams::read(&mut obj)?;
        let sample_weight = SampleWeight::read(&mut obj)?;
        crate::estimator::approximation::Approximation::read_exact_only(&mut obj)?;
        obj.finish()?;
        Ok(Svr { kernel, c, epsilon, nu, solver, sample_weight })
    }

    pub fn params_json(&self) -> Value {
        let mut out = match self.nu {
            None => json!({"c": self.c, "epsilon": self.epsilon}),
            Some(nu) => json!({"nu": nu, "c": self.c}),
        };
        let map = out.as_object_mut().expect("an object");
        self.solver.write(map);
        map.insert("sample_weight".into(), self.sample_weight.as_ref().map_or(Value::Null, SampleWeight::to_json));
        out
    }

    pub fn fit_memory_estimate(&self, n: usize, d: usize) -> usize {
        self.solver.fit_memory_estimate(2 * n, d)
    }

    /// The same regression on rows `rows` of its data (a fold's training rows).
    pub fn for_rows(&self, rows: &[usize]) -> Svr {
        Svr { sample_weight: self.sample_weight.as_ref().map(|w| w.select(rows)), ..self.clone() }
    }

    pub fn check_data(&self, n: usize) -> Result<(), FieldError> {
        match &self.sample_weight {
            Some(w) => w.check_len(n, "/params/sample_weight"),
            None => Ok(()),
        }
    }

    /// LIBSVM's solve_epsilon_svr / solve_nu_svr problem over the kept rows' targets
    /// `y` and weights `w`: variables a (sign +1) then a* (sign -1).
    fn problem(&self, y: &[f64], w: &[f64]) -> Problem {
        let l = y.len();
        let c: Vec<f64> = w.iter().map(|w| w * self.c).collect();
        let signs: Vec<f64> = std::iter::repeat_n(1.0, l).chain(std::iter::repeat_n(-1.0, l)).collect();
        let c2: Vec<f64> = c.iter().chain(&c).copied().collect();
        match self.nu {
            None => {
                let p = y.iter().map(|v| self.epsilon - v).chain(y.iter().map(|v| self.epsilon + v)).collect();
                Problem { y: signs, p, c: c2, start: vec![0.0; 2 * l], nu: false }
            }
            Some(nu) => {
                let mut sum = c.iter().map(|c| c * nu).sum::<f64>() / 2.0;
                let mut start = vec![0.0; 2 * l];
                for i in 0..l {
                    let a = sum.min(c[i]);
                    start[i] = a;
                    start[i + l] = a;
                    sum -= a;
                }
                let p = y.iter().map(|v| -v).chain(y.iter().copied()).collect();
                Problem { y: signs, p, c: c2, start, nu: true }
            }
        }
    }
}

impl Estimator for Svr {
    type Data = TrainingSet;
    type Fitted = SvrModel;

    fn fit(&self, data: &TrainingSet, ctx: &FitContext) -> Result<SvrModel, FitError> {
        ctx.cancel.check()?;
        let n = data.y.len();
        self.check_data(n).map_err(FitError::Invalid)?;
        let (kept, w) = rows_and_weights(self.sample_weight.as_ref(), n);
        let y: Vec<f64> = kept.iter().map(|&r| data.y[r]).collect();
        let kw: Vec<f64> = kept.iter().map(|&r| w[r]).collect();
        ctx.progress.phase("solve");
        let problem = self.problem(&y, &kw);
        let sol = self.solver.solve(&self.kernel, &Source::Points(&data.x), &kept, &problem, ctx)?;
        let l = kept.len();
        let coef: Vec<f64> = (0..l).map(|i| sol.alpha[i] - sol.alpha[i + l]).collect();
        let (sv_rows, coef) = support(&kept, &coef);
        let report = TrainingReport {
            converged: Some(sol.converged),
            iterations: Some(sol.iterations),
            epsilon: self.nu.map(|_| -sol.r),
            ..Default::default()
        };
        Ok(SvrModel {
            spec: self.clone(),
            machine: Expansion { sv: data.x.select(&sv_rows), coef, rho: sol.rho, rows: Some(sv_rows) },
            report,
        })
    }
}

/// A fitted SVR: its support vectors, their coefficients a - a*, and rho.
#[derive(Debug, Clone)]
pub struct SvrModel {
    spec: Svr,
    machine: Expansion,
    report: TrainingReport,
}

impl SvrModel {
    /// Whether it is a nu-SVR.
    pub fn is_nu(&self) -> bool {
        self.spec.nu.is_some()
    }

    pub(super) fn expansion(&self) -> &Expansion {
        &self.machine
    }

    pub(crate) fn store_into(&self, s: &mut StoredFit) {
        self.machine.store_into(s);
    }

    pub(crate) fn restore(
        spec: Svr,
        sv: Points,
        coef: Vec<f64>,
        mut arrays: crate::estimator::StoredArrays,
        report: TrainingReport,
    ) -> Result<SvrModel, RestoreError> {
        Ok(SvrModel { spec, machine: Expansion::restore(sv, coef, &mut arrays)?, report })
    }
}

impl Predictor for SvrModel {
    fn predict(&self, x: &Points, _opts: &PredictOptions, par: Parallelism) -> Prediction {
        let values = self.machine.decision(&self.spec.kernel, x, par);
        Prediction { values, ..Default::default() }
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

    #[test]
    fn parameters_are_checked_and_echoed() {
        let k = crate::kernel::default_kernel();
        let svr = Svr::from_json(k.clone(), &json!({"epsilon": 0.2, "c": 3}), "/params").unwrap();
        assert_eq!(Svr::from_json(k.clone(), &svr.params_json(), "/params").unwrap(), svr);
        let nu = Svr::from_json_nu(k.clone(), &json!({"nu": 0.3}), "/params").unwrap();
        assert_eq!(Svr::from_json_nu(k.clone(), &nu.params_json(), "/params").unwrap(), nu);
        assert_eq!(
            Svr::from_json(k.clone(), &json!({"epsilon": -1}), "/params").unwrap_err().pointer,
            "/params/epsilon"
        );
        assert_eq!(
            Svr::from_json_nu(k.clone(), &json!({"epsilon": 1}), "/params").unwrap_err().pointer,
            "/params/epsilon"
        );
        assert_eq!(Svr::from_json_nu(k, &json!({"nu": 2}), "/params").unwrap_err().pointer, "/params/nu");
    }

    /// LIBSVM's nu-SVR start: nu sum(C) / 2 spent in row order, a_i = a*_i.
    #[test]
    fn the_nu_svr_start_is_libsvms() {
        let k = crate::kernel::default_kernel();
        let svr = Svr::from_json_nu(k, &json!({"nu": 0.5, "c": 2}), "/params").unwrap();
        let p = svr.problem(&[1.0, 2.0, 3.0], &[1.0, 1.0, 1.0]);
        // nu sum(C) / 2 = 0.5 * 6 / 2 = 1.5: row 0 takes 1.5 (C = 2), the rest 0.
        assert_eq!(p.start, vec![1.5, 0.0, 0.0, 1.5, 0.0, 0.0]);
        assert_eq!(p.p, vec![-1.0, -2.0, -3.0, 1.0, 2.0, 3.0]);
        assert_eq!(p.y, vec![1.0, 1.0, 1.0, -1.0, -1.0, -1.0]);
    }
}

//! Support vector classification, as scikit-learn's `SVC` (C-SVC, LIBSVM `-s 0`) and
//! `NuSVC` (nu-SVC, `-s 1`).
//!
//! Rows of sample weight 0 are left out first. Two classes: one dual problem. More:
//! one-vs-one, a machine per pair of classes trained on that pair's rows (each class's
//! rows in row order, the lower class +1), predictions by voting (ties to the lower
//! class, as LIBSVM). Only support vectors are kept, once each however many machines use
//! them, grouped by class, in LIBSVM's coefficient layout (`model.rs`).
//!
//! C-SVC bounds row r by C x its class weight x its sample weight. nu-SVC bounds it by
//! its sample weight, starts from LIBSVM's feasible point (nu l / 2 spread over each
//! sign in row order), solves with the nu solver and rescales by 1 / r; LIBSVM gives its
//! class weights no part there, and neither do we.
//!
//! `probability`: Platt's sigmoid per machine, fitted on 5-fold cross-validated decision
//! values (folds drawn with `seed`, machines of the same formulation), with the Newton
//! method of Lin, Lin & Weng (2007); more than two classes are coupled pairwise (Wu, Lin
//! & Weng 2004, method 2). As in LIBSVM, predictions still come from the decision values,
//! so argmax(probabilities) can disagree with them; the fit counts how often.

use super::{positive, read_nu, SolverParams};
use crate::estimator::approximation::{Approximation, Mode};
use crate::estimator::targets::labels::ClassificationSet;
use crate::estimator::weights::{rows_and_weights, ClassWeight, SampleWeight};
use crate::kernel::Kernel;
use crate::spec::{FieldError, ObjectReader};
use serde_json::{json, Value};

/// Folds of the cross-validation behind Platt scaling (LIBSVM's choice).
pub(super) const PLATT_FOLDS: usize = 5;

/// Checked parameters of either classifier: `nu` None is C-SVC with `c`, Some is nu-SVC.
#[derive(Debug, Clone, PartialEq)]
pub struct Svm {
    pub kernel: Kernel,
    pub c: f64,
    pub nu: Option<f64>,
    pub solver: SolverParams,
    pub probability: bool,
    /// Shuffles the Platt cross-validation folds.
    pub seed: u64,
    pub class_weight: Option<ClassWeight>,
    pub sample_weight: Option<SampleWeight>,
    /// C-SVC only: `nystrom` fits a linear SVM on Nystrom features
    /// (`svm/nystrom.rs`); nu-SVC is always exact.
    pub approx: Approximation,
    /// Whether `tol` and `max_iter` were given: a nystrom fit's defaults differ
    /// (LIBLINEAR's 0.1 and 1000 against LIBSVM's 1e-3 and no limit).
    pub solver_given: Given,
}

/// Whether `tol` and `max_iter` were in the request. How the params were written, not
/// what they are: two specs with the same values are equal whatever this says (an echo
/// read back writes every field).
#[derive(Debug, Clone, Copy)]
pub struct Given(pub bool, pub bool);

impl PartialEq for Given {
    fn eq(&self, _: &Given) -> bool {
        true
    }
}

impl Svm {
    /// `svm` (C-SVC) params.
    pub fn from_json(kernel: Kernel, params: &Value, path: &str) -> Result<Svm, FieldError> {
        Svm::read(kernel, params, path, false)
    }

    /// `nu_svm` (nu-SVC) params.
    pub fn from_json_nu(kernel: Kernel, params: &Value, path: &str) -> Result<Svm, FieldError> {
        Svm::read(kernel, params, path, true)
    }

    fn read(kernel: Kernel, params: &Value, path: &str, nu: bool) -> Result<Svm, FieldError> {
        let given = |key: &str| params.get(key).is_some_and(|v| !v.is_null());
        let solver_given = Given(given("tol"), given("max_iter"));
        let mut obj = ObjectReader::new(params, path)?;
        let (c, nu) = if nu { (1.0, Some(read_nu(&mut obj)?)) } else { (positive(&mut obj, "c", 1.0)?, None) };
        let solver = SolverParams::read(&mut obj)?;
        let probability = obj.bool("probability")?.unwrap_or(false);
        let seed = obj.u64("seed")?.unwrap_or(0);
        let class_weight = ClassWeight::read(&mut obj)?;
        let sample_weight = SampleWeight::read(&mut obj)?;
        let approx = if nu.is_some() {
            Approximation::read_exact_only(&mut obj)?;
            Approximation { mode: Mode::Exact, ..Approximation::default() }
        } else {
            Approximation::read_without_loo(&mut obj)?
        };
        obj.finish()?;
        let mut svm =
            Svm { kernel, c, nu, solver, probability, seed, class_weight, sample_weight, approx, solver_given };
        svm.settle_approximation()?;
        Ok(svm)
    }

    /// Once the approximation is decided: a nystrom fit takes LIBLINEAR's `tol` (0.1) and
    /// `max_iter` (1000) unless given, and has no probabilities (422 at
    /// `/params/probability`).
    pub fn settle_approximation(&mut self) -> Result<(), FieldError> {
        if self.approx.mode != Mode::Nystrom {
            return Ok(());
        }
        if self.probability {
            return Err(FieldError::invalid(
                "/params/probability",
                "a nystrom svm has no probabilities (Platt scaling needs the exact machines); use kernel_logistic, or approximation \"exact\"",
            ));
        }
        if !self.solver_given.0 {
            self.solver.tol = 0.1;
        }
        if !self.solver_given.1 {
            self.solver.max_iter = Some(1000);
        }
        Ok(())
    }

    pub fn params_json(&self) -> Value {
        let mut out = match self.nu {
            None => json!({"c": self.c}),
            Some(nu) => json!({"nu": nu}),
        };
        let map = out.as_object_mut().expect("an object");
        self.solver.write(map);
        map.insert("probability".into(), Value::Bool(self.probability));
        map.insert("seed".into(), Value::from(self.seed));
        map.insert("class_weight".into(), self.class_weight.as_ref().map_or(Value::Null, ClassWeight::to_json));
        map.insert("sample_weight".into(), self.sample_weight.as_ref().map_or(Value::Null, SampleWeight::to_json));
        if self.nu.is_none() {
            self.approx.write_json_without_loo(map);
        }
        out
    }

    pub fn fit_memory_estimate(&self, n: usize, d: usize) -> usize {
        self.solver.fit_memory_estimate(n, d)
    }

    /// The same classifier on rows `rows` of its data (a fold's training rows): the
    /// sample weights taken at those rows.
    pub fn for_rows(&self, rows: &[usize]) -> Svm {
        Svm { sample_weight: self.sample_weight.as_ref().map(|w| w.select(rows)), ..self.clone() }
    }

    /// What can only be checked against the targets: the sample weights' length, every
    /// class keeping a row of positive weight, the class weights' labels, and (nu-SVC)
    /// nu feasible for every pair of classes (sums of sample weights, as LIBSVM).
    pub fn check_targets(&self, data: &ClassificationSet) -> Result<(), FieldError> {
        let n = data.y.len();
        let k = data.classes.len();
        if let Some(w) = &self.sample_weight {
            w.check_len(n, "/params/sample_weight")?;
        }
        if let Some(cw) = &self.class_weight {
            cw.per_class(&data.classes, &data.y, "/params/class_weight")?;
        }
        let (_, w) = rows_and_weights(self.sample_weight.as_ref(), n);
        let mut mass = vec![0.0; k];
        for (&c, &w) in data.y.iter().zip(&w) {
            mass[c] += w;
        }
        if let Some(c) = mass.iter().position(|&m| m <= 0.0) {
            return Err(FieldError::invalid(
                "/params/sample_weight",
                format!("every row of class {} has weight 0: a class needs a row to fit on", data.classes.label(c)),
            ));
        }
        if let Some(nu) = self.nu {
            for a in 0..k {
                for b in a + 1..k {
                    if nu * (mass[a] + mass[b]) / 2.0 > mass[a].min(mass[b]) {
                        return Err(FieldError::invalid(
                            "/params/nu",
                            format!(
                                "nu = {nu} is infeasible for classes {} and {}: nu (n_a + n_b) / 2 exceeds min(n_a, n_b)",
                                data.classes.label(a),
                                data.classes.label(b)
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parameters_are_checked_and_echoed() {
        let k = crate::kernel::default_kernel();
        let svm = Svm::from_json(k.clone(), &json!({"c": 2, "max_iter": 50, "cache_mb": 0.5}), "/params").unwrap();
        assert_eq!((svm.c, svm.solver.max_iter, svm.solver.cache_bytes()), (2.0, Some(50), 1 << 19));
        assert_eq!(Svm::from_json(k.clone(), &svm.params_json(), "/params").unwrap(), svm);
        let nu = Svm::from_json_nu(k.clone(), &json!({"nu": 0.3, "class_weight": "balanced"}), "/params").unwrap();
        assert_eq!(Svm::from_json_nu(k.clone(), &nu.params_json(), "/params").unwrap(), nu);
        for (bad, pointer) in [
            (json!({"c": -1}), "/params/c"),
            (json!({"tol": 0}), "/params/tol"),
            (json!({"cache_mb": 2e6}), "/params/cache_mb"),
            (json!({"max_iter": 0}), "/params/max_iter"),
            (json!({"nu": 0.5}), "/params/nu"),
        ] {
            assert_eq!(Svm::from_json(k.clone(), &bad, "/params").unwrap_err().pointer, pointer);
        }
        for bad in [json!({"nu": 0}), json!({"nu": 1.5})] {
            assert_eq!(Svm::from_json_nu(k.clone(), &bad, "/params").unwrap_err().pointer, "/params/nu");
        }
        assert_eq!(Svm::from_json_nu(k, &json!({"c": 1}), "/params").unwrap_err().pointer, "/params/c");
    }
}

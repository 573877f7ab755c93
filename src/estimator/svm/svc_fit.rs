//! Fitting C- and nu-SVC: one dual problem per pair of classes on the SMO solver, the
//! support vectors gathered once each, and Platt's sigmoids when `probability` asks
//! (the parameters and their checks are `svc.rs`).

use super::model::SvmModel;
use super::probability::sigmoid_train;
use super::svc::{Svm, PLATT_FOLDS};
use super::{support, Source};
use crate::estimator::targets::labels::ClassificationSet;
use crate::estimator::weights::rows_and_weights;
use crate::estimator::{Estimator, FitContext, FitError, PredictOptions, TrainingReport};
use crate::kernel::GramTable;
use crate::optimize::SplitMix64;
use crate::smo::Problem;
use crate::spec::FieldError;
use nalgebra::DMatrix;
use std::sync::Arc;

impl Svm {
    /// The fit with kernel values from `table` (a Gram matrix over a superset of the
    /// rows: `rows[i]` is data row i's place in it), as a search shares one table among
    /// its candidates and folds. Returns the model and its support vectors' data rows.
    pub fn fit_from_table(
        &self,
        data: &ClassificationSet,
        table: &Arc<GramTable>,
        rows: &[usize],
        ctx: &FitContext,
    ) -> Result<(SvmModel, Vec<usize>), FitError> {
        self.fit_with(data, &Source::Table { table, rows, x: &data.x }, ctx)
    }

    /// One machine's dual over data rows `rows` (labels y = +-1, per-row bounds before
    /// the formulation's scaling), solved: its coefficients y a (nu-SVC: / r) in `rows`'
    /// order, rho, iterations, converged.
    fn machine(
        &self,
        src: &Source<'_>,
        rows: &[usize],
        y: &[f64],
        bound: &[f64],
        ctx: &FitContext,
    ) -> Result<(Vec<f64>, f64, u64, bool), FitError> {
        let problem = match self.nu {
            None => Problem::c_svc(y.to_vec(), bound.to_vec()),
            Some(nu) => nu_svc_problem(nu, y, bound),
        };
        let sol = self.solver.solve(&self.kernel, src, rows, &problem, ctx)?;
        Ok(match self.nu {
            None => (sol.coef(y), sol.rho, sol.iterations, sol.converged),
            Some(nu) => {
                // LIBSVM: alpha *= y / r, rho /= r. With nu at the limit of what the
                // (weighted) classes allow, r is 0 and every number would be infinite or
                // NaN (scikit-learn: "The dual coefficients or intercepts are not finite").
                let r = sol.r;
                if !(r > 0.0 && r.is_finite()) {
                    return Err(FitError::Invalid(FieldError::invalid(
                        "/params/nu",
                        format!(
                            "nu = {nu} leaves a pair of classes no margin (the solution's r is {r}): the classes' \
                             (weighted) sizes are at the limit this nu allows; lower nu"
                        ),
                    )));
                }
                let coef = sol.alpha.iter().zip(y).map(|(a, y)| a * (y / r)).collect();
                (coef, sol.rho / r, sol.iterations, sol.converged)
            }
        })
    }

    /// Platt's (A, B) for one machine (data rows `rows`, labels y, bounds) from
    /// cross-validated decision values of machines of the same formulation.
    fn platt(
        &self,
        src: &Source<'_>,
        rows: &[usize],
        y: &[f64],
        bound: &[f64],
        ctx: &FitContext,
    ) -> Result<(f64, f64), FitError> {
        let n = y.len();
        let mut rng = SplitMix64::new(self.seed);
        let mut perm: Vec<usize> = (0..n).collect();
        for i in 0..n {
            let j = i + (rng.next_u64() % (n - i) as u64) as usize;
            perm.swap(i, j);
        }
        let mut dec = vec![0.0; n];
        for fold in 0..PLATT_FOLDS {
            let (begin, end) = (fold * n / PLATT_FOLDS, (fold + 1) * n / PLATT_FOLDS);
            let held = &perm[begin..end];
            let train: Vec<usize> = perm[..begin].iter().chain(&perm[end..]).copied().collect();
            let ty: Vec<f64> = train.iter().map(|&i| y[i]).collect();
            let positives = ty.iter().filter(|&&v| v > 0.0).count();
            let fixed = match (positives, ty.len() - positives) {
                (0, 0) => Some(0.0),
                (_, 0) => Some(1.0),
                (0, _) => Some(-1.0),
                _ => None,
            };
            if let Some(v) = fixed {
                held.iter().for_each(|&i| dec[i] = v);
                continue;
            }
            let train_rows: Vec<usize> = train.iter().map(|&t| rows[t]).collect();
            let train_bound: Vec<f64> = train.iter().map(|&t| bound[t]).collect();
            let (coef, rho, _, _) = self.machine(src, &train_rows, &ty, &train_bound, ctx)?;
            let (sv_rows, sv_coef) = support(&train_rows, &coef);
            let held_rows: Vec<usize> = held.iter().map(|&h| rows[h]).collect();
            let k = src.cross(&self.kernel, &sv_rows, &held_rows, ctx.par);
            for (col, &i) in held.iter().enumerate() {
                dec[i] = sv_coef.iter().enumerate().map(|(r, c)| c * k[(r, col)]).sum::<f64>() - rho;
            }
        }
        Ok(sigmoid_train(&dec, y))
    }

    fn fit_with(
        &self,
        data: &ClassificationSet,
        src: &Source<'_>,
        ctx: &FitContext,
    ) -> Result<(SvmModel, Vec<usize>), FitError> {
        let n = data.y.len();
        let k = data.classes.len();
        self.check_targets(data).map_err(FitError::Invalid)?;
        // Rows of weight 0 take no part (LIBSVM's remove_zero_weight).
        let (kept, weight) = rows_and_weights(self.sample_weight.as_ref(), n);
        let class_c = match &self.class_weight {
            Some(cw) => cw.per_class(&data.classes, &data.y, "/params/class_weight").map_err(FitError::Invalid)?,
            None => vec![1.0; k],
        };
        let mut groups = vec![Vec::new(); k];
        for &r in &kept {
            groups[data.y[r]].push(r);
        }
        let mut nonzero = vec![false; n];
        let mut machines = Vec::with_capacity(k * (k - 1) / 2);
        let (mut prob_a, mut prob_b) = (Vec::new(), Vec::new());
        let (mut iterations, mut converged) = (0u64, true);
        for i in 0..k {
            for j in i + 1..k {
                ctx.cancel.check()?;
                let rows: Vec<usize> = groups[i].iter().chain(&groups[j]).copied().collect();
                let y: Vec<f64> = (0..rows.len()).map(|r| if r < groups[i].len() { 1.0 } else { -1.0 }).collect();
                // C-SVC: C x class weight x sample weight; nu-SVC: the sample weight.
                let bound: Vec<f64> = rows
                    .iter()
                    .map(|&r| match self.nu {
                        None => weight[r] * (self.c * class_c[data.y[r]]),
                        Some(_) => weight[r],
                    })
                    .collect();
                if self.probability {
                    let (a, b) = self.platt(src, &rows, &y, &bound, ctx)?;
                    prob_a.push(a);
                    prob_b.push(b);
                }
                let (coef, rho, iters, done) = self.machine(src, &rows, &y, &bound, ctx)?;
                iterations += iters;
                converged &= done;
                for (r, &row) in rows.iter().enumerate() {
                    nonzero[row] |= coef[r].abs() > 0.0;
                }
                machines.push((rows, coef, rho));
            }
        }
        // Support vectors grouped by class, in row order within a class.
        let mut position = vec![usize::MAX; n];
        let mut sv_rows = Vec::new();
        let mut sv_start = vec![0];
        for g in &groups {
            for &row in g {
                if nonzero[row] {
                    position[row] = sv_rows.len();
                    sv_rows.push(row);
                }
            }
            sv_start.push(sv_rows.len());
        }
        let per_class: Vec<u64> = sv_start.windows(2).map(|w| (w[1] - w[0]) as u64).collect();
        let mut coef = DMatrix::zeros(k - 1, sv_rows.len());
        let mut rho = Vec::with_capacity(machines.len());
        let mut p = 0;
        for i in 0..k {
            for j in i + 1..k {
                let (rows, c, r) = &machines[p];
                for (t, &row) in rows.iter().enumerate() {
                    if c[t].abs() > 0.0 {
                        let coef_row = if data.y[row] == i { j - 1 } else { i };
                        coef[(coef_row, position[row])] = c[t];
                    }
                }
                rho.push(*r);
                p += 1;
            }
        }
        let report = TrainingReport {
            converged: Some(converged),
            iterations: Some(iterations),
            n_support_per_class: Some(per_class),
            ..Default::default()
        };
        let mut model = SvmModel {
            spec: self.clone(),
            classes: data.classes.clone(),
            sv: data.x.select(&sv_rows),
            sv_start,
            coef,
            rho,
            prob_a,
            prob_b,
            report,
            support_rows: Some(sv_rows.clone()),
        };
        if self.probability {
            ctx.cancel.check()?;
            let opts = PredictOptions { probabilities: true, ..PredictOptions::default() };
            let all: Vec<usize> = (0..n).collect();
            let p = model.predict_cross(&src.cross(&self.kernel, &sv_rows, &all, ctx.par), &opts);
            let (labels, probs) =
                (p.classes.unwrap_or_default(), p.probabilities.expect("probabilities were asked for"));
            let disagree = labels
                .iter()
                .enumerate()
                .filter(|&(r, &c)| crate::estimator::first_max(probs.row(r).iter().copied()) != c)
                .count();
            model.report.probability_disagreements = Some(disagree as u64);
        }
        Ok((model, sv_rows))
    }
}

/// nu-SVC's dual (LIBSVM's solve_nu_svc): p = 0, bounds the sample weights, and the
/// start that spends nu sum(C) / 2 on each sign in row order.
fn nu_svc_problem(nu: f64, y: &[f64], bound: &[f64]) -> Problem {
    let nu_l: f64 = bound.iter().map(|c| nu * c).sum();
    let (mut sum_pos, mut sum_neg) = (nu_l / 2.0, nu_l / 2.0);
    let start = y
        .iter()
        .zip(bound)
        .map(|(&yi, &c)| {
            let sum = if yi > 0.0 { &mut sum_pos } else { &mut sum_neg };
            let a = c.min(*sum);
            *sum -= a;
            a
        })
        .collect();
    Problem { y: y.to_vec(), p: vec![0.0; y.len()], c: bound.to_vec(), start, nu: true }
}

impl Estimator for Svm {
    type Data = ClassificationSet;
    type Fitted = SvmModel;

    fn fit(&self, data: &ClassificationSet, ctx: &FitContext) -> Result<SvmModel, FitError> {
        self.fit_with(data, &Source::Points(&data.x), ctx).map(|(model, _)| model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// LIBSVM's start for nu-SVC: nu l / 2 spent on each sign in order, every a_i <= C_i.
    #[test]
    fn the_nu_start_spends_nu_l_over_two_per_sign() {
        let y = [1.0, -1.0, 1.0, 1.0, -1.0];
        let p = nu_svc_problem(0.8, &y, &[1.0; 5]);
        // nu l / 2 = 2 per sign: +1 rows 0, 2 take 1 each; -1 rows 1, 4 take 1 each.
        assert_eq!(p.start, vec![1.0, 1.0, 1.0, 0.0, 1.0]);
        assert!(p.nu && p.p.iter().all(|&v| v == 0.0));
    }
}

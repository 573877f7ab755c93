//! Early stopping: whether a running trial, from the intermediate values it reported,
//! should stop, decided as Optuna's MedianPruner and SuccessiveHalvingPruner decide.
//!
//! Values here are as told (not negated): `maximize` says which way is better. A trial's
//! reports are a map from step to value; the decision reads only stored reports and
//! trial states, so that every replica decides alike.

use std::collections::BTreeMap;

/// A study's pruner and its settings.
#[derive(Debug, Clone, PartialEq)]
pub enum Pruner {
    None,
    /// Optuna's MedianPruner: stop a trial whose best value so far is worse than the
    /// median of the complete trials' values at the same step.
    Median {
        startup_trials: u64,
        warmup_steps: u64,
        interval_steps: u64,
        min_trials: u64,
    },
    /// Optuna's SuccessiveHalvingPruner (asynchronous successive halving): at rung r's
    /// step, min_resource x reduction_factor^(min_early_stopping_rate + r), a trial goes
    /// on only while its value is in the best 1/reduction_factor of the values trials
    /// had when they reached that rung. `min_resource` None is "auto": the largest last
    /// step of the complete trials / 100, at least 1; nothing is pruned before a trial
    /// completes.
    Halving {
        min_resource: Option<u64>,
        reduction_factor: u64,
        min_early_stopping_rate: u64,
    },
}

impl Pruner {
    pub const MEDIAN: Pruner = Pruner::Median { startup_trials: 5, warmup_steps: 0, interval_steps: 1, min_trials: 1 };
    pub const HALVING: Pruner = Pruner::Halving { min_resource: None, reduction_factor: 4, min_early_stopping_rate: 0 };
}

/// Another trial of the study, as the pruner sees it.
#[derive(Debug, Clone, Copy)]
pub struct Other<'a> {
    pub reports: &'a BTreeMap<u64, f64>,
    pub complete: bool,
}

/// Whether the trial with these reports should stop now (at its last reported step).
pub fn should_prune(pruner: &Pruner, reports: &BTreeMap<u64, f64>, others: &[Other<'_>], maximize: bool) -> bool {
    let Some((&step, _)) = reports.iter().next_back() else { return false };
    match *pruner {
        Pruner::None => false,
        Pruner::Median { startup_trials, warmup_steps, interval_steps, min_trials } => {
            let complete: Vec<&Other<'_>> = others.iter().filter(|o| o.complete).collect();
            if complete.is_empty() || (complete.len() as u64) < startup_trials || step < warmup_steps {
                return false;
            }
            // Decide only at the first report at or past each interval's step.
            let nearest = (step - warmup_steps) / interval_steps * interval_steps + warmup_steps;
            if reports.keys().rev().nth(1).is_some_and(|&before| before >= nearest) {
                return false;
            }
            let best =
                reports.values().copied().fold(if maximize { f64::NEG_INFINITY } else { f64::INFINITY }, |a, b| {
                    if maximize {
                        a.max(b)
                    } else {
                        a.min(b)
                    }
                });
            let at_step: Vec<f64> = complete.iter().filter_map(|o| o.reports.get(&step).copied()).collect();
            if (at_step.len() as u64) < min_trials.max(1) {
                return false;
            }
            let median = percentile(at_step, 50.0);
            if maximize {
                best < median
            } else {
                best > median
            }
        }
        Pruner::Halving { min_resource, reduction_factor, min_early_stopping_rate } => {
            let min_resource = match min_resource {
                Some(r) => r,
                None => {
                    let last = others.iter().filter(|o| o.complete).filter_map(|o| o.reports.keys().next_back()).max();
                    match last {
                        Some(&l) => (l / 100).max(1),
                        None => return false,
                    }
                }
            };
            let value = reports[&step];
            let mut rung = 0u32;
            loop {
                let Some(at) = reduction_factor
                    .checked_pow(min_early_stopping_rate as u32 + rung)
                    .and_then(|p| p.checked_mul(min_resource))
                else {
                    return false;
                };
                if step < at {
                    return false;
                }
                // The rung was decided at an earlier report: passed then.
                if reports.range(at..step).next().is_some() {
                    rung += 1;
                    continue;
                }
                let mut competing: Vec<f64> =
                    others.iter().filter_map(|o| o.reports.range(at..).next().map(|(_, &v)| v)).collect();
                competing.push(value);
                competing.sort_by(f64::total_cmp);
                let promotable = (competing.len() / reduction_factor as usize).max(1) - 1;
                let promoted = if maximize {
                    value >= competing[competing.len() - 1 - promotable]
                } else {
                    value <= competing[promotable]
                };
                if !promoted {
                    return true;
                }
                rung += 1;
            }
        }
    }
}

/// numpy's percentile with linear interpolation (q in 0..=100).
fn percentile(mut v: Vec<f64>, q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    crate::selection::bayes::warp::quantile(&v, q / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curve(points: &[(u64, f64)]) -> BTreeMap<u64, f64> {
        points.iter().copied().collect()
    }

    #[test]
    fn the_median_pruner_waits_for_its_startup_trials_and_its_warm_up_then_compares_with_the_median() {
        let done: Vec<BTreeMap<u64, f64>> =
            (0..5).map(|i| curve(&[(0, 10.0 + i as f64), (1, 5.0 + i as f64), (2, 1.0 + i as f64)])).collect();
        let others: Vec<Other<'_>> = done.iter().map(|r| Other { reports: r, complete: true }).collect();
        let median = Pruner::MEDIAN;
        // Step 1 medians: 5, 6, 7, 8, 9 -> 7.
        assert!(should_prune(&median, &curve(&[(0, 9.0), (1, 7.5)]), &others, false));
        assert!(!should_prune(&median, &curve(&[(0, 9.0), (1, 6.5)]), &others, false));
        // The best value so far counts, not the last one.
        assert!(!should_prune(&median, &curve(&[(0, 6.0), (1, 7.5)]), &others, false));
        // Maximising flips the comparison.
        assert!(should_prune(&median, &curve(&[(0, 6.0), (1, 6.5)]), &others, true));
        assert!(!should_prune(&median, &curve(&[(0, 9.0), (1, 6.5)]), &others, true));
        // Four complete trials are fewer than the five startup trials.
        assert!(!should_prune(&median, &curve(&[(0, 99.0), (1, 99.0)]), &others[..4], false));
        // Warm-up and interval.
        let warm = Pruner::Median { startup_trials: 5, warmup_steps: 2, interval_steps: 1, min_trials: 1 };
        assert!(!should_prune(&warm, &curve(&[(1, 99.0)]), &others, false));
        assert!(should_prune(&warm, &curve(&[(1, 99.0), (2, 99.0)]), &others, false));
        let every_other = Pruner::Median { startup_trials: 0, warmup_steps: 0, interval_steps: 2, min_trials: 1 };
        assert!(!should_prune(&every_other, &curve(&[(0, 1.0), (1, 99.0)]), &others, false));
        assert!(should_prune(&every_other, &curve(&[(0, 99.0), (1, 99.0), (2, 99.0)]), &others, false));
        // No complete trial reported at this step: nothing to compare with.
        assert!(!should_prune(&median, &curve(&[(0, 99.0), (7, 99.0)]), &others, false));
        assert_eq!(percentile(vec![4.0, 1.0, 3.0, 2.0], 50.0), 2.5);
    }

    #[test]
    fn successive_halving_keeps_the_best_quarter_at_each_rung() {
        let pruner = Pruner::Halving { min_resource: Some(1), reduction_factor: 4, min_early_stopping_rate: 0 };
        // Rungs at steps 1, 4, 16. Seven others reached rung 0 with values 1..7.
        let runs: Vec<BTreeMap<u64, f64>> = (1..=7).map(|v| curve(&[(1, v as f64)])).collect();
        let others: Vec<Other<'_>> = runs.iter().map(|r| Other { reports: r, complete: false }).collect();
        // 8 competing values: 8 / 4 - 1 = index 1, the second best (2.0).
        assert!(!should_prune(&pruner, &curve(&[(1, 1.5)]), &others, false));
        assert!(should_prune(&pruner, &curve(&[(1, 2.5)]), &others, false));
        // Before the first rung nothing is decided; between rungs neither.
        assert!(!should_prune(&pruner, &curve(&[(0, 100.0)]), &others, false));
        assert!(!should_prune(&pruner, &curve(&[(1, 1.5), (2, 100.0)]), &others, false));
        // Alone at a rung (competing values fewer than the factor): kept if the best.
        assert!(!should_prune(&pruner, &curve(&[(1, 1.5), (4, 100.0)]), &others, false));
        // "auto" waits for a complete trial, then takes its last step / 100.
        let auto = Pruner::HALVING;
        assert!(!should_prune(&auto, &curve(&[(1, 100.0)]), &others, false));
        let long = curve(&[(1, 1.0), (300, 0.5)]);
        let mut with_done = others.clone();
        with_done.push(Other { reports: &long, complete: true });
        // min_resource 3: rung 0 at step 3, where the complete trial's first report at or
        // past it is 0.5 (its step 300), and no other reached step 3.
        assert!(should_prune(&auto, &curve(&[(3, 100.0)]), &with_done, false));
        assert!(!should_prune(&auto, &curve(&[(3, 0.1)]), &with_done, false));
    }
}

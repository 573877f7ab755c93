//! Property tests of the SVM on random small problems: the dual solution is feasible and
//! optimal (KKT), shrinking does not change the optimum, predictions follow the decision
//! function's sign, and a stored model predicts exactly as the fitted one.

use mercer::estimator::{
    ClassLabels, ClassificationSet, Decision, Estimator, FitContext, FittedModel, PredictOptions, Predictor, Svm, Svr,
    Target, TrainingSet,
};
use mercer::kernel::column::ColumnKernel;
use mercer::kernel::{Kernel, Points};
use mercer::linalg::Parallelism;
use mercer::smo::{solve, Problem, SmoOptions};
use proptest::prelude::*;
use serde_json::{json, Value};

fn config() -> ProptestConfig {
    let mut c = ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() };
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        c.rng_seed = proptest::test_runner::RngSeed::Fixed(20_261_121);
    }
    c
}

fn psd_kernel() -> impl Strategy<Value = Value> {
    prop_oneof![
        (0.1f64..5.0).prop_map(|g| json!({"type": "rbf", "gamma": g})),
        (1u32..4, 0.1f64..1.0, 0.0f64..2.0)
            .prop_map(|(p, g, c)| json!({"type": "polynomial", "degree": p, "gamma": g, "coef0": c})),
        (0.0f64..1.0).prop_map(|c| json!({"type": "linear", "c": c})),
        (0.3f64..3.0).prop_map(|l| json!({"type": "laplacian", "length_scale": l})),
    ]
}

/// n points in d dimensions with +-1 labels, both present.
fn problem() -> impl Strategy<Value = (Points, Vec<f64>)> {
    (4usize..40, 1usize..4).prop_flat_map(|(n, d)| {
        (prop::collection::vec(-2.0f64..2.0, n * d), prop::collection::vec(any::<bool>(), n)).prop_map(
            move |(v, mut labels)| {
                labels[0] = true;
                labels[1] = false;
                let y = labels.iter().map(|&b| if b { 1.0 } else { -1.0 }).collect();
                (Points::from_columns(nalgebra::DMatrix::from_vec(d, n, v)), y)
            },
        )
    })
}

fn options(shrinking: bool) -> SmoOptions {
    SmoOptions { tol: 1e-5, max_iter: None, cache_bytes: 1 << 20, shrinking, par: Parallelism::Sequential }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn dual_solution_is_feasible_and_optimal((x, y) in problem(), spec in psd_kernel(), c in 0.1f64..10.0) {
        let kernel = Kernel::from_json(&spec).unwrap();
        let problem = Problem::c_svc(y.clone(), vec![c; y.len()]);
        let sol = solve(ColumnKernel::new(&kernel, &x), &problem, &options(true), &|| false).unwrap();
        prop_assert!(sol.converged);
        let coef = sol.coef(&y);
        let n = y.len();
        let k = kernel.gram(&x, Parallelism::Sequential);
        let scale = k.amax().max(1.0);
        prop_assert!(coef.iter().sum::<f64>().abs() <= 1e-9 * c * n as f64, "y'a = 0");
        for i in 0..n {
            let a = sol.alpha[i];
            prop_assert!((-1e-12..=c * (1.0 + 1e-12)).contains(&a), "0 <= a_{} = {} <= {}", i, a, c);
            let f: f64 = (0..n).map(|j| coef[j] * k[(j, i)]).sum::<f64>() - sol.rho;
            let margin = y[i] * f;
            // tol on the scaled gap, plus f32 storage of the kernel columns.
            let slack = 1e-4 + 1e-6 * scale * c * n as f64;
            if a <= 0.0 {
                prop_assert!(margin >= 1.0 - slack, "a_{} = 0 with margin {}", i, margin);
            } else if a >= c {
                prop_assert!(margin <= 1.0 + slack, "a_{} = C with margin {}", i, margin);
            } else {
                prop_assert!((margin - 1.0).abs() <= slack, "free a_{} with margin {}", i, margin);
            }
        }
        let plain = solve(ColumnKernel::new(&kernel, &x), &problem, &options(false), &|| false).unwrap();
        prop_assert!(
            (plain.objective - sol.objective).abs() <= 1e-6 * sol.objective.abs().max(1.0),
            "shrinking {} vs none {}", sol.objective, plain.objective
        );
    }

    #[test]
    fn predictions_follow_the_decision_function_and_survive_storage(
        (x, y) in problem(), spec in psd_kernel(), c in 0.1f64..10.0, three in any::<bool>(), probability in any::<bool>()
    ) {
        let n = y.len();
        let labels: Vec<Target> = (0..n)
            .map(|i| Target::Text(if three && i % 3 == 2 { "c".into() } else if y[i] > 0.0 { "b".into() } else { "a".into() }))
            .collect();
        let (classes, index) = ClassLabels::encode(&labels).unwrap();
        let k = classes.len();
        let data = ClassificationSet { x: x.clone(), y: index, classes };
        let params = json!({"c": c, "probability": probability, "seed": 1});
        let svm = Svm::from_json(Kernel::from_json(&spec).unwrap(), &params, "/params").unwrap();
        let model = svm.fit(&data, &FitContext::sequential()).unwrap();
        prop_assert!(model.n_support() <= n && model.n_support() >= 2);
        let opts = PredictOptions::default();
        let p = model.predict(&x, &opts, Parallelism::Sequential);
        let predicted = p.classes.clone().unwrap();
        match p.decision.as_ref().unwrap() {
            Decision::Binary(d) => {
                prop_assert_eq!(k, 2);
                for (c, v) in predicted.iter().zip(d) {
                    prop_assert_eq!(*c == 1, *v >= 0.0, "class {} with decision {}", c, v);
                }
            }
            Decision::PerClass(m) => {
                prop_assert_eq!((m.nrows(), m.ncols()), (n, k));
                for (r, c) in predicted.iter().enumerate() {
                    // Votes dominate the squashed confidences, so the predicted class has
                    // the most votes and its score is within a third of the largest.
                    prop_assert!(m.row(r).max() - m[(r, *c)] < 2.0 / 3.0);
                }
            }
        }
        match &p.probabilities {
            Some(probs) => {
                prop_assert!(probability);
                for r in 0..n {
                    prop_assert!((probs.row(r).sum() - 1.0).abs() < 1e-9);
                }
            }
            None => prop_assert!(!probability),
        }
        let fitted = FittedModel::new(model);
        let restored = FittedModel::from_stored(fitted.to_stored()).unwrap();
        prop_assert_eq!(restored.predictor().predict(&x, &opts, Parallelism::Sequential), p);
    }

    /// An SVR predicts the same after storage, including one whose epsilon tube holds
    /// every target (no support vector: it predicts its intercept everywhere).
    #[test]
    fn an_svr_survives_storage_with_or_without_support_vectors(
        (x, y) in problem(), spec in psd_kernel(), c in 0.1f64..10.0, epsilon in 0.0f64..3.0
    ) {
        let data = TrainingSet::new(x.clone(), y);
        let svr = Svr::from_json(Kernel::from_json(&spec).unwrap(), &json!({"c": c, "epsilon": epsilon}), "/params").unwrap();
        let model = svr.fit(&data, &FitContext::sequential()).unwrap();
        if epsilon > 1.0 {
            prop_assert_eq!(model.n_support(), 0, "targets are +-1: the tube holds them all");
        }
        let opts = PredictOptions::default();
        let p = model.predict(&x, &opts, Parallelism::Sequential);
        let fitted = FittedModel::new(model);
        let restored = FittedModel::from_stored(fitted.to_stored()).unwrap();
        prop_assert_eq!(restored.predictor().predict(&x, &opts, Parallelism::Sequential), p);
    }
}

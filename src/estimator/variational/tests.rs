//! The variational GP's own checks: the gradient of the ELBO against finite differences
//! for every likelihood, and the Gaussian likelihood's optimum against Titsias' bound.

use super::likelihood::{Likelihood, LikelihoodKind};
use super::pass::{kmm_adjoint, pass, Current, Targets, Want};
use super::posterior::Posterior;
use crate::estimator::approximation::nystrom::factor_kmm;
use crate::kernel::hyper::Hyper;
use crate::kernel::{Kernel, Points};
use crate::linalg::{Cholesky, Parallelism};
use nalgebra::{DMatrix, DVector};
use serde_json::json;

const SEQ: Parallelism = Parallelism::Sequential;

fn rows(n: usize, seed: u64) -> Points {
    Points::from_columns(crate::test_support::seeded_matrix(2, n, seed) * 2.0)
}

/// A q(v) away from the prior: a random mean and a random lower factor of S.
fn some_q(m: usize, latents: usize, seed: u64) -> Posterior {
    let means: Vec<DVector<f64>> = (0..latents)
        .map(|c| DVector::from_column_slice(crate::test_support::seeded_matrix(m, 1, seed + c as u64).as_slice()))
        .collect();
    let factors: Vec<DMatrix<f64>> = (0..latents)
        .map(|c| {
            let r = crate::test_support::seeded_matrix(m, m, seed + 10 + c as u64);
            DMatrix::from_fn(m, m, |i, j| match i.cmp(&j) {
                std::cmp::Ordering::Greater => 0.2 * r[(i, j)],
                std::cmp::Ordering::Equal => 0.5 + 0.3 * r[(i, j)].abs(),
                std::cmp::Ordering::Less => 0.0,
            })
        })
        .collect();
    Posterior::from_mean_and_factor(&means, &factors).unwrap()
}

fn targets(kind: LikelihoodKind, x: &Points) -> Targets {
    let n = x.n();
    match kind {
        LikelihoodKind::Gaussian | LikelihoodKind::StudentT => {
            Targets::Real((0..n).map(|i| (2.0 * x.point(i)[0]).sin() + 0.3 * x.point(i)[1]).collect())
        }
        LikelihoodKind::Poisson => Targets::Real((0..n).map(|i| ((x.point(i)[0] + 2.0) as usize % 5) as f64).collect()),
        LikelihoodKind::Bernoulli => Targets::Classes((0..n).map(|i| usize::from(x.point(i)[0] > 0.0)).collect()),
        LikelihoodKind::Softmax => Targets::Classes((0..n).map(|i| ((x.point(i)[0] + 2.0) as usize).min(2)).collect()),
    }
}

/// The data term of the ELBO (scaled by `scale`) at a kernel, inducing locations and
/// likelihood.
fn data_term(
    kernel: &Kernel,
    z: &Points,
    lik: &Likelihood,
    q: &Posterior,
    x: &Points,
    y: &Targets,
    draws: Option<&[f64]>,
) -> f64 {
    let l = factor_kmm(kernel, z, SEQ).unwrap();
    let cur = Current { kernel, z, l: &l, q, lik, single: false };
    pass(&cur, x, y, draws, Want::default(), SEQ).expected
}

/// d/dtheta (kernel), d/dZ and d/dtheta (likelihood) of scale * sum E against central
/// differences, for every likelihood, with a kernel of several hyperparameters.
#[test]
fn elbo_gradient_matches_finite_differences() {
    let kernel = Kernel::from_json(&json!({"type": "sum", "kernels": [
        {"type": "scale", "factor": 1.3, "kernel": {"type": "rbf", "length_scale": [0.8, 1.4]}},
        {"type": "matern", "nu": 2.5, "length_scale": 2.0}]}))
    .unwrap();
    let (x, z) = (rows(30, 1), rows(6, 2));
    for kind in LikelihoodKind::ALL {
        let latents = if kind == LikelihoodKind::Softmax { 3 } else { 1 };
        let lik = Likelihood::new(kind, Hyper::new(0.4), Hyper::new(3.5), latents);
        let q = some_q(z.n(), latents, 7);
        let y = targets(kind, &x);
        let mut rng = crate::optimize::SplitMix64::new(9);
        let draws: Vec<f64> = (0..x.n() * 8 * latents).map(|_| rng.normal()).collect();
        let draws = (kind == LikelihoodKind::Softmax).then_some(&draws[..]);
        let scale = 2.5;
        let (kmm, dkmm) = kernel.gram_with_gradient(&z, SEQ);
        let l = Cholesky::factor_with_jitter(|| kmm.clone(), SEQ).unwrap();
        let cur = Current { kernel: &kernel, z: &z, l: &l, q: &q, lik: &lik, single: false };
        let want = Want { natural: false, kernel: true, inducing: true, likelihood: true };
        let out = pass(&cur, &x, &y, draws, want, SEQ);
        let kbar = kmm_adjoint(&l, out.abar_at.as_ref().unwrap(), scale, false, SEQ);
        let dtheta: Vec<f64> = out.dkernel.iter().zip(&dkmm).map(|(g, dk)| scale * g + kbar.dot(dk)).collect();
        let through = kernel.cross_input_gradient(&z, &z, &kbar).unwrap();
        let dz = out.dz.as_ref().unwrap() * scale + through * 2.0;
        let value = |k: &Kernel, zz: &Points, li: &Likelihood| scale * data_term(k, zz, li, &q, &x, &y, draws);
        let h = 1e-6;
        let theta = kernel.theta();
        for j in 0..theta.len() {
            let at = |d: f64| {
                let mut t = theta.clone();
                t[j] += d;
                value(&kernel.with_theta(&t), &z, &lik)
            };
            let fd = (at(h) - at(-h)) / (2.0 * h);
            assert!(
                (dtheta[j] - fd).abs() < 1e-5 * fd.abs().max(1.0),
                "{kind:?} kernel theta {j}: {} vs {fd}",
                dtheta[j]
            );
        }
        let zm = z.as_matrix().clone();
        for p in 0..z.n() {
            for c in 0..2 {
                let at = |d: f64| {
                    let mut moved = zm.clone();
                    moved[(c, p)] += d;
                    value(&kernel, &Points::from_columns(moved), &lik)
                };
                let fd = (at(h) - at(-h)) / (2.0 * h);
                assert!(
                    (dz[(c, p)] - fd).abs() < 1e-5 * fd.abs().max(1.0),
                    "{kind:?} z[{c}, {p}]: {} vs {fd}",
                    dz[(c, p)]
                );
            }
        }
        let lt = lik.theta();
        for j in 0..lt.len() {
            let at = |d: f64| {
                let mut t = lt.clone();
                t[j] += d;
                let mut l2 = lik.clone();
                l2.set_theta(&t);
                value(&kernel, &z, &l2)
            };
            let fd = (at(h) - at(-h)) / (2.0 * h);
            let got = scale * out.dlik[j];
            assert!((got - fd).abs() < 1e-5 * fd.abs().max(1.0), "{kind:?} likelihood theta {j}: {got} vs {fd}");
        }
    }
}

fn regression_data(n: usize) -> crate::estimator::TrainingSet {
    let x = rows(n, 21);
    let y = (0..n)
        .map(|i| (2.0 * x.point(i)[0]).sin() + 0.3 * x.point(i)[1] + 0.1 * ((i * 7919) % 13) as f64 / 13.0)
        .collect();
    crate::estimator::TrainingSet::new(x, y)
}

fn fit(params: serde_json::Value, data: &crate::estimator::TrainingSet) -> crate::estimator::FittedModel {
    use crate::estimator::{Limits, ModelKind, ModelSpec, TrainingData};
    let kernel = Kernel::from_json(&json!({"type": "rbf", "length_scale": [0.7, 1.1]})).unwrap();
    let mut spec = ModelSpec::from_json(ModelKind::GaussianProcess, kernel, Some(&params)).unwrap();
    let data = TrainingData::Regression(data.clone());
    spec.admit(&data, Limits { exact_max_rows: 20_000, max_fit_bytes: u64::MAX }).unwrap();
    spec.fit(&data, &crate::estimator::FitContext::sequential()).unwrap()
}

/// With the Gaussian likelihood, fixed hyperparameters and inducing locations, the
/// optimal q(u) is Titsias': the fitted ELBO is the nystrom fit's collapsed bound on the
/// same inducing rows, and the predictions (mean, variance, covariance) are the same.
/// The ELBO computed the long way (expected log likelihood over every row less the KL,
/// at the fitted q) agrees too, so the q(u) found is the optimum, not only its bound.
#[test]
fn the_gaussian_optimum_is_titsias() {
    use crate::estimator::PredictOptions;
    let data = regression_data(300);
    let shared = json!({"noise": 0.05, "inducing_points": 40, "inducing_selection": "uniform", "seed": 3});
    let mut nystrom = shared.clone();
    nystrom["approximation"] = json!("nystrom");
    let mut variational = shared.clone();
    variational["approximation"] = json!("variational");
    variational["optimize"] = json!(false);
    variational["learn_inducing"] = json!(false);
    let (a, b) = (fit(nystrom, &data), fit(variational, &data));
    let bound = a.report().evidence_lower_bound.unwrap();
    let elbo = b.report().elbo.unwrap();
    assert!((bound - elbo).abs() < 1e-6 * bound.abs(), "{bound} vs {elbo}");
    assert_eq!(a.report().inducing_indices, b.report().inducing_indices, "the same inducing rows");
    assert_eq!(b.report().epochs, Some(0), "nothing to learn: one pass");
    let q = rows(9, 99);
    let opts = PredictOptions { covariance: true, ..Default::default() };
    let (pa, pb) = (a.predict(&q, &opts, SEQ), b.predict(&q, &opts, SEQ));
    for i in 0..q.n() {
        assert!((pa.values[i] - pb.values[i]).abs() < 1e-6 * pa.values[i].abs().max(1.0), "mean {i}");
        let (va, vb) = (pa.variance.as_ref().unwrap()[i], pb.variance.as_ref().unwrap()[i]);
        assert!((va - vb).abs() < 1e-6 * va.max(1e-3), "variance {i}: {va} vs {vb}");
        for j in 0..q.n() {
            let (ca, cb) = (pa.covariance.as_ref().unwrap()[(i, j)], pb.covariance.as_ref().unwrap()[(i, j)]);
            assert!((ca - cb).abs() < 1e-6, "covariance {i},{j}: {ca} vs {cb}");
        }
    }
    // The long way round, at the trained q.
    let kernel = Kernel::from_json(&json!({"type": "rbf", "length_scale": [0.7, 1.1]})).unwrap();
    let lik = Likelihood::new(LikelihoodKind::Gaussian, Hyper::new(0.05), Hyper::new(4.0), 1);
    use crate::estimator::approximation::{Approximation, Mode, Selection};
    let approx = Approximation {
        mode: Mode::Variational,
        inducing_points: Some(40),
        selection: Some(Selection::Uniform),
        ..Approximation::default()
    };
    let setup = super::train::Setup {
        kernel: kernel.clone(),
        likelihood: lik.clone(),
        approx,
        seed: 3,
        batch_size: 64,
        epochs: None,
        learning_rate: 0.01,
        optimize: false,
        learn_inducing: false,
        single: false,
    };
    let y = Targets::Real(data.y.clone());
    let ctx = crate::estimator::FitContext::sequential();
    let t = super::train::train(&setup, &data.x, &y, &ctx).unwrap();
    let long = super::train::elbo(&kernel, &t.z, &t.l, &t.q, &lik, &data.x, &y, 3, &ctx).unwrap();
    assert!((long - bound).abs() < 1e-6 * bound.abs(), "{long} vs {bound}");
    // Any other q is worse: the optimum's natural step from the prior lands on it.
    let mut other = t.q.clone();
    other.mean[0][0] += 0.1;
    let precision = other.precision[0].clone();
    let theta1 = &precision * &other.mean[0];
    assert!(other.set(0, precision, theta1, SEQ));
    let worse = super::train::elbo(&kernel, &t.z, &t.l, &other, &lik, &data.x, &y, 3, &ctx).unwrap();
    assert!(worse < long, "{worse} vs {long}");
}

/// `precision: "float32"` runs the minibatch steps in single precision: the fit lands
/// where the double one does, to single precision's share of the noise of the steps.
#[test]
fn single_precision_steps_fit_as_double_ones_do() {
    use crate::estimator::PredictOptions;
    let data = regression_data(400);
    let base = json!({"approximation": "variational", "inducing_points": 20, "inducing_selection": "uniform",
                      "batch_size": 100, "epochs": 30, "seed": 2});
    let mut single = base.clone();
    single["precision"] = json!("float32");
    let (a, b) = (fit(base, &data), fit(single, &data));
    assert_eq!(b.params_json()["precision"], "float32");
    let q = rows(20, 77);
    let (pa, pb) = (a.predict(&q, &PredictOptions::default(), SEQ), b.predict(&q, &PredictOptions::default(), SEQ));
    let spread = pa.values.iter().map(|v| v.abs()).fold(0.0, f64::max);
    for i in 0..q.n() {
        assert!((pa.values[i] - pb.values[i]).abs() < 0.02 * spread, "row {i}: {} vs {}", pa.values[i], pb.values[i]);
    }
    let (ea, eb) = (a.report().elbo.unwrap(), b.report().elbo.unwrap());
    assert!((ea - eb).abs() < 0.01 * ea.abs(), "ELBO {ea} vs {eb}");
    // Its K_MM took the single-precision jitter floor, reported.
    assert!(b.report().jitter.unwrap() >= super::train::SINGLE_JITTER * 0.999, "{:?}", b.report().jitter);
}

/// The second half's natural steps average the minibatches' estimates with equal weights
/// (the first half's q counting as 1 / rho - 1 of them); the first half steps by rho.
#[test]
fn the_second_half_averages_the_estimates() {
    use super::train::{natural_step_at, NATURAL_STEP};
    let total = 40u64;
    let estimates: Vec<f64> = (0..total).map(|t| ((t * 7919) % 13) as f64 - 6.0).collect();
    let mut theta = 3.0;
    for (t, x) in estimates.iter().enumerate() {
        let rho = natural_step_at(NATURAL_STEP, t as u64, total);
        if (t as u64) < total / 2 {
            assert_eq!(rho, NATURAL_STEP);
        }
        theta = (1.0 - rho) * theta + rho * x;
        if t as u64 == total / 2 - 1 {
            // Where the average starts: q so far weighs as 1 / rho - 1 estimates.
            let prior = theta;
            let later = &estimates[(total / 2) as usize..];
            let w = 1.0 / NATURAL_STEP - 1.0;
            let want = (w * prior + later.iter().sum::<f64>()) / (w + later.len() as f64);
            let mut th = prior;
            for (k, x) in later.iter().enumerate() {
                let r = natural_step_at(NATURAL_STEP, total / 2 + k as u64, total);
                th = (1.0 - r) * th + r * x;
            }
            assert!((th - want).abs() < 1e-12, "{th} {want}");
        }
    }
    assert_eq!(natural_step_at(1.0, total - 1, total), 1.0, "the exact step is never damped");
}

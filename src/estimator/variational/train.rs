//! The fit: minibatches drawn without replacement each epoch (a seeded shuffle), and per
//! minibatch one natural-gradient step on q(u) and one Adam step on the kernel's log
//! hyperparameters, the inducing locations and the likelihood's parameters, both from
//! one pass at the same point (GPyTorch's NGD + Adam recipe). Then q(u) is finished and
//! the ELBO computed over every row: for the Gaussian likelihood q(u) is set to its
//! optimum (one natural step of size 1 over all rows: Titsias' q(u)) and the ELBO is the
//! collapsed bound; otherwise the ELBO is summed over every row at the final q(u).

use super::likelihood::{Likelihood, LikelihoodKind};
use super::pass::{kmm_adjoint, pass, Current, Targets, Want};
use super::posterior::Posterior;
use crate::estimator::approximation::nystrom::{factor_kmm, inducing_points, weighted_moments};
use crate::estimator::approximation::Approximation;
use crate::estimator::{FitContext, FitError};
use crate::kernel::{Kernel, Points, RowKind};
use crate::linalg::{Cholesky, Parallelism};
use crate::optimize::{Adam, SplitMix64};
use crate::spec::FieldError;
use nalgebra::{DMatrix, DVector};

/// Monte Carlo draws per row for the softmax likelihood's expectation.
pub const MC_SAMPLES: usize = 16;
/// The natural-gradient step for likelihoods other than the Gaussian.
pub const NATURAL_STEP: f64 = 0.1;
/// The Gaussian likelihood's natural-gradient step when the batch is every row: exact.
pub const GAUSSIAN_STEP: f64 = 1.0;
/// Default epochs: about this many minibatch steps, and at least one epoch.
pub const TARGET_STEPS: u64 = 1000;
pub const MAX_EPOCHS: u64 = 1000;
/// Rows per block of the final pass over every row.
const FINAL_BLOCK: usize = 1024;

/// Streams of the fit's seed: the shuffles and draws, and the final ELBO's draws.
const SHUFFLE_STREAM: u64 = 0x5EED_0F5A_1D00;
const ELBO_STREAM: u64 = 0xE1B0_0FA1_1000;

/// The natural step at minibatch `t` of `total`: `rho` for the first half; then steps of
/// 1 / (1 / rho + k) at the k-th step of the second half, which average the minibatches'
/// estimates of q(u) with equal weights instead of forgetting them at the rate rho.
/// A fixed damped step keeps q(u) as noisy as the last 2 / rho minibatches make it (about
/// 20,000 rows at the defaults, whatever n); at a million rows (scripts/bench_svgp.py
/// --million, bernoulli) held-out accuracy went from 80.66% with the fixed step to
/// 81.45% with the average (the best Nystrom kernel_logistic: 81.75%).
pub(super) fn natural_step_at(rho: f64, t: u64, total: u64) -> f64 {
    let half = total / 2;
    if rho >= 1.0 || t < half {
        return rho;
    }
    1.0 / (1.0 / rho + (t - half) as f64)
}

/// Epochs when the request gives none: about [`TARGET_STEPS`] minibatch steps, at least
/// one pass over the rows.
pub fn default_epochs(n: usize, batch: usize) -> u64 {
    let per_epoch = n.div_ceil(batch.max(1)).max(1) as u64;
    (TARGET_STEPS / per_epoch).clamp(1, MAX_EPOCHS)
}

/// What one fit is asked.
#[derive(Debug, Clone)]
pub struct Setup {
    pub kernel: Kernel,
    pub likelihood: Likelihood,
    pub approx: Approximation,
    pub seed: u64,
    pub batch_size: usize,
    pub epochs: Option<u64>,
    pub learning_rate: f64,
    /// Learn the kernel's free hyperparameters and the likelihood's parameters.
    pub optimize: bool,
    pub learn_inducing: bool,
    /// The minibatch steps' blocks in single precision (`precision: "float32"`).
    pub single: bool,
}

/// A finished fit.
#[derive(Debug, Clone)]
pub struct Trained {
    pub kernel: Kernel,
    pub likelihood: Likelihood,
    pub z: Points,
    pub inducing_indices: Option<Vec<u64>>,
    pub l: Cholesky,
    pub q: Posterior,
    pub elbo: f64,
    pub epochs: u64,
    pub iterations: u64,
}

/// K_MM's jitter floor in single precision, times its mean diagonal (GPyTorch's float32
/// default for variational models is 1e-4 absolute): the minibatches' triangular solves
/// against L in single precision lose about its condition number times 6e-8, and this
/// bounds that condition number near 100 for kernels of unit scale.
pub const SINGLE_JITTER: f64 = 1e-4;

/// K_MM = L L' by the jitter rule; in single precision with a jitter of at least
/// [`SINGLE_JITTER`] times its mean diagonal (the whole fit, so that the stored L is the
/// one the minibatches whitened with).
fn factor(kernel: &Kernel, z: &Points, single: bool, par: Parallelism) -> Result<Cholesky, FitError> {
    if !single {
        return factor_kmm(kernel, z, par);
    }
    let g = kernel.gram(z, par);
    let m = g.nrows();
    let floor = SINGLE_JITTER * g.diagonal().sum() / m.max(1) as f64;
    let l = Cholesky::factor_with_jitter(
        || {
            let mut k = g.clone();
            for i in 0..m {
                k[(i, i)] += floor;
            }
            k
        },
        par,
    )?;
    let jitter = floor + l.jitter();
    Ok(Cholesky::from_factor(l.into_l(), jitter))
}

/// Standard normals for the softmax's expectation over `rows` rows.
fn draws(rng: &mut SplitMix64, rows: usize, latents: usize) -> Vec<f64> {
    (0..rows * MC_SAMPLES * latents).map(|_| rng.normal()).collect()
}

/// Each feature's spread (ddof-0 standard deviation; 1 where it is 0): the inducing
/// locations move in these units, so that one learning rate suits features of any scale.
fn spreads(x: &Points) -> Vec<f64> {
    let Some(m) = x.numeric() else { return Vec::new() };
    let n = m.ncols().max(1) as f64;
    m.row_iter()
        .map(|r| {
            let mean = r.sum() / n;
            let sd = (r.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n).sqrt();
            if sd > 0.0 && sd.is_finite() {
                sd
            } else {
                1.0
            }
        })
        .collect()
}

pub fn train(setup: &Setup, x: &Points, y: &Targets, ctx: &FitContext) -> Result<Trained, FitError> {
    let n = x.n();
    let par = ctx.par;
    ctx.progress.phase("inducing_points");
    let (mut z, indices) = inducing_points(&setup.approx, setup.seed, x, ctx)?;
    let mut kernel = setup.kernel.clone();
    let mut lik = setup.likelihood.clone();
    let (m, latents) = (z.n(), lik.latents);
    let mut q = Posterior::prior(m, latents);
    let batch = setup.batch_size.clamp(1, n.max(1));
    let epochs = setup.epochs.unwrap_or_else(|| default_epochs(n, batch));
    let learn_kernel = setup.optimize && !kernel.theta().is_empty();
    let learn_lik = setup.optimize && !lik.theta().is_empty();
    let learn_z = setup.learn_inducing && x.kind() == RowKind::Numeric;
    let gaussian = lik.kind == LikelihoodKind::Gaussian;
    let softmax = lik.kind == LikelihoodKind::Softmax;
    let mut iterations = 0;
    let mut epochs_run = 0;
    if learn_kernel || learn_lik || learn_z || !gaussian {
        ctx.progress.minibatches("epochs", epochs * n.div_ceil(batch) as u64);
        let spread = spreads(x);
        let d = z.d();
        let count = |k: &Kernel, l: &Likelihood| {
            (if learn_kernel { k.theta().len() } else { 0 })
                + (if learn_z { m * d } else { 0 })
                + (if learn_lik { l.theta().len() } else { 0 })
        };
        let mut bounds = Vec::new();
        if learn_kernel {
            bounds.extend(kernel.theta_bounds());
        }
        if learn_z {
            bounds.extend(std::iter::repeat_n((f64::NEG_INFINITY, f64::INFINITY), m * d));
        }
        if learn_lik {
            bounds.extend(lik.theta_bounds());
        }
        let mut adam = Adam::new(count(&kernel, &lik), setup.learning_rate);
        let mut rng = SplitMix64::new(setup.seed ^ SHUFFLE_STREAM);
        let mut order: Vec<usize> = (0..n).collect();
        // The Gaussian likelihood's step of 1 is exact where the batch is every row. On a
        // minibatch it sets q to that batch's posterior (scaled by n / batch), which the
        // hyperparameters then chase: at n = 100,000 (scripts/bench_svgp.py) it ended at
        // held-out log density -1.23 per row against -0.95 with a step of 0.1, longer
        // length scales and twice the noise. Minibatches take the damped step; the final
        // pass sets q to its exact optimum either way.
        let rho = if gaussian && batch >= n { GAUSSIAN_STEP } else { NATURAL_STEP };
        let total = epochs * n.div_ceil(batch) as u64;
        for epoch in 0..epochs {
            ctx.progress.epoch(epoch + 1, None);
            // Fisher-Yates from the seed's stream.
            for i in (1..n).rev() {
                let j = (rng.next_u64() % (i as u64 + 1)) as usize;
                order.swap(i, j);
            }
            let mut expected = 0.0;
            for chunk in order.chunks(batch) {
                ctx.cancel.check()?;
                let (xb, yb) = (x.select(chunk), y.select(chunk));
                let noise = softmax.then(|| draws(&mut rng, chunk.len(), latents));
                let scale = n as f64 / chunk.len() as f64;
                let l = factor(&kernel, &z, setup.single, par)?;
                let want = Want { natural: true, kernel: learn_kernel, inducing: learn_z, likelihood: learn_lik };
                let out = {
                    let cur = Current { kernel: &kernel, z: &z, l: &l, q: &q, lik: &lik, single: setup.single };
                    pass(&cur, &xb, &yb, noise.as_deref(), want, par)
                };
                expected += scale * out.expected * chunk.len() as f64 / n as f64;
                // The step on q and the gradient of everything else are independent: with
                // two threads, side by side.
                let gradient = || -> Vec<f64> {
                    let mut grad = Vec::with_capacity(bounds.len());
                    if learn_kernel || learn_z {
                        let abar_at = out.abar_at.as_ref().expect("asked for");
                        let kbar = kmm_adjoint(&l, abar_at, scale, setup.single, par);
                        let kmm = kernel.cross_adjoint(&z, &z, &kbar, true, learn_z).expect("checked at admission");
                        if learn_kernel {
                            grad.extend(out.dkernel.iter().zip(&kmm.theta).map(|(g, through)| scale * g + through));
                        }
                        if learn_z {
                            let through_kmm = kmm.z.as_ref().expect("asked for");
                            let through_kmb = out.dz.as_ref().expect("checked at admission");
                            for j in 0..m {
                                for k in 0..d {
                                    grad.push((scale * through_kmb[(k, j)] + 2.0 * through_kmm[(k, j)]) * spread[k]);
                                }
                            }
                        }
                    }
                    if learn_lik {
                        grad.extend(out.dlik.iter().map(|g| scale * g));
                    }
                    grad
                };
                // Side by side, the step on q keeps to its own thread (its M x M Cholesky
                // gains little from a second) and leaves the other to the gradient's solves.
                let step = natural_step_at(rho, iterations, total);
                let natural = |q: &mut Posterior, par: Parallelism| {
                    q.natural_step(&out.natural, scale, step, par);
                };
                let grad = if par.is_parallel() {
                    rayon::join(|| natural(&mut q, Parallelism::Sequential), gradient).1
                } else {
                    natural(&mut q, par);
                    gradient()
                };
                if !grad.is_empty() {
                    let mut at = Vec::with_capacity(grad.len());
                    if learn_kernel {
                        at.extend(kernel.theta());
                    }
                    if learn_z {
                        let zm = z.as_matrix();
                        for j in 0..m {
                            for k in 0..d {
                                at.push(zm[(k, j)] / spread[k]);
                            }
                        }
                    }
                    if learn_lik {
                        at.extend(lik.theta());
                    }
                    adam.ascend(&mut at, &grad, Some(&bounds));
                    let mut rest = &at[..];
                    if learn_kernel {
                        let p = kernel.theta().len();
                        kernel = kernel.with_theta(&rest[..p]);
                        rest = &rest[p..];
                    }
                    if learn_z {
                        z = Points::from_columns(DMatrix::from_fn(d, m, |k, j| rest[j * d + k] * spread[k]));
                        rest = &rest[m * d..];
                    }
                    if learn_lik {
                        lik.set_theta(rest);
                    }
                }
                iterations += 1;
                ctx.progress.step(None);
            }
            epochs_run += 1;
            // The epoch's estimate: its minibatches' expected log likelihoods (each
            // scaled to n rows) averaged, less the KL at its end.
            ctx.progress.epoch(epoch + 1, Some(expected - q.kl(par)));
        }
    }
    ctx.cancel.check()?;
    ctx.progress.phase("elbo");
    let l = factor(&kernel, &z, setup.single, par)?;
    let elbo = if gaussian {
        let Targets::Real(values) = y else { unreachable!("the gaussian likelihood regresses") };
        let yd = DMatrix::from_column_slice(n, 1, values);
        let stats = weighted_moments(&kernel, &z, &l, x, &yd, None, ctx)?;
        let s = lik.noise.value;
        let mut precision = &stats.g / s;
        for i in 0..m {
            precision[(i, i)] += 1.0;
        }
        let theta1 = DVector::from_column_slice(stats.u.as_slice()) / s;
        if !q.set(0, precision, theta1, par) {
            return Err(FitError::Invalid(FieldError::invalid(
                "/params/noise",
                "q(u)'s precision I + K_uf K_fu / noise cannot be factorised: the noise is too small for these rows",
            )));
        }
        // Titsias' bound: with B = L_B L_B' and c = L_B^-1 u / s.
        let lb = &q.chol[0];
        let mut c = stats.u.clone();
        lb.solve_l_in_place(&mut c, Parallelism::Sequential);
        c /= s;
        let nf = n as f64;
        -0.5 * nf * (2.0 * std::f64::consts::PI).ln() - 0.5 * lb.log_det() - 0.5 * nf * s.ln() - 0.5 * stats.yy / s
            + 0.5 * c.norm_squared()
            - 0.5 * stats.trace / s
            + 0.5 * stats.g.trace() / s
    } else {
        elbo(&kernel, &z, &l, &q, &lik, x, y, setup.seed, ctx)?
    };
    if !elbo.is_finite() {
        return Err(FitError::Invalid(FieldError::invalid(
            "/y",
            "the evidence lower bound overflows: rescale y (or set normalize_y)",
        )));
    }
    ctx.progress.step(Some(elbo));
    Ok(Trained {
        kernel,
        likelihood: lik,
        z,
        inducing_indices: if learn_z { None } else { indices },
        l,
        q,
        elbo,
        epochs: epochs_run,
        iterations,
    })
}

/// The ELBO over every row: sum_i E_q[log p(y_i | f_i)] - KL(q || p), in blocks of rows
/// added in order (softmax: draws from the seed's own stream).
#[allow(clippy::too_many_arguments)]
pub fn elbo(
    kernel: &Kernel,
    z: &Points,
    l: &Cholesky,
    q: &Posterior,
    lik: &Likelihood,
    x: &Points,
    y: &Targets,
    seed: u64,
    ctx: &FitContext,
) -> Result<f64, FitError> {
    let mut rng = SplitMix64::new(seed ^ ELBO_STREAM);
    let cur = Current { kernel, z, l, q, lik, single: false };
    let mut expected = 0.0;
    for start in (0..x.n()).step_by(FINAL_BLOCK) {
        ctx.cancel.check()?;
        let len = FINAL_BLOCK.min(x.n() - start);
        let noise = (lik.kind == LikelihoodKind::Softmax).then(|| draws(&mut rng, len, lik.latents));
        let out = pass(&cur, &x.slice(start, len), &y.range(start, len), noise.as_deref(), Want::default(), ctx.par);
        expected += out.expected;
        ctx.progress.iteration((start / FINAL_BLOCK + 1) as u64);
    }
    Ok(expected - q.kl(ctx.par))
}

/// The ELBO at a given q over every row in one pass, with the softmax's standard normals
/// given (rows x [`MC_SAMPLES`]-or-any x latents): the form a reference computation
/// (GPyTorch's, in the parity tests) can be fed.
#[allow(clippy::too_many_arguments)]
pub fn elbo_with_draws(
    kernel: &Kernel,
    z: &Points,
    q: &Posterior,
    lik: &Likelihood,
    x: &Points,
    y: &Targets,
    draws: Option<&[f64]>,
) -> Result<f64, FitError> {
    let l = factor_kmm(kernel, z, Parallelism::Sequential)?;
    let cur = Current { kernel, z, l: &l, q, lik, single: false };
    let out = pass(&cur, x, y, draws, Want::default(), Parallelism::Sequential);
    Ok(out.expected - q.kl(Parallelism::Sequential))
}

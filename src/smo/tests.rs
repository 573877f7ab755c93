use super::*;
use crate::kernel::{Kernel, Points};
use serde_json::json;

fn problem(n: usize, seed: u64) -> (Points, Vec<f64>) {
    let m = crate::test_support::seeded_matrix(2, n, seed);
    let y = (0..n).map(|i| if m[(0, i)] * m[(1, i)] + 0.1 * m[(0, i)] > 0.0 { 1.0 } else { -1.0 }).collect();
    (Points::from_columns(m), y)
}

const C: f64 = 2.0;

fn options(cache_bytes: usize, shrinking: bool) -> SmoOptions {
    SmoOptions { tol: 1e-6, max_iter: None, cache_bytes, shrinking, par: Parallelism::Sequential }
}

/// C-SVC with C = 2 on every point; the solution with its coefficients y a.
fn run(kernel: &Kernel, x: &Points, y: &[f64], opts: &SmoOptions) -> (SmoSolution, Vec<f64>) {
    let problem = Problem::c_svc(y.to_vec(), vec![C; y.len()]);
    let sol = solve(ColumnKernel::new(kernel, x), &problem, opts, &|| false).unwrap();
    let coef = sol.coef(y);
    (sol, coef)
}

/// The KKT conditions of the dual, checked from scratch with the full Gram matrix:
/// box, equality, and the optimality gap at most tol (plus f32 round-off).
#[test]
fn solution_satisfies_kkt_conditions() {
    let (x, y) = problem(120, 3);
    let kernel = Kernel::from_json(&json!({"type": "rbf", "gamma": 2.0})).unwrap();
    let opts = options(1 << 20, true);
    let (sol, coef) = run(&kernel, &x, &y, &opts);
    assert!(sol.converged);
    let k = kernel.gram(&x, Parallelism::Sequential);
    let a = &sol.alpha;
    assert!(a.iter().all(|&v| (-1e-12..=C + 1e-12).contains(&v)));
    assert!(coef.iter().sum::<f64>().abs() < 1e-9, "y'a = 0");
    // y_i f(x_i) >= 1 at a = 0, = 1 when free, <= 1 at C (up to tol).
    for i in 0..y.len() {
        let f: f64 = (0..y.len()).map(|j| coef[j] * k[(j, i)]).sum::<f64>() - sol.rho;
        let margin = y[i] * f;
        if a[i] <= 0.0 {
            assert!(margin >= 1.0 - 1e-4, "point {i} at 0 with margin {margin}");
        } else if a[i] >= C {
            assert!(margin <= 1.0 + 1e-4, "point {i} at C with margin {margin}");
        } else {
            assert!((margin - 1.0).abs() < 1e-4, "free point {i} with margin {margin}");
        }
    }
}

/// Shrinking and a cache of two columns change the path's bookkeeping, not the
/// optimum the dual objective reaches.
#[test]
fn shrinking_and_tiny_cache_reach_the_same_optimum() {
    let (x, y) = problem(300, 11);
    let kernel = Kernel::from_json(&json!({"type": "rbf", "gamma": 1.0})).unwrap();
    let (reference, _) = run(&kernel, &x, &y, &options(64 << 20, false));
    for (bytes, shrinking) in [(0, true), (0, false), (64 << 20, true)] {
        let (sol, _) = run(&kernel, &x, &y, &options(bytes, shrinking));
        assert!(sol.converged);
        assert!(
            (sol.objective - reference.objective).abs() <= 1e-6 * reference.objective.abs(),
            "cache {bytes}, shrinking {shrinking}: {} vs {}",
            sol.objective,
            reference.objective
        );
        assert!((sol.rho - reference.rho).abs() < 1e-4);
    }
}

/// A non-PSD kernel (sigmoid) still terminates, inside the box, thanks to tau.
#[test]
fn sigmoid_kernel_terminates_inside_the_box() {
    let (x, y) = problem(150, 5);
    let kernel = Kernel::from_json(&json!({"type": "sigmoid", "gamma": 2.0, "coef0": 1.0})).unwrap();
    let (sol, _) = run(&kernel, &x, &y, &SmoOptions { tol: 1e-3, ..options(1 << 20, true) });
    assert!(sol.converged);
    assert!(sol.alpha.iter().all(|a| (-1e-12..=C + 1e-12).contains(a)));
}

/// Passes split with the partner thread compute exactly what one thread computes:
/// same iterations, bit-identical coefficients and bias.
#[test]
fn split_passes_are_bit_identical_to_one_thread() {
    let (x, y) = problem(MIN_SPLIT + 500, 21);
    let kernel = Kernel::from_json(&json!({"type": "rbf", "gamma": 3.0})).unwrap();
    let one = run(&kernel, &x, &y, &SmoOptions { tol: 1e-3, ..options(8 << 20, true) });
    let two = run(&kernel, &x, &y, &SmoOptions { tol: 1e-3, par: Parallelism::Parallel, ..options(8 << 20, true) });
    assert!(one.0.iterations > 100, "long enough to shrink and reconstruct");
    assert_eq!(one, two);
}

#[test]
fn max_iter_stops_early_and_says_so() {
    let (x, y) = problem(200, 9);
    let kernel = Kernel::from_json(&json!({"type": "rbf", "gamma": 5.0})).unwrap();
    let (sol, _) = run(&kernel, &x, &y, &SmoOptions { max_iter: Some(3), ..options(1 << 20, true) });
    assert_eq!(sol.iterations, 3);
    assert!(!sol.converged);
}

#[test]
fn cancellation_is_observed() {
    let (x, y) = problem(2500, 4);
    let kernel = Kernel::from_json(&json!({"type": "rbf", "gamma": 50.0})).unwrap();
    let problem = Problem::c_svc(y.clone(), vec![C; y.len()]);
    let r = solve(ColumnKernel::new(&kernel, &x), &problem, &options(1 << 20, true), &|| true);
    assert_eq!(r, Err(Cancelled));
}

/// The batched working set reaches the optimum of LIBSVM's path on every formulation:
/// C-SVC, nu-SVC, epsilon-SVR, nu-SVR (two variables per point) and one-class, with a
/// working set much smaller than the problem (many rounds) and on both cores.
#[test]
fn batched_working_set_reaches_libsvm_optimum_for_every_formulation() {
    let n = 400;
    let (x, labels) = problem(n, 17);
    let z: Vec<f64> = (0..n).map(|i| (3.0 * x.point(i)[0]).sin() + 0.5 * x.point(i)[1]).collect();
    let nu = 0.3;
    let nu_svc = {
        let (mut pos, mut neg) = (nu * n as f64 / 2.0, nu * n as f64 / 2.0);
        let start = labels
            .iter()
            .map(|&y| {
                let side = if y > 0.0 { &mut pos } else { &mut neg };
                let a = side.min(1.0);
                *side -= a;
                a
            })
            .collect();
        Problem { y: labels.clone(), p: vec![0.0; n], c: vec![1.0; n], start, nu: true }
    };
    let signs: Vec<f64> = [vec![1.0; n], vec![-1.0; n]].concat();
    let eps_svr = Problem {
        y: signs.clone(),
        p: z.iter().map(|z| 0.1 - z).chain(z.iter().map(|z| 0.1 + z)).collect(),
        c: vec![C; 2 * n],
        start: vec![0.0; 2 * n],
        nu: false,
    };
    // nu-SVR with C = 2 here takes LIBSVM's path 469,022 steps to tol 1e-6: C = 0.2.
    let c_nu = 0.2;
    let nu_svr = {
        let mut sum = c_nu * nu * n as f64 / 2.0;
        let half: Vec<f64> = (0..n)
            .map(|_| {
                let a = sum.min(c_nu);
                sum -= a;
                a
            })
            .collect();
        Problem {
            y: signs,
            p: z.iter().map(|z| -z).chain(z.iter().copied()).collect(),
            c: vec![c_nu; 2 * n],
            start: [half.clone(), half].concat(),
            nu: true,
        }
    };
    let one_class = {
        let whole = (nu * n as f64) as usize;
        let start = (0..n).map(|i| {
            if i < whole {
                1.0
            } else if i == whole {
                nu * n as f64 - whole as f64
            } else {
                0.0
            }
        });
        Problem { y: vec![1.0; n], p: vec![0.0; n], c: vec![1.0; n], start: start.collect(), nu: false }
    };
    let kernel = Kernel::from_json(&json!({"type": "rbf", "gamma": 2.0})).unwrap();
    let gram = kernel.gram(&x, Parallelism::Sequential);
    for (name, problem) in [
        ("c_svc", Problem::c_svc(labels.clone(), vec![C; n])),
        ("nu_svc", nu_svc),
        ("epsilon_svr", eps_svr),
        ("nu_svr", nu_svr),
        ("one_class", one_class),
    ] {
        let reference = solve(ColumnKernel::new(&kernel, &x), &problem, &options(64 << 20, true), &|| false).unwrap();
        for par in [Parallelism::Sequential, Parallelism::Parallel] {
            // A cache of 48 rows: working sets of 48 variables, many rounds.
            let opts = SmoOptions { par, ..options(48 * 4 * n, true) };
            let sol = batched::solve(ColumnKernel::new(&kernel, &x), &problem, &opts, &|| false).unwrap();
            // The objective from the solution itself: 1/2 a'Qa + p'a with the full Gram.
            let l = problem.y.len();
            let mut direct = 0.0;
            for t in 0..l {
                let qa: f64 = (0..l)
                    .map(|s| problem.y[t] * problem.y[s] * (gram[(t % n, s % n)] as f32) as f64 * sol.alpha[s])
                    .sum();
                direct += sol.alpha[t] * (0.5 * qa + problem.p[t]);
            }
            assert!(
                (direct - sol.objective).abs() <= 1e-6 * direct.abs().max(1.0),
                "{name}: the reported objective {} against a'Qa/2 + p'a = {direct}",
                sol.objective
            );
            eprintln!("{name} {par:?}: batched {} iterations, libsvm {}", sol.iterations, reference.iterations);
            assert!(sol.converged, "{name}");
            assert!(
                (sol.objective - reference.objective).abs() <= 1e-6 * reference.objective.abs().max(1.0),
                "{name}: objective {} vs LIBSVM's path {}",
                sol.objective,
                reference.objective
            );
            assert!((sol.rho - reference.rho).abs() < 1e-4, "{name}: rho {} vs {}", sol.rho, reference.rho);
            assert!((sol.r - reference.r).abs() < 1e-4, "{name}: r {} vs {}", sol.r, reference.r);
            // Feasible: inside the box, and the equality constraints kept.
            for (t, a) in sol.alpha.iter().enumerate() {
                assert!((-1e-12..=problem.c[t] + 1e-12).contains(a), "{name}: a_{t} = {a}");
            }
            let signed = |s: f64| -> f64 {
                sol.alpha.iter().zip(&problem.y).filter(|(_, y)| s == 0.0 || **y == s).map(|(a, y)| a * y).sum()
            };
            let start = |s: f64| -> f64 {
                problem.start.iter().zip(&problem.y).filter(|(_, y)| s == 0.0 || **y == s).map(|(a, y)| a * y).sum()
            };
            for s in if problem.nu { vec![1.0, -1.0] } else { vec![0.0] } {
                assert!((signed(s) - start(s)).abs() < 1e-9, "{name}: the equality constraint of sign {s}");
            }
        }
    }
}

/// A cap on iterations stops the batched path too, and says so.
#[test]
fn batched_max_iter_stops_early_and_says_so() {
    let (x, y) = problem(300, 9);
    let kernel = Kernel::from_json(&json!({"type": "rbf", "gamma": 5.0})).unwrap();
    let problem = Problem::c_svc(y.clone(), vec![C; y.len()]);
    let opts = SmoOptions { max_iter: Some(5), ..options(32 * 4 * 300, true) };
    let sol = batched::solve(ColumnKernel::new(&kernel, &x), &problem, &opts, &|| false).unwrap();
    assert!(!sol.converged);
    assert!(sol.iterations <= 5);
    let r = batched::solve(ColumnKernel::new(&kernel, &x), &problem, &options(1 << 20, true), &|| true);
    assert_eq!(r, Err(Cancelled));
}

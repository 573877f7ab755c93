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

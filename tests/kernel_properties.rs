//! Property tests of the kernel algebra on random kernels and random point sets:
//! symmetry, positive semi-definiteness of every PSD kernel, and the algebra laws
//! (sum, product and scale are the element-wise operations on Gram matrices).

use mercer::kernel::{Kernel, Points};
use mercer::linalg::Parallelism;
use nalgebra::DMatrix;
use proptest::prelude::*;
use serde_json::{json, Value};

fn param() -> std::ops::Range<f64> {
    0.2f64..5.0
}

/// A random base kernel of any contract type, in its JSON form.
fn base_kernel(d: usize) -> impl Strategy<Value = Value> {
    let ard = prop::collection::vec(param(), d);
    prop_oneof![
        param().prop_map(|c| json!({"type": "linear", "c": c})),
        (1u32..4, 0.05f64..1.0, 0.0f64..2.0)
            .prop_map(|(p, g, c)| json!({"type": "polynomial", "degree": p, "gamma": g, "coef0": c})),
        param().prop_map(|l| json!({"type": "rbf", "length_scale": l})),
        ard.clone().prop_map(|ls| json!({"type": "rbf", "length_scale": ls})),
        param().prop_map(|g| json!({"type": "rbf", "gamma": g})),
        param().prop_map(|l| json!({"type": "laplacian", "length_scale": l})),
        ard.clone().prop_map(|ls| json!({"type": "exponential", "length_scale": ls})),
        (prop::sample::select(vec![0.5, 1.5, 2.5]), param())
            .prop_map(|(nu, l)| json!({"type": "matern", "nu": nu, "length_scale": l})),
        (prop::sample::select(vec![0.5, 1.5, 2.5]), ard)
            .prop_map(|(nu, ls)| json!({"type": "matern", "nu": nu, "length_scale": ls})),
        (param(), param()).prop_map(|(l, a)| json!({"type": "rational_quadratic", "length_scale": l, "alpha": a})),
        (param(), param()).prop_map(|(l, p)| json!({"type": "periodic", "length_scale": l, "period": p})),
        (0.05f64..1.0, -1.0f64..1.0).prop_map(|(g, c)| json!({"type": "sigmoid", "gamma": g, "coef0": c})),
        param().prop_map(|c| json!({"type": "inverse_multiquadric", "c": c})),
        param().prop_map(|v| json!({"type": "constant", "value": v})),
        param().prop_map(|s| json!({"type": "white", "noise": s})),
    ]
}

/// Base kernels combined by sum, product and scale, up to three levels deep.
fn kernel(d: usize) -> impl Strategy<Value = Value> {
    base_kernel(d).prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 2..4).prop_map(|ks| json!({"type": "sum", "kernels": ks})),
            prop::collection::vec(inner.clone(), 2..4).prop_map(|ks| json!({"type": "product", "kernels": ks})),
            (param(), inner).prop_map(|(f, k)| json!({"type": "scale", "factor": f, "kernel": k})),
        ]
    })
}

fn points(d: usize, n: usize) -> impl Strategy<Value = Points> {
    prop::collection::vec(-3.0f64..3.0, d * n).prop_map(move |v| Points::from_columns(DMatrix::from_vec(d, n, v)))
}

fn case() -> impl Strategy<Value = (Value, Points, Points)> {
    (1usize..4, 2usize..14, 1usize..6).prop_flat_map(|(d, n, m)| (kernel(d), points(d, n), points(d, m)))
}

fn close(a: &DMatrix<f64>, b: &DMatrix<f64>) -> bool {
    let scale = a.amax().max(b.amax()).max(1.0);
    (a - b).amax() <= 1e-12 * scale
}

/// 300 cases from a fixed seed, so CI is reproducible; set PROPTEST_RNG_SEED to explore
/// other inputs locally.
fn config() -> ProptestConfig {
    let mut c = ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() };
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        c.rng_seed = proptest::test_runner::RngSeed::Fixed(20_261_121);
    }
    c
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn gram_is_symmetric_and_agrees_with_cross_and_diag((spec, x, z) in case()) {
        let k = Kernel::from_json(&spec).unwrap();
        let g = k.gram(&x, Parallelism::Sequential);
        prop_assert_eq!(&g, &g.transpose());
        let d = k.diag(&x);
        for i in 0..x.n() {
            prop_assert!((d[i] - g[(i, i)]).abs() <= 1e-12 * d[i].abs().max(1.0));
        }
        // Off the diagonal, K(X, X) and K(X, Z) are the same function (white aside).
        let c = k.cross(&x, &z, Parallelism::Parallel);
        for i in 0..x.n() {
            for j in 0..z.n() {
                let want = k.eval(x.point(i), z.point(j), false);
                prop_assert!((c[(i, j)] - want).abs() <= 1e-12 * want.abs().max(1.0), "{} cross ({},{})", spec, i, j);
            }
        }
    }

    #[test]
    fn psd_kernels_have_no_negative_eigenvalues((spec, x, _z) in case()) {
        let k = Kernel::from_json(&spec).unwrap();
        prop_assume!(k.is_psd(x.d()));
        let g = k.gram(&x, Parallelism::Sequential);
        let trace = g.trace();
        let min = g.clone().symmetric_eigen().eigenvalues.min();
        prop_assert!(min >= -1e-9 * trace.max(1e-300), "{}: smallest eigenvalue {} (trace {})", spec, min, trace);
    }

    #[test]
    fn sum_product_and_scale_are_elementwise((a, b, x) in (1usize..4, 2usize..10).prop_flat_map(|(d, n)| (kernel(d), kernel(d), points(d, n))), f in param()) {
        let (ka, kb) = (Kernel::from_json(&a).unwrap(), Kernel::from_json(&b).unwrap());
        let (ga, gb) = (ka.gram(&x, Parallelism::Sequential), kb.gram(&x, Parallelism::Sequential));
        let sum = Kernel::from_json(&json!({"type": "sum", "kernels": [a.clone(), b.clone()]})).unwrap();
        let product = Kernel::from_json(&json!({"type": "product", "kernels": [a.clone(), b]})).unwrap();
        let scale = Kernel::from_json(&json!({"type": "scale", "factor": f, "kernel": a})).unwrap();
        prop_assert!(close(&sum.gram(&x, Parallelism::Sequential), &(&ga + &gb)));
        prop_assert!(close(&product.gram(&x, Parallelism::Sequential), &ga.component_mul(&gb)));
        prop_assert!(close(&scale.gram(&x, Parallelism::Sequential), &(&ga * f)));
    }

    #[test]
    fn json_round_trips((spec, _x, _z) in case()) {
        let k = Kernel::from_json(&spec).unwrap();
        prop_assert_eq!(Kernel::from_json(&k.to_json()).unwrap(), k);
    }
}

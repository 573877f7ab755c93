//! The string, set and feature-map kernels against naive Python implementations of their
//! formulas (tests/fixtures/generate_structured.py -> structured_reference.json): K(X, X),
//! K(X, Z), the diagonal and the column-at-a-time path the SVM solver uses; Lodhi's
//! worked example; and EM against scikit-learn's GaussianMixture by log-likelihood.

use mercer::dataset::rows::{to_points, Row};
use mercer::estimator::{mixture, FitContext};
use mercer::kernel::column::ColumnKernel;
use mercer::kernel::{Kernel, MixtureKernel, Points};
use mercer::linalg::Parallelism;
use nalgebra::DMatrix;
use serde_json::Value;

const REL: f64 = 1e-12;

fn fixtures() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/structured_reference.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn points(v: &Value) -> Points {
    let rows: Vec<Row> = serde_json::from_value(v.clone()).unwrap();
    to_points(&rows, None).unwrap()
}

fn matrix(v: &Value) -> DMatrix<f64> {
    let r: Vec<Vec<f64>> = serde_json::from_value(v.clone()).unwrap();
    DMatrix::from_fn(r.len(), r[0].len(), |i, j| r[i][j])
}

/// Entry by entry to REL of the entry, or of the matrix's largest entry for entries far
/// below it (the generative kernel spans 50 orders of magnitude).
fn assert_close(case: &str, what: &str, got: &DMatrix<f64>, want: &DMatrix<f64>) {
    assert_eq!(got.shape(), want.shape(), "{case}: {what} shape");
    let scale = want.amax();
    for i in 0..want.nrows() {
        for j in 0..want.ncols() {
            let (a, b) = (got[(i, j)], want[(i, j)]);
            let tol = REL * b.abs().max(1e-3 * scale).max(1e-300);
            assert!((a - b).abs() <= tol, "{case}: {what}[{i},{j}] = {a:e}, reference {b:e}");
        }
    }
}

#[test]
fn every_kernel_matches_the_naive_reference() {
    let fx = fixtures();
    let cases = fx["kernels"].as_array().unwrap();
    let mut types = std::collections::BTreeSet::new();
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let k = Kernel::from_json(&case["kernel"]).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        types.insert(case["kernel"]["type"].as_str().unwrap().to_string());
        let (x, z) = (points(&case["x"]), points(&case["z"]));
        let (gram, cross) = (matrix(&case["gram"]), matrix(&case["cross"]));
        for par in [Parallelism::Sequential, Parallelism::Parallel] {
            let g = k.gram(&x, par);
            assert_close(name, "gram", &g, &gram);
            assert_eq!(g, g.transpose(), "{name}: gram exactly symmetric");
            assert_close(name, "cross", &k.cross(&x, &z, par), &cross);
        }
        let diag = DMatrix::from_column_slice(x.n(), 1, k.diag(&x).as_slice());
        assert_close(name, "diag", &diag, &DMatrix::from_fn(x.n(), 1, |i, _| gram[(i, i)]));
        // The SVM's path: columns on demand, after the solver reorders its points.
        let mut col = ColumnKernel::new(&k, &x);
        let n = x.n();
        col.swap(0, n - 1);
        let order: Vec<usize> = (0..n)
            .map(|p| {
                if p == 0 {
                    n - 1
                } else if p == n - 1 {
                    0
                } else {
                    p
                }
            })
            .collect();
        let mut out = vec![0.0; n];
        for i in 0..n {
            col.column(i, 0..n, &mut out, Parallelism::Sequential);
            let got = DMatrix::from_row_slice(1, n, &out);
            let want = DMatrix::from_fn(1, n, |_, p| gram[(order[i], order[p])]);
            assert_close(name, &format!("column {i}"), &got, &want);
        }
        // Only the algebra around these kernels has hyperparameters; its gradients are
        // checked against central differences, with the string or set part a constant.
        let theta = k.theta();
        let (kmat, grads) = k.gram_with_gradient(&x, Parallelism::Sequential);
        assert_close(name, "gram with gradient", &kmat, &gram);
        assert_eq!(grads.len(), theta.len(), "{name}: one gradient per free hyperparameter");
        let (dg, dgrads) = k.diag_with_gradient(&x);
        assert_eq!(dgrads.len(), theta.len(), "{name}: diag gradients");
        for (q, g) in grads.iter().enumerate() {
            let h = 1e-6;
            let mut up = theta.clone();
            up[q] += h;
            let mut down = theta.clone();
            down[q] -= h;
            let fd = (k.with_theta(&up).gram(&x, Parallelism::Sequential)
                - k.with_theta(&down).gram(&x, Parallelism::Sequential))
                / (2.0 * h);
            assert!((g - &fd).amax() <= 1e-6 * fd.amax().max(1.0), "{name}: dK/dtheta_{q}");
            for i in 0..n {
                assert!((dgrads[q][i] - g[(i, i)]).abs() <= 1e-12 * g[(i, i)].abs().max(1.0));
            }
        }
        for i in 0..n {
            assert!((dg[i] - gram[(i, i)]).abs() <= 1e-12 * gram[(i, i)].abs().max(1e-300));
        }
        if !matches!(case["kernel"]["type"].as_str(), Some("sum" | "product" | "scale")) {
            assert!(theta.is_empty(), "{name}: nothing to optimise");
        }
    }
    for t in ["spectrum", "subsequence", "set", "mahalanobis", "generative", "fisher", "sum", "product"] {
        assert!(types.contains(t), "no case for {t}");
    }
}

/// Lodhi et al. 2002, section 2: "cat", "car", "bat", "bar" with subsequences of length 2.
#[test]
fn lodhi_worked_example() {
    let fx = fixtures();
    let l = &fx["lodhi"];
    let x = points(&l["strings"]);
    for (normalize, key) in [(false, "gram"), (true, "normalized")] {
        let spec = serde_json::json!({"type": "subsequence", "length": l["length"], "decay": l["decay"], "normalize": normalize});
        let k = Kernel::from_json(&spec).unwrap();
        assert_close("lodhi", key, &k.gram(&x, Parallelism::Sequential), &matrix(&l[key]));
    }
}

/// EM from mercer's k-means start and scikit-learn's best of 10 starts end at the same
/// optimum on separated blobs: compared by mean log-likelihood, since the components may
/// come out in another order.
#[test]
fn em_reaches_scikit_learns_likelihood() {
    let fx = fixtures();
    for case in fx["mixtures"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let x = points(&case["x"]);
        let spec = MixtureKernel {
            components: case["components"].as_u64().unwrap() as usize,
            seed: 0,
            max_iter: 1000,
            mixture: None,
        };
        let fit = mixture::fit(&x, &spec, &FitContext::sequential()).unwrap();
        let want = case["sklearn_mean_log_likelihood"].as_f64().unwrap();
        let got = mixture::mean_log_likelihood(&x, &fit.mixture);
        assert!(fit.converged, "{name}: EM converged");
        assert!((got - want).abs() <= 1e-5 * want.abs(), "{name}: mean log-likelihood {got} vs scikit-learn {want}");
    }
}

mod properties {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// Strings over a small alphabet (so k-mers and subsequences repeat), some empty or
    /// shorter than k, some with characters outside the BMP.
    fn strings(n: usize) -> impl Strategy<Value = Vec<String>> {
        prop::collection::vec("[ab\u{e9}\u{1F600}]{0,12}", n)
    }

    fn token_lists(n: usize) -> impl Strategy<Value = Vec<Vec<String>>> {
        prop::collection::vec(prop::collection::vec("[a-d]{1,2}", 0..5), n)
    }

    fn string_kernel() -> impl Strategy<Value = Value> {
        prop_oneof![
            (1usize..5, any::<bool>())
                .prop_map(|(k, normalize)| json!({"type": "spectrum", "k": k, "normalize": normalize})),
            (1usize..4, 0.1f64..1.0, any::<bool>()).prop_map(|(p, decay, normalize)| {
                json!({"type": "subsequence", "length": p, "decay": decay, "normalize": normalize})
            }),
        ]
    }

    /// Smallest eigenvalue against the largest entry: PSD up to round-off.
    fn assert_psd(k: &DMatrix<f64>) -> Result<(), TestCaseError> {
        let scale = k.amax().max(1e-300);
        let min = k.clone().symmetric_eigen().eigenvalues.min();
        prop_assert!(min >= -1e-10 * scale * k.nrows() as f64, "smallest eigenvalue {min:e}, scale {scale:e}");
        prop_assert_eq!(k, &k.transpose());
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn string_grams_are_psd_and_agree_with_their_columns(spec in string_kernel(), rows in strings(9), q in strings(3)) {
            let k = Kernel::from_json(&spec).unwrap();
            let (x, z) = (Points::from_texts(&rows), Points::from_texts(&q));
            let g = k.gram(&x, Parallelism::Parallel);
            assert_psd(&g)?;
            let c = k.cross(&x, &z, Parallelism::Sequential);
            // The same string on both sides gives the Gram's entry.
            let both = Points::from_texts(rows.iter().chain(&q));
            let g2 = k.gram(&both, Parallelism::Sequential);
            for i in 0..x.n() {
                for j in 0..z.n() {
                    prop_assert!((c[(i, j)] - g2[(i, x.n() + j)]).abs() <= 1e-12 * g2.amax().max(1.0));
                }
            }
            let col = ColumnKernel::new(&k, &x);
            let mut out = vec![0.0; x.n()];
            col.column(2, 0..x.n(), &mut out, Parallelism::Sequential);
            for (p, v) in out.iter().enumerate() {
                prop_assert!((v - g[(2, p)]).abs() <= 1e-12 * g.amax().max(1.0));
            }
        }

        #[test]
        fn set_grams_are_psd(rows in token_lists(10), jaccard in any::<bool>()) {
            let measure = if jaccard { "jaccard" } else { "intersection" };
            let k = Kernel::from_json(&json!({"type": "set", "measure": measure})).unwrap();
            let x = Points::from_tokens(rows);
            assert_psd(&k.gram(&x, Parallelism::Sequential))?;
        }

        #[test]
        fn mahalanobis_equals_its_definition_and_is_psd(
            b in prop::collection::vec(-1.0f64..1.0, 6),
            v in prop::collection::vec(-2.0f64..2.0, 24),
        ) {
            // A = B B' (3 x 2 B: rank 2, singular).
            let b = DMatrix::from_vec(3, 2, b);
            let a = &b * b.transpose();
            let rows: Vec<Vec<f64>> = (0..3).map(|i| a.row(i).iter().copied().collect()).collect();
            let k = Kernel::from_json(&json!({"type": "mahalanobis", "matrix": rows})).unwrap();
            let x = Points::from_columns(DMatrix::from_vec(3, 8, v));
            let g = k.gram(&x, Parallelism::Sequential);
            for i in 0..8 {
                for j in 0..8 {
                    let d = x.as_matrix().column(i) - x.as_matrix().column(j);
                    let want = (-0.5 * (d.transpose() * &a * &d)[(0, 0)]).exp();
                    prop_assert!((g[(i, j)] - want).abs() <= 1e-12, "{} vs {}", g[(i, j)], want);
                }
            }
            assert_psd(&g)?;
        }

        #[test]
        fn mixture_kernels_are_psd(v in prop::collection::vec(-3.0f64..3.0, 40), seed in 0u64..100) {
            let x = Points::from_columns(DMatrix::from_vec(2, 20, v));
            let spec = MixtureKernel { components: 2, seed, max_iter: 50, mixture: None };
            let fit = mixture::fit(&x, &spec, &FitContext::sequential()).unwrap();
            let spec = MixtureKernel { mixture: Some(std::sync::Arc::new(fit.mixture)), ..spec };
            for k in [Kernel::Generative(spec.clone()), Kernel::Fisher(spec)] {
                assert_psd(&k.gram(&x, Parallelism::Sequential))?;
            }
        }
    }
}

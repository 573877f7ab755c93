//! Kernel PCA (Schölkopf, Smola and Müller 1998), as scikit-learn's `KernelPCA`: the
//! kernel matrix centred in feature space, its leading eigenpairs (the sign of each
//! eigenvector fixed so that its largest entry in magnitude is positive), and the
//! projection of a centred kernel row onto each eigenvector over the square root of its
//! eigenvalue. Eigenvalues at or below 1e-12 of the largest count as zero; their
//! components project to 0. With `fit_inverse_transform`, a kernel ridge from the training
//! embeddings back to the training rows (Bakir, Weston and Schölkopf 2003) maps
//! components back to rows.

use crate::estimator::{
    FitContext, FitError, Fitted, ModelKind, PredictOptions, Prediction, Predictor, RestoreError, Restoring, Spec,
    StoredArrays, StoredFit, TrainingData, TrainingReport, Transformer,
};
use crate::kernel::{Kernel, Points};
use crate::linalg::{
    leading_exact, leading_randomized, mul_at_b_ordered, Cholesky, Leading, Parallelism, SymmetricBlocks,
    SymmetricOperator, BLOCK_ROWS,
};
use crate::optimize::SplitMix64;
use crate::spec::{FieldError, ObjectReader};
use nalgebra::DMatrix;
use serde_json::{json, Value};

/// How the eigenpairs are found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EigenSolver {
    /// Exactly: a full decomposition, or a Krylov-Schur solve to round-off for a few
    /// components of a large matrix (`linalg::leading_exact`).
    Dense,
    /// Halko et al., seeded: n x l products only.
    Randomized,
}

/// Extra random directions of the randomized solver beyond the components (scikit-learn's
/// `n_oversamples` is 10). Twice that lands 4 to 13 times closer to the exact eigenvalues
/// where they are 1-3% apart, for 12% more time at n = 20,000 (BENCHMARKS.md).
const OVERSAMPLES: usize = 20;
/// Power iterations of the randomized solver (scikit-learn's `"auto"` for few
/// components); each is two products with the n x n matrix, as there.
const POWER_ITERATIONS: usize = 7;
/// Eigenvalues at or below this fraction of the largest are zero (scikit-learn's
/// `_check_psd_eigenvalues`).
const ZERO_EIGENVALUE: f64 = 1e-12;

/// Checked parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelPca {
    pub kernel: Kernel,
    /// None: every component with a positive eigenvalue.
    pub n_components: Option<usize>,
    pub solver: EigenSolver,
    pub seed: u64,
    pub fit_inverse_transform: bool,
    /// Ridge of the inverse map, >= 0.
    pub alpha: f64,
}

impl KernelPca {
    pub fn from_json(kernel: Kernel, params: &Value, path: &str) -> Result<KernelPca, FieldError> {
        let mut obj = ObjectReader::new(params, path)?;
        let n_components = match obj.u64("n_components")? {
            Some(0) => return Err(FieldError::invalid(obj.pointer("n_components"), "must be at least 1")),
            other => other.map(|k| k as usize),
        };
        let solver = match obj.str("eigen_solver")? {
            None | Some("dense") => EigenSolver::Dense,
            Some("randomized") => EigenSolver::Randomized,
            Some(other) => {
                return Err(FieldError::invalid(
                    obj.pointer("eigen_solver"),
                    format!("unknown eigen_solver `{other}`; expected dense or randomized"),
                ))
            }
        };
        if solver == EigenSolver::Randomized && n_components.is_none() {
            return Err(FieldError::invalid(
                obj.pointer("n_components"),
                "the randomized solver finds a given number of components: set n_components (or use \"dense\")",
            ));
        }
        let seed = obj.u64("seed")?.unwrap_or(0);
        let fit_inverse_transform = obj.bool("fit_inverse_transform")?.unwrap_or(false);
        let alpha = obj.f64("alpha")?.unwrap_or(1.0);
        if alpha < 0.0 {
            return Err(FieldError::invalid(obj.pointer("alpha"), "must not be negative"));
        }
        if fit_inverse_transform && !kernel.any_width() {
            return Err(FieldError::invalid(
                obj.pointer("fit_inverse_transform"),
                "the inverse map runs the kernel on the embeddings, which this kernel cannot take \
                 (precomputed, per-feature length scales, mahalanobis, string, set and mixture kernels)",
            ));
        }
        crate::estimator::approximation::Approximation::read_exact_only(&mut obj)?;
        obj.finish()?;
        Ok(KernelPca { kernel, n_components, solver, seed, fit_inverse_transform, alpha })
    }

    pub fn params_json(&self) -> Value {
        json!({
            "n_components": self.n_components,
            "eigen_solver": match self.solver {
                EigenSolver::Dense => "dense",
                EigenSolver::Randomized => "randomized",
            },
            "seed": self.seed,
            "fit_inverse_transform": self.fit_inverse_transform,
            "alpha": self.alpha,
        })
    }

    /// n_components at most n.
    pub fn check_data(&self, n: usize) -> Result<(), FieldError> {
        // One row centred is 0 whatever the kernel: the rows, not the kernel, are short.
        if n < 2 {
            return Err(FieldError::invalid(
                "/x",
                format!("kernel_pca needs at least 2 rows ({n} given): one row, centred, has no variance to find"),
            ));
        }
        match self.n_components {
            Some(k) if k > n => Err(FieldError::invalid(
                "/params/n_components",
                format!("{k} components requested but there are only {n} training rows"),
            )),
            _ => Ok(()),
        }
    }

    /// The kernel matrix (centred in place), the decomposition's working set and the
    /// inverse map's system.
    pub fn fit_memory_estimate(&self, n: usize, d: usize) -> usize {
        let k = self.n_components.unwrap_or(n).min(n);
        let matrix = match self.solver {
            // The lower block triangle (linalg::SymmetricBlocks).
            EigenSolver::Randomized => n * (n + BLOCK_ROWS) / 2,
            EigenSolver::Dense => n * n,
        };
        let decomposition = match (self.solver, self.n_components) {
            // Q, A Q and one accumulator per thread.
            (EigenSolver::Randomized, _) => 4 * n * (k + OVERSAMPLES),
            // The full decomposition's vectors and workspace.
            (EigenSolver::Dense, None) => 2 * n * n,
            (EigenSolver::Dense, Some(_)) if n >= 16 * (2 * k).max(64) => 3 * n * (2 * k).max(64),
            (EigenSolver::Dense, Some(_)) => 2 * n * n,
        };
        let inverse = if self.fit_inverse_transform { n * n + n * d } else { 0 };
        8 * (matrix + decomposition + inverse + 2 * n * d)
    }

    pub fn fit(&self, x: &Points, ctx: &FitContext) -> Result<KernelPcaModel, FitError> {
        let n = x.n();
        self.check_data(n).map_err(FitError::Invalid)?;
        let par = ctx.par;
        ctx.progress.phase("gram");
        let want = self.n_components.unwrap_or(n);
        let failed = || FitError::Invalid(FieldError::invalid("/kernel", "the eigendecomposition did not converge"));
        let (centring, found) = match self.solver {
            EigenSolver::Dense => {
                let mut k = self.kernel.gram(x, par);
                ctx.cancel.check()?;
                let centring = Centring::of(&k.column_iter().map(|c| c.sum()).collect::<Vec<_>>());
                centring.centre_training(&mut k);
                ctx.progress.phase("eigen");
                (centring, leading_exact(&k, want, par).ok_or_else(failed)?)
            }
            EigenSolver::Randomized => {
                // Only products with the centred matrix are needed: it is kept as its
                // lower block triangle and centred on the fly (`Centred`).
                let blocks = SymmetricBlocks::from_fn(n, BLOCK_ROWS, par, |r, rl, c, cl| {
                    if r == c {
                        self.kernel.gram(&x.slice(r, rl), Parallelism::Sequential)
                    } else {
                        self.kernel.cross(&x.slice(r, rl), &x.slice(c, cl), Parallelism::Sequential)
                    }
                });
                ctx.cancel.check()?;
                let centring = Centring::of(&blocks.column_sums());
                ctx.progress.phase("eigen");
                let l = (want + OVERSAMPLES).min(n);
                let centred = Centred { k: &blocks, centring: &centring };
                let found = leading_randomized(&centred, want, gaussian(n, l, self.seed), POWER_ITERATIONS, par);
                (centring, found.ok_or_else(failed)?)
            }
        };
        ctx.cancel.check()?;
        let (values, vectors) = self.kept(found)?;
        let n_components = values.len();
        // Projections of centred kernel rows: v_j / sqrt(lambda_j), 0 for zero eigenvalues.
        let alphas =
            DMatrix::from_fn(
                n,
                n_components,
                |i, j| {
                    if values[j] > 0.0 {
                        vectors[(i, j)] / values[j].sqrt()
                    } else {
                        0.0
                    }
                },
            );
        let inverse = if self.fit_inverse_transform {
            ctx.progress.phase("inverse");
            let embedding = DMatrix::from_fn(n, n_components, |i, j| vectors[(i, j)] * values[j].sqrt());
            Some(self.fit_inverse(x, embedding, par)?)
        } else {
            None
        };
        let report =
            TrainingReport { eigenvalues: Some(values), n_components: Some(n_components as u64), ..Default::default() };
        Ok(KernelPcaModel { spec: self.clone(), x: x.clone(), centring, alphas, inverse, report })
    }

    /// The eigenpairs kept: small eigenvalues zeroed, signs fixed, and without
    /// `n_components` the zero ones dropped (as scikit-learn's `remove_zero_eig`).
    fn kept(&self, found: Leading) -> Result<(Vec<f64>, DMatrix<f64>), FitError> {
        let Leading { mut values, mut vectors } = found;
        let largest = values.iter().copied().fold(0.0f64, f64::max);
        for v in values.iter_mut() {
            if *v <= ZERO_EIGENVALUE * largest {
                *v = 0.0;
            }
        }
        for mut col in vectors.column_iter_mut() {
            let mut at = 0;
            for (i, v) in col.iter().enumerate() {
                if v.abs() > col[at].abs() {
                    at = i;
                }
            }
            if col[at] < 0.0 {
                col.neg_mut();
            }
        }
        if self.n_components.is_none() {
            let keep: Vec<usize> = (0..values.len()).filter(|&j| values[j] > 0.0).collect();
            if keep.is_empty() {
                return Err(FitError::Invalid(FieldError::invalid(
                    "/kernel",
                    "the centred kernel matrix has no positive eigenvalue: every row looks the same to this kernel",
                )));
            }
            vectors = vectors.select_columns(&keep);
            values = keep.iter().map(|&j| values[j]).collect();
        }
        Ok((values, vectors))
    }

    /// Kernel ridge from the embeddings (n x k) to the rows: (K_e + alpha I)^-1 X.
    fn fit_inverse(&self, x: &Points, embedding: DMatrix<f64>, par: Parallelism) -> Result<Inverse, FitError> {
        let points = Points::from_columns(embedding.transpose());
        let mut ke = self.kernel.gram(&points, par);
        for i in 0..ke.nrows() {
            ke[(i, i)] += self.alpha;
        }
        let chol = Cholesky::factor(ke, par).map_err(FitError::Factorisation)?;
        let mut dual = x.as_matrix().transpose();
        chol.solve_in_place(&mut dual, par);
        Ok(Inverse { points, dual })
    }
}

/// n x l standard normal draws from `seed`, column by column.
fn gaussian(n: usize, l: usize, seed: u64) -> DMatrix<f64> {
    let mut rng = SplitMix64::new(seed);
    DMatrix::from_fn(n, l, |_, _| rng.normal())
}

/// What centring needs of the training kernel matrix (scikit-learn's `KernelCenterer`):
/// its column means and overall mean.
#[derive(Debug, Clone, PartialEq)]
struct Centring {
    col_means: Vec<f64>,
    all_mean: f64,
}

impl Centring {
    /// From the column sums of the symmetric training kernel matrix.
    fn of(column_sums: &[f64]) -> Centring {
        let n = column_sums.len() as f64;
        let col_means: Vec<f64> = column_sums.iter().map(|s| s / n).collect();
        let all_mean = col_means.iter().sum::<f64>() / n;
        Centring { col_means, all_mean }
    }

    /// K - column means - row means + overall mean, in place. K is symmetric: its row
    /// means are its column means (and reading rows of a column-major matrix would be a
    /// strided pass, seconds at n = 20,000).
    fn centre_training(&self, k: &mut DMatrix<f64>) {
        for (j, mut col) in k.column_iter_mut().enumerate() {
            let c = self.all_mean - self.col_means[j];
            col.iter_mut().zip(&self.col_means).for_each(|(v, r)| *v += c - r);
        }
    }

    /// Centres K(train, queries) (n x m) in place: each query's mean over the training
    /// rows and each training row's training mean removed, the overall mean added.
    fn centre_cross(&self, k: &mut DMatrix<f64>) {
        let n = k.nrows() as f64;
        for mut col in k.column_iter_mut() {
            let c = self.all_mean - col.sum() / n;
            col.iter_mut().zip(&self.col_means).for_each(|(v, m)| *v += c - m);
        }
    }
}

/// The centred kernel matrix as an operator, from the uncentred one: with m the column
/// means, mu their mean and 1 the ones vector, K_c Q = K Q - 1 (m'Q) - m (1'Q) + mu 1 (1'Q).
struct Centred<'a> {
    k: &'a SymmetricBlocks,
    centring: &'a Centring,
}

impl SymmetricOperator for Centred<'_> {
    fn n(&self) -> usize {
        self.k.n()
    }

    fn apply(&self, q: &DMatrix<f64>, par: Parallelism) -> DMatrix<f64> {
        let mut y = self.k.apply(q, par);
        let m = &self.centring.col_means;
        for (mut yc, qc) in y.column_iter_mut().zip(q.column_iter()) {
            let mq: f64 = m.iter().zip(qc.iter()).map(|(a, b)| a * b).sum();
            let oq: f64 = qc.sum();
            let shift = self.centring.all_mean * oq - mq;
            yc.iter_mut().zip(m).for_each(|(v, mi)| *v += shift - mi * oq);
        }
        y
    }
}

/// The inverse map: kernel ridge weights over the training embeddings.
#[derive(Debug, Clone)]
struct Inverse {
    /// The training embeddings as points (n_components x n).
    points: Points,
    /// n x d.
    dual: DMatrix<f64>,
}

/// A fitted kernel PCA.
#[derive(Debug, Clone)]
pub struct KernelPcaModel {
    spec: KernelPca,
    x: Points,
    centring: Centring,
    /// n x n_components.
    alphas: DMatrix<f64>,
    inverse: Option<Inverse>,
    report: TrainingReport,
}

impl KernelPcaModel {
    pub fn n_components(&self) -> usize {
        self.alphas.ncols()
    }

    /// m x n_components: the centred kernel rows of `z` projected.
    pub fn transform(&self, z: &Points, par: Parallelism) -> DMatrix<f64> {
        let block = crate::estimator::predict_block_rows(self.x.n().max(1));
        let mut out = DMatrix::zeros(z.n(), self.n_components());
        for start in (0..z.n()).step_by(block) {
            let q = z.slice(start, block.min(z.n() - start));
            let mut k = self.spec.kernel.cross(&self.x, &q, par);
            self.centring.centre_cross(&mut k);
            out.rows_mut(start, q.n()).copy_from(&mul_at_b_ordered(&k, &self.alphas));
        }
        out
    }

    /// Whether [`KernelPcaModel::inverse_transform`] is available.
    pub fn has_inverse(&self) -> bool {
        self.inverse.is_some()
    }

    /// m x d rows from m x n_components embeddings (`z`'s points are the embeddings);
    /// None without `fit_inverse_transform`.
    pub fn inverse_transform(&self, z: &Points, par: Parallelism) -> Option<DMatrix<f64>> {
        let inv = self.inverse.as_ref()?;
        let k = self.spec.kernel.cross(&inv.points, z, par);
        Some(mul_at_b_ordered(&k, &inv.dual))
    }

    pub(crate) fn store_into(&self, s: &mut StoredFit) {
        s.put_points(&self.x);
        let mut arrays = vec![
            ("alphas".into(), self.alphas.as_slice().to_vec()),
            ("col_means".into(), self.centring.col_means.clone()),
            ("all_mean".into(), vec![self.centring.all_mean]),
        ];
        if let Some(inv) = &self.inverse {
            arrays.push(("inverse_points".into(), inv.points.as_matrix().as_slice().to_vec()));
            arrays.push(("inverse_dual".into(), inv.dual.as_slice().to_vec()));
        }
        s.arrays = arrays;
    }

    pub(crate) fn restore(
        spec: KernelPca,
        x: Points,
        mut arrays: StoredArrays,
        report: TrainingReport,
    ) -> Result<KernelPcaModel, RestoreError> {
        let n = x.n();
        let k = report.n_components.ok_or_else(|| RestoreError("no n_components".into()))? as usize;
        let alphas = DMatrix::from_vec(n, k, arrays.take("alphas", Some(n * k))?);
        let col_means = arrays.take("col_means", Some(n))?;
        let all_mean = arrays.take("all_mean", Some(1))?[0];
        let inverse = if spec.fit_inverse_transform {
            let d = x.d();
            let points = arrays.take("inverse_points", Some(k * n))?;
            let dual = arrays.take("inverse_dual", Some(n * d))?;
            Some(Inverse {
                points: Points::from_columns(DMatrix::from_vec(k, n, points)),
                dual: DMatrix::from_vec(n, d, dual),
            })
        } else {
            None
        };
        Ok(KernelPcaModel { spec, x, centring: Centring { col_means, all_mean }, alphas, inverse, report })
    }
}

impl Predictor for KernelPcaModel {
    /// `embedding` only: kernel PCA transforms, it does not predict.
    fn predict(&self, x: &Points, _opts: &PredictOptions, par: Parallelism) -> Prediction {
        Prediction { embedding: Some(self.transform(x, par)), ..Default::default() }
    }

    crate::estimator::spec_and_report_accessors!();

    fn n_support(&self) -> usize {
        self.x.n()
    }

    fn support(&self) -> &Points {
        &self.x
    }

    fn memory_bytes(&self) -> usize {
        let inverse = self.inverse.as_ref().map_or(0, |i| i.points.memory_bytes() + 8 * i.dual.len());
        self.x.memory_bytes() + 8 * (self.alphas.len() + self.centring.col_means.len()) + inverse
    }

    fn predict_cost(&self, m: usize, _opts: &PredictOptions) -> f64 {
        (m * self.x.n()) as f64 * (self.kernel().pair_cost(&self.x) + 2.0 * self.n_components() as f64 + 2.0)
    }
}

impl Spec for KernelPca {
    crate::estimator::spec_basics!();

    fn kind(&self) -> ModelKind {
        ModelKind::KernelPca
    }

    fn check_data(&self, n: usize) -> Result<(), FieldError> {
        KernelPca::check_data(self, n)
    }

    fn fit_memory_estimate(&self, n: usize, d: usize) -> usize {
        KernelPca::fit_memory_estimate(self, n, d)
    }

    fn for_rows(&self, _: &[usize]) -> Box<dyn Spec> {
        Box::new(self.clone())
    }

    fn fit_checked(&self, data: &TrainingData, ctx: &FitContext) -> Result<Box<dyn Fitted>, FitError> {
        let x = data.unlabelled(self.kind())?;
        Ok(Box::new(KernelPca::fit(self, x, ctx)?))
    }
}

impl Fitted for KernelPcaModel {
    crate::estimator::fitted_basics!();

    fn kind(&self) -> ModelKind {
        ModelKind::KernelPca
    }

    fn transformer(&self) -> Option<&dyn Transformer> {
        Some(self)
    }
}

impl Transformer for KernelPcaModel {
    fn n_components(&self) -> usize {
        KernelPcaModel::n_components(self)
    }

    fn has_inverse(&self) -> bool {
        KernelPcaModel::has_inverse(self)
    }

    fn inverse_transform(&self, z: &Points, par: Parallelism) -> Option<DMatrix<f64>> {
        KernelPcaModel::inverse_transform(self, z, par)
    }
}

/// A stored kernel PCA.
pub(crate) fn restore(mut r: Restoring) -> Result<Box<dyn Fitted>, RestoreError> {
    let spec = r.spec(KernelPca::from_json)?;
    let x = r.points(false)?;
    Ok(Box::new(KernelPcaModel::restore(spec, x, r.arrays, r.report)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(params: Value) -> Result<KernelPca, FieldError> {
        KernelPca::from_json(Kernel::from_json(&json!({"type": "rbf", "gamma": 0.5})).unwrap(), &params, "/params")
    }

    /// The training rows' embedding is the eigenvectors times the square roots of the
    /// eigenvalues, and transform gives it back; components are orthogonal.
    #[test]
    fn training_rows_transform_to_their_scaled_eigenvectors() {
        let x = Points::from_columns(crate::test_support::seeded_matrix(3, 40, 7));
        let ctx = FitContext::sequential();
        let m = spec(json!({"n_components": 4})).unwrap().fit(&x, &ctx).unwrap();
        let e = m.transform(&x, Parallelism::Sequential);
        let values = m.report.eigenvalues.clone().unwrap();
        assert!(values.windows(2).all(|w| w[0] >= w[1]));
        let gram = e.transpose() * &e;
        for a in 0..4 {
            // |column a|^2 = lambda_a (unit eigenvector times sqrt(lambda_a)).
            assert!((gram[(a, a)] - values[a]).abs() < 1e-9 * values[0]);
            for b in 0..a {
                assert!(gram[(a, b)].abs() < 1e-9 * values[0]);
            }
        }
        // Centred: every component sums to zero over the training rows.
        assert!(e.row_sum().iter().all(|s| s.abs() < 1e-9));
    }

    /// The randomized path's operator, the lower block triangle centred on the fly,
    /// equals the dense centred matrix (blocks of 7 rows, so the tail block is ragged).
    #[test]
    fn the_centred_block_operator_is_the_centred_matrix() {
        let x = Points::from_columns(crate::test_support::seeded_matrix(3, 40, 9));
        let kernel = spec(json!({})).unwrap().kernel;
        let mut dense = kernel.gram(&x, Parallelism::Sequential);
        let centring = Centring::of(&dense.column_iter().map(|c| c.sum()).collect::<Vec<_>>());
        centring.centre_training(&mut dense);
        let blocks = SymmetricBlocks::from_fn(40, 7, Parallelism::Sequential, |r, rl, c, cl| {
            if r == c {
                kernel.gram(&x.slice(r, rl), Parallelism::Sequential)
            } else {
                kernel.cross(&x.slice(r, rl), &x.slice(c, cl), Parallelism::Sequential)
            }
        });
        let from_blocks = Centring::of(&blocks.column_sums());
        assert!((from_blocks.all_mean - centring.all_mean).abs() < 1e-14);
        let q = crate::test_support::seeded_matrix(40, 5, 10);
        let got = Centred { k: &blocks, centring: &from_blocks }.apply(&q, Parallelism::Parallel);
        assert!((got - &dense * &q).amax() < 1e-12);
    }

    #[test]
    fn params_are_checked() {
        assert_eq!(spec(json!({"n_components": 0})).unwrap_err().pointer, "/params/n_components");
        assert_eq!(spec(json!({"eigen_solver": "arpack"})).unwrap_err().pointer, "/params/eigen_solver");
        assert_eq!(spec(json!({"eigen_solver": "randomized"})).unwrap_err().pointer, "/params/n_components");
        assert_eq!(spec(json!({"alpha": -1.0})).unwrap_err().pointer, "/params/alpha");
        let ard = Kernel::from_json(&json!({"type": "rbf", "length_scale": [1.0, 2.0]})).unwrap();
        let e = KernelPca::from_json(ard, &json!({"fit_inverse_transform": true}), "/params").unwrap_err();
        assert_eq!(e.pointer, "/params/fit_inverse_transform");
        assert_eq!(
            spec(json!({"n_components": 5})).unwrap().check_data(4).unwrap_err().pointer,
            "/params/n_components"
        );
    }
}

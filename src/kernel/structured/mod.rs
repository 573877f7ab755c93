//! The kernels beyond plain vectors: over strings (spectrum, subsequence), over token
//! sets (set), and the numeric kernels defined by a feature map given or fitted to the
//! data (Mahalanobis, generative, Fisher).
//!
//! None has a hyperparameter the optimiser moves, so they offer no gradients: the
//! gradient code takes their matrices as constants. The feature-map kernels become the
//! rbf or linear kernel over mapped points and reuse those fast paths; the string and set
//! kernels build their own matrices here.

pub(super) mod json;
mod mixture;
mod sparse;
mod strings;

pub use mixture::{Mixture, MixtureKernel};

use super::hyper::{Hyper, Scales};
use super::points::PrepKey;
use super::{Kernel, Points, RbfWidth};
use crate::linalg::Parallelism;
use mixture::Score;
use nalgebra::{DMatrix, DVector};
use sparse::{Index, SparseRow, Weights};
use std::sync::Arc;

/// How the set kernel compares two token sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetMeasure {
    /// |x ∩ z| / |x ∪ z|, 1 when both are empty.
    Jaccard,
    /// |x ∩ z|.
    Intersection,
}

/// exp(-1/2 (x - z)' A (x - z)) for a symmetric PSD A, through a factor F with F'F = A:
/// the rows are mapped once to F x and the ordinary squared distance does the rest.
#[derive(Debug, Clone, PartialEq)]
pub struct Mahalanobis {
    matrix: DMatrix<f64>,
    /// r x d, r the number of positive eigenvalues: Lambda^(1/2) V' of A = V Lambda V'.
    /// An eigendecomposition rather than a Cholesky factor because A may be singular.
    factor: DMatrix<f64>,
}

impl Mahalanobis {
    /// Checks A (square, finite, symmetric to 1e-12 max|A|, smallest eigenvalue >=
    /// -1e-10 max|A|) and factorises it.
    pub fn new(matrix: DMatrix<f64>) -> Result<Mahalanobis, String> {
        let d = matrix.nrows();
        if d == 0 || matrix.ncols() != d {
            return Err(format!("must be a square matrix, got {} x {}", d, matrix.ncols()));
        }
        let scale = matrix.amax();
        if !scale.is_finite() {
            return Err("must hold finite numbers".into());
        }
        for i in 0..d {
            for j in 0..i {
                if (matrix[(i, j)] - matrix[(j, i)]).abs() > 1e-12 * scale {
                    return Err(format!("must be symmetric: entries ({i}, {j}) and ({j}, {i}) differ"));
                }
            }
        }
        let sym = (&matrix + matrix.transpose()) * 0.5;
        let eig = sym.symmetric_eigen();
        let smallest = eig.eigenvalues.min();
        if smallest < -1e-10 * scale {
            return Err(format!("must be positive semi-definite; its smallest eigenvalue is {smallest:e}"));
        }
        let keep: Vec<usize> = (0..d).filter(|&i| eig.eigenvalues[i] > 0.0).collect();
        let factor = DMatrix::from_fn(keep.len(), d, |r, c| {
            let i = keep[r];
            eig.eigenvalues[i].sqrt() * eig.eigenvectors[(c, i)]
        });
        Ok(Mahalanobis { matrix, factor })
    }

    pub fn matrix(&self) -> &DMatrix<f64> {
        &self.matrix
    }

    fn map(&self, x: &Points) -> Points {
        Points::from_columns(&self.factor * x.as_matrix())
    }
}

/// For the feature-map kernels: the kernel the mapped points go to, and the map.
/// Maps points to the features a kernel is an inner product (or distance) over.
pub(in crate::kernel) type FeatureMap<'a> = Box<dyn Fn(&Points) -> Points + 'a>;

pub(in crate::kernel) fn feature_map(k: &Kernel) -> Option<(Kernel, FeatureMap<'_>)> {
    let unit_rbf = || Kernel::Rbf(RbfWidth::LengthScale(Hyper::new(Scales::Isotropic(1.0))));
    let linear = || Kernel::Linear { c: Hyper::new(0.0) };
    match k {
        Kernel::Mahalanobis(m) => Some((unit_rbf(), Box::new(|x| m.map(x)))),
        Kernel::Generative(g) => Some((linear(), Box::new(|x| g.features(Score::Generative, x)))),
        Kernel::Fisher(g) => Some((linear(), Box::new(|x| g.features(Score::Fisher, x)))),
        _ => None,
    }
}

/// K(X, Z) (Z None: K(X, X)) for the string and set kernels; None for the others.
pub(in crate::kernel) fn build(k: &Kernel, x: &Points, z: Option<&Points>, par: Parallelism) -> Option<DMatrix<f64>> {
    Some(match k {
        Kernel::Spectrum { k, normalize } => strings::spectrum(*k, *normalize, x, z, par),
        Kernel::Subsequence { length, decay, normalize } => {
            strings::subsequence(*length, *decay, *normalize, x, z, par)
        }
        Kernel::Set { measure } => {
            let index = token_index(x);
            let zs: Option<Vec<SparseRow>> = z.map(|z| {
                let mut fresh = sparse::unseen();
                lists(z).iter().map(|r| index.query(r.iter().map(String::as_str), &mut fresh)).collect()
            });
            match measure {
                SetMeasure::Intersection => index.products(zs.as_deref(), par, &|_, _, v| v),
                SetMeasure::Jaccard => {
                    let zn: Vec<f64> =
                        zs.as_ref().map_or_else(|| index.selfs.clone(), |z| z.iter().map(|r| r.len() as f64).collect());
                    index.products(zs.as_deref(), par, &|i, j, v| jaccard(v, index.selfs[i], zn[j]))
                }
            }
        }
        _ => return None,
    })
}

fn jaccard(inter: f64, a: f64, b: f64) -> f64 {
    let union = a + b - inter;
    if union == 0.0 {
        1.0
    } else {
        inter / union
    }
}

fn lists(p: &Points) -> &[Box<[String]>] {
    p.token_lists().expect("set kernels are checked to get token lists")
}

/// The distinct tokens of each row as interned ids, built once per point set.
fn token_index(x: &Points) -> Arc<Index<String>> {
    x.prepared(PrepKey::Sets, || {
        let index = Index::new(lists(x).iter().map(|r| r.iter().map(String::as_str)), Weights::Presence);
        let bytes = index.memory_bytes();
        (index, bytes)
    })
}

/// k(x_i, x_i) for the string and set kernels; None for the others.
pub(in crate::kernel) fn diag(k: &Kernel, x: &Points) -> Option<DVector<f64>> {
    let n = x.n();
    let unit = |v: f64| if v == 0.0 { 0.0 } else { 1.0 };
    Some(match k {
        Kernel::Spectrum { k, normalize } => {
            let index = strings::spectrum_index(*k, x);
            DVector::from_iterator(n, index.selfs.iter().map(|&v| if *normalize { unit(v) } else { v }))
        }
        Kernel::Subsequence { length, decay, normalize } => {
            let d = strings::subsequence_selfs(*length, *decay, x, Parallelism::Sequential);
            DVector::from_iterator(n, d.iter().map(|&v| if *normalize { unit(v) } else { v }))
        }
        Kernel::Set { measure } => {
            let index = token_index(x);
            DVector::from_iterator(
                n,
                index.selfs.iter().map(|&size| match measure {
                    SetMeasure::Jaccard => 1.0,
                    SetMeasure::Intersection => size,
                }),
            )
        }
        _ => return None,
    })
}

/// A string or set kernel over one prepared point set, one entry at a time (for the
/// column-at-a-time solvers).
pub(in crate::kernel) enum PairKernel {
    /// Count vectors (spectrum, set) with the diagonal used to normalise.
    Sparse {
        rows: Vec<SparseRow>,
        selfs: Vec<f64>,
        how: SparseFinish,
    },
    Subsequence {
        rows: Vec<Box<[char]>>,
        p: usize,
        lambda: f64,
        selfs: Option<Arc<Vec<f64>>>,
    },
}

#[derive(Clone, Copy)]
pub(in crate::kernel) enum SparseFinish {
    Raw,
    Normalise,
    Jaccard,
}

impl PairKernel {
    pub fn new(k: &Kernel, x: &Points) -> Option<PairKernel> {
        Some(match k {
            Kernel::Spectrum { k, normalize } => {
                x.texts()?;
                let index = strings::spectrum_index(*k, x);
                let how = if *normalize { SparseFinish::Normalise } else { SparseFinish::Raw };
                PairKernel::Sparse { rows: index.rows.clone(), selfs: index.selfs.clone(), how }
            }
            Kernel::Set { measure } => {
                x.token_lists()?;
                let index = token_index(x);
                let how = match measure {
                    SetMeasure::Jaccard => SparseFinish::Jaccard,
                    SetMeasure::Intersection => SparseFinish::Raw,
                };
                PairKernel::Sparse { rows: index.rows.clone(), selfs: index.selfs.clone(), how }
            }
            Kernel::Subsequence { length, decay, normalize } => {
                let rows = x.texts()?.to_vec();
                let selfs = normalize.then(|| strings::subsequence_selfs(*length, *decay, x, Parallelism::Sequential));
                PairKernel::Subsequence { rows, p: *length, lambda: *decay, selfs }
            }
            _ => return None,
        })
    }

    /// k(x_i, x_j).
    pub fn pair(&self, i: usize, j: usize, scratch: &mut Vec<f64>) -> f64 {
        match self {
            PairKernel::Sparse { rows, selfs, how } => {
                let v = sparse::dot(&rows[i], &rows[j]);
                match how {
                    SparseFinish::Raw => v,
                    SparseFinish::Normalise => strings::normalised(v, selfs[i], selfs[j]),
                    SparseFinish::Jaccard => jaccard(v, selfs[i], selfs[j]),
                }
            }
            PairKernel::Subsequence { rows, p, lambda, selfs } => {
                let v = strings::subsequence_pair(&rows[i], &rows[j], *p, *lambda, scratch);
                match selfs {
                    Some(s) if i == j => {
                        if s[i] == 0.0 {
                            0.0
                        } else {
                            1.0
                        }
                    }
                    Some(s) => strings::normalised(v, s[i], s[j]),
                    None => v,
                }
            }
        }
    }
}

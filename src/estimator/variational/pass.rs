//! One pass over a set of rows: their share of the ELBO, the statistics of q(u)'s
//! natural-gradient step, and the gradient with respect to the kernel's hyperparameters,
//! the inducing locations and the likelihood's parameters.
//!
//! With K_MM = L L', a row's whitened kernel column is a = L^-1 k_M(x) and latent c's
//! marginal is N(mu_c, var_c) with mu_c = a'm_c and var_c = k(x, x) - a'a + a'S_c a,
//! S_c = (P_c P_c')^-1 (P_c the Cholesky factor of q's precision). For a block of rows
//! the columns are one matrix A = L^-1 K_MB (one triangular solve) and a'S_c a the
//! column norms of P_c^-1 A (another).
//!
//! The gradient flows back through A: with g = de/dmu and h = de/dvar per row, the
//! adjoint of A is Abar = sum_c m_c g_c' + 2 (S_c - I) A diag(h_c), of K_MB it is
//! L^-T Abar, and of L it is -L^-T Abar A'; the Cholesky's adjoint (Murray 2016) turns the
//! latter into K_MM's, sym(L^-T Phi(-Abar A') L^-1) with Phi the lower triangle and half
//! the diagonal ([`kmm_adjoint`]). Kernel derivatives are then contracted with these
//! adjoints in one walk of the kernel (`Kernel::cross_adjoint`), for the hyperparameters
//! and the inducing locations at once.
//!
//! Every matrix product here is one call over the whole block (faer's, with the caller's
//! parallelism, which does not change its rounding); sums over rows run in row order. A
//! pass over the same rows gives the same bits whatever the thread count.

use super::likelihood::{LatentTerms, Likelihood, LikelihoodKind};
use super::posterior::Posterior;
use crate::kernel::{Kernel, Points};
use crate::linalg::{self, Cholesky, Dense, Parallelism, Real};
use nalgebra::{DMatrix, DVector};

/// Targets of rows: numbers (regression) or class indices.
#[derive(Debug, Clone)]
pub enum Targets {
    Real(Vec<f64>),
    Classes(Vec<usize>),
}

impl Targets {
    pub fn len(&self) -> usize {
        match self {
            Targets::Real(v) => v.len(),
            Targets::Classes(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn select(&self, rows: &[usize]) -> Targets {
        match self {
            Targets::Real(v) => Targets::Real(rows.iter().map(|&i| v[i]).collect()),
            Targets::Classes(v) => Targets::Classes(rows.iter().map(|&i| v[i]).collect()),
        }
    }

    pub fn range(&self, start: usize, len: usize) -> Targets {
        match self {
            Targets::Real(v) => Targets::Real(v[start..start + len].to_vec()),
            Targets::Classes(v) => Targets::Classes(v[start..start + len].to_vec()),
        }
    }

    /// Row i's target as the single-latent likelihoods read it (bernoulli: class 1 is 1).
    fn value(&self, i: usize) -> f64 {
        match self {
            Targets::Real(v) => v[i],
            Targets::Classes(v) => v[i] as f64,
        }
    }

    fn class(&self, i: usize) -> usize {
        match self {
            Targets::Classes(v) => v[i],
            Targets::Real(v) => v[i] as usize,
        }
    }
}

/// The model at one point of the fit.
pub struct Current<'a> {
    pub kernel: &'a Kernel,
    pub z: &'a Points,
    /// K_MM = L L' (with the jitter rule).
    pub l: &'a Cholesky,
    pub q: &'a Posterior,
    pub lik: &'a Likelihood,
    /// The minibatch's M x rows blocks in single precision.
    pub single: bool,
}

/// What a pass computes beyond the expected log likelihood.
#[derive(Debug, Clone, Copy, Default)]
pub struct Want {
    /// The natural-gradient statistics of q(u).
    pub natural: bool,
    /// d/dtheta of the kernel's free hyperparameters.
    pub kernel: bool,
    /// d/dZ.
    pub inducing: bool,
    /// d/dtheta of the likelihood's free parameters.
    pub likelihood: bool,
}

/// What a pass over rows gives.
#[derive(Debug, Clone, Default)]
pub struct PassOut {
    /// sum over the rows of E_q[log p(y | f)].
    pub expected: f64,
    /// Per latent: H = sum_i h_nat a_i a_i' (both triangles) and r = sum_i (g - 2 h_nat mu) a_i.
    pub natural: Vec<(DMatrix<f64>, DVector<f64>)>,
    /// sum Abar A' (lower triangle; the upper is not written): what K_MM's adjoint needs.
    pub abar_at: Option<DMatrix<f64>>,
    /// d(expected)/dtheta through K_MB and k(x, x) (K_MM's share is the caller's).
    pub dkernel: Vec<f64>,
    /// d(expected)/dZ through K_MB, d x M.
    pub dz: Option<DMatrix<f64>>,
    pub dlik: Vec<f64>,
}

/// Per-row derivatives, b x latents column-major.
struct RowTerms {
    e: Vec<f64>,
    g: DMatrix<f64>,
    h: DMatrix<f64>,
    h_nat: DMatrix<f64>,
    dlik: Vec<[f64; 2]>,
}

/// The pass over rows `x` with targets `y`; `draws` are the softmax's standard normals
/// (rows x S x latents, row-major), None for the other likelihoods. The M x rows blocks
/// are computed in single precision when `cur.single` says so (sums over rows and
/// everything per row in double either way).
pub fn pass(cur: &Current, x: &Points, y: &Targets, draws: Option<&[f64]>, want: Want, par: Parallelism) -> PassOut {
    if cur.single {
        pass_in::<f32>(cur, x, y, draws, want, par)
    } else {
        pass_in::<f64>(cur, x, y, draws, want, par)
    }
}

fn norm2<T: Real>(v: &[T]) -> f64 {
    linalg::dot_wide(v, v)
}

fn pass_in<T: Real>(
    cur: &Current,
    x: &Points,
    y: &Targets,
    draws: Option<&[f64]>,
    want: Want,
    par: Parallelism,
) -> PassOut {
    let (m, b, c) = (cur.z.n(), x.n(), cur.lik.latents);
    let l = T::borrow(cur.l.l());
    let mut a = T::take(cur.kernel.cross(cur.z, x, par));
    linalg::solve_blocks_by(&l, &mut a, false, par);
    let kdiag = cur.kernel.diag(x);
    let base: Vec<f64> = (0..b).map(|i| kdiag[i] - norm2(a.column(i))).collect();
    let mut mu = DMatrix::zeros(b, c);
    let mut var = DMatrix::zeros(b, c);
    let factors: Vec<_> = cur.q.chol.iter().map(|p| T::borrow(p.l())).collect();
    let means: Vec<Vec<T>> = cur.q.mean.iter().map(|mc| mc.iter().map(|v| T::of(*v)).collect()).collect();
    let mut whitened = Vec::with_capacity(c);
    for k in 0..c {
        let mut bk = a.clone();
        linalg::solve_blocks_by(&factors[k], &mut bk, false, par);
        for i in 0..b {
            mu[(i, k)] = linalg::dot_wide(a.column(i), &means[k]);
            var[(i, k)] = base[i] + norm2(bk.column(i));
        }
        whitened.push(bk);
    }
    let rows = row_terms(cur.lik, y, &mu, &var, draws);
    let mut out = PassOut {
        expected: rows.e.iter().sum(),
        dlik: (0..cur.lik.theta().len()).map(|j| rows.dlik.iter().map(|d| d[j]).sum()).collect(),
        ..Default::default()
    };
    if !want.likelihood {
        out.dlik.clear();
    }
    // A' (b x M): the products below run on transposes (`linalg::products`).
    let at = (want.natural || want.kernel || want.inducing).then(|| a.transpose(par));
    if want.natural {
        let at = at.as_ref().expect("made above");
        out.natural = (0..c)
            .map(|k| {
                let scaled = scale_rows(at, rows.h_nat.column(k).as_slice());
                let mut h = Dense::<T>::zeros(m, m);
                linalg::lower_product(&mut h, &scaled, at, par);
                let mut h = T::give(h);
                linalg::mirror_lower(&mut h, par);
                let mut r = DVector::zeros(m);
                for i in 0..b {
                    let coef = rows.g[(i, k)] - 2.0 * rows.h_nat[(i, k)] * mu[(i, k)];
                    r.iter_mut().zip(a.column(i)).for_each(|(acc, v)| *acc += coef * v.wide());
                }
                (h, r)
            })
            .collect();
    }
    if !(want.kernel || want.inducing) {
        return out;
    }
    // Abar = sum_c m_c g_c' + 2 S_c A diag(h_c) - 2 A diag(sum_c h_c), with S_c A = P_c^-T B_c.
    let mut abar = Dense::<T>::zeros(m, b);
    let h_total: Vec<f64> = (0..b).map(|i| rows.h.row(i).sum()).collect();
    for (k, mut bk) in whitened.into_iter().enumerate() {
        linalg::solve_blocks_by(&factors[k], &mut bk, true, par);
        for i in 0..b {
            let (g, h) = (T::of(rows.g[(i, k)]), T::of(2.0 * rows.h[(i, k)]));
            let sa = bk.column(i);
            for ((dst, mk), s) in abar.column_mut(i).iter_mut().zip(&means[k]).zip(sa) {
                *dst += g * *mk + h * *s;
            }
        }
    }
    for (i, h) in h_total.iter().enumerate() {
        let h = T::of(-2.0 * h);
        let ai: Vec<T> = a.column(i).to_vec();
        abar.column_mut(i).iter_mut().zip(&ai).for_each(|(dst, v)| *dst += h * *v);
    }
    let mut abar_at = Dense::<T>::zeros(m, m);
    linalg::lower_product(&mut abar_at, &abar.transpose(par), at.as_ref().expect("made above"), par);
    out.abar_at = Some(T::give(abar_at));
    // The adjoint of K_MB.
    linalg::solve_blocks_by(&l, &mut abar, true, par);
    let kbar = T::give(abar);
    let adjoint = cur.kernel.cross_adjoint(cur.z, x, &kbar, false, want.inducing).expect("checked at admission");
    if want.kernel {
        // Through K_MB, and through k(x, x) (each row's h summed over the latents).
        let (_, ddiag) = cur.kernel.diag_with_gradient(x);
        out.dkernel = adjoint
            .theta
            .iter()
            .zip(&ddiag)
            .map(|(through_cross, dd)| through_cross + dd.iter().zip(&h_total).map(|(d, h)| d * h).sum::<f64>())
            .collect();
    }
    out.dz = adjoint.z;
    out
}

/// Each row's expected log likelihood and derivatives.
fn row_terms(lik: &Likelihood, y: &Targets, mu: &DMatrix<f64>, var: &DMatrix<f64>, draws: Option<&[f64]>) -> RowTerms {
    let (b, c) = mu.shape();
    let mut t = RowTerms {
        e: vec![0.0; b],
        g: DMatrix::zeros(b, c),
        h: DMatrix::zeros(b, c),
        h_nat: DMatrix::zeros(b, c),
        dlik: vec![[0.0; 2]; b],
    };
    if lik.kind == LikelihoodKind::Softmax {
        let draws = draws.expect("softmax needs its draws");
        let per_row = draws.len() / b;
        let mut terms = LatentTerms::new(c);
        for i in 0..b {
            let (m, v): (Vec<f64>, Vec<f64>) = (0..c).map(|k| (mu[(i, k)], var[(i, k)])).unzip();
            t.e[i] = lik.softmax_row(y.class(i), &m, &v, &draws[i * per_row..(i + 1) * per_row], &mut terms);
            for k in 0..c {
                t.g[(i, k)] = terms.g[k];
                t.h[(i, k)] = terms.h[k];
                t.h_nat[(i, k)] = terms.h_nat[k];
            }
        }
        return t;
    }
    for i in 0..b {
        let r = lik.row(y.value(i), mu[(i, 0)], var[(i, 0)]);
        t.e[i] = r.e;
        t.g[(i, 0)] = r.g;
        t.h[(i, 0)] = r.h;
        t.h_nat[(i, 0)] = r.h_nat;
        t.dlik[i] = r.dtheta;
    }
    t
}

/// A' (b x M) with row i times s[i].
fn scale_rows<T: Real>(at: &Dense<T>, s: &[f64]) -> Dense<T> {
    let mut out = at.clone();
    let s: Vec<T> = s.iter().map(|v| T::of(*v)).collect();
    for j in 0..out.cols {
        out.column_mut(j).iter_mut().zip(&s).for_each(|(v, si)| *v *= *si);
    }
    out
}

/// K_MM's adjoint from sum Abar A' (its lower triangle) scaled by `scale`:
/// sym(L^-T Phi(-scale Abar A') L^-1), Phi the lower triangle with half the diagonal; the
/// two M x M solves in single precision with `single`.
pub fn kmm_adjoint(l: &Cholesky, abar_at: &DMatrix<f64>, scale: f64, single: bool, par: Parallelism) -> DMatrix<f64> {
    if single {
        kmm_adjoint_in::<f32>(l, abar_at, scale, par)
    } else {
        kmm_adjoint_in::<f64>(l, abar_at, scale, par)
    }
}

fn kmm_adjoint_in<T: Real>(l: &Cholesky, abar_at: &DMatrix<f64>, scale: f64, par: Parallelism) -> DMatrix<f64> {
    let m = l.n();
    let lt = T::borrow(l.l());
    let mut y = Dense::<T>::zeros(m, m);
    for j in 0..m {
        let (src, dst) = (&abar_at.as_slice()[j * m..(j + 1) * m], y.column_mut(j));
        dst[j] = T::of(-0.5 * scale * src[j]);
        for i in j + 1..m {
            dst[i] = T::of(-scale * src[i]);
        }
    }
    linalg::solve_blocks_by(&lt, &mut y, true, par);
    let mut yt = y.transpose(par);
    linalg::solve_blocks_by(&lt, &mut yt, true, par);
    let back = yt.transpose(par);
    let half = T::of(0.5);
    yt.data.iter_mut().zip(&back.data).for_each(|(a, b)| *a = half * (*a + *b));
    T::give(yt)
}

//! Nystrom kernel ridge by preconditioned conjugate gradients (Falkon: Rudi, Carratino,
//! Rosasco 2017; Meanti et al. 2020), for M past what the direct solve can hold.
//!
//! The system is the direct solve's, (K_Mn W K_nM + lambda K_MM) b = K_Mn W y, never
//! formed: each iteration recomputes K_nM by blocks of rows and multiplies by it twice,
//! O(n M d) time and O(M^2 + M x block) memory. The preconditioner
//! (`linalg::TwoFactors`) is built from K_MM alone and makes the iteration count depend
//! little on n or on lambda. With t outputs every block pass serves all t right-hand
//! sides; each output runs its own CG recurrence and stops when its preconditioned
//! residual is at most `tol` times its right-hand side's.
//!
//! The blocks come from `kernel::CrossBlocks`: the distances by a matrix product, the
//! map and the first product (K_MB' p) fused in one pass, the second (K_MB u) four
//! columns at a time. `float32` computes the block's values in single precision (twice
//! the lanes of the map); the sums of both products, the CG vectors and the
//! preconditioner stay in double (see `kernel/blocks.rs` for why: single sums cost the
//! fit two orders of accuracy and little time). Each thread takes one contiguous range
//! of blocks and the partial sums are added in range order, so a fit is reproducible
//! for a given thread count.

use crate::estimator::{FitContext, FitError};
use crate::kernel::{BlockScratch, CrossBlocks, Element, Kernel, Points};
use crate::linalg::{Cholesky, Parallelism, TwoFactors};
use nalgebra::DMatrix;
use rayon::prelude::*;

/// Bytes of kernel values a block holds: 4 MiB, past the per-core L2 (1 MiB here) but
/// well inside the shared L3, so that the faer product that makes each block packs Z
/// once per many rows. Per iteration at n = 100,000, M = 10,000 (benches/falkon.rs):
/// float64 816 ms at 1 MiB, 735 at 4, 813 at 16; float32 433 ms at 0.5 MiB, 398 at 1,
/// 379 at 4, 414 at 8.
const BLOCK_BYTES: usize = 4 << 20;

/// Rows per block for M inducing points and values of `bytes` bytes.
pub(crate) fn block_rows(m: usize, bytes: usize) -> usize {
    (BLOCK_BYTES / (m.max(1) * bytes)).clamp(8, 1024)
}

/// K_MM's jitter floor in single precision, times its mean diagonal (see `ridge_weights`).
pub const SINGLE_JITTER: f64 = 1e-6;

/// The CG knobs a fit was given (checked).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CgOptions {
    pub max_iter: u32,
    pub tol: f64,
    pub single: bool,
}

/// What a CG fit returns: b (M x t column-major) and how the iteration ended.
#[derive(Debug, Clone)]
pub(crate) struct CgOutcome {
    pub weights: Vec<f64>,
    pub jitter: f64,
    pub iterations: u64,
    pub converged: bool,
    /// The largest final relative preconditioned residual over outputs.
    pub residual: f64,
}

/// The kernel passes over the training rows: K_Mn W u for row-wise vectors u, computed
/// block by block in precision T.
struct Pass<'a, T> {
    blocks: CrossBlocks<'a, T>,
    x: &'a Points,
    w: Option<&'a [f64]>,
    rows: usize,
}

/// Per-thread buffers of a pass.
struct Part<T> {
    acc: DMatrix<f64>,
    k: Vec<T>,
    u: Vec<f64>,
    scratch: BlockScratch<T>,
}

impl<'a, T: Element> Pass<'a, T> {
    fn new(kernel: &'a Kernel, z: &'a Points, x: &'a Points, w: Option<&'a [f64]>) -> Self {
        Pass { blocks: CrossBlocks::new(kernel, z), x, w, rows: block_rows(z.n(), std::mem::size_of::<T>()) }
    }

    /// K_Mn W K_nM p (p M x t), or with `p` None K_Mn W y.
    fn run(&self, p: Option<&DMatrix<f64>>, y: &DMatrix<f64>, ctx: &FitContext) -> Result<DMatrix<f64>, FitError> {
        let (m, n, t) = (self.blocks.m(), self.x.n(), y.ncols());
        let blocks = n.div_ceil(self.rows);
        let parts = if ctx.par.is_parallel() { rayon::current_num_threads().clamp(1, blocks.max(1)) } else { 1 };
        let run = |part: usize| -> Part<T> {
            let mut acc =
                Part { acc: DMatrix::zeros(m, t), k: Vec::new(), u: Vec::new(), scratch: BlockScratch::default() };
            for b in blocks * part / parts..blocks * (part + 1) / parts {
                if ctx.cancel.is_cancelled() {
                    break;
                }
                let start = b * self.rows;
                let len = self.rows.min(n - start);
                self.block(&mut acc, start, len, p, y);
            }
            acc
        };
        let out: Vec<Part<T>> = if parts > 1 { (0..parts).into_par_iter().map(run).collect() } else { vec![run(0)] };
        ctx.cancel.check()?;
        let mut out = out.into_iter();
        let mut total = out.next().expect("one part at least").acc;
        for part in out {
            total += part.acc;
        }
        Ok(total)
    }

    /// acc += K_MB W_B u_B for rows start..start + len: u_B = K_MB' p (summed as the
    /// block is made), or y's rows.
    fn block(&self, acc: &mut Part<T>, start: usize, len: usize, p: Option<&DMatrix<f64>>, y: &DMatrix<f64>) {
        let t = y.ncols();
        let q = self.x.slice(start, len);
        acc.u.clear();
        acc.u.resize(len * t, 0.0);
        self.blocks.block_dot(&q, p.map(|p| p.as_slice()), &mut acc.k, &mut acc.u, &mut acc.scratch);
        for j in 0..t {
            for i in 0..len {
                let u = if p.is_some() { acc.u[j * len + i] } else { y[(start + i, j)] };
                acc.u[j * len + i] = u * self.w.map_or(1.0, |w| w[start + i]);
            }
        }
        add_block_times(&mut acc.acc, &acc.k, &acc.u, len);
        crate::linalg::clear_upper_vector_state();
    }
}

/// K_Mn W K_nM p, one iteration's kernel work, on its own: for benches and tests of the
/// block passes (`benches/falkon.rs` times it against the machine's GEMM and exp rates).
pub fn kernel_operator(
    kernel: &Kernel,
    z: &Points,
    x: &Points,
    p: &DMatrix<f64>,
    single: bool,
    ctx: &FitContext,
) -> Result<DMatrix<f64>, FitError> {
    let y = DMatrix::zeros(x.n(), p.ncols());
    match single {
        true => Pass::<f32>::new(kernel, z, x, None).run(Some(p), &y, ctx),
        false => Pass::<f64>::new(kernel, z, x, None).run(Some(p), &y, ctx),
    }
}

/// The training problem of a CG fit: rows, targets (n x t), sample weights (None: all
/// 1), and which training rows the inducing points are, when they are rows.
pub(crate) struct Problem<'a> {
    pub x: &'a Points,
    pub y: &'a DMatrix<f64>,
    pub w: Option<&'a [f64]>,
    pub z_rows: Option<&'a [u64]>,
}

/// acc (M x t) += K u for K (M x b column-major) and u (b x t): the products in double,
/// four columns of K at a time so that acc is read and written once per four.
fn add_block_times<T: Element>(acc: &mut DMatrix<f64>, k: &[T], u: &[f64], b: usize) {
    let (m, t) = acc.shape();
    for o in 0..t {
        let uo = &u[o * b..(o + 1) * b];
        let out = &mut acc.as_mut_slice()[o * m..(o + 1) * m];
        let mut j = 0;
        while j + 4 <= b {
            let (c0, c1, c2, c3) = (uo[j], uo[j + 1], uo[j + 2], uo[j + 3]);
            let cols = &k[j * m..(j + 4) * m];
            let (k0, rest) = cols.split_at(m);
            let (k1, rest) = rest.split_at(m);
            let (k2, k3) = rest.split_at(m);
            for ((((a, x0), x1), x2), x3) in out.iter_mut().zip(k0).zip(k1).zip(k2).zip(k3) {
                *a += c0 * x0.wide() + c1 * x1.wide() + c2 * x2.wide() + c3 * x3.wide();
            }
            j += 4;
        }
        for jj in j..b {
            let c = uo[jj];
            for (a, x) in out.iter_mut().zip(&k[jj * m..(jj + 1) * m]) {
                *a += c * x.wide();
            }
        }
    }
}

/// The Nystrom kernel ridge weights b by preconditioned CG for inducing points `z`.
pub(crate) fn ridge_weights(
    kernel: &Kernel,
    lambda: f64,
    z: &Points,
    data: Problem<'_>,
    opts: CgOptions,
    ctx: &FitContext,
) -> Result<CgOutcome, FitError> {
    let Problem { x, y, w, z_rows } = data;
    let m = z.n();
    ctx.progress.phase("preconditioner");
    let stop = || ctx.cancel.is_cancelled();
    // In single precision the blocks' rounding (1e-7 of the kernel's scale) has parts
    // along K_MM's smallest eigenvectors that the preconditioner, T^-1, would amplify
    // without bound: CG then stalls (a 2-D fit with cond K_MM ~ 1e10 stood at a residual
    // of 1e-2 after 100 iterations where float64 converged in 39). As Falkon does, K_MM
    // takes a floor of SINGLE_JITTER times its mean diagonal, which the single-precision
    // values cannot resolve anyway; the system solved is then K_MM + jitter I's.
    let floor = std::cell::Cell::new(0.0);
    let build = || {
        let mut k = kernel.gram_lower(z, ctx.par);
        if opts.single {
            let f = SINGLE_JITTER * (k.diagonal().sum() / m.max(1) as f64).max(0.0);
            (0..m).for_each(|i| k[(i, i)] += f);
            floor.set(f);
        }
        k
    };
    let kmm = Cholesky::factor_with_jitter_until(build, ctx.par, &stop)?;
    let jitter = kmm.jitter() + floor.get();
    // K_Mn W K_nM ~ c K_MM V K_MM for inducing points that sample the rows: V their own
    // weights when they are weighted rows, else c the mean weight.
    let z_weights: Option<Vec<f64>> = match (w, z_rows) {
        (Some(w), Some(rows)) => Some(rows.iter().map(|&i| w[i as usize]).collect()),
        _ => None,
    };
    let total_weight = match (&z_weights, w) {
        (None, Some(w)) => w.iter().sum(),
        _ => x.n() as f64,
    };
    let c = (total_weight / m as f64).max(f64::MIN_POSITIVE);
    let factors = TwoFactors::new(kmm, lambda / c, z_weights.as_deref(), ctx.par, &stop)?;
    let out = match opts.single {
        true => solve(&Pass::<f32>::new(kernel, z, x, w), &factors, lambda, c, y, opts, ctx),
        false => solve(&Pass::<f64>::new(kernel, z, x, w), &factors, lambda, c, y, opts, ctx),
    }?;
    Ok(CgOutcome { jitter, ..out })
}

/// Preconditioned CG on B'H B beta = B'(K_Mn W y), one recurrence per output.
fn solve<T: Element>(
    pass: &Pass<'_, T>,
    factors: &TwoFactors,
    lambda: f64,
    c: f64,
    y: &DMatrix<f64>,
    opts: CgOptions,
    ctx: &FitContext,
) -> Result<CgOutcome, FitError> {
    let (m, t) = (factors.m(), y.ncols());
    ctx.progress.phase("solve");
    let seq = Parallelism::Sequential;
    let root_c = c.sqrt();
    // r = B'(K_Mn W y), B = T^-1 A^-1 / sqrt(c).
    let mut r = pass.run(None, y, ctx)?;
    factors.solve_tt(&mut r, seq);
    factors.solve_at(&mut r, seq);
    r /= root_c;
    let rhs_norms: Vec<f64> = r.column_iter().map(|col| col.norm()).collect();
    let mut active: Vec<bool> = rhs_norms.iter().map(|v| *v > 0.0).collect();
    let mut residual: Vec<f64> = active.iter().map(|a| if *a { 1.0 } else { 0.0 }).collect();
    let mut beta = DMatrix::<f64>::zeros(m, t);
    let mut p = r.clone();
    let mut rs: Vec<f64> = r.column_iter().map(|col| col.norm_squared()).collect();
    let mut iterations = 0u64;
    while iterations < opts.max_iter as u64 && active.iter().any(|a| *a) {
        // q = B'H B p = (1/sqrt c) A^-T (T^-T K_Mn W K_nM x + lambda x1), x1 = A^-1 p / sqrt c,
        // x = T^-1 x1: B' lambda K_MM B = (lambda / c) A^-T A^-1.
        let mut x1 = p.clone();
        factors.solve_a(&mut x1, seq);
        x1 /= root_c;
        let mut xv = x1.clone();
        factors.solve_t(&mut xv, seq);
        let mut q = pass.run(Some(&xv), y, ctx)?;
        factors.solve_tt(&mut q, seq);
        q += &x1 * lambda;
        factors.solve_at(&mut q, seq);
        q /= root_c;
        iterations += 1;
        for j in 0..t {
            if !active[j] {
                continue;
            }
            let pq = p.column(j).dot(&q.column(j));
            if pq.is_nan() || pq <= 0.0 {
                // The operator is positive definite; a non-positive curvature is
                // round-off at the solution's precision: nothing more to gain.
                active[j] = false;
                continue;
            }
            let alpha = rs[j] / pq;
            beta.column_mut(j).axpy(alpha, &p.column(j), 1.0);
            r.column_mut(j).axpy(-alpha, &q.column(j), 1.0);
            let rs_new = r.column(j).norm_squared();
            residual[j] = rs_new.sqrt() / rhs_norms[j];
            if residual[j] <= opts.tol {
                active[j] = false;
            }
            let ratio = rs_new / rs[j];
            rs[j] = rs_new;
            let rj = r.column(j).into_owned();
            let mut pj = p.column_mut(j);
            pj *= ratio;
            pj += rj;
        }
        for (j, a) in active.iter().enumerate() {
            if !a {
                p.column_mut(j).fill(0.0);
            }
        }
        let worst = residual.iter().cloned().fold(0.0, f64::max);
        ctx.progress.step(Some(worst));
    }
    // b = T^-1 A^-1 beta / sqrt(c).
    factors.solve_a(&mut beta, seq);
    factors.solve_t(&mut beta, seq);
    beta /= root_c;
    let worst = residual.iter().cloned().fold(0.0, f64::max);
    Ok(CgOutcome {
        weights: beta.as_slice().to_vec(),
        jitter: 0.0,
        iterations,
        converged: worst <= opts.tol,
        residual: worst,
    })
}

/// Bytes a CG fit holds at its peak beyond the data: the preconditioner's buffer (K_MM
/// is factorised in it), each thread's block and its products, and the CG vectors.
pub(crate) fn memory_estimate(m: usize, t: usize, single: bool) -> usize {
    let threads = rayon::current_num_threads().max(1);
    let bytes = if single { 4 } else { 8 };
    let rows = block_rows(m, bytes);
    let block = threads * (m * rows * bytes + (m + rows) * t * 16);
    (m * m + m) * 8 + block + 8 * m * t * 8
}

/// How a nystrom kernel_ridge solves its system (`solver`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Solver {
    /// cg when M > [`CG_MIN_M`], else direct; resolved before the fit.
    Auto,
    Direct,
    Cg,
}

/// `solver: auto` takes cg above this M: the direct solve's O(n M^2) product has by
/// then passed what a few tens of O(n M d) iterations cost.
pub const CG_MIN_M: usize = 4096;

/// Checked `solver`, `max_iter`, `tol` and `precision` of kernel_ridge, each None when
/// not given (the defaults: max_iter 100, tol 1e-8, float64).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SolverParams {
    pub solver: Solver,
    pub solver_given: bool,
    pub max_iter: Option<u64>,
    pub tol: Option<f64>,
    /// Some(true): float32.
    pub single: Option<bool>,
}

impl Default for SolverParams {
    fn default() -> Self {
        SolverParams { solver: Solver::Auto, solver_given: false, max_iter: None, tol: None, single: None }
    }
}

impl SolverParams {
    pub fn read(obj: &mut crate::spec::ObjectReader<'_>) -> Result<SolverParams, crate::spec::FieldError> {
        use crate::spec::FieldError;
        let solver = match obj.str("solver")? {
            None => None,
            Some("auto") => Some(Solver::Auto),
            Some("direct") => Some(Solver::Direct),
            Some("cg") => Some(Solver::Cg),
            Some(other) => {
                return Err(FieldError::invalid(
                    obj.pointer("solver"),
                    format!("unknown solver `{other}`; expected auto, direct or cg"),
                ))
            }
        };
        let max_iter = obj.u64("max_iter")?;
        if max_iter.is_some_and(|v| !(1..=10_000).contains(&v)) {
            return Err(FieldError::invalid(obj.pointer("max_iter"), "must be in 1..=10000"));
        }
        let tol = obj.f64("tol")?;
        if tol.is_some_and(|v| v <= 0.0) {
            return Err(FieldError::invalid(obj.pointer("tol"), "must be positive"));
        }
        let single = match obj.str("precision")? {
            None => None,
            Some("float64") => Some(false),
            Some("float32") => Some(true),
            Some(other) => {
                return Err(FieldError::invalid(
                    obj.pointer("precision"),
                    format!("unknown precision `{other}`; expected float64 or float32"),
                ))
            }
        };
        Ok(SolverParams {
            solver: solver.unwrap_or(Solver::Auto),
            solver_given: solver.is_some(),
            max_iter,
            tol,
            single,
        })
    }

    /// The given params' names, in the contract's order.
    fn given(&self) -> impl Iterator<Item = &'static str> + '_ {
        [
            ("solver", self.solver_given),
            ("max_iter", self.max_iter.is_some()),
            ("tol", self.tol.is_some()),
            ("precision", self.single.is_some()),
        ]
        .into_iter()
        .filter(|(_, given)| *given)
        .map(|(name, _)| name)
    }

    /// Settles the params once the approximation is known: an exact fit takes none of
    /// them (422 at the first given), `precision` needs cg when `solver` is explicitly
    /// direct, and auto becomes cg or direct by M.
    pub fn settle(&mut self, nystrom: bool, m: usize) -> Result<(), crate::spec::FieldError> {
        use crate::spec::FieldError;
        if !nystrom {
            if let Some(name) = self.given().next() {
                return Err(FieldError::invalid(
                    format!("/params/{name}"),
                    format!("`{name}` belongs to the nystrom kernel_ridge solve; this fit is exact (set approximation to nystrom, or leave {name} out)"),
                ));
            }
            return Ok(());
        }
        if self.solver == Solver::Direct && self.solver_given && self.single.is_some() {
            return Err(FieldError::invalid(
                "/params/precision",
                "precision applies to solver cg only; the direct solve is always in double precision",
            ));
        }
        self.solver = self.resolved(m);
        Ok(())
    }

    /// cg or direct for M inducing points.
    pub fn resolved(&self, m: usize) -> Solver {
        match self.solver {
            Solver::Auto if m > CG_MIN_M => Solver::Cg,
            Solver::Auto => Solver::Direct,
            other => other,
        }
    }

    pub fn options(&self) -> CgOptions {
        CgOptions {
            max_iter: self.max_iter.unwrap_or(100) as u32,
            tol: self.tol.unwrap_or(1e-8),
            single: self.single.unwrap_or(false),
        }
    }

    /// Adds the params' JSON form to a nystrom fit's params (nothing for exact fits).
    pub fn write_json(&self, out: &mut serde_json::Map<String, serde_json::Value>) {
        use serde_json::json;
        let name = match self.solver {
            Solver::Auto => "auto",
            Solver::Direct => "direct",
            Solver::Cg => "cg",
        };
        out.insert("solver".into(), json!(name));
        if self.solver != Solver::Direct {
            let o = self.options();
            out.insert("max_iter".into(), json!(o.max_iter));
            out.insert("tol".into(), json!(o.tol));
            out.insert("precision".into(), json!(if o.single { "float32" } else { "float64" }));
        }
    }
}

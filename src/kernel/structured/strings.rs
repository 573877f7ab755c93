//! The string kernels: spectrum (k-mer counts, Leslie et al. 2002) and subsequence
//! (gapped subsequences with decay, Lodhi et al. 2002).
//!
//! Each prepares its rows once per build (k-mer count vectors, or code-point arrays with
//! their self-kernels for normalising) and then computes entries pair by pair or, for
//! the spectrum, through the sparse inverted-index product.

use super::sparse::{self, Interner, SparseRow};
use crate::linalg::Parallelism;
use nalgebra::DMatrix;
use rayon::prelude::*;

/// k-mer count vectors of `x`'s rows then `z`'s, over one vocabulary, and its size.
pub(super) fn spectrum_profiles<'a>(
    k: usize,
    x: &'a [Box<[char]>],
    z: Option<&'a [Box<[char]>]>,
) -> (Vec<SparseRow>, Option<Vec<SparseRow>>, usize) {
    let mut interner: Interner<&'a [char]> = Interner::new();
    let profile = |s: &'a [char], interner: &mut Interner<&'a [char]>| {
        sparse::counts(if s.len() < k { Vec::new() } else { s.windows(k).map(|w| interner.id(w)).collect() })
    };
    let xp: Vec<SparseRow> = x.iter().map(|s| profile(s, &mut interner)).collect();
    let vocab = interner.len();
    let zp = z.map(|z| z.iter().map(|s| profile(s, &mut interner)).collect());
    (xp, zp, vocab)
}

/// K(X, Z) of the spectrum kernel (Z None: K(X, X)).
pub(super) fn spectrum(
    k: usize,
    normalize: bool,
    x: &[Box<[char]>],
    z: Option<&[Box<[char]>]>,
    par: Parallelism,
) -> DMatrix<f64> {
    let (xp, zp, vocab) = spectrum_profiles(k, x, z);
    let mut out = sparse::products(&xp, zp.as_deref(), vocab, par);
    if normalize {
        let xd: Vec<f64> = xp.iter().map(|r| sparse::self_dot(r)).collect();
        let zd: Vec<f64> = zp.as_ref().map_or_else(|| xd.clone(), |z| z.iter().map(|r| sparse::self_dot(r)).collect());
        normalise(&mut out, &xd, &zd);
    }
    out
}

/// k(x, z) / sqrt(k(x, x) k(z, z)), 0 where either self-kernel is 0.
pub(super) fn normalise(m: &mut DMatrix<f64>, xd: &[f64], zd: &[f64]) {
    for (j, col) in m.column_iter_mut().enumerate() {
        for (i, v) in col.into_iter().enumerate() {
            *v = normalised(*v, xd[i], zd[j]);
        }
    }
}

pub(super) fn normalised(v: f64, a: f64, b: f64) -> f64 {
    if a == 0.0 || b == 0.0 {
        0.0
    } else {
        v / (a * b).sqrt()
    }
}

/// Lodhi's kernel between two strings, by the O(p |s| |t|) recursion:
/// K''_l(i, j) = lambda K''_l(i, j - 1) + [s_i = t_j] lambda^2 K'_{l-1}(i - 1, j - 1),
/// K'_l(i, j) = lambda K'_l(i - 1, j) + K''_l(i, j), K'_0 = 1, and
/// K_p = sum over s_i = t_j of lambda^2 K'_{p-1}(i - 1, j - 1). `scratch` holds the two
/// (|s| + 1) x (|t| + 1) tables between calls.
pub(super) fn subsequence_pair(s: &[char], t: &[char], p: usize, lambda: f64, scratch: &mut Vec<f64>) -> f64 {
    let (ls, lt) = (s.len(), t.len());
    if ls < p || lt < p {
        return 0.0;
    }
    let w = lt + 1;
    let cells = (ls + 1) * w;
    scratch.clear();
    scratch.resize(2 * cells, 0.0);
    let (mut prev, mut cur) = scratch.split_at_mut(cells);
    prev.fill(1.0); // K'_0
    let l2 = lambda * lambda;
    for l in 1..p {
        // K'_l(i, j) = 0 where i < l or j < l.
        cur.fill(0.0);
        for i in l..=ls {
            let si = s[i - 1];
            let mut kpp = 0.0;
            for j in l..=lt {
                kpp = lambda * kpp + if si == t[j - 1] { l2 * prev[(i - 1) * w + j - 1] } else { 0.0 };
                cur[i * w + j] = lambda * cur[(i - 1) * w + j] + kpp;
            }
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    let mut total = 0.0;
    for i in p..=ls {
        let si = s[i - 1];
        for j in p..=lt {
            if si == t[j - 1] {
                total += prev[(i - 1) * w + j - 1];
            }
        }
    }
    l2 * total
}

/// K(X, Z) of the subsequence kernel (Z None: K(X, X), lower triangle computed).
pub(super) fn subsequence(
    p: usize,
    lambda: f64,
    normalize: bool,
    x: &[Box<[char]>],
    z: Option<&[Box<[char]>]>,
    par: Parallelism,
) -> DMatrix<f64> {
    let symmetric = z.is_none();
    let zs = z.unwrap_or(x);
    let n = x.len();
    let mut out = crate::linalg::zeros(n, zs.len());
    if n == 0 || zs.is_empty() {
        return out;
    }
    let fill = |scratch: &mut Vec<f64>, (j, col): (usize, &mut [f64])| {
        let from = if symmetric { j } else { 0 };
        for (i, v) in col.iter_mut().enumerate().skip(from) {
            *v = subsequence_pair(&x[i], &zs[j], p, lambda, scratch);
        }
    };
    if par.is_parallel() {
        out.as_mut_slice().par_chunks_mut(n).enumerate().for_each_init(Vec::new, fill);
    } else {
        let mut scratch = Vec::new();
        out.as_mut_slice().chunks_mut(n).enumerate().for_each(|c| fill(&mut scratch, c));
    }
    if symmetric {
        super::super::gram::mirror_lower(&mut out, par);
    }
    if normalize {
        let xd = subsequence_self(p, lambda, x, par);
        let zd = if symmetric { xd.clone() } else { subsequence_self(p, lambda, zs, par) };
        normalise(&mut out, &xd, &zd);
        if symmetric {
            // Exactly 1 (or 0), whatever the rounding of the division.
            for i in 0..n {
                out[(i, i)] = if xd[i] == 0.0 { 0.0 } else { 1.0 };
            }
        }
    }
    out
}

/// k(x, x) for every row.
pub(super) fn subsequence_self(p: usize, lambda: f64, x: &[Box<[char]>], par: Parallelism) -> Vec<f64> {
    let one = |scratch: &mut Vec<f64>, s: &[char]| subsequence_pair(s, s, p, lambda, scratch);
    if par.is_parallel() {
        x.par_iter().map_init(Vec::new, |scratch, s| one(scratch, s)).collect()
    } else {
        let mut scratch = Vec::new();
        x.iter().map(|s| one(&mut scratch, s)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chars(s: &str) -> Box<[char]> {
        s.chars().collect()
    }

    /// The definition: every pair of index tuples spelling the same subsequence.
    fn naive(s: &[char], t: &[char], p: usize, lambda: f64) -> f64 {
        fn tuples(len: usize, p: usize) -> Vec<Vec<usize>> {
            if p == 0 {
                return vec![vec![]];
            }
            let mut out = Vec::new();
            for rest in tuples(len, p - 1) {
                let start = rest.last().map_or(0, |&l| l + 1);
                for i in start..len {
                    let mut r = rest.clone();
                    r.push(i);
                    out.push(r);
                }
            }
            out
        }
        let mut total = 0.0;
        for a in tuples(s.len(), p) {
            for b in tuples(t.len(), p) {
                if a.iter().zip(&b).all(|(&i, &j)| s[i] == t[j]) {
                    let span = (a[p - 1] - a[0] + 1) + (b[p - 1] - b[0] + 1);
                    total += lambda.powi(span as i32);
                }
            }
        }
        total
    }

    #[test]
    fn recursion_matches_the_definition() {
        let words = ["", "a", "cat", "car", "abab", "gatgca", "ménage", "baacab"];
        let mut scratch = Vec::new();
        for p in 1..=3 {
            for lambda in [0.5, 0.9, 1.0] {
                for s in words {
                    for t in words {
                        let (s, t) = (chars(s), chars(t));
                        let got = subsequence_pair(&s, &t, p, lambda, &mut scratch);
                        let want = naive(&s, &t, p, lambda);
                        assert!((got - want).abs() <= 1e-12 * want.max(1.0), "{s:?} {t:?} p={p}: {got} vs {want}");
                    }
                }
            }
        }
    }

    /// Lodhi et al. 2002, section 2: with subsequences of length 2, K(cat, car) = lambda^4
    /// and K(cat, cat) = 2 lambda^4 + lambda^6, so normalised 1 / (2 + lambda^2).
    #[test]
    fn lodhi_worked_example() {
        let lambda: f64 = 0.5;
        let words: Vec<Box<[char]>> = ["cat", "car", "bat", "bar"].iter().map(|w| chars(w)).collect();
        let k = subsequence(2, lambda, false, &words, None, Parallelism::Sequential);
        assert!((k[(0, 1)] - lambda.powi(4)).abs() < 1e-15);
        assert!((k[(0, 0)] - (2.0 * lambda.powi(4) + lambda.powi(6))).abs() < 1e-15);
        assert!((k[(0, 2)] - lambda.powi(4)).abs() < 1e-15, "cat and bat share a-t");
        assert_eq!(k[(0, 3)], 0.0, "cat and bar share no subsequence of length 2");
        let kn = subsequence(2, lambda, true, &words, None, Parallelism::Parallel);
        assert!((kn[(0, 1)] - 1.0 / (2.0 + lambda * lambda)).abs() < 1e-15);
        assert_eq!(kn[(2, 2)], 1.0);
    }

    #[test]
    fn spectrum_counts_shared_kmers_and_gives_zero_without_any() {
        let rows = [chars("abab"), chars("bab"), chars("a"), chars("")];
        let k = spectrum(2, false, &rows, None, Parallelism::Sequential);
        // abab: ab x2, ba x1; bab: ba, ab.
        assert_eq!((k[(0, 0)], k[(0, 1)], k[(1, 1)]), (5.0, 3.0, 2.0));
        let kn = spectrum(2, true, &rows, None, Parallelism::Parallel);
        assert!((kn[(0, 1)] - 3.0 / (5.0f64 * 2.0).sqrt()).abs() < 1e-15);
        assert_eq!((kn[(2, 2)], kn[(2, 0)], kn[(3, 3)]), (0.0, 0.0, 0.0));
        let q = [chars("xyab")];
        let c = spectrum(2, false, &rows, Some(&q), Parallelism::Sequential);
        assert_eq!((c[(0, 0)], c[(1, 0)], c[(2, 0)]), (2.0, 1.0, 0.0));
    }
}

//! The string kernels: spectrum (k-mer counts, Leslie et al. 2002) and subsequence
//! (gapped subsequences with decay, Lodhi et al. 2002).
//!
//! Each prepares its rows once per build (k-mer count vectors, or code-point arrays with
//! their self-kernels for normalising) and then computes entries pair by pair or, for
//! the spectrum, through the sparse inverted-index product.

use super::sparse::{self, Index, SparseRow, Weights};
use crate::kernel::points::PrepKey;
use crate::kernel::Points;
use crate::linalg::Parallelism;
use nalgebra::DMatrix;
use rayon::prelude::*;
use std::sync::Arc;

/// The length-k substrings of `s` (none when it is shorter).
pub(super) fn kmers(s: &[char], k: usize) -> impl Iterator<Item = &[char]> {
    (s.len() >= k).then(|| s.windows(k)).into_iter().flatten()
}

/// The k-mer index of a point set's strings, built once per point set and k.
pub(super) fn spectrum_index(k: usize, x: &Points) -> Arc<Index<Vec<char>>> {
    x.prepared(PrepKey::Spectrum(k), || {
        let index = Index::new(texts(x).iter().map(|s| kmers(s, k)), Weights::Counts);
        let bytes = index.memory_bytes();
        (index, bytes)
    })
}

/// K(X, Z) of the spectrum kernel (Z None: K(X, X)).
pub(super) fn spectrum(k: usize, normalize: bool, x: &Points, z: Option<&Points>, par: Parallelism) -> DMatrix<f64> {
    let index = spectrum_index(k, x);
    let zp: Option<Vec<SparseRow>> = z.map(|z| {
        let mut fresh = sparse::unseen();
        texts(z).iter().map(|s| index.query(kmers(s, k), &mut fresh)).collect()
    });
    if !normalize {
        return index.products(zp.as_deref(), par, &|_, _, v| v);
    }
    // 1 / sqrt(k(x, x)), 0 for a string without k-mers: one multiply per entry, not a
    // square root; the diagonal is set to exactly 1.
    let inv = |v: f64| if v == 0.0 { 0.0 } else { 1.0 / v.sqrt() };
    let xi: Vec<f64> = index.selfs.iter().map(|&v| inv(v)).collect();
    let zi = zp.as_ref().map_or_else(|| xi.clone(), |z| z.iter().map(|r| inv(sparse::self_dot(r))).collect());
    let symmetric = zp.is_none();
    let finish = |i: usize, j: usize, v: f64| {
        if symmetric && i == j {
            if xi[i] == 0.0 {
                0.0
            } else {
                1.0
            }
        } else {
            v * xi[i] * zi[j]
        }
    };
    index.products(zp.as_deref(), par, &finish)
}

pub(super) fn texts(p: &Points) -> &[Box<[char]>] {
    p.texts().expect("string kernels are checked to get strings")
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
/// K_p = sum over s_i = t_j of lambda^2 K'_{p-1}(i - 1, j - 1).
///
/// Row i of every level needs only row i - 1 of its own level and of the level below, so
/// the tables are kept one row per level (`scratch`, (p - 1) (|t| + 1) values, in cache
/// whatever the strings' lengths), updated in place from the top level down so that the
/// level below still holds row i - 1 when it is read. The boundaries (K'_l = 0 where
/// i < l or j < l) follow from the zero first row.
pub(super) fn subsequence_pair(s: &[char], t: &[char], p: usize, lambda: f64, scratch: &mut Vec<f64>) -> f64 {
    let (ls, lt) = (s.len(), t.len());
    if ls < p || lt < p {
        return 0.0;
    }
    let l2 = lambda * lambda;
    let w = lt + 1;
    scratch.clear();
    scratch.resize((p - 1) * w, 0.0);
    // rows[(l - 1) w + j] = K'_l(i, j) for the current i, levels 1 to p - 1.
    let rows = &mut scratch[..];
    let mut total = 0.0;
    for &si in s {
        // The last level reads K'_{p-1}(i - 1, j - 1): before this row updates it.
        if p == 1 {
            total += t.iter().filter(|&&c| c == si).count() as f64;
        } else {
            let top = &rows[(p - 2) * w..(p - 1) * w];
            for (j, &tj) in t.iter().enumerate() {
                if tj == si {
                    total += top[j];
                }
            }
        }
        for l in (1..p).rev() {
            let (below, here) = rows.split_at_mut((l - 1) * w);
            let here = &mut here[..w];
            let below = if l == 1 { None } else { Some(&below[(l - 2) * w..(l - 1) * w]) };
            let mut kpp = 0.0;
            for (j, &tj) in t.iter().enumerate() {
                let matched = match below {
                    _ if tj != si => 0.0,
                    None => l2,
                    Some(b) => l2 * b[j],
                };
                kpp = lambda * kpp + matched;
                here[j + 1] = lambda * here[j + 1] + kpp;
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
    xp: &Points,
    zp: Option<&Points>,
    par: Parallelism,
) -> DMatrix<f64> {
    let symmetric = zp.is_none();
    let x = texts(xp);
    let zs = zp.map_or(x, texts);
    let n = x.len();
    let mut out = crate::linalg::zeros(n, zs.len());
    if n == 0 || zs.is_empty() {
        return out;
    }
    // A fit's cancellation is checked between columns: one column of long strings can
    // take seconds.
    let cancel = crate::kernel::cancel::current();
    let fill = |scratch: &mut Vec<f64>, (j, col): (usize, &mut [f64])| {
        if crate::kernel::cancel::is_set(&cancel) {
            return;
        }
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
        crate::linalg::mirror_lower(&mut out, par);
    }
    if normalize {
        let xd = subsequence_selfs(p, lambda, xp, par);
        let zd = if symmetric { xd.clone() } else { Arc::new(subsequence_self(p, lambda, zs, par)) };
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

/// k(x, x) for every row of a point set, computed once per point set and setting.
pub(super) fn subsequence_selfs(p: usize, lambda: f64, x: &Points, par: Parallelism) -> Arc<Vec<f64>> {
    x.prepared(PrepKey::SubsequenceSelf(p, lambda.to_bits()), || {
        let selfs = subsequence_self(p, lambda, texts(x), par);
        let bytes = 8 * selfs.len();
        (selfs, bytes)
    })
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

    /// A fit's cancellation stops a subsequence Gram between columns: with the flag set,
    /// no column of a Gram that would take minutes is computed.
    #[test]
    fn a_cancelled_fit_stops_the_gram_between_columns() {
        use std::sync::atomic::AtomicBool;
        let long: Vec<String> = (0..200).map(|i| "abcdefghij".repeat(200) + &i.to_string()).collect();
        let x = Points::from_texts(long);
        let flag = Arc::new(AtomicBool::new(true));
        let g =
            crate::kernel::cancel::with_cancel(flag, || subsequence(5, 0.5, false, &x, None, Parallelism::Sequential));
        assert!(g.iter().all(|&v| v == 0.0), "a column was computed after the cancellation");
        // Not cancelled: the same code computes.
        let small = Points::from_texts(["abcab", "bcabc"]);
        let flag = Arc::new(AtomicBool::new(false));
        let g = crate::kernel::cancel::with_cancel(flag, || {
            subsequence(2, 0.5, false, &small, None, Parallelism::Sequential)
        });
        assert!(g[(1, 0)] > 0.0);
    }

    /// Lodhi et al. 2002, section 2: with subsequences of length 2, K(cat, car) = lambda^4
    /// and K(cat, cat) = 2 lambda^4 + lambda^6, so normalised 1 / (2 + lambda^2).
    #[test]
    fn lodhi_worked_example() {
        let lambda: f64 = 0.5;
        let words = Points::from_texts(["cat", "car", "bat", "bar"]);
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
        let rows = Points::from_texts(["abab", "bab", "a", ""]);
        let k = spectrum(2, false, &rows, None, Parallelism::Sequential);
        // abab: ab x2, ba x1; bab: ba, ab.
        assert_eq!((k[(0, 0)], k[(0, 1)], k[(1, 1)]), (5.0, 3.0, 2.0));
        let kn = spectrum(2, true, &rows, None, Parallelism::Parallel);
        assert!((kn[(0, 1)] - 3.0 / (5.0f64 * 2.0).sqrt()).abs() < 1e-15);
        assert_eq!((kn[(2, 2)], kn[(2, 0)], kn[(3, 3)]), (0.0, 0.0, 0.0));
        let q = Points::from_texts(["xyab"]);
        // The training rows' index was built by the Gram above and is reused (and
        // counted in the points' memory) from here on.
        let before = rows.memory_bytes();
        assert!(before > Points::from_texts(["abab", "bab", "a", ""]).memory_bytes());
        let c = spectrum(2, false, &rows.clone(), Some(&q), Parallelism::Sequential);
        assert_eq!(rows.memory_bytes(), before, "clones share the index");
        assert_eq!((c[(0, 0)], c[(1, 0)], c[(2, 0)]), (2.0, 1.0, 0.0));
    }
}

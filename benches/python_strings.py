"""Times Python string-kernel Gram builds for the string benches; prints `name<TAB>median ms`.

    /tmp/fx/bin/python benches/python_strings.py

The strings come from the same xorshift generator as the Rust bench (strings(n, length,
seed) below), so both sides build the same Gram matrices:

  spectrum k=3, normalised, n=5000 strings of length 200: scikit-learn's CountVectorizer
      (character 3-grams) and a sparse X X', then dense and normalised; and a plain-Python
      reference (a Counter per string, pair products over the smaller Counter).
  subsequence (Lodhi et al. 2002) length 2, decay 0.5, normalised, n=1000 strings of
      length 50, by the O(p |s| |t|) K' / K'' dynamic programme in plain Python.

The plain-Python builds would take many minutes, so they time a slice of rows against all
n columns and extrapolate to the n(n+1)/2 pairs of the symmetric Gram: the extrapolated
figure is the per-string work measured in full (Counters, self-kernels for normalising)
plus the slice's pair time scaled by n(n+1)/2 / (pairs in the slice). The `measured-rows`
lines give what was actually measured (per-string work plus the slice).
"""
import itertools
import math
import time
from collections import Counter

import numpy as np
from sklearn.feature_extraction.text import CountVectorizer
from timing import median_ms


def strings(n, length, seed):
    alphabet = "ACDEFGHIKLMNPQRSTVWY"
    s = (seed * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF | 1
    out = []
    for _ in range(n):
        row = []
        for _ in range(length):
            s ^= (s << 13) & 0xFFFFFFFFFFFFFFFF; s ^= s >> 7; s ^= (s << 17) & 0xFFFFFFFFFFFFFFFF
            row.append(alphabet[(s >> 11) % 20])
        out.append("".join(row))
    return out


def seconds(f):
    s = time.perf_counter()
    out = f()
    return time.perf_counter() - s, out


# ---------------------------------------------------------------------------------------
# Spectrum.
# ---------------------------------------------------------------------------------------

def spectrum_countvectorizer(xs, k):
    X = CountVectorizer(analyzer="char", ngram_range=(k, k), lowercase=False).fit_transform(xs)
    K = (X @ X.T).toarray()
    d = np.diag(K).astype(float)
    return K / np.sqrt(np.outer(d, d))


def spectrum_counters(xs, k):
    counters = [Counter(x[i:i + k] for i in range(len(x) - k + 1)) for x in xs]
    norms = [math.sqrt(sum(c * c for c in cx.values())) for cx in counters]
    return counters, norms


def spectrum_pair(cx, cz):
    if len(cz) < len(cx):
        cx, cz = cz, cx
    total = 0
    for s, c in cx.items():
        total += c * cz.get(s, 0)
    return total


def spectrum_rows(counters, norms, rows, cols):
    """Normalised K[i][j] for i in rows, j in cols (0 when either string has no k-gram)."""
    out = []
    for i in rows:
        row = []
        for j in cols:
            den = norms[i] * norms[j]
            row.append(spectrum_pair(counters[i], counters[j]) / den if den > 0 else 0.0)
        out.append(row)
    return out


# ---------------------------------------------------------------------------------------
# Subsequence (Lodhi et al. 2002).
# ---------------------------------------------------------------------------------------

def ssk_naive(x, z, n, lam):
    """The definition: decay^(span in x + span in z) over matching index tuples."""
    total = 0.0
    for i in itertools.combinations(range(len(x)), n):
        for j in itertools.combinations(range(len(z)), n):
            if all(x[i[t]] == z[j[t]] for t in range(n)):
                total += lam ** ((i[-1] - i[0] + 1) + (j[-1] - j[0] + 1))
    return total


def ssk(s, t, p, lam):
    """Lodhi et al.'s recursion, O(p |s| |t|). Kp[a][b] holds K'_i(s[:a], t[:b]):
        K'_0 = 1;  K'_i = 0 when min(a, b) < i;
        K''_i(s[:a], t[:b]) = lam K''_i(s[:a], t[:b-1]) + [s[a-1] == t[b-1]] lam^2 K'_{i-1}(s[:a-1], t[:b-1])
        K'_i(s[:a], t[:b]) = lam K'_i(s[:a-1], t[:b]) + K''_i(s[:a], t[:b])
        K_p(s, t) = sum over a, b with s[a-1] == t[b-1] of lam^2 K'_{p-1}(s[:a-1], t[:b-1])."""
    ls, lt = len(s), len(t)
    lam2 = lam * lam
    Kp = [[1.0] * (lt + 1) for _ in range(ls + 1)]
    for i in range(1, p):
        cur = [[0.0] * (lt + 1) for _ in range(ls + 1)]
        for a in range(i, ls + 1):
            x = s[a - 1]
            prev_row, cur_row, above = Kp[a - 1], cur[a], cur[a - 1]
            kpp = 0.0
            for b in range(i, lt + 1):
                kpp = lam * kpp
                if t[b - 1] == x:
                    kpp += lam2 * prev_row[b - 1]
                cur_row[b] = lam * above[b] + kpp
        Kp = cur
    k = 0.0
    for a in range(p, ls + 1):
        x = s[a - 1]
        prev_row = Kp[a - 1]
        for b in range(p, lt + 1):
            if t[b - 1] == x:
                k += lam2 * prev_row[b - 1]
    return k


def ssk_rows(xs, selfk, rows, cols, p, lam):
    out = []
    for i in rows:
        row = []
        for j in cols:
            den = selfk[i] * selfk[j]
            row.append(ssk(xs[i], xs[j], p, lam) / math.sqrt(den) if den > 0 else 0.0)
        out.append(row)
    return out


# The dynamic programme against the definition, and the spectrum rows against CountVectorizer.
check = strings(6, 9, 3) + ["cat", "car", "bat", "bar", "", "A", "AAAA"]
for p in (1, 2, 3):
    for lam in (0.5, 0.9, 1.0):
        for x in check:
            for z in check:
                a, b = ssk(x, z, p, lam), ssk_naive(x, z, p, lam)
                assert abs(a - b) <= 1e-12 * max(1.0, abs(b)), (x, z, p, lam, a, b)
assert ssk("cat", "car", 2, 0.5) == 0.5 ** 4 and ssk("cat", "cat", 2, 0.5) == 2 * 0.5 ** 4 + 0.5 ** 6
check = strings(40, 30, 5)
c, nrm = spectrum_counters(check, 3)
assert np.allclose(spectrum_rows(c, nrm, range(40), range(40)), spectrum_countvectorizer(check, 3), rtol=1e-13)


def extrapolated(name, n, per_string, slice_rows, slice_cols):
    pairs = len(slice_rows) * len(slice_cols)
    t_strings, state = seconds(per_string)
    t_slice, _ = seconds(lambda: slice_fn(state, slice_rows, slice_cols))
    total = t_strings + t_slice * (n * (n + 1) / 2) / pairs
    print(f"{name}\t{total * 1e3}")
    print(f"{name} measured-rows\t{(t_strings + t_slice) * 1e3}", flush=True)


n, length, k = 5000, 200, 3
xs = strings(n, length, 11)
# Two entries for the Rust bench to check that both sides built the same matrix.
print(f"check spectrum sum of the first 8 x 8\t{float(spectrum_countvectorizer(xs[:8], k).sum())!r}")
print(f"spectrum gram n={n} len={length} k={k} countvectorizer\t{median_ms(3, lambda: spectrum_countvectorizer(xs, k))}",
      flush=True)
slice_fn = lambda state, rows, cols: spectrum_rows(*state, rows, cols)  # noqa: E731
extrapolated(f"spectrum gram n={n} len={length} k={k} python", n, lambda: spectrum_counters(xs, k), range(250),
             range(n))

n, length, p, lam = 1000, 50, 2, 0.5
xs = strings(n, length, 13)
selfk = [ssk(x, x, p, lam) for x in xs[:8]]
print(f"check subsequence sum of the first 8 x 8\t{sum(map(sum, ssk_rows(xs, selfk, range(8), range(8), p, lam)))!r}")
slice_fn = lambda selfk, rows, cols: ssk_rows(xs, selfk, rows, cols, p, lam)  # noqa: E731
extrapolated(f"subsequence gram n={n} len={length} p={p} python", n, lambda: [ssk(x, x, p, lam) for x in xs],
             range(10), range(n))

#!/usr/bin/env python3
"""What rank a LOVE-style cache needs for the posterior variance to 1e-3 relative
(issue 55, item 2): a study with numpy, not a benchmark of mercer.

    python3 scripts/study_love_rank.py [--n 4000] [--queries 300]

LOVE (Pleiss et al. 2018) answers k*' (K + s I)^-1 k* from a rank-r cache P, so the
variance is k(x, x) - k*' P k* in O(n r) per row. The best rank-r cache of that form is
built from the r leading eigenpairs of K + s I (what a converged Lanczos run reaches), so
this script uses them, exactly, and reports for r = 50 .. 1600 the largest relative error
of the variance over query rows drawn like the training rows, against the exact variance
from the Cholesky factor, and the residual bound |k* - (K + s I) P k*|^2 / s that a server
could check per row in O(n r) (it holds for any subspace: the error is at most the
residual's norm squared over the smallest eigenvalue of K + s I, which is at least s).

Rows: n standard normal rows in d dimensions, rbf with length scale l, noise s; cases
(d, l, s) = (3, 1, 0.01), (3, 1, 0.1), (8, 2, 0.01), (20, 4, 0.01).
"""
import argparse

import numpy as np


def rbf(a, b, ls):
    d2 = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2 * a @ b.T
    return np.exp(-0.5 * np.maximum(d2, 0) / ls**2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4000)
    ap.add_argument("--queries", type=int, default=300)
    a = ap.parse_args()
    rng = np.random.RandomState(0)
    print("| d, length scale, noise | exact variance range | r = 50 | 100 | 200 | 400 | 800 | 1600 |")
    print("|---|---|---|---|---|---|---|---|")
    for d, ls, noise in [(3, 1.0, 0.01), (3, 1.0, 0.1), (8, 2.0, 0.01), (20, 4.0, 0.01)]:
        x, q = rng.randn(a.n, d), rng.randn(a.queries, d)
        kh = rbf(x, x, ls) + noise * np.eye(a.n)
        w, v = np.linalg.eigh(kh)
        w, v = w[::-1], v[:, ::-1]
        ks = rbf(x, q, ls)
        z = np.linalg.solve(np.linalg.cholesky(kh), ks)
        var = 1.0 - (z * z).sum(0)
        cells = []
        for r in [50, 100, 200, 400, 800, 1600]:
            c = v[:, :r].T @ ks
            approx = 1.0 - (c * c / w[:r, None]).sum(0)
            err = np.max((approx - var) / var)
            res = ks - (kh @ v[:, :r]) @ (c / w[:r, None])
            bound = (res * res).sum(0) / noise
            certified = np.max(bound / np.maximum(approx - bound, 1e-300))
            cells.append(f"{err:.1e} (bound {min(certified, 1e9):.0e})")
        print(f"| {d}, {ls}, {noise} | {var.min():.1e} .. {var.max():.1e} | " + " | ".join(cells) + " |")
    print("cells: the largest relative error of the variance over the query rows (the per-row "
          "residual bound, relative to a variance that bound leaves; 1e+09 = none)")


if __name__ == "__main__":
    main()

"""Times numpy/scipy (OpenBLAS) on the operations of benches/linalg.rs; run by it.

Prints `name<TAB>median ms` lines with names matching the Rust bench's rows.
"""
import numpy as np
from timing import median_ms
import scipy.linalg as sl
from sklearn.metrics.pairwise import rbf_kernel


rng = np.random.RandomState(1)
d = 8
gamma = 1.0 / (2 * 2.0 ** 2)
for n in (1000, 2000, 4000):
    reps = 9 if n <= 2000 else 5
    X = rng.uniform(-1, 1, (n, d))
    Q = rng.uniform(-1, 1, (1000, d))
    print(f"rbf gram n={n} d={d}\t{median_ms(reps, lambda: rbf_kernel(X, gamma=gamma))}")
    K = rbf_kernel(X, gamma=gamma) + 0.01 * np.eye(n)
    print(f"cholesky n={n}\t{median_ms(reps, lambda: sl.cholesky(K, lower=True))}")
    L = sl.cholesky(K, lower=True)
    Ks = rbf_kernel(X, Q, gamma=gamma)
    print(f"L^-1 B n={n}, 1000 rhs\t{median_ms(reps, lambda: sl.solve_triangular(L, Ks, lower=True))}")

"""Times scikit-learn's Gram builds for benches/gram.rs; prints `name<TAB>median ms`."""
import numpy as np
from timing import median_ms
from sklearn.gaussian_process.kernels import Matern
from sklearn.metrics.pairwise import rbf_kernel


d, ls = 16, 3.0
rng = np.random.RandomState(7)
for n in (4000, 8000):
    X = rng.uniform(-1, 1, (n, d))
    reps = 7 if n <= 4000 else 3
    print(f"rbf gram n={n} d={d}\t{median_ms(reps, lambda: rbf_kernel(X, gamma=1 / (2 * ls * ls)))}")
    print(f"matern 1.5 gram n={n} d={d}\t{median_ms(reps, lambda: Matern(length_scale=ls, nu=1.5)(X))}")

"""scikit-learn's side of benches/svm.rs.

    sklearn_svm.py DATA_PATH

Makes the issue's data sets (make_classification, d = 20) and writes them to DATA_PATH
(JSON) for the Rust side, then fits SVC (LIBSVM) on each with the same c, gamma, tol and
cache size and prints `name<TAB>ms<TAB>info` lines.
"""
import json
import sys

import numpy as np
from sklearn.datasets import make_classification
from sklearn.svm import SVC
from timing import median_ms

SIZES = (5000, 10000, 20000)
D = 20
C, TOL, CACHE_MB = 1.0, 1e-3, 100

data = {}
for n in SIZES:
    X, y = make_classification(n_samples=n, n_features=D, n_informative=10, random_state=n)
    gamma = 1.0 / (D * X.var())
    data[str(n)] = {"x": X.tolist(), "y": y.tolist(), "gamma": gamma}
with open(sys.argv[1], "w") as f:
    json.dump({"c": C, "tol": TOL, "cache_mb": CACHE_MB, "sets": data}, f)
sys.stdout.flush()

for n in SIZES:
    X, y, gamma = np.array(data[str(n)]["x"]), np.array(data[str(n)]["y"]), data[str(n)]["gamma"]
    info = {}

    def fit():
        m = SVC(C=C, gamma=gamma, tol=TOL, cache_size=CACHE_MB).fit(X, y)
        info["sv"] = int(m.n_support_.sum())
        info["iter"] = int(m.n_iter_[0])

    ms = median_ms(1 if n >= 20000 else 3, fit)
    print(f"svm fit n={n} d={D}\t{ms}\t{info['sv']} SVs, {info['iter']} iterations", flush=True)

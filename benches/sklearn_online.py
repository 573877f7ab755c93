"""scikit-learn's side of benches/online.rs: reads the data file (the 4010 rows, d = 8),
prints `name<TAB>ms` for the refits a scikit-learn user would run to add rows (it has no
online update): GaussianProcessRegressor(RBF(2), alpha=0.01, optimizer=None) and
KernelRidge(alpha=0.01, rbf with gamma = 1 / (2 * 2^2))."""
import json
import sys

import numpy as np
from timing import median_ms
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF
from sklearn.kernel_ridge import KernelRidge

data = json.load(open(sys.argv[1]))
X, y = np.array(data["x"]), np.array(data["y"])
n = len(y)
gp = GaussianProcessRegressor(kernel=RBF(2.0), alpha=0.01, optimizer=None)
print(f"gp refit n={n}\t{median_ms(3, lambda: gp.fit(X, y))}")
krr = KernelRidge(alpha=0.01, kernel="rbf", gamma=1.0 / 8.0)
print(f"krr refit n={n}\t{median_ms(3, lambda: krr.fit(X, y))}")

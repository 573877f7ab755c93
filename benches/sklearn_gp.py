"""scikit-learn's side of benches/gp.rs: reads the data file, prints `name<TAB>ms<TAB>info`."""
import json
import sys

import numpy as np
from timing import median_ms
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

data = json.load(open(sys.argv[1]))
d = 8
for n in (500, 1000):
    X, y = np.array(data[f"opt{n}"]["x"]), np.array(data[f"opt{n}"]["y"])
    info = {}

    def fit():
        k = ConstantKernel(1.0) * RBF(1.0) + WhiteKernel(0.1, noise_level_bounds=(1e-10, 1e5))
        m = GaussianProcessRegressor(kernel=k, n_restarts_optimizer=2, random_state=0).fit(X, y)
        info["lml"] = m.log_marginal_likelihood_value_

    ms = median_ms(3, fit)
    print(f"optimize 2 restarts n={n} d={d}\t{ms}\tLML {info['lml']:.4f}")

X, y, Q = (np.array(data["fixed4000"][k]) for k in ("x", "y", "query"))
gp = GaussianProcessRegressor(kernel=RBF(2.0), alpha=0.01, optimizer=None)
print(f"fixed fit n=4000 d={d}\t{median_ms(3, lambda: gp.fit(X, y))}")
gp.fit(X, y)
print(f"predict 1000 rows + variance, n=4000\t{median_ms(5, lambda: gp.predict(Q, return_std=True))}")

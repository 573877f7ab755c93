#!/usr/bin/env python3
"""Several outputs over one kernel: an exact Gaussian process fitted on t = 10 outputs
against the same fit on one, in mercer (POST /models with a 2-D y) and in scikit-learn
(GaussianProcessRegressor on a 2-D y), in the same run.

    python3 scripts/bench_multi_output.py --mercer target/release/mercer [--n 4000] [--t 10]
        [--repeat 3] [--optimize] [--json OUT.json]

Data: n rows of d = 5 uniform features in [-2, 2] (seed 0), outputs y_k = sin(x . w_k) +
0.1 noise with w_k ~ N(0, 0.25 I). Model: rbf length scale 2, noise 0.01 (fixed: scikit-
learn's alpha), normalize_y, fixed hyperparameters (scikit-learn: optimizer=None);
--optimize instead runs each one's search over the length scale from there (scikit-learn:
fmin_l_bfgs_b, no restarts; mercer's iterations and evaluations printed). One output is
the same rows with y_0 alone (a 1-D y).

Times: client wall time of the POST (the body encoded before the clock starts) with the
server's training.duration_ms beside it, and scikit-learn's fit; medians over --repeat
runs, each mercer fit on a freshly started server (scripts/bench_server.py, nothing
stored), scikit-learn while no server runs. Printed: each fit, the ratios t outputs / one
output (the issue's target: mercer's under 1.3), and scikit-learn / mercer. Checked: the
t-output models' predictions at 500 held-out rows agree (largest difference over the
largest value).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_python  # noqa: E402

bench_python.ensure("bench_multi_output", ["numpy", "scipy", "sklearn"])

import argparse, json, time  # noqa: E402,E401
import numpy as np  # noqa: E402
from bench_server import Server, begin, median, say, secs  # noqa: E402

D, LENGTH_SCALE, NOISE, QUERY_ROWS = 5, 2.0, 0.01, 500


def data(n, t):
    rng = np.random.RandomState(0)
    X = rng.uniform(-2, 2, (n + QUERY_ROWS, D))
    W = 0.5 * rng.randn(D, t)
    Y = np.sin(X @ W) + 0.1 * rng.randn(n + QUERY_ROWS, t)
    return X[:n], Y[:n], X[n:]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mercer", required=True, help="the mercer binary")
    p.add_argument("--n", type=int, default=4000)
    p.add_argument("--t", type=int, default=10)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--optimize", action="store_true")
    p.add_argument("--json", help="write the measurements here")
    a = p.parse_args()
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF

    work = begin("mercer-bench-multi-output-")
    X, Y, Xq = data(a.n, a.t)
    cases = {"one output": Y[:, 0], f"{a.t} outputs": Y}
    params = {"noise": {"value": NOISE, "fixed": True}, "normalize_y": True, "optimize": a.optimize, "restarts": 0}
    R, answers = {}, {}
    runs = 0
    for label, y in cases.items():
        body = {"model": "gaussian_process", "kernel": {"type": "rbf", "length_scale": LENGTH_SCALE},
                "params": params, "x": X.tolist(), "y": y.tolist()}
        payload = json.dumps(body).encode()
        out = {"mercer": [], "sklearn": []}
        for _ in range(a.repeat):
            runs += 1
            with Server(a.mercer, os.path.join(work, f"server-{runs}.log")) as s:
                wall, m = s.fit(payload)
                _, pred = s.post(f"/models/{m['id']}/predict", json.dumps({"x": Xq.tolist()}).encode(), 200)
            out["mercer"].append({"wall_s": wall, "server_s": m["training"]["duration_ms"] / 1e3})
            answers[label] = (m, pred)
            say(f"{label}: mercer {wall:.2f} s")
        for _ in range(a.repeat):
            gp = GaussianProcessRegressor(RBF(LENGTH_SCALE), alpha=NOISE, normalize_y=True,
                                          optimizer="fmin_l_bfgs_b" if a.optimize else None, n_restarts_optimizer=0)
            t0 = time.perf_counter()
            gp.fit(X, y)
            out["sklearn"].append({"wall_s": time.perf_counter() - t0})
            say(f"{label}: scikit-learn {out['sklearn'][-1]['wall_s']:.2f} s")
        ours = np.asarray(answers[label][1]["predictions"], float)
        theirs = gp.predict(Xq)
        out["prediction_scaled_diff"] = float(np.max(np.abs(ours - theirs)) / np.max(np.abs(theirs)))
        tr = answers[label][0]["training"]
        out["lml"] = {"mercer": tr["log_marginal_likelihood"], "sklearn": float(gp.log_marginal_likelihood_value_)}
        if a.optimize:
            out["search"] = {"mercer_kernel": answers[label][0]["kernel"], "iterations": tr.get("iterations"),
                             "evaluations": tr.get("evaluations"), "sklearn_kernel": str(gp.kernel_),
                             "sklearn_iterations": int(gp.optimizer_result_.nit) if hasattr(gp, "optimizer_result_") else None}
        R[label] = out
    one, many = R["one output"], R[f"{a.t} outputs"]
    ratio = lambda r, who: median(r[who], "wall_s")  # noqa: E731
    print(f"\nexact GP, n = {a.n}, d = {D}, {'optimised' if a.optimize else 'fixed hyperparameters'}; "
          f"medians of {a.repeat} (seconds)\n")
    print(f"{'':<14}{'mercer':>24}{'scikit-learn':>16}{'sklearn / mercer':>20}")
    for label, r in R.items():
        print(f"{label:<14}{secs(r['mercer']):>24}{secs(r['sklearn']):>16}"
              f"{ratio(r, 'sklearn') / ratio(r, 'mercer'):>19.1f}x")
    print(f"{f'{a.t} / one':<14}{ratio(many, 'mercer') / ratio(one, 'mercer'):>23.2f}x"
          f"{ratio(many, 'sklearn') / ratio(one, 'sklearn'):>15.2f}x")
    for label, r in R.items():
        print(f"{label}: predictions vs scikit-learn {r['prediction_scaled_diff']:.1e}, LML {r['lml']}"
              + (f", search {r['search']}" if "search" in r else ""))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"n": a.n, "t": a.t, "optimize": a.optimize, "results": R}, f, indent=1)


if __name__ == "__main__":
    main()

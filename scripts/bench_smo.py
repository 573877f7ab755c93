#!/usr/bin/env python3
"""Exact SVMs at tens of thousands of rows: mercer's SMO (POST /models) against
scikit-learn's SVC and SVR (LIBSVM) on the same rows and settings, both given a 200 MB
kernel cache.

    python3 scripts/bench_smo.py --mercer target/release/mercer [--only svc2|svc4|svr ...]
        [--small] [--skip-sklearn] [--json OUT.json]

Cases (--only, repeatable; default all three), rbf gamma 0.05 (= 1 / (d var X), scikit-
learn's "scale"), C 1, tol 1e-3:
  svc2  n = 50,000, d = 20, X ~ N(0, I) (seed 0); labels: the sign of a smooth function
        of five features about its median, 10% of them flipped (noisy labels, as data
        has them).
  svc4  n = 40,000, the same X, four classes by the function's quartiles, 10% of labels
        replaced by a random class (six one-vs-one pairs).
  svr   n = 50,000, make_friedman1(n_features=20, noise=1.0, random_state=0), epsilon 0.1.
Checked on 2,000 held-out rows: support vectors (mercer's against scikit-learn's, the
relative difference), held-out predictions (classifiers: the share of equal labels; SVR:
the largest difference scaled by the largest value) and iterations (LIBSVM's n_iter_
summed over pairs; mercer's training.iterations, which counts pair steps).
--small: n divided by 10 (seconds). The full run takes about 12 minutes, most of it
scikit-learn's (one core); mercer uses both cores.

Times: client wall time of the POST (body encoded before the clock starts), with the
server's training.duration_ms; scikit-learn's fit wall time. Every mercer fit gets a
freshly started server (scripts/bench_server.py); scikit-learn runs while none does.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_python  # noqa: E402

bench_python.ensure("bench_smo", ["numpy", "sklearn"])

import argparse, json, tempfile, time  # noqa: E402,E401
import numpy as np  # noqa: E402
from bench_server import Server, say  # noqa: E402

GAMMA, C, TOL, CACHE_MB, D, QUERY = 0.05, 1.0, 1e-3, 200, 20, 2000


def smooth(X):
    return np.sin(X[:, 0]) + 0.5 * X[:, 1] * X[:, 2] + 0.5 * X[:, 3] - 0.3 * X[:, 4] ** 2


def classes(n, k, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n + QUERY, D))
    f = smooth(X)
    cuts = np.quantile(f, np.linspace(0, 1, k + 1)[1:-1])
    y = np.searchsorted(cuts, f)
    noisy = rng.random(n + QUERY) < 0.1
    y[noisy] = (y[noisy] + 1 + rng.integers(0, k - 1, noisy.sum())) % k if k > 2 else 1 - y[noisy]
    return X[:n], y[:n], X[n:]


def regression(n):
    from sklearn.datasets import make_friedman1
    X, y = make_friedman1(n_samples=n + QUERY, n_features=D, noise=1.0, random_state=0)
    return X[:n], y[:n], X[n:]


def case(a, work, label, model, X, y, Xq, sk):
    body = {"model": model, "kernel": {"type": "rbf", "gamma": GAMMA}, "x": X.tolist(), "y": y.tolist(),
            "params": {"c": C, "tol": TOL, "cache_mb": CACHE_MB, "approximation": "exact", **({"epsilon": 0.1} if model == "svr" else {})}}
    out = {"n": len(X)}
    if a.mercer:
        payload = json.dumps(body).encode()
        with Server(a.mercer, os.path.join(work, f"{label}.log")) as s:
            wall, m = s.fit(payload)
            _, p = s.post(f"/models/{m['id']}/predict", json.dumps({"x": Xq.tolist()}).encode(), 200)
        out["mercer"] = {"wall_s": wall, "server_s": m["training"]["duration_ms"] / 1e3,
                         "n_support": m["n_support"], "iterations": m["training"].get("iterations")}
        say(f"{label}: mercer {wall:.2f} s, {m['n_support']} support vectors")
    if not a.skip_sklearn:
        t = time.perf_counter()
        est = sk().fit(X, y)
        wall = time.perf_counter() - t
        out["sklearn"] = {"wall_s": wall, "n_support": int(np.sum(est.n_support_)), "iterations": int(np.sum(est.n_iter_))}
        say(f"{label}: scikit-learn {wall:.2f} s, {out['sklearn']['n_support']} support vectors")
        if a.mercer:
            mp, sp = np.asarray(p["predictions"]), est.predict(Xq)
            out["ratio"] = out["sklearn"]["wall_s"] / out["mercer"]["wall_s"]
            out["support_diff"] = abs(out["mercer"]["n_support"] - out["sklearn"]["n_support"]) / out["sklearn"]["n_support"]
            if model == "svr":
                out["prediction_diff"] = float(np.max(np.abs(mp - sp)) / np.max(np.abs(sp)))
            else:
                out["equal_predictions"] = float(np.mean(mp == sp))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mercer", help="the mercer binary (without it only scikit-learn runs)")
    ap.add_argument("--only", action="append", choices=["svc2", "svc4", "svr"])
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--skip-sklearn", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args()
    scale = 10 if a.small else 1
    from sklearn.svm import SVC, SVR
    R = {}
    with tempfile.TemporaryDirectory(prefix="bench-smo-") as work:
        for name in a.only or ["svc2", "svc4", "svr"]:
            if name == "svr":
                X, y, Xq = regression(50_000 // scale)
                sk = lambda: SVR(kernel="rbf", gamma=GAMMA, C=C, epsilon=0.1, tol=TOL, cache_size=CACHE_MB)  # noqa: E731
                R[name] = case(a, work, name, "svr", X, y, Xq, sk)
            else:
                k, n = (2, 50_000) if name == "svc2" else (4, 40_000)
                X, y, Xq = classes(n // scale, k)
                sk = lambda: SVC(kernel="rbf", gamma=GAMMA, C=C, tol=TOL, cache_size=CACHE_MB)  # noqa: E731
                R[name] = case(a, work, name, "svm", X, y, Xq, sk)
    print("| case | n | mercer s | scikit-learn s | ratio | support vectors (mercer / sklearn) | held-out agreement |")
    print("|---|---|---|---|---|---|---|")
    for name, r in R.items():
        m, s = r.get("mercer", {}), r.get("sklearn", {})
        agree = r.get("equal_predictions", r.get("prediction_diff"))
        print(f"| {name} | {r['n']} | {m.get('wall_s', float('nan')):.2f} | {s.get('wall_s', float('nan')):.2f} | "
              f"{r.get('ratio', float('nan')):.2f} | {m.get('n_support')} / {s.get('n_support')} | {agree} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(R, f, indent=1)


if __name__ == "__main__":
    main()

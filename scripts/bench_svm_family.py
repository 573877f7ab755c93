#!/usr/bin/env python3
"""The SVM family and kernel PCA: mercer's fits (POST /models) and transform against
scikit-learn's SVR, OneClassSVM and KernelPCA on the same rows and settings.

    python3 scripts/bench_svm_family.py --mercer target/release/mercer [--only svr|one_class|kpca ...]
        [--repeat 1] [--small] [--json OUT.json]

Benchmarks (--only, repeatable; default all three):
  svr        epsilon-SVR on make_friedman1 (d = 10, noise 1, random_state 0), n = 5,000 and
             20,000: rbf gamma 0.1, C 1, epsilon 0.1, tol 1e-3, cache 200 MB (SVR's
             cache_size), against SVR(kernel="rbf", ...). Checked: the same number of support
             vectors and SMO iterations (n_iter_), and 1,000 held-out predictions (the largest
             difference scaled by the largest value).
  one_class  OneClassSVM, n = 20,000 rows of the same X, rbf gamma 0.1, nu 0.1: the same
             checks on decision_function.
  kpca       KernelPCA(kernel="rbf", gamma 0.1, n_components 10): eigen_solver "dense" at
             n = 4,000 and "randomized" (random_state 0 / seed 0) at n = 20,000 (mercer's
             never builds a dense eigendecomposition), then transform of 1,000 new rows by
             each dense model (POST /models/{id}/transform). Checked: eigenvalues (dense to
             1e-8, randomized 1e-5, relative) and the embeddings up to each column's sign.
--small: n divided by 10 (a quick check of the script, seconds).
The full run takes several minutes and uses both cores of a 2-core machine.

Times: client wall time of the POST (the body is encoded before the clock starts; data
generation excluded) with the server's training.duration_ms beside it; scikit-learn's
fit (and transform) wall time. Medians over --repeat runs; the ratio is scikit-learn /
mercer wall. scikit-learn's SVR and OneClassSVM (LIBSVM) use one core; its KernelPCA's
BLAS and mercer's kernel and eigen work use both. Every mercer measurement gets a freshly
started server (scripts/bench_server.py); scikit-learn runs while no server does.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_python  # noqa: E402

bench_python.ensure("bench_svm_family", ["numpy", "scipy", "sklearn"])

import argparse, json, time  # noqa: E402,E401
import numpy as np  # noqa: E402
from bench_server import Server, begin, median, say, secs  # noqa: E402

GAMMA = 0.1
QUERY_ROWS = 1000


def data(n, seed=0):
    from sklearn.datasets import make_friedman1
    X, y = make_friedman1(n_samples=n + QUERY_ROWS, n_features=10, noise=1.0, random_state=seed)
    return X[:n], y[:n], X[n:]


def scaled_diff(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def sign_free_diff(a, b):
    """Largest difference of two embeddings once each column of a takes b's sign."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    signs = np.sign(np.sum(a * b, axis=0))
    signs[signs == 0] = 1
    return scaled_diff(a * signs, b)


class Bench:
    def __init__(self, a, work):
        self.a, self.work, self.runs = a, work, 0

    def server(self, label):
        self.runs += 1
        return Server(self.a.mercer, os.path.join(self.work, f"server-{self.runs}-{label}.log"))

    def repeat(self, fn):
        return [fn() for _ in range(self.a.repeat)]


def svm_case(b, label, body, X, Xq, sk_factory, predict_key):
    """One mercer fit plus predict on the query rows, and the scikit-learn estimator's."""
    payload = json.dumps(body).encode()
    out = {"mercer": [], "sklearn": [], "checks": {}}
    for _ in range(b.a.repeat):
        if b.a.mercer:
            with b.server(label) as s:
                wall, m = s.fit(payload)
                _, p = s.post(f"/models/{m['id']}/predict", json.dumps({"x": Xq.tolist()}).encode(), 200)
            out["mercer"].append({"wall_s": wall, "server_s": m["training"]["duration_ms"] / 1e3})
            mres, mpred = m, p
        t = time.perf_counter()
        est = sk_factory().fit(X, body.get("y"))
        out["sklearn"].append({"wall_s": time.perf_counter() - t})
    if b.a.mercer:
        tr = mres["training"]
        sk_iter = int(np.sum(est.n_iter_))
        out["checks"] = {
            "n_support": [mres["n_support"], int(np.sum(est.n_support_))],
            "iterations": [tr.get("iterations"), sk_iter],
            f"{predict_key} scaled diff": scaled_diff(mpred[{"predict": "predictions"}.get(predict_key, predict_key)],
                                                      getattr(est, predict_key)(Xq)),
        }
        say(f"{label}: {out['checks']}")
    return out


def run_svr(b, R):
    from sklearn.svm import SVR
    for n in (5000, 20000):
        n //= b.scale
        X, y, Xq = data(n)
        body = {"model": "svr", "kernel": {"type": "rbf", "gamma": GAMMA}, "x": X.tolist(), "y": y.tolist(),
                "params": {"c": 1.0, "epsilon": 0.1, "tol": 1e-3, "cache_mb": 200}}
        R[f"svr_{n}"] = svm_case(b, f"svr-{n}", body, X, Xq,
                                 lambda: SVR(kernel="rbf", gamma=GAMMA, C=1.0, epsilon=0.1, tol=1e-3, cache_size=200),
                                 "predict")


def run_one_class(b, R):
    from sklearn.svm import OneClassSVM
    n = 20000 // b.scale
    X, _, Xq = data(n)
    body = {"model": "one_class_svm", "kernel": {"type": "rbf", "gamma": GAMMA}, "x": X.tolist(),
            "params": {"nu": 0.1, "tol": 1e-3, "cache_mb": 200}}
    R[f"one_class_{n}"] = svm_case(b, f"one-class-{n}", body, X, Xq,
                                   lambda: OneClassSVM(kernel="rbf", gamma=GAMMA, nu=0.1, tol=1e-3, cache_size=200),
                                   "decision_function")


def run_kpca(b, R):
    from sklearn.decomposition import KernelPCA
    for solver, n in (("dense", 4000), ("randomized", 20000)):
        n //= b.scale
        X, _, Xq = data(n)
        body = {"model": "kernel_pca", "kernel": {"type": "rbf", "gamma": GAMMA}, "x": X.tolist(),
                "params": {"n_components": 10, "eigen_solver": solver, "seed": 0}}
        payload, query = json.dumps(body).encode(), json.dumps({"x": Xq.tolist()}).encode()
        out = {"mercer": [], "sklearn": [], "mercer_transform": [], "sklearn_transform": [], "checks": {}}
        for _ in range(b.a.repeat):
            if b.a.mercer:
                with b.server(f"kpca-{solver}-{n}") as s:
                    wall, m = s.fit(payload)
                    twall, t = s.post(f"/models/{m['id']}/transform", query, 200)
                out["mercer"].append({"wall_s": wall, "server_s": m["training"]["duration_ms"] / 1e3})
                out["mercer_transform"].append({"wall_s": twall})
            kp = KernelPCA(n_components=10, kernel="rbf", gamma=GAMMA, eigen_solver=solver, random_state=0)
            t0 = time.perf_counter()
            kp.fit(X)
            out["sklearn"].append({"wall_s": time.perf_counter() - t0})
            t0 = time.perf_counter()
            emb = kp.transform(Xq)
            out["sklearn_transform"].append({"wall_s": time.perf_counter() - t0})
        if b.a.mercer:
            out["checks"] = {
                "eigenvalues scaled diff": scaled_diff(m["training"]["eigenvalues"], kp.eigenvalues_),
                "embedding scaled diff (signs aligned)": sign_free_diff(t["embedding"], emb),
            }
            say(f"kpca {solver} {n}: {out['checks']}")
        R[f"kpca_{solver}_{n}"] = out


def ratio(r, m="mercer", s="sklearn"):
    mw, sw = median(r[m], "wall_s"), median(r[s], "wall_s")
    return f"{sw / mw:.2f}x" if mw and sw else "–"


def table(R):
    print("| benchmark | mercer s (server) | scikit-learn s | ratio | checks |")
    print("|---|---|---|---|---|")
    for key, r in R.items():
        if not isinstance(r, dict) or "mercer" not in r:
            continue
        checks = "; ".join(f"{k} {v[0]} / {v[1]}" if isinstance(v, list) else f"{k} {v:.1e}" for k, v in r["checks"].items())
        print(f"| {key} fit | {secs(r['mercer'])} | {secs(r['sklearn'])} | {ratio(r)} | {checks or '–'} |")
        if "mercer_transform" in r:
            print(f"| {key} transform of {QUERY_ROWS:,} rows | {secs(r['mercer_transform'])} | "
                  f"{secs(r['sklearn_transform'])} | {ratio(r, 'mercer_transform', 'sklearn_transform')} | – |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mercer", help="the mercer binary (without it only scikit-learn runs)")
    ap.add_argument("--only", action="append", choices=["svr", "one_class", "kpca"])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--json", help="write every measurement here")
    a = ap.parse_args()
    if a.mercer and not os.access(a.mercer, os.X_OK):
        ap.error(f"{a.mercer} is not executable")
    work = begin("mercer-bench-svm-family.")
    b = Bench(a, work)
    b.scale = 10 if a.small else 1
    import sklearn
    R = {"small": a.small, "repeat": a.repeat, "python": sys.executable, "sklearn": sklearn.__version__}
    only = set(a.only or ("svr", "one_class", "kpca"))
    for name, fn in (("svr", run_svr), ("one_class", run_one_class), ("kpca", run_kpca)):
        if name in only:
            say(f"{name} …")
            fn(b, R)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(R, f, indent=1)
    table(R)


if __name__ == "__main__":
    main()

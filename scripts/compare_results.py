"""Checks that two mercer binaries give the same numbers on the peer bench's workloads:
performance work must not change results (issue 17: predictions, variances and log
marginal likelihoods equal to 1e-10 relative).

    python3 scripts/compare_results.py OLD_BINARY NEW_BINARY

For each binary in turn (memory store, its own port): fits the bench's GP at n = 1000
and 4000, the GP search at n = 1000, kernel ridge at n = 4000 and the SVM at n = 5000
(../shared/peer/bench.py's data), predicts 1000 rows with variance on the n = 4000 GP and
on the others, and 64 single rows at once on the n = 1000 GP (so the new binary batches
them). Prints the normwise relative difference (and the largest elementwise one) per
quantity and fails when a normwise one is above the tolerance.
Needs numpy and scikit-learn (the peer's venv has both).
"""

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import numpy as np

TOL = 1e-10
D = 8


def gp_data(n, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, D)
    return X, np.sin(2.0 * X.sum(axis=1) / np.sqrt(D)) + 0.1 * rng.randn(n)


def svm_data(n=5000):
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=n, n_features=20, n_informative=10, random_state=0)
    return (X - X.mean(axis=0)) / X.std(axis=0), y


def numbers(v):
    """Every number in a JSON value, depth first."""
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return []
    if isinstance(v, (int, float)):
        return [float(v)]
    items = v.values() if isinstance(v, dict) else v
    return [x for item in items for x in numbers(item)]


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.load(r)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run(binary):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(os.environ, MERCER_BIND=f"127.0.0.1:{port}", MERCER_DATA_DIR="", MERCER_LOG="warn")
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen([binary], env=env, stdout=log, stderr=log)
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(url + "/readyz", timeout=1)
                break
            except OSError:
                time.sleep(0.1)  # waiting for a child process to listen, not synchronising tests
        out = {}
        gp = {"type": "rbf", "length_scale": 2.0}
        c_rbf = {"type": "product", "kernels": [{"type": "constant", "value": 1.0}, {"type": "rbf", "length_scale": 1.0}]}
        fits = {
            "gp1000": ("gaussian_process", gp, {"noise": 0.01}, gp_data(1000)),
            "gp4000": ("gaussian_process", gp, {"noise": 0.01}, gp_data(4000)),
            "search1000": ("gaussian_process", c_rbf, {"noise": 0.1, "optimize": True}, gp_data(1000, seed=1)),
            "krr4000": ("kernel_ridge", gp, {"lambda": 0.1}, gp_data(4000, seed=2)),
            "svm5000": ("svm", {"type": "rbf", "gamma": 1.0 / 20}, {"c": 1.0}, svm_data()),
        }
        ids = {}
        for name, (model, kernel, params, (X, y)) in fits.items():
            m = post(url + "/models", {"model": model, "kernel": kernel, "params": params, "x": X.tolist(), "y": y.tolist()})
            ids[name] = m["id"]
            out[f"{name} log marginal likelihood"] = [m["training"].get("log_marginal_likelihood") or 0.0]
            out[f"{name} fitted kernel and noise"] = numbers(m["kernel"]) + numbers(m["params"].get("noise", 0.0))
        Xq, _ = gp_data(1000, seed=3)
        for name in ("gp4000", "search1000", "krr4000"):
            r = post(f"{url}/models/{ids[name]}/predict", {"x": Xq.tolist(), "variance": True})
            out[f"{name} predictions"] = r["predictions"]
            if "variance" in r:
                out[f"{name} variance"] = r["variance"]
        Xs, _ = svm_data()
        r = post(f"{url}/models/{ids['svm5000']}/predict", {"x": Xs[:1000].tolist()})
        out["svm5000 decision"] = np.ravel(r["decision_function"]).tolist()
        rows = gp_data(64, seed=4)[0].tolist()
        with ThreadPoolExecutor(16) as pool:
            ones = list(pool.map(lambda row: post(f"{url}/models/{ids['gp1000']}/predict", {"x": [row]}), rows))
        out["gp1000 single-row predictions"] = [a["predictions"][0] for a in ones]
        out["gp1000 single-row variance"] = [a["variance"][0] for a in ones]
        return out
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main():
    old, new = (run(b) for b in sys.argv[1:3])
    worst = 0.0
    for key in old:
        a, b = np.asarray(old[key], float), np.asarray(new[key], float)
        assert a.shape == b.shape, key
        # Normwise: |a - b|_inf / |a|_inf. Elementwise ratios are shown too, but a value
        # near 0 that is a difference of large terms (K*^T alpha) has no relative accuracy
        # to keep: its round-off is relative to the terms, not to itself.
        norm = float(np.max(np.abs(a - b)) / max(np.max(np.abs(a)), 1e-300)) if a.size else 0.0
        each = float(np.max(np.abs(a - b) / np.maximum(np.abs(a), 1e-300))) if a.size else 0.0
        worst = max(worst, norm)
        print(f"{key:<40} {a.size:>5} values  normwise {norm:.2e}  largest elementwise {each:.2e}")
    print(f"largest normwise relative difference: {worst:.2e} (tolerance {TOL:g})")
    sys.exit(0 if worst <= TOL else 1)


if __name__ == "__main__":
    main()

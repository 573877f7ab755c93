#!/usr/bin/env python3
"""Large-M benchmark of mercer's Nystrom kernel ridge by conjugate gradients (solver cg):
a million rows with M = 10,000 and 20,000 inducing points against the direct fit at
M = 1024, and scikit-learn's Nystroem + ridge at M = 10,000 on 100,000 rows.

    python3 scripts/bench_falkon.py PATH_TO_MERCER [--rows 1000000] [--m 10000 20000]
        [--max-iter 20] [--precision float32] [--compare-rows 100000] [--skip-sklearn]
        [--skip-large] [--converged M ...] [--json OUT.json] [--workdir DIR]

Inducing points are drawn uniformly (--selection; Falkon's choice, and on these rows both
better and faster to converge than k-means centres, which shrink toward the middle of
the cube), the same for every fit.

Data: d = 10, x ~ U(-2, 2)^10, y = f(x) + N(0, 0.1^2) with f varying on a scale of about
one unit in five of the features (fine_target): fine enough that M matters, the point of
a large M. Held-out RMSE on 10,000 noiseless-target rows. rbf with a length scale per
feature (0.7 on the five features f depends on, 100 on the others); lambda = 0.1. At
100,000 rows and M = 4000 the direct fit's held-out RMSE was 0.09113 at lambda = 0.01
(the noise variance), 0.09125 at 0.1 and 0.0987 at 1: 0.1 is as accurate as 0.01, and
its system converges in fewer iterations (at a million rows and M = 10,000, lambda =
0.01 stood 1.46% above its 100-iteration RMSE after 40 iterations).

Measured, each fit on a fresh server (peak RSS from VmHWM after its request):
- the direct nystrom fit at M = 1024;
- cg at each --m (--precision, --max-iter), its time, RSS, iterations, residual;
- the cost of k-means selection at the first --m: a one-iteration cg fit with k-means
  inducing points against one with uniform ones;
- with --converged M, that M's fit again to tol 1e-6 (at most --converged-iter
  iterations), for the RMSE that --max-iter must come within 0.1% of;
- on the first --compare-rows rows, cg at M = 10,000 with uniform inducing points, and
  scikit-learn's Nystroem(n_components=M) fitted on exactly the rows mercer drew
  (training.inducing_indices) + Ridge(alpha=lambda, fit_intercept=False): the same
  objective, |K_nM b - y|^2 + lambda b'K_MM b, on the same basis; its wall time and RMSE.
Per-iteration rates (float32 against float64, the fraction of the GEMM + exp bound) are
benches/falkon.rs's.

Needs numpy and scikit-learn: $MERCER_BENCH_PYTHON, else the peer's venv, else this
python3 (scripts/bench_python.py). Quick check: --rows 50000 --m 2000 --compare-rows 20000.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_python  # noqa: E402

bench_python.ensure("bench_falkon", ["numpy", "sklearn"])

import argparse, json, shutil, signal, tempfile, time  # noqa: E402
import bench_scale  # noqa: E402
import numpy as np  # noqa: E402

SEED, D, NOISE_SD, TEST_N, LAM = 20261127, 10, 0.1, 10_000, 0.1
# One length scale per feature: 0.7 on the five that carry f, 100 on the five that do not
# (an isotropic kernel spends its resolution on the noise features).
LENGTH_SCALE = [0.7] * 5 + [100.0] * 5
MB = 1e6


def fine_target(X):
    """Products and sums of sines at unit frequency in x0..x4 (x5..x9 are noise features)."""
    return (np.sin(2.0 * X[:, 0]) * np.cos(1.5 * X[:, 1]) + 0.6 * np.sin(2.5 * X[:, 2] + X[:, 3])
            + 0.4 * np.cos(2.0 * X[:, 3] * X[:, 4]) + 0.3 * np.sin(3.0 * X[:, 4]))


def make(n, stream, noise=True):
    X = np.random.default_rng([SEED, stream, 0]).uniform(-2.0, 2.0, size=(n, D))
    y = fine_target(X)
    if noise:
        y = y + NOISE_SD * np.random.default_rng([SEED, stream, 1]).standard_normal(n)
    return X, y


def body(dataset, m, solver, selection="uniform", **extra):
    params = {"lambda": LAM, "approximation": "nystrom", "inducing_points": m, "inducing_selection": selection,
              "seed": 0, "solver": solver, **extra}
    return {"model": "kernel_ridge", "kernel": {"type": "rbf", "length_scale": LENGTH_SCALE},
            "params": params, "dataset": dataset}


def say(msg):
    print(f"[bench_falkon] {msg}", file=sys.stderr, flush=True)


def fit(binary, work, data_dir, key, payload, Xt, yt, R):
    s = bench_scale.Server(binary, data_dir, os.path.join(work, f"server-{key}.log"))
    s.extra_env["MERCER_MAX_FIT_BYTES"] = str(20 << 30)
    with s:
        wall, res = s.fit(payload)
        rss = s.peak_rss()
        rmse = s.rmse(res["id"], Xt, yt)
    tr = res["training"]
    R[key] = {"wall_s": wall, "server_ms": tr.get("duration_ms"), "rss_bytes": rss, "rmse": rmse,
              "solver": tr.get("solver"), "iterations": tr.get("iterations"), "converged": tr.get("converged"),
              "residual": tr.get("residual"), "params": res.get("params")}
    say(f"{key}: {wall:.1f} s, peak RSS {rss / MB:.0f} MB, RMSE {rmse:.5f}, "
        f"{tr.get('solver')} {tr.get('iterations')} it, residual {tr.get('residual')}")
    return res


def upload(binary, work, data_dir, path, name):
    with bench_scale.Server(binary, data_dir, os.path.join(work, "server-upload.log")) as s:
        return s.upload(path, name)[1]["id"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mercer")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--m", type=int, nargs="+", default=[10_000, 20_000])
    ap.add_argument("--max-iter", type=int, default=20)
    ap.add_argument("--precision", choices=("float32", "float64"), default="float32")
    ap.add_argument("--compare-rows", type=int, default=100_000)
    ap.add_argument("--compare-m", type=int, default=10_000)
    ap.add_argument("--compare-max-iter", type=int, default=20)
    ap.add_argument("--selection", choices=("uniform", "kmeans"), default="uniform")
    ap.add_argument("--skip-sklearn", action="store_true")
    ap.add_argument("--skip-large", action="store_true")
    ap.add_argument("--converged", type=int, nargs="*", default=[], metavar="M",
                    help="also fit these M to tol 1e-6 (max_iter --converged-iter): the RMSE --max-iter is held to")
    ap.add_argument("--converged-iter", type=int, default=100)
    ap.add_argument("--json", metavar="OUT.json")
    ap.add_argument("--workdir")
    a = ap.parse_args()
    binary = os.path.abspath(a.mercer)
    work = os.path.abspath(a.workdir) if a.workdir else tempfile.mkdtemp(prefix="mercer-bench-falkon.")
    data_dir = os.path.join(work, "data")
    os.makedirs(data_dir, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    R = {"rows": a.rows, "d": D, "length_scale": LENGTH_SCALE, "lambda": LAM, "noise_sd": NOISE_SD,
         "max_iter": a.max_iter, "precision": a.precision, "python": sys.executable}
    try:
        Xt, yt = make(TEST_N, 1, noise=False)
        X, y = make(a.rows, 0)
        if not a.skip_large:
            path = os.path.join(work, "train.csv")
            if not os.path.exists(path):
                bench_scale.write_csv(path, X, y)
            ds = upload(binary, work, data_dir, path, "falkon")
            sel = a.selection
            fit(binary, work, data_dir, "direct_1024", body(ds, 1024, "direct", sel), Xt, yt, R)
            for m in a.m:
                fit(binary, work, data_dir, f"cg_{m}",
                    body(ds, m, "cg", sel, max_iter=a.max_iter, precision=a.precision), Xt, yt, R)
                if m in a.converged:
                    fit(binary, work, data_dir, f"cg_{m}_converged",
                        body(ds, m, "cg", sel, max_iter=a.converged_iter, tol=1e-6, precision=a.precision),
                        Xt, yt, R)
            for how in ("kmeans", "uniform"):
                fit(binary, work, data_dir, f"one_iteration_{how}_{a.m[0]}",
                    body(ds, a.m[0], "cg", how, max_iter=1, precision=a.precision), Xt, yt, R)
        n_cmp, m_cmp = a.compare_rows, a.compare_m
        path = os.path.join(work, f"train-{n_cmp}.csv")
        if not os.path.exists(path):
            bench_scale.write_csv(path, X[:n_cmp], y[:n_cmp])
        ds = upload(binary, work, data_dir, path, f"falkon-{n_cmp}")
        res = fit(binary, work, data_dir, "cmp_cg",
                  body(ds, m_cmp, "cg", "uniform", max_iter=a.compare_max_iter, precision=a.precision), Xt, yt, R)
        if not a.skip_sklearn:
            from sklearn.kernel_approximation import Nystroem
            from sklearn.linear_model import Ridge
            idx = np.asarray(res["training"]["inducing_indices"])
            t = time.perf_counter()
            # The per-feature length scales as scikit-learn's rbf takes them: rows divided
            # by them, gamma = 1/2 (the division is inside the timed part).
            ls = np.asarray(LENGTH_SCALE)
            ny = Nystroem(kernel="rbf", gamma=0.5, n_components=len(idx), random_state=0)
            ny.fit(X[idx] / ls)
            features = ny.transform(X[:n_cmp] / ls)
            ridge = Ridge(alpha=LAM, fit_intercept=False).fit(features, y[:n_cmp])
            R["sklearn_s"] = time.perf_counter() - t
            del features
            pred = ridge.predict(ny.transform(Xt / ls))
            R["sklearn_rmse"] = float(np.sqrt(np.mean((pred - yt) ** 2)))
            say(f"scikit-learn Nystroem({len(idx)}) + Ridge at {n_cmp:,}: {R['sklearn_s']:.1f} s, "
                f"RMSE {R['sklearn_rmse']:.5f}")
    finally:
        if not a.workdir:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(R, indent=2))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(R, f, indent=2)


if __name__ == "__main__":
    main()

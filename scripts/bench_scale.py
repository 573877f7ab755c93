#!/usr/bin/env python3
"""Large-n benchmark of mercer: CSV dataset upload, Nystrom kernel ridge and sparse GP
(SGPR) fits, accuracy against exact fits, and scikit-learn's Nystroem + Ridge beside them;
with --task classification, Nystrom svm and kernel_logistic (below).

    python3 scripts/bench_scale.py PATH_TO_MERCER [--rows 1000000] [--inducing 1024]
        [--selection uniform|kmeans] [--skip-sklearn] [--skip-optimize] [--json OUT.json] [--workdir DIR]
        [--task regression|classification]

Classification: two classes from the same smooth function's sign (labels of the training
rows from the noisy targets, of the 50,000 held-out rows from the noiseless function; with
--label-noise SD both from the function plus noise of that SD, as real labels are noisy).
Measured, each fit on a fresh server: svm and kernel_logistic with approximation nystrom at
n (time, peak RSS, held-out accuracy); the exact svm on the first 20,000 rows; the nystrom
svm at the comparison n beside scikit-learn's Nystroem + LinearSVC(loss="hinge", dual=True,
intercept_scaling=1, tol=0.1, max_iter=1000) on the same rows: LIBLINEAR's defaults, which
are also mercer's for a nystrom svm (scikit-learn's own tol=1e-4 asks a different stopping
point of the same solver). Comparison n: 500,000 when 3.5 n M 8 bytes < 80% of
MemAvailable (Nystroem's n x M output, its kernel matrix on the way, and LinearSVC's copy
into LIBLINEAR's sparse rows at 16 bytes a value: 14 GB at 500,000), else smaller.

Prints a Markdown table (progress on stderr). Needs numpy and scikit-learn: as for the
other benches the Python is $MERCER_BENCH_PYTHON, else the peer's venv
(~/.cache/mercer-peer-venv, made by ../shared/peer/setup-venv.sh), else this python3; the
script re-executes itself under the first that applies, e.g.
    MERCER_BENCH_PYTHON=/opt/venv/bin/python python3 scripts/bench_scale.py target/release/mercer

Each measured phase (upload, kernel ridge fit, GP fit, GP optimize) gets a freshly started
server (same MERCER_DATA_DIR: datasets persist), so that the peak RSS read from VmHWM
right after its request is its own. scikit-learn runs in this process while no server
does: at the full n if 3 n M 8 bytes < 60% of MemAvailable, else at the largest of
500k / 200k / 100k that fits, mercer being fitted on that n too (uniform inducing points,
as Nystroem draws them). Quick check: --rows 20000 --inducing 256 (about a minute; the
peer, ../shared/peer/as_mercer.sh in place of the binary, takes two).
"""
import os
import sys


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_python  # noqa: E402

bench_python.ensure("bench_scale", ["numpy", "sklearn"])

import argparse, json, shutil, signal, tempfile, time  # noqa: E402
import bench_server  # noqa: E402
import numpy as np  # noqa: E402

SEED, D, NOISE_SD, EXACT_N, TEST_N, BATCH = 20261121, 10, 0.1, 20_000, 10_000, 10_000
FEATURES = [f"x{i}" for i in range(D)]
# Found once, when this script was written, by scikit-learn 1.9's GaussianProcessRegressor(
# RBF(1.0) + WhiteKernel(0.01), n_restarts_optimizer=2, random_state=0).fit(*make(2000, 2)):
# RBF(length_scale=4.1) + WhiteKernel(noise_level=0.00953). Unit amplitude, as mercer's
# plain rbf kernel has; lambda = the noise variance (so the GP mean = the ridge solution).
LENGTH_SCALE, LAM = 4.1, 0.00953
MB = 1e6  # decimal megabytes throughout (400 MB = 400e6 bytes; 2 GB = 2000 MB)


def target(X):
    """Smooth, nonlinear in x0..x5 (x6..x9 are noise features); mean 0 under U(-2, 2)^10.
    Frequencies kept low so that M = 1024 inducing points can represent it in 10-D: with
    sin(x0), cos(1.5 x1) Nystroem+Ridge at M = 1024 stayed 15% above the exact fit on 20,000
    rows. Here (held-out RMSE in numpy, M = 1024): exact on 20k 0.1042; uniform inducing
    points 0.1068 on 20k, 0.1033 on 200k; k-means centres (shrunk toward the middle of the
    cube) 0.1081, 0.1065: hence --selection uniform by default."""
    return (np.sin(0.8 * X[:, 0]) + 0.5 * np.cos(0.8 * X[:, 1]) * X[:, 2] + 0.3 * X[:, 3] * X[:, 4]
            + 0.2 * (X[:, 5] ** 2 - 4 / 3))


def make(n, stream):
    """n rows; X and the noise from streams of their own, so that make(k) is a prefix of make(n)."""
    X = np.random.default_rng([SEED, stream, 0]).uniform(-2.0, 2.0, size=(n, D))
    return X, target(X) + NOISE_SD * np.random.default_rng([SEED, stream, 1]).standard_normal(n)


def csv_lines(X, y=None):
    rows = X.tolist() if y is None else np.column_stack([X, y]).tolist()
    return "".join(",".join(map(repr, r)) + "\n" for r in rows)


def write_csv(path, X, y, chunk=50_000):
    """Header x0..x9,y, then rows with repr precision, written chunk by chunk."""
    with open(path, "w", newline="") as f:
        f.write(",".join(FEATURES + ["y"]) + "\n")
        for s in range(0, len(X), chunk):
            f.write(csv_lines(X[s:s + chunk], y[s:s + chunk]))


class Server(bench_server.Server):
    """A mercer process as scripts/bench_server.py starts and stops it, on this run's data
    directory (datasets persist from one server to the next)."""

    def __init__(self, binary, data_dir, log_path):
        super().__init__(binary, log_path, {"MERCER_DATA_DIR": data_dir})

    def expect(self, status, method, path, body=None, headers=None):
        st, out = self.call(method, path, body, headers)
        if st != status:
            raise RuntimeError(f"{method} {path}: {st} (wanted {status}): {out[:2000].decode(errors='replace')}")
        return out

    def upload(self, path, name):
        """POST /datasets streaming the CSV file from disk; (wall seconds, dataset resource)."""
        with open(path, "rb") as f:
            t = time.perf_counter()
            out = self.expect(201, "POST", f"/datasets?target=y&name={name}", f,
                              {"Content-Type": "text/csv", "Content-Length": str(os.path.getsize(path))})
            return time.perf_counter() - t, json.loads(out)

    def fit(self, body):
        """POST /models (synchronous); (client wall seconds, model resource)."""
        t = time.perf_counter()
        out = self.expect(201, "POST", "/models", json.dumps(body).encode(), {"Content-Type": "application/json"})
        return time.perf_counter() - t, json.loads(out)

    def predictions(self, model_id, X, query=""):
        """The `prediction` column of CSV predict, in batches of BATCH rows."""
        pred = []
        for s in range(0, len(X), BATCH):
            body = (",".join(FEATURES) + "\n" + csv_lines(X[s:s + BATCH])).encode()
            out = self.expect(200, "POST", f"/models/{model_id}/predict{query}", body,
                              {"Content-Type": "text/csv", "Accept": "text/csv"})
            lines = [ln for ln in out.decode().splitlines() if ln.strip()]
            col = lines[0].split(",").index("prediction")
            pred += [float(ln.split(",")[col]) for ln in lines[1:]]
        if len(pred) != len(X):
            raise RuntimeError(f"predict returned {len(pred)} rows for {len(X)}")
        return np.asarray(pred)

    def rmse(self, model_id, X, y):
        """Held-out RMSE."""
        return float(np.sqrt(np.mean((self.predictions(model_id, X, "?variance=false") - y) ** 2)))


def body(model, dataset, m, selection, approximation="nystrom", optimize=False):
    params = {"lambda": LAM} if model == "kernel_ridge" else {"noise": LAM, "optimize": optimize}
    params["approximation"] = approximation
    if approximation == "nystrom":
        params.update(inducing_points=m, inducing_selection=selection, seed=0)
    return {"model": model, "kernel": {"type": "rbf", "length_scale": LENGTH_SCALE},
            "params": params, "dataset": dataset}


def proc_kb(path, field):
    with open(path) as f:
        return next(int(ln.split()[1]) for ln in f if ln.startswith(field + ":"))


def sklearn_n(n, m, avail):
    """Full n when 3 n M 8 bytes < 60% of MemAvailable, else the largest of 500k/200k/100k that fits."""
    for c in [n] + [c for c in (500_000, 200_000, 100_000) if c < n]:
        if 3 * c * m * 8 < 0.6 * avail:
            return c
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mercer", help="the mercer binary (or any stand-in honouring MERCER_BIND)")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--inducing", type=int, default=1024)
    ap.add_argument("--selection", choices=("uniform", "kmeans"), default="uniform",
                    help="inducing_selection of the nystrom fits (the scikit-learn comparison: always uniform)")
    ap.add_argument("--skip-sklearn", action="store_true")
    ap.add_argument("--skip-optimize", action="store_true")
    ap.add_argument("--json", metavar="OUT.json")
    ap.add_argument("--workdir", help="CSVs, data dir and server logs (kept); default: a temp dir, removed")
    ap.add_argument("--task", choices=("regression", "classification"), default="regression")
    ap.add_argument("--label-noise", type=float, metavar="SD",
                    help="classification: labels (training and held-out) from the function plus N(0, SD^2) noise "
                         "of their own, instead of the regression targets' (0.3: about 91%% held-out accuracy)")
    ap.add_argument("--compare-rows", type=int, default=500_000,
                    help="classification: rows of the scikit-learn comparison (capped by memory)")
    a = ap.parse_args()
    n, m = a.rows, a.inducing
    small = min(EXACT_N, n)
    if not 1 <= m <= small:
        ap.error(f"--inducing must be between 1 and {small} (the rows of the exact comparison)")
    binary = os.path.abspath(a.mercer)
    if not os.access(binary, os.X_OK):
        ap.error(f"{binary} is not executable")
    work = os.path.abspath(a.workdir) if a.workdir else tempfile.mkdtemp(prefix="mercer-bench-scale.")
    data_dir = os.path.join(work, "data")
    shutil.rmtree(data_dir, ignore_errors=True)
    os.makedirs(data_dir)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that the finally blocks stop servers
    avail = proc_kb("/proc/meminfo", "MemAvailable") * 1024
    if a.task == "classification":
        R = {"n": n, "inducing": m, "length_scale": LENGTH_SCALE, "c": C_SVM, "lambda": LAM_LOGISTIC,
             "seed": SEED, "mem_available_bytes": avail, "python": sys.executable}
        try:
            run_classification(binary, work, data_dir, n, m, small, avail, a, R)
        finally:
            if not a.workdir:
                shutil.rmtree(work, ignore_errors=True)
        rows = table_classification(R, n, m, small, a)
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"results": R, "table": rows}, f, indent=2)
        return
    n_cmp = None if a.skip_sklearn else sklearn_n(n, m, avail)
    R = {"n": n, "inducing": m, "length_scale": LENGTH_SCALE, "lambda": LAM, "seed": SEED,
         "mem_available_bytes": avail, "sklearn_n": n_cmp, "python": sys.executable}
    try:
        run(binary, work, data_dir, n, m, small, n_cmp, a, R)
    finally:
        if not a.workdir:
            shutil.rmtree(work, ignore_errors=True)
    rows = table(R, n, m, small, n_cmp, a)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"results": R, "table": rows}, f, indent=2)


def say(msg):
    print(f"[bench_scale] {msg}", file=sys.stderr, flush=True)


def run(binary, work, data_dir, n, m, small, n_cmp, a, R):
    t = time.perf_counter()
    X, y = make(n, 0)
    Xt, yt = make(TEST_N, 1)
    files = {k: os.path.join(work, f"train-{k}.csv") for k in {n, small, n_cmp} if k}
    for k, path in files.items():
        write_csv(path, X[:k], y[:k])
    R["csv_bytes"] = os.path.getsize(files[n])
    say(f"data: {n:,} rows, {R['csv_bytes'] / MB:.0f} MB of CSV in {time.perf_counter() - t:.1f} s")
    server = lambda phase: Server(binary, data_dir, os.path.join(work, f"server-{phase}.log"))  # noqa: E731
    ids = {}
    with server("upload") as s:
        R["upload_s"], res = s.upload(files[n], f"scale-{n}")
        R["upload_rss"] = s.peak_rss()
        if (res.get("n_rows"), res.get("n_features")) != (n, D):
            say(f"warning: the dataset says n_rows {res.get('n_rows')}, n_features {res.get('n_features')}")
        ids[n] = res["id"]
        for k in files.keys() - {n}:  # the subsets, after the measurement
            ids[k] = s.upload(files[k], f"scale-{k}")[1]["id"]
    say(f"upload: {R['upload_s']:.2f} s, peak RSS {R['upload_rss'] / MB:.0f} MB")
    phases = [("krr", "kernel_ridge", False), ("gp", "gaussian_process", False)]
    phases += [] if a.skip_optimize else [("gp_opt", "gaussian_process", True)]
    for key, model, opt in phases:
        with server(key) as s:
            R[f"{key}_s"], res = s.fit(body(model, ids[n], m, a.selection, optimize=opt))
            R[f"{key}_rss"] = s.peak_rss()
            R[f"{key}_training"] = tr = res.get("training", {})
            R[f"{key}_server_ms"], R[f"{key}_fitted"] = tr.get("duration_ms"), [res.get("kernel"), res.get("params")]
            R[f"{key}_rmse"] = s.rmse(res["id"], Xt, yt)
        say(f"{key}: {R[f'{key}_s']:.2f} s, peak RSS {R[f'{key}_rss'] / MB:.0f} MB, RMSE {R[f'{key}_rmse']:.4f}")
    with server("accuracy") as s:
        fits = [("exact_small", small, "exact", a.selection), ("nystrom_small", small, "nystrom", a.selection)]
        if n_cmp and (n_cmp, a.selection) == (n, "uniform"):  # the kernel ridge phase's fit is that one
            R.update(cmp_s=R["krr_s"], cmp_server_ms=R["krr_server_ms"], cmp_rmse=R["krr_rmse"])
        elif n_cmp:
            fits.insert(0, ("cmp", n_cmp, "nystrom", "uniform"))
        for key, k, approx, sel in fits:
            R[f"{key}_s"], res = s.fit(body("kernel_ridge", ids[k], m, sel, approximation=approx))
            R[f"{key}_server_ms"] = res.get("training", {}).get("duration_ms")
            R[f"{key}_rmse"] = s.rmse(res["id"], Xt, yt)
            say(f"{key} ({approx}, {sel}) at {k:,}: {R[f'{key}_s']:.2f} s, RMSE {R[f'{key}_rmse']:.4f}")
    if n_cmp:  # no server running now: scikit-learn has the memory to itself
        from sklearn.kernel_approximation import Nystroem
        from sklearn.linear_model import Ridge
        from sklearn.pipeline import make_pipeline
        pipe = make_pipeline(Nystroem(kernel="rbf", gamma=1 / (2 * LENGTH_SCALE ** 2), n_components=m,
                                      random_state=0), Ridge(alpha=LAM))
        t = time.perf_counter()
        pipe.fit(X[:n_cmp], y[:n_cmp])
        R["sk_s"] = time.perf_counter() - t
        R["sk_rmse"] = float(np.sqrt(np.mean((pipe.predict(Xt) - yt) ** 2)))
        say(f"scikit-learn at {n_cmp:,}: {R['sk_s']:.2f} s, RMSE {R['sk_rmse']:.4f}")


C_SVM, LAM_LOGISTIC, TEST_CLS = 1.0, 1.0, 50_000


def labels(y):
    return (y > 0).astype(int)


def accuracy(server, model_id, X, truth):
    """Held-out accuracy through CSV predict."""
    return float(np.mean(server.predictions(model_id, X) == truth))


def cls_body(model, dataset, m, selection, approximation="nystrom"):
    params = {"c": C_SVM} if model == "svm" else {"lambda": LAM_LOGISTIC}
    params["approximation"] = approximation
    if approximation == "nystrom":
        params.update(inducing_points=m, inducing_selection=selection, seed=0)
    return {"model": model, "kernel": {"type": "rbf", "length_scale": LENGTH_SCALE},
            "params": params, "dataset": dataset}


def run_classification(binary, work, data_dir, n, m, small, avail, a, R):
    t = time.perf_counter()
    X, y = make(n, 0)
    Xt = make(TEST_CLS, 1)[0]
    if a.label_noise is None:
        lab, truth = labels(y), labels(target(Xt))
    else:
        # Noisy labels as real data has them: the function plus noise of its own stream,
        # the held-out rows' labels as noisy (at 0.3, 8.7% of the labels differ from the
        # noiseless boundary's: a held-out accuracy near 91% is the best there is).
        noise = lambda k, stream: a.label_noise * np.random.default_rng([SEED, stream, 2]).standard_normal(k)  # noqa: E731
        lab, truth = labels(target(X) + noise(n, 0)), labels(target(Xt) + noise(TEST_CLS, 1))
    n_cmp = None
    if not a.skip_sklearn:
        n_cmp = next((c for c in (min(a.compare_rows, n), 200_000, 100_000, 20_000)
                      if c <= n and 3.5 * c * (m + 1) * 8 < 0.8 * avail), None)
    R["sklearn_n"] = n_cmp
    files = {k: os.path.join(work, f"cls-{k}.csv") for k in {n, small, n_cmp} if k}
    for k, path in files.items():
        write_csv(path, X[:k], lab[:k])
    say(f"data: {n:,} rows, class 1 {lab.mean():.3f} of them, in {time.perf_counter() - t:.1f} s")
    server = lambda phase: Server(binary, data_dir, os.path.join(work, f"server-{phase}.log"))  # noqa: E731
    ids = {}
    with server("upload") as s:
        for k, path in files.items():
            ids[k] = s.upload(path, f"cls-{k}")[1]["id"]
    for key, model in (("svm", "svm"), ("klr", "kernel_logistic")):
        with server(key) as s:
            R[f"{key}_s"], res = s.fit(cls_body(model, ids[n], m, a.selection))
            R[f"{key}_rss"] = s.peak_rss()
            R[f"{key}_training"] = tr = res.get("training", {})
            R[f"{key}_server_ms"] = tr.get("duration_ms")
            R[f"{key}_acc"] = accuracy(s, res["id"], Xt, truth)
        say(f"{key}: {R[f'{key}_s']:.2f} s, peak RSS {R[f'{key}_rss'] / MB:.0f} MB, accuracy {R[f'{key}_acc']:.4f},"
            f" iterations {tr.get('iterations')}, converged {tr.get('converged')}")
    with server("accuracy") as s:
        fits = [("exact_small", small, "exact")] + ([("cmp", n_cmp, "nystrom")] if n_cmp else [])
        for key, k, approx in fits:
            R[f"{key}_s"], res = s.fit(cls_body("svm", ids[k], m, "uniform", approximation=approx))
            R[f"{key}_server_ms"] = res.get("training", {}).get("duration_ms")
            R[f"{key}_acc"] = accuracy(s, res["id"], Xt, truth)
            say(f"{key} ({approx}) at {k:,}: {R[f'{key}_s']:.2f} s, accuracy {R[f'{key}_acc']:.4f}")
    if n_cmp:  # no server running now: scikit-learn has the memory to itself
        from sklearn.kernel_approximation import Nystroem
        from sklearn.pipeline import make_pipeline
        from sklearn.svm import LinearSVC
        pipe = make_pipeline(
            Nystroem(kernel="rbf", gamma=1 / (2 * LENGTH_SCALE ** 2), n_components=m, random_state=0),
            LinearSVC(loss="hinge", dual=True, intercept_scaling=1, C=C_SVM, tol=0.1, max_iter=1000))
        t = time.perf_counter()
        pipe.fit(X[:n_cmp], lab[:n_cmp])
        R["sk_s"] = time.perf_counter() - t
        R["sk_iter"] = int(pipe[-1].n_iter_)
        R["sk_acc"] = float(np.mean(pipe.predict(Xt) == truth))
        say(f"scikit-learn at {n_cmp:,}: {R['sk_s']:.2f} s, accuracy {R['sk_acc']:.4f}, epochs {R['sk_iter']}")


def mem_total():
    """Bytes of physical memory (MemTotal)."""
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemTotal:"))


def table_classification(R, n, m, small, a):
    rows = []

    def row(op, k, merc, sk="–", ratio="–", tgt="–", met=None):
        rows.append(dict(zip(("operation", "n", "mercer", "scikit-learn", "ratio", "target", "met"),
                             (op, k, merc, sk, ratio, tgt, met))))

    def secs(key):
        ms = R.get(key + "_server_ms")
        return f"{R[key + '_s']:.2f} s" + ("" if ms is None else f" (server {ms / 1e3:.2f} s)")

    for key, name, limit in (("svm", "svm nystrom fit", 60), ("klr", "kernel_logistic nystrom fit", 90)):
        tr = R[key + "_training"]
        row(f"{name} (M={m}, {a.selection}; {tr.get('iterations')} iterations, converged {tr.get('converged')})", n,
            secs(key), tgt=f"<= {limit} s", met=R[key + "_s"] <= limit)
        # The fit holds every row's features when MERCER_MAX_FIT_BYTES (default: half of
        # the memory) allows it, else streams them within about 1.4 GB.
        half = mem_total() / 2
        row("  peak RSS (VmHWM)", n, f"{R[key + '_rss'] / MB:.0f} MB", tgt=f"<= {half / MB:.0f} MB (half the memory)",
            met=R[key + "_rss"] <= half)
        row("  held-out accuracy", n, f"{100 * R[key + '_acc']:.2f}%")
    ex = R["exact_small_acc"]
    row("held-out accuracy, svm exact", small, f"{100 * ex:.2f}%; fit {secs('exact_small')}")
    row(f"held-out accuracy, svm nystrom on {n:,} (above) vs exact on {small:,}", n, f"{100 * R['svm_acc']:.2f}%",
        ratio=f"{100 * (R['svm_acc'] - ex):+.2f} pt", tgt="above exact", met=R["svm_acc"] > ex)
    n_cmp = R["sklearn_n"]
    if n_cmp:
        row(f"svm nystrom fit vs Nystroem + LinearSVC (M={m}, uniform, tol 0.1; sklearn {R['sk_iter']} epochs)", n_cmp,
            secs("cmp"), f"{R['sk_s']:.2f} s", f"{R['sk_s'] / R['cmp_s']:.2f}x faster", ">= 2x faster",
            R["sk_s"] >= 2 * R["cmp_s"])
        d = 100 * (R["cmp_acc"] - R["sk_acc"])
        row("  held-out accuracy of those fits", n_cmp, f"{100 * R['cmp_acc']:.2f}%", f"{100 * R['sk_acc']:.2f}%",
            f"{d:+.2f} pt", "within 0.5 pt", abs(d) <= 0.5)
    print(f"\nd = {D}, rbf length_scale {LENGTH_SCALE}, svm c {C_SVM}, kernel_logistic lambda {LAM_LOGISTIC}, "
          f"seed {SEED}, {TEST_CLS:,} held-out rows labelled "
          f"{'by the noiseless boundary' if a.label_noise is None else f'as the training rows, noise SD {a.label_noise}'}"
          "; times: client wall time of the"
          " request (server's training.duration_ms)\n")
    print("| operation | n | mercer | scikit-learn | ratio | target | met? |\n|---|---:|---|---|---|---|---|")
    for r in rows:
        met = "–" if r["met"] is None else ("yes" if r["met"] else "**no**")
        print(f"| {r['operation']} | {r['n']:,} | {r['mercer']} | {r['scikit-learn']} | {r['ratio']} "
              f"| {r['target']} | {met} |")
    if not n_cmp:
        print("scikit-learn: skipped" + (" (--skip-sklearn)" if a.skip_sklearn else ": not enough memory"))
    return rows


def table(R, n, m, small, n_cmp, a):
    rows = []

    def row(op, k, merc, sk="–", ratio="–", tgt="–", met=None):
        rows.append(dict(zip(("operation", "n", "mercer", "scikit-learn", "ratio", "target", "met"),
                             (op, k, merc, sk, ratio, tgt, met))))

    def secs(key):
        ms = R.get(key + "_server_ms")
        return f"{R[key + '_s']:.2f} s" + ("" if ms is None else f" (server {ms / 1e3:.2f} s)")

    row(f"CSV upload, POST /datasets ({R['csv_bytes'] / MB:.0f} MB)", n,
        f"{R['upload_s']:.2f} s ({R['csv_bytes'] / MB / R['upload_s']:.0f} MB/s)", tgt="<= 5 s", met=R["upload_s"] <= 5)
    row("  peak RSS (VmHWM)", n, f"{R['upload_rss'] / MB:.0f} MB", tgt="<= 400 MB", met=R["upload_rss"] <= 400 * MB)
    for key, name, limit in (("krr", "kernel ridge nystrom fit", 30), ("gp", "GP nystrom (SGPR) fit", 30),
                             ("gp_opt", "GP nystrom fit, optimize", 120)):
        if key + "_s" in R:
            row(f"{name} (M={m}, {a.selection})", n, secs(key), tgt=f"<= {limit} s", met=R[key + "_s"] <= limit)
            ok = None if key == "gp_opt" else R[key + "_rss"] <= 2000 * MB
            row("  peak RSS (VmHWM)", n, f"{R[key + '_rss'] / MB:.0f} MB", tgt="–" if ok is None else "<= 2 GB", met=ok)
            row("  held-out RMSE", n, f"{R[key + '_rmse']:.4f}")
    ex, ny, big = R["exact_small_rmse"], R["nystrom_small_rmse"], R["krr_rmse"]
    row("held-out RMSE, kernel ridge exact", small, f"{ex:.4f}; fit {secs('exact_small')}")
    row(f"held-out RMSE, kernel ridge nystrom (M={m}, {a.selection}), same rows", small,
        f"{ny:.4f}; fit {secs('nystrom_small')}", ratio=f"{ny / ex:.3f}", tgt="<= 1.05 x exact", met=ny <= 1.05 * ex)
    row(f"held-out RMSE, nystrom on {n:,} (above) vs exact on {small:,}", n, f"{big:.4f}", ratio=f"{big / ex:.3f}",
        tgt="< 1 x exact", met=big < ex)
    if n_cmp:
        row(f"kernel ridge nystrom fit vs Nystroem+Ridge (M={m}, uniform)", n_cmp, secs("cmp"), f"{R['sk_s']:.2f} s",
            f"{R['sk_s'] / R['cmp_s']:.2f}x faster", ">= 2x faster", R["sk_s"] >= 2 * R["cmp_s"])
        row("  held-out RMSE of those fits", n_cmp, f"{R['cmp_rmse']:.4f}", f"{R['sk_rmse']:.4f}",
            f"{R['cmp_rmse'] / R['sk_rmse']:.3f}", "<= 1.01 x sklearn", R["cmp_rmse"] <= 1.01 * R["sk_rmse"])
    print(f"\nd = {D}, rbf length_scale {LENGTH_SCALE}, lambda = noise {LAM}, seed {SEED}, {TEST_N:,} held-out rows;"
          f" nystrom inducing_selection {a.selection}; times: client wall time of the request (server's"
          " training.duration_ms)\n")
    print("| operation | n | mercer | scikit-learn | ratio | target | met? |\n|---|---:|---|---|---|---|---|")
    for r in rows:
        met = "–" if r["met"] is None else ("yes" if r["met"] else "**no**")
        print(f"| {r['operation']} | {r['n']:,} | {r['mercer']} | {r['scikit-learn']} | {r['ratio']} "
              f"| {r['target']} | {met} |")
    print()
    for key, what in (("gp", "given hyperparameters"), ("gp_opt", "optimised")):
        if key + "_training" in R:
            kern, params = R[key + "_fitted"]
            print(f"GP evidence lower bound, {what}: {R[key + '_training'].get('evidence_lower_bound')} "
                  f"(length_scale {(kern or {}).get('length_scale')}, noise {(params or {}).get('noise')})")
    mem = f"60% of MemAvailable ({R['mem_available_bytes'] / MB:.0f} MB)"
    if a.skip_sklearn:
        print("scikit-learn: skipped (--skip-sklearn)")
    elif not n_cmp:
        print(f"scikit-learn: skipped: 3 n M 8 bytes is over {mem} even at n = 100,000")
    elif n_cmp != n:
        print(f"scikit-learn, and the mercer fit beside it, at n = {n_cmp:,}: 3 n M 8 bytes at {n:,} is over {mem}")
    return rows


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Cross-validated model search: mercer's `search` (POST /models) against scikit-learn's
GridSearchCV on the same rows, grids and folds; and mercer's peak memory during a search
against one plain fit.

    python3 scripts/bench_search.py --mercer target/release/mercer [--only svc|krr|memory ...]
        [--repeat 1] [--small] [--krr-n N] [--json OUT.json]

Benchmarks (--only, repeatable; default all three):
  svc     grid.py's default grid, C = 2^-5, 2^-3 .. 2^15 (11) x rbf gamma = 2^3, 2^1 .. 2^-15
          (10): 110 candidates, 5-fold, n = 2000, d = 20 (make_classification, random_state 0,
          standardized), accuracy: mercer's svm (params.cache_mb 200, as SVC's cache_size)
          against GridSearchCV(SVC(), ..., cv=StratifiedKFold(5), n_jobs=2).
  krr     kernel ridge, 30 lambdas (1e-4 .. 10) x 5 rbf gammas (0.005 .. 0.5, length scales
          10 .. 1 on standardized d = 8 rows), 5-fold, n = 4000, y = sum_j sin(x_j) + noise,
          r2: mercer against GridSearchCV(KernelRidge(kernel="rbf"), ..., cv=KFold(5), n_jobs=2);
          then mercer with cv "loo" (closed form; no scikit-learn row: brute force would be
          600,000 fits). Its best candidate is checked against a numpy closed-form LOO
          (hat-matrix identity, one eigendecomposition per gamma; not timed as a row).
  memory  mercer's VmHWM (/proc/PID/status, lifetime peak RSS) during the svc search against
          one plain fit of the search's best candidate, each on a freshly started server
          (the svc rows' servers are fresh too, so their peaks are reused when both run),
          and the RSS right after start.
--small: n = 300 (svc) / 400 (krr) and smaller grids, a quick check of the script (seconds).
The full run takes minutes and uses both cores of a 2-core machine.

Times: client wall time of the POST (the body is encoded before the clock starts; data
generation excluded), the server's training.duration_ms beside it, and GridSearchCV.fit's
wall time (refit=True, as mercer refits the best); medians over --repeat runs. The ratio is
scikit-learn / mercer. "best agrees": mercer's best_values mapped onto GridSearchCV's
best_params_; "tie" when they differ only by tie-breaking (both sides score the two picks
within 1e-9 of each other: mercer takes the earlier candidate in its own order, pointers
sorted by code point, /kernel/gamma varying slowest; scikit-learn the earlier in
ParameterGrid's, C or alpha slowest). Anything else is a warning on stderr.

Every mercer measurement gets a freshly started server (scripts/bench_server.py: a free
loopback port, MERCER_DATA_DIR "" so nothing is stored, inherited MERCER_* variables
dropped), polled on /readyz until it answers 200 and stopped by PID (SIGTERM, SIGKILL
after 60 s); scikit-learn runs while no server does. Without --mercer only the scikit-learn side runs. The Python is
$MERCER_BENCH_PYTHON, else this python3 if it has numpy, scipy and scikit-learn, else the
peer's venv (~/.cache/mercer-peer-venv); the script re-executes itself under it.
"""
import os
import sys


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_python  # noqa: E402

bench_python.ensure("bench_search", ["numpy", "scipy", "sklearn"])

import argparse, copy, itertools, json, time  # noqa: E402,E401
import numpy as np  # noqa: E402
from bench_server import Server, begin, median, say, secs  # noqa: E402

MB = 1e6  # decimal megabytes
TIE = 1e-9  # mean scores this close (relative, at least absolute) count as a tie
KRR_NOISE_SD = 0.5


def grids(small):
    """Each benchmark's rows and search space (pointer -> log_grid [lo, hi, count])."""
    if small:
        return {"svc": dict(n=300, space={"/params/c": [2.0 ** -5, 2.0 ** 15, 6], "/kernel/gamma": [2.0 ** 3, 2.0 ** -15, 4]}),
                "krr": dict(n=400, space={"/params/lambda": [1e-4, 10.0, 6], "/kernel/gamma": [0.005, 0.5, 3]})}
    return {"svc": dict(n=2000, space={"/params/c": [2.0 ** -5, 2.0 ** 15, 11], "/kernel/gamma": [2.0 ** 3, 2.0 ** -15, 10]}),
            "krr": dict(n=4000, space={"/params/lambda": [1e-4, 10.0, 30], "/kernel/gamma": [0.005, 0.5, 5]})}


SK_NAME = {"/params/c": "C", "/params/lambda": "alpha", "/kernel/gamma": "gamma"}


def svc_data(n):
    from sklearn.datasets import make_classification
    from sklearn.preprocessing import StandardScaler
    X, y = make_classification(n_samples=n, n_features=20, n_informative=10, random_state=0)
    return StandardScaler().fit_transform(X), y


def krr_data(n):
    from sklearn.preprocessing import StandardScaler
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, 8))
    y = np.sin(X).sum(axis=1) + KRR_NOISE_SD * rng.standard_normal(n)
    return StandardScaler().fit_transform(X), y


def expand(space):
    """mercer's candidates in its order: pointers sorted by code point, the first varying
    slowest, each log_grid as numpy.geomspace."""
    pointers = sorted(space)
    return [dict(zip(pointers, combo))
            for combo in itertools.product(*(np.geomspace(*space[p][:2], int(space[p][2])).tolist() for p in pointers))]


def mercer_body(model, X, y, space, cv, scoring):
    if model == "svm":
        kernel, params = {"type": "rbf", "gamma": 1.0}, {"c": 1.0, "cache_mb": 200}
    else:
        kernel, params = {"type": "rbf", "gamma": 1.0}, {"lambda": 1.0, "approximation": "exact"}
    body = {"model": model, "kernel": kernel, "params": params, "x": X.tolist(), "y": y.tolist()}
    if space is not None:
        body["search"] = {"space": {p: {"log_grid": v} for p, v in space.items()}, "cv": cv, "scoring": scoring}
    return body


def set_pointers(body, values):
    """A copy of body with each "/kernel/..." or "/params/..." pointer set to its value."""
    out = copy.deepcopy(body)
    for pointer, v in values.items():
        parts = pointer.lstrip("/").split("/")
        place = out
        for part in parts[:-1]:
            place = place[part]
        place[parts[-1]] = v
    return out


class Bench:
    def __init__(self, a, work):
        self.a, self.work, self.runs, self.warm = a, work, 0, False
        self.binary = os.path.abspath(a.mercer) if a.mercer else None

    def mercer(self, label, payload):
        """One POST /models on a fresh server: wall s, server s, RSS after start, VmHWM, resource."""
        self.runs += 1
        with Server(self.binary, os.path.join(self.work, f"server-{self.runs}-{label}.log"),
                    {"MERCER_MAX_SEARCH_FITS": "1000000"}) as s:
            wall, res = s.fit(payload)
            peak = s.peak_rss()
            start = s.start_rss
        ms = (res.get("training") or {}).get("duration_ms")
        say(f"mercer {label}: {wall:.2f} s (server {ms / 1e3 if ms is not None else float('nan'):.2f} s), "
            f"RSS after start {start / MB:.0f} MB, peak {peak / MB:.0f} MB")
        return {"wall_s": wall, "server_s": None if ms is None else ms / 1e3, "start_rss": start, "peak_rss": peak,
                "search": (res.get("training") or {}).get("search"), "kernel": res.get("kernel"),
                "params": res.get("params")}

    def sklearn(self, label, estimator, grid, cv, scoring, X, y):
        from sklearn.model_selection import GridSearchCV
        if not self.warm:  # joblib's two worker processes started before the clock, as the server is
            from sklearn.dummy import DummyClassifier
            GridSearchCV(DummyClassifier(), {"strategy": ["prior", "uniform"]}, cv=2, n_jobs=2).fit(
                np.zeros((8, 1)), np.arange(8) % 2)
            self.warm = True
        gs = GridSearchCV(estimator, grid, cv=cv, scoring=scoring, n_jobs=2)
        t = time.perf_counter()
        gs.fit(X, y)
        wall = time.perf_counter() - t
        cvr = gs.cv_results_
        say(f"scikit-learn {label}: {wall:.2f} s, best {short(gs.best_params_)} score {gs.best_score_:.6g}")
        return {"wall_s": wall, "params": [dict(p) for p in cvr["params"]],
                "mean_score": cvr["mean_test_score"].tolist(), "best_index": int(gs.best_index_),
                "best_params": {k: float(v) for k, v in gs.best_params_.items()}, "best_score": float(gs.best_score_)}


def to_mercer_index(space, values):
    """Index into mercer's order of a candidate given as {pointer: value}; None when a value is not on the grid."""
    index = 0
    for p in sorted(space):
        axis = np.geomspace(*space[p][:2], int(space[p][2]))
        i = int(np.argmin(np.abs(axis - values[p])))
        if abs(axis[i] - values[p]) > 1e-9 * abs(values[p]):
            return None
        index = index * len(axis) + i
    return index


def agreement(space, m_search, ref_means, ref_best, ref_name):
    """Compares mercer's best with a reference's (both in mercer's order). Returns a dict
    with "agrees" in yes / tie / no, and warns on stderr unless yes or tie."""
    cands = m_search["candidates"]
    want = expand(space)
    out = {"mercer_best_index": m_search["best_index"], "reference_best_index": ref_best,
           "mercer_best_values": m_search["best_values"], "reference_best_values": want[ref_best]}
    # mercer's grid values against numpy.geomspace's
    dev = max(abs(c["values"][p] - w[p]) / abs(w[p]) for c, w in zip(cands, want) for p in w) if len(cands) == len(want) else None
    out["grid_max_rel_diff"] = dev
    if dev is None or dev > 1e-12:
        say(f"WARNING: mercer's candidates differ from numpy.geomspace's grid (max relative difference {dev}; "
            f"{len(cands)} candidates for {len(want)})")
        out["agrees"] = "no"
        return out
    m_means = np.array([np.nan if c["mean_score"] is None else c["mean_score"] for c in cands], dtype=float)
    ref = np.asarray(ref_means, dtype=float)
    out["max_abs_mean_score_diff"] = float(np.nanmax(np.abs(m_means - ref)))
    mb, rb = m_search["best_index"], ref_best
    close = lambda u, v: abs(u - v) <= TIE * max(1.0, abs(u), abs(v))  # noqa: E731
    if mb == rb:
        out["agrees"] = "yes"
    elif close(ref[mb], ref[rb]) and close(m_means[mb], m_means[rb]):
        out["agrees"] = "tie"
        say(f"note: mercer's best {cands[mb]['values']} and {ref_name}'s {want[rb]} differ only by tie-breaking "
            f"(mean scores: mercer {float(m_means[mb])!r} / {float(m_means[rb])!r}, {ref_name} {float(ref[mb])!r} / {float(ref[rb])!r})")
    else:
        out["agrees"] = "no"
        say(f"WARNING: mercer's best {cands[mb]['values']} (mercer score {float(m_means[mb])!r}, {ref_name} {float(ref[mb])!r}) "
            f"is not {ref_name}'s best {want[rb]} ({ref_name} score {float(ref[rb])!r}, mercer {float(m_means[rb])!r})")
    return out


def sklearn_in_mercer_order(space, sk):
    """scikit-learn's mean scores rearranged into mercer's order, and its best's index there."""
    means = np.full(len(expand(space)), np.nan)
    back = {v: k for k, v in SK_NAME.items()}
    at = []
    for params, m in zip(sk["params"], sk["mean_score"]):
        j = to_mercer_index(space, {back[k]: v for k, v in params.items()})
        if j is None:
            raise RuntimeError(f"scikit-learn candidate {params} is not on mercer's grid")
        means[j] = m
        at.append(j)
    return means, at[sk["best_index"]]


def loo_reference(X, y, space):
    """Closed-form leave-one-out R^2 of exact kernel ridge for every candidate, in mercer's
    order: per gamma K = Q diag(w) Q', H = Q diag(w / (w + lambda)) Q', residual
    (y - H y) / (1 - diag H); R^2 of the n held-out predictions at once."""
    from scipy.spatial.distance import cdist
    d2 = cdist(X, X, "sqeuclidean")
    ss = float(((y - y.mean()) ** 2).sum())
    scores = {}
    for g in np.geomspace(*space["/kernel/gamma"][:2], int(space["/kernel/gamma"][2])):
        w, Q = np.linalg.eigh(np.exp(-g * d2))
        Qy, Q2 = Q.T @ y, Q * Q
        for lam in np.geomspace(*space["/params/lambda"][:2], int(space["/params/lambda"][2])):
            s = w / (w + lam)
            e = (y - Q @ (s * Qy)) / (1.0 - Q2 @ s)
            scores[(g, lam)] = 1.0 - float(e @ e) / ss
    means = [scores[(c["/kernel/gamma"], c["/params/lambda"])] for c in expand(space)]
    best = 0
    for i, m in enumerate(means):  # mercer's rule: highest, the earliest on ties
        if m > means[best]:
            best = i
    return means, best


def combined(agreements):
    """One verdict over the repeats: the worst."""
    if not agreements:
        return None
    for v in ("no", "tie"):
        if v in agreements:
            return v
    return "yes"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mercer", metavar="PATH", help="the mercer binary (without it only scikit-learn runs)")
    ap.add_argument("--only", action="append", choices=("svc", "krr", "memory"),
                    help="run only this benchmark (repeatable); default all")
    ap.add_argument("--repeat", type=int, default=1, help="runs per measurement; medians reported (default 1)")
    ap.add_argument("--krr-n", type=int, help="rows of the krr benchmark (default 4000)")
    ap.add_argument("--small", action="store_true", help="n = 300 / 400 and smaller grids: a quick check")
    ap.add_argument("--json", metavar="OUT.json")
    a = ap.parse_args()
    if a.repeat < 1:
        ap.error("--repeat must be at least 1")
    if a.mercer and not os.access(a.mercer, os.X_OK):
        ap.error(f"{a.mercer} is not executable")
    only = set(a.only or ("svc", "krr", "memory"))
    work = begin("mercer-bench-search.")  # SIGTERM exits through the finally blocks, which stop servers
    G = grids(a.small)
    if a.krr_n:
        G["krr"]["n"] = a.krr_n
    b = Bench(a, work)
    R = {"small": a.small, "repeat": a.repeat, "grids": G, "python": sys.executable,
         "sklearn": __import__("sklearn").__version__, "numpy": np.__version__, "mercer": b.binary}

    if "svc" in only or ("memory" in only and b.binary):
        from sklearn.model_selection import StratifiedKFold
        from sklearn.svm import SVC
        g = G["svc"]
        X, y = svc_data(g["n"])
        payload = json.dumps(mercer_body("svm", X, y, g["space"], 5, "accuracy")).encode()
        sk_grid = {SK_NAME[p]: np.geomspace(*v[:2], int(v[2])).tolist() for p, v in g["space"].items()}
        m_runs, s_runs = [], []
        for r in range(a.repeat):
            if b.binary:
                m_runs.append(b.mercer("svc-search", payload))
            if "svc" in only:
                s_runs.append(b.sklearn("svc", SVC(kernel="rbf", tol=1e-3, cache_size=200), sk_grid,
                                        StratifiedKFold(5), "accuracy", X, y))
        agrees = []
        for m, s in zip(m_runs, s_runs):
            means, best = sklearn_in_mercer_order(g["space"], s)
            m["agreement"] = agreement(g["space"], m["search"], means, best, "scikit-learn")
            agrees.append(m["agreement"]["agrees"])
        R["svc"] = {"mercer": m_runs, "sklearn": s_runs, "agrees": combined(agrees)}

        if "memory" in only and b.binary:
            best = m_runs[-1]["search"]["best_values"]
            plain = json.dumps(set_pointers(mercer_body("svm", X, y, None, None, None), best)).encode()
            p_runs = [b.mercer("svc-plain-fit", plain) for _ in range(a.repeat)]
            R["memory"] = {"best_values": best, "search": [{k: m[k] for k in ("wall_s", "server_s", "start_rss", "peak_rss")}
                                                           for m in m_runs], "plain": p_runs}
        del X, y, payload

    if "krr" in only:
        from sklearn.kernel_ridge import KernelRidge
        from sklearn.model_selection import KFold
        g = G["krr"]
        X, y = krr_data(g["n"])
        p5 = json.dumps(mercer_body("kernel_ridge", X, y, g["space"], 5, "r2")).encode()
        ploo = json.dumps(mercer_body("kernel_ridge", X, y, g["space"], "loo", "r2")).encode()
        sk_grid = {SK_NAME[p]: np.geomspace(*v[:2], int(v[2])).tolist() for p, v in g["space"].items()}
        m_runs, l_runs, s_runs = [], [], []
        for r in range(a.repeat):
            if b.binary:
                m_runs.append(b.mercer("krr-5fold", p5))
                l_runs.append(b.mercer("krr-loo", ploo))
            s_runs.append(b.sklearn("krr", KernelRidge(kernel="rbf"), sk_grid, KFold(5), "r2", X, y))
        agrees, lagrees = [], []
        for m, s in zip(m_runs, s_runs):
            means, best = sklearn_in_mercer_order(g["space"], s)
            m["agreement"] = agreement(g["space"], m["search"], means, best, "scikit-learn")
            agrees.append(m["agreement"]["agrees"])
        R["krr"] = {"mercer": m_runs, "sklearn": s_runs, "agrees": combined(agrees)}
        if l_runs:
            t = time.perf_counter()
            ref_means, ref_best = loo_reference(X, y, g["space"])
            ref_s = time.perf_counter() - t
            say(f"numpy closed-form LOO reference: {ref_s:.2f} s, best {short(expand(g['space'])[ref_best])} "
                f"R^2 {ref_means[ref_best]:.6g}")
            for m in l_runs:
                m["agreement"] = agreement(g["space"], m["search"], ref_means, ref_best, "numpy closed-form LOO")
                lagrees.append(m["agreement"]["agrees"])
            R["krr_loo"] = {"mercer": l_runs, "reference_s": ref_s, "reference_best_values": expand(g["space"])[ref_best],
                            "reference_best_score": ref_means[ref_best], "agrees": combined(lagrees)}

    rows = table(R, G, only, b.binary)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"results": R, "table": rows}, f, indent=2)
    import shutil
    shutil.rmtree(work, ignore_errors=True)
    bad = [k for k in ("svc", "krr", "krr_loo") if (R.get(k) or {}).get("agrees") == "no"]
    if bad:
        say(f"WARNING: the best candidates disagree in {', '.join(bad)} (see above)")


def short(values):
    """{pointer: value} with values to 6 significant digits, for reading."""
    return "–" if not values else "{" + ", ".join(f"{p}: {v:.6g}" for p, v in values.items()) + "}"


def table(R, G, only, binary):
    rows = []

    def row(name, merc, sk, ratio, agrees):
        rows.append({"benchmark": name, "mercer s": merc, "scikit-learn s": sk, "ratio": ratio, "best agrees": agrees})

    def cands(space):
        return " x ".join(str(int(space[p][2])) for p in sorted(space, key=lambda p: SK_NAME[p]))

    if "svc" in R and "svc" in only:
        g, r = G["svc"], R["svc"]
        mw, sw = median(r["mercer"], "wall_s"), median(r["sklearn"], "wall_s")
        row(f"SVC grid search, {cands(g['space'])} (C x gamma), 5-fold, n = {g['n']:,}, d = 20", secs(r["mercer"]),
            secs(r["sklearn"]), f"{sw / mw:.2f}x" if mw and sw else "–", r["agrees"] or "–")
    if "krr" in R:
        g, r = G["krr"], R["krr"]
        mw, sw = median(r["mercer"], "wall_s"), median(r["sklearn"], "wall_s")
        row(f"kernel ridge grid search, {cands(g['space'])} (lambda x gamma), 5-fold, n = {g['n']:,}, d = 8",
            secs(r["mercer"]), secs(r["sklearn"]), f"{sw / mw:.2f}x" if mw and sw else "–", r["agrees"] or "–")
        if "krr_loo" in R:
            lw = median(R["krr_loo"]["mercer"], "wall_s")
            row(f"kernel ridge, same grid, leave-one-out (closed form), n = {g['n']:,}", secs(R["krr_loo"]["mercer"]),
                f"– (5-fold: {sw:.2f})", f"{sw / lw:.2f}x (scikit-learn 5-fold / mercer LOO); "
                f"mercer LOO / mercer 5-fold {lw / mw:.2f}", f"{R['krr_loo']['agrees']} (numpy closed-form LOO)")
    if rows:
        print("\ntimes: median client wall seconds of the request (server's training.duration_ms); ratio: scikit-learn / "
              f"mercer; scikit-learn {R['sklearn']}, n_jobs=2{'; --small' if R['small'] else ''}\n")
        print("| benchmark | mercer s | scikit-learn s | ratio | best agrees |\n|---|---|---|---|---|")
        for x in rows:
            print(f"| {x['benchmark']} | {x['mercer s']} | {x['scikit-learn s']} | {x['ratio']} | {x['best agrees']} |")
        print()
    for key, label in (("svc", "SVC"), ("krr", "kernel ridge 5-fold"), ("krr_loo", "kernel ridge LOO")):
        for m in (R.get(key) or {}).get("mercer", [])[-1:]:
            ag = m.get("agreement")
            if not ag:
                continue
            s = m["search"]
            print(f"{label}: mercer best {short(s['best_values'])} score {s['best_score']:.6g} "
                  f"(candidate {s['best_index']} of {s['n_candidates']}, {s['n_fits']} fits); reference best "
                  f"{short(ag.get('reference_best_values'))}; max |mean score difference| over candidates "
                  f"{ag.get('max_abs_mean_score_diff', float('nan')):.3g}")
    if "memory" in R:
        mem = R["memory"]
        srch, plain = mem["search"], mem["plain"]
        ps, pp = median(srch, "peak_rss"), median(plain, "peak_rss")
        print(f"\nmercer memory (VmHWM of a freshly started process; the plain fit: {short(mem['best_values'])}, "
              "the search's best)\n")
        print("| mercer process | RSS after start MB | peak RSS (VmHWM) MB | wall s (server s) |\n|---|---|---|---|")
        n_c = len(expand(G["svc"]["space"]))
        print(f"| SVC search, {n_c} candidates x 5 folds | {median(srch, 'start_rss') / MB:.0f} | {ps / MB:.0f} "
              f"| {secs(srch)} |")
        print(f"| one plain SVC fit | {median(plain, 'start_rss') / MB:.0f} | {pp / MB:.0f} | {secs(plain)} |")
        print(f"\nsearch peak / plain-fit peak: {ps / pp:.2f}x")
        rows.append({"benchmark": "memory", "search_peak_rss_mb": ps / MB, "plain_peak_rss_mb": pp / MB,
                     "search_start_rss_mb": median(srch, "start_rss") / MB,
                     "plain_start_rss_mb": median(plain, "start_rss") / MB, "ratio": ps / pp})
    elif "memory" in only and not binary:
        print("memory: skipped (needs --mercer)")
    return rows


if __name__ == "__main__":
    main()

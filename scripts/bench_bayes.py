#!/usr/bin/env python3
"""Bayesian optimisation, measured: studies on Branin and Hartmann6 against random search
(and Optuna's GPSampler when it is installed), suggest latency at 500 told trials, and
`search.method: "bayes"` against grid.py's grid on an SVC.

    python3 scripts/bench_bayes.py --mercer target/release/mercer [--only studies|latency|svc ...]
        [--seeds 10] [--json OUT.json] [--no-optuna]

Benchmarks (--only, repeatable; default all four):
  studies  Branin (2-D, minimum 0.397887) and Hartmann6 (6-D, minimum -3.32237), minimised,
           50 evaluations with 8 initial random ones, --seeds seeds: through the Studies API
           over HTTP (suggest, evaluate here, tell); random search (uniform draws, seeded); and
           Optuna's GPSampler(seed, n_startup_trials=8) when `optuna` and `torch` import (they
           are a large download: never in CI). Reported: the median and quartiles over seeds
           of the final simple regret (best found minus the minimum), and for Hartmann6 how
           many seeds end in the -3.20 local minimum's basin (best > -3.25).
  latency  a 6-D study (Hartmann6's cube) warm-started with 500 told trials (POST
           /studies/{id}/trials), then 60 rounds of suggest (timed) and tell (not timed): the
           p50 and p90 of POST /studies/{id}/suggest, client wall time. Optuna's time per
           GPSampler suggestion at 500 trials beside it when installed.
  svc      an SVC on scikit-learn's breast cancer set (569 rows, 30 features, standardised),
           5-fold accuracy: grid.py's grid (C = 2^-5..2^15 step 4x, gamma = 2^3..2^-15 step
           1/4: 110 candidates, 550 fold fits) against `bayes` with 27 candidates (<= 1/4 of
           the fold fits) on the same log ranges, seeds 0..4: each best mean score against
           the grid's; and scikit-learn's GridSearchCV over the same grid (one core), its
           wall time against mercer's grid and bayes searches.

  batches  Branin and Hartmann6, 48 evaluations (8 initial) per seed: single suggestions
           against batches of 4 (suggest count 4, evaluate, tell), the median regret of each.

Every mercer measurement gets a freshly started server (scripts/bench_server.py). The
Python is $MERCER_BENCH_PYTHON, else this python3 if it has numpy and scikit-learn.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_python  # noqa: E402

bench_python.ensure("bench_bayes", ["numpy", "sklearn"])

import argparse, json, math, time  # noqa: E402,E401
import numpy as np  # noqa: E402
from bench_server import Server, begin, say  # noqa: E402

BRANIN_MIN = 0.397887357729739
HARTMANN6_MIN = -3.32236801141551
A6 = np.array([[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14], [3, 3.5, 1.7, 10, 17, 8], [17, 8, 0.05, 10, 0.1, 14]])
P6 = 1e-4 * np.array([[1312, 1696, 5569, 124, 8283, 5886], [2329, 4135, 8307, 3736, 1004, 9991],
                      [2348, 1451, 3522, 2883, 3047, 6650], [4047, 8828, 8732, 5743, 1091, 381]])
ALPHA6 = np.array([1.0, 1.2, 3.0, 3.2])


def branin(v):
    x1, x2 = v["x1"], v["x2"]
    b, c = 5.1 / (4 * math.pi**2), 5 / math.pi
    return (x2 - b * x1**2 + c * x1 - 6) ** 2 + 10 * (1 - 1 / (8 * math.pi)) * math.cos(x1) + 10


def hartmann6(v):
    x = np.array([v[f"x{i}"] for i in range(1, 7)])
    return float(-(ALPHA6 * np.exp(-(A6 * (x - P6) ** 2).sum(axis=1))).sum())


PROBLEMS = {
    "branin": (branin, {"x1": (-5.0, 10.0), "x2": (0.0, 15.0)}, BRANIN_MIN),
    "hartmann6": (hartmann6, {f"x{i}": (0.0, 1.0) for i in range(1, 7)}, HARTMANN6_MIN),
}


def call(server, method, path, body=None, want=200):
    st, out = server.call(method, path, json.dumps(body).encode() if body is not None else None,
                          {"Content-Type": "application/json"})
    if st != want:
        raise RuntimeError(f"{method} {path}: {st}: {out[:500]!r}")
    return json.loads(out) if out else None


def mercer_study(server, f, bounds, seed, n, initial):
    space = {k: {"uniform": [lo, hi]} for k, (lo, hi) in bounds.items()}
    study = call(server, "POST", "/studies", {"space": space, "seed": seed, "initial": initial}, 201)
    best = math.inf
    for _ in range(n):
        t = call(server, "POST", f"/studies/{study['id']}/suggest", {"count": 1})["trials"][0]
        y = f(t["values"])
        best = min(best, y)
        call(server, "POST", f"/studies/{study['id']}/trials/{t['id']}", {"value": y})
    call(server, "DELETE", f"/studies/{study['id']}", want=204)
    return best


def mercer_batched_study(server, f, bounds, seed, n, initial, q):
    """As mercer_study, suggesting `q` trials at a time (all pending until told)."""
    space = {k: {"uniform": [lo, hi]} for k, (lo, hi) in bounds.items()}
    study = call(server, "POST", "/studies", {"space": space, "seed": seed, "initial": initial}, 201)
    best, done = math.inf, 0
    while done < n:
        trials = call(server, "POST", f"/studies/{study['id']}/suggest", {"count": min(q, n - done)})["trials"]
        for t in trials:
            y = f(t["values"])
            best = min(best, y)
            call(server, "POST", f"/studies/{study['id']}/trials/{t['id']}", {"value": y})
        done += len(trials)
    call(server, "DELETE", f"/studies/{study['id']}", want=204)
    return best


def bench_batches(args, work):
    """Batches of 4 against single suggestions, the same number of evaluations (48, 8
    initial): the median regret over seeds of each."""
    out = {}
    for name, (f, bounds, minimum) in PROBLEMS.items():
        row = {"single": [], "batch4": []}
        with Server(args.mercer, os.path.join(work, f"batches-{name}.log")) as server:
            for seed in range(args.seeds):
                row["single"].append(mercer_study(server, f, bounds, seed, 48, 8) - minimum)
                row["batch4"].append(mercer_batched_study(server, f, bounds, seed, 48, 8, 4) - minimum)
                say(f"{name} seed {seed}: single {row['single'][-1]:.4g}, batches of 4 {row['batch4'][-1]:.4g}")
        out[name] = {k: {**quartiles(v), "runs": v} for k, v in row.items()}
        say(f"{name}: median regret single {out[name]['single']['median']:.4g}, "
            f"batches of 4 {out[name]['batch4']['median']:.4g}")
    return out


def random_search(f, bounds, seed, n):
    rng = np.random.default_rng(seed)
    return min(f({k: rng.uniform(lo, hi) for k, (lo, hi) in bounds.items()}) for _ in range(n))


def optuna_study(f, bounds, seed, n, initial):
    import optuna  # noqa: F401  (imported here: optional)

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = optuna.samplers.GPSampler(seed=seed, n_startup_trials=initial)
    study = optuna.create_study(sampler=sampler, direction="minimize")
    study.optimize(lambda t: f({k: t.suggest_float(k, lo, hi) for k, (lo, hi) in bounds.items()}), n_trials=n)
    return study.best_value


NO_OPTUNA = "--no-optuna" in sys.argv


def have_optuna():
    if NO_OPTUNA:
        return False
    try:
        import optuna  # noqa: F401
        import torch  # noqa: F401
        return hasattr(optuna.samplers, "GPSampler")
    except Exception:  # absent, or a torch install missing its libraries
        return False


def quartiles(xs):
    q = np.percentile(xs, [25, 50, 75])
    return {"p25": float(q[0]), "median": float(q[1]), "p75": float(q[2])}


def bench_studies(args, work):
    out = {}
    optuna_ok = have_optuna()
    if not optuna_ok:
        say("optuna with torch is not installed: its column is left out")
    for name, (f, bounds, minimum) in PROBLEMS.items():
        row = {"mercer": [], "random": [], "optuna": []}
        with Server(args.mercer, os.path.join(work, f"studies-{name}.log")) as server:
            for seed in range(args.seeds):
                t = time.perf_counter()
                row["mercer"].append(mercer_study(server, f, bounds, seed, 50, 8) - minimum)
                say(f"{name} seed {seed}: mercer regret {row['mercer'][-1]:.4g} ({time.perf_counter() - t:.1f} s)")
        for seed in range(args.seeds):
            row["random"].append(random_search(f, bounds, seed, 50) - minimum)
            if optuna_ok:
                t = time.perf_counter()
                row["optuna"].append(optuna_study(f, bounds, seed, 50, 8) - minimum)
                say(f"{name} seed {seed}: optuna regret {row['optuna'][-1]:.4g} ({time.perf_counter() - t:.1f} s)")
        res = {k: {**quartiles(v), "runs": v} for k, v in row.items() if v}
        if name == "hartmann6":
            for k, v in row.items():
                if v:
                    res[k]["stuck_near_minus_3_20"] = sum(r + minimum > -3.25 for r in v)
        out[name] = res
    return out


def bench_latency(args, work):
    _, bounds, _ = PROBLEMS["hartmann6"]
    rng = np.random.default_rng(0)
    with Server(args.mercer, os.path.join(work, "latency.log")) as server:
        space = {k: {"uniform": [lo, hi]} for k, (lo, hi) in bounds.items()}
        sid = call(server, "POST", "/studies", {"space": space, "initial": 1}, 201)["id"]
        for _ in range(500):
            v = {k: float(rng.uniform(lo, hi)) for k, (lo, hi) in bounds.items()}
            call(server, "POST", f"/studies/{sid}/trials", {"values": v, "value": hartmann6(v)}, 201)
        times = []
        for _ in range(60):
            t = time.perf_counter()
            trial = call(server, "POST", f"/studies/{sid}/suggest", {"count": 1})["trials"][0]
            times.append(time.perf_counter() - t)
            call(server, "POST", f"/studies/{sid}/trials/{trial['id']}", {"value": hartmann6(trial["values"])})
    res = {"p50_ms": 1e3 * float(np.median(times)), "p90_ms": 1e3 * float(np.percentile(times, 90)),
           "max_ms": 1e3 * max(times)}
    if have_optuna():
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study = optuna.create_study(sampler=optuna.samplers.GPSampler(seed=0), direction="minimize")
        for _ in range(500):
            v = {k: float(rng.uniform(lo, hi)) for k, (lo, hi) in bounds.items()}
            study.add_trial(optuna.trial.create_trial(
                params=v, distributions={k: optuna.distributions.FloatDistribution(lo, hi) for k, (lo, hi) in bounds.items()},
                value=hartmann6(v)))
        ot = []
        for _ in range(10):
            t = time.perf_counter()
            trial = study.ask({k: optuna.distributions.FloatDistribution(lo, hi) for k, (lo, hi) in bounds.items()})
            ot.append(time.perf_counter() - t)
            study.tell(trial, hartmann6(trial.params))
        res["optuna_p50_ms"] = 1e3 * float(np.median(ot))
    return res


def bench_svc(args, work):
    from sklearn.datasets import load_breast_cancer
    from sklearn.preprocessing import StandardScaler

    x, y = load_breast_cancer(return_X_y=True)
    x = StandardScaler().fit_transform(x)
    body = {"model": "svm", "x": x.tolist(), "y": y.tolist(), "params": {"cache_mb": 200}}
    grid = {"space": {"/params/c": {"log_grid": [2.0**-5, 2.0**15, 11]}, "/kernel/gamma": {"log_grid": [2.0**3, 2.0**-15, 10]}},
            "cv": 5, "scoring": "accuracy"}
    out = {}
    with Server(args.mercer, os.path.join(work, "svc.log")) as server:
        wall, m = server.fit(json.dumps({**body, "search": grid}).encode())
        out["grid"] = {"best": m["training"]["search"]["best_score"], "fits": m["training"]["search"]["n_fits"], "wall_s": wall}
        say(f"grid: best {out['grid']['best']:.4f} in {out['grid']['fits']} fold fits, {wall:.1f} s")
        out["bayes"] = []
        for seed in range(5):
            bayes = {"method": "bayes", "candidates": 27, "seed": seed, "cv": 5, "scoring": "accuracy",
                     "space": {"/params/c": {"log_uniform": [2.0**-5, 2.0**15]}, "/kernel/gamma": {"log_uniform": [2.0**-15, 2.0**3]}}}
            wall, m = server.fit(json.dumps({**body, "search": bayes}).encode())
            s = m["training"]["search"]
            out["bayes"].append({"seed": seed, "best": s["best_score"], "fits": s["n_fits"], "wall_s": wall})
            say(f"bayes seed {seed}: best {s['best_score']:.4f} in {s['n_fits']} fold fits, {wall:.1f} s")
    # scikit-learn's GridSearchCV over the same grid (one core, as its default n_jobs;
    # its stratified folds are not mercer's, so the best scores may differ slightly),
    # timed while no server runs.
    from sklearn.model_selection import GridSearchCV
    from sklearn.svm import SVC
    t = time.perf_counter()
    gs = GridSearchCV(SVC(kernel="rbf", cache_size=200),
                      {"C": 2.0 ** np.arange(-5, 16, 2), "gamma": 2.0 ** np.arange(3, -16, -2)}, cv=5,
                      scoring="accuracy").fit(x, y)
    out["gridsearchcv"] = {"best": float(gs.best_score_), "fits": 5 * len(gs.cv_results_["params"]),
                           "wall_s": time.perf_counter() - t}
    say(f"GridSearchCV: best {gs.best_score_:.4f} in {out['gridsearchcv']['fits']} fold fits, "
        f"{out['gridsearchcv']['wall_s']:.2f} s; mercer's grid {out['gridsearchcv']['wall_s'] / out['grid']['wall_s']:.1f}x "
        f"faster, bayes (median of seeds) "
        f"{out['gridsearchcv']['wall_s'] / sorted(b['wall_s'] for b in out['bayes'])[len(out['bayes']) // 2]:.1f}x")
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mercer", required=True)
    p.add_argument("--only", action="append", choices=["studies", "latency", "svc", "batches"])
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--json")
    p.add_argument("--no-optuna", action="store_true", help="leave Optuna out even when it is installed")
    args = p.parse_args()
    work = begin("bench-bayes-")
    only = args.only or ["studies", "latency", "svc", "batches"]
    out = {}
    for name, fn in (("studies", bench_studies), ("latency", bench_latency), ("svc", bench_svc),
                     ("batches", bench_batches)):
        if name in only:
            out[name] = fn(args, work)
    text = json.dumps(out, indent=1)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()

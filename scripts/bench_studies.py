#!/usr/bin/env python3
"""Studies with several objectives and with constraints (issue 53) against Optuna 5, and
`search.method: "bayes"` against "random" on searches whose scores have outliers (issue
53, item 1: a robust surrogate).

    python3 scripts/bench_studies.py --mercer target/release/mercer [--only mo|constrained|robust ...]
        [--seeds N] [--json OUT.json] [--optuna-cache FILE] [--no-optuna]

Benchmarks (--only, repeatable; default all three):
  mo           two objectives, both minimised, 50 evaluations (10 initial random ones),
               seeds 0..19: BraninCurrin (2-D, [0, 1]^2; BoTorch's: Branin rescaled to
               [-5, 10] x [0, 15], and Currin's exponential function; reference point
               [18, 6]) and ZDT1 with d = 4 ([0, 1]^4, reference [11, 11]). Methods:
               mercer (POST /studies with `objectives` and `reference`, then suggest 1,
               evaluate here, tell `{"values": {"f1", "f2"}}`), Optuna's
               GPSampler(seed, n_startup_trials=10), Optuna's NSGAIISampler(seed) (its
               default population is 50: within 50 evaluations every trial is its first
               generation's random draw) and random search (uniform, numpy seeded). Reported
               per problem: the median and quartiles over seeds of the hypervolume of the
               evaluated points (computed here, exactly in 2-D: the non-dominated points
               that dominate the reference), mercer's suggest latency (p50, p90, client wall
               time), and the seeds where the study's own `hypervolume` disagrees with this
               script's (should be none).
  constrained  Gelbart et al. (2014)'s constrained Branin: Branin over [-5, 10] x [0, 15]
               minimised subject to c = (x1 - 2.5)^2 + (x2 - 7.5)^2 <= 50 (constrained
               minimum 0.397887 at (pi, 2.275)), 50 evaluations (10 initial), seeds 0..39.
               mercer: `constraints: [{"name": "c", "max": 50}]`, tell `{"value": f,
               "values": {"c": c}}`, and GET /studies/{id}'s `best` checked (feasible, and
               the least feasible value told: violations counted, should be none);
               Optuna's GPSampler(seed, n_startup_trials=10) told c - 50 <= 0 by
               Trial.set_constraint (Optuna 5's replacement of constraints_func: the same
               runs); random search. Reported: the median and quartiles of the regret (best
               feasible value minus the minimum; null where no evaluation was feasible) and
               the number of runs with no feasible point.
  robust       three cross-validated searches (POST /models with `search`), 25 candidates,
               5-fold, `bayes` against `random`, search seeds 0..19, each best mean score:
               kernel_ridge on y = sin(4x) + N(0, 0.3^2), x uniform on [0, 2 pi] (200 rows,
               data seed 0), `lambda` in [1e-8, 1e2] and rbf `length_scale` in [1e-3, 1e2],
               r2; an SVC (`svm`) on scikit-learn's make_moons (300 rows, noise 0.3,
               random_state 0), `c` in [1e-6, 1e4] (a larger C takes seconds a fit) and rbf
               `gamma` in [1e-5, 1e5], accuracy; a gaussian_process (`optimize: false`) on
               the sine rows, `noise` in [1e-8, 1e2] and rbf `length_scale` in [1e-3, 1e3],
               mean_log_predictive_density. Every range log_uniform. Reported: the mean,
               median and quartiles of the best scores, the candidates whose fit failed and
               the searches' wall time.
--seeds N replaces each benchmark's number of seeds (0..N-1).

Optuna (with torch; a large download, never in CI) runs here when it imports and
--no-optuna is not given; its runs are slow, so each is cached in --optuna-cache (JSON,
default target/bench/optuna_cache.json, keyed benchmark/method/problem/seed, holding the
evaluated objective and constraint values, the wall seconds and Optuna's version) and a
cached run is reused. With --no-optuna (or without Optuna) only cached runs are reported.
Set OMP_NUM_THREADS=1 (torch's threads) to keep Optuna to one core.

A mercer build from before issue 53 refuses `objectives` and `constraints` (400 or 422 at
/objectives, /reference or /constraints): its `mo` and `constrained` columns are then left
out with a message. Every mercer measurement gets a freshly started server per problem
(scripts/bench_server.py). The Python is $MERCER_BENCH_PYTHON, else this python3 if it has
numpy and scikit-learn.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_python  # noqa: E402

bench_python.ensure("bench_studies", ["numpy", "sklearn"])

import argparse, json, math, time, warnings  # noqa: E402,E401
import numpy as np  # noqa: E402
from bench_server import Server, begin, say  # noqa: E402

BRANIN_MIN = 0.397887357729739
N_EVALS, N_INITIAL = 50, 10
SEEDS = {"mo": 20, "constrained": 40, "robust": 20}
C_MAX = 50.0  # the constrained Branin's bound on c


def branin(v):
    x1, x2 = v["x1"], v["x2"]
    b, c = 5.1 / (4 * math.pi**2), 5 / math.pi
    return (x2 - b * x1**2 + c * x1 - 6) ** 2 + 10 * (1 - 1 / (8 * math.pi)) * math.cos(x1) + 10


def branin_currin(v):
    """BoTorch's BraninCurrin on [0, 1]^2: (Branin rescaled, Currin)."""
    x0, x1 = v["x1"], v["x2"]
    f1 = branin({"x1": 15 * x0 - 5, "x2": 15 * x1})
    factor = 1.0 if x1 == 0 else 1 - math.exp(-1 / (2 * x1))
    f2 = factor * (2300 * x0**3 + 1900 * x0**2 + 2092 * x0 + 60) / (100 * x0**3 + 500 * x0**2 + 4 * x0 + 20)
    return f1, f2


def zdt1(v):
    x = [v[f"x{i}"] for i in range(1, len(v) + 1)]
    g = 1 + 9 * sum(x[1:]) / (len(x) - 1)
    return x[0], g * (1 - math.sqrt(x[0] / g))


# name -> (function, dimensions, reference point); every variable in [0, 1]
MO_PROBLEMS = {"branincurrin": (branin_currin, 2, (18.0, 6.0)), "zdt1": (zdt1, 4, (11.0, 11.0))}
BRANIN_BOUNDS = {"x1": (-5.0, 10.0), "x2": (0.0, 15.0)}


def branin_c(v):
    return (v["x1"] - 2.5) ** 2 + (v["x2"] - 7.5) ** 2


def hypervolume(points, ref):
    """The exact hypervolume, both objectives minimised, of the points dominating ref."""
    hv, floor = 0.0, ref[1]
    for a, b in sorted(p for p in points if p[0] < ref[0] and p[1] < ref[1]):
        if b < floor:
            hv += (ref[0] - a) * (floor - b)
            floor = b
    return hv


def best_feasible(evals):
    """The least value among (value, c) evaluations with c <= C_MAX, None when none."""
    feasible = [f for f, c in evals if c <= C_MAX]
    return min(feasible) if feasible else None


def quartiles(xs):
    q = np.percentile(xs, [25, 50, 75])
    return {"p25": float(q[0]), "median": float(q[1]), "p75": float(q[2])}


def summary(xs):
    """Quartiles of xs where None is worst (+inf); None for a quartile that is not finite."""
    q = quartiles([math.inf if x is None else x for x in xs])
    return {k: v if math.isfinite(v) else None for k, v in q.items()}


class Unsupported(Exception):
    """The server refuses issue 53's fields: a build from before them."""


NEW_FIELDS = ("/objectives", "/reference", "/constraints")


def call(server, method, path, body=None, want=200):
    st, out = server.call(method, path, json.dumps(body).encode() if body is not None else None,
                          {"Content-Type": "application/json"})
    if st != want:
        raise RuntimeError(f"{method} {path}: {st}: {out[:500]!r}")
    return json.loads(out) if out else None


def create_study(server, body):
    st, out = server.call("POST", "/studies", json.dumps(body).encode(), {"Content-Type": "application/json"})
    if st in (400, 422):
        for e in json.loads(out).get("errors") or []:
            if e.get("pointer") in NEW_FIELDS:
                raise Unsupported(f"{st} at {e['pointer']}: {e.get('message')}")
    if st != 201:
        raise RuntimeError(f"POST /studies: {st}: {out[:500]!r}")
    return json.loads(out)["id"]


def unit_space(d):
    return {f"x{i}": {"uniform": [0.0, 1.0]} for i in range(1, d + 1)}


def mercer_mo(server, f, d, ref, seed):
    """One study: (the evaluated objective pairs, suggest seconds, the study's hypervolume)."""
    sid = create_study(server, {
        "space": unit_space(d), "seed": seed, "initial": N_INITIAL,
        "objectives": [{"name": "f1", "direction": "minimize"}, {"name": "f2", "direction": "minimize"}],
        "reference": {"f1": ref[0], "f2": ref[1]}})
    points, waits = [], []
    for _ in range(N_EVALS):
        t = time.perf_counter()
        trial = call(server, "POST", f"/studies/{sid}/suggest", {"count": 1})["trials"][0]
        waits.append(time.perf_counter() - t)
        f1, f2 = f(trial["values"])
        points.append((f1, f2))
        call(server, "POST", f"/studies/{sid}/trials/{trial['id']}", {"values": {"f1": f1, "f2": f2}})
    hv = call(server, "GET", f"/studies/{sid}")["hypervolume"]
    call(server, "DELETE", f"/studies/{sid}", want=204)
    return points, waits, hv


def mercer_constrained(server, seed):
    """One study: (the evaluated (value, c) pairs, GET /studies/{id}'s `best`)."""
    space = {k: {"uniform": [lo, hi]} for k, (lo, hi) in BRANIN_BOUNDS.items()}
    sid = create_study(server, {"space": space, "seed": seed, "initial": N_INITIAL, "direction": "minimize",
                                "constraints": [{"name": "c", "max": C_MAX}]})
    evals = []
    for _ in range(N_EVALS):
        trial = call(server, "POST", f"/studies/{sid}/suggest", {"count": 1})["trials"][0]
        y, c = branin(trial["values"]), branin_c(trial["values"])
        evals.append((y, c))
        call(server, "POST", f"/studies/{sid}/trials/{trial['id']}", {"value": y, "values": {"c": c}})
    best = call(server, "GET", f"/studies/{sid}")["best"]
    call(server, "DELETE", f"/studies/{sid}", want=204)
    return evals, best


def best_violation(evals, best):
    """What is wrong with a study's `best` given its evaluations, or None."""
    want = best_feasible(evals)
    if best is None:
        return None if want is None else f"best is null, but {want:.6g} was feasible"
    c = (best.get("results") or {}).get("c")
    if best.get("feasible") is not True or c is None or c > C_MAX:
        return f"best is not feasible: feasible {best.get('feasible')}, c {c}"
    if want is None or best.get("value") != want:
        return f"best's value {best.get('value')} is not the least feasible one told, {want}"
    return None


class OptunaRuns:
    """Optuna's runs, each cached in a JSON file under benchmark/method/problem/seed."""

    def __init__(self, path, run_new):
        self.path, self.cache = path, {}
        if os.path.exists(path):
            with open(path) as f:
                self.cache = json.load(f)
        self.optuna = None
        if run_new:
            try:
                import optuna
                import torch  # noqa: F401  (GPSampler's)
                self.optuna = optuna
            except Exception:  # absent, or a torch install missing its libraries
                pass
        if self.optuna is None:
            say(f"Optuna does not run here: only cached runs are reported ({len(self.cache)} in {path})")
        else:
            optuna.logging.set_verbosity(optuna.logging.WARNING)
            warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)

    def get(self, bench, method, problem, seed, run):
        """The cached entry, else run() -> evaluations (stored), else None."""
        key = f"{bench}/{method}/{problem}/{seed}"
        if key not in self.cache:
            if self.optuna is None:
                return None
            t = time.perf_counter()
            evals = run(self.optuna)
            self.cache[key] = {"evals": evals, "seconds": time.perf_counter() - t, "optuna": self.optuna.__version__}
            say(f"optuna {key}: {self.cache[key]['seconds']:.1f} s")
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
            with open(self.path + ".tmp", "w") as f:
                json.dump(self.cache, f)
            os.replace(self.path + ".tmp", self.path)
        return self.cache[key]


def optuna_mo(f, d, seed, method):
    def run(optuna):
        if method == "optuna_gp":
            sampler = optuna.samplers.GPSampler(seed=seed, n_startup_trials=N_INITIAL)
        else:
            sampler = optuna.samplers.NSGAIISampler(seed=seed)
        study = optuna.create_study(sampler=sampler, directions=["minimize", "minimize"])
        study.optimize(lambda t: f({f"x{i}": t.suggest_float(f"x{i}", 0.0, 1.0) for i in range(1, d + 1)}),
                       n_trials=N_EVALS)
        return [list(t.values) for t in study.trials]
    return run


def optuna_constrained(seed):
    def run(optuna):
        def objective(t):
            v = {k: t.suggest_float(k, lo, hi) for k, (lo, hi) in BRANIN_BOUNDS.items()}
            c = branin_c(v)
            t.set_user_attr("c", c)
            t.set_constraint("c", c - C_MAX)  # Optuna 5's form of constraints_func (deprecated there)
            return branin(v)
        sampler = optuna.samplers.GPSampler(seed=seed, n_startup_trials=N_INITIAL)
        study = optuna.create_study(sampler=sampler, direction="minimize")
        study.optimize(objective, n_trials=N_EVALS)
        return [[t.value, t.user_attrs["c"]] for t in study.trials]
    return run


def bench_mo(args, work, optuna):
    out, mercer_ok = {}, True
    for name, (f, d, ref) in MO_PROBLEMS.items():
        hv = {"mercer": [], "optuna_gp": [], "optuna_nsga2": [], "random": []}
        res, waits, disagree, per_trial = {}, [], [], {}
        if mercer_ok:
            with Server(args.mercer, os.path.join(work, f"mo-{name}.log")) as server:
                for seed in range(args.seeds or SEEDS["mo"]):
                    try:
                        points, w, server_hv = mercer_mo(server, f, d, ref, seed)
                    except Unsupported as e:
                        say(f"this mercer has no studies with several objectives ({e}): its column is left out")
                        mercer_ok = False
                        break
                    hv["mercer"].append(hypervolume(points, ref))
                    waits += w
                    if abs(server_hv - hv["mercer"][-1]) > 1e-9 * max(1.0, hv["mercer"][-1]):
                        disagree.append(seed)
                        say(f"{name} seed {seed}: the study's hypervolume {server_hv} against {hv['mercer'][-1]}")
                    say(f"{name} seed {seed}: mercer hypervolume {hv['mercer'][-1]:.5g}")
        for seed in range(args.seeds or SEEDS["mo"]):
            rng = np.random.default_rng(seed)
            hv["random"].append(hypervolume([f({f"x{i}": rng.uniform() for i in range(1, d + 1)})
                                             for _ in range(N_EVALS)], ref))
            for method in ("optuna_gp", "optuna_nsga2"):
                entry = optuna.get("mo", method, name, seed, optuna_mo(f, d, seed, method))
                if entry is not None:
                    hv[method].append(hypervolume(entry["evals"], ref))
                    per_trial.setdefault(method, []).append(entry["seconds"] / N_EVALS)
        for method, runs in hv.items():
            if runs:
                res[method] = {**quartiles(runs), "runs": runs}
                if method in per_trial:
                    res[method]["seconds_per_trial_median"] = float(np.median(per_trial[method]))
        if waits:
            res["mercer"].update(suggest_ms_p50=1e3 * float(np.median(waits)),
                                 suggest_ms_p90=1e3 * float(np.percentile(waits, 90)), hypervolume_disagrees=disagree)
        out[name] = {"reference": list(ref), **res}
        say(f"{name}: median hypervolume " + ", ".join(f"{k} {v['median']:.5g}" for k, v in res.items()))
    return out


def bench_constrained(args, work, optuna):
    seeds = range(args.seeds or SEEDS["constrained"])
    evals = {"mercer": [], "optuna_gp": [], "random": []}
    violations = []
    with Server(args.mercer, os.path.join(work, "constrained.log")) as server:
        for seed in seeds:
            try:
                ev, best = mercer_constrained(server, seed)
            except Unsupported as e:
                say(f"this mercer has no constrained studies ({e}): its column is left out")
                break
            evals["mercer"].append(ev)
            problem = best_violation(ev, best)
            if problem:
                violations.append(seed)
                say(f"constrained seed {seed}: {problem}")
            say(f"constrained seed {seed}: mercer best feasible {best_feasible(ev)}")
    for seed in seeds:
        rng = np.random.default_rng(seed)
        draws = [{k: rng.uniform(lo, hi) for k, (lo, hi) in BRANIN_BOUNDS.items()} for _ in range(N_EVALS)]
        evals["random"].append([(branin(v), branin_c(v)) for v in draws])
        entry = optuna.get("constrained", "optuna_gp", "branin", seed, optuna_constrained(seed))
        if entry is not None:
            evals["optuna_gp"].append(entry["evals"])
    out = {}
    for method, runs in evals.items():
        if runs:
            regrets = [None if b is None else b - BRANIN_MIN for b in map(best_feasible, runs)]
            out[method] = {**summary(regrets), "no_feasible": regrets.count(None), "runs": regrets}
    if evals["mercer"]:
        out["mercer"]["best_violations"] = violations
    say("constrained: median regret " + ", ".join(f"{k} {v['median']:.4g}" for k, v in out.items()))
    return out


def robust_searches():
    """name -> (training body without `search`, space, scoring)."""
    from sklearn.datasets import make_moons

    rng = np.random.default_rng(0)
    x = rng.uniform(0, 2 * math.pi, 200)
    y = np.sin(4 * x) + 0.3 * rng.standard_normal(200)
    sine = {"x": x[:, None].tolist(), "y": y.tolist()}
    mx, my = make_moons(n_samples=300, noise=0.3, random_state=0)
    return {
        "kernel_ridge": ({"model": "kernel_ridge", "kernel": {"type": "rbf", "length_scale": 1.0},
                          "params": {"lambda": 1.0}, **sine},
                         {"/params/lambda": [1e-8, 1e2], "/kernel/length_scale": [1e-3, 1e2]}, "r2"),
        "svc": ({"model": "svm", "kernel": {"type": "rbf", "gamma": 1.0}, "params": {"c": 1.0},
                 "x": mx.tolist(), "y": my.tolist()},
                {"/params/c": [1e-6, 1e4], "/kernel/gamma": [1e-5, 1e5]}, "accuracy"),
        "gaussian_process": ({"model": "gaussian_process", "kernel": {"type": "rbf", "length_scale": 1.0},
                              "params": {"noise": 0.1, "optimize": False}, **sine},
                             {"/params/noise": [1e-8, 1e2], "/kernel/length_scale": [1e-3, 1e3]},
                             "mean_log_predictive_density"),
    }


def bench_robust(args, work, _optuna):
    out = {}
    for name, (body, space, scoring) in robust_searches().items():
        res = {}
        with Server(args.mercer, os.path.join(work, f"robust-{name}.log")) as server:
            for method in ("bayes", "random"):
                best, failed, wall = [], [], 0.0
                for seed in range(args.seeds or SEEDS["robust"]):
                    search = {"method": method, "candidates": 25, "cv": 5, "scoring": scoring, "seed": seed,
                              "space": {p: {"log_uniform": r} for p, r in space.items()}}
                    w, m = server.fit(json.dumps({**body, "search": search}).encode())
                    s = m["training"]["search"]
                    best.append(s["best_score"])
                    failed.append(sum(c["mean_score"] is None for c in s["candidates"]))
                    wall += w
                res[method] = {"mean": float(np.mean(best)), **quartiles(best), "runs": best,
                               "failed_candidates": failed, "wall_s": wall}
                say(f"{name} {method}: best score mean {res[method]['mean']:.4g}, median {res[method]['median']:.4g}, "
                    f"{sum(failed)} failed candidates, {wall:.1f} s")
        out[name] = {"scoring": scoring, "log_uniform": space, **res}
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mercer", required=True)
    p.add_argument("--only", action="append", choices=["mo", "constrained", "robust"])
    p.add_argument("--seeds", type=int, help="seeds per benchmark (default: mo 20, constrained 40, robust 20)")
    p.add_argument("--json")
    p.add_argument("--optuna-cache", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target", "bench", "optuna_cache.json"))
    p.add_argument("--no-optuna", action="store_true", help="report only cached Optuna runs")
    args = p.parse_args()
    work = begin("bench-studies-")
    only = args.only or ["mo", "constrained", "robust"]
    optuna = OptunaRuns(args.optuna_cache, not args.no_optuna) if {"mo", "constrained"} & set(only) else None
    out = {}
    for name, fn in (("mo", bench_mo), ("constrained", bench_constrained), ("robust", bench_robust)):
        if name in only:
            t = time.perf_counter()
            out[name] = fn(args, work, optuna)
            out[name]["seconds"] = time.perf_counter() - t
            say(f"{name}: {out[name]['seconds']:.0f} s")
    text = json.dumps(out, indent=1)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()

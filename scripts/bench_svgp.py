#!/usr/bin/env python3
"""Variational GPs (approximation "variational") against GPyTorch 1.15's SVGP, same cores,
same run, same data, M, batch size and epochs.

    python3 scripts/bench_svgp.py PATH_TO_MERCER [--cases gaussian bernoulli softmax]
        [--rows 100000] [--m 1024] [--batch 1024] [--epochs 2] [--dtypes float32 float64]
        [--skip-gpytorch] [--json OUT.json]
    python3 scripts/bench_svgp.py PATH_TO_MERCER --million [--rows 1000000] ...
    python3 scripts/bench_svgp.py PATH_TO_MERCER --robust

Default mode, per case (n rows, d = 10, 10% held out; rows sorted by their first feature,
as files often are; standardised features):
  gaussian   y = f(x) + N(0, 0.3^2), 1% of rows gross outliers (+-5);
  bernoulli  y = [f(x) + N(0, 0.3^2) > 0], then 10% of labels flipped;
  softmax    4 classes by thresholds of f(x) + noise, then 10% of labels redrawn.
mercer: the rows uploaded as a CSV dataset, one fit on it (`inducing_selection`
uniform, the kernel ScaleKernel(RBF with a length scale per feature), starting from
length scales sqrt(d), output scale 1 and noise 1). GPyTorch: ApproximateGP with a
VariationalStrategy (learned inducing locations, drawn from the rows) over a
TrilNaturalVariationalDistribution (IndependentMultitaskVariationalStrategy for softmax,
one latent per class, a kernel shared by the latents), the same kernel and starting
values, NGD (lr 0.1) on q and Adam (lr 0.01) on the rest, VariationalELBO, one step of
each per minibatch; the recipe of GPyTorch's natural-gradient example.
Reported: wall seconds per epoch (mercer: the whole fit over the epochs, its final pass
over every row included; GPyTorch: the training loop only), their ratio, and held-out
mean log predictive density (per row; gaussian with the noise) and accuracy / RMSE.

--million: n = 1,000,000 rows of the bernoulli and gaussian data; mercer's variational
fits (M = 1024, --batch, default epochs) against the exact gp_classifier on 20,000 rows,
the nystrom kernel_logistic and (gaussian) the nystrom GP at the same M: time, peak RSS,
held-out accuracy / RMSE and log predictive density.

--robust: counts (poisson against the gaussian likelihood) and 5% gross outliers
(student_t against gaussian), held-out log predictive density and RMSE against the clean f.

Needs numpy, and torch + gpytorch for the GPyTorch side: $MERCER_BENCH_PYTHON, else the
venv of tests/fixtures/requirements-svgp.txt at /tmp/gp (scripts/bench_python.py rules).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("MERCER_BENCH_PYTHON", "/tmp/gp/bin/python" if os.path.exists("/tmp/gp/bin/python") else "")
if not os.environ["MERCER_BENCH_PYTHON"]:
    del os.environ["MERCER_BENCH_PYTHON"]
import bench_python  # noqa: E402

bench_python.ensure("bench_svgp", ["numpy"])

import argparse, json, math, platform, time  # noqa: E402
import bench_server  # noqa: E402
import numpy as np  # noqa: E402

D, SEED, TEST_SHARE = 10, 20261129, 0.1
say = bench_server.say


def cpu_model():
    with open("/proc/cpuinfo") as f:
        return next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), platform.processor())


def latent(X, w):
    return np.sin(2.0 * X @ w) + 0.5 * np.cos(X[:, 0] * X[:, 1])


def make(kind, n, rng):
    """Features (n x D, standardised, sorted by x0), targets, and the clean latent f."""
    X = rng.standard_normal((n, D)) * rng.uniform(0.5, 3.0, D) + rng.uniform(-5, 5, D)
    X = X[np.argsort(X[:, 0])]
    X = (X - X.mean(0)) / X.std(0)
    w = np.random.default_rng([SEED, 7]).standard_normal(D) / math.sqrt(D)
    f = latent(X, w)
    if kind == "gaussian":
        y = f + 0.3 * rng.standard_normal(n)
        out = rng.random(n) < 0.01
        y[out] += rng.choice([-5.0, 5.0], out.sum())
    elif kind == "outliers":
        y = f + 0.1 * rng.standard_normal(n)
        out = rng.random(n) < 0.05
        y[out] += rng.choice([-1.0, 1.0], out.sum()) * rng.uniform(3, 8, out.sum())
    elif kind == "counts":
        y = rng.poisson(np.exp(0.8 * f + 0.5)).astype(float)
    elif kind == "bernoulli":
        y = (f + 0.3 * rng.standard_normal(n) > 0).astype(float)
        flip = rng.random(n) < 0.1
        y[flip] = 1 - y[flip]
    else:  # softmax: 4 classes
        y = np.digitize(f + 0.3 * rng.standard_normal(n), [-0.6, 0.0, 0.6]).astype(float)
        redraw = rng.random(n) < 0.1
        y[redraw] = rng.integers(0, 4, redraw.sum())
    return X, y, f


def split(X, y, f, rng):
    test = rng.random(len(X)) < TEST_SHARE
    return (X[~test], y[~test], f[~test]), (X[test], y[test], f[test])


def write_csv(path, X, y):
    names = [f"x{i}" for i in range(D)]
    with open(path, "w") as out:
        out.write(",".join(names + ["y"]) + "\n")
        for s in range(0, len(X), 50_000):
            block = np.column_stack([X[s:s + 50_000], y[s:s + 50_000]])
            out.write("".join(",".join(map(repr, r)) + "\n" for r in block.tolist()))


def kernel(m_scale=1.0):
    return {"type": "scale", "factor": m_scale, "kernel": {"type": "rbf", "length_scale": [math.sqrt(D)] * D}}


def log_normal(y, mu, var):
    return -0.5 * np.log(2 * np.pi * var) - (y - mu) ** 2 / (2 * var)


class Mercer:
    """One server for a fit: upload, fit, predict in JSON batches."""

    def __init__(self, binary, work, tag):
        self.server = bench_server.Server(binary, os.path.join(work, f"{tag}.log"),
                                          {"MERCER_MAX_BODY_BYTES": str(1 << 31)})

    def __enter__(self):
        self.server.__enter__()
        return self

    def __exit__(self, *exc):
        self.server.__exit__(*exc)

    def upload(self, path):
        with open(path, "rb") as body:
            st, out = self.server.call("POST", "/datasets?target=y", body,
                                       {"Content-Type": "text/csv", "Content-Length": str(os.path.getsize(path))})
        if st != 201:
            raise RuntimeError(f"upload: {st} {out[:500]}")
        return json.loads(out)["id"]

    def fit(self, body):
        wall, model = self.server.fit(json.dumps(body).encode())
        return wall, model

    def predict(self, model_id, X, variance=False, include_noise=False):
        out = {"predictions": [], "variance": [], "probabilities": []}
        for s in range(0, len(X), 5000):
            body = {"x": X[s:s + 5000].tolist(), "variance": variance, "include_noise": include_noise}
            _, ans = self.server.post(f"/models/{model_id}/predict", json.dumps(body).encode(), 200)
            for k in out:
                out[k] += ans.get(k) or []
        return {k: np.asarray(v) for k, v in out.items()}


def mercer_case(binary, work, kind, train, test, a, R, key, precision="float64"):
    (X, y, _), (Xt, yt, ft) = train, test
    path = os.path.join(work, f"{key}.csv")
    write_csv(path, X, y)
    model = "gp_classifier" if kind in ("bernoulli", "softmax") else "gaussian_process"
    likelihood = {"gaussian": "gaussian", "bernoulli": "bernoulli", "softmax": "softmax", "counts": "poisson",
                  "outliers": "gaussian"}[kind]
    likelihood = a.likelihood.get(key, likelihood)
    params = {"approximation": "variational", "likelihood": likelihood, "precision": precision,
              "inducing_points": a.m, "inducing_selection": "uniform", "batch_size": a.batch, "seed": 0}
    if kind == "counts" and likelihood == "gaussian":
        params["normalize_y"] = True  # counts are not centred
    if a.epochs:
        params["epochs"] = a.epochs
    with Mercer(binary, work, key) as s:
        dataset = s.upload(path)
        body = {"model": model, "kernel": kernel(), "params": params, "dataset": dataset}
        wall, m = s.fit(body)
        rss = s.server.peak_rss()
        p = s.predict(m["id"], Xt, variance=(model == "gaussian_process"), include_noise=(likelihood == "gaussian"))
        one = None
        if a.epochs and a.epochs > 1 and not a.million:
            # One epoch less: the difference is one epoch's minibatches alone (the fit's
            # other parts, inducing points and the final pass over every row, cancel).
            shorter = json.loads(json.dumps(body))
            shorter["params"]["epochs"] = a.epochs - 1
            one = s.fit(shorter)[1]["training"]["duration_ms"] / 1e3
    t = m["training"]
    r = {"wall_s": wall, "server_s": t["duration_ms"] / 1e3, "epochs": t["epochs"], "iterations": t["iterations"],
         "elbo": t["elbo"], "rss": rss, "params": m["params"], "kernel": m["kernel"]}
    r["per_epoch_s"] = r["server_s"] - one if one is not None else r["server_s"] / max(t["epochs"], 1)
    r["fit_per_epoch_s"] = r["server_s"] / max(t["epochs"], 1)
    score(kind, r, p, yt, ft, params["likelihood"], m["params"])
    R[key] = r
    say(f"mercer {key}: {r['server_s']:.1f} s ({r['per_epoch_s']:.2f} s/epoch; the fit over its epochs "
        f"{r['fit_per_epoch_s']:.2f} s/epoch), {fmt(r)}")


def score(kind, r, p, yt, ft, likelihood, params):
    """Held-out figures into r: log predictive density per row, accuracy or RMSE."""
    if kind in ("bernoulli", "softmax"):
        probs = p["probabilities"]
        idx = yt.astype(int)
        r["mlpd"] = float(np.mean(np.log(np.clip(probs[np.arange(len(idx)), idx], 1e-300, None))))
        r["accuracy"] = float(np.mean(np.argmax(probs, 1) == idx))
        return
    mu, var = p["predictions"], p["variance"]
    r["rmse"] = float(np.sqrt(np.mean((mu - yt) ** 2)))
    r["rmse_clean"] = float(np.sqrt(np.mean((mu - ft) ** 2))) if kind != "counts" else None
    if likelihood == "gaussian":
        # The variance asked for includes the noise (include_noise).
        r["mlpd"] = float(np.mean(log_normal(yt, mu, var)))
    elif likelihood == "student_t":
        # y's density: the fitted t (scale^2 noise, df) averaged over the latent's Gaussian
        # (its variance is y's less the t's own), by 40-node Gauss-Hermite quadrature.
        from math import lgamma
        df, s2 = params["df"], params["noise"]
        lat = np.maximum(var - s2 * df / (df - 2), 0)
        nodes, weights = np.polynomial.hermite.hermgauss(40)
        f = mu[:, None] + np.sqrt(2 * lat)[:, None] * nodes[None, :]
        z = (yt[:, None] - f) ** 2 / (df * s2)
        dens = np.exp(lgamma((df + 1) / 2) - lgamma(df / 2) - 0.5 * np.log(np.pi * df * s2) - (df + 1) / 2 * np.log1p(z))
        r["mlpd"] = float(np.mean(np.log(dens @ (weights / np.sqrt(np.pi)))))
    elif likelihood == "poisson":
        # The counts' density, the rate's posterior by moment-matched gamma: E and Var given.
        from scipy.special import gammaln
        shape = mu ** 2 / np.maximum(var, 1e-12)
        rate = mu / np.maximum(var, 1e-12)
        # Negative binomial: the Poisson mixed over Gamma(shape, rate).
        k = yt
        r["mlpd"] = float(np.mean(gammaln(k + shape) - gammaln(shape) - gammaln(k + 1)
                                  + shape * np.log(rate / (rate + 1)) - k * np.log(rate + 1)))


def fmt(r):
    keys = [k for k in ("mlpd", "accuracy", "rmse", "rmse_clean") if r.get(k) is not None]
    return ", ".join(f"{k} {r[k]:.4f}" for k in keys)


def gpytorch_case(kind, train, test, a, dtype_name, R, key):
    import torch
    import gpytorch
    torch.set_num_threads(2)
    dtype = {"float32": torch.float32, "float64": torch.float64}[dtype_name]
    (X, y, _), (Xt, yt, ft) = train, test
    n, classes = len(X), (4 if kind == "softmax" else 1)
    Xtr, ytr = torch.tensor(X, dtype=dtype), torch.tensor(y, dtype=dtype)
    if kind == "softmax":
        ytr = ytr.long()
    g = torch.Generator().manual_seed(0)
    Z = Xtr[torch.randperm(n, generator=g)[:a.m]].clone()

    class Model(gpytorch.models.ApproximateGP):
        def __init__(self):
            shape = torch.Size([classes]) if classes > 1 else torch.Size([])
            vd = gpytorch.variational.TrilNaturalVariationalDistribution(a.m, batch_shape=shape)
            vs = gpytorch.variational.VariationalStrategy(self, Z, vd, learn_inducing_locations=True)
            if classes > 1:
                vs = gpytorch.variational.IndependentMultitaskVariationalStrategy(vs, num_tasks=classes)
            super().__init__(vs)
            self.mean_module = gpytorch.means.ZeroMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(ard_num_dims=D))

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

    model = Model().to(dtype)
    model.covar_module.base_kernel.lengthscale = torch.full((1, D), math.sqrt(D), dtype=dtype)
    model.covar_module.outputscale = 1.0
    if kind == "bernoulli":
        lik = gpytorch.likelihoods.BernoulliLikelihood()
    elif kind == "softmax":
        lik = gpytorch.likelihoods.SoftmaxLikelihood(num_features=classes, num_classes=classes, mixing_weights=False)
    else:
        lik = gpytorch.likelihoods.GaussianLikelihood()
        lik.noise = 1.0
    lik = lik.to(dtype)
    ngd = gpytorch.optim.NGD(model.variational_parameters(), num_data=n, lr=0.1)
    adam = torch.optim.Adam([{"params": model.hyperparameters()}, {"params": lik.parameters()}], lr=0.01)
    mll = gpytorch.mlls.VariationalELBO(lik, model, num_data=n)
    model.train()
    lik.train()
    epochs = a.epochs or 1
    t = time.perf_counter()
    for _ in range(epochs):
        perm = torch.randperm(n, generator=g)
        for s in range(0, n, a.batch):
            idx = perm[s:s + a.batch]
            ngd.zero_grad()
            adam.zero_grad()
            loss = -mll(model(Xtr[idx]), ytr[idx])
            loss.backward()
            ngd.step()
            adam.step()
    wall = time.perf_counter() - t
    model.eval()
    lik.eval()
    Xte = torch.tensor(Xt, dtype=dtype)
    with torch.no_grad(), gpytorch.settings.num_likelihood_samples(256):
        mus, vs, probs = [], [], []
        for s in range(0, len(Xt), 2000):
            out = model(Xte[s:s + 2000])
            if kind in ("bernoulli", "softmax"):
                pr = lik(out).probs
                if kind == "softmax":
                    pr = pr.mean(0)
                else:
                    pr = torch.stack([1 - pr, pr], -1)
                probs.append(pr.double().numpy())
            else:
                mus.append(out.mean.double().numpy())
                vs.append(out.variance.double().numpy())
    r = {"wall_s": wall, "per_epoch_s": wall / epochs, "epochs": epochs}
    if probs:
        p = {"probabilities": np.concatenate(probs)}
    else:
        p = {"predictions": np.concatenate(mus), "variance": np.concatenate(vs)}
    if "variance" in p and kind == "gaussian":
        p["variance"] = p["variance"] + float(lik.noise.item())
    score(kind, r, p, yt, ft, "gaussian", {})
    R[key] = r
    say(f"gpytorch {dtype_name} {kind}: {wall:.1f} s ({r['per_epoch_s']:.2f} s/epoch), {fmt(r)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("binary")
    ap.add_argument("--cases", nargs="+", default=["gaussian", "bernoulli", "softmax"])
    ap.add_argument("--rows", type=int, default=None)
    ap.add_argument("--m", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--dtypes", nargs="+", default=["float32", "float64"])
    ap.add_argument("--skip-gpytorch", action="store_true")
    ap.add_argument("--million", action="store_true")
    ap.add_argument("--robust", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args()
    a.likelihood = {}
    work = bench_server.begin("bench-svgp-")
    R = {"cpu": cpu_model(), "cores": os.cpu_count(), "args": {k: v for k, v in vars(a).items() if k != "likelihood"}}
    say(f"CPU: {R['cpu']}, {R['cores']} cores")
    rng = np.random.default_rng(SEED)
    if a.million:
        million(a, work, rng, R)
    elif a.robust:
        robust(a, work, rng, R)
    else:
        n = a.rows or 100_000
        a.epochs = a.epochs or 2
        for kind in a.cases:
            train, test = split(*make(kind, int(n / (1 - TEST_SHARE)), rng), rng)
            for dt in a.dtypes:
                mercer_case(a.binary, work, kind, train, test, a, R, f"mercer_{dt}_{kind}", dt)
                if not a.skip_gpytorch:
                    try:
                        gpytorch_case(kind, train, test, a, dt, R, f"gpytorch_{dt}_{kind}")
                    except Exception as e:  # GPyTorch's own numerics failing is a result too
                        R[f"gpytorch_{dt}_{kind}"] = {"failed": f"{type(e).__name__}: {str(e)[:200]}"}
                        say(f"gpytorch {dt} {kind}: failed: {type(e).__name__}: {str(e)[:200]}")
        table(R, a)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(R, f, indent=1, default=str)


def table(R, a):
    print(f"\nVariational GPs: n = {a.rows or 100000:,} rows (90% trained on), d = {D}, "
          f"M = {a.m}, batch {a.batch}, {a.epochs} epochs; {R['cpu']}, {R['cores']} cores\n")
    print("| case | precision | mercer s/epoch | mercer fit / epochs | GPyTorch s/epoch | GPyTorch / mercer | mercer mlpd | GPyTorch mlpd | mercer acc/RMSE | GPyTorch acc/RMSE |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for kind in a.cases:
        for dt in a.dtypes:
            m, g = R.get(f"mercer_{dt}_{kind}", {}), R.get(f"gpytorch_{dt}_{kind}", {})
            q = "accuracy" if kind != "gaussian" else "rmse"
            cell = lambda r, k, f="{:.4f}": f.format(r[k]) if r.get(k) is not None else "–"  # noqa: E731
            ratio = f"{g['per_epoch_s'] / m['per_epoch_s']:.2f}x" if g.get("per_epoch_s") and m else "–"
            if g.get("failed"):
                g = {"per_epoch_s": None}
                ratio = "GPyTorch failed (NaN)"
            print(f"| {kind} | {dt} | {cell(m, 'per_epoch_s', '{:.2f}')} | {cell(m, 'fit_per_epoch_s', '{:.2f}')} | {cell(g, 'per_epoch_s', '{:.2f}')} | {ratio} | "
                  f"{cell(m, 'mlpd')} | {cell(g, 'mlpd')} | {cell(m, q)} | {cell(g, q)} |")


def million(a, work, rng, R):
    n = a.rows or 1_000_000
    for kind in ("bernoulli", "gaussian"):
        train, test = split(*make(kind, int(n / (1 - TEST_SHARE)), rng), rng)
        mercer_case(a.binary, work, kind, train, test, a, R, f"mercer_{kind}", a.dtypes[0])
        (X, y, _), (Xt, yt, ft) = train, test
        path = os.path.join(work, f"mercer_{kind}.csv")
        sub = os.path.join(work, f"{kind}-20k.csv")
        rows = np.random.default_rng(1).permutation(len(X))[:20_000]
        write_csv(sub, X[rows], y[rows])
        # The baselines take the kernel the variational fit learned (an exact GP on 20,000
        # rows cannot search its own in reasonable time: each Laplace step is 20000^3 / 3).
        learned = R[f"mercer_{kind}"]["kernel"]
        comps = []
        if kind == "bernoulli":
            comps = [("exact_gpc_20k", sub, {"model": "gp_classifier", "kernel": learned, "params": {}})]
            comps += [(f"nystrom_logistic_{lam:g}", path, {"model": "kernel_logistic", "kernel": learned,
                                                          "params": {"approximation": "nystrom", "inducing_points": a.m,
                                                                     "inducing_selection": "uniform", "lambda": lam}})
                      for lam in (1e-2, 1.0, 100.0)]
        else:
            comps = [("nystrom_gp", path, {"model": "gaussian_process", "kernel": kernel(),
                                           "params": {"approximation": "nystrom", "inducing_points": a.m,
                                                      "inducing_selection": "uniform", "noise": 1.0,
                                                      "optimize": True}})]
        for key, data, body in comps:
            with Mercer(a.binary, work, key) as s:
                body["dataset"] = s.upload(data)
                wall, m = s.fit(body)
                rss = s.server.peak_rss()
                gp = body["model"] == "gaussian_process"
                p = s.predict(m["id"], Xt, variance=gp, include_noise=gp)
            r = {"wall_s": wall, "server_s": m["training"]["duration_ms"] / 1e3, "rss": rss}
            score(kind, r, p, yt, ft, "gaussian", m["params"])
            R[f"{kind}_{key}"] = r
            say(f"{key}: {r['server_s']:.1f} s, RSS {rss / 1e9:.2f} GB, {fmt(r)}")


def robust(a, work, rng, R):
    n = a.rows or 20_000
    a.epochs = a.epochs or None
    for kind, likelihoods in (("counts", ["poisson", "gaussian"]), ("outliers", ["student_t", "gaussian"])):
        train, test = split(*make(kind, int(n / (1 - TEST_SHARE)), rng), rng)
        for lik in likelihoods:
            key = f"{kind}_{lik}"
            a.likelihood[key] = lik
            mercer_case(a.binary, work, kind, train, test, a, R, key)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Randomized kernel PCA's accuracy where the gaps are small: mercer's eigen_solver
"randomized" against scikit-learn's KernelPCA(eigen_solver="randomized"), both measured
against the exact eigenvalues (numpy's eigvalsh of the centred kernel).

    python3 scripts/bench_kpca_accuracy.py --mercer target/release/mercer [--n 3000] [--seeds 10]

Data: n rows of d standard normal features (d = 8, 20, 50; numpy seed 0), rbf with gamma
1/d, 10 components: the leading eigenvalues sit 1-3% apart, as they do for an rbf kernel on
isotropic rows. For each d, seeds 0..S-1 (mercer's `seed`, scikit-learn's random_state),
the worst relative error over the 10 eigenvalues; the table gives the median and the worst
over seeds. One mercer server for every fit; scikit-learn runs while it idles.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_python  # noqa: E402

bench_python.ensure("bench_kpca_accuracy", ["numpy", "scipy", "sklearn"])

import argparse, json  # noqa: E402,E401
import numpy as np  # noqa: E402
from bench_server import Server, begin, say  # noqa: E402

K = 10


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mercer", required=True)
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--seeds", type=int, default=10)
    a = ap.parse_args()
    from sklearn.decomposition import KernelPCA
    from sklearn.metrics.pairwise import rbf_kernel
    from sklearn.preprocessing import KernelCenterer

    work = begin("bench-kpca-accuracy-")
    rng = np.random.RandomState(0)
    rows = []
    with Server(a.mercer, os.path.join(work, "server.log")) as s:
        for d in (8, 20, 50):
            x, gamma = rng.randn(a.n, d), 1.0 / d
            exact = np.linalg.eigvalsh(KernelCenterer().fit_transform(rbf_kernel(x, gamma=gamma)))[::-1][:K]
            ours, theirs = [], []
            for seed in range(a.seeds):
                body = {"model": "kernel_pca", "kernel": {"type": "rbf", "gamma": gamma}, "x": x.tolist(),
                        "params": {"n_components": K, "eigen_solver": "randomized", "seed": seed}}
                _, m = s.fit(json.dumps(body).encode())
                ours.append(np.max(np.abs(np.array(m["training"]["eigenvalues"]) - exact) / exact))
                kp = KernelPCA(K, kernel="rbf", gamma=gamma, eigen_solver="randomized", random_state=seed).fit(x)
                theirs.append(np.max(np.abs(kp.eigenvalues_ - exact) / exact))
            gaps = exact[1:] / exact[:-1]
            say(f"d = {d}: ratios of neighbouring eigenvalues {np.round(gaps, 3)}")
            rows.append((d, ours, theirs, gaps))
    print(f"| d | smallest gap | mercer median | mercer worst | scikit-learn median | scikit-learn worst |")
    print("|---|---|---|---|---|---|")
    for d, ours, theirs, gaps in rows:
        print(f"| {d} | {100 * (1 - gaps[:-1].max()):.1f}% | {np.median(ours):.1e} | {max(ours):.1e} | "
              f"{np.median(theirs):.1e} | {max(theirs):.1e} |")


if __name__ == "__main__":
    main()

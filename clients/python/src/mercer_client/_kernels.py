"""Kernels as mercer's JSON: scikit-learn's kernel names (the SVMs, KernelRidge,
KernelPCA, ...) and scikit-learn's Gaussian-process kernel objects."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np


def _gamma(gamma: Any, X: np.ndarray) -> float:
    """scikit-learn's gamma: ``"scale"`` is 1 / (d var(X)) (1 when var(X) is 0),
    ``"auto"`` and ``None`` are 1 / d."""
    if gamma is None or (isinstance(gamma, str) and gamma == "auto"):
        return 1.0 / X.shape[1]
    if isinstance(gamma, str) and gamma == "scale":
        var = X.var()
        return 1.0 / (X.shape[1] * var) if var != 0 else 1.0
    return float(gamma)


def _named_kernel(kernel: Any, gamma: Any, degree: Any, coef0: Any, kernel_params: Optional[dict], X) -> dict:
    """mercer's kernel JSON for a scikit-learn kernel name (``"linear"``, ``"poly"``,
    ``"rbf"``, ``"sigmoid"``, ``"laplacian"``, ``"precomputed"``) with its gamma,
    degree and coef0; another string is a mercer kernel type (``"matern"``, ...) given
    ``kernel_params``; a dict is mercer kernel JSON, sent as it is."""
    if isinstance(kernel, dict):
        return kernel
    if not isinstance(kernel, str):
        raise ValueError(f"kernel must be a kernel name or mercer kernel JSON (a dict), not {kernel!r}")
    if kernel == "linear":
        spec = {"type": "linear"}
    elif kernel in ("poly", "polynomial"):
        spec = {"type": "polynomial", "degree": degree, "gamma": _gamma(gamma, X), "coef0": float(coef0)}
    elif kernel == "rbf":
        spec = {"type": "rbf", "gamma": _gamma(gamma, X)}
    elif kernel == "sigmoid":
        spec = {"type": "sigmoid", "gamma": _gamma(gamma, X), "coef0": float(coef0)}
    elif kernel == "laplacian":  # exp(-gamma |x - z|_1) = exp(-|x - z|_1 / l)
        spec = {"type": "laplacian", "length_scale": 1.0 / _gamma(gamma, X)}
    elif kernel == "precomputed":  # X is the n x n Gram matrix
        if X.shape[0] != X.shape[1]:
            raise ValueError(f"Precomputed matrix must be a square matrix. Input is a {X.shape[0]}x{X.shape[1]} matrix.")
        spec = {"type": "precomputed"}
    else:
        spec = {"type": kernel}
    return {**spec, **(kernel_params or {})}


def _hyperparameter(value: Any, bounds: Any) -> dict:
    """A scikit-learn kernel hyperparameter as mercer's ``{"value", "bounds"|"fixed"}``."""
    value = np.asarray(value, dtype=float)
    plain = value.tolist() if value.ndim else float(value)
    if isinstance(bounds, str) and bounds == "fixed":
        return {"value": plain, "fixed": True}
    pairs = np.atleast_2d(np.asarray(bounds, dtype=float))
    if not (pairs == pairs[0]).all():
        raise ValueError("mercer takes one pair of bounds per hyperparameter, the same for every feature")
    return {"value": plain, "bounds": pairs[0].tolist()}


def gp_kernel_json(kernel: Any) -> dict:
    """mercer's kernel JSON for a Gaussian-process kernel: ``None`` is scikit-learn's
    default (``1.0 * RBF(1.0)``, both fixed); a dict is sent as it is; scikit-learn's
    ``RBF``, ``Matern``, ``RationalQuadratic``, ``ExpSineSquared``,
    ``ConstantKernel``, ``WhiteKernel`` and their sums and products are translated,
    hyperparameter bounds (or ``"fixed"``) included."""
    from sklearn.gaussian_process import kernels as k

    if kernel is None:
        return {"type": "rbf", "length_scale": {"value": 1.0, "fixed": True}}
    if isinstance(kernel, dict):
        return kernel
    if isinstance(kernel, (k.Sum, k.Product)):
        kind = "sum" if isinstance(kernel, k.Sum) else "product"
        return {"type": kind, "kernels": [gp_kernel_json(kernel.k1), gp_kernel_json(kernel.k2)]}
    if isinstance(kernel, k.ConstantKernel):
        return {"type": "constant", "value": _hyperparameter(kernel.constant_value, kernel.constant_value_bounds)}
    if isinstance(kernel, k.WhiteKernel):
        return {"type": "white", "noise": _hyperparameter(kernel.noise_level, kernel.noise_level_bounds)}
    if isinstance(kernel, k.Matern):  # before RBF: Matern subclasses it
        if kernel.nu not in (0.5, 1.5, 2.5):
            raise ValueError(f"mercer's matern takes nu 0.5, 1.5 or 2.5, not {kernel.nu}")
        ls = _hyperparameter(kernel.length_scale, kernel.length_scale_bounds)
        return {"type": "matern", "length_scale": ls, "nu": kernel.nu}
    if isinstance(kernel, k.RBF):
        return {"type": "rbf", "length_scale": _hyperparameter(kernel.length_scale, kernel.length_scale_bounds)}
    if isinstance(kernel, k.RationalQuadratic):
        return {
            "type": "rational_quadratic",
            "length_scale": _hyperparameter(kernel.length_scale, kernel.length_scale_bounds),
            "alpha": _hyperparameter(kernel.alpha, kernel.alpha_bounds),
        }
    if isinstance(kernel, k.ExpSineSquared):
        return {
            "type": "periodic",
            "length_scale": _hyperparameter(kernel.length_scale, kernel.length_scale_bounds),
            "period": _hyperparameter(kernel.periodicity, kernel.periodicity_bounds),
        }
    raise ValueError(f"{kernel!r} has no mercer equivalent here; pass mercer kernel JSON (a dict)")

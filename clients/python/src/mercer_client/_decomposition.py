"""Kernel principal component analysis."""

from __future__ import annotations

import functools

import numpy as np
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils import check_array
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted, validate_data

from ._base import _MercerEstimator, _NamedKernel, _rows_per_request, _seed


class KernelPCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, _NamedKernel, _MercerEstimator):
    """Kernel principal component analysis (mercer's ``kernel_pca``), as
    scikit-learn's ``KernelPCA``: ``n_components`` (``None``: every component with a
    positive eigenvalue), ``kernel``/``gamma``/``degree``/``coef0``/``kernel_params``,
    ``alpha`` and ``fit_inverse_transform`` (the ridge map back to the rows),
    ``eigen_solver`` (``"randomized"``, or any other value for the exact ``"dense"``
    solver), ``random_state`` (seeds ``"randomized"``). Each component's sign makes its
    eigenvector's largest entry positive. Fitted: ``eigenvalues_``."""

    _model = "kernel_pca"

    def __init__(
        self,
        n_components=None,
        *,
        kernel="linear",
        gamma=None,
        degree=3,
        coef0=1,
        kernel_params=None,
        alpha=1.0,
        fit_inverse_transform=False,
        eigen_solver="auto",
        random_state=None,
        search=None,
        url=None,
        token=None,
    ):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.alpha = alpha
        self.fit_inverse_transform = fit_inverse_transform
        self.eigen_solver = eigen_solver
        self.random_state = random_state
        self.search = search
        self.url = url
        self.token = token

    def fit(self, X, y=None):
        """Fits on the server (``y`` is ignored; kernel PCA needs two rows or more)."""
        X = validate_data(self, X, dtype=np.float64, ensure_min_samples=2)
        params = {
            "n_components": None if self.n_components is None else int(self.n_components),
            "eigen_solver": "randomized" if self.eigen_solver == "randomized" else "dense",
            "seed": _seed(self.random_state),
            "fit_inverse_transform": bool(self.fit_inverse_transform),
            "alpha": float(self.alpha),
        }
        model = self._fit_model(X, None, self._kernel_json(X), params)
        self.eigenvalues_ = np.asarray(model["training"]["eigenvalues"], dtype=float)
        self._n_features_out = int(model["training"]["n_components"])
        return self

    def transform(self, X):
        """``POST /models/{id}/transform``: the rows' components, (n, n_components)."""
        X = self._check_rows(X)
        transform = functools.partial(self._client().models.transform, self.model_id_)
        step = _rows_per_request(X)
        return np.vstack([transform(X[i : i + step]) for i in range(0, len(X), step)])

    def _has_inverse(self):
        if not self.fit_inverse_transform:
            raise AttributeError("inverse_transform needs fit_inverse_transform=True")
        return True

    @available_if(_has_inverse)
    def inverse_transform(self, X):
        """``POST /models/{id}/inverse_transform``: components back to rows,
        (n, n_features_in_) (only with ``fit_inverse_transform=True``)."""
        check_is_fitted(self)
        return self._client().models.inverse_transform(self.model_id_, check_array(X, dtype=np.float64))

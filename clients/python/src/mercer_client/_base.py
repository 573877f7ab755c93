"""What every estimator shares: the connection, the fit request, chunked predictions,
the fitted coefficients fetched on demand, and the server model's lifetime."""

from __future__ import annotations

import functools
import numbers
import os
from typing import Any, Optional

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from ._kernels import _named_kernel
from .client import DEFAULT_URL, Client

#: X with more values than this (n_samples x n_features) is uploaded as a dataset
#: (streamed) and the model fitted from it; the dataset is deleted once the fit is
#: done. Predictions on more values are sent in chunks of rows of at most this size.
UPLOAD_THRESHOLD = 100_000


@functools.lru_cache(maxsize=16)
def _cached_client(url: str, token: Optional[str]) -> Client:
    return Client(url, token)


def _connect(url: Optional[str], token: Optional[str]) -> Client:
    """One client (one connection pool) per server and token."""
    url = url or os.environ.get("MERCER_URL") or DEFAULT_URL
    token = token if token is not None else os.environ.get("MERCER_TOKEN")
    return _cached_client(url.rstrip("/"), token or None)


def _seed(random_state: Any) -> Optional[int]:
    """mercer's ``seed`` for a scikit-learn ``random_state``: an integer as it is,
    ``None`` left out (the server's 0), a ``RandomState`` drawn from."""
    if random_state is None:
        return None
    if isinstance(random_state, numbers.Integral):
        return int(random_state)
    return int(check_random_state(random_state).randint(np.iinfo(np.int32).max))


def _max_iter(max_iter: int) -> Optional[int]:
    """scikit-learn's "no limit" (-1) is mercer's null."""
    return None if max_iter is None or max_iter < 0 else int(max_iter)


def _rows_per_request(X: np.ndarray) -> int:
    """Rows per predict or transform request: at most ``UPLOAD_THRESHOLD`` values."""
    return max(1, UPLOAD_THRESHOLD // max(X.shape[1], 1))


class _MercerEstimator(BaseEstimator):
    """The base of every estimator: ``fit`` posts the model, predictions go to it."""

    _model = ""  # mercer's model name

    def _client(self) -> Client:
        return _connect(self.url, self.token)

    def _fit_model(self, X: np.ndarray, y: Any, kernel: dict, params: dict) -> dict:
        """``POST /models`` for the rows (or, above ``UPLOAD_THRESHOLD`` values, for a
        dataset uploaded first and deleted after); ``params`` left ``None`` are left
        out. Sets ``model_`` (the model resource), ``model_id_``, ``search_`` (the search
        report, or None) and, for iterative fits, ``n_iter_`` (mercer's
        ``training.iterations``: for the SVMs, the sum over the one-vs-one problems)."""
        params = {k: v for k, v in params.items() if v is not None}
        client = self._client()
        fit = functools.partial(client.models.fit, self._model, kernel=kernel, params=params, search=self.search)
        if X.size > UPLOAD_THRESHOLD:
            # A dataset always has a target; models without one ignore it.
            dataset = client.datasets.upload(X, y if y is not None else np.zeros(len(X)))
            try:
                model = fit(dataset=dataset["id"])
            finally:
                client.datasets.delete(dataset["id"])
        else:
            model = fit(X, y)
        training = model.get("training") or {}
        self.model_ = model
        self.model_id_ = model["id"]
        self.search_ = training.get("search")
        self.__dict__.pop("n_iter_", None)  # from an earlier fit
        if training.get("iterations") is not None:
            self.n_iter_ = int(training["iterations"])
        return model

    def _check_rows(self, X: Any) -> np.ndarray:
        check_is_fitted(self)
        return validate_data(self, X, reset=False, dtype=np.float64)

    def _predict(self, X: np.ndarray, **options) -> dict:
        """``POST /models/{id}/predict`` (``Client.models.predict``), in chunks of rows
        of at most ``UPLOAD_THRESHOLD`` values unless a covariance is asked for."""
        predict = functools.partial(self._client().models.predict, self.model_id_, **options)
        step = _rows_per_request(X)
        if len(X) <= step or options.get("covariance"):
            return predict(X)
        parts = [predict(X[i : i + step]) for i in range(0, len(X), step)]
        return {k: parts[0][k] if k == "classes" else np.concatenate([p[k] for p in parts]) for k in parts[0]}

    def _coefficients(self) -> dict:
        """The fitted model's ``coefficients`` (``GET /models/{id}?include=coefficients``),
        requested on first use and kept until the estimator is refitted or updated, so
        that ``fit`` stays one request. A model without them (an approximation, or a
        server that does not report them) raises ``AttributeError``, as scikit-learn's
        estimators do for an attribute that does not apply."""
        check_is_fitted(self)
        key = (self.model_id_, self.model_.get("version"))
        cached = self.__dict__.get("_coefficients_cache")
        if cached is None or cached[0] != key:
            resource = self._client().models.get(self.model_id_, include="coefficients")
            cached = self._coefficients_cache = (key, resource.get("coefficients"))
        if cached[1] is None:
            approximation = (self.model_.get("training") or {}).get("approximation")
            raise AttributeError(
                f"the server reports no coefficients for this {self._model} model "
                f"(approximation {approximation!r}; a server older than this client reports none)"
            )
        return cached[1]

    def _coefficient(self, name: str) -> Any:
        """One entry of ``coefficients`` (``AttributeError`` when the server left it out)."""
        value = self._coefficients().get(name)
        if value is None:
            raise AttributeError(f"the server reports no {name!r} among this {self._model} model's coefficients")
        return value

    def delete_model(self) -> None:
        """``DELETE /models/{id}``: removes the fitted model from the server (this
        estimator, and every copy of it, is then unfitted in effect)."""
        check_is_fitted(self)
        self._client().models.delete(self.model_id_)

    def __repr__(self, N_CHAR_MAX: int = 700) -> str:
        text = super().__repr__(N_CHAR_MAX)
        return text.replace(repr(self.token), "'***'") if self.token else text

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = self._precomputed()
        return tags

    def _precomputed(self) -> bool:
        return isinstance(getattr(self, "kernel", None), str) and self.kernel == "precomputed"


class _NamedKernel:
    """Estimators whose kernel is named as scikit-learn's SVMs and KernelRidge name it."""

    def _kernel_json(self, X: np.ndarray) -> dict:
        params = getattr(self, "kernel_params", None)
        return _named_kernel(self.kernel, self.gamma, self.degree, self.coef0, params, X)


class _Nystrom:
    """Estimators that take mercer's approximation parameters: ``approximation``,
    ``n_components`` (M, mercer's ``inducing_points``) and ``inducing_selection``."""

    def _nystrom_params(self) -> dict:
        """``None`` ones are left out of the request, so the server's defaults apply."""
        return {
            "approximation": self.approximation,
            "inducing_points": None if self.n_components is None else int(self.n_components),
            "inducing_selection": self.inducing_selection,
        }


class _Variational:
    """The Gaussian processes' variational form (``approximation="variational"``):
    ``likelihood``, ``batch_size``, ``max_epochs`` (mercer's ``epochs``),
    ``learning_rate``, ``learn_inducing``, ``precision`` (``"float32"``: the minibatch
    steps in single precision); each ``None`` by default (left out: the server's
    default)."""

    def _variational(self) -> bool:
        return self.approximation == "variational"

    def _variational_params(self) -> dict:
        if not self._variational():
            return {}
        return {
            "likelihood": self.likelihood,
            "batch_size": None if self.batch_size is None else int(self.batch_size),
            "epochs": None if self.max_epochs is None else int(self.max_epochs),
            "learning_rate": None if self.learning_rate is None else float(self.learning_rate),
            "learn_inducing": None if self.learn_inducing is None else bool(self.learn_inducing),
            "precision": self.precision,
        }


class _Classifier(ClassifierMixin, _MercerEstimator):
    """Classifiers send class indices 0..k-1 as y (so any labels work) and map the
    server's answers back through ``classes_``."""

    def _encode(self, X, y, sample_weight=None):
        X, y = validate_data(self, X, y, dtype=np.float64)
        check_classification_targets(y)
        self.classes_, codes = np.unique(y, return_inverse=True)
        weights = None if sample_weight is None else _check_sample_weight(sample_weight, X)
        present = self.classes_ if weights is None else np.unique(y[weights > 0])
        if len(present) < 2:
            raise ValueError(
                f"{type(self).__name__} needs samples of at least 2 classes (with positive weight) "
                f"in the data, but the data contains only one class: {present[:1]}"
            )
        return X, codes, None if weights is None else weights.tolist()

    def _class_weight(self):
        """mercer's ``class_weight``: ``"balanced"``, or weights keyed by class index."""
        if self.class_weight is None or isinstance(self.class_weight, str):
            return self.class_weight
        missing = [c for c in self.class_weight if c not in self.classes_]
        if missing:
            raise ValueError(f"The classes, {missing}, are not in class_weight's classes {self.classes_}")
        index = {c: i for i, c in enumerate(self.classes_)}
        return {str(index[c]): float(w) for c, w in self.class_weight.items()}

    def _labels(self, answer: dict) -> np.ndarray:
        return self.classes_[np.asarray(answer["predictions"], dtype=int)]

    def predict(self, X):
        """The predicted class labels, (n,)."""
        return self._labels(self._predict(self._check_rows(X), probabilities=False))

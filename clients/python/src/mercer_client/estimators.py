"""scikit-learn estimators whose fits and predictions run on a mercer server.

Each estimator takes scikit-learn's parameter names where they map (``C``, ``gamma``,
``kernel``, ``alpha``, ``nu``, ``n_components``, ...), translates them to mercer's JSON
at ``fit``, and keeps the id of the model the server fitted in ``model_id_``; predict,
transform and the other methods send rows to that model. Pickling keeps the id (and
``url``/``token``), so an unpickled estimator predicts through the same server model.

Every estimator also takes ``url`` and ``token`` (``None``: ``$MERCER_URL`` /
``$MERCER_TOKEN`` at call time, else ``http://127.0.0.1:8080``) and ``search``: a
server-side search spec (``{"space": {"/params/c": {"log_grid": [0.1, 10, 5]}}, "cv":
5, ...}``, pointers into mercer's ``kernel``/``params`` JSON) run instead of fitting the
one setting; the search report is then in ``search_``.

Server models outlive the estimators: ``delete_model()`` removes an estimator's model.
"""

from __future__ import annotations

import functools
import numbers
import os
from typing import Any, Optional

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassifierMixin,
    ClassNamePrefixFeaturesOutMixin,
    OutlierMixin,
    RegressorMixin,
    TransformerMixin,
)
from sklearn.utils import check_array, check_random_state
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

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


class _MercerEstimator(BaseEstimator):
    """What every estimator shares: the connection, the fit request, chunked
    predictions, and the server model's lifetime."""

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
        step = max(1, UPLOAD_THRESHOLD // max(X.shape[1], 1))
        if len(X) <= step or options.get("covariance"):
            return predict(X)
        parts = [predict(X[i : i + step]) for i in range(0, len(X), step)]
        return {k: parts[0][k] if k == "classes" else np.concatenate([p[k] for p in parts]) for k in parts[0]}

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
        tags.input_tags.pairwise = isinstance(getattr(self, "kernel", None), str) and self.kernel == "precomputed"
        return tags


class _NamedKernel:
    """Estimators whose kernel is named as scikit-learn's SVMs and KernelRidge name it."""

    def _kernel_json(self, X: np.ndarray) -> dict:
        params = getattr(self, "kernel_params", None)
        return _named_kernel(self.kernel, self.gamma, self.degree, self.coef0, params, X)


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


# ---------------------------------------------------------------- regression


class KernelRidge(RegressorMixin, _NamedKernel, _MercerEstimator):
    """Kernel ridge regression (mercer's ``kernel_ridge``), as scikit-learn's
    ``KernelRidge``: ``alpha`` is mercer's ``lambda``; ``kernel``, ``gamma``,
    ``degree``, ``coef0``, ``kernel_params`` as scikit-learn's (``gamma=None`` is
    1 / n_features). ``y`` may be 2-D (several outputs over one kernel).

    The Nystrom approximation, mercer's own parameters (each ``None`` by default: left
    out of the request, so that the server's default applies):

    - ``approximation``: ``"auto"`` (the server's default: exact up to its row limit,
      else nystrom), ``"exact"`` or ``"nystrom"``;
    - ``n_components``: M, the number of inducing points (mercer's ``inducing_points``,
      as scikit-learn's ``Nystroem(n_components=)``; default min(n, 1024));
    - ``inducing_selection``: ``"kmeans"`` or ``"uniform"``; ``seed``: draws the
      inducing points (an integer, or a ``RandomState`` to draw one from);
    - nystrom fits only (the server answers 422 for them on an exact fit): ``solver``
      (``"auto"``: ``"cg"`` when M > 4096, else ``"direct"``; ``"direct"``: the M x M
      system formed and factorised; ``"cg"``: Falkon-preconditioned conjugate
      gradients), and for ``"cg"`` ``max_iter`` (default 100), ``tol`` (default 1e-8,
      on the relative preconditioned residual) and ``precision`` (``"float64"`` or
      ``"float32"``).

    The fit's report is ``model_["training"]`` (``solver``, and for cg ``iterations``,
    ``converged``, ``residual``); ``n_iter_`` is a cg fit's iterations, and 1 for the
    single factorisation of an exact or direct solve."""

    _model = "kernel_ridge"

    def __init__(
        self,
        alpha=1.0,
        *,
        kernel="linear",
        gamma=None,
        degree=3,
        coef0=1,
        kernel_params=None,
        approximation=None,
        n_components=None,
        inducing_selection=None,
        seed=None,
        solver=None,
        max_iter=None,
        tol=None,
        precision=None,
        search=None,
        url=None,
        token=None,
    ):
        self.alpha = alpha
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.approximation = approximation
        self.n_components = n_components
        self.inducing_selection = inducing_selection
        self.seed = seed
        self.solver = solver
        self.max_iter = max_iter
        self.tol = tol
        self.precision = precision
        self.search = search
        self.url = url
        self.token = token

    def _approximation_params(self) -> dict:
        """mercer's approximation and solver params; ``None`` ones are left out of the
        request (``_fit_model`` drops them), so the server's defaults apply."""
        return {
            "approximation": self.approximation,
            "inducing_points": None if self.n_components is None else int(self.n_components),
            "inducing_selection": self.inducing_selection,
            "seed": _seed(self.seed),
            "solver": self.solver,
            "max_iter": None if self.max_iter is None else int(self.max_iter),
            "tol": None if self.tol is None else float(self.tol),
            "precision": self.precision,
        }

    def fit(self, X, y, sample_weight=None):
        """Fits on the server (``sample_weight`` is mercer's ``params.sample_weight``)."""
        X, y = validate_data(self, X, y, dtype=np.float64, multi_output=True, y_numeric=True)
        weights = None if sample_weight is None else _check_sample_weight(sample_weight, X).tolist()
        params = {"lambda": float(self.alpha), "sample_weight": weights, **self._approximation_params()}
        self._fit_model(X, y, self._kernel_json(X), params)
        # An estimator with max_iter has n_iter_ (scikit-learn's convention and checks):
        # cg's iterations, else 1 for the one factorisation of an exact or direct solve.
        self.n_iter_ = getattr(self, "n_iter_", 1)
        return self

    def predict(self, X):
        """The predictions, (n,) or (n, t) for t outputs."""
        return self._predict(self._check_rows(X))["predictions"]

    def add_observations(self, X, y, sample_weight=None):
        """``POST /models/{id}/observations``: adds rows to the fitted model, as a
        refit on all the rows with the same hyperparameters would (the server model
        changes for every copy of this estimator)."""
        X = self._check_rows(X)
        weights = None if sample_weight is None else _check_sample_weight(sample_weight, X).tolist()
        self.model_ = self._client().models.add_observations(self.model_id_, X, np.asarray(y), sample_weight=weights)
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags


class GaussianProcessRegressor(RegressorMixin, _MercerEstimator):
    """Exact Gaussian-process regression (mercer's ``gaussian_process``), as
    scikit-learn's ``GaussianProcessRegressor``.

    ``kernel``: a scikit-learn GP kernel (translated, see :func:`gp_kernel_json`) or
    mercer kernel JSON; ``None`` is scikit-learn's default, a fixed ``RBF(1.0)``.
    ``alpha`` (a number, or one per training row) is the noise variance on the
    diagonal, never optimised (mercer's ``params.noise``, sent as fixed); learn a noise
    level with a ``WhiteKernel``. ``optimizer`` ``"fmin_l_bfgs_b"`` (any value but
    ``None``) maximises the log marginal likelihood over the kernel's free
    hyperparameters on the server (L-BFGS-B), ``n_restarts_optimizer`` more starts
    seeded by ``random_state``. ``normalize_y`` as scikit-learn's.

    Fitted: ``kernel_`` (the fitted kernel, mercer JSON), ``log_marginal_likelihood_value_``.
    """

    _model = "gaussian_process"

    def __init__(
        self,
        kernel=None,
        *,
        alpha=1e-10,
        optimizer="fmin_l_bfgs_b",
        n_restarts_optimizer=0,
        normalize_y=False,
        random_state=None,
        search=None,
        url=None,
        token=None,
    ):
        self.kernel = kernel
        self.alpha = alpha
        self.optimizer = optimizer
        self.n_restarts_optimizer = n_restarts_optimizer
        self.normalize_y = normalize_y
        self.random_state = random_state
        self.search = search
        self.url = url
        self.token = token

    def fit(self, X, y):
        """Fits on the server."""
        X, y = validate_data(self, X, y, dtype=np.float64, multi_output=True, y_numeric=True)
        alpha = np.asarray(self.alpha, dtype=float)
        noise = alpha.tolist() if alpha.ndim else {"value": float(alpha), "fixed": True}
        params = {
            "noise": noise,
            "normalize_y": bool(self.normalize_y),
            "optimize": self.optimizer is not None,
            "restarts": int(self.n_restarts_optimizer),
            "seed": _seed(self.random_state),
            "approximation": "exact",
        }
        model = self._fit_model(X, y, gp_kernel_json(self.kernel), params)
        self.kernel_ = model["kernel"]
        self.log_marginal_likelihood_value_ = model["training"].get("log_marginal_likelihood")
        return self

    def predict(self, X, return_std=False, return_cov=False):
        """The predictive mean, and with ``return_std`` its standard deviation or with
        ``return_cov`` its covariance (of the latent function, plus any
        ``WhiteKernel``: as scikit-learn's). Shapes as scikit-learn's: (n,) / (n, t),
        std (n,) / (n, t), cov (n, n) / (n, n, t)."""
        if return_std and return_cov:
            raise RuntimeError("At most one of return_std or return_cov can be requested.")
        X = self._check_rows(X)
        answer = self._predict(X, variance=bool(return_std), covariance=bool(return_cov))
        if return_std:
            return answer["predictions"], answer["std"]
        if return_cov:
            return answer["predictions"], answer["covariance"]
        return answer["predictions"]

    def sample_y(self, X, n_samples=1, random_state=0):
        """``POST /models/{id}/posterior_samples``: joint draws from the predictive
        distribution at X, (n, n_samples) or (n, t, n_samples) as scikit-learn's;
        ``random_state`` seeds them (the same seed gives the same draws)."""
        X = self._check_rows(X)
        if isinstance(random_state, numbers.Integral):
            seed = int(random_state)
        else:  # None (numpy's global generator) or a RandomState: draw the seed from it
            seed = int(check_random_state(random_state).randint(np.iinfo(np.int32).max))
        return self._client().models.posterior_samples(self.model_id_, X, n_samples, seed=int(seed))

    def add_observations(self, X, y, noise=None):
        """``POST /models/{id}/observations``: adds rows to the fitted GP with its
        hyperparameters unchanged (``noise``: one variance per new row when ``alpha``
        was one per training row). The server model changes for every copy of this
        estimator."""
        X = self._check_rows(X)
        self.model_ = self._client().models.add_observations(self.model_id_, X, np.asarray(y), noise=noise)
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags


class SVR(RegressorMixin, _NamedKernel, _MercerEstimator):
    """Epsilon-support vector regression (mercer's ``svr``, LIBSVM's solver), as
    scikit-learn's ``SVR``: ``C``, ``epsilon``, ``tol``, ``cache_size`` (MB),
    ``max_iter`` (-1: no limit), ``kernel``/``gamma``/``degree``/``coef0``."""

    _model = "svr"

    def __init__(
        self,
        *,
        kernel="rbf",
        degree=3,
        gamma="scale",
        coef0=0.0,
        tol=1e-3,
        C=1.0,
        epsilon=0.1,
        cache_size=200,
        max_iter=-1,
        search=None,
        url=None,
        token=None,
    ):
        self.kernel = kernel
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.tol = tol
        self.C = C
        self.epsilon = epsilon
        self.cache_size = cache_size
        self.max_iter = max_iter
        self.search = search
        self.url = url
        self.token = token

    def fit(self, X, y, sample_weight=None):
        """Fits on the server."""
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True)
        weights = None if sample_weight is None else _check_sample_weight(sample_weight, X).tolist()
        params = {
            "c": float(self.C),
            "epsilon": float(self.epsilon),
            "tol": float(self.tol),
            "cache_mb": float(self.cache_size),
            "max_iter": _max_iter(self.max_iter),
            "sample_weight": weights,
        }
        self._fit_model(X, y, self._kernel_json(X), params)
        return self

    def predict(self, X):
        """The predictions, (n,)."""
        return self._predict(self._check_rows(X))["predictions"]


# ---------------------------------------------------------------- classification


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


class _SVMClassifier(_NamedKernel, _Classifier):
    def _svm_params(self, weights) -> dict:
        return {
            "tol": float(self.tol),
            "cache_mb": float(self.cache_size),
            "max_iter": _max_iter(self.max_iter),
            "probability": bool(self.probability),
            "seed": _seed(self.random_state),
            "class_weight": self._class_weight(),
            "sample_weight": weights,
        }

    def _fitted_support(self, model: dict) -> None:
        per_class = (model.get("training") or {}).get("n_support_per_class")
        self.n_support_ = None if per_class is None else np.asarray(per_class, dtype=np.int32)

    def decision_function(self, X):
        """The decision function: (n,) for two classes (positive means
        ``classes_[1]``), else (n, n_classes) as scikit-learn's
        ``decision_function_shape="ovr"``."""
        return self._predict(self._check_rows(X), probabilities=False)["decision_function"]

    def _has_probability(self):
        if not self.probability:
            raise AttributeError("predict_proba is not available when probability=False")
        return True

    @available_if(_has_probability)
    def predict_proba(self, X):
        """Platt-scaled class probabilities, (n, n_classes) in the order of
        ``classes_`` (fit with ``probability=True``)."""
        return self._predict(self._check_rows(X), probabilities=True)["probabilities"]


class SVC(_SVMClassifier):
    """C-support vector classification (mercer's ``svm``, LIBSVM's solver), as
    scikit-learn's ``SVC`` with ``decision_function_shape="ovr"``: ``C``,
    ``kernel``/``gamma``/``degree``/``coef0``, ``probability``, ``tol``,
    ``cache_size`` (MB), ``class_weight``, ``max_iter`` (-1: no limit),
    ``random_state`` (seeds Platt scaling's folds). Fitted: ``classes_``,
    ``n_support_``."""

    _model = "svm"

    def __init__(
        self,
        *,
        C=1.0,
        kernel="rbf",
        degree=3,
        gamma="scale",
        coef0=0.0,
        probability=False,
        tol=1e-3,
        cache_size=200,
        class_weight=None,
        max_iter=-1,
        random_state=None,
        search=None,
        url=None,
        token=None,
    ):
        self.C = C
        self.kernel = kernel
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.probability = probability
        self.tol = tol
        self.cache_size = cache_size
        self.class_weight = class_weight
        self.max_iter = max_iter
        self.random_state = random_state
        self.search = search
        self.url = url
        self.token = token

    def fit(self, X, y, sample_weight=None):
        """Fits on the server."""
        X, codes, weights = self._encode(X, y, sample_weight)
        params = {"c": float(self.C), **self._svm_params(weights)}
        self._fitted_support(self._fit_model(X, codes, self._kernel_json(X), params))
        return self


class NuSVC(_SVMClassifier):
    """Nu-support vector classification (mercer's ``nu_svm``), as scikit-learn's
    ``NuSVC``: ``nu`` instead of ``C``, otherwise as :class:`SVC`."""

    _model = "nu_svm"

    def __init__(
        self,
        *,
        nu=0.5,
        kernel="rbf",
        degree=3,
        gamma="scale",
        coef0=0.0,
        probability=False,
        tol=1e-3,
        cache_size=200,
        class_weight=None,
        max_iter=-1,
        random_state=None,
        search=None,
        url=None,
        token=None,
    ):
        self.nu = nu
        self.kernel = kernel
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.probability = probability
        self.tol = tol
        self.cache_size = cache_size
        self.class_weight = class_weight
        self.max_iter = max_iter
        self.random_state = random_state
        self.search = search
        self.url = url
        self.token = token

    def fit(self, X, y, sample_weight=None):
        """Fits on the server (an infeasible ``nu`` is a 422 at ``/params/nu``)."""
        X, codes, weights = self._encode(X, y, sample_weight)
        params = {"nu": float(self.nu), **self._svm_params(weights)}
        self._fitted_support(self._fit_model(X, codes, self._kernel_json(X), params))
        return self


class GaussianProcessClassifier(_Classifier):
    """Gaussian-process classification (mercer's ``gp_classifier``: Laplace
    approximation, logistic likelihood, one-vs-rest beyond two classes), as
    scikit-learn's ``GaussianProcessClassifier``: ``kernel`` as
    :class:`GaussianProcessRegressor`'s, ``optimizer`` (``None``: keep the kernel),
    ``n_restarts_optimizer``, ``max_iter_predict`` (Newton steps for the posterior
    mode), ``random_state``. Fitted: ``classes_``, ``kernel_`` (mercer JSON),
    ``log_marginal_likelihood_value_``."""

    _model = "gp_classifier"

    def __init__(
        self,
        kernel=None,
        *,
        optimizer="fmin_l_bfgs_b",
        n_restarts_optimizer=0,
        max_iter_predict=100,
        random_state=None,
        search=None,
        url=None,
        token=None,
    ):
        self.kernel = kernel
        self.optimizer = optimizer
        self.n_restarts_optimizer = n_restarts_optimizer
        self.max_iter_predict = max_iter_predict
        self.random_state = random_state
        self.search = search
        self.url = url
        self.token = token

    def fit(self, X, y):
        """Fits on the server."""
        X, codes, _ = self._encode(X, y)
        params = {
            "optimize": self.optimizer is not None,
            "restarts": int(self.n_restarts_optimizer),
            "max_iter": int(self.max_iter_predict),
            "seed": _seed(self.random_state),
        }
        model = self._fit_model(X, codes, gp_kernel_json(self.kernel), params)
        self.kernel_ = model["kernel"]
        self.log_marginal_likelihood_value_ = model["training"].get("log_marginal_likelihood")
        return self

    def predict_proba(self, X):
        """Class probabilities, (n, n_classes) in the order of ``classes_``."""
        return self._predict(self._check_rows(X), probabilities=True)["probabilities"]


# ---------------------------------------------------------------- novelty, transform


class OneClassSVM(OutlierMixin, _NamedKernel, _MercerEstimator):
    """Novelty detection (mercer's ``one_class_svm``, LIBSVM's solver), as
    scikit-learn's ``OneClassSVM``: ``nu``, ``kernel``/``gamma``/``degree``/``coef0``,
    ``tol``, ``cache_size``, ``max_iter``. ``predict`` answers 1 (inlier) or -1;
    ``decision_function`` = ``score_samples`` - ``offset_``."""

    _model = "one_class_svm"

    def __init__(
        self,
        *,
        kernel="rbf",
        degree=3,
        gamma="scale",
        coef0=0.0,
        tol=1e-3,
        nu=0.5,
        cache_size=200,
        max_iter=-1,
        search=None,
        url=None,
        token=None,
    ):
        self.kernel = kernel
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.tol = tol
        self.nu = nu
        self.cache_size = cache_size
        self.max_iter = max_iter
        self.search = search
        self.url = url
        self.token = token

    def fit(self, X, y=None, sample_weight=None):
        """Fits on the server (``y`` is ignored); ``offset_`` (LIBSVM's rho) is read
        from one prediction."""
        X = validate_data(self, X, dtype=np.float64)
        weights = None if sample_weight is None else _check_sample_weight(sample_weight, X).tolist()
        params = {
            "nu": float(self.nu),
            "tol": float(self.tol),
            "cache_mb": float(self.cache_size),
            "max_iter": _max_iter(self.max_iter),
            "sample_weight": weights,
        }
        self._fit_model(X, None, self._kernel_json(X), params)
        first = self._predict(X[:1])
        self.offset_ = float(first["score_samples"][0] - first["decision_function"][0])
        return self

    def predict(self, X):
        """1 for inliers, -1 for outliers, (n,)."""
        return self._predict(self._check_rows(X))["predictions"].astype(int)

    def decision_function(self, X):
        """sum_i a_i k(x_i, x) - rho, (n,): negative means outlier."""
        return self._predict(self._check_rows(X))["decision_function"]

    def score_samples(self, X):
        """sum_i a_i k(x_i, x), (n,)."""
        return self._predict(self._check_rows(X))["score_samples"]


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
        step = max(1, UPLOAD_THRESHOLD // max(X.shape[1], 1))
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

"""The SVM family (LIBSVM's solver on the server): SVC, NuSVC, SVR, NuSVR, OneClassSVM."""

from __future__ import annotations

import numpy as np
from sklearn.base import OutlierMixin, RegressorMixin
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from ._base import _Classifier, _max_iter, _MercerEstimator, _NamedKernel, _Nystrom, _seed


class _SupportVectors(_NamedKernel):
    """scikit-learn's fitted SVM attributes. ``support_``, ``dual_coef_`` and
    ``intercept_`` are requested from the server (``GET /models/{id}?include=
    coefficients``) the first time one is read, and kept; ``support_vectors_`` are the
    training rows ``support_`` names (the estimator keeps the training X for them, as
    scikit-learn's ``KernelRidge`` keeps ``X_fit_``). A model without them (a nystrom
    ``SVC``) raises ``AttributeError``."""

    def _keep_rows(self, X: np.ndarray, model: dict) -> None:
        self._fit_X = X
        self.n_support_ = self._n_support(model)

    def _n_support(self, model: dict) -> np.ndarray:
        """scikit-learn's ``n_support_`` for regression and one-class: (1,), the total."""
        return np.asarray([model["n_support"]], dtype=np.int32)

    @property
    def support_(self):
        """The training rows of the support vectors, (n_SV,) int32 (grouped by class
        for classifiers, as scikit-learn's)."""
        return np.asarray(self._coefficient("support"), dtype=np.int32)

    @property
    def support_vectors_(self):
        """The support vectors, (n_SV, n_features); (0, 0) for a precomputed kernel, as
        scikit-learn's."""
        support = self.support_
        return np.empty((0, 0)) if self._precomputed() else self._fit_X[support]

    @property
    def dual_coef_(self):
        """scikit-learn's ``dual_coef_``: (n_classes - 1, n_SV) for classifiers, (1,
        n_SV) for regression and one-class."""
        rows = self._coefficient("dual_coef")
        return np.asarray(rows, dtype=float).reshape(len(rows), -1)

    @property
    def intercept_(self):
        """scikit-learn's ``intercept_``: one per machine (n_classes (n_classes - 1) / 2
        for classifiers, (1,) otherwise)."""
        return np.asarray(self._coefficient("intercept"), dtype=float)


# ---------------------------------------------------------------- classification


class _SVMClassifier(_SupportVectors, _Classifier):
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

    def _n_support(self, model: dict):
        """Support vectors per class, (n_classes,) (None for a nystrom fit)."""
        per_class = (model.get("training") or {}).get("n_support_per_class")
        return None if per_class is None else np.asarray(per_class, dtype=np.int32)

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


class SVC(_Nystrom, _SVMClassifier):
    """C-support vector classification (mercer's ``svm``, LIBSVM's solver), as
    scikit-learn's ``SVC`` with ``decision_function_shape="ovr"``: ``C``,
    ``kernel``/``gamma``/``degree``/``coef0``, ``probability``, ``tol``,
    ``cache_size`` (MB), ``class_weight``, ``max_iter`` (-1: no limit),
    ``random_state`` (seeds Platt scaling's folds and the inducing points).

    The Nystrom approximation (mercer's, each ``None`` by default: left out, so that
    the server's default applies): ``approximation`` (``"auto"``: exact up to the
    server's row limit, else nystrom; ``"exact"``; ``"nystrom"``: a linear SVM, the
    L2-regularised hinge loss solved as LIBLINEAR's ``-s 3 -B 1``, on the rows' Nystrom
    features), ``n_components`` (M, mercer's ``inducing_points``), ``inducing_selection``
    (``"kmeans"`` or ``"uniform"``). ``tol`` and ``max_iter`` are then the coordinate
    descent's (``max_iter=-1`` is the server's cap of 1000 there); a nystrom fit has no
    ``probability`` (422) and no support vectors.

    Fitted: ``classes_``, ``n_support_`` (per class), ``n_iter_``, and (requested from
    the server on first use) ``support_``, ``support_vectors_``, ``dual_coef_``,
    ``intercept_``."""

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
        approximation=None,
        n_components=None,
        inducing_selection=None,
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
        self.approximation = approximation
        self.n_components = n_components
        self.inducing_selection = inducing_selection
        self.search = search
        self.url = url
        self.token = token

    def fit(self, X, y, sample_weight=None):
        """Fits on the server."""
        X, codes, weights = self._encode(X, y, sample_weight)
        params = {"c": float(self.C), **self._svm_params(weights), **self._nystrom_params()}
        self._keep_rows(X, self._fit_model(X, codes, self._kernel_json(X), params))
        return self


class NuSVC(_SVMClassifier):
    """Nu-support vector classification (mercer's ``nu_svm``), as scikit-learn's
    ``NuSVC``: ``nu`` instead of ``C``, otherwise as :class:`SVC` (always exact)."""

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
        self._keep_rows(X, self._fit_model(X, codes, self._kernel_json(X), params))
        return self


# ---------------------------------------------------------------- regression


class _SVMRegressor(RegressorMixin, _SupportVectors, _MercerEstimator):
    def _fit_svr(self, X, y, sample_weight, params: dict):
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True)
        weights = None if sample_weight is None else _check_sample_weight(sample_weight, X).tolist()
        params = {
            **params,
            "c": float(self.C),
            "tol": float(self.tol),
            "cache_mb": float(self.cache_size),
            "max_iter": _max_iter(self.max_iter),
            "sample_weight": weights,
        }
        self._keep_rows(X, self._fit_model(X, y, self._kernel_json(X), params))
        return self

    def predict(self, X):
        """The predictions, (n,)."""
        return self._predict(self._check_rows(X))["predictions"]


class SVR(_SVMRegressor):
    """Epsilon-support vector regression (mercer's ``svr``, LIBSVM's solver), as
    scikit-learn's ``SVR``: ``C``, ``epsilon``, ``tol``, ``cache_size`` (MB),
    ``max_iter`` (-1: no limit), ``kernel``/``gamma``/``degree``/``coef0``. Fitted:
    ``n_support_``, ``n_iter_``, and (requested from the server on first use)
    ``support_``, ``support_vectors_``, ``dual_coef_``, ``intercept_``."""

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
        return self._fit_svr(X, y, sample_weight, {"epsilon": float(self.epsilon)})


class NuSVR(_SVMRegressor):
    """Nu-support vector regression (mercer's ``nu_svr``, LIBSVM's ``-s 4``), as
    scikit-learn's ``NuSVR``: ``nu`` (bounds the fraction of support vectors from
    below and of errors from above; the tube's epsilon is found by the solver and
    reported as ``model_["training"]["epsilon"]``), otherwise as :class:`SVR`."""

    _model = "nu_svr"

    def __init__(
        self,
        *,
        nu=0.5,
        C=1.0,
        kernel="rbf",
        degree=3,
        gamma="scale",
        coef0=0.0,
        tol=1e-3,
        cache_size=200,
        max_iter=-1,
        search=None,
        url=None,
        token=None,
    ):
        self.nu = nu
        self.C = C
        self.kernel = kernel
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.tol = tol
        self.cache_size = cache_size
        self.max_iter = max_iter
        self.search = search
        self.url = url
        self.token = token

    def fit(self, X, y, sample_weight=None):
        """Fits on the server."""
        return self._fit_svr(X, y, sample_weight, {"nu": float(self.nu)})


# ---------------------------------------------------------------- novelty


class OneClassSVM(OutlierMixin, _SupportVectors, _MercerEstimator):
    """Novelty detection (mercer's ``one_class_svm``, LIBSVM's solver), as
    scikit-learn's ``OneClassSVM``: ``nu``, ``kernel``/``gamma``/``degree``/``coef0``,
    ``tol``, ``cache_size``, ``max_iter``. ``predict`` answers 1 (inlier) or -1;
    ``decision_function`` = ``score_samples`` - ``offset_``. Fitted: ``offset_`` (rho),
    ``intercept_`` (-rho), ``n_support_``, ``n_iter_``, and (requested from the server
    on first use) ``support_``, ``support_vectors_``, ``dual_coef_``."""

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
        """Fits on the server (``y`` is ignored)."""
        X = validate_data(self, X, dtype=np.float64)
        weights = None if sample_weight is None else _check_sample_weight(sample_weight, X).tolist()
        params = {
            "nu": float(self.nu),
            "tol": float(self.tol),
            "cache_mb": float(self.cache_size),
            "max_iter": _max_iter(self.max_iter),
            "sample_weight": weights,
        }
        self._keep_rows(X, self._fit_model(X, None, self._kernel_json(X), params))
        return self

    @property
    def offset_(self):
        """LIBSVM's rho, (1,) as scikit-learn's: ``decision_function`` is
        ``score_samples`` minus it (the fit's ``training.rho``; no request)."""
        check_is_fitted(self)
        rho = (self.model_.get("training") or {}).get("rho")
        if rho is None:
            raise AttributeError("the server reported no training.rho (a server older than this client)")
        return np.asarray([rho], dtype=float)

    @property
    def intercept_(self):
        """-rho, (1,) as scikit-learn's."""
        return -self.offset_

    def predict(self, X):
        """1 for inliers, -1 for outliers, (n,)."""
        return self._predict(self._check_rows(X))["predictions"].astype(int)

    def decision_function(self, X):
        """sum_i a_i k(x_i, x) - rho, (n,): negative means outlier."""
        return self._predict(self._check_rows(X))["decision_function"]

    def score_samples(self, X):
        """sum_i a_i k(x_i, x), (n,)."""
        return self._predict(self._check_rows(X))["score_samples"]

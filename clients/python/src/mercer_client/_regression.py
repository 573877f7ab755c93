"""Regressors: kernel ridge, Gaussian processes, Nadaraya-Watson, RBF networks."""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import RegressorMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import _check_sample_weight, column_or_1d, validate_data

from ._base import _MercerEstimator, _NamedKernel, _Nystrom, _seed, _Variational
from ._kernels import gp_kernel_json


class KernelRidge(RegressorMixin, _NamedKernel, _Nystrom, _MercerEstimator):
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
    single factorisation of an exact or direct solve.

    ``dual_coef_`` (requested from the server on first use, see :attr:`dual_coef_`) is
    scikit-learn's: predictions are ``K(X, X_fit) @ dual_coef_``."""

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
            **self._nystrom_params(),
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

    @property
    def dual_coef_(self):
        """scikit-learn's ``dual_coef_``: the coefficients of the training rows, (n,) or
        (n, t) for t outputs (``GET /models/{id}?include=coefficients``, on first use;
        an online update changes them). A nystrom fit has one per inducing point, (M,)
        or (M, t); with ``inducing_selection="uniform"`` those are the training rows
        ``model_["training"]["inducing_indices"]``."""
        return np.asarray(self._coefficient("alpha"), dtype=float)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags


class GaussianProcessRegressor(RegressorMixin, _Nystrom, _Variational, _MercerEstimator):
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

    The sparse approximation (mercer's): ``approximation`` ``"exact"`` (the default
    here, as scikit-learn's GP), ``"nystrom"`` (the sparse variational GP of Titsias,
    with M inducing points; its ``optimize`` maximises the evidence lower bound) or
    ``"auto"`` (exact up to the server's row limit); ``n_components`` (M, mercer's
    ``inducing_points``; default min(n, 1024)); ``inducing_selection`` (``"kmeans"`` or
    ``"uniform"``, drawn with ``random_state``). mercer's conjugate-gradient solver
    belongs to kernel ridge only: a GP takes no ``solver``/``tol`` (``precision`` is the variational form's).

    ``approximation="variational"``: a stochastic variational GP (M inducing points,
    default min(n, 512); learned by minibatches, hyperparameters by Adam unless
    ``optimizer`` is ``None``), for many rows and other likelihoods: ``likelihood``
    (``"gaussian"``, ``"student_t"``: robust to outliers, ``"poisson"``: counts, the
    prediction being the rate), ``batch_size``, ``max_epochs`` (mercer's ``epochs``),
    ``learning_rate``, ``learn_inducing``. The noise is then learned too (from 1) unless
    ``alpha`` is set to something other than its default, which fixes it as scikit-learn's
    ``alpha`` does; ``n_restarts_optimizer`` is not used. ``predict(return_std=True)`` is
    then the likelihood's predictive standard deviation (``student_t``: of y;
    ``poisson``: of the rate).

    Fitted: ``kernel_`` (the fitted kernel, mercer JSON), ``log_marginal_likelihood_value_``
    (exact fits; a nystrom fit reports ``model_["training"]["evidence_lower_bound"]``, a
    variational fit ``elbo_``), and ``alpha_`` (requested from the server on first use;
    exact and nystrom fits).
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
        approximation="exact",
        n_components=None,
        inducing_selection=None,
        likelihood=None,
        batch_size=None,
        max_epochs=None,
        learning_rate=None,
        learn_inducing=None,
        precision=None,
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
        self.approximation = approximation
        self.n_components = n_components
        self.inducing_selection = inducing_selection
        self.likelihood = likelihood
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.learning_rate = learning_rate
        self.learn_inducing = learn_inducing
        self.precision = precision
        self.search = search
        self.url = url
        self.token = token

    def fit(self, X, y):
        """Fits on the server."""
        X, y = validate_data(self, X, y, dtype=np.float64, multi_output=True, y_numeric=True)
        alpha = np.asarray(self.alpha, dtype=float)
        noise = alpha.tolist() if alpha.ndim else {"value": float(alpha), "fixed": True}
        variational = self._variational()
        if variational and y.ndim == 2 and y.shape[1] == 1:
            y = column_or_1d(y, warn=True)  # one output: a column vector is read as 1-D
        if variational and (self.likelihood == "poisson" or (not alpha.ndim and float(alpha) == 1e-10)):
            noise = None  # learned from the server's start (poisson has none)
        params = {
            "noise": noise,
            "normalize_y": bool(self.normalize_y),
            "optimize": self.optimizer is not None,
            "restarts": None if variational else int(self.n_restarts_optimizer),
            "seed": _seed(self.random_state),
            **self._nystrom_params(),
            **self._variational_params(),
        }
        model = self._fit_model(X, y, gp_kernel_json(self.kernel), params)
        self.kernel_ = model["kernel"]
        self.log_marginal_likelihood_value_ = model["training"].get("log_marginal_likelihood")
        self.elbo_ = model["training"].get("elbo")
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

    @property
    def alpha_(self):
        """scikit-learn's ``alpha_``: (K + noise I)^-1 y over the training rows, (n,) or
        (n, t), in normalised units under ``normalize_y`` (as scikit-learn's)
        (``GET /models/{id}?include=coefficients``, on first use; an online update
        changes it). A nystrom fit has one per inducing point."""
        return np.asarray(self._coefficient("alpha"), dtype=float)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # A variational fit has one output (a 2-D y is 422 at /y).
        tags.target_tags.multi_output = not self._variational()
        return tags


class NadarayaWatsonRegressor(RegressorMixin, _NamedKernel, _MercerEstimator):
    """Nadaraya-Watson kernel regression (mercer's ``nadaraya_watson``): the prediction
    at x is the kernel-weighted mean of the training targets, sum_n k(x, x_n) y_n /
    sum_m k(x, x_m); where every weight is 0 it is the nearest training row's target.
    No fitting beyond keeping the rows. ``kernel``/``gamma``/``degree``/``coef0``/
    ``kernel_params`` as :class:`SVR`'s; the kernel is the smoother, so it should be
    non-negative (``"rbf"``, ``"laplacian"``, mercer's ``"matern"``, ...; a precomputed
    kernel is refused).

    ``gamma`` is the bandwidth, and the model's one real choice: pick it by
    cross-validation (``search=``, or ``GridSearchCV``). The default, 0.5, is
    exp(-|x - z|^2 / 2), a Gaussian of width 1: mercer's default kernel, and
    scikit-learn's ``KernelDensity(bandwidth=1.0)`` (Nadaraya-Watson is a ratio of two
    kernel density estimates), suited to standardised features. ``"scale"`` (1 /
    (n_features var(X)), the SVMs' default) smooths over about the whole data set."""

    _model = "nadaraya_watson"

    def __init__(
        self,
        *,
        kernel="rbf",
        gamma=0.5,
        degree=3,
        coef0=0.0,
        kernel_params=None,
        search=None,
        url=None,
        token=None,
    ):
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.search = search
        self.url = url
        self.token = token

    def fit(self, X, y):
        """Sends the rows to the server."""
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True)
        self._fit_model(X, y, self._kernel_json(X), {})
        return self

    def predict(self, X):
        """The predictions, (n,)."""
        return self._predict(self._check_rows(X))["predictions"]


class RBFNetworkRegressor(RegressorMixin, _NamedKernel, _MercerEstimator):
    """A radial-basis-function network (mercer's ``rbf_network``): f(x) = sum_m w_m
    k(x, c_m) over M centres, w = (Phi'Phi + alpha I)^-1 Phi'y with Phi the n x M matrix
    of k(x_n, c_m), i.e. scikit-learn's ``Ridge(alpha, fit_intercept=False)`` on Phi.

    ``centers`` (mercer's name): ``None`` makes every training row a centre (then
    ``alpha=0``, the default, interpolates the rows exactly, and repeated rows make the
    system singular, as does a Gaussian kernel over many close rows: a 422 at
    ``/params/lambda``), or a count M of centres drawn from the rows without
    replacement with ``random_state`` (at most n, else ``ValueError``). ``alpha`` is
    mercer's ``lambda``. ``kernel``/``gamma``/``degree``/``coef0``/``kernel_params`` as
    :class:`SVR`'s (default an RBF kernel with ``gamma="scale"``)."""

    _model = "rbf_network"

    def __init__(
        self,
        centers=None,
        *,
        alpha=0.0,
        kernel="rbf",
        gamma="scale",
        degree=3,
        coef0=0.0,
        kernel_params=None,
        random_state=None,
        search=None,
        url=None,
        token=None,
    ):
        self.centers = centers
        self.alpha = alpha
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.random_state = random_state
        self.search = search
        self.url = url
        self.token = token

    def fit(self, X, y):
        """Fits on the server."""
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True)
        if self.centers is not None and self.centers > len(X):  # as KMeans says it
            raise ValueError(f"n_samples={len(X)} should be >= centers={self.centers}")
        params = {
            "centers": None if self.centers is None else int(self.centers),
            "lambda": float(self.alpha),
            "seed": _seed(self.random_state),
        }
        self._fit_model(X, y, self._kernel_json(X), params)
        return self

    def predict(self, X):
        """The predictions, (n,)."""
        return self._predict(self._check_rows(X))["predictions"]

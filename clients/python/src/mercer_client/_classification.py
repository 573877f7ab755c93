"""Classifiers beyond the SVMs: Gaussian-process classification, kernel logistic
regression, the kernel perceptron."""

from __future__ import annotations

import numpy as np

from ._base import _Classifier, _NamedKernel, _Nystrom, _seed, _Variational
from ._kernels import gp_kernel_json


class GaussianProcessClassifier(_Nystrom, _Variational, _Classifier):
    """Gaussian-process classification (mercer's ``gp_classifier``: Laplace
    approximation, logistic likelihood, one-vs-rest beyond two classes), as
    scikit-learn's ``GaussianProcessClassifier``: ``kernel`` as
    :class:`GaussianProcessRegressor`'s, ``optimizer`` (``None``: keep the kernel),
    ``n_restarts_optimizer``, ``max_iter_predict`` (Newton steps for the posterior
    mode), ``random_state``.

    ``approximation="variational"`` (mercer's, for many rows): a stochastic variational GP
    with M inducing points (``n_components``, default min(n, 512); ``inducing_selection``),
    ``likelihood`` ``"bernoulli"`` (probit; the default for two classes) or ``"softmax"``
    (one latent GP per class, fitted jointly: ``predict_proba``'s rows sum to one jointly,
    not by normalising one-vs-rest machines; the default for more), ``batch_size``,
    ``max_epochs`` (mercer's ``epochs``), ``learning_rate``, ``learn_inducing``;
    ``n_restarts_optimizer`` and ``max_iter_predict`` are not used. ``"auto"`` lets the
    server choose (exact where it fits); the default, ``None``, is the server's (auto).

    Fitted: ``classes_``, ``kernel_`` (mercer JSON), ``log_marginal_likelihood_value_``
    (exact fits), ``elbo_`` (variational fits)."""

    _model = "gp_classifier"

    def __init__(
        self,
        kernel=None,
        *,
        optimizer="fmin_l_bfgs_b",
        n_restarts_optimizer=0,
        max_iter_predict=100,
        random_state=None,
        approximation=None,
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
        self.optimizer = optimizer
        self.n_restarts_optimizer = n_restarts_optimizer
        self.max_iter_predict = max_iter_predict
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
        X, codes, _ = self._encode(X, y)
        variational = self._variational()
        params = {
            "optimize": self.optimizer is not None,
            "restarts": None if variational else int(self.n_restarts_optimizer),
            "max_iter": None if variational else int(self.max_iter_predict),
            "seed": _seed(self.random_state),
            **self._nystrom_params(),
            **self._variational_params(),
        }
        model = self._fit_model(X, codes, gp_kernel_json(self.kernel), params)
        self.kernel_ = model["kernel"]
        self.log_marginal_likelihood_value_ = model["training"].get("log_marginal_likelihood")
        self.elbo_ = model["training"].get("elbo")
        return self

    def predict_proba(self, X):
        """Class probabilities, (n, n_classes) in the order of ``classes_``."""
        return self._predict(self._check_rows(X), probabilities=True)["probabilities"]


class KernelLogisticRegression(_Nystrom, _NamedKernel, _Classifier):
    """Kernel logistic regression (mercer's ``kernel_logistic``): f(x) = sum_i a_i
    k(x_i, x) + b minimising sum_i log(1 + exp(-y_i f(x_i))) + (a'Ka) / (2 C), the bias
    unpenalised, by Newton's method; one-vs-rest beyond two classes (probabilities
    normalised to sum to 1). It is scikit-learn's ``LogisticRegression(C=C)`` on the
    features L^-1 k(x) (L the Cholesky factor of the training rows' kernel matrix), so
    ``C`` is scikit-learn's (mercer's ``lambda`` is 1 / C).

    ``kernel``/``gamma``/``degree``/``coef0``/``kernel_params`` as :class:`SVC`'s
    (default an RBF kernel with ``gamma="scale"``; ``"precomputed"`` too);
    ``max_iter``: Newton steps (one-vs-rest: per class). The Nystrom approximation
    (mercer's, each ``None`` by default: left out, so that the server's default
    applies): ``approximation`` (``"auto"``, ``"exact"``, ``"nystrom"``: f restricted
    to the span of M inducing points, the same as ``LogisticRegression(C=C)`` on their
    Nystrom features), ``n_components`` (M, mercer's ``inducing_points``),
    ``inducing_selection`` (``"kmeans"``, ``"uniform"``), drawn with ``random_state``.

    Fitted: ``classes_``, ``n_iter_`` (Newton steps, summed over one-vs-rest)."""

    _model = "kernel_logistic"

    def __init__(
        self,
        C=1.0,
        *,
        kernel="rbf",
        gamma="scale",
        degree=3,
        coef0=0.0,
        kernel_params=None,
        max_iter=100,
        approximation=None,
        n_components=None,
        inducing_selection=None,
        random_state=None,
        search=None,
        url=None,
        token=None,
    ):
        self.C = C
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.max_iter = max_iter
        self.approximation = approximation
        self.n_components = n_components
        self.inducing_selection = inducing_selection
        self.random_state = random_state
        self.search = search
        self.url = url
        self.token = token

    def fit(self, X, y):
        """Fits on the server."""
        if not self.C > 0:
            raise ValueError(f"C must be positive (mercer's lambda is 1 / C), not {self.C!r}")
        X, codes, _ = self._encode(X, y)
        params = {
            "lambda": 1.0 / float(self.C),
            "max_iter": int(self.max_iter),
            "seed": _seed(self.random_state),
            **self._nystrom_params(),
        }
        self._fit_model(X, codes, self._kernel_json(X), params)
        return self

    def predict_proba(self, X):
        """Class probabilities, (n, n_classes) in the order of ``classes_``."""
        return self._predict(self._check_rows(X), probabilities=True)["probabilities"]

    def predict_log_proba(self, X):
        """The logarithm of :meth:`predict_proba`."""
        return np.log(self.predict_proba(X))


class KernelPerceptron(_NamedKernel, _Classifier):
    """The kernel perceptron (mercer's ``kernel_perceptron``): mistake-driven updates
    of f(x) = sum_i a_i y_i k(x_i, x), passing over the rows in an order drawn from
    ``random_state`` for at most ``max_iter`` epochs (mercer's ``max_epochs``, as
    scikit-learn's ``Perceptron(max_iter=)``) or until an epoch makes no mistake;
    one-vs-rest beyond two classes. ``kernel``/``gamma``/``degree``/``coef0``/
    ``kernel_params`` as :class:`SVC`'s (default an RBF kernel with
    ``gamma="scale"``).

    Fitted: ``classes_``, ``n_iter_`` (epochs run); whether the last epoch made no
    mistake is ``model_["training"]["converged"]``."""

    _model = "kernel_perceptron"

    def __init__(
        self,
        *,
        kernel="rbf",
        gamma="scale",
        degree=3,
        coef0=0.0,
        kernel_params=None,
        max_iter=100,
        random_state=None,
        search=None,
        url=None,
        token=None,
    ):
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.max_iter = max_iter
        self.random_state = random_state
        self.search = search
        self.url = url
        self.token = token

    def fit(self, X, y):
        """Fits on the server."""
        X, codes, _ = self._encode(X, y)
        params = {"max_epochs": int(self.max_iter), "seed": _seed(self.random_state)}
        self._fit_model(X, codes, self._kernel_json(X), params)
        return self

    def decision_function(self, X):
        """(n,) for two classes (positive means ``classes_[1]``), else (n, n_classes):
        one score per class, the largest being the prediction."""
        return self._predict(self._check_rows(X))["decision_function"]

"""The estimators of the models beyond test_estimators.py's (NuSVR, kernel logistic
regression, the kernel perceptron, Nadaraya-Watson, RBF networks) and the Nystrom
approximation of SVC, KernelLogisticRegression and GaussianProcessRegressor, each
against scikit-learn on the same data: its estimator where it has one, else the model's
formula evaluated with scikit-learn's kernels and linear models.

Tolerances: as in test_estimators.py, both sides solve the same well-conditioned
problems in float64 (Newton's method and LIBLINEAR's coordinate descent run to a tight
tol here), so they agree to far better than the 1e-6 used.
"""

import numpy as np
import pytest
import scipy.linalg
from sklearn import gaussian_process, svm
from sklearn.datasets import make_classification
from sklearn.gaussian_process.kernels import RBF
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.metrics import pairwise_distances
from sklearn.metrics.pairwise import laplacian_kernel, rbf_kernel
from sklearn.multiclass import OneVsRestClassifier

from mercer_client import (
    SVC,
    GaussianProcessRegressor,
    KernelLogisticRegression,
    KernelPerceptron,
    MercerError,
    NadarayaWatsonRegressor,
    NuSVR,
    RBFNetworkRegressor,
)

GAMMA = 0.3


def assert_close(ours, theirs):
    theirs = np.asarray(theirs)
    assert np.shape(ours) == theirs.shape
    scale = max(1.0, float(np.abs(theirs).max()))
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6 * scale)


def nystrom_features(Z, X):
    """phi(x) = L^-1 k_Z(x), L the Cholesky factor of K_ZZ: rows of X as features."""
    L = np.linalg.cholesky(rbf_kernel(Z, Z, gamma=GAMMA))
    return scipy.linalg.solve_triangular(L, rbf_kernel(Z, X, gamma=GAMMA), lower=True).T


def logistic_regression(C, y):
    """scikit-learn's L2 logistic regression, solved tightly; one-vs-rest beyond two
    classes (its probabilities normalised to sum to 1, as mercer's)."""
    model = LogisticRegression(C=C, solver="newton-cholesky", tol=1e-12, max_iter=1000)
    return OneVsRestClassifier(model) if len(np.unique(y)) > 2 else model


# ---------------------------------------------------------------- NuSVR


def test_nu_svr_equals_scikit_learn(regression):
    X, y = regression
    params = dict(nu=0.4, C=2.0, gamma=0.2)
    ours = NuSVR(**params).fit(X[:60], y[:60])
    theirs = svm.NuSVR(**params).fit(X[:60], y[:60])
    assert_close(ours.predict(X[60:]), theirs.predict(X[60:]))
    np.testing.assert_array_equal(ours.n_support_, theirs.n_support_)
    assert ours.model_["params"]["nu"] == 0.4 and ours.model_["training"]["epsilon"] > 0
    weights = np.linspace(0.5, 2.0, 60)
    ours.fit(X[:60], y[:60], sample_weight=weights)
    assert_close(ours.predict(X[60:]), theirs.fit(X[:60], y[:60], sample_weight=weights).predict(X[60:]))


# ---------------------------------------------------------------- kernel logistic regression


@pytest.mark.parametrize("data", ["binary", "three_classes"])
def test_kernel_logistic_regression_is_logistic_regression_on_kernel_features(request, data):
    """The exact model is scikit-learn's LogisticRegression(C) on L^-1 k(x) with L the
    Cholesky factor of the training rows' kernel matrix (a'Ka = |w|^2 for w = L'a)."""
    X, y = request.getfixturevalue(data)
    ours = KernelLogisticRegression(C=2.0, kernel="rbf", gamma=GAMMA).fit(X[:80], y[:80])
    assert ours.model_["params"]["lambda"] == 0.5 and ours.model_["training"]["approximation"] == "exact"
    theirs = logistic_regression(2.0, y).fit(nystrom_features(X[:80], X[:80]), y[:80])
    features = nystrom_features(X[:80], X[80:])
    assert_close(ours.predict_proba(X[80:]), theirs.predict_proba(features))
    np.testing.assert_array_equal(ours.predict(X[80:]), theirs.predict(features))
    np.testing.assert_allclose(ours.predict_log_proba(X[80:]), np.log(ours.predict_proba(X[80:])))
    assert ours.n_iter_ == ours.model_["training"]["iterations"] >= 1


@pytest.mark.parametrize("data", ["binary", "three_classes"])
def test_kernel_logistic_regression_nystrom(request, data):
    """With approximation="nystrom" the model is LogisticRegression(C) on the Nystrom
    features of the M inducing rows (uniform selection, seeded by random_state)."""
    X, y = request.getfixturevalue(data)
    ours = KernelLogisticRegression(
        C=2.0, kernel="rbf", gamma=GAMMA, approximation="nystrom", n_components=20,
        inducing_selection="uniform", random_state=3,
    ).fit(X[:80], y[:80])
    training = ours.model_["training"]
    assert training["approximation"] == "nystrom" and training["inducing_points"] == 20
    assert training["jitter"] == 0 and ours.model_["params"]["seed"] == 3
    Z = X[:80][training["inducing_indices"]]
    theirs = logistic_regression(2.0, y).fit(nystrom_features(Z, X[:80]), y[:80])
    assert_close(ours.predict_proba(X[80:]), theirs.predict_proba(nystrom_features(Z, X[80:])))


def test_kernel_logistic_regression_refuses_a_non_positive_c(binary):
    X, y = binary
    with pytest.raises(ValueError, match="C must be positive"):
        KernelLogisticRegression(C=0.0).fit(X, y)


# ---------------------------------------------------------------- SVC and GP at scale


@pytest.mark.parametrize("data", ["binary", "three_classes"])
def test_svc_nystrom_is_linear_svc_on_nystrom_features(request, data):
    """SVC(approximation="nystrom") is LIBLINEAR's dual coordinate descent on the
    Nystrom features plus a regularised bias feature: scikit-learn's LinearSVC(loss=
    "hinge", intercept_scaling=1) there, one-vs-rest; both run to tol 1e-10."""
    X, y = request.getfixturevalue(data)
    params = dict(C=2.0, tol=1e-10, max_iter=100_000)
    ours = SVC(
        kernel="rbf", gamma=GAMMA, approximation="nystrom", n_components=20, inducing_selection="uniform",
        random_state=0, **params,
    ).fit(X[:80], y[:80])
    assert ours.model_["training"]["converged"] is True and ours.n_support_ is None
    Z = X[:80][ours.model_["training"]["inducing_indices"]]
    theirs = svm.LinearSVC(loss="hinge", dual=True, intercept_scaling=1, **params)
    theirs.fit(nystrom_features(Z, X[:80]), y[:80])
    features = nystrom_features(Z, X[80:])
    assert_close(ours.decision_function(X[80:]), theirs.decision_function(features))
    np.testing.assert_array_equal(ours.predict(X[80:]), theirs.predict(features))


def test_svc_nystrom_has_no_probabilities(binary):
    X, y = binary
    with pytest.raises(MercerError) as error:
        SVC(probability=True, approximation="nystrom").fit(X, y)
    assert error.value.status == 422 and error.value.pointers == ["/params/probability"]


def test_gaussian_process_nystrom_with_every_row_is_the_exact_gp(regression):
    """With M = n inducing points at the training rows the sparse GP equals the exact
    one (mean and std: scikit-learn's), and its evidence lower bound is the exact log
    marginal likelihood."""
    X, y = regression
    args = dict(kernel=RBF(1.2), alpha=1e-2, optimizer=None)
    ours = GaussianProcessRegressor(approximation="nystrom", n_components=60, inducing_selection="uniform", **args)
    ours.fit(X[:60], y[:60])
    training = ours.model_["training"]
    assert training["approximation"] == "nystrom" and sorted(training["inducing_indices"]) == list(range(60))
    theirs = gaussian_process.GaussianProcessRegressor(**args).fit(X[:60], y[:60])
    assert_close(training["evidence_lower_bound"], theirs.log_marginal_likelihood_value_)  # the bound is tight
    mean, std = ours.predict(X[60:], return_std=True)
    want_mean, want_std = theirs.predict(X[60:], return_std=True)
    assert_close(mean, want_mean)
    assert_close(std, want_std)


def test_gaussian_process_is_exact_unless_asked(regression):
    """The default stays scikit-learn's exact GP; nystrom with fewer points differs."""
    X, y = regression
    exact = GaussianProcessRegressor(kernel=RBF(1.2), alpha=1e-2, optimizer=None).fit(X, y)
    assert exact.model_["training"]["approximation"] == "exact"
    sparse = GaussianProcessRegressor(
        kernel=RBF(1.2), alpha=1e-2, optimizer=None, approximation="nystrom", n_components=5
    ).fit(X, y)
    assert sparse.model_["n_support"] == 5
    assert np.abs(sparse.predict(X) - exact.predict(X)).max() > 1e-3


# ---------------------------------------------------------------- kernel perceptron


@pytest.mark.parametrize("classes", [2, 3])
def test_kernel_perceptron_separates_its_training_rows(classes):
    """Separable classes: the perceptron stops after an epoch without a mistake, so
    every training row is classified right; its decision function lies in the span of
    the kernel columns k(x_i, .) plus a constant (scikit-learn's rbf_kernel), checked
    by least squares over more query rows than columns; the largest score wins."""
    X, y = make_classification(
        n_samples=40, n_features=3, n_informative=3, n_redundant=0, n_classes=classes, class_sep=3.0,
        n_clusters_per_class=1, random_state=2,
    )
    ours = KernelPerceptron(kernel="rbf", gamma=GAMMA, random_state=1).fit(X, y)
    assert ours.model_["training"]["converged"] is True and ours.n_iter_ >= 1
    assert ours.model_["params"] == {"max_epochs": 100, "seed": 1}
    np.testing.assert_array_equal(ours.predict(X), y)
    queries = np.random.RandomState(0).uniform(X.min(0), X.max(0), size=(200, 3))
    scores = ours.decision_function(queries)
    columns = np.column_stack([rbf_kernel(queries, X, gamma=GAMMA), np.ones(len(queries))])
    scores_2d = scores.reshape(len(queries), -1)
    fitted = columns @ np.linalg.lstsq(columns, scores_2d, rcond=None)[0]
    assert_close(fitted, scores_2d)
    if classes > 2:
        np.testing.assert_array_equal(ours.predict(queries), ours.classes_[scores.argmax(axis=1)])
    else:
        np.testing.assert_array_equal(ours.predict(queries), ours.classes_[(scores > 0).astype(int)])


def test_kernel_perceptron_max_iter_bounds_the_epochs():
    """Noisy labels cannot be separated by a linear kernel: max_iter=2 stops at 2
    epochs, not converged."""
    X, y = make_classification(n_samples=60, n_features=3, n_informative=3, n_redundant=0, flip_y=0.3, random_state=0)
    model = KernelPerceptron(kernel="linear", max_iter=2).fit(X, y)
    assert model.n_iter_ == 2 and model.model_["training"]["converged"] is False


# ---------------------------------------------------------------- Nadaraya-Watson


@pytest.mark.parametrize("kernel, gamma", [("rbf", GAMMA), ("laplacian", 0.5), ("rbf", "scale")])
def test_nadaraya_watson_is_the_kernel_weighted_mean(regression, kernel, gamma):
    X, y = regression
    ours = NadarayaWatsonRegressor(kernel=kernel, gamma=gamma).fit(X[:60], y[:60])
    if gamma == "scale":  # scikit-learn's definition, 1 / (n_features var(X))
        gamma = 1 / (X.shape[1] * X[:60].var())
    weights = {"rbf": rbf_kernel, "laplacian": laplacian_kernel}[kernel](X[60:], X[:60], gamma=gamma)
    assert_close(ours.predict(X[60:]), weights @ y[:60] / weights.sum(axis=1))


def test_nadaraya_watson_far_from_every_row_takes_the_nearest_rows_target(regression):
    """Where every weight underflows to 0 the prediction is the nearest row's y."""
    X, y = regression
    ours = NadarayaWatsonRegressor(kernel="rbf", gamma=50.0).fit(X[:60], y[:60])
    far = X[60:] * 40
    assert (rbf_kernel(far, X[:60], gamma=50.0) == 0).all()
    nearest = pairwise_distances(far, X[:60]).argmin(axis=1)
    np.testing.assert_array_equal(ours.predict(far), y[:60][nearest])


# ---------------------------------------------------------------- RBF network


@pytest.mark.parametrize("alpha", [0.1, 2.0])
def test_rbf_network_with_every_row_a_centre_is_ridge_on_the_kernel(regression, alpha):
    """w = (Phi'Phi + alpha I)^-1 Phi'y: scikit-learn's Ridge without intercept on the
    kernel columns."""
    X, y = regression
    ours = RBFNetworkRegressor(alpha=alpha, kernel="rbf", gamma=GAMMA).fit(X[:60], y[:60])
    theirs = Ridge(alpha=alpha, fit_intercept=False).fit(rbf_kernel(X[:60], X[:60], gamma=GAMMA), y[:60])
    assert_close(ours.predict(X[60:]), theirs.predict(rbf_kernel(X[60:], X[:60], gamma=GAMMA)))


def test_rbf_network_interpolates_and_takes_a_count_of_centres(regression):
    X, y = regression
    exact = RBFNetworkRegressor(kernel="rbf", gamma=GAMMA).fit(X[:30], y[:30])
    assert_close(exact.predict(X[:30]), y[:30])
    some = RBFNetworkRegressor(10, kernel="rbf", gamma=GAMMA, random_state=4).fit(X, y)
    assert some.model_["n_support"] == 10 and some.model_["params"]["centers"] == 10
    assert some.model_["params"]["seed"] == 4
    with pytest.raises(MercerError) as error:
        RBFNetworkRegressor().fit(np.r_[X[:5], X[:5]], np.r_[y[:5], y[:5]])  # repeated centres, alpha 0
    assert error.value.status == 422 and error.value.pointers == ["/params/lambda"]

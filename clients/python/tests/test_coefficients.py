"""The fitted coefficients as scikit-learn's attributes (``support_``, ``dual_coef_``,
``intercept_``, ``support_vectors_``, ``offset_``, ``alpha_``), against scikit-learn's
own estimators fitted on the same data, and the one request that fetches them.

Tolerance: the SVMs run LIBSVM's iterations on both sides and the ridge/GP solves are
Cholesky solves of well-conditioned systems (see test_estimators.py), so they agree to
round-off; 1e-6 relative to the largest coefficient is far above that and far below
any modelling difference. Support vectors and their order are compared exactly.
"""

import numpy as np
import pytest
import requests
from sklearn import gaussian_process, kernel_ridge, svm
from sklearn.datasets import make_classification, make_regression
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.preprocessing import StandardScaler

from mercer_client import SVC, SVR, GaussianProcessRegressor, KernelRidge, NuSVC, NuSVR, OneClassSVM


def assert_close(ours, theirs):
    theirs = np.asarray(theirs)
    assert np.shape(ours) == theirs.shape
    scale = max(1.0, float(np.abs(theirs).max(initial=0.0)))
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6 * scale)


@pytest.fixture(scope="module")
def regression():
    X, y = make_regression(n_samples=60, n_features=4, noise=5.0, random_state=0)
    return StandardScaler().fit_transform(X), y / 50


@pytest.fixture(scope="module")
def binary():
    return make_classification(n_samples=80, n_features=4, n_informative=3, n_redundant=0, random_state=0)


@pytest.fixture(scope="module")
def three_classes():
    return make_classification(
        n_samples=90, n_features=4, n_informative=3, n_redundant=0, n_classes=3, random_state=1
    )


def assert_same_svm(ours, theirs, X):
    """support_ (order included), support_vectors_, dual_coef_, intercept_, n_support_."""
    np.testing.assert_array_equal(ours.support_, theirs.support_)
    assert ours.support_.dtype == theirs.support_.dtype
    np.testing.assert_array_equal(ours.support_vectors_, theirs.support_vectors_)
    assert_close(ours.dual_coef_, theirs.dual_coef_)
    assert_close(ours.intercept_, theirs.intercept_)
    np.testing.assert_array_equal(ours.n_support_, theirs.n_support_)


@pytest.mark.parametrize("data", ["binary", "three_classes"])
@pytest.mark.parametrize(
    "mercer_cls, sklearn_cls, params",
    [
        (SVC, svm.SVC, dict(C=2.0)),
        (SVC, svm.SVC, dict(C=0.5, kernel="poly", degree=2, gamma="auto")),
        (SVC, svm.SVC, dict(C=1.0, class_weight="balanced")),
        (NuSVC, svm.NuSVC, dict(nu=0.3)),
    ],
)
def test_svm_classifier_coefficients(request, data, mercer_cls, sklearn_cls, params):
    """Binary models are turned around as scikit-learn turns them (positive means the
    second class); with three classes dual_coef_ is (2, n_SV), one row per other class,
    and intercept_ one per one-vs-one machine."""
    X, y = request.getfixturevalue(data)
    ours = mercer_cls(**params).fit(X, y)
    theirs = sklearn_cls(**params).fit(X, y)
    assert_same_svm(ours, theirs, X)


def test_svc_coefficients_with_string_labels_and_sample_weight(binary):
    X, y = binary
    labels = np.array(["no", "yes"])[y]
    weights = np.linspace(0.5, 2.0, len(y))
    ours = SVC(C=1.5, gamma=0.3).fit(X, labels, sample_weight=weights)
    theirs = svm.SVC(C=1.5, gamma=0.3).fit(X, labels, sample_weight=weights)
    assert_same_svm(ours, theirs, X)


def test_svc_coefficients_with_a_precomputed_kernel(binary):
    """support_vectors_ is empty, (0, 0), as scikit-learn's: the rows are kernel values."""
    X, y = binary
    K = rbf_kernel(X, X, gamma=0.3)
    ours = SVC(kernel="precomputed").fit(K, y)
    theirs = svm.SVC(kernel="precomputed").fit(K, y)
    assert ours.support_vectors_.shape == theirs.support_vectors_.shape == (0, 0)
    np.testing.assert_array_equal(ours.support_, theirs.support_)
    assert_close(ours.dual_coef_, theirs.dual_coef_)
    assert_close(ours.intercept_, theirs.intercept_)


@pytest.mark.parametrize(
    "mercer_cls, sklearn_cls, params",
    [(SVR, svm.SVR, dict(C=3.0, epsilon=0.05, gamma=0.2)), (NuSVR, svm.NuSVR, dict(nu=0.4, C=2.0, gamma=0.2))],
)
def test_svm_regressor_coefficients(regression, mercer_cls, sklearn_cls, params):
    X, y = regression
    ours = mercer_cls(**params).fit(X, y)
    theirs = sklearn_cls(**params).fit(X, y)
    assert_same_svm(ours, theirs, X)
    assert ours.dual_coef_.shape == (1, len(theirs.support_))


def test_one_class_svm_coefficients(regression):
    """offset_ is LIBSVM's rho from the fit's own report (training.rho), intercept_ is
    -rho; both (1,) as scikit-learn's."""
    X, _ = regression
    ours = OneClassSVM(nu=0.2, gamma=0.3).fit(X)
    theirs = svm.OneClassSVM(nu=0.2, gamma=0.3).fit(X)
    assert_same_svm(ours, theirs, X)
    assert_close(ours.offset_, theirs.offset_)
    np.testing.assert_array_equal(ours.offset_, [ours.model_["training"]["rho"]])
    np.testing.assert_array_equal(ours.intercept_, -ours.offset_)


@pytest.mark.parametrize(
    "params", [dict(alpha=0.5, kernel="rbf", gamma=0.3), dict(alpha=2.0), dict(alpha=0.1, kernel="laplacian", gamma=0.2)]
)
def test_kernel_ridge_dual_coef(regression, params):
    X, y = regression
    ours = KernelRidge(**params).fit(X, y)
    theirs = kernel_ridge.KernelRidge(**params).fit(X, y)
    assert_close(ours.dual_coef_, theirs.dual_coef_)


def test_kernel_ridge_dual_coef_with_weights_and_outputs(regression):
    """(n, t) for t outputs; with sample_weight the coefficients are scikit-learn's
    (the predictions are K(X, X_fit) @ dual_coef_ either way)."""
    X, y = regression
    Y = np.column_stack([y, -2 * y + 1])
    weights = np.linspace(0.5, 2.0, len(y))
    ours = KernelRidge(alpha=0.5, kernel="rbf", gamma=0.3).fit(X, Y, sample_weight=weights)
    theirs = kernel_ridge.KernelRidge(alpha=0.5, kernel="rbf", gamma=0.3).fit(X, Y, sample_weight=weights)
    assert_close(ours.dual_coef_, theirs.dual_coef_)


def test_kernel_ridge_dual_coef_follows_online_updates(regression):
    """An online update makes a new version of the model: the coefficients are asked
    for again and are those of a scikit-learn fit on all the rows."""
    X, y = regression
    model = KernelRidge(alpha=0.5, kernel="rbf", gamma=0.3).fit(X[:40], y[:40])
    assert model.dual_coef_.shape == (40,)
    model.add_observations(X[40:], y[40:])
    theirs = kernel_ridge.KernelRidge(alpha=0.5, kernel="rbf", gamma=0.3).fit(X, y)
    assert_close(model.dual_coef_, theirs.dual_coef_)


@pytest.mark.parametrize("normalize_y", [False, True])
def test_gaussian_process_alpha(regression, normalize_y):
    """alpha_ is (K + noise I)^-1 y, in normalised units under normalize_y, as
    scikit-learn's; (n, t) for t outputs."""
    X, y = regression
    kernel = ConstantKernel(1.5) * RBF(length_scale=1.2) + WhiteKernel(0.05)
    args = dict(kernel=kernel, alpha=1e-2, optimizer=None, normalize_y=normalize_y)
    for target in (y, np.column_stack([y, 3 * y - 1])):
        ours = GaussianProcessRegressor(**args).fit(X, target)
        theirs = gaussian_process.GaussianProcessRegressor(**args).fit(X, target)
        assert_close(ours.alpha_, theirs.alpha_)


def test_nystrom_coefficients_belong_to_the_inducing_rows(regression):
    """A nystrom fit's coefficients are over its M inducing rows: kernel ridge's and the
    sparse GP's predictions are K(x, X[inducing]) @ coefficients, with the kernel
    computed by scikit-learn."""
    X, y = regression
    nystrom = dict(approximation="nystrom", n_components=15, inducing_selection="uniform")
    ridge = KernelRidge(alpha=0.5, kernel="rbf", gamma=0.3, seed=0, **nystrom).fit(X[:50], y[:50])
    gp = GaussianProcessRegressor(kernel=RBF(1.2), alpha=1e-2, optimizer=None, random_state=0, **nystrom).fit(
        X[:50], y[:50]
    )
    for model, coefficients, gamma in ((ridge, ridge.dual_coef_, 0.3), (gp, gp.alpha_, 1 / (2 * 1.2**2))):
        inducing = model.model_["training"]["inducing_indices"]
        assert coefficients.shape == (15,) and len(inducing) == 15
        want = rbf_kernel(X[50:], X[:50][inducing], gamma=gamma) @ coefficients
        assert_close(model.predict(X[50:]), want)


def test_models_without_coefficients_have_no_such_attributes(binary):
    """A nystrom SVC is a linear model on Nystrom features: no support vectors, so the
    attributes are absent (AttributeError, hasattr False), as for an unfitted SVC."""
    X, y = binary
    model = SVC(approximation="nystrom", n_components=10).fit(X, y)
    assert model.model_["training"]["approximation"] == "nystrom"
    for name in ("support_", "support_vectors_", "dual_coef_", "intercept_"):
        assert not hasattr(model, name)
        assert not hasattr(SVC(), name)
    with pytest.raises(AttributeError, match="no coefficients"):
        model.dual_coef_
    assert not hasattr(OneClassSVM(), "offset_") and not hasattr(KernelRidge(), "dual_coef_")


@pytest.fixture
def requests_made(monkeypatch):
    """(method, path, query) of every request the estimators make, passed through."""
    made = []
    original = requests.Session.request

    def request(session, method, url, params=None, **kwargs):
        made.append((method, url.split("/", 3)[-1], params))
        return original(session, method, url, params=params, **kwargs)

    monkeypatch.setattr(requests.Session, "request", request)
    return made


def test_fit_is_one_request_and_the_coefficients_one_more(requests_made, binary):
    """fit is the POST alone; the first attribute read asks for the coefficients
    (GET /models/{id}?include=coefficients) and the others reuse them; a refit asks
    again, for the new model."""
    X, y = binary
    model = SVC(C=2.0).fit(X, y)
    assert [(m, p) for m, p, _ in requests_made] == [("POST", "models")]
    del requests_made[:]
    first = (model.support_, model.dual_coef_, model.intercept_, model.support_vectors_)
    assert requests_made == [("GET", f"models/{model.model_id_}", {"include": "coefficients"})]
    again = (model.support_, model.dual_coef_, model.intercept_, model.support_vectors_)
    assert len(requests_made) == 1
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    model.set_params(C=0.1).fit(X, y)
    del requests_made[:]
    refitted = model.dual_coef_
    assert requests_made == [("GET", f"models/{model.model_id_}", {"include": "coefficients"})]
    assert_close(refitted, svm.SVC(C=0.1).fit(X, y).dual_coef_)


def test_one_class_offset_needs_no_request(requests_made, regression):
    X, _ = regression
    model = OneClassSVM(nu=0.2, gamma=0.3).fit(X)
    del requests_made[:]
    assert model.offset_.shape == model.intercept_.shape == (1,)
    assert requests_made == []

"""The estimators against scikit-learn's on the same data, and in scikit-learn's
machinery: Pipeline, GridSearchCV, pickling, server-side search, large X, errors.

Tolerances: mercer and scikit-learn solve the same equations in float64, by other
code (Rust/faer against LAPACK/LIBSVM's C++), so they agree to round-off amplified by
the problem's conditioning. Each tolerance below is a few orders above that round-off
and far below any modelling difference (a wrong kernel, parameter or sign moves
results by 1e-2 or more).
"""

import pickle

import numpy as np
import pytest
from sklearn import decomposition, gaussian_process, kernel_ridge, svm
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import mercer_client
from mercer_client import (
    SVC,
    SVR,
    GaussianProcessClassifier,
    GaussianProcessRegressor,
    KernelPCA,
    KernelRidge,
    MercerError,
    NuSVC,
    OneClassSVM,
)


# ---------------------------------------------------------------- parity


@pytest.mark.parametrize(
    "params",
    [
        dict(alpha=0.5, kernel="rbf", gamma=0.3),
        dict(alpha=1.0, kernel="poly", degree=2, coef0=1.0),
        dict(alpha=0.1, kernel="laplacian", gamma=0.2),
        dict(alpha=2.0),  # scikit-learn's default: a linear kernel
    ],
)
def test_kernel_ridge_equals_scikit_learn(regression, params):
    """(K + alpha I)^-1 y by Cholesky on both sides; K + alpha I is well conditioned
    (alpha >= 0.1 against a kernel of O(n) norm), so 1e-9 relative holds with room."""
    X, y = regression
    ours = KernelRidge(**params).fit(X[:60], y[:60]).predict(X[60:])
    theirs = kernel_ridge.KernelRidge(**params).fit(X[:60], y[:60]).predict(X[60:])
    np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-10)


def test_kernel_ridge_sample_weight_and_outputs(regression):
    X, y = regression
    weights = np.linspace(0.5, 2.0, 60)
    Y = np.column_stack([y, -2 * y + 1])
    ours = KernelRidge(alpha=0.5, kernel="rbf", gamma=0.3).fit(X[:60], Y[:60], sample_weight=weights)
    theirs = kernel_ridge.KernelRidge(alpha=0.5, kernel="rbf", gamma=0.3).fit(X[:60], Y[:60], sample_weight=weights)
    assert ours.predict(X[60:]).shape == (20, 2)
    np.testing.assert_allclose(ours.predict(X[60:]), theirs.predict(X[60:]), rtol=1e-9, atol=1e-10)


# The same M = 20 inducing rows for every fit below (uniform selection, one seed); with
# rbf gamma 0.3 on the standardised rows K_MM is well conditioned (cond about 1e2),
# where mercer promises that a converged cg fit predicts as the direct fit to 1e-6.
NYSTROM = dict(alpha=0.5, kernel="rbf", gamma=0.3, approximation="nystrom", n_components=20,
               inducing_selection="uniform", seed=0)


def test_kernel_ridge_nystrom_cg_predicts_as_direct(regression):
    """Falkon-preconditioned conjugate gradients and the direct solve of one Nystrom
    system: the params reach the server (its echo and report say cg), and the
    predictions agree to 1e-6 relative to the largest."""
    X, y = regression
    cg = KernelRidge(solver="cg", **NYSTROM).fit(X[:60], y[:60])
    direct = KernelRidge(solver="direct", **NYSTROM).fit(X[:60], y[:60])
    training = cg.model_["training"]
    assert training["approximation"] == "nystrom" and training["inducing_points"] == 20
    assert training["solver"] == "cg" and cg.model_["params"]["solver"] == "cg"
    assert training["converged"] is True and 0 <= training["residual"] <= 1e-8
    assert cg.n_iter_ == training["iterations"] >= 1
    assert cg.model_["params"]["inducing_selection"] == "uniform" and cg.model_["params"]["seed"] == 0
    assert direct.model_["training"]["solver"] == "direct"
    assert training["inducing_indices"] == direct.model_["training"]["inducing_indices"]
    want = direct.predict(X[60:])
    np.testing.assert_allclose(cg.predict(X[60:]), want, rtol=1e-6, atol=1e-6 * np.abs(want).max())


def test_kernel_ridge_nystrom_cg_options(regression):
    """max_iter, tol and precision reach the server: one iteration cannot reach a tol of
    1e-14 (the model is still ready, not converged); float32 kernel blocks agree with
    float64 to about 1e-4 (checked at 1e-3); the solver keys on an exact fit are 422."""
    X, y = regression
    capped = KernelRidge(solver="cg", max_iter=1, tol=1e-14, **NYSTROM).fit(X[:60], y[:60])
    assert capped.model_["params"]["max_iter"] == 1 and capped.model_["params"]["tol"] == 1e-14
    assert capped.model_["training"]["iterations"] == 1
    assert capped.model_["training"]["converged"] is False and capped.model_["training"]["residual"] > 1e-14
    single = KernelRidge(solver="cg", precision="float32", **NYSTROM).fit(X[:60], y[:60])
    assert single.model_["params"]["precision"] == "float32"
    want = KernelRidge(solver="cg", **NYSTROM).fit(X[:60], y[:60]).predict(X[60:])
    np.testing.assert_allclose(single.predict(X[60:]), want, rtol=1e-3, atol=1e-3 * np.abs(want).max())
    with pytest.raises(MercerError) as error:
        KernelRidge(kernel="rbf", solver="cg").fit(X[:60], y[:60])  # auto: exact at 60 rows
    assert error.value.status == 422 and error.value.pointers == ["/params/solver"]


@pytest.mark.parametrize("normalize_y", [False, True])
def test_gaussian_process_equals_scikit_learn(regression, normalize_y):
    """Mean, std, covariance and the log marginal likelihood with the kernel's
    hyperparameters kept (optimizer=None). The noise 1e-2 bounds cond(K + noise I) by
    about 1e4, so the solves agree to ~1e-12; std subtracts nearly equal numbers
    where the posterior is tight, hence atol on it. The LML is a sum of O(n) terms."""
    X, y = regression
    kernel = ConstantKernel(1.5) * RBF(length_scale=1.2) + WhiteKernel(0.05)
    args = dict(kernel=kernel, alpha=1e-2, optimizer=None, normalize_y=normalize_y)
    ours = GaussianProcessRegressor(**args).fit(X[:60], y[:60])
    theirs = gaussian_process.GaussianProcessRegressor(**args).fit(X[:60], y[:60])
    mean, std = ours.predict(X[60:], return_std=True)
    want_mean, want_std = theirs.predict(X[60:], return_std=True)
    np.testing.assert_allclose(mean, want_mean, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(std, want_std, rtol=1e-8, atol=1e-9)
    _, cov = ours.predict(X[60:65], return_cov=True)
    np.testing.assert_allclose(cov, theirs.predict(X[60:65], return_cov=True)[1], rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(ours.log_marginal_likelihood_value_, theirs.log_marginal_likelihood_value_, rtol=1e-10)
    assert ours.kernel_["type"] == "sum"


def test_gaussian_process_optimizer_finds_scikit_learns_optimum(regression):
    """Both run L-BFGS-B in log space from the same start; the optimum is flat, so the
    LML agrees to 1e-6 relative and the hyperparameters to 1e-3."""
    X, y = regression
    kernel = ConstantKernel(1.0) * RBF(length_scale=1.0)
    ours = GaussianProcessRegressor(kernel=kernel, alpha=1e-2).fit(X, y)
    theirs = gaussian_process.GaussianProcessRegressor(kernel=kernel, alpha=1e-2).fit(X, y)
    np.testing.assert_allclose(ours.log_marginal_likelihood_value_, theirs.log_marginal_likelihood_value_, rtol=1e-6)
    fitted = ours.kernel_["kernels"]
    values = [fitted[0]["value"]["value"], fitted[1]["length_scale"]["value"]]
    np.testing.assert_allclose(values, [theirs.kernel_.k1.constant_value, theirs.kernel_.k2.length_scale], rtol=1e-3)


def test_gaussian_process_sample_y(regression):
    X, y = regression
    model = GaussianProcessRegressor(kernel=RBF(1.0), alpha=1e-2, optimizer=None).fit(X, y)
    draws = model.sample_y(X[:5], n_samples=3, random_state=7)
    assert draws.shape == (5, 3)
    np.testing.assert_array_equal(draws, model.sample_y(X[:5], n_samples=3, random_state=7))
    two = GaussianProcessRegressor(kernel=RBF(1.0), alpha=1e-2, optimizer=None).fit(X, np.column_stack([y, y]))
    assert two.sample_y(X[:5], n_samples=3).shape == (5, 2, 3)


def test_gaussian_process_add_observations(regression):
    """An online update equals the refit on all the rows (the contract's 1e-9)."""
    X, y = regression
    grown = GaussianProcessRegressor(kernel=RBF(1.0), alpha=1e-2, optimizer=None).fit(X[:60], y[:60])
    grown.add_observations(X[60:], y[60:])
    assert grown.model_["n_train"] == 80 and grown.model_["version"] == 2
    refit = GaussianProcessRegressor(kernel=RBF(1.0), alpha=1e-2, optimizer=None).fit(X, y)
    np.testing.assert_allclose(grown.predict(X[:10]), refit.predict(X[:10]), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("data", ["binary", "three_classes"])
@pytest.mark.parametrize(
    "mercer_cls, sklearn_cls, params",
    [
        (SVC, svm.SVC, dict(C=2.0)),
        (SVC, svm.SVC, dict(C=0.5, kernel="poly", degree=2, gamma="auto")),
        (NuSVC, svm.NuSVC, dict(nu=0.3)),
    ],
)
def test_svm_classifiers_equal_scikit_learn(request, data, mercer_cls, sklearn_cls, params):
    """The same LIBSVM iterations on both sides: decision values agree to round-off
    (1e-8; tol=1e-3 is where both stop, not how far they differ)."""
    X, y = request.getfixturevalue(data)
    ours = mercer_cls(**params).fit(X[:80], y[:80])
    theirs = sklearn_cls(**params).fit(X[:80], y[:80])
    np.testing.assert_allclose(ours.decision_function(X[80:]), theirs.decision_function(X[80:]), rtol=1e-7, atol=1e-8)
    np.testing.assert_array_equal(ours.predict(X[80:]), theirs.predict(X[80:]))
    np.testing.assert_array_equal(ours.n_support_, theirs.n_support_)


def test_svc_with_string_labels_and_class_weight(binary):
    X, y = binary
    labels = np.array(["no", "yes"])[y]
    weights = {"no": 3.0, "yes": 0.5}
    ours = SVC(class_weight=weights).fit(X, labels)
    theirs = svm.SVC(class_weight=weights).fit(X, labels)
    assert ours.classes_.tolist() == ["no", "yes"]
    np.testing.assert_array_equal(ours.predict(X), theirs.predict(X))
    np.testing.assert_allclose(ours.decision_function(X), theirs.decision_function(X), rtol=1e-7, atol=1e-8)


def test_svc_probabilities(binary):
    """Platt scaling draws its folds from the seed (not scikit-learn's generator), so
    only the shape and the order of the classes are compared."""
    X, y = binary
    model = SVC(probability=True, random_state=0).fit(X, y)
    proba = model.predict_proba(X[:10])
    assert proba.shape == (10, 2)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert np.mean((proba[:, 1] > 0.5) == (model.decision_function(X[:10]) > 0)) >= 0.9
    assert not hasattr(SVC(), "predict_proba")


def test_svr_equals_scikit_learn(regression):
    X, y = regression
    params = dict(C=3.0, epsilon=0.05, gamma=0.2)
    ours = SVR(**params).fit(X[:60], y[:60]).predict(X[60:])
    theirs = svm.SVR(**params).fit(X[:60], y[:60]).predict(X[60:])
    np.testing.assert_allclose(ours, theirs, rtol=1e-7, atol=1e-8)


def test_one_class_svm_equals_scikit_learn(regression):
    X, _ = regression
    ours = OneClassSVM(nu=0.2, gamma=0.3).fit(X[:60])
    theirs = svm.OneClassSVM(nu=0.2, gamma=0.3).fit(X[:60])
    np.testing.assert_allclose(ours.decision_function(X[60:]), theirs.decision_function(X[60:]), rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(ours.score_samples(X[60:]), theirs.score_samples(X[60:]), rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(ours.offset_, theirs.offset_, rtol=1e-7)
    np.testing.assert_array_equal(ours.predict(X[60:]), theirs.predict(X[60:]))


def test_gp_classifier_equals_scikit_learn(binary):
    """Laplace's Newton iterations run to convergence on both sides (scikit-learn stops
    when the objective changes by < 1e-10), so probabilities agree to 1e-6."""
    X, y = binary
    kernel = ConstantKernel(2.0) * RBF(1.5)
    ours = GaussianProcessClassifier(kernel=kernel, optimizer=None).fit(X[:80], y[:80])
    theirs = gaussian_process.GaussianProcessClassifier(kernel=kernel, optimizer=None).fit(X[:80], y[:80])
    np.testing.assert_allclose(ours.predict_proba(X[80:]), theirs.predict_proba(X[80:]), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(ours.log_marginal_likelihood_value_, theirs.log_marginal_likelihood_value_, rtol=1e-6)


@pytest.mark.parametrize("params", [dict(n_components=3, kernel="rbf", gamma=0.25), dict(n_components=2, kernel="poly")])
def test_kernel_pca_equals_scikit_learn_up_to_sign(regression, params):
    """Eigenvalues to 1e-9 relative; each component up to its sign (an eigenvector's
    sign is arbitrary), to 1e-7: the leading eigenvalues are well separated, so the
    eigenvectors are determined to round-off / gap."""
    X, _ = regression
    ours = KernelPCA(**params).fit(X[:60])
    theirs = decomposition.KernelPCA(**params).fit(X[:60])
    np.testing.assert_allclose(ours.eigenvalues_, theirs.eigenvalues_, rtol=1e-9)
    got, want = ours.transform(X[60:]), theirs.transform(X[60:])
    signs = np.sign(np.sum(got * want, axis=0))
    np.testing.assert_allclose(got * signs, want, rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(np.abs(ours.fit_transform(X[:60])), np.abs(theirs.transform(X[:60])), atol=1e-8)


def test_kernel_pca_inverse_transform(regression):
    X, _ = regression
    params = dict(n_components=3, kernel="rbf", gamma=0.25, fit_inverse_transform=True, alpha=0.1)
    ours = KernelPCA(**params).fit(X[:60])
    theirs = decomposition.KernelPCA(**params).fit(X[:60])
    back = ours.inverse_transform(ours.transform(X[60:]))
    np.testing.assert_allclose(back, theirs.inverse_transform(theirs.transform(X[60:])), rtol=1e-6, atol=1e-8)


# ---------------------------------------------------------------- scikit-learn machinery


def test_pipeline_with_scaler(binary):
    X, y = binary
    ours = make_pipeline(StandardScaler(), SVC(C=1.5)).fit(X[:80], y[:80])
    theirs = make_pipeline(StandardScaler(), svm.SVC(C=1.5)).fit(X[:80], y[:80])
    np.testing.assert_array_equal(ours.predict(X[80:]), theirs.predict(X[80:]))
    np.testing.assert_allclose(ours.decision_function(X[80:]), theirs.decision_function(X[80:]), rtol=1e-7, atol=1e-8)
    assert ours.score(X[80:], y[80:]) == theirs.score(X[80:], y[80:])


def test_grid_search(binary):
    """GridSearchCV over a pipeline: the same fold scores as scikit-learn's SVC."""
    X, y = binary
    grid = {"svc__C": [0.1, 1.0, 10.0], "svc__gamma": [0.1, "scale"]}
    ours = GridSearchCV(make_pipeline(StandardScaler(), SVC()), grid, cv=3).fit(X, y)
    theirs = GridSearchCV(make_pipeline(StandardScaler(), svm.SVC()), grid, cv=3).fit(X, y)
    assert ours.best_params_ == theirs.best_params_
    np.testing.assert_allclose(ours.cv_results_["mean_test_score"], theirs.cv_results_["mean_test_score"])
    assert ours.best_estimator_[-1].model_id_


def test_server_side_search_equals_grid_search_cv(binary):
    """search= runs the cross-validation on the server with scikit-learn's
    StratifiedKFold folds: its candidates' scores are GridSearchCV's."""
    X, y = binary
    cs = [0.1, 1.0, 10.0]
    model = SVC(gamma=0.2, search={"space": {"/params/c": cs}, "cv": 3, "scoring": "accuracy"}).fit(X, y)
    theirs = GridSearchCV(svm.SVC(gamma=0.2), {"C": cs}, cv=StratifiedKFold(3)).fit(X, y)
    assert model.search_["n_candidates"] == 3
    scores = [c["mean_score"] for c in model.search_["candidates"]]
    np.testing.assert_allclose(scores, theirs.cv_results_["mean_test_score"], rtol=1e-12)
    assert model.model_["params"]["c"] == theirs.best_params_["C"]
    np.testing.assert_array_equal(model.predict(X), theirs.predict(X))


@pytest.mark.parametrize(
    "estimator",
    [KernelRidge(kernel="rbf"), GaussianProcessRegressor(), SVC(probability=True), KernelPCA(n_components=2)],
    ids=lambda e: type(e).__name__,
)
def test_pickle_keeps_the_model(regression, estimator):
    """A pickled pipeline keeps the estimator's model id; unpickled, it predicts through
    the same server model (and fails with 404 once that model is deleted)."""
    X, y = regression
    y = (y > 0).astype(int) if isinstance(estimator, SVC) else y
    pipeline = make_pipeline(StandardScaler(), estimator).fit(X, y)
    copy = pickle.loads(pickle.dumps(pipeline))
    assert copy[-1].model_id_ == pipeline[-1].model_id_
    method = "transform" if isinstance(estimator, KernelPCA) else "predict"
    np.testing.assert_array_equal(getattr(copy, method)(X[:5]), getattr(pipeline, method)(X[:5]))
    pipeline[-1].delete_model()
    with pytest.raises(MercerError) as error:
        getattr(copy, method)(X[:5])
    assert error.value.status == 404


def test_large_x_goes_through_a_dataset(monkeypatch, client, regression):
    """Above UPLOAD_THRESHOLD values X is uploaded as a dataset (deleted after the fit)
    and predictions are sent in chunks; the model is the same as an inline fit."""
    X, y = regression
    inline = KernelRidge(kernel="rbf", gamma=0.3).fit(X, y)
    monkeypatch.setattr(mercer_client._base, "UPLOAD_THRESHOLD", 50)
    before = {d["id"] for d in client.datasets.list()}
    uploaded = KernelRidge(kernel="rbf", gamma=0.3).fit(X, y)
    assert uploaded.model_.get("dataset") is not None
    assert {d["id"] for d in client.datasets.list()} == before
    np.testing.assert_array_equal(uploaded.predict(X), inline.predict(X))  # 80 rows in chunks of 12
    pca = KernelPCA(n_components=2, kernel="rbf").fit(X)
    assert pca.model_.get("dataset") is not None and pca.transform(X).shape == (80, 2)


def test_errors_from_the_service(binary):
    X, y = binary
    with pytest.raises(MercerError) as error:
        SVC(C=-1.0).fit(X, y)
    assert error.value.status == 422 and error.value.pointers == ["/params/c"]
    with pytest.raises(MercerError) as error:
        NuSVC(nu=0.99).fit(X[:50], np.r_[np.zeros(40, int), np.ones(10, int)])
    assert error.value.status == 422 and error.value.pointers == ["/params/nu"]
    fitted = SVC().fit(X, y)
    fitted.model_id_ = "00000000-0000-0000-0000-000000000000"
    with pytest.raises(MercerError) as error:
        fitted.predict(X)
    assert error.value.status == 404


def test_token_reaches_the_server_and_stays_out_of_repr(secured_server, binary):
    X, y = binary
    with pytest.raises(MercerError) as error:
        SVC(url=secured_server.url).fit(X, y)
    assert error.value.status == 401
    model = SVC(url=secured_server.url, token="s3cret").fit(X, y)
    assert model.predict(X[:3]).shape == (3,)
    assert "s3cret" not in repr(model) and "***" in repr(model)

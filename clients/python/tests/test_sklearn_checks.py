"""scikit-learn's own estimator checks (``parametrize_with_checks``), run on every
estimator, each fitting and predicting through the session's server."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from mercer_client import (
    SVC,
    SVR,
    GaussianProcessClassifier,
    GaussianProcessRegressor,
    KernelLogisticRegression,
    KernelPCA,
    KernelPerceptron,
    KernelRidge,
    NadarayaWatsonRegressor,
    NuSVC,
    NuSVR,
    OneClassSVM,
    RBFNetworkRegressor,
)

# Every estimator, and the configurations that take another path on the server (the
# Nystrom approximations, precomputed kernels). Built without url: they connect to
# $MERCER_URL, which the session fixture sets.
ESTIMATORS = [
    KernelRidge(),
    KernelRidge(kernel="rbf", approximation="nystrom", solver="cg"),
    GaussianProcessRegressor(),
    GaussianProcessRegressor(kernel={"type": "matern", "length_scale": 1.0}, normalize_y=True),
    GaussianProcessRegressor(approximation="nystrom"),
    GaussianProcessRegressor(approximation="variational", max_epochs=20),
    SVC(),
    SVC(kernel="precomputed"),
    SVC(approximation="nystrom"),
    SVR(),
    SVR(kernel="precomputed"),
    NuSVC(),
    NuSVR(),
    OneClassSVM(),
    GaussianProcessClassifier(),
    GaussianProcessClassifier(approximation="variational", max_epochs=20),
    KernelLogisticRegression(),
    KernelLogisticRegression(approximation="nystrom", n_components=8),
    KernelPerceptron(),
    NadarayaWatsonRegressor(),
    RBFNetworkRegressor(),
    RBFNetworkRegressor(alpha=1e-3),
    RBFNetworkRegressor(5, alpha=1e-3, random_state=0),
    KernelPCA(),
    KernelPCA(kernel="rbf", fit_inverse_transform=True),
]

# The checks that cannot pass, and why. The service solves the SVMs with LIBSVM's
# algorithm, step for step, so these are the very checks that scikit-learn lists as
# expected failures for its own SVC, SVR, NuSVC, NuSVR and OneClassSVM.
_LIBSVM_WEIGHTS = (
    "LIBSVM's sample_weight scales each row's C; that is not equivalent to repeating "
    "rows (the same expected failure as scikit-learn's own estimator)"
)
EXPECTED_FAILED_CHECKS = {
    "SVC": {"check_sample_weight_equivalence_on_dense_data": _LIBSVM_WEIGHTS},
    "SVR": {"check_sample_weight_equivalence_on_dense_data": _LIBSVM_WEIGHTS},
    "NuSVR": {"check_sample_weight_equivalence_on_dense_data": _LIBSVM_WEIGHTS},
    "OneClassSVM": {"check_sample_weight_equivalence_on_dense_data": _LIBSVM_WEIGHTS},
    "NuSVC": {
        "check_sample_weight_equivalence_on_dense_data": _LIBSVM_WEIGHTS,
        "check_class_weight_classifiers": (
            "nu-SVC has no C: LIBSVM's class weights only rescale each class's box bound, "
            "which does not move the decision as the check expects (scikit-learn's NuSVC "
            "fails it too)"
        ),
    },
}

# A nystrom SVC is LIBLINEAR's dual coordinate descent (scikit-learn's LinearSVC(dual=
# True), which lists this expected failure too) on Nystrom features, and those features
# come from the rows: M = min(n, 1024) inducing points chosen among them by k-means++.
# Repeating rows moves the points and the features, so the model differs (by about 1e-4
# in the decision function even at tol=1e-12).
_NYSTROM_SVC = {
    "check_sample_weight_equivalence_on_dense_data": (
        "the Nystrom features are built from inducing points chosen among the rows, so "
        "repeated rows give other features (LinearSVC(dual=True) fails the check too)"
    ),
}

# An RBF network with every row a centre and alpha=0 (the default) interpolates the rows
# exactly, which two checks' data make impossible: the server answers 422 at
# /params/lambda ("the centres' kernel matrix is singular"). RBFNetworkRegressor(alpha=
# 1e-3) above, every row a centre with a ridge term, passes both.
_EXACT_INTERPOLATION = {
    "check_positive_only_tag_during_fit": (
        "the check fits iris, whose 150 rows hold one row twice: two equal centres make "
        "Phi'Phi singular"
    ),
    "check_fit_check_is_fitted": (
        "the check fits 100 rows of N(100, 1) in 2-d: a Gaussian kernel over that many "
        "close centres has cond(Phi'Phi) about 1e18, singular in float64"
    ),
}

# A count of centres must fit every check's data: at most 10, the fewest rows a check
# fits and expects to succeed on. So few centres cannot fit check_regressors_train's
# 200 rows in 10-d (R^2 0.13 with 5, against the check's 0.5; 50 centres would reach
# 0.76); the instance is kept for every other check, fit_idempotent among them (the
# centres are drawn with random_state).
_FEW_CENTRES = {
    "check_regressors_train": (
        "5 centres underfit the check's 200 rows of 10 features (R^2 0.13 < 0.5); a count "
        "that fits them is more than the 10 rows other checks fit"
    ),
}


def expected_failed_checks(estimator):
    if isinstance(estimator, SVC) and estimator.approximation == "nystrom":
        return _NYSTROM_SVC
    if isinstance(estimator, RBFNetworkRegressor):
        if estimator.centers is not None:
            return _FEW_CENTRES
        return _EXACT_INTERPOLATION if estimator.alpha == 0 else {}
    return EXPECTED_FAILED_CHECKS.get(type(estimator).__name__, {})


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=expected_failed_checks, xfail_strict=True)
def test_sklearn_compatible(estimator, check):
    check(estimator)

"""The Gaussian processes' variational form through the client: regression with each
likelihood, and classification whose probabilities sum to one jointly."""

import numpy as np
import pytest
from sklearn import gaussian_process
from sklearn.gaussian_process.kernels import RBF

from mercer_client import GaussianProcessClassifier, GaussianProcessRegressor


@pytest.fixture(scope="module")
def sine():
    rng = np.random.RandomState(3)
    X = rng.uniform(0, 6, size=(400, 1))
    y = np.sin(X[:, 0]) + 0.1 * rng.randn(400)
    return X, y


def test_gaussian_regression_is_as_good_as_the_exact_gp(sine):
    X, y = sine
    Xt = np.linspace(0.2, 5.8, 50)[:, None]
    # The default epochs: about a thousand Adam steps, which the noise needs to come down
    # from 1 at the default learning rate.
    ours = GaussianProcessRegressor(RBF(1.0), approximation="variational", n_components=30, batch_size=100,
                                    random_state=0).fit(X, y)
    mean, std = ours.predict(Xt, return_std=True)
    assert mean.shape == (50,) and std.shape == (50,) and np.all(std > 0)
    assert np.sqrt(np.mean((mean - np.sin(Xt[:, 0])) ** 2)) < 0.05
    assert ours.model_["training"]["approximation"] == "variational"
    assert np.isfinite(ours.elbo_)
    # The noise was learned (from 1) near the 0.01 that made the data.
    assert 0.003 < ours.model_["params"]["noise"] < 0.03, ours.model_["params"]
    exact = gaussian_process.GaussianProcessRegressor(RBF(1.0) + gaussian_process.kernels.WhiteKernel(0.1)).fit(X, y)
    assert np.max(np.abs(mean - exact.predict(Xt))) < 0.05


def test_counts_and_outliers(sine):
    X, _ = sine
    rng = np.random.RandomState(4)
    rate = np.exp(1 + np.sin(X[:, 0]))
    counts = rng.poisson(rate)
    model = GaussianProcessRegressor(approximation="variational", likelihood="poisson", n_components=20,
                                     max_epochs=60, batch_size=100).fit(X, counts)
    predicted = model.predict(X)
    assert np.all(predicted > 0)
    assert np.corrcoef(predicted, rate)[0, 1] > 0.95
    assert "noise" not in model.model_["params"]
    robust = GaussianProcessRegressor(approximation="variational", likelihood="student_t", n_components=20,
                                      max_epochs=60, batch_size=100).fit(X, np.sin(X[:, 0]) + 0.05 * rng.standard_t(1.5, 400))
    assert np.max(np.abs(robust.predict(np.array([[1.0], [4.0]])) - np.sin([1.0, 4.0]))) < 0.15
    assert robust.model_["params"]["df"] > 2


def test_softmax_probabilities_sum_to_one_jointly():
    rng = np.random.RandomState(5)
    X = rng.uniform(-2, 2, size=(300, 2))
    y = np.where(X[:, 0] > 0.7, "east", np.where(X[:, 1] > 0, "north", "south"))
    model = GaussianProcessClassifier(approximation="variational", n_components=30, max_epochs=40, batch_size=100).fit(X, y)
    assert model.model_["params"]["likelihood"] == "softmax"
    proba = model.predict_proba(X)
    assert proba.shape == (300, 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert np.array_equal(model.predict(X), model.classes_[np.argmax(proba, axis=1)])
    assert np.mean(model.predict(X) == y) > 0.9
    two = GaussianProcessClassifier(approximation="variational", n_components=20, max_epochs=40).fit(X, y == "east")
    assert two.model_["params"]["likelihood"] == "bernoulli"

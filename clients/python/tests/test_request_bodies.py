"""What the estimators put in the request body, read before it leaves: the HTTP layer
(``requests.Session.request``) is replaced by a stub that records the body and answers
a ready model. These tests need no server; in the suite the session's server still
starts (conftest's autouse fixture), and without a binary they run with

    pytest -p no:cacheprovider --noconftest tests/test_request_bodies.py
"""

import json

import numpy as np
import pytest
import requests
from sklearn.base import clone

from mercer_client import (
    SVC,
    GaussianProcessRegressor,
    KernelLogisticRegression,
    KernelPerceptron,
    KernelRidge,
    NadarayaWatsonRegressor,
    NuSVR,
    RBFNetworkRegressor,
)

URL = "http://mercer.invalid"  # never contacted: the stub answers


class _Answer:
    status_code = 201
    reason = "Created"

    def __init__(self, resource: dict):
        self._resource = resource
        self.text = json.dumps(resource)

    def json(self) -> dict:
        return self._resource


@pytest.fixture
def sent(monkeypatch):
    """The JSON bodies of the requests made, in order; every request is answered with
    a ready model whose training report says cg (3 iterations)."""
    bodies = []

    def request(session, method, url, data=None, **kwargs):
        assert (method, url) == ("POST", URL + "/models"), (method, url)
        bodies.append(json.loads(data))
        training = {"duration_ms": 1.0, "solver": "cg", "iterations": 3, "converged": True, "residual": 1e-9}
        resource = {"id": "00000000-0000-0000-0000-000000000001", "status": "ready", "n_support": 3, "kernel": {}}
        return _Answer({**resource, "training": training})

    monkeypatch.setattr(requests.Session, "request", request)
    return bodies


@pytest.fixture
def rows():
    rng = np.random.RandomState(0)
    return rng.randn(30, 3), rng.randn(30)


def test_nystrom_params_reach_the_body(sent, rows):
    X, y = rows
    model = KernelRidge(
        alpha=0.5, kernel="rbf", gamma=0.3, approximation="nystrom", n_components=np.int64(20),
        inducing_selection="uniform", seed=7, solver="cg", max_iter=50, tol=1e-10, precision="float32", url=URL,
    ).fit(X, y)
    (body,) = sent
    assert body["model"] == "kernel_ridge"
    assert body["kernel"] == {"type": "rbf", "gamma": 0.3}
    assert body["params"] == {
        "lambda": 0.5,
        "approximation": "nystrom",
        "inducing_points": 20,
        "inducing_selection": "uniform",
        "seed": 7,
        "solver": "cg",
        "max_iter": 50,
        "tol": 1e-10,
        "precision": "float32",
    }
    assert model.n_iter_ == 3 and model.model_["training"]["solver"] == "cg"


def test_params_left_as_none_are_left_out(sent, rows):
    """The server's defaults apply: nothing of the approximation is sent unless given."""
    X, y = rows
    KernelRidge(url=URL).fit(X, y)
    KernelRidge(approximation="nystrom", solver="direct", url=URL).fit(X, y)
    assert sent[0]["params"] == {"lambda": 1.0}
    assert sent[1]["params"] == {"lambda": 1.0, "approximation": "nystrom", "solver": "direct"}


def test_a_random_state_draws_the_seed(sent, rows):
    X, y = rows
    KernelRidge(approximation="nystrom", seed=np.random.RandomState(1), url=URL).fit(X, y)
    seed = sent[0]["params"]["seed"]
    assert isinstance(seed, int) and seed >= 0


def test_get_params_set_params_and_clone_keep_the_new_params():
    given = dict(approximation="nystrom", n_components=100, inducing_selection="kmeans", seed=3,
                 solver="cg", max_iter=20, tol=1e-6, precision="float32")
    model = KernelRidge(**given)
    params = model.get_params()
    assert {k: params[k] for k in given} == given
    assert all(KernelRidge().get_params()[k] is None for k in given)
    copy = clone(model)
    assert copy is not model and {k: copy.get_params()[k] for k in given} == given
    copy.set_params(solver="direct", precision=None, n_components=50)
    assert (copy.solver, copy.precision, copy.n_components) == ("direct", None, 50)
    assert model.solver == "cg"


# What each estimator sends: (estimator, classification?, mercer's model, its params).
BODIES = [
    (SVC(), True, "svm", {"c": 1.0, "tol": 1e-3, "cache_mb": 200.0, "probability": False}),
    (
        SVC(approximation="nystrom", n_components=np.int64(50), inducing_selection="uniform", random_state=2,
            tol=0.1, max_iter=500),
        True,
        "svm",
        {"c": 1.0, "tol": 0.1, "cache_mb": 200.0, "max_iter": 500, "probability": False, "seed": 2,
         "approximation": "nystrom", "inducing_points": 50, "inducing_selection": "uniform"},
    ),
    (
        GaussianProcessRegressor(),
        False,
        "gaussian_process",
        {"noise": {"value": 1e-10, "fixed": True}, "normalize_y": False, "optimize": True, "restarts": 0,
         "approximation": "exact"},
    ),
    (
        GaussianProcessRegressor(approximation="nystrom", n_components=30, inducing_selection="kmeans",
                                 random_state=1, optimizer=None),
        False,
        "gaussian_process",
        {"noise": {"value": 1e-10, "fixed": True}, "normalize_y": False, "optimize": False, "restarts": 0,
         "seed": 1, "approximation": "nystrom", "inducing_points": 30, "inducing_selection": "kmeans"},
    ),
    (KernelLogisticRegression(), True, "kernel_logistic", {"lambda": 1.0, "max_iter": 100}),
    (
        KernelLogisticRegression(C=4.0, max_iter=20, approximation="nystrom", n_components=10, random_state=1),
        True,
        "kernel_logistic",
        {"lambda": 0.25, "max_iter": 20, "seed": 1, "approximation": "nystrom", "inducing_points": 10},
    ),
    (KernelPerceptron(max_iter=7, random_state=5), True, "kernel_perceptron", {"max_epochs": 7, "seed": 5}),
    (NuSVR(nu=0.3, C=2.0), False, "nu_svr", {"nu": 0.3, "c": 2.0, "tol": 1e-3, "cache_mb": 200.0}),
    (NadarayaWatsonRegressor(), False, "nadaraya_watson", {}),
    (RBFNetworkRegressor(), False, "rbf_network", {"lambda": 0.0}),
    (RBFNetworkRegressor(np.int64(12), alpha=0.5, random_state=3), False, "rbf_network",
     {"centers": 12, "lambda": 0.5, "seed": 3}),
]


@pytest.mark.parametrize("estimator, classifier, model, params", BODIES, ids=lambda v: repr(v)[:60])
def test_each_estimator_sends_its_model_and_params(sent, rows, estimator, classifier, model, params):
    """scikit-learn's names become mercer's (C -> lambda = 1 / C for the logistic model,
    max_iter -> max_epochs, n_components -> inducing_points, random_state -> seed,
    alpha -> lambda), and parameters left None stay out of the request."""
    X, y = rows
    clone(estimator).set_params(url=URL).fit(X, (y > 0).astype(int) if classifier else y)
    (body,) = sent
    assert body["model"] == model
    assert body["params"] == params
    assert body["kernel"]["type"] == "rbf"

"""client.studies against a real server: ask and tell, the optimize loop, failures,
warm starts, and the errors as MercerError."""

import math

import pytest

from mercer_client import MercerError


def branin(x1, x2):
    b, c = 5.1 / (4 * math.pi**2), 5 / math.pi
    return (x2 - b * x1**2 + c * x1 - 6) ** 2 + 10 * (1 - 1 / (8 * math.pi)) * math.cos(x1) + 10


def test_optimize_finds_branins_minimum(client):
    study = client.studies.create({"x1": {"uniform": [-5, 10]}, "x2": {"uniform": [0, 15]}}, name="branin", seed=2)
    ended = client.studies.optimize(study["id"], branin, 30)
    assert ended["n_complete"] == 30
    assert ended["best"]["value"] < 1.0  # the minimum is 0.398
    values = [t["value"] for t in ended["trials"]]
    assert ended["best"]["value"] == min(values)
    client.studies.delete(study["id"])
    with pytest.raises(MercerError) as e:
        client.studies.get(study["id"])
    assert e.value.status == 404


def test_ask_tell_failures_and_warm_starts(client):
    study = client.studies.create(
        {"lr": {"log_uniform": [1e-5, 0.1]}, "act": ["relu", "tanh"]}, direction="maximize", initial=2
    )
    sid = study["id"]
    trial = client.studies.ask(sid)
    assert trial["state"] == "pending" and set(trial["values"]) == {"lr", "act"}
    told = client.studies.tell(sid, trial["id"], 0.5)
    assert told["state"] == "complete" and told["value"] == 0.5
    with pytest.raises(MercerError) as e:
        client.studies.tell(sid, trial["id"], 0.7)
    assert e.value.status == 409
    failed = client.studies.tell(sid, client.studies.ask(sid)["id"], failed=True)
    assert failed["state"] == "failed"
    warm = client.studies.record(sid, {"lr": 0.01, "act": "tanh"}, 0.9)
    assert warm["state"] == "complete"
    assert client.studies.get(sid)["best"]["id"] == warm["id"]
    with pytest.raises(MercerError) as e:
        client.studies.record(sid, {"lr": 1.0, "act": "tanh"}, 0.9)
    assert e.value.status == 422
    assert any(s["id"] == sid for s in client.studies.list())

    def flaky(lr, act):
        raise RuntimeError("diverged")

    ended = client.studies.optimize(sid, flaky, 2, catch=(RuntimeError,))
    assert sum(t["state"] == "failed" for t in ended["trials"]) == 3


def test_an_estimators_search_runs_bayes_on_the_server():
    import numpy as np

    from mercer_client import SVC

    rng = np.random.default_rng(0)
    x = rng.normal(size=(80, 2))
    y = (x[:, 0] ** 2 + x[:, 1] ** 2 > 1.0).astype(int)
    search = {
        "method": "bayes",
        "space": {"/params/c": {"log_uniform": [0.01, 100]}, "/kernel/gamma": {"log_uniform": [0.01, 10]}},
        "candidates": 8,
        "initial": 4,
        "cv": 3,
    }
    model = SVC(search=search).fit(x, y)
    assert model.search_["method"] == "bayes"
    assert model.search_["acquisition"] == "log_ei"
    assert len(model.search_["candidates"]) == 8

"""What the alias calls send and how their answers are read, without a server: the
HTTP layer (``requests.Session.request``) is replaced by a stub that records each
request and gives the answer queued for it. In the suite the session's server still
starts (conftest's autouse fixture); without a binary these run with

    pytest -p no:cacheprovider --noconftest tests/test_alias_requests.py

(tests/test_aliases.py runs the same calls against a live server.)
"""

import json
import pickle
import threading

import numpy as np
import pytest
import requests
from requests.structures import CaseInsensitiveDict

from mercer_client import (
    Alias,
    AliasChange,
    Client,
    MercerError,
    Prediction,
    PreconditionFailed,
    Route,
    Served,
)

URL = "http://mercer.invalid"  # never contacted: the stub answers
A = "00000000-0000-0000-0000-00000000000a"
B = "00000000-0000-0000-0000-00000000000b"
C = "00000000-0000-0000-0000-00000000000c"


class _Answer:
    def __init__(self, status: int, body=None, headers=None):
        self.status_code = status
        self.reason = {200: "OK", 201: "Created", 204: "No Content", 409: "Conflict", 412: "Precondition Failed"}.get(
            status, ""
        )
        self._body = body
        self.text = "" if body is None else json.dumps(body)
        self.headers = CaseInsensitiveDict(headers or {})

    def json(self):
        if self._body is None:
            raise ValueError("no body")
        return self._body


class Stub:
    """The requests made (``method``, ``path``, ``params``, ``headers``, ``body``), and
    the answers to give, in order (when none is queued: a 200 with an alias resource
    under ``/aliases/``, else ``{}``)."""

    def __init__(self):
        self.sent = []
        self.answers = []

    def answer(self, status: int, body=None, headers=None) -> None:
        self.answers.append(_Answer(status, body, headers))

    def __call__(self, method, url, data=None, params=None, headers=None, **kwargs):
        assert url.startswith(URL + "/"), url
        self.sent.append(
            {
                "method": method,
                "path": url[len(URL) :],
                "params": params,
                "headers": dict(headers or {}),
                "body": None if data is None else json.loads(data),
            }
        )
        if self.answers:
            return self.answers.pop(0)
        return _Answer(200, resource() if url.startswith(URL + "/aliases/") else {})

    @property
    def last(self) -> dict:
        return self.sent[-1]


@pytest.fixture
def stub(monkeypatch):
    stub = Stub()

    def request(session, method, url, **kwargs):
        return stub(method, url, **kwargs)

    monkeypatch.setattr(requests.Session, "request", request)
    return stub


@pytest.fixture
def client():
    return Client(URL)


def resource(name="churn", generation=3, routes=((A, 90), (B, 10)), shadow=None, history=True):
    entry = {"name": name, "generation": generation, "routes": [{"model": m, "weight": w} for m, w in routes]}
    entry.update(shadow=shadow, updated_at="2026-11-29T16:00:00.123Z", updated_by="deployer")
    if history:
        entry["history"] = [
            {"generation": 3, "action": "set", "routes": entry["routes"], "shadow": None, "at": "t3", "by": "deployer"},
            {
                "generation": 2, "action": "rollback", "routes": [{"model": A, "weight": 100}], "shadow": None,
                "at": "t2", "by": None, "restores": 1,
            },
            {"generation": 1, "action": "set", "routes": [{"model": A, "weight": 100}], "shadow": None, "at": "t1",
             "by": None},
        ]
    return entry


# ---------------------------------------------------------------- set: bodies and headers


def test_set_one_model(stub, client):
    stub.answer(201, resource(routes=((A, 100),)), {"ETag": '"3"'})
    alias = client.aliases.set("churn", A)
    assert stub.last["method"] == "PUT" and stub.last["path"] == "/aliases/churn"
    assert stub.last["body"] == {"model": A}
    assert "If-Match" not in stub.last["headers"] and "If-None-Match" not in stub.last["headers"]
    assert alias.routes == (Route(A, 100),) and alias.model == A


def test_set_routes_in_every_spelling(stub, client):
    routes = [(A, np.int64(50)), {"model": B, "weight": 49.5}, Route(C, 0.5)]
    client.aliases.set("churn", routes=routes, shadow=A)
    assert stub.last["body"] == {
        "routes": [{"model": A, "weight": 50}, {"model": B, "weight": 49.5}, {"model": C, "weight": 0.5}],
        "shadow": A,
    }
    # An alias's routes can be sent back as they are.
    client.aliases.set("copy", routes=Alias.from_json(resource()).routes)
    assert stub.last["body"] == {"routes": [{"model": A, "weight": 90}, {"model": B, "weight": 10}]}


def test_canary(stub, client):
    client.aliases.set("churn", model=A, canary=(B, 10))
    assert stub.last["body"] == {"routes": [{"model": A, "weight": 90}, {"model": B, "weight": 10}]}
    client.aliases.set("churn", model=A, canary=(B, 2.5), shadow=C)
    assert stub.last["body"] == {"routes": [{"model": A, "weight": 97.5}, {"model": B, "weight": 2.5}], "shadow": C}


@pytest.mark.parametrize(
    "arguments",
    [
        {},  # neither model nor routes
        {"model": A, "routes": [(B, 100)]},
        {"canary": (B, 10)},  # a canary needs the model that keeps the rest
        {"model": A, "canary": (B, 10), "routes": [(A, 100)]},
        {"model": A, "canary": (B, 0)},
        {"model": A, "canary": (B, 100)},
        {"model": A, "canary": B},
        {"routes": [(A,)]},
        {"routes": [{"model": A}]},
        {"routes": [{"model": A, "weight": 100, "extra": 1}]},
        {"routes": [(A, "100")]},
        {"routes": [(A, True)]},
        {"routes": {"model": A, "weight": 100}},
        {"model": A, "if_match": "three"},
        {"model": A, "if_match": -1},
        {"model": A, "if_match": 2.0},
    ],
)
def test_arguments_that_cannot_be_sent(stub, client, arguments):
    with pytest.raises(ValueError):
        client.aliases.set("churn", **arguments)
    assert stub.sent == []


@pytest.mark.parametrize(
    "if_match, sent",
    [(3, '"3"'), (np.int64(3), '"3"'), ("3", '"3"'), ('"3"', '"3"'), ('W/"3"', '"3"'), ("*", "*")],
)
def test_if_match_spellings(stub, client, if_match, sent):
    client.aliases.set("churn", A, if_match=if_match)
    assert stub.last["headers"]["If-Match"] == sent


def test_if_match_takes_an_alias_and_if_none_match(stub, client):
    current = Alias.from_json(resource(generation=7))
    client.aliases.set("churn", A, if_match=current)
    assert stub.last["headers"]["If-Match"] == '"7"'
    client.aliases.set("churn", A, if_none_match=True)
    assert stub.last["headers"]["If-None-Match"] == "*" and "If-Match" not in stub.last["headers"]


# ---------------------------------------------------------------- answers


def test_alias_from_the_answer(stub, client):
    stub.answer(200, resource(shadow=C), {"ETag": '"3"'})
    alias = client.aliases.get("churn")
    assert stub.last["method"] == "GET" and stub.last["path"] == "/aliases/churn" and stub.last["body"] is None
    assert (alias.name, alias.generation, alias.shadow) == ("churn", 3, C)
    assert alias.routes == (Route(A, 90), Route(B, 10)) and alias.routes[1].weight == 10
    assert alias.weights == {A: 90, B: 10} and alias.model == A
    assert (alias.updated_at, alias.updated_by) == ("2026-11-29T16:00:00.123Z", "deployer")
    assert [h.generation for h in alias.history] == [3, 2, 1]
    rollback = alias.history[1]
    assert isinstance(rollback, AliasChange)
    assert (rollback.action, rollback.restores, rollback.routes, rollback.by) == ("rollback", 1, (Route(A, 100),), None)
    assert alias.history[0].restores is None and alias.history[0].at == "t3"
    assert alias.resource["generation"] == 3


def test_list(stub, client):
    stub.answer(200, {"aliases": [resource("a", history=False), resource("b", 1, ((B, 100),), history=False)]})
    aliases = client.aliases.list()
    assert stub.last["path"] == "/aliases"
    assert [a.name for a in aliases] == ["a", "b"] and all(a.history is None for a in aliases)
    assert aliases[1].routes == (Route(B, 100),)


def test_rollback_and_delete(stub, client):
    stub.answer(200, resource(generation=4))
    alias = client.aliases.rollback("churn", if_match=3)
    assert (stub.last["method"], stub.last["path"]) == ("POST", "/aliases/churn/rollback")
    assert stub.last["body"] is None and stub.last["headers"] == {"If-Match": '"3"'}
    assert alias.generation == 4
    client.aliases.rollback("churn")
    assert stub.last["headers"] == {}

    stub.answer(204)
    assert client.aliases.delete("churn") is None
    assert (stub.last["method"], stub.last["path"], stub.last["headers"]) == ("DELETE", "/aliases/churn", {})
    stub.answer(204)
    client.aliases.delete("churn", if_match=alias)
    assert stub.last["headers"] == {"If-Match": '"4"'}


def test_names_are_one_path_segment(stub, client):
    stub.answer(200, resource(".."))
    client.aliases.get("..")
    assert stub.last["path"] == "/aliases/%2E%2E"
    stub.answer(200, resource("a.b-c_D"))
    client.aliases.get("a.b-c_D")
    assert stub.last["path"] == "/aliases/a.b-c_D"
    client.models.predict("not/a name", [[1.0]])
    assert stub.last["path"] == "/models/not%2Fa%20name/predict"


# ---------------------------------------------------------------- errors


def test_a_412_is_precondition_failed(stub, client):
    problem = {
        "type": "/problems/precondition-failed", "title": "Precondition Failed", "status": 412,
        "detail": "the alias churn is at generation 4, not 3",
    }
    stub.answer(412, problem)
    with pytest.raises(PreconditionFailed) as error:
        client.aliases.set("churn", A, if_match=3)
    assert isinstance(error.value, MercerError)
    assert (error.value.status, error.value.type, error.value.body) == (412, "/problems/precondition-failed", problem)
    assert "generation 4" in error.value.detail

    stub.answer(412, "not a problem")  # from a proxy, say: still a 412
    with pytest.raises(PreconditionFailed):
        client.aliases.delete("churn", if_match=3)


def test_other_errors_stay_mercer_errors(stub, client):
    problem = {"type": "/problems/model-in-use", "title": "Conflict", "status": 409, "detail": "alias churn routes to it"}
    stub.answer(409, problem)
    with pytest.raises(MercerError) as error:
        client.models.delete(A)
    assert type(error.value) is MercerError and error.value.type == "/problems/model-in-use"
    assert type(MercerError.from_problem({"status": 422, "detail": "x"})) is MercerError
    assert type(MercerError.from_problem({"type": "/problems/precondition-failed", "detail": "x"})) is PreconditionFailed


# ---------------------------------------------------------------- models through aliases


def test_delete_force(stub, client):
    stub.answer(204)
    client.models.delete(A)
    assert (stub.last["method"], stub.last["path"], stub.last["params"]) == ("DELETE", f"/models/{A}", None)
    stub.answer(204)
    client.models.delete(A, force=True)
    assert stub.last["params"] == {"force": "true"}


def served_headers(model=B, generation=5, request_id="r-1"):
    return {
        "X-Mercer-Model": model, "X-Mercer-Model-Version": "2", "X-Mercer-Alias": "churn",
        "X-Mercer-Alias-Generation": str(generation), "X-Request-Id": request_id,
    }


def test_predict_through_an_alias_names_the_model(stub, client):
    stub.answer(200, {"predictions": [1.5, 2.5]}, served_headers())
    answer = client.models.predict("churn", [[1.0], [2.0]], request_id="r-1", variance=False)
    assert stub.last["path"] == "/models/churn/predict"
    assert stub.last["headers"]["X-Request-Id"] == "r-1"
    assert stub.last["body"] == {"x": [[1.0], [2.0]], "variance": False}
    assert isinstance(answer, Prediction) and isinstance(answer, dict) and set(answer) == {"predictions"}
    np.testing.assert_array_equal(answer["predictions"], [1.5, 2.5])
    assert answer.served == Served(model=B, model_version=2, alias="churn", alias_generation=5, request_id="r-1")
    assert answer.served_model == B and client.last_served_model == B and client.last_served == answer.served
    # Pickled and copied answers keep what served them.
    assert pickle.loads(pickle.dumps(answer)).served == answer.served


def test_no_request_id_header_unless_asked(stub, client):
    client.models.predict(A, [[1.0]])
    assert "X-Request-Id" not in stub.last["headers"]


def test_the_model_asked_by_id_is_the_model_served_when_no_header_says(stub, client):
    stub.answer(200, {"predictions": [1.0]})
    answer = client.models.predict(A, [[1.0]])
    assert answer.served == Served(model=A)
    stub.answer(200, {"predictions": [1.0]})
    assert client.models.predict("churn", [[1.0]]).served.model is None  # an alias, from a server without the header


def test_every_model_call_records_what_served_it(stub, client):
    assert client.last_served is None and client.last_served_model is None
    calls = [
        (lambda: client.models.transform("pca", [[1.0]], request_id="t"), "/transform", {"embedding": [[0.5]]}),
        (lambda: client.models.inverse_transform("pca", [[0.5]], request_id="t"), "/inverse_transform", {"x": [[1.0]]}),
        (
            lambda: client.models.posterior_samples("pca", [[1.0]], 2, request_id="t"),
            "/posterior_samples",
            {"samples": [[0.1, 0.2]]},
        ),
        (lambda: client.models.get("pca"), "", {"id": C, "status": "ready"}),
    ]
    for generation, (call, suffix, body) in enumerate(calls, start=1):
        stub.answer(200, body, served_headers(C, generation, "t"))
        call()
        assert stub.last["path"] == "/models/pca" + suffix
        if suffix:
            assert stub.last["headers"]["X-Request-Id"] == "t"
        assert client.last_served == Served(C, 2, "churn", generation, "t")


def test_last_served_is_per_thread(stub, client):
    stub.answer(200, {"predictions": [1.0]}, served_headers(A))
    client.models.predict("churn", [[1.0]])
    seen = []
    thread = threading.Thread(target=lambda: seen.append(client.last_served))
    thread.start()
    thread.join()
    assert seen == [None] and client.last_served_model == A


def test_an_estimator_still_gets_a_dict_of_arrays(stub, client):
    """Predictions chunked by the estimators concatenate Prediction answers as dicts."""
    stub.answer(200, {"predictions": [1.0, 2.0], "variance": [0.1, 0.2]})
    answer = client.models.predict(A, [[1.0], [2.0]])
    assert {k: v.tolist() for k, v in answer.items()} == {"predictions": [1.0, 2.0], "variance": [0.1, 0.2]}

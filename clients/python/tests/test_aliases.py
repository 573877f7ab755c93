"""Model aliases against the session's server: set, get, list, predictions through an
alias (and which model answered), the canary split, request ids pinning the route,
conditional writes (``If-Match``), rollback, delete, the model-in-use guard and forced
deletes, and shadows. (tests/test_alias_requests.py checks what the client sends
without a server.)"""

import uuid

import numpy as np
import pytest

from mercer_client import Alias, MercerError, PreconditionFailed, Route

RBF = {"type": "rbf", "length_scale": 0.8}


def fresh(prefix: str) -> str:
    """An alias name no other test uses (the session's server is shared)."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def rows():
    rng = np.random.RandomState(5)
    X = rng.uniform(-3, 3, size=(40, 2))
    y = np.sin(X[:, 0]) + 0.1 * X[:, 1] + 0.05 * rng.randn(40)
    return X, y


@pytest.fixture(scope="module")
def ridges(client, rows):
    """Three kernel ridges on the same rows whose predictions differ (lambda 0.01, 1,
    10), so that an answer tells which one computed it."""
    X, y = rows
    ids = [client.models.fit("kernel_ridge", X, y, kernel=RBF, params={"lambda": lam})["id"] for lam in (0.01, 1.0, 10.0)]
    first = [client.models.predict(i, X[:1])["predictions"][0] for i in ids]
    assert len({round(p, 6) for p in first}) == 3, first
    return ids


def fit_ridge(client, rows, lam=0.5):
    X, y = rows
    return client.models.fit("kernel_ridge", X, y, kernel=RBF, params={"lambda": lam})["id"]


# ---------------------------------------------------------------- set, get, list


def test_set_get_list(client, ridges):
    a, b, _ = ridges
    name = fresh("setget")
    alias = client.aliases.set(name, model=a)
    assert isinstance(alias, Alias)
    assert (alias.name, alias.generation, alias.routes, alias.shadow) == (name, 1, (Route(a, 100),), None)
    assert alias.updated_by is None and alias.updated_at  # no API keys on the session's server
    assert [(h.generation, h.action) for h in alias.history] == [(1, "set")]

    got = client.aliases.get(name)
    assert (got.generation, got.routes, got.shadow, got.updated_at) == (1, (Route(a, 100),), None, alias.updated_at)

    second = client.aliases.set(name, routes=[(a, 70), {"model": b, "weight": 30}], shadow=None)
    assert second.generation == 2 and second.routes == (Route(a, 70), Route(b, 30)) and second.weights == {a: 70, b: 30}
    assert [(h.generation, h.action) for h in second.history] == [(2, "set"), (1, "set")]
    assert second.history[1].routes == (Route(a, 100),)

    other = fresh("setget")
    client.aliases.set(other, model=b)
    listed = client.aliases.list()
    names = [x.name for x in listed]
    assert names == sorted(names) and {name, other} <= set(names)
    mine = next(x for x in listed if x.name == name)
    assert mine.history is None and (mine.generation, mine.routes) == (2, second.routes)

    with pytest.raises(MercerError) as error:
        client.aliases.get(fresh("missing"))
    assert error.value.status == 404 and error.value.type == "/problems/not-found"


def test_what_the_server_refuses(client, ridges, rows):
    a, b, _ = ridges
    name = fresh("refused")
    cases = [
        ({"model": "00000000-0000-0000-0000-000000000000"}, ["/model"]),
        ({"routes": [(a, 60), (b, 30)]}, ["/routes"]),  # not summing to 100
        ({"routes": [(a, 50), (a, 50)]}, ["/routes/1/model"]),  # one model twice
        ({"routes": [(a, 0), (b, 100)]}, ["/routes/0/weight"]),
        ({"model": a, "shadow": a}, ["/shadow"]),
    ]
    for arguments, pointers in cases:
        with pytest.raises(MercerError) as error:
            client.aliases.set(name, **arguments)
        assert (error.value.status, error.value.type, error.value.pointers) == (
            422, "/problems/invalid-input", pointers
        ), arguments

    X, _ = rows
    pca = client.models.fit("kernel_pca", X, kernel={"type": "rbf", "gamma": 0.5}, params={"n_components": 2})
    with pytest.raises(MercerError) as error:
        client.aliases.set(name, routes=[(a, 50), (pca["id"], 50)])  # another task than route 0's
    assert error.value.status == 422 and error.value.pointers == ["/routes/1/model"]

    for bad in ("x" * 65, str(uuid.uuid4())):
        with pytest.raises(MercerError) as error:
            client.aliases.set(bad, model=a)
        assert error.value.status == 422 and error.value.pointers == ["/name"], bad
    with pytest.raises(MercerError) as error:
        client.aliases.get(name)  # nothing refused was written
    assert error.value.status == 404


# ---------------------------------------------------------------- using an alias


def test_model_calls_take_an_alias(client, ridges, rows):
    X, y = rows
    a, b, _ = ridges
    name = fresh("calls")
    alias = client.aliases.set(name, model=a)

    direct = client.models.predict(a, X[:5])
    assert direct.served.model == a and direct.served.alias is None
    through = client.models.predict(name, X[:5])
    np.testing.assert_array_equal(through["predictions"], direct["predictions"])
    assert through.served_model == a and client.last_served_model == a
    assert (through.served.alias, through.served.alias_generation) == (name, alias.generation)
    assert client.models.get(name)["id"] == a

    gp = client.models.fit("gaussian_process", X, y, kernel=RBF, params={"noise": 0.01})["id"]
    gp_alias = fresh("gp")
    client.aliases.set(gp_alias, model=gp)
    draws = client.models.posterior_samples(gp_alias, X[:4], 3, seed=2)
    assert client.last_served.model == gp and client.last_served.alias == gp_alias
    np.testing.assert_array_equal(draws, client.models.posterior_samples(gp, X[:4], 3, seed=2))
    assert client.last_served.alias is None  # the last call named the model itself

    pca = client.models.fit(
        "kernel_pca", X, kernel={"type": "rbf", "gamma": 0.5}, params={"n_components": 2, "fit_inverse_transform": True}
    )["id"]
    pca_alias = fresh("pca")
    client.aliases.set(pca_alias, model=pca)
    embedding = client.models.transform(pca_alias, X[:4])
    assert client.last_served_model == pca and client.last_served.alias == pca_alias
    np.testing.assert_array_equal(embedding, client.models.transform(pca, X[:4]))
    back = client.models.inverse_transform(pca_alias, embedding)
    assert client.last_served_model == pca and client.last_served.alias == pca_alias
    np.testing.assert_array_equal(back, client.models.inverse_transform(pca, embedding))
    assert client.models.get(pca_alias)["id"] == pca

    # The alias moves: the same name answers with the other model.
    moved = client.aliases.set(name, model=b)
    answer = client.models.predict(name, X[:5])
    assert answer.served_model == b and answer.served.alias_generation == moved.generation
    np.testing.assert_array_equal(answer["predictions"], client.models.predict(b, X[:5])["predictions"])

    with pytest.raises(MercerError) as error:
        client.models.predict(fresh("nowhere"), X[:1])
    assert error.value.status == 404


def test_canary_split(client, ridges, rows):
    """2,000 predictions through a 90/10 canary: the canary's count is binomial(2000,
    0.1), mean 200, sd 13.4; the bounds are 5 sd either side (a false failure about
    once in 1.7 million runs). Each answer is the prediction of the model its header
    names."""
    X, _ = rows
    a, b, _ = ridges
    name = fresh("canary")
    alias = client.aliases.set(name, model=a, canary=(b, 10))
    assert alias.routes == (Route(a, 90), Route(b, 10))
    row = X[:1]
    want = {m: client.models.predict(m, row)["predictions"][0] for m in (a, b)}

    counts = {a: 0, b: 0}
    for _ in range(2000):
        answer = client.models.predict(name, row)
        served = answer.served
        assert served.model in counts, served
        assert (served.alias, served.alias_generation) == (name, alias.generation)
        assert answer["predictions"][0] == pytest.approx(want[served.model], rel=1e-12, abs=1e-12)
        counts[served.model] += 1
    assert 133 <= counts[b] <= 267, counts


def test_a_request_id_pins_the_route(client, ridges, rows):
    """Through a 50/50 alias the route is seeded by X-Request-Id: the same id (and
    generation) lands on the same model every time; 20 ids reach both models (all on
    one: 2 in a million)."""
    X, _ = rows
    a, b, _ = ridges
    name = fresh("pinned")
    generation = client.aliases.set(name, routes=[(a, 50), (b, 50)]).generation
    landed = {}
    for i in range(20):
        request_id = f"pin-{name}-{i}"
        served = {client.models.predict(name, X[:1], request_id=request_id).served for _ in range(3)}
        assert len(served) == 1, served
        (one,) = served
        assert (one.request_id, one.alias_generation) == (request_id, generation)
        landed[request_id] = one.model
    assert set(landed.values()) == {a, b}, landed


# ---------------------------------------------------------------- conditional writes


def test_if_match(client, ridges):
    a, b, c = ridges
    name = fresh("cas")
    first = client.aliases.set(name, model=a, if_none_match=True)  # create only
    with pytest.raises(PreconditionFailed):
        client.aliases.set(name, model=b, if_none_match=True)  # it exists now

    second = client.aliases.set(name, model=b, if_match=first.generation)
    assert second.generation == first.generation + 1

    with pytest.raises(PreconditionFailed) as error:
        client.aliases.set(name, model=c, if_match=first)  # stale: first is a generation behind
    problem = error.value
    assert isinstance(problem, MercerError)
    assert (problem.status, problem.type) == (412, "/problems/precondition-failed")
    assert problem.body["status"] == 412
    assert client.aliases.get(name).routes == (Route(b, 100),)  # unchanged

    assert client.aliases.set(name, model=c, if_match="*").generation == second.generation + 1
    with pytest.raises(PreconditionFailed):
        client.aliases.set(fresh("cas-none"), model=a, if_match=1)  # no such alias
    with pytest.raises(PreconditionFailed):
        client.aliases.rollback(name, if_match=second)
    with pytest.raises(PreconditionFailed):
        client.aliases.delete(name, if_match=second.generation)
    current = client.aliases.get(name)
    assert current.generation == second.generation + 1
    rolled = client.aliases.rollback(name, if_match=current)
    assert rolled.routes == (Route(b, 100),) and rolled.generation == current.generation + 1
    client.aliases.delete(name, if_match=rolled)
    with pytest.raises(MercerError) as error:
        client.aliases.get(name)
    assert error.value.status == 404


# ---------------------------------------------------------------- rollback, delete


def test_rollback_walks_back(client, ridges):
    a, b, c = ridges
    name = fresh("rollback")
    client.aliases.set(name, model=a)
    with pytest.raises(MercerError) as error:
        client.aliases.rollback(name)  # no earlier setting
    assert (error.value.status, error.value.type) == (409, "/problems/conflict")

    client.aliases.set(name, model=b, shadow=c)
    third = client.aliases.set(name, model=c)
    assert third.generation == 3
    back = client.aliases.rollback(name)
    assert (back.generation, back.routes, back.shadow) == (4, (Route(b, 100),), c)
    assert (back.history[0].action, back.history[0].restores) == ("rollback", 2)
    further = client.aliases.rollback(name)  # a rollback of a rollback goes further back, it does not toggle
    assert (further.generation, further.routes, further.shadow) == (5, (Route(a, 100),), None)
    assert (further.history[0].action, further.history[0].restores) == ("rollback", 1)
    with pytest.raises(MercerError) as error:
        client.aliases.rollback(name)  # nothing before generation 1
    assert error.value.status == 409
    assert [h.generation for h in client.aliases.get(name).history] == [5, 4, 3, 2, 1]

    with pytest.raises(MercerError) as error:
        client.aliases.rollback(fresh("rollback-none"))
    assert error.value.status == 404


def test_rollback_to_a_deleted_model_conflicts(client, ridges, rows):
    a, _, _ = ridges
    gone = fit_ridge(client, rows)
    name = fresh("rollback-gone")
    client.aliases.set(name, model=gone)
    client.aliases.set(name, model=a)
    client.models.delete(gone)  # no alias routes to it any more: no guard
    with pytest.raises(MercerError) as error:
        client.aliases.rollback(name)
    assert (error.value.status, error.value.type) == (409, "/problems/conflict")
    assert client.aliases.get(name).routes == (Route(a, 100),)


def test_delete_and_set_again(client, ridges, rows):
    X, _ = rows
    a, b, _ = ridges
    name = fresh("deleted")
    set_at = client.aliases.set(name, model=a).generation
    assert client.aliases.delete(name) is None
    with pytest.raises(MercerError) as error:
        client.aliases.get(name)
    assert (error.value.status, error.value.type) == (404, "/problems/not-found")
    with pytest.raises(MercerError) as error:
        client.models.predict(name, X[:1])
    assert error.value.status == 404
    with pytest.raises(MercerError) as error:
        client.aliases.delete(name)
    assert error.value.status == 404
    assert name not in [x.name for x in client.aliases.list()]
    assert client.models.get(a)["status"] == "ready"  # deleting an alias leaves its models

    again = client.aliases.set(name, model=b)
    assert again.generation > set_at + 1  # the delete was a generation; they go on from there
    deleted = next(h for h in again.history if h.action == "delete")
    assert (deleted.routes, deleted.shadow) == ((), None)


# ---------------------------------------------------------------- the model-in-use guard


def test_a_routed_model_is_guarded_and_force_unroutes_it(client, ridges, rows):
    X, _ = rows
    a, b, _ = ridges
    doomed = fit_ridge(client, rows, lam=0.3)
    split, shadowed, only = fresh("guard-split"), fresh("guard-shadow"), fresh("guard-only")
    split_before = client.aliases.set(split, routes=[(doomed, 50), (a, 30), (b, 20)])
    shadow_before = client.aliases.set(shadowed, model=b, shadow=doomed)
    client.aliases.set(only, model=doomed)

    with pytest.raises(MercerError) as error:
        client.models.delete(doomed)
    assert (error.value.status, error.value.type) == (409, "/problems/model-in-use")
    for name in (split, shadowed, only):
        assert name in error.value.detail
    assert client.models.get(doomed)["status"] == "ready"  # still there
    assert client.aliases.get(split).generation == split_before.generation

    client.models.delete(doomed, force=True)
    with pytest.raises(MercerError) as error:
        client.models.get(doomed)
    assert error.value.status == 404

    after = client.aliases.get(split)
    assert after.routes == (Route(a, 60), Route(b, 40))  # 30 and 20 scaled back to 100
    assert after.generation == split_before.generation + 1 and after.history[0].action == "unroute"
    assert client.models.predict(split, X[:1]).served_model in (a, b)
    assert client.models.get(split)["id"] in (a, b)  # a route's model, chosen as for a predict

    unshadowed = client.aliases.get(shadowed)
    assert (unshadowed.routes, unshadowed.shadow) == ((Route(b, 100),), None)
    assert unshadowed.generation == shadow_before.generation + 1 and unshadowed.history[0].action == "unroute"

    with pytest.raises(MercerError) as error:
        client.aliases.get(only)  # left with no route: deleted
    assert error.value.status == 404


# ---------------------------------------------------------------- shadows


def test_a_shadow_never_changes_the_answer(client, ridges, rows):
    X, _ = rows
    a, b, _ = ridges
    primary = client.models.predict(a, X)["predictions"]
    shadow = client.models.predict(b, X)["predictions"]
    assert not np.allclose(primary, shadow)  # an answer from b would show
    name = fresh("shadow")
    alias = client.aliases.set(name, model=a, shadow=b)
    assert (alias.routes, alias.shadow) == ((Route(a, 100),), b)
    for i in range(30):
        answer = client.models.predict(name, X, request_id=f"{name}-{i}")
        assert answer.served_model == a
        np.testing.assert_array_equal(answer["predictions"], primary)
    # The shadow model's own answers are unchanged by its shadow work.
    np.testing.assert_array_equal(client.models.predict(b, X)["predictions"], shadow)

"""The Optuna-style study API without a server: the request bodies built from
create_study's arguments and from what an objective returns, and the optimize loop
(pruned, failed, caught and raised trials, callbacks, threads) against a fake server
that answers as issue 53's contract says. The HTTP layer (``requests.Session.request``)
is replaced by the fake. In the suite the session's server still starts (conftest's
autouse fixture); without a binary these tests run with

    pytest -p no:cacheprovider --noconftest tests/test_study_client.py
"""

import itertools
import json
import logging
import math
import uuid

import numpy as np
import pytest
import requests

from mercer_client import (
    Client,
    FrozenTrial,
    MedianPruner,
    MercerError,
    MultiObjectiveError,
    NopPruner,
    Study,
    SuccessiveHalvingPruner,
    Trial,
    TrialPruned,
)
from mercer_client.study import StudyShape, dominates, record_body, study_body, tell_body

URL = "http://mercer.invalid"  # never contacted: the fake answers

SPACE = {"x": {"uniform": [-5, 5]}, "y": {"uniform": [-5, 5]}}


# ---------------------------------------------------------------- create bodies


def test_a_single_objective_body_is_the_old_one():
    assert study_body(SPACE) == {"space": SPACE, "direction": "minimize", "seed": 0}
    assert study_body(SPACE, direction="maximize", name="n", seed=3, initial=4) == {
        "space": SPACE, "name": "n", "direction": "maximize", "seed": 3, "initial": 4,
    }
    # one direction in a list is a single objective, and a name for it stays in the client
    assert study_body(SPACE, directions=["maximize"], objective_names=["acc"]) == {
        "space": SPACE, "direction": "maximize", "seed": 0,
    }


def test_several_objectives_are_named_f0_f1_unless_named():
    body = study_body(SPACE, directions=["minimize", "maximize"])
    assert body["objectives"] == [{"name": "f0", "direction": "minimize"}, {"name": "f1", "direction": "maximize"}]
    assert "direction" not in body
    body = study_body(SPACE, directions=["minimize", "minimize"], objective_names=["cost", "time"],
                      reference=[10, 5.5])
    assert [o["name"] for o in body["objectives"]] == ["cost", "time"]
    assert body["reference"] == {"cost": 10, "time": 5.5}
    assert study_body(SPACE, directions=["minimize", "minimize"], reference={"f0": 1, "f1": 2})["reference"] == {
        "f0": 1, "f1": 2,
    }


def test_optuna_direction_enums_are_sent_by_name():
    class StudyDirection:  # stands for optuna.study.StudyDirection
        def __init__(self, name):
            self.name = name

    body = study_body(SPACE, directions=[StudyDirection("MINIMIZE"), StudyDirection("MAXIMIZE")])
    assert [o["direction"] for o in body["objectives"]] == ["minimize", "maximize"]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"direction": "minimize", "directions": ["minimize", "maximize"]},
        {"directions": ["minimize", "maximize"], "objective_names": ["only_one"]},
        {"directions": []},
        {"directions": ["minimize", "minimize"], "reference": [1.0]},
        {"reference": [1.0]},
        {"constraints": {"value": 0.0}},  # the single objective's name
        {"objective_names": ["loss"], "constraints": ["loss"]},
    ],
)
def test_arguments_that_cannot_be_sent_are_value_errors(kwargs):
    with pytest.raises(ValueError):
        study_body(SPACE, **kwargs)


def test_constraints_in_every_form_become_name_max_objects():
    expected = [{"name": "c1", "max": 0.0}, {"name": "c2", "max": 2.5}]
    assert study_body(SPACE, constraints={"c1": 0.0, "c2": 2.5})["constraints"] == expected
    assert study_body(SPACE, constraints=expected)["constraints"] == expected
    assert study_body(SPACE, constraints=[("c1", 0.0), ("c2", 2.5)])["constraints"] == expected
    assert study_body(SPACE, constraints=["c1"])["constraints"] == [{"name": "c1", "max": 0.0}]
    assert study_body(SPACE, constraints={})["constraints"] == []


def test_pruners_as_names_dicts_and_optuna_style_objects():
    assert study_body(SPACE, pruner="median")["pruner"] == "median"
    assert study_body(SPACE, pruner={"type": "halving", "reduction_factor": 3})["pruner"] == {
        "type": "halving", "reduction_factor": 3,
    }
    assert study_body(SPACE, pruner=MedianPruner(n_startup_trials=3, n_warmup_steps=2))["pruner"] == {
        "type": "median", "startup_trials": 3, "warmup_steps": 2, "interval_steps": 1, "min_trials": 1,
    }
    assert study_body(SPACE, pruner=SuccessiveHalvingPruner(min_resource=2))["pruner"] == {
        "type": "halving", "min_resource": 2, "reduction_factor": 4, "min_early_stopping_rate": 0,
    }
    assert study_body(SPACE, pruner=NopPruner())["pruner"] == "none"
    assert "pruner" not in study_body(SPACE)
    with pytest.raises(TypeError):
        study_body(SPACE, pruner=3)


# ---------------------------------------------------------------- tell bodies

SINGLE = StudyShape(["value"], ["minimize"], False)
SINGLE_C = StudyShape(["value"], ["minimize"], False, {"c1": 0.0, "c2": 1.0})
MULTI = StudyShape(["f0", "f1"], ["minimize", "maximize"], True)
MULTI_C = StudyShape(["f0", "f1"], ["minimize", "maximize"], True, {"c1": 0.0})


@pytest.mark.parametrize("returned", [1.5, np.float64(1.5), np.float32(1.5), np.array(1.5), [1.5], (1.5,),
                                      {"value": 1.5}, 3 / 2])
def test_a_single_objectives_value(returned):
    assert tell_body(returned, SINGLE) == {"value": 1.5}


def test_an_int_is_a_value():
    assert tell_body(np.int64(2), SINGLE) == {"value": 2.0}


def test_a_single_objective_with_constraints_tells_them_in_values():
    assert tell_body({"value": 1.0, "c1": -0.5, "c2": 3}, SINGLE_C) == {"value": 1.0, "values": {"c1": -0.5, "c2": 3.0}}
    # or set with trial.set_constraints, the objective returned as a number
    assert tell_body(1.0, SINGLE_C, {"c1": -0.5, "c2": 3.0}) == {"value": 1.0, "values": {"c1": -0.5, "c2": 3.0}}
    # both ways at once, one constraint each
    assert tell_body({"value": 1.0, "c2": 3}, SINGLE_C, {"c1": -0.5}) == {
        "value": 1.0, "values": {"c1": -0.5, "c2": 3.0},
    }


def test_several_objectives_in_order_or_by_name():
    expected = {"values": {"f0": 1.0, "f1": 2.0}}
    assert tell_body((1, 2), MULTI) == expected
    assert tell_body([1.0, 2.0], MULTI) == expected
    assert tell_body(np.array([1.0, 2.0]), MULTI) == expected
    assert tell_body({"f1": 2.0, "f0": 1.0}, MULTI) == expected
    assert tell_body({"f0": 1, "f1": 2, "c1": 0.25}, MULTI_C) == {"values": {"f0": 1.0, "f1": 2.0, "c1": 0.25}}
    assert tell_body((1, 2), MULTI_C, {"c1": 0.25}) == {"values": {"f0": 1.0, "f1": 2.0, "c1": 0.25}}


@pytest.mark.parametrize(
    "returned, shape, constraints",
    [
        (None, SINGLE, None),
        ("1.0", SINGLE, None),
        (float("nan"), SINGLE, None),
        (float("inf"), SINGLE, None),
        ([1.0, 2.0], SINGLE, None),
        ({"loss": 1.0}, SINGLE, None),
        (1.0, MULTI, None),
        ((1.0, 2.0, 3.0), MULTI, None),
        ({"f0": 1.0}, MULTI, None),
        ((1.0, float("nan")), MULTI, None),
        ({"f0": 1.0, "f1": 2.0, "c9": 0.0}, MULTI_C, None),
        ((1.0, 2.0), MULTI_C, None),  # the constraint has no value
        (1.0, SINGLE_C, {"c1": 0.0}),  # c2 has none
        ({"value": 1.0, "c1": 0.0, "c2": 0.0}, SINGLE_C, {"c1": 0.0}),  # c1 twice
        ({"value": [1.0]}, SINGLE, None),
    ],
)
def test_returns_that_do_not_fit_the_study_are_refused(returned, shape, constraints):
    with pytest.raises((TypeError, ValueError)):
        tell_body(returned, shape, constraints)


def test_warm_start_bodies():
    params = {"x": 1.0, "y": 2.0}
    assert record_body(params, 3.0, SINGLE) == {"values": params, "value": 3.0}
    assert record_body(params, {"value": 3.0, "c1": 0.0, "c2": 1.0}, SINGLE_C) == {
        "values": params, "value": 3.0, "results": {"c1": 0.0, "c2": 1.0},
    }
    assert record_body(params, (1.0, 2.0), MULTI) == {"values": params, "results": {"f0": 1.0, "f1": 2.0}}


def test_dominates():
    assert dominates([1, 2], [1, 3], ["minimize", "minimize"])
    assert not dominates([1, 2], [1, 2], ["minimize", "minimize"])
    assert not dominates([1, 3], [2, 2], ["minimize", "minimize"])
    assert dominates([1, 3], [2, 2], ["minimize", "maximize"])


def test_a_frozen_trial_reads_the_resource():
    resource = {
        "id": 4, "values": {"x": 0.5}, "state": "complete", "created_at": "t",
        "results": {"f0": 1.0, "f1": 2.0, "c1": -1.0}, "feasible": True,
    }
    trial = FrozenTrial(resource, MULTI_C)
    assert (trial.number, trial.id, trial.params, trial.state) == (4, 4, {"x": 0.5}, "complete")
    assert trial.values == [1.0, 2.0] and trial.value is None
    assert trial.constraints == {"c1": -1.0} and trial.feasible is True
    pruned = FrozenTrial({"id": 1, "values": {}, "state": "pruned", "value": 7.0,
                          "reports": [{"step": 0, "value": 9.0}, {"step": 3, "value": 7.0}]}, SINGLE)
    assert pruned.value == 7.0 and pruned.values == [7.0]
    assert pruned.intermediate_values == {0: 9.0, 3: 7.0} and pruned.last_step == 3
    assert FrozenTrial({"id": 2, "values": {}, "state": "pending"}, MULTI).values is None


# ---------------------------------------------------------------- a fake server


class _Answer:
    def __init__(self, status: int, body):
        self.status_code = status
        self.reason = {200: "OK", 201: "Created", 204: "No Content", 404: "Not Found", 409: "Conflict",
                       422: "Unprocessable Entity"}[status]
        self._body = body
        self.text = "" if body is None else json.dumps(body)

    def json(self):
        return self._body


def _problem(status, pointer, detail):
    return _Answer(status, {"title": "", "status": status, "detail": detail, "errors": [{"pointer": pointer}]})


class FakeMercer:
    """Studies as issue 53's contract answers them, enough for the client: the
    suggestions are seeded uniform draws; ``best`` and ``pareto`` are computed from the
    told trials; a report is pruned when ``prune_when(value)`` says so."""

    def __init__(self):
        self.studies = {}
        self.requests = []  # (method, path, body)
        self.prune_when = lambda value: False
        self.rng = np.random.default_rng(0)

    def __call__(self, session, method, url, data=None, params=None, headers=None, timeout=None):
        assert url.startswith(URL), url
        path = url[len(URL):]
        body = json.loads(data) if data else None
        self.requests.append((method, path, body))
        parts = path.strip("/").split("/")
        if parts == ["studies"] and method == "POST":
            return self.create(body)
        study = self.studies.get(parts[1]) if len(parts) > 1 else None
        if study is None:
            return _problem(404, "", "no such study")
        if len(parts) == 2:
            if method == "DELETE":
                del self.studies[parts[1]]
                return _Answer(204, None)
            return _Answer(200, self.resource(study))
        if parts[2] == "suggest":
            return self.suggest(study, body.get("count", 1))
        if len(parts) == 3:  # a warm start: a trial recorded complete
            number = len(study["trials"])
            study["trials"][number] = {"id": number, "values": body["values"], "state": "pending", "created_at": "now"}
            told = {k: v for k, v in body.items() if k in ("value",)}
            if "results" in body:
                told["values"] = body["results"]
            answer = self.tell(study, study["trials"][number], told)
            answer.status_code = 201
            return answer
        trial = study["trials"].get(int(parts[3]))
        if trial is None:
            return _problem(404, "", "no such trial")
        if len(parts) == 5 and parts[4] == "reports":
            return self.report(study, trial, body)
        return self.tell(study, trial, body)

    def create(self, body):
        if "objectives" in body and "direction" in body:
            return _problem(422, "/direction", "direction or objectives")
        if "objectives" in body and body.get("pruner") not in (None, "none"):
            return _problem(422, "/pruner", "pruning is single-objective")
        pruner = body.get("pruner") or "none"
        study = {
            "id": str(uuid.uuid4()), "name": body.get("name"), "space": body["space"], "seed": body["seed"],
            "constraints": body.get("constraints", []),
            "pruner": {"type": pruner} if isinstance(pruner, str) else pruner, "trials": {},
        }
        if "objectives" in body:
            study["objectives"] = body["objectives"]
        else:
            study["direction"] = body.get("direction", "minimize")
        self.studies[study["id"]] = study
        return _Answer(201, self.resource(study))

    def suggest(self, study, count):
        trials = []
        for _ in range(count):
            number = len(study["trials"])
            values = {n: float(self.rng.uniform(*spec["uniform"])) for n, spec in study["space"].items()}
            study["trials"][number] = {"id": number, "values": values, "state": "pending", "created_at": "now"}
            trials.append(study["trials"][number])
        return _Answer(200, {"trials": trials})

    def report(self, study, trial, body):
        if trial["state"] != "pending":
            return _problem(409, "", "the trial is told")
        reports = trial.setdefault("reports", [])
        if all(r["step"] != body["step"] for r in reports):
            reports.append({"step": body["step"], "value": body["value"]})
        return _Answer(200, {"trial": trial["id"], "step": body["step"], "prune": bool(self.prune_when(body["value"]))})

    def tell(self, study, trial, body):
        if trial["state"] != "pending":
            return _problem(409, "", "the trial is told")
        if "state" in body:
            trial["state"] = body["state"]
            if body["state"] == "pruned" and trial.get("reports"):
                trial["value"] = trial["reports"][-1]["value"]
            return _Answer(200, trial)
        names = [o["name"] for o in study.get("objectives", [])] + [c["name"] for c in study["constraints"]]
        for name in names:
            if name not in body.get("values", {}):
                return _problem(422, f"/values/{name}", "missing")
        trial["state"] = "complete"
        if "value" in body:
            trial["value"] = body["value"]
        if body.get("values"):
            trial["results"] = dict(body["values"])
        if study["constraints"]:
            trial["feasible"] = all(trial["results"][c["name"]] <= c["max"] for c in study["constraints"])
        return _Answer(200, trial)

    def resource(self, study):
        out = {k: v for k, v in study.items() if k != "trials"}
        trials = list(study["trials"].values())
        out["trials"] = trials
        done = [t for t in trials if t["state"] == "complete" and t.get("feasible", True)]
        if "objectives" in study:
            directions = [o["direction"] for o in study["objectives"]]
            points = [[t["results"][o["name"]] for o in study["objectives"]] for t in done]
            out["pareto"] = [t for t, p in zip(done, points) if not any(dominates(q, p, directions) for q in points)]
            out["hypervolume"] = 1.0
            out["best"] = None
        else:
            sign = 1 if study["direction"] == "minimize" else -1
            out["best"] = min(done, key=lambda t: sign * t["value"], default=None)
        out["n_pruned"] = sum(t["state"] == "pruned" for t in trials)
        return out

    def tells(self):
        """The bodies told, in order."""
        return [body for method, path, body in self.requests
                if method == "POST" and path.count("/") == 4 and not path.endswith("/suggest")]


@pytest.fixture
def fake(monkeypatch):
    server = FakeMercer()

    def request(session, method, url, **kwargs):
        return server(session, method, url, **kwargs)

    monkeypatch.setattr(requests.Session, "request", request)
    return server


@pytest.fixture
def client(fake):
    return Client(URL)


# ---------------------------------------------------------------- the study against the fake


def test_create_study_sends_the_body_and_returns_a_study(client, fake):
    study = client.create_study(SPACE, directions=["minimize", "maximize"], objective_names=["cost", "gain"],
                                constraints={"c1": 0.0}, name="s")
    assert isinstance(study, Study)
    method, path, body = fake.requests[-1]
    assert (method, path) == ("POST", "/studies")
    assert body == {
        "space": SPACE, "name": "s",
        "objectives": [{"name": "cost", "direction": "minimize"}, {"name": "gain", "direction": "maximize"}],
        "constraints": [{"name": "c1", "max": 0.0}], "seed": 0,
    }
    assert study.directions == ["minimize", "maximize"] and study.objective_names == ["cost", "gain"]
    assert study.constraints == {"c1": 0.0} and study.is_multi_objective
    with pytest.raises(MultiObjectiveError):
        study.direction
    assert client.load_study(study.id).objective_names == ["cost", "gain"]


def test_the_old_dict_calls_keep_their_bodies(client, fake):
    resource = client.studies.create(SPACE)
    assert fake.requests[-1][2] == {"space": SPACE, "direction": "minimize", "seed": 0}
    trial = client.studies.ask(resource["id"])
    client.studies.tell(resource["id"], trial["id"], 1.5)
    assert fake.requests[-1][2] == {"value": 1.5}
    client.studies.tell(resource["id"], client.studies.ask(resource["id"])["id"], failed=True)
    assert fake.requests[-1][2] == {"state": "failed"}


def test_optimize_tells_values_pruned_and_failed(client, fake):
    fake.prune_when = lambda value: value > 50
    study = client.create_study(SPACE, pruner="median")
    seen = []

    def objective(trial):
        if trial.number == 2:
            raise KeyError("caught")
        if trial.number == 3:
            return float("nan")  # not finite: failed, logged, the loop goes on
        bad = trial.number % 2 == 1
        for step in range(3):
            value = 100.0 if bad else trial.params["x"] ** 2
            trial.report(value, step)
            if trial.should_prune():
                raise TrialPruned()
        return value

    study.optimize(objective, n_trials=6, catch=(KeyError,), callbacks=[lambda s, t: seen.append((s, t))])
    assert fake.tells() == [
        {"value": fake.studies[study.id]["trials"][0]["values"]["x"] ** 2},
        {"state": "pruned"},
        {"state": "failed"},
        {"state": "failed"},
        {"value": fake.studies[study.id]["trials"][4]["values"]["x"] ** 2},
        {"state": "pruned"},
    ]
    assert [t.state for _, t in seen] == ["complete", "pruned", "failed", "failed", "complete", "pruned"]
    assert all(s is study for s, _ in seen) and all(isinstance(t, FrozenTrial) for _, t in seen)
    pruned = study.get_trials(states=["pruned"])
    assert [t.number for t in pruned] == [1, 5]
    assert pruned[0].value == 100.0 and pruned[0].intermediate_values == {0: 100.0}
    assert study.best_value == min(t.value for t in study.trials if t.state == "complete")
    assert study.best_params == study.best_trial.params
    assert [t.number for t in study.best_trials] == [study.best_trial.number]


def test_an_objective_written_for_optuna_runs(client, fake):
    class TrialPruned(Exception):  # stands for optuna.TrialPruned
        pass

    study = client.create_study({"x": {"uniform": [0, 1]}})

    def objective(trial):
        x = trial.suggest_float("x", 0, 1)
        if trial.number == 1:
            raise TrialPruned()
        return x

    study.optimize(objective, n_trials=2)
    assert fake.tells()[1] == {"state": "pruned"}
    with pytest.raises(ValueError):
        study.ask().suggest_float("z", 0, 1)


def test_an_exception_not_caught_tells_failed_and_is_raised(client, fake):
    study = client.create_study(SPACE)

    def objective(trial):
        raise ZeroDivisionError("boom")

    with pytest.raises(ZeroDivisionError):
        study.optimize(objective, n_trials=5, catch=ValueError)
    assert fake.tells() == [{"state": "failed"}]
    assert [t.state for t in study.trials] == ["failed"]


def test_invalid_returns_are_logged_failures(client, fake, caplog):
    study = client.create_study(SPACE, directions=["minimize", "minimize"])
    with caplog.at_level(logging.WARNING, logger="mercer_client"):
        study.optimize(lambda trial: 1.0, n_trials=2)
    assert fake.tells() == [{"state": "failed"}, {"state": "failed"}]
    assert "2 objectives" in caplog.text


def test_several_objectives_and_constraints(client, fake):
    study = client.create_study(SPACE, directions=["minimize", "maximize"], constraints={"c": 0.0})

    def objective(trial):
        x, y = trial.params["x"], trial.params["y"]
        trial.set_constraints({"c": x - 2.0})
        return x**2, y

    study.optimize(objective, n_trials=12)
    for body, trial in zip(fake.tells(), fake.studies[study.id]["trials"].values()):
        x, y = trial["values"]["x"], trial["values"]["y"]
        assert body == {"values": {"f0": x**2, "f1": y, "c": x - 2.0}}
    front = study.best_trials
    assert front and all(t.feasible and t.constraints["c"] <= 0 for t in front)
    for a, b in itertools.permutations(front, 2):
        assert not dominates(a.values, b.values, study.directions)
    for attribute in ("best_trial", "best_value", "best_params"):
        with pytest.raises(ValueError):  # and RuntimeError, as Optuna
            getattr(study, attribute)
        with pytest.raises(RuntimeError):
            getattr(study, attribute)
    with pytest.raises(NotImplementedError):
        study.ask().report(1.0, 0)
    assert study.hypervolume == 1.0


def test_constraints_returned_in_a_dict_with_a_named_single_objective(client, fake):
    study = client.create_study(SPACE, objective_names=["loss"], constraints=[{"name": "c1", "max": 1.0}])
    assert "objective_names" not in fake.requests[-1][2]
    study.optimize(lambda t: {"loss": t.params["x"] ** 2, "c1": t.params["y"]}, n_trials=8)
    trials = fake.studies[study.id]["trials"]
    assert fake.tells()[0] == {"value": trials[0]["values"]["x"] ** 2, "values": {"c1": trials[0]["values"]["y"]}}
    feasible = [t for t in study.trials if t.feasible]
    if feasible:
        assert study.best_trial.feasible and study.best_value == min(t.value for t in feasible)
    else:
        with pytest.raises(ValueError):
            study.best_trial


def test_ask_tell_and_warm_starts(client, fake):
    study = client.create_study(SPACE, direction="maximize")
    with pytest.raises(ValueError):
        study.best_trial  # nothing complete yet
    trial = study.ask()
    assert isinstance(trial, Trial) and set(trial.params) == {"x", "y"}
    told = study.tell(trial, 0.5)
    assert told.state == "complete" and told.value == 0.5
    with pytest.raises(MercerError) as error:
        study.tell(trial.number, 0.7)
    assert error.value.status == 409
    assert study.tell(study.ask(), state="fail").state == "failed"  # Optuna's TrialState.FAIL's name
    with pytest.raises(ValueError):
        study.tell(study.ask().number, 1.0, state="pruned")
    with pytest.raises(ValueError):
        study.tell(study.ask().number)
    warm = study.record({"x": 0.0, "y": 0.0}, 0.9)
    assert fake.requests[-1][2] == {"values": {"x": 0.0, "y": 0.0}, "value": 0.9}
    assert study.best_trial.number == warm.number
    study.delete()
    with pytest.raises(MercerError) as error:
        study.refresh()
    assert error.value.status == 404


def test_report_sends_step_and_value_and_keeps_the_advice(client, fake):
    fake.prune_when = lambda value: value > 1
    study = client.create_study(SPACE, pruner=MedianPruner())
    trial = study.ask()
    assert trial.should_prune() is False
    trial.report(np.float32(0.5), np.int64(0))
    assert fake.requests[-1][1:] == (f"/studies/{study.id}/trials/{trial.id}/reports", {"step": 0, "value": 0.5})
    assert trial.should_prune() is False
    trial.report(2.0, 1)
    assert trial.should_prune() is True
    with pytest.raises(ValueError):
        trial.report(float("nan"), 2)


def test_threads_timeout_and_stop(client, fake):
    study = client.create_study(SPACE)
    study.optimize(lambda t: t.params["x"], n_trials=9, n_jobs=3)
    assert len(study.trials) == 9 and all(t.state == "complete" for t in study.trials)

    study.optimize(lambda t: t.params["x"], timeout=0.0)  # no time: no trial
    assert len(study.trials) == 9

    def stop_at_12(s, frozen):
        if frozen.number == 11:
            s.stop()

    study.optimize(lambda t: t.params["x"], n_trials=100, callbacks=[stop_at_12])
    assert len(study.trials) == 12
    with pytest.raises(ValueError):
        study.optimize(lambda t: 0.0)


def test_a_pruner_with_several_objectives_is_the_servers_422(client):
    with pytest.raises(MercerError) as error:
        client.create_study(SPACE, directions=["minimize", "minimize"], pruner="median")
    assert error.value.status == 422 and error.value.pointers == ["/pruner"]


def test_show_progress_writes_a_line(client, capsys):
    study = client.create_study(SPACE)
    study.optimize(lambda t: t.params["x"] ** 2, n_trials=3, show_progress=True)
    err = capsys.readouterr().err
    assert "trials 3/3" in err and "best value" in err and math.isfinite(study.best_value)

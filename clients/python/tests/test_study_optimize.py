"""client.create_study against a real server (issue 53): Optuna's optimize loop with one
objective, several objectives (the Pareto front and its hypervolume), constraints,
the median pruner (reports, should_prune, TrialPruned), failed trials, ask and tell,
warm starts, and the definition's errors as MercerError."""

import itertools
import logging
import math

import pytest

from mercer_client import MercerError, MultiObjectiveError, TrialPruned
from mercer_client.study import dominates

SQUARE = {"x": {"uniform": [-5, 5]}, "y": {"uniform": [-5, 5]}}
UNIT = {"x": {"uniform": [0, 1]}, "y": {"uniform": [0, 1]}}


def hypervolume_2d(points, reference):
    """The area two minimised objectives' points dominate below the reference point."""
    inside = sorted(p for p in points if p[0] < reference[0] and p[1] < reference[1])
    area, floor = 0.0, reference[1]
    for a, b in inside:
        if b < floor:
            area += (reference[0] - a) * (floor - b)
            floor = b
    return area


def test_optimize_finds_a_quadratics_minimum(client):
    study = client.create_study(SQUARE, name="quadratic", seed=1)
    assert study.direction == "minimize" and study.objective_names == ["value"]
    assert study.constraints == {} and study.pruner == {"type": "none"}

    def objective(trial):
        return (trial.params["x"] - 1) ** 2 + (trial.params["y"] + 2) ** 2

    study.optimize(objective, n_trials=25)
    trials = study.trials
    assert len(trials) == 25 and all(t.state == "complete" for t in trials)
    assert [t.number for t in trials] == list(range(25))
    assert study.best_value < 0.2  # the minimum is 0 at (1, -2)
    assert study.best_value == min(t.value for t in trials)
    best = study.best_params
    assert abs(best["x"] - 1) < 0.5 and abs(best["y"] + 2) < 0.5
    assert study.best_trial.params == best
    assert [t.number for t in study.best_trials] == [study.best_trial.number]
    assert study.hypervolume is None

    loaded = client.load_study(study.id)
    assert loaded.best_value == study.best_value
    study.delete()
    with pytest.raises(MercerError) as e:
        client.load_study(study.id)
    assert e.value.status == 404


def test_several_objectives_give_a_pareto_front_and_its_hypervolume(client):
    reference = {"f0": 1.1, "f1": 2.2}
    study = client.create_study(UNIT, directions=["minimize", "minimize"], reference=reference, seed=3)
    assert study.objective_names == ["f0", "f1"] and study.directions == ["minimize", "minimize"]

    def zdt1(trial):  # the front is f1 = 1 - sqrt(f0), at y = 0
        x, y = trial.params["x"], trial.params["y"]
        return x, (1 + y) * (1 - math.sqrt(x))

    study.optimize(zdt1, n_trials=20)
    complete = [t for t in study.trials if t.state == "complete"]
    assert len(complete) == 20 and all(len(t.values) == 2 for t in complete)
    assert all(t.values == [t.results["f0"], t.results["f1"]] for t in complete)

    front = study.best_trials
    assert front
    for a, b in itertools.permutations(front, 2):
        assert not dominates(a.values, b.values, study.directions)
    # the front is exactly the complete trials no other complete trial dominates
    expected = {t.number for t in complete if not any(dominates(o.values, t.values, study.directions) for o in complete)}
    assert {t.number for t in front} == expected

    resource = study.refresh()
    assert resource["reference"] == reference and resource["reference_derived"] is False
    assert resource.get("best") is None and "direction" not in resource
    assert study.hypervolume > 0
    assert study.hypervolume == pytest.approx(hypervolume_2d([t.values for t in front], [1.1, 2.2]), rel=1e-9)

    for attribute in ("best_trial", "best_value", "best_params", "direction"):
        with pytest.raises(ValueError):
            getattr(study, attribute)
        with pytest.raises(MultiObjectiveError):
            getattr(study, attribute)
    with pytest.raises(NotImplementedError):  # no pruner with several objectives
        study.ask().report(1.0, 0)


def test_named_objectives_of_either_direction_returned_as_a_dict(client):
    study = client.create_study(UNIT, directions=["minimize", "maximize"], objective_names=["cost", "gain"])
    assert [o["name"] for o in study.resource["objectives"]] == ["cost", "gain"]
    study.optimize(lambda t: {"cost": t.params["x"] + t.params["y"], "gain": t.params["x"]}, n_trials=12)
    front = study.best_trials
    assert front and all(t.state == "complete" for t in front)
    for a, b in itertools.permutations(front, 2):
        assert not dominates(a.values, b.values, ["minimize", "maximize"])
    resource = study.refresh()
    assert resource["reference_derived"] is True and set(resource["reference"]) == {"cost", "gain"}
    assert study.hypervolume > 0  # a derived reference lies beyond every trial of the front


def test_the_best_trial_is_feasible(client):
    study = client.create_study({"x": {"uniform": [-2, 2]}, "y": {"uniform": [-2, 2]}}, constraints={"c1": 0.0},
                                seed=5)
    assert study.constraints == {"c1": 0.0}
    assert study.resource["constraints"] == [{"name": "c1", "max": 0.0}]

    def objective(trial):  # the unconstrained minimum (0, 0) is infeasible; the feasible one is (1, 0)
        x, y = trial.params["x"], trial.params["y"]
        return {"value": x**2 + y**2, "c1": 1.0 - x}

    study.optimize(objective, n_trials=20)
    complete = [t for t in study.trials if t.state == "complete"]
    assert all(t.feasible == (t.constraints["c1"] <= 0.0) for t in complete)
    assert any(not t.feasible for t in complete)
    best = study.best_trial
    assert best.feasible is True and best.constraints["c1"] <= 0.0 and best.params["x"] >= 1.0
    assert best.value == min(t.value for t in complete if t.feasible)


def test_constraints_with_several_objectives_keep_the_front_feasible(client):
    study = client.create_study(UNIT, directions=["minimize", "minimize"],
                                constraints=[{"name": "c", "max": 0.25}], seed=6)

    def objective(trial):
        x, y = trial.params["x"], trial.params["y"]
        trial.set_constraints({"c": 0.5 - y})  # feasible when y >= 0.25
        return x**2 + y, (x - 1) ** 2 + y

    study.optimize(objective, n_trials=15)
    complete = [t for t in study.trials if t.state == "complete"]
    assert all(t.feasible == (t.constraints["c"] <= 0.25) for t in complete)
    front = study.best_trials
    feasible = [t for t in complete if t.feasible]
    assert front and all(t.feasible for t in front) and {t.number for t in front} == {
        t.number for t in feasible if not any(dominates(o.values, t.values, study.directions) for o in feasible)
    }


def test_the_median_pruner_prunes_bad_trials(client):
    study = client.create_study({"x": {"uniform": [0, 1]}}, pruner="median", seed=7)
    assert study.pruner == {"type": "median", "startup_trials": 5, "warmup_steps": 0, "interval_steps": 1,
                            "min_trials": 1}
    bad = set()

    def objective(trial):
        if trial.number % 2 == 1:  # half the trials report a bad constant
            bad.add(trial.number)
        for step in range(4):
            trial.report(100.0 if trial.number in bad else 1.0, step)
            if trial.should_prune():
                raise TrialPruned()
        return trial.params["x"]

    study.optimize(objective, n_trials=16)
    trials = study.trials
    pruned = [t for t in trials if t.state == "pruned"]
    assert pruned  # trials 5, 7, ... once five trials are complete
    assert all(t.number in bad for t in pruned)
    assert all(t.state == "complete" for t in trials if t.number not in bad)
    for t in pruned:
        assert t.value == 100.0 and t.intermediate_values[t.last_step] == 100.0
    complete_good = [t for t in trials if t.state == "complete" and t.number not in bad]
    assert all(t.intermediate_values == {0: 1.0, 1: 1.0, 2: 1.0, 3: 1.0} for t in complete_good)
    assert study.refresh()["n_pruned"] == len(pruned)
    assert study.best_value == min(t.value for t in trials if t.state == "complete")


def test_reports_ask_tell_and_warm_starts(client):
    study = client.create_study(UNIT, pruner={"type": "median", "startup_trials": 1}, direction="maximize")
    assert study.pruner["startup_trials"] == 1 and study.pruner["type"] == "median"
    trial = study.ask()
    assert set(trial.params) == {"x", "y"} and trial.should_prune() is False
    trial.report(5.0, 0)
    trial.report(7.0, 0)  # the same step again keeps the first value
    trial.report(6.0, 1)
    told = study.tell(trial, state="pruned")
    assert told.state == "pruned" and told.value == 6.0 and told.intermediate_values == {0: 5.0, 1: 6.0}
    with pytest.raises(MercerError) as e:
        trial.report(1.0, 2)  # the trial is no longer pending
    assert e.value.status == 409
    with pytest.raises(MercerError) as e:
        study.tell(trial, 1.0)
    assert e.value.status == 409

    unreported = study.tell(study.ask(), state="pruned")
    assert unreported.state == "pruned" and unreported.value is None
    warm = study.record({"x": 0.5, "y": 0.5}, 3.0)
    assert warm.state == "complete" and study.best_trial.number == warm.number


def test_failed_trials_with_catch(client, caplog):
    study = client.create_study(SQUARE, seed=8)

    def objective(trial):
        if trial.number % 3 == 0:
            raise ValueError("diverged")
        if trial.number == 4:
            return float("nan")  # not a finite number: failed, as Optuna
        return trial.params["x"] ** 2

    with caplog.at_level(logging.WARNING, logger="mercer_client"):
        study.optimize(objective, n_trials=6, catch=(ValueError,))
    states = [t.state for t in study.trials]
    assert states == ["failed", "complete", "complete", "failed", "failed", "complete"]
    assert "diverged" in caplog.text

    def broken(trial):
        raise RuntimeError("not caught")

    with pytest.raises(RuntimeError):
        study.optimize(broken, n_trials=3, catch=(ValueError,))
    trials = study.trials
    assert len(trials) == 7 and trials[-1].state == "failed"  # told failed before it was raised


def test_the_definitions_errors_are_422_at_their_pointer(client):
    with pytest.raises(MercerError) as e:
        client.create_study(UNIT, directions=["minimize", "minimize"], pruner="median")
    assert e.value.status == 422 and e.value.pointers == ["/pruner"]
    with pytest.raises(MercerError) as e:
        client.create_study(UNIT, constraints=[{"name": "c", "max": 0.0}, {"name": "c", "max": 1.0}])
    assert e.value.status == 422 and e.value.pointers == ["/constraints/1/name"]
    with pytest.raises(MercerError) as e:
        client.create_study(UNIT, directions=["minimize", "minimize"], reference={"f0": 1.0, "nope": 1.0})
    assert e.value.status == 422 and e.value.pointers == ["/reference/nope"]
    with pytest.raises(MercerError) as e:
        client.create_study(UNIT, reference={"value": 1.0})
    assert e.value.status == 422 and e.value.pointers == ["/reference"]
    with pytest.raises(ValueError):  # not sent
        client.create_study(UNIT, direction="minimize", directions=["minimize", "maximize"])

    study = client.create_study(UNIT, constraints={"c1": 0.0})
    trial = study.ask()
    with pytest.raises(MercerError) as e:  # a constraint without a value, through the dict API
        client.studies.tell(study.id, trial.number, 1.0)
    assert e.value.status == 422 and e.value.pointers[0] in ("/values", "/values/c1")
    with pytest.raises(MercerError) as e:
        client.studies.tell(study.id, trial.number, 1.0, values={"c1": 0.0, "c9": 0.0})
    assert e.value.status == 422 and e.value.pointers == ["/values/c9"]
    assert study.tell(trial, {"value": 1.0, "c1": -1.0}).feasible is True

"""Studies with Optuna's API: :meth:`Client.create_study` returns a :class:`Study`, whose
``optimize`` asks the server for trials, calls the objective with each :class:`Trial`
and tells the server what it returned, so that the user writes no HTTP.

The server suggests every setting (``trial.params`` holds it); the study's space is
given once, when the study is created. One objective or several (2 to 4), constraints
(a trial is feasible when each of its constraint values is at most the constraint's
``max``), and a pruner that answers each intermediate report of a single-objective
trial with whether to stop it early (:class:`TrialPruned`).
"""

from __future__ import annotations

import logging
import math
import numbers
import os
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional, Union

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from .client import Client

_logger = logging.getLogger("mercer_client")

#: The name of a single-objective study's objective, in a dict an objective returns,
#: unless ``objective_names`` gives another.
SINGLE_OBJECTIVE_NAME = "value"

#: The states a trial is told into.
_TOLD_STATES = ("complete", "failed", "pruned")


class TrialPruned(Exception):
    """Raised by an objective to stop its trial early (as ``optuna.TrialPruned``):
    :meth:`Study.optimize` then tells the trial ``{"state": "pruned"}``, its value being
    its last report, and goes on with the next trial.

    ::

        trial.report(loss, step)
        if trial.should_prune():
            raise TrialPruned()
    """


class MultiObjectiveError(RuntimeError, ValueError):
    """What is asked of a study with several objectives has one answer only for a
    single objective (``best_trial``, ``best_value``, ``best_params``, ``direction``).
    Optuna raises ``RuntimeError`` there; this is both a ``RuntimeError`` and a
    ``ValueError``. Use :attr:`Study.best_trials` (the Pareto front) instead."""


# ---------------------------------------------------------------- pruners


class MedianPruner:
    """The median pruner with Optuna's parameter names (``optuna.pruners.MedianPruner``):
    a trial is pruned at a step when its best report so far is worse than the median of
    the complete trials' reports at that step. Sent as ``{"type": "median",
    "startup_trials", "warmup_steps", "interval_steps", "min_trials"}``.

    Args:
        n_startup_trials: no pruning until this many trials are complete.
        n_warmup_steps: no pruning before this step of a trial.
        interval_steps: pruning is considered every this many steps.
        n_min_trials: the fewest trials reporting at a step for the median to count.
    """

    def __init__(self, n_startup_trials: int = 5, n_warmup_steps: int = 0, interval_steps: int = 1, *,
                 n_min_trials: int = 1):
        self.n_startup_trials = n_startup_trials
        self.n_warmup_steps = n_warmup_steps
        self.interval_steps = interval_steps
        self.n_min_trials = n_min_trials

    def to_json(self) -> dict:
        """The pruner as the server takes it (the study's ``pruner``)."""
        return {
            "type": "median",
            "startup_trials": self.n_startup_trials,
            "warmup_steps": self.n_warmup_steps,
            "interval_steps": self.interval_steps,
            "min_trials": self.n_min_trials,
        }

    def __repr__(self) -> str:
        return f"MedianPruner({self.to_json()})"


class SuccessiveHalvingPruner:
    """Asynchronous successive halving with Optuna's parameter names
    (``optuna.pruners.SuccessiveHalvingPruner``). Sent as ``{"type": "halving",
    "min_resource", "reduction_factor", "min_early_stopping_rate"}``.

    Args:
        min_resource: the steps a trial runs before its first rung, or ``"auto"``
            (estimated from the first complete trials).
        reduction_factor: the fraction ``1 / reduction_factor`` of trials promoted at
            each rung.
        min_early_stopping_rate: rungs skipped at the start.
    """

    def __init__(self, min_resource: Union[str, int] = "auto", reduction_factor: int = 4,
                 min_early_stopping_rate: int = 0):
        self.min_resource = min_resource
        self.reduction_factor = reduction_factor
        self.min_early_stopping_rate = min_early_stopping_rate

    def to_json(self) -> dict:
        """The pruner as the server takes it (the study's ``pruner``)."""
        return {
            "type": "halving",
            "min_resource": self.min_resource,
            "reduction_factor": self.reduction_factor,
            "min_early_stopping_rate": self.min_early_stopping_rate,
        }

    def __repr__(self) -> str:
        return f"SuccessiveHalvingPruner({self.to_json()})"


class NopPruner:
    """No pruning (``optuna.pruners.NopPruner``): sent as ``"none"``."""

    def to_json(self) -> str:
        """The pruner as the server takes it."""
        return "none"

    def __repr__(self) -> str:
        return "NopPruner()"


# ---------------------------------------------------------------- request bodies (pure)


def _direction_name(direction: Any) -> Any:
    """A direction as sent: a string as given; an enum such as Optuna's
    ``StudyDirection.MINIMIZE`` by its name, lower-cased."""
    if isinstance(direction, str):
        return direction
    name = getattr(direction, "name", None)
    if isinstance(name, str):
        return name.lower()
    return direction


def _objective_names(count: int, objective_names: Any) -> list:
    """The objectives' names: ``objective_names`` (one name per direction), else
    ``"value"`` for one objective and ``"f0"``, ``"f1"``, ... for several."""
    if objective_names is None:
        return [SINGLE_OBJECTIVE_NAME] if count == 1 else [f"f{i}" for i in range(count)]
    names = [objective_names] if isinstance(objective_names, str) else list(objective_names)
    if len(names) != count:
        raise ValueError(f"{len(names)} objective_names for {count} direction(s)")
    return names


def _reference_json(reference: Any, names: list, multi: bool) -> Any:
    """``reference`` as sent: a dict as given; a sequence in the objectives' order."""
    if isinstance(reference, Mapping):
        return dict(reference)
    if not multi:
        raise ValueError("a reference point is for a study with several objectives")
    point = list(reference)
    if len(point) != len(names):
        raise ValueError(f"a reference point of {len(point)} numbers for {len(names)} objectives")
    return dict(zip(names, point))


def _constraints_json(constraints: Any) -> list:
    """``constraints`` as sent, a list of ``{"name", "max"}``: from a dict name -> max,
    or a list whose items are such dicts, ``(name, max)`` pairs or names (max 0, as
    Optuna's constraints are ``<= 0``)."""
    if isinstance(constraints, Mapping):
        return [{"name": name, "max": bound} for name, bound in constraints.items()]
    if isinstance(constraints, str):
        raise TypeError("constraints is a dict name -> max or a list, not a string")
    out = []
    for item in constraints:
        if isinstance(item, str):
            out.append({"name": item, "max": 0.0})
        elif isinstance(item, Mapping):
            out.append(dict(item))
        else:
            name, bound = item
            out.append({"name": name, "max": bound})
    return out


def _pruner_json(pruner: Any) -> Any:
    """``pruner`` as sent: ``"none"``, ``"median"``, ``"halving"``, a dict (with its
    ``type``), or a :class:`MedianPruner` / :class:`SuccessiveHalvingPruner` /
    :class:`NopPruner`."""
    if isinstance(pruner, (str, Mapping)):
        return dict(pruner) if isinstance(pruner, Mapping) else pruner
    if hasattr(pruner, "to_json"):
        return pruner.to_json()
    raise TypeError(f"a pruner is a name, a dict or a MedianPruner/SuccessiveHalvingPruner, not {pruner!r}")


def study_body(
    space: dict,
    *,
    name: Optional[str] = None,
    direction: Any = None,
    directions: Optional[Iterable] = None,
    objective_names: Any = None,
    reference: Any = None,
    constraints: Any = None,
    pruner: Any = None,
    seed: int = 0,
    initial: Optional[int] = None,
) -> dict:
    """The body of ``POST /studies`` for :meth:`Client.create_study`'s arguments.

    One direction (``direction``, or ``directions`` of one) is a single-objective study
    (``"direction"``); several make ``"objectives"``, named by ``objective_names`` or
    ``"f0"``, ``"f1"``, .... Raises ``ValueError`` for what cannot be sent (both
    ``direction`` and ``directions``, names not matching the directions, a reference
    point as a sequence of the wrong length); the server checks the rest (422)."""
    if directions is not None:
        if direction is not None:
            raise ValueError("give direction or directions, not both")
        if isinstance(directions, str):
            raise TypeError("directions is a list, e.g. ['minimize', 'maximize']; one direction is direction=")
        directions = [_direction_name(d) for d in directions]
        if not directions:
            raise ValueError("directions is empty")
    else:
        directions = [_direction_name(direction if direction is not None else "minimize")]
    names = _objective_names(len(directions), objective_names)
    multi = len(directions) > 1
    body: dict = {"space": space}
    if name is not None:
        body["name"] = name
    if multi:
        body["objectives"] = [{"name": n, "direction": d} for n, d in zip(names, directions)]
    else:
        body["direction"] = directions[0]
    if reference is not None:
        body["reference"] = _reference_json(reference, names, multi)
    if constraints is not None:
        body["constraints"] = _constraints_json(constraints)
        if not multi:  # the objective's name is the client's: the server cannot see a clash
            clash = [c.get("name") for c in body["constraints"] if c.get("name") == names[0]]
            if clash:
                raise ValueError(f"{names[0]!r} names both the objective and a constraint")
    if pruner is not None:
        body["pruner"] = _pruner_json(pruner)
    body["seed"] = seed
    if initial is not None:
        body["initial"] = initial
    return body


class StudyShape:
    """What a study's tells look like: its objectives' names and directions (one
    objective: named ``"value"`` unless the study was given another name, a name known
    to the client only) and its constraints' names and bounds."""

    def __init__(self, names: list, directions: list, multi: bool, constraints: Optional[dict] = None):
        self.names = list(names)
        self.directions = list(directions)
        self.multi = multi
        #: constraint name -> max, in the study's order
        self.constraints = dict(constraints or {})
        clash = set(self.names) & set(self.constraints)
        if clash:
            raise ValueError(f"{sorted(clash)} name both an objective and a constraint")

    @classmethod
    def of(cls, resource: dict, objective_name: Optional[str] = None) -> "StudyShape":
        """The shape of a study resource (``objectives`` for several objectives, else
        ``direction``; ``constraints``, absent from servers before issue 53)."""
        constraints = {c["name"]: c.get("max", 0.0) for c in resource.get("constraints") or []}
        objectives = resource.get("objectives")
        if objectives:
            return cls([o["name"] for o in objectives], [o["direction"] for o in objectives], True, constraints)
        name = objective_name if objective_name is not None else SINGLE_OBJECTIVE_NAME
        return cls([name], [resource.get("direction", "minimize")], False, constraints)

    def __repr__(self) -> str:
        return f"StudyShape(names={self.names}, directions={self.directions}, constraints={self.constraints})"


def _is_number(value: Any) -> bool:
    if isinstance(value, numbers.Real):
        return True
    return getattr(value, "ndim", None) == 0 and hasattr(value, "__float__")  # numpy / torch 0-d


def _is_sequence(value: Any) -> bool:
    if isinstance(value, (str, bytes)):
        return False
    if isinstance(value, np.ndarray):
        return value.ndim == 1
    return isinstance(value, Sequence)


def _finite(value: Any, what: str) -> float:
    """``value`` as a finite float; ``TypeError`` / ``ValueError`` saying which
    ``what`` it was."""
    if isinstance(value, (str, bytes)) or not (_is_number(value) or hasattr(value, "__float__")):
        raise TypeError(f"{what} is {value!r}, not a number")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{what} is {value!r}, not a number") from None
    if not math.isfinite(number):
        raise ValueError(f"{what} is {number}, not a finite number")
    return number


def constraint_values(values: Any, shape: StudyShape) -> dict:
    """:meth:`Trial.set_constraints`'s argument as name -> float: a dict of constraint
    names, or a sequence in the study's constraint order."""
    names = list(shape.constraints)
    if isinstance(values, Mapping):
        unknown = [k for k in values if k not in shape.constraints]
        if unknown:
            raise ValueError(f"{unknown} are not constraints of the study ({names})")
        return {k: _finite(v, f"constraint {k!r}") for k, v in values.items()}
    if not _is_sequence(values):
        raise TypeError("constraints are a dict name -> value or a sequence in the study's constraint order")
    values = list(values)
    if len(values) != len(names):
        raise ValueError(f"{len(values)} constraint values for {len(names)} constraints ({names})")
    return {n: _finite(v, f"constraint {n!r}") for n, v in zip(names, values)}


def tell_body(returned: Any, shape: StudyShape, constraints: Optional[dict] = None) -> dict:
    """The body of a complete trial's tell (``POST /studies/{id}/trials/{tid}``) for
    what an objective returned:

    - a number: the single objective's value -> ``{"value": v}``;
    - a sequence: one number per objective, in order (one objective: a sequence of one);
    - a dict: objective and constraint names -> numbers (every objective named).

    ``constraints`` (name -> float, from :meth:`Trial.set_constraints`) adds constraint
    values. Every constraint of the study must have a value. A single objective with
    constraints is ``{"value": v, "values": {c: ...}}``; several objectives are
    ``{"values": {f: ..., c: ...}}``. Raises ``TypeError`` / ``ValueError`` for a
    return that does not fit the study (``None``, a string, the wrong count, an unknown
    name, a number that is not finite, a constraint with no value)."""
    given: dict = {}
    bounds: dict = {}
    if isinstance(returned, Mapping):
        for key, value in returned.items():
            if key in shape.names:
                given[key] = _finite(value, f"objective {key!r}")
            elif key in shape.constraints:
                bounds[key] = _finite(value, f"constraint {key!r}")
            else:
                raise ValueError(
                    f"{key!r} is neither an objective ({shape.names}) nor a constraint ({list(shape.constraints)})"
                )
        missing = [n for n in shape.names if n not in given]
        if missing:
            raise ValueError(f"the returned dict has no value for the objective(s) {missing}")
    elif _is_number(returned):
        if shape.multi:
            raise ValueError(
                f"one number returned for {len(shape.names)} objectives {shape.names}: return a sequence or a dict"
            )
        given[shape.names[0]] = _finite(returned, "the objective's value")
    elif _is_sequence(returned):
        items = list(returned)
        if len(items) != len(shape.names):
            raise ValueError(
                f"{len(items)} values returned for {len(shape.names)} objective(s) {shape.names}"
            )
        for name, value in zip(shape.names, items):
            given[name] = _finite(value, f"objective {name!r}")
    else:
        raise TypeError(
            f"an objective returns a number, a sequence of numbers or a dict, not {type(returned).__name__}"
        )
    for name, value in (constraints or {}).items():
        if name in bounds:
            raise ValueError(f"constraint {name!r} is both returned and set with trial.set_constraints")
        bounds[name] = value
    missing = [c for c in shape.constraints if c not in bounds]
    if missing:
        raise ValueError(
            f"no value for the constraint(s) {missing}: return them in a dict or call trial.set_constraints"
        )
    told_constraints = {c: bounds[c] for c in shape.constraints}
    if shape.multi:
        return {"values": {**{n: given[n] for n in shape.names}, **told_constraints}}
    body = {"value": given[shape.names[0]]}
    if told_constraints:
        body["values"] = told_constraints
    return body


def record_body(params: dict, returned: Any, shape: StudyShape) -> dict:
    """The body of a warm start (``POST /studies/{id}/trials``): ``{"values": params,
    "value": v}`` for one objective (plus ``"results"`` holding the constraints), or
    ``{"values": params, "results": {objectives and constraints}}``. ``returned`` is read
    as by :func:`tell_body`."""
    told = tell_body(returned, shape)
    if shape.multi:
        return {"values": params, "results": told["values"]}
    body = {"values": params, "value": told["value"]}
    if "values" in told:
        body["results"] = told["values"]
    return body


def _state_name(state: Any) -> Optional[str]:
    """A state to tell as the server names it: ``"complete"``, ``"failed"``,
    ``"pruned"``; also Optuna's ``TrialState.COMPLETE`` / ``FAIL`` / ``PRUNED``."""
    if state is None:
        return None
    name = state if isinstance(state, str) else getattr(state, "name", state)
    if not isinstance(name, str):
        raise TypeError(f"a state is 'complete', 'failed' or 'pruned', not {state!r}")
    name = {"fail": "failed"}.get(name.lower(), name.lower())
    if name not in _TOLD_STATES:
        raise ValueError(f"a trial is told 'complete', 'failed' or 'pruned', not {state!r}")
    return name


def _state_filter(state: Any) -> str:
    """A state to filter trials by, as the server names it (Optuna's ``TrialState``
    members too: ``RUNNING`` is ``"pending"``, ``FAIL`` ``"failed"``)."""
    name = state if isinstance(state, str) else getattr(state, "name", str(state))
    name = name.lower()
    return {"fail": "failed", "running": "pending", "waiting": "pending"}.get(name, name)


def _is_pruned(error: BaseException) -> bool:
    """Whether ``error`` stops its trial early: a :class:`TrialPruned`, or a class of
    that name (``optuna.TrialPruned`` raised by an objective written for Optuna)."""
    return isinstance(error, TrialPruned) or any(c.__name__ == "TrialPruned" for c in type(error).__mro__)


def dominates(a: Sequence, b: Sequence, directions: Sequence) -> bool:
    """Whether objective values ``a`` dominate ``b``: no worse in every objective and
    better in one, each objective minimised or maximised as ``directions`` says."""
    signs = [1.0 if d == "minimize" else -1.0 for d in directions]
    no_worse = all(s * x <= s * y for s, x, y in zip(signs, a, b))
    better = any(s * x < s * y for s, x, y in zip(signs, a, b))
    return no_worse and better


# ---------------------------------------------------------------- trials


class FrozenTrial:
    """A trial as the server holds it (Optuna's ``FrozenTrial``), read-only.

    Attributes:
        number, id: the trial's id in its study (0, 1, ...).
        params: the setting evaluated (the trial resource's ``values``).
        state: ``"pending"``, ``"complete"``, ``"failed"`` or ``"pruned"``.
        value: a single-objective trial's value (complete; or pruned: its last
            report), else ``None`` (always ``None`` with several objectives).
        values: the objectives' values in the study's order (``[value]`` for one
            objective), or ``None``.
        results: every told objective and constraint value, name -> number.
        constraints: the constraints' values, name -> number.
        feasible: whether every constraint value is within its max (``None`` when the
            study has no constraints or the trial is not complete).
        intermediate_values: the reports, step -> value.
        created_at: when the trial was suggested or recorded.
        resource: the trial resource (a dict) as answered.
    """

    def __init__(self, resource: dict, shape: StudyShape):
        self.resource = resource
        self.id = self.number = resource["id"]
        self.params = dict(resource.get("values") or {})
        self.state = resource.get("state")
        self.created_at = resource.get("created_at")
        self.results = dict(resource.get("results") or {})
        if shape.multi:
            self.value = None
            complete = all(n in self.results for n in shape.names)
            self.values = [self.results[n] for n in shape.names] if complete else None
        else:
            self.value = resource.get("value")
            self.values = None if self.value is None else [self.value]
        self.constraints = {c: self.results[c] for c in shape.constraints if c in self.results}
        self.feasible = resource.get("feasible")
        self.intermediate_values = {int(r["step"]): r["value"] for r in resource.get("reports") or []}

    @property
    def last_step(self) -> Optional[int]:
        """The last step reported, or ``None``."""
        return max(self.intermediate_values) if self.intermediate_values else None

    def __repr__(self) -> str:
        shown = f"value={self.value!r}" if self.values is None or len(self.values) == 1 else f"values={self.values!r}"
        return f"FrozenTrial(number={self.number}, state={self.state!r}, {shown}, params={self.params!r})"


class Trial:
    """A pending trial handed to the objective (Optuna's ``Trial``).

    ``params`` is the setting the server suggested (the study's space was given when
    it was created); ``report`` and ``should_prune`` drive the study's pruner;
    ``set_constraints`` gives the constraints' values (or return them in a dict).

    Attributes:
        number, id: the trial's id in its study.
        params: the setting to evaluate, name -> value.
        study: the :class:`Study`.
        created_at: when it was suggested.
    """

    def __init__(self, study: "Study", resource: dict):
        self.study = study
        self.resource = resource
        self.id = self.number = resource["id"]
        self.params = dict(resource.get("values") or {})
        self.created_at = resource.get("created_at")
        self._prune = False
        self._constraints: Optional[dict] = None

    def report(self, value: float, step: int) -> None:
        """``POST /studies/{id}/trials/{tid}/reports`` ``{"step", "value"}``: an
        intermediate value at ``step`` (an int >= 0). The pruner's answer is kept for
        :meth:`should_prune`. Reporting a step again keeps the first value (as Optuna).
        A study with several objectives has no pruner: ``NotImplementedError`` (as
        Optuna)."""
        if self.study._shape.multi:
            raise NotImplementedError("Trial.report is for single-objective studies (several objectives: no pruner)")
        answer = self.study._client.studies.report(
            self.study.id, self.id, _finite(value, "a reported value"), _step(step)
        )
        self._prune = bool(answer.get("prune", False))

    def should_prune(self) -> bool:
        """Whether the pruner advised, at the last :meth:`report`, to stop this trial
        (``False`` before any report). Raise :class:`TrialPruned` then."""
        if self.study._shape.multi:
            raise NotImplementedError("Trial.should_prune is for single-objective studies")
        return self._prune

    def set_constraints(self, values: Any) -> None:
        """The trial's constraint values, told with its objective values: a dict
        constraint name -> number, or a sequence in the study's constraint order. A
        constraint is satisfied when its value is at most its max."""
        self._constraints = constraint_values(values, self.study._shape)

    @property
    def constraints(self) -> Optional[dict]:
        """The constraint values set with :meth:`set_constraints`, or ``None``."""
        return None if self._constraints is None else dict(self._constraints)

    def _param(self, name: str) -> Any:
        if name not in self.params:
            raise ValueError(
                f"{name!r} is not in the study's space ({sorted(self.params)}): the space is given to create_study"
            )
        return self.params[name]

    def suggest_float(self, name: str, low: Any = None, high: Any = None, *, step: Any = None, log: bool = False):
        """The suggested value of ``name`` (Optuna's signature, so an objective
        written for Optuna runs unchanged; the range is the study's, not these
        arguments)."""
        return self._param(name)

    def suggest_int(self, name: str, low: Any = None, high: Any = None, *, step: Any = None, log: bool = False):
        """The suggested value of ``name`` (see :meth:`suggest_float`)."""
        return self._param(name)

    def suggest_categorical(self, name: str, choices: Any = None):
        """The suggested value of ``name`` (see :meth:`suggest_float`)."""
        return self._param(name)

    def __repr__(self) -> str:
        return f"Trial(number={self.number}, params={self.params!r})"


def _step(step: Any) -> Any:
    """A step as sent: an integer (numpy integers too); anything else as given, for the
    server to refuse (400: a step is an integer >= 0)."""
    if isinstance(step, numbers.Integral) and not isinstance(step, bool):
        return int(step)
    return step


# ---------------------------------------------------------------- the study


class Study:
    """A study on the server (Optuna's ``Study``): from :meth:`Client.create_study` or
    :meth:`Client.load_study`.

    The definition (``id``, ``name``, ``directions``, ``objective_names``,
    ``constraints``, ``pruner``) is read once; ``trials``, ``best_*``, ``reference``
    and ``hypervolume`` are fetched (``GET /studies/{id}``) each time they are read.
    """

    def __init__(self, client: "Client", resource: dict, *, objective_name: Optional[str] = None):
        self._client = client
        self._resource = resource
        self.id = resource["id"]
        self._shape = StudyShape.of(resource, objective_name)
        self._stop = threading.Event()

    # -- the definition

    @property
    def name(self) -> Optional[str]:
        """The study's name."""
        return self._resource.get("name")

    @property
    def space(self) -> dict:
        """The study's space."""
        return self._resource.get("space")

    @property
    def resource(self) -> dict:
        """The study resource as last fetched (see :meth:`refresh`)."""
        return self._resource

    @property
    def directions(self) -> list:
        """The objectives' directions, ``"minimize"`` or ``"maximize"``, in order."""
        return list(self._shape.directions)

    @property
    def direction(self) -> str:
        """A single-objective study's direction (:class:`MultiObjectiveError` with
        several, as Optuna)."""
        self._single("direction", "directions")
        return self._shape.directions[0]

    @property
    def objective_names(self) -> list:
        """The objectives' names, in order: the names of a dict the objective returns
        (one objective: ``["value"]`` unless another name was given)."""
        return list(self._shape.names)

    @property
    def is_multi_objective(self) -> bool:
        """Whether the study has several objectives."""
        return self._shape.multi

    @property
    def constraints(self) -> dict:
        """The constraints, name -> max (feasible when each value is <= its max)."""
        return dict(self._shape.constraints)

    @property
    def pruner(self) -> Optional[dict]:
        """The pruner with every setting filled in (``{"type": "none"}`` when none;
        ``None`` from a server without pruners)."""
        return self._resource.get("pruner")

    # -- fetched

    def refresh(self) -> dict:
        """``GET /studies/{id}``: fetches the study resource (its trials, ``best``,
        ``pareto``, ``hypervolume``, ...) and returns it."""
        self._resource = self._client.studies.get(self.id)
        return self._resource

    @property
    def trials(self) -> list:
        """Every trial, in id order, as :class:`FrozenTrial` (fetched)."""
        return self.get_trials()

    def get_trials(self, states: Optional[Iterable] = None) -> list:
        """The trials (fetched) whose state is in ``states`` (``"pending"``,
        ``"complete"``, ``"failed"``, ``"pruned"``; all when ``None``)."""
        wanted = None if states is None else {_state_filter(s) for s in states}
        trials = [FrozenTrial(t, self._shape) for t in self.refresh().get("trials") or []]
        return trials if wanted is None else [t for t in trials if t.state in wanted]

    @property
    def best_trial(self) -> FrozenTrial:
        """The best complete trial, feasible when the study has constraints (the
        server's ``best``). ``ValueError`` when there is none yet;
        :class:`MultiObjectiveError` for several objectives (see :attr:`best_trials`)."""
        self._single("best_trial", "best_trials")
        best = self.refresh().get("best")
        if best is None:
            feasible = " feasible" if self._shape.constraints else ""
            raise ValueError(f"no{feasible} trials are complete yet")
        return FrozenTrial(best, self._shape)

    @property
    def best_params(self) -> dict:
        """The best trial's setting (see :attr:`best_trial`)."""
        return self.best_trial.params

    @property
    def best_value(self) -> float:
        """The best trial's value (see :attr:`best_trial`)."""
        return self.best_trial.value

    @property
    def best_trials(self) -> list:
        """The Pareto front: the complete feasible trials no other such trial
        dominates (the server's ``pareto``). One objective: ``[best_trial]``, or ``[]``."""
        resource = self.refresh()
        if self._shape.multi:
            return [FrozenTrial(t, self._shape) for t in resource.get("pareto") or []]
        best = resource.get("best")
        return [] if best is None else [FrozenTrial(best, self._shape)]

    @property
    def hypervolume(self) -> Optional[float]:
        """The hypervolume of the Pareto front with respect to :attr:`reference`
        (several objectives; ``None`` for one)."""
        return self.refresh().get("hypervolume")

    @property
    def reference(self) -> Optional[dict]:
        """The hypervolume's reference point, name -> number: as given, or derived by
        the server (``resource["reference_derived"]``). ``None`` for one objective."""
        return self.refresh().get("reference")

    # -- ask and tell

    def ask(self) -> Trial:
        """``POST /studies/{id}/suggest`` ``{"count": 1}``: a new pending trial."""
        return Trial(self, self._client.studies.ask(self.id))

    def tell(self, trial: Any, values: Any = None, state: Any = None) -> FrozenTrial:
        """``POST /studies/{id}/trials/{tid}``: tells a trial (a :class:`Trial`, or
        its number) and returns it as the server now holds it.

        ``values`` is what the objective returned (a number, a sequence in the
        objectives' order, or a dict of objective and constraint names, as
        :func:`tell_body` reads it; a :class:`Trial`'s :meth:`Trial.set_constraints`
        values are added). ``state`` is ``"complete"`` (the default with values),
        ``"failed"`` or ``"pruned"`` (without values: a pruned trial's value is its
        last report); Optuna's ``TrialState`` members work too. A trial is told once
        (409 after)."""
        state = _state_name(state)
        trial_id = trial.id if isinstance(trial, (Trial, FrozenTrial)) else trial
        if state in ("failed", "pruned"):
            if values is not None:
                raise ValueError(f"a {state} trial is told without values")
            answer = self._client.studies.tell(self.id, trial_id, state=state)
        else:
            if values is None:
                raise ValueError("tell values, or state='failed' or 'pruned'")
            set_constraints = trial._constraints if isinstance(trial, Trial) else None
            body = tell_body(values, self._shape, set_constraints)
            answer = self._client.studies.tell(self.id, trial_id, body.get("value"), values=body.get("values"))
        return FrozenTrial(answer, self._shape)

    def record(self, params: dict, values: Any) -> FrozenTrial:
        """``POST /studies/{id}/trials``: an evaluation the study did not suggest (a
        warm start), complete; ``values`` as in :meth:`tell`."""
        body = record_body(params, values, self._shape)
        answer = self._client.studies.record(self.id, body["values"], body.get("value"), results=body.get("results"))
        return FrozenTrial(answer, self._shape)

    # -- the loop

    def optimize(
        self,
        func: Callable[[Trial], Any],
        n_trials: Optional[int] = None,
        timeout: Optional[float] = None,
        n_jobs: int = 1,
        catch: Any = (),
        callbacks: Optional[Iterable[Callable[["Study", FrozenTrial], None]]] = None,
        show_progress: bool = False,
        *,
        show_progress_bar: Optional[bool] = None,
    ) -> None:
        """Runs ``n_trials`` trials (or as many as fit in ``timeout`` seconds):
        each asks the server for a setting, calls ``func(trial)`` and tells what it
        returned (as Optuna's ``Study.optimize``).

        - ``func`` returns a number (one objective), a sequence (several objectives,
          in order) or a dict name -> number (objectives and constraints); constraints
          may also be given with :meth:`Trial.set_constraints`. A return that does
          not fit the study (``None``, NaN, the wrong count, ...) tells the trial
          failed, with a warning logged, and the loop goes on (as Optuna).
        - :class:`TrialPruned` raised by ``func`` tells ``{"state": "pruned"}``.
        - An exception of a type in ``catch`` (a class or a tuple) tells
          ``{"state": "failed"}`` (logged) and the loop goes on; any other tells
          failed and is raised.
        - ``callbacks``: each is called as ``callback(study, frozen_trial)`` after a
          trial is told. :meth:`stop` ends the loop after the running trials.
        - ``n_jobs`` threads ask and tell at once (the server keeps their pending
          trials apart); ``-1``: one per CPU.
        - ``show_progress`` (or Optuna's ``show_progress_bar``): a line on stderr
          after each trial.
        """
        if n_trials is None and timeout is None:
            raise ValueError("give n_trials or timeout")
        catch = (catch,) if isinstance(catch, type) else tuple(catch)
        callbacks = list(callbacks or [])
        if n_jobs == -1:
            n_jobs = os.cpu_count() or 1
        if not isinstance(n_jobs, int) or n_jobs < 1:
            raise ValueError(f"n_jobs is a positive int or -1, not {n_jobs!r}")
        show = show_progress if show_progress_bar is None else show_progress_bar
        progress = _Progress(n_trials, timeout, self._shape) if show else None
        deadline = None if timeout is None else time.monotonic() + timeout
        lock = threading.Lock()
        started = 0
        self._stop.clear()

        def claim() -> bool:
            nonlocal started
            with lock:
                if self._stop.is_set() or (n_trials is not None and started >= n_trials):
                    return False
                if deadline is not None and time.monotonic() >= deadline:
                    return False
                started += 1
                return True

        def worker() -> None:
            try:
                while claim():
                    frozen = self._run_trial(func, catch)
                    if progress is not None:
                        with lock:
                            progress.update(frozen)
                    for callback in callbacks:
                        callback(self, frozen)
            except BaseException:
                self._stop.set()
                raise

        try:
            if n_jobs == 1:
                worker()
            else:
                with ThreadPoolExecutor(max_workers=n_jobs) as pool:
                    futures = [pool.submit(worker) for _ in range(n_jobs)]
                for future in futures:
                    future.result()
        finally:
            if progress is not None:
                progress.close()

    def _run_trial(self, func: Callable[[Trial], Any], catch: tuple) -> FrozenTrial:
        """One trial of :meth:`optimize`: ask, evaluate, tell."""
        trial = self.ask()
        try:
            returned = func(trial)
        except BaseException as error:  # noqa: B902 (KeyboardInterrupt too: told failed, raised)
            if _is_pruned(error):
                return self.tell(trial, state="pruned")
            if isinstance(error, catch):
                _logger.warning("Trial %s failed with parameters %s: %r", trial.number, trial.params, error)
                return self.tell(trial, state="failed")
            try:
                self.tell(trial, state="failed")
            except Exception:  # the error raised is the objective's
                _logger.warning("Trial %s: telling it failed did not succeed", trial.number, exc_info=True)
            raise
        try:
            body = tell_body(returned, self._shape, trial._constraints)
        except (TypeError, ValueError) as error:
            _logger.warning("Trial %s failed: %s (returned %r)", trial.number, error, returned)
            return self.tell(trial, state="failed")
        answer = self._client.studies.tell(self.id, trial.id, body.get("value"), values=body.get("values"))
        return FrozenTrial(answer, self._shape)

    def stop(self) -> None:
        """Ends a running :meth:`optimize` once the trials under way are told (from a
        callback, or another thread), as Optuna's ``Study.stop``."""
        self._stop.set()

    def delete(self) -> None:
        """``DELETE /studies/{id}``: removes the study and its trials."""
        self._client.studies.delete(self.id)

    def _single(self, what: str, instead: str) -> None:
        if self._shape.multi:
            raise MultiObjectiveError(
                f"Study.{what} has one answer for a single objective; this study has {len(self._shape.names)} "
                f"({self._shape.names}): use Study.{instead}"
            )

    def __repr__(self) -> str:
        shape = f"directions={self._shape.directions}" if self._shape.multi else f"direction={self._shape.directions[0]!r}"
        return f"Study(id={self.id!r}, name={self.name!r}, {shape})"


class _Progress:
    """``optimize(show_progress=True)``: one line on stderr, rewritten after each trial."""

    def __init__(self, n_trials: Optional[int], timeout: Optional[float], shape: StudyShape):
        self.total = n_trials
        self.timeout = timeout
        self.shape = shape
        self.done = 0
        self.counts: dict = {}
        self.best: Optional[float] = None
        self.started = time.monotonic()

    def update(self, trial: FrozenTrial) -> None:
        self.done += 1
        self.counts[trial.state] = self.counts.get(trial.state, 0) + 1
        if not self.shape.multi and trial.state == "complete" and trial.value is not None and trial.feasible is not False:
            better = self.best is None or (
                trial.value < self.best if self.shape.directions[0] == "minimize" else trial.value > self.best
            )
            if better:
                self.best = trial.value
        of = f"/{self.total}" if self.total is not None else f" in {time.monotonic() - self.started:.0f} s"
        states = ", ".join(f"{n} {s}" for s, n in sorted(self.counts.items()))
        best = f"; best value {self.best:.6g}" if self.best is not None else ""
        sys.stderr.write(f"\rtrials {self.done}{of} ({states}){best}   ")
        sys.stderr.flush()

    def close(self) -> None:
        if self.done:
            sys.stderr.write("\n")
            sys.stderr.flush()

"""Model aliases: a stable name (``churn``) that routes each request to one of a few
models by weight, optionally with a shadow model that predicts the same rows after the
answer is sent. ``client.aliases`` (:class:`~mercer_client.client.Aliases`) holds the
calls; this module holds what they return (:class:`Alias`, :class:`AliasChange`,
:class:`Route`), what a model endpoint's answer says about the model that answered
(:class:`Served`, :class:`Prediction`), and the request bodies and headers.

An alias name is 1 to 64 characters of ``[A-Za-z0-9._-]`` that does not parse as a
UUID; every model endpoint that takes a model id (``predict``, ``transform``,
``inverse_transform``, ``posterior_samples``, ``GET /models/{id}``) takes one too.
"""

from __future__ import annotations

import numbers
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Optional, Tuple
from urllib.parse import quote

#: The headers of a model endpoint's answer that name what answered.
SERVED_MODEL_HEADER = "X-Mercer-Model"
SERVED_VERSION_HEADER = "X-Mercer-Model-Version"
ALIAS_HEADER = "X-Mercer-Alias"
ALIAS_GENERATION_HEADER = "X-Mercer-Alias-Generation"
REQUEST_ID_HEADER = "X-Request-Id"


class Route(NamedTuple):
    """One route of an alias: the model and its weight (percent of the requests; the
    weights of an alias sum to 100). A tuple, so ``alias.routes`` can be passed back
    as ``routes=``."""

    model: str
    weight: float


def _routes(items: Any) -> Tuple[Route, ...]:
    return tuple(Route(str(r["model"]), r["weight"]) for r in items or [])


@dataclass(frozen=True)
class AliasChange:
    """One entry of an alias's history (newest first, at most 50).

    Attributes:
        generation: the generation this change wrote.
        action: ``"set"`` (a PUT), ``"rollback"``, ``"delete"`` (routes empty, no
            shadow) or ``"unroute"`` (a forced model delete removed a model from it).
        routes: the routes from then on, :class:`Route` tuples.
        shadow: the shadow model's id, or ``None``.
        at: when (RFC 3339 text).
        by: the name of the API key that made the change (``None`` when the server
            has no keys).
        restores: for a rollback, the generation whose setting it restored.
        resource: the entry as answered (a dict).
    """

    generation: int
    action: str
    routes: Tuple[Route, ...]
    shadow: Optional[str]
    at: Optional[str]
    by: Optional[str]
    restores: Optional[int] = None
    resource: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, entry: dict) -> "AliasChange":
        return cls(
            generation=int(entry["generation"]),
            action=str(entry.get("action")),
            routes=_routes(entry.get("routes")),
            shadow=entry.get("shadow"),
            at=entry.get("at"),
            by=entry.get("by"),
            restores=None if entry.get("restores") is None else int(entry["restores"]),
            resource=entry,
        )


@dataclass(frozen=True)
class Alias:
    """An alias as the server holds it, read-only (``client.aliases.get``, ``set``,
    ``rollback``, ``list``).

    Attributes:
        name: the alias's name.
        generation: how many times it was written (each set, rollback, delete and
            unroute adds one); pass it, or the alias itself, as ``if_match=`` to make
            the next write fail with :class:`~mercer_client.PreconditionFailed` if
            someone else wrote in between.
        routes: :class:`Route` ``(model, weight)`` tuples, in the order given.
        shadow: the shadow model's id, or ``None``.
        updated_at: when the current generation was written (RFC 3339 text).
        updated_by: the API key's name that wrote it (``None`` without keys).
        history: the changes, newest first, as :class:`AliasChange` (at most 50);
            ``None`` for an alias from ``list()``, whose answer has no history.
        resource: the alias resource as answered (a dict).
    """

    name: str
    generation: int
    routes: Tuple[Route, ...]
    shadow: Optional[str]
    updated_at: Optional[str]
    updated_by: Optional[str]
    history: Optional[Tuple[AliasChange, ...]] = None
    resource: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, resource: dict) -> "Alias":
        history = resource.get("history")
        return cls(
            name=str(resource["name"]),
            generation=int(resource["generation"]),
            routes=_routes(resource.get("routes")),
            shadow=resource.get("shadow"),
            updated_at=resource.get("updated_at"),
            updated_by=resource.get("updated_by"),
            history=None if history is None else tuple(AliasChange.from_json(e) for e in history),
            resource=resource,
        )

    @property
    def model(self) -> Optional[str]:
        """The first route's model (``GET /models/{name}`` describes the one a route picks)."""
        return self.routes[0].model if self.routes else None

    @property
    def weights(self) -> dict:
        """The routes as a dict, model id -> weight."""
        return {r.model: r.weight for r in self.routes}


@dataclass(frozen=True)
class Served:
    """What answered a request to a model endpoint, read from the answer's headers.

    Attributes:
        model: the id of the model that answered (``X-Mercer-Model``). Asked by id
            from a server that sends no such header, the id asked; asked by alias
            from such a server, ``None``.
        model_version: that model's version (``X-Mercer-Model-Version``, sent with
            predictions), or ``None``.
        alias: the alias the request went through (``X-Mercer-Alias``), or ``None``
            when it named a model id.
        alias_generation: the alias's generation that routed it
            (``X-Mercer-Alias-Generation``), or ``None``.
        request_id: the answer's ``X-Request-Id`` (the one sent, or the server's).
    """

    model: Optional[str] = None
    model_version: Optional[int] = None
    alias: Optional[str] = None
    alias_generation: Optional[int] = None
    request_id: Optional[str] = None

    @classmethod
    def from_headers(cls, headers: Mapping, asked: Optional[str] = None) -> "Served":
        """From a response's headers (case-insensitive, as ``requests`` gives them);
        ``asked`` is the model id or alias name the request named."""
        model = headers.get(SERVED_MODEL_HEADER)
        if model is None and asked is not None and _is_uuid(asked):
            model = asked
        return cls(
            model=model,
            model_version=_int_or_none(headers.get(SERVED_VERSION_HEADER)),
            alias=headers.get(ALIAS_HEADER),
            alias_generation=_int_or_none(headers.get(ALIAS_GENERATION_HEADER)),
            request_id=headers.get(REQUEST_ID_HEADER),
        )


class Prediction(dict):
    """``client.models.predict``'s answer: a dict of numpy arrays (``predictions``,
    ``variance``, ...), plus :attr:`served`, what answered it (a :class:`Served`;
    through an alias, which of its models)."""

    served: Served

    def __init__(self, fields: Any = (), served: Optional[Served] = None):
        super().__init__(fields)
        self.served = served if served is not None else Served()

    @property
    def served_model(self) -> Optional[str]:
        """The id of the model that answered (``served.model``)."""
        return self.served.model

    def __reduce__(self):
        return (type(self), (dict(self), self.served))


def _int_or_none(text: Optional[str]) -> Optional[int]:
    try:
        return None if text is None else int(text)
    except ValueError:
        return None


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(str(text))
    except ValueError:
        return False
    return True


def path_segment(name: Any) -> str:
    """A model id or alias name as one URL path segment: percent-encoded, and a name
    of dots only (``.``, ``..``: valid alias names) spelled ``%2E`` so that it is not
    read as a relative path step."""
    text = str(name)
    if text and set(text) == {"."}:
        return "%2E" * len(text)
    return quote(text, safe="")


def _weight(value: Any, where: str) -> Any:
    """A weight as JSON: an int when whole (``90``, not ``90.0``), else a float."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{where}: a weight is a number, not {value!r}")
    number = float(value)
    return int(number) if number.is_integer() else number


def _route_json(route: Any, index: int) -> dict:
    """``{"model", "weight"}`` from a ``(model, weight)`` pair, a :class:`Route` or a
    dict with those keys."""
    if isinstance(route, Mapping):
        unknown = set(route) - {"model", "weight"}
        if unknown or "model" not in route or "weight" not in route:
            raise ValueError(f"routes[{index}]: a route dict has 'model' and 'weight' only, not {sorted(route)}")
        model, weight = route["model"], route["weight"]
    else:
        try:
            model, weight = route
        except (TypeError, ValueError):
            raise ValueError(f"routes[{index}]: a route is (model, weight) or a dict, not {route!r}") from None
    return {"model": str(model), "weight": _weight(weight, f"routes[{index}]")}


def alias_body(
    model: Optional[str] = None,
    routes: Any = None,
    canary: Any = None,
    shadow: Optional[str] = None,
) -> dict:
    """The body of ``PUT /aliases/{name}``: ``{"model"}`` (one model takes every
    request), ``{"routes": [{"model", "weight"}, ...]}``, or, for ``canary=(new,
    percent)`` with ``model``, the routes ``[(model, 100 - percent), (new, percent)]``;
    plus ``"shadow"`` when given. ``ValueError`` for a combination the server would
    refuse as malformed (neither or both of ``model`` and ``routes``, ``canary``
    without ``model`` or with ``routes``, a canary percent outside (0, 100))."""
    if canary is not None:
        if routes is not None:
            raise ValueError("canary= makes the routes: not with routes=")
        if model is None:
            raise ValueError("canary=(model, percent) needs model=, the model that keeps the other requests")
        try:
            new, percent = canary
        except (TypeError, ValueError):
            raise ValueError(f"canary is (model, percent), not {canary!r}") from None
        percent = _weight(percent, "canary")
        if not 0 < percent < 100:
            raise ValueError(f"a canary's percent is between 0 and 100 (exclusive), not {percent}")
        routes = [(model, 100 - percent), (new, percent)]
        model = None
    if (model is None) == (routes is None):
        raise ValueError("give model= (one model) or routes= (several, by weight), not both nor neither")
    if model is not None:
        body: dict = {"model": str(model)}
    else:
        if isinstance(routes, (str, bytes, Mapping)):
            raise ValueError(f"routes is a list of (model, weight) pairs or dicts, not {routes!r}")
        body = {"routes": [_route_json(r, i) for i, r in enumerate(routes)]}
    if shadow is not None:
        body["shadow"] = str(shadow)
    return body


def _generation_tag(value: Any, what: str) -> str:
    """An ``If-Match`` value: ``*``, or a generation (an int, or an :class:`Alias`'s)
    as the entity tag ``"N"``."""
    if isinstance(value, Alias):
        value = value.generation
    if isinstance(value, str):
        text = value.strip()
        if text == "*":
            return "*"
        if text.startswith("W/"):
            text = text[2:]
        text = text.strip('"')
        if text.isdigit():
            return f'"{int(text)}"'
        raise ValueError(f"{what} is a generation (an int, an Alias or '*'), not {value!r}")
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(f"{what} is a generation (an int, an Alias or '*'), not {value!r}")
    return f'"{int(value)}"'


def precondition_headers(if_match: Any = None, if_none_match: bool = False) -> dict:
    """``If-Match: "N"`` (or ``*``) and/or ``If-None-Match: *``."""
    headers = {}
    if if_match is not None:
        headers["If-Match"] = _generation_tag(if_match, "if_match")
    if if_none_match:
        headers["If-None-Match"] = "*"
    return headers

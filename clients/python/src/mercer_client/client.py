"""A thin HTTP client for mercer: models (fit, predict, ...), aliases, datasets and
studies.

Every call is one HTTP request (but ``Models.wait``, and ``Models.fit`` when it has to
poll), sends JSON (or streams CSV/JSON for dataset uploads), and turns every error
answer into :class:`MercerError` (:class:`PreconditionFailed` for a 412). Arrays go out
as JSON lists and come back as numpy arrays.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any, Callable, Iterable, Iterator, Optional

import numpy as np
import requests

from .aliases import (
    REQUEST_ID_HEADER,
    Alias,
    Prediction,
    Served,
    alias_body,
    path_segment,
    precondition_headers,
)
from .errors import MercerError
from .study import Study, _objective_names, study_body

#: Where a client connects when given no URL (the service's default address).
DEFAULT_URL = "http://127.0.0.1:8080"

#: Rows per chunk of a streamed dataset upload.
CHUNK_ROWS = 4096

#: Predict answer fields that hold numbers (``predictions`` and ``classes`` may hold
#: class labels and are converted without a dtype).
_NUMERIC_FIELDS = ("variance", "std", "covariance", "decision_function", "probabilities", "score_samples")


def _plain(value: Any) -> Any:
    """``json.dumps``'s fallback: numpy arrays and scalars as Python lists and numbers."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if hasattr(value, "to_numpy"):  # a pandas DataFrame or Series
        return value.to_numpy().tolist()
    raise TypeError(f"cannot send a {type(value).__name__} as JSON")


def _dumps(value: Any) -> str:
    """JSON text; NaN and infinity are refused (the service takes finite numbers only)."""
    return json.dumps(value, default=_plain, allow_nan=False, separators=(",", ":"))


def _is_dataframe(value: Any) -> bool:
    """Whether ``value`` is a pandas DataFrame (without importing pandas)."""
    return type(value).__module__.startswith("pandas") and hasattr(value, "columns")


class Client:
    """A connection to a mercer server.

    ``Client(url, token=None, timeout=600.0)``: ``url`` defaults to ``$MERCER_URL``
    or ``http://127.0.0.1:8080``, ``token`` to ``$MERCER_TOKEN``; a token is sent as
    ``Authorization: Bearer <token>``. ``timeout`` is how long one request may wait for
    its answer, in seconds (a synchronous fit answers when the fit is done, or after
    the server's own fit wait, 540 s by default, with the model still training).

    ``client.models``, ``client.aliases``, ``client.datasets`` and ``client.studies``
    hold the calls; :meth:`create_study` and :meth:`load_study` give a
    :class:`~mercer_client.Study` with Optuna's API (``study.optimize(objective,
    n_trials=50)``).

    :attr:`last_served` (and :attr:`last_served_model`) says which model answered the
    last model call (predict, transform, ...) made by the calling thread: through an
    alias, the one the alias routed it to.
    """

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, timeout: float = 600.0):
        self.url = (url or os.environ.get("MERCER_URL") or DEFAULT_URL).rstrip("/")
        self.timeout = timeout
        self.session = requests.Session()
        token = token if token is not None else os.environ.get("MERCER_TOKEN")
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"
        self.models = Models(self)
        self.aliases = Aliases(self)
        self.datasets = Datasets(self)
        self.studies = Studies(self)
        self._served = threading.local()

    @property
    def last_served(self) -> Optional[Served]:
        """What answered the last call of ``client.models`` that reached a model
        (``get``, ``predict``, ``transform``, ``inverse_transform``,
        ``posterior_samples``) in the calling thread: a :class:`~mercer_client.Served`
        (``model``, ``model_version``, ``alias``, ``alias_generation``, ``request_id``),
        or ``None`` before any. Per thread, so threads sharing a client do not see each
        other's answers."""
        return getattr(self._served, "value", None)

    @property
    def last_served_model(self) -> Optional[str]:
        """``last_served.model``: the id of the model that answered the calling
        thread's last model call (through an alias, the route it took), or ``None``."""
        served = self.last_served
        return served.model if served is not None else None

    def _record_served(self, response: requests.Response, asked: str) -> Served:
        served = Served.from_headers(response.headers, asked)
        self._served.value = served
        return served

    def __repr__(self) -> str:
        return f"Client({self.url!r})"

    def create_study(
        self,
        space: dict,
        *,
        direction: Optional[str] = None,
        directions: Optional[list] = None,
        objective_names: Optional[list] = None,
        reference: Any = None,
        constraints: Any = None,
        pruner: Any = None,
        name: Optional[str] = None,
        seed: int = 0,
        initial: Optional[int] = None,
    ) -> Study:
        """``POST /studies``: a new study, as a :class:`~mercer_client.Study` (Optuna's
        ``optuna.create_study``; the space is given here, the server suggests every
        trial's setting).

        Args:
            space: names to ``{"uniform": [lo, hi]}``, ``{"log_uniform": [lo, hi]}``,
                ``{"int_uniform": [lo, hi]}``, a list of values, or
                ``{"grid" | "log_grid": [lo, hi, count]}``.
            direction: ``"minimize"`` (default) or ``"maximize"``: one objective.
            directions: one direction per objective (2 to 4; a list of one is
                ``direction``). Not with ``direction``.
            objective_names: the objectives' names (default ``"f0"``, ``"f1"``, ...;
                one objective: ``"value"``, known to the client only), the keys of a
                dict the objective returns.
            reference: the hypervolume's reference point (several objectives), a dict
                name -> number or a sequence in the objectives' order; derived by the
                server when left out.
            constraints: a dict name -> max, or a list of ``{"name", "max"}`` (or
                ``(name, max)`` pairs, or names: max 0); a trial is feasible when each
                of its constraint values is at most its max. At most 8.
            pruner: ``"median"``, ``"halving"``, ``"none"``, a dict (``{"type":
                "median", "startup_trials": 5, ...}``) or a
                :class:`~mercer_client.MedianPruner` /
                :class:`~mercer_client.SuccessiveHalvingPruner`; single objective only.
            name: the study's name.
            seed: the seed of its random first trials.
            initial: how many random trials come first (default: the server's,
                max(5, 2 x dimensions)).

        Errors of the definition are :class:`MercerError` 422 at their pointer
        (``/objectives``, ``/reference/<name>``, ``/constraints/0/max``, ``/pruner``,
        ...); ``ValueError`` for arguments that cannot be sent (``direction`` and
        ``directions`` both, names not matching the directions).
        """
        resource = self.studies.create(
            space,
            name=name,
            direction=direction,
            directions=directions,
            objective_names=objective_names,
            reference=reference,
            constraints=constraints,
            pruner=pruner,
            seed=seed,
            initial=initial,
        )
        return Study(self, resource, objective_name=_single_objective_name(resource, objective_names))

    def load_study(self, study_id: str, *, objective_names: Optional[list] = None) -> Study:
        """``GET /studies/{id}``: an existing study as a :class:`~mercer_client.Study`
        (Optuna's ``optuna.load_study``). ``objective_names`` names a single objective
        (the name is the client's, not stored: default ``"value"``)."""
        resource = self.studies.get(study_id)
        return Study(self, resource, objective_name=_single_objective_name(resource, objective_names))

    def delete_study(self, study_id: str) -> None:
        """``DELETE /studies/{id}`` (Optuna's ``optuna.delete_study``)."""
        self.studies.delete(study_id)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        data: Any = None,
        params: Optional[dict] = None,
        content_type: str = "application/json",
        headers: Optional[dict] = None,
    ) -> requests.Response:
        """Sends one request: ``body`` as JSON, or ``data`` (bytes, a file object or an
        iterator of bytes, streamed) as ``content_type``, with the extra ``headers``.
        Returns the response; an answer of 400 or above raises :class:`MercerError`
        (:class:`PreconditionFailed` for a 412)."""
        headers = dict(headers or {})
        if body is not None:
            data = _dumps(body).encode()
        if data is not None:
            headers["Content-Type"] = content_type
        response = self.session.request(
            method, self.url + path, data=data, params=params, headers=headers, timeout=self.timeout
        )
        if response.status_code >= 400:
            raise MercerError.from_response(response)
        return response


class Models:
    """The calls on ``/models``: ``client.models``.

    ``get``, ``wait``, ``predict``, ``transform``, ``inverse_transform`` and
    ``posterior_samples`` take a model id or an alias name (``client.aliases``): through
    an alias, each request goes to one of its models, chosen by weight (the same
    ``request_id`` and alias generation: the same model). ``predict``'s answer says
    which model answered (``answer.served``), and ``client.last_served`` says it for
    every one of these calls. ``delete`` and ``add_observations`` take a model id.
    """

    def __init__(self, client: Client):
        self._client = client

    def _call(
        self, method: str, model_id: str, suffix: str = "", body: Any = None, *,
        params: Optional[dict] = None, request_id: Optional[str] = None,
    ) -> tuple:
        """One request to ``/models/{id}{suffix}``; returns the response and what
        served it (also kept as the client's ``last_served``)."""
        headers = {REQUEST_ID_HEADER: str(request_id)} if request_id is not None else None
        path = f"/models/{path_segment(model_id)}{suffix}"
        response = self._client.request(method, path, body, params=params, headers=headers)
        return response, self._client._record_served(response, model_id)

    def list(self) -> list:
        """``GET /models``: every model resource (dicts)."""
        return self._client.request("GET", "/models").json()["models"]

    def kinds(self) -> list:
        """``GET /models/kinds``: the server's model kinds, one dict each in its order -
        ``name``, ``task``, ``targets`` (whether a fit takes ``y``) and what the kind can
        do (``several_outputs``, ``appends``, ``nystrom``, ``variational``,
        ``probabilities``, ``posterior``, ``transform``, ``precomputed_kernel``)."""
        return self._client.request("GET", "/models/kinds").json()["kinds"]

    def get(self, model_id: str, *, include: Any = None) -> dict:
        """``GET /models/{id}``: the model resource (status, fitted kernel and params,
        training report, and ``progress`` while training); for an alias name, the
        resource of the model a route picks for this request, by weight as for a predict. ``include="coefficients"``
        (``?include=coefficients``; a list of names is joined with commas) adds the
        fitted ``coefficients`` for the models that have them: the SVM family's
        ``support``, ``dual_coef`` and ``intercept`` (scikit-learn's ``support_``,
        ``dual_coef_``, ``intercept_``), kernel ridge's and Gaussian processes'
        ``alpha`` and ``support`` (the rows they belong to)."""
        names = [include] if isinstance(include, str) else list(include or [])
        query = {"include": ",".join(names)} if names else None
        response, _ = self._call("GET", model_id, params=query)
        return response.json()

    def delete(self, model_id: str, *, force: bool = False) -> None:
        """``DELETE /models/{id}``: removes the model (a running fit is discarded).

        A model that an alias routes to (or shadows) is not deleted:
        :class:`MercerError` 409 ``/problems/model-in-use``, whose ``detail`` names the
        alias(es). ``force=True`` (``?force=true``) deletes it anyway and removes it
        from each such alias (the other routes' weights scaled back to 100; an alias
        left without a route is deleted)."""
        query = {"force": "true"} if force else None
        self._client.request("DELETE", f"/models/{path_segment(model_id)}", params=query)

    def fit(
        self,
        model: str,
        x: Any = None,
        y: Any = None,
        *,
        kernel: Optional[dict] = None,
        params: Optional[dict] = None,
        dataset: Optional[str] = None,
        search: Optional[dict] = None,
        name: Optional[str] = None,
        metadata: Any = None,
        wait: bool = True,
        progress: Optional[Callable[[dict], None]] = None,
        poll_interval: float = 0.2,
        deadline: Optional[float] = None,
    ) -> dict:
        """``POST /models``: trains a model and returns its resource once it is ready.

        The body is ``{"model", "kernel", "params", "x", "y", "dataset", "search",
        "name", "metadata"}`` with the arguments left ``None`` left out (``x``/``y``
        rows as lists, or ``dataset`` naming an uploaded one). ``wait=True`` lets the
        server answer when the fit is done (201); ``wait=False`` sends ``?wait=false``
        (202) and polls ``GET /models/{id}`` every ``poll_interval`` seconds, calling
        ``progress(resource["progress"])`` while the fit runs. A synchronous fit that
        outlasts the server's wait also ends up polling. A fit that fails raises
        :class:`MercerError` (its status and pointers are the failure's); ``deadline``
        (seconds) bounds the polling with ``TimeoutError``.
        """
        fields = {
            "model": model,
            "kernel": kernel,
            "params": params,
            "x": x,
            "y": y,
            "dataset": dataset,
            "search": search,
            "name": name,
            "metadata": metadata,
        }
        body = {k: v for k, v in fields.items() if v is not None}
        query = None if wait else {"wait": "false"}
        resource = self._client.request("POST", "/models", body, params=query).json()
        if resource["status"] == "ready":
            return resource
        return self.wait(resource["id"], progress=progress, poll_interval=poll_interval, deadline=deadline)

    def wait(
        self,
        model_id: str,
        *,
        progress: Optional[Callable[[dict], None]] = None,
        poll_interval: float = 0.2,
        deadline: Optional[float] = None,
    ) -> dict:
        """Polls ``GET /models/{id}`` until the model is ``ready`` (returns the
        resource) or ``failed`` (raises :class:`MercerError` from its ``error``),
        calling ``progress(resource["progress"])`` at each poll while it trains."""
        give_up = None if deadline is None else time.monotonic() + deadline
        while True:
            resource = self.get(model_id)
            if resource["status"] == "ready":
                return resource
            if resource["status"] == "failed":
                raise MercerError.from_problem(resource.get("error") or {"detail": "the fit failed"})
            if progress is not None and resource.get("progress") is not None:
                progress(resource["progress"])
            if give_up is not None and time.monotonic() > give_up:
                raise TimeoutError(f"model {model_id} is still {resource['status']} after {deadline} s")
            time.sleep(poll_interval)

    def predict(
        self,
        model_id: str,
        x: Any,
        *,
        variance: Optional[bool] = None,
        covariance: Optional[bool] = None,
        include_noise: Optional[bool] = None,
        probabilities: Optional[bool] = None,
        request_id: Optional[str] = None,
    ) -> Prediction:
        """``POST /models/{id}/predict`` with ``{"x", "variance", "covariance",
        "include_noise", "probabilities"}`` (options left ``None`` take the server's
        defaults: GP variance on, probabilities on where the model has them).
        ``model_id`` may be an alias name; ``request_id`` is sent as ``X-Request-Id``
        (through an alias, the same id and generation go to the same model).

        Returns a :class:`~mercer_client.Prediction`: a dict of numpy arrays, the
        fields present where they apply: ``predictions`` (numbers, or class labels),
        ``variance`` and ``std`` (``gaussian_process``), ``covariance`` (m x m,
        m x m x t for t outputs), ``decision_function``, ``probabilities`` (columns in
        the order of ``classes``), ``score_samples`` and ``classes``; its ``served``
        (a :class:`~mercer_client.Served`) names the model that answered
        (``answer.served.model``, also ``answer.served_model``) and the alias and
        generation that routed it.
        """
        options = {
            "variance": variance,
            "covariance": covariance,
            "include_noise": include_noise,
            "probabilities": probabilities,
        }
        body = {"x": x, **{k: v for k, v in options.items() if v is not None}}
        response, served = self._call("POST", model_id, "/predict", body, request_id=request_id)
        fields = {
            field: np.asarray(value, dtype=float if field in _NUMERIC_FIELDS else None)
            for field, value in response.json().items()
        }
        return Prediction(fields, served)

    def add_observations(
        self,
        model_id: str,
        x: Any,
        y: Any,
        *,
        noise: Any = None,
        sample_weight: Any = None,
    ) -> dict:
        """``POST /models/{id}/observations`` with ``{"x", "y", "noise",
        "sample_weight"}``: adds rows to a ready exact ``gaussian_process`` or
        ``kernel_ridge`` without refitting its hyperparameters (``noise``: one
        variance per new row for a GP fitted with a noise per row; ``sample_weight``
        for a kernel ridge fitted with weights). Returns the model resource of the
        new version."""
        body = {"x": x, "y": y}
        if noise is not None:
            body["noise"] = noise
        if sample_weight is not None:
            body["sample_weight"] = sample_weight
        path = f"/models/{path_segment(model_id)}/observations"
        return self._client.request("POST", path, body).json()

    def transform(self, model_id: str, x: Any, *, request_id: Optional[str] = None) -> np.ndarray:
        """``POST /models/{id}/transform`` with ``{"x"}``: a ``kernel_pca``'s
        components of the rows, an m x n_components array. ``model_id`` may be an
        alias name (which model answered: ``client.last_served_model``);
        ``request_id`` is sent as ``X-Request-Id``."""
        response, _ = self._call("POST", model_id, "/transform", {"x": x}, request_id=request_id)
        return np.asarray(response.json()["embedding"], dtype=float)

    def inverse_transform(self, model_id: str, embedding: Any, *, request_id: Optional[str] = None) -> np.ndarray:
        """``POST /models/{id}/inverse_transform`` with ``{"x": embedding}``: rows of
        components back to rows of features (a ``kernel_pca`` fitted with
        ``fit_inverse_transform``), an m x d array. ``model_id`` may be an alias name;
        ``request_id`` is sent as ``X-Request-Id``."""
        response, _ = self._call("POST", model_id, "/inverse_transform", {"x": embedding}, request_id=request_id)
        return np.asarray(response.json()["x"], dtype=float)

    def posterior_samples(
        self,
        model_id: str,
        x: Any,
        n_samples: int = 1,
        *,
        seed: int = 0,
        include_noise: bool = False,
        request_id: Optional[str] = None,
    ) -> np.ndarray:
        """``POST /models/{id}/posterior_samples`` with ``{"x", "n_samples", "seed",
        "include_noise"}``: joint draws from a ``gaussian_process``'s predictive
        distribution at the rows, m x n_samples (m x t x n_samples for t outputs);
        the same seed gives the same draws. ``model_id`` may be an alias name;
        ``request_id`` is sent as ``X-Request-Id``."""
        body = {"x": x, "n_samples": n_samples, "seed": seed, "include_noise": include_noise}
        response, _ = self._call("POST", model_id, "/posterior_samples", body, request_id=request_id)
        return np.asarray(response.json()["samples"], dtype=float)


class Aliases:
    """The calls on ``/aliases``: ``client.aliases``. An alias is a stable name that
    the model calls (``client.models.predict(name, x)``, ...) take in place of a model
    id; it routes each request to one of its models by weight, and may have a shadow
    model that predicts the same rows after the answer is sent (never changing it).

    ::

        client.aliases.set("churn", model=v1["id"])                        # every request to v1
        client.aliases.set("churn", model=v1["id"], canary=(v2["id"], 10)) # 90 / 10
        alias = client.aliases.get("churn")
        client.aliases.set("churn", model=v2["id"], if_match=alias)        # 412 if changed since
        client.aliases.rollback("churn")                                   # back to 90 / 10

    Writes return the :class:`~mercer_client.Alias` written (with its history).
    ``if_match`` (a generation, an :class:`~mercer_client.Alias`, or ``"*"``) makes a
    write conditional: :class:`~mercer_client.PreconditionFailed` (412) when the alias's
    generation is another (or the alias does not exist).
    """

    def __init__(self, client: Client):
        self._client = client

    def set(
        self,
        name: str,
        model: Optional[str] = None,
        *,
        routes: Any = None,
        canary: Any = None,
        shadow: Optional[str] = None,
        if_match: Any = None,
        if_none_match: bool = False,
    ) -> Alias:
        """``PUT /aliases/{name}``: creates the alias or writes its next generation.

        Args:
            name: 1 to 64 characters of ``[A-Za-z0-9._-]``, not a UUID.
            model: the one model that takes every request (or, with ``canary``, the
                rest of them).
            routes: several models by weight: ``(model, weight)`` pairs, dicts
                ``{"model", "weight"}`` or :class:`~mercer_client.Route` (an alias's
                ``routes``); weights > 0 summing to 100, at most 16 routes.
            canary: ``(new_model, percent)``: ``percent`` of the requests to the new
                model, the rest to ``model``.
            shadow: a model that predicts the same rows after each answer (compared
                in the server's metrics), or ``None``.
            if_match: a generation (int), an :class:`~mercer_client.Alias`, or
                ``"*"`` (exists): sent as ``If-Match``; otherwise 412.
            if_none_match: ``True`` sends ``If-None-Match: *``: create only (412 when
                the alias exists).

        Returns the :class:`~mercer_client.Alias` written. :class:`MercerError` 422 at
        ``/model``, ``/routes``, ``/routes/i/weight``, ``/routes/i/model``,
        ``/shadow`` or ``/name`` for what the server refuses (unknown or not-ready
        models, weights not summing to 100, models of another task or feature count);
        ``ValueError`` for arguments that cannot be sent.
        """
        body = alias_body(model, routes, canary, shadow)
        headers = precondition_headers(if_match, if_none_match)
        return Alias.from_json(self._client.request("PUT", _alias_path(name), body, headers=headers).json())

    def get(self, name: str) -> Alias:
        """``GET /aliases/{name}``: the alias with its history (newest first, at most
        50 entries); :class:`MercerError` 404 when there is none."""
        return Alias.from_json(self._client.request("GET", _alias_path(name)).json())

    def list(self) -> list:
        """``GET /aliases``: every alias, sorted by name, as
        :class:`~mercer_client.Alias` (without history: ``history`` is ``None``)."""
        return [Alias.from_json(a) for a in self._client.request("GET", "/aliases").json()["aliases"]]

    def rollback(self, name: str, *, if_match: Any = None) -> Alias:
        """``POST /aliases/{name}/rollback``: writes a new generation with the routes
        and shadow of the setting before the one in effect (again: further back; a
        rollback is not undone by another). Returns the :class:`~mercer_client.Alias`.
        :class:`MercerError` 409 ``/problems/conflict`` when there is no earlier setting
        or one of its models was deleted since; 404 when there is no alias;
        ``if_match`` as in :meth:`set`."""
        headers = precondition_headers(if_match)
        response = self._client.request("POST", _alias_path(name) + "/rollback", headers=headers)
        return Alias.from_json(response.json())

    def delete(self, name: str, *, if_match: Any = None) -> None:
        """``DELETE /aliases/{name}``: removes the alias (its models stay). The name
        can be set again later; its generations go on from where they stopped.
        :class:`MercerError` 404 when there is none; ``if_match`` as in :meth:`set`."""
        self._client.request("DELETE", _alias_path(name), headers=precondition_headers(if_match))


def _alias_path(name: str) -> str:
    return f"/aliases/{path_segment(name)}"


class Datasets:
    """The calls on ``/datasets``: ``client.datasets``."""

    def __init__(self, client: Client):
        self._client = client

    def upload(
        self,
        data: Any,
        y: Any = None,
        *,
        target: Optional[str] = None,
        name: Optional[str] = None,
    ) -> dict:
        """``POST /datasets``: uploads a training set, streamed, and returns the
        dataset resource (``id``, ``n_rows``, ``n_features``, ``features``, ``target``,
        ...). ``data`` may be:

        - a CSV file's path, or a file object opened in binary mode: sent as
          ``text/csv`` straight from the file (never read whole); ``target`` names
          the target column (default: the last one);
        - a pandas DataFrame: sent as CSV in chunks of rows; ``y`` (a Series, array
          or DataFrame of several targets) is added as the target column(s), named
          ``target`` or the Series' name or ``"y"``; without ``y``, ``target`` names
          one of the frame's columns (default: the last);
        - an array of rows (numpy or lists) with ``y``: sent as JSON ``{"x", "y"}``
          in chunks of rows.

        ``name`` labels the dataset (``?name=``).
        """
        query = {k: v for k, v in (("name", name), ("target", target)) if v is not None}
        if isinstance(data, (str, os.PathLike)):
            with open(data, "rb") as f:
                return self._send(f, "text/csv", query)
        if hasattr(data, "read"):
            return self._send(data, "text/csv", query)
        if _is_dataframe(data):
            frame, query["target"] = _with_targets(data, y, target)
            return self._send(_csv_chunks(frame), "text/csv", query)
        if y is None:
            raise ValueError("an array of rows needs y (a dataset always has a target)")
        if target is not None:
            raise ValueError("target names a CSV column; an array upload has none")
        y = y.to_numpy() if hasattr(y, "to_numpy") else y
        return self._send(_json_chunks(data, y), "application/json", query)

    def _send(self, data: Any, content_type: str, query: dict) -> dict:
        return self._client.request("POST", "/datasets", data=data, params=query, content_type=content_type).json()

    def list(self) -> list:
        """``GET /datasets``: every dataset resource (dicts)."""
        return self._client.request("GET", "/datasets").json()["datasets"]

    def get(self, dataset_id: str) -> dict:
        """``GET /datasets/{id}``: the dataset resource."""
        return self._client.request("GET", f"/datasets/{dataset_id}").json()

    def delete(self, dataset_id: str) -> None:
        """``DELETE /datasets/{id}``: removes the dataset (fits already made from it
        keep their rows)."""
        self._client.request("DELETE", f"/datasets/{dataset_id}")


class Studies:
    """The calls on ``/studies``: ``client.studies``. A study suggests where to
    evaluate an expensive function next and learns from each value told back
    (Bayesian optimisation served; any number of workers may ask and tell at once).

    ::

        study = client.studies.create({"x": {"uniform": [-5, 10]}, "y": {"uniform": [0, 15]}})
        trial = client.studies.ask(study["id"])
        client.studies.tell(study["id"], trial["id"], f(**trial["values"]))

    or let :meth:`optimize` run the loop. These calls take and return dicts;
    :meth:`Client.create_study` wraps the same requests in Optuna's API (a
    :class:`~mercer_client.Study` whose ``optimize`` calls ``objective(trial)``).
    """

    def __init__(self, client: Client):
        self._client = client

    def create(
        self,
        space: dict,
        *,
        name: Optional[str] = None,
        direction: Optional[str] = None,
        seed: int = 0,
        initial: Optional[int] = None,
        directions: Optional[list] = None,
        objective_names: Optional[list] = None,
        reference: Any = None,
        constraints: Any = None,
        pruner: Any = None,
    ) -> dict:
        """``POST /studies``: a new study over ``space`` (names to
        ``{"uniform": [lo, hi]}``, ``{"log_uniform": [lo, hi]}``,
        ``{"int_uniform": [lo, hi]}``, a list of values, or a grid); returns the study
        resource. ``direction`` defaults to ``"minimize"``; ``directions``,
        ``objective_names``, ``reference``, ``constraints`` and ``pruner`` are as in
        :meth:`Client.create_study` (which returns a :class:`~mercer_client.Study`)."""
        body = study_body(
            space,
            name=name,
            direction=direction,
            directions=directions,
            objective_names=objective_names,
            reference=reference,
            constraints=constraints,
            pruner=pruner,
            seed=seed,
            initial=initial,
        )
        return self._client.request("POST", "/studies", body).json()

    def list(self) -> list:
        """``GET /studies``: every study resource (dicts)."""
        return self._client.request("GET", "/studies").json()["studies"]

    def get(self, study_id: str) -> dict:
        """``GET /studies/{id}``: the study with its trials and ``best``."""
        return self._client.request("GET", f"/studies/{study_id}").json()

    def delete(self, study_id: str) -> None:
        """``DELETE /studies/{id}``."""
        self._client.request("DELETE", f"/studies/{study_id}")

    def suggest(self, study_id: str, count: int = 1) -> list:
        """``POST /studies/{id}/suggest``: ``count`` new pending trials (dicts with
        ``id`` and ``values``)."""
        return self._client.request("POST", f"/studies/{study_id}/suggest", {"count": count}).json()["trials"]

    def ask(self, study_id: str) -> dict:
        """One new pending trial: where to evaluate next."""
        return self.suggest(study_id, 1)[0]

    def tell(
        self,
        study_id: str,
        trial_id: int,
        value: Optional[float] = None,
        *,
        failed: bool = False,
        values: Optional[dict] = None,
        state: Optional[str] = None,
    ) -> dict:
        """``POST /studies/{id}/trials/{trial_id}``: the trial's ``value`` (one
        objective), and/or ``values`` (name -> number: every objective of a study with
        several, and every constraint), or ``failed=True`` / ``state="failed"`` when
        the evaluation failed, ``state="pruned"`` when it stopped early (its value is
        its last report). Returns the trial resource. A trial is told once (a second
        tell raises :class:`MercerError` with status 409)."""
        if failed:
            state = "failed"
        if state is not None:
            if value is not None or values is not None:
                raise ValueError(f"a trial told {state!r} has no value")
            body: dict = {"state": state}
        else:
            if value is None and values is None:
                raise ValueError("tell a value (or values), or failed=True")
            body = {}
            if value is not None:
                body["value"] = float(value)
            if values is not None:
                body["values"] = dict(values)
        return self._client.request("POST", f"/studies/{study_id}/trials/{trial_id}", body).json()

    def report(self, study_id: str, trial_id: int, value: float, step: int) -> dict:
        """``POST /studies/{id}/trials/{trial_id}/reports`` ``{"step", "value"}``: an
        intermediate value of a pending trial of a single-objective study. Returns
        ``{"trial", "step", "prune"}``: ``prune`` is the pruner's advice to stop the
        trial (then tell it ``state="pruned"``). A step reported again keeps its first
        value."""
        body = {"step": step, "value": float(value)}
        return self._client.request("POST", f"/studies/{study_id}/trials/{trial_id}/reports", body).json()

    def record(
        self, study_id: str, values: dict, value: Optional[float] = None, *, results: Optional[dict] = None
    ) -> dict:
        """``POST /studies/{id}/trials``: an evaluation the study did not suggest (a
        warm start), complete: ``values`` is the setting, ``value`` the single
        objective's value, ``results`` name -> number for several objectives and for
        constraints."""
        if value is None and results is None:
            raise ValueError("record a value (or results)")
        body: dict = {"values": values}
        if value is not None:
            body["value"] = float(value)
        if results is not None:
            body["results"] = dict(results)
        return self._client.request("POST", f"/studies/{study_id}/trials", body).json()

    def optimize(self, study_id: str, function, n_trials: int, *, catch: tuple = ()) -> dict:
        """Asks, evaluates ``function(**values)`` and tells, ``n_trials`` times; an
        exception of a type in ``catch`` tells the trial failed and goes on (any other
        propagates, the trial left pending). Returns the study as it ends."""
        for _ in range(n_trials):
            trial = self.ask(study_id)
            try:
                value = function(**trial["values"])
            except catch:
                self.tell(study_id, trial["id"], failed=True)
                continue
            self.tell(study_id, trial["id"], value)
        return self.get(study_id)


def _single_objective_name(resource: dict, objective_names: Any) -> Optional[str]:
    """The client-side name of a single-objective study's objective (``None`` for the
    default, or for several objectives: the server names those)."""
    if objective_names is None or resource.get("objectives"):
        return None
    return _objective_names(1, objective_names)[0]


def _rows_as_list(rows: Any) -> list:
    return rows.tolist() if isinstance(rows, np.ndarray) else list(rows)


def _json_chunks(x: Any, y: Any) -> Iterator[bytes]:
    """``{"x": [...], "y": [...]}`` as JSON text, ``CHUNK_ROWS`` rows at a time."""
    yield b'{"x":['
    for start in range(0, len(x), CHUNK_ROWS):
        part = _dumps(_rows_as_list(x[start : start + CHUNK_ROWS]))[1:-1]
        yield (b"," if start else b"") + part.encode()
    yield b'],"y":['
    for start in range(0, len(y), CHUNK_ROWS):
        part = _dumps(_rows_as_list(y[start : start + CHUNK_ROWS]))[1:-1]
        yield (b"," if start else b"") + part.encode()
    yield b"]}"


def _with_targets(frame: Any, y: Any, target: Optional[str]) -> tuple:
    """The frame to send and the ``?target=`` naming its target column(s)."""
    if y is None:
        return frame, target if target is not None else str(frame.columns[-1])
    if _is_dataframe(y):
        names = [str(c) for c in y.columns]
        extra = {n: y[c].to_numpy() for n, c in zip(names, y.columns)}
        return frame.assign(**extra), ",".join(names)
    label = target or getattr(y, "name", None) or "y"
    return frame.assign(**{str(label): np.asarray(y)}), str(label)


def _csv_chunks(frame: Any) -> Iterable[bytes]:
    """The frame as CSV (a header, then its rows; floats written in full),
    ``CHUNK_ROWS`` rows at a time."""
    for start in range(0, max(len(frame), 1), CHUNK_ROWS):
        part = frame.iloc[start : start + CHUNK_ROWS]
        yield part.to_csv(index=False, header=start == 0, lineterminator="\n").encode()

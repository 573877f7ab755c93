"""The exception the client raises for an error answer from mercer: :class:`MercerError`,
or its subclass :class:`PreconditionFailed` for a 412 (a stale ``If-Match``)."""

from __future__ import annotations

import json
from typing import Any, Optional


class MercerError(Exception):
    """An error answer from the service (an ``application/problem+json`` body).

    Attributes:
        status: the HTTP status (``422``, ``404``, ...).
        title: the status's reason (``"Unprocessable Entity"``).
        detail: a sentence saying what was wrong.
        type: the problem type, e.g. ``"/problems/invalid-input"`` (``None`` if the
            answer was not a problem object, e.g. from a proxy).
        pointers: the JSON pointers of the invalid places (``errors[].pointer``),
            e.g. ``["/params/c"]``; empty when the problem names none.
        body: the parsed problem object (a dict), or the raw text when the body was
            not JSON.
    """

    def __init__(
        self,
        status: int,
        title: str,
        detail: str,
        type: Optional[str] = None,
        pointers: Optional[list] = None,
        body: Any = None,
    ):
        self.status = status
        self.title = title
        self.detail = detail
        self.type = type
        self.pointers = list(pointers or [])
        self.body = body
        where = f" at {', '.join(self.pointers)}" if self.pointers else ""
        super().__init__(f"{status} {title}{where}: {detail}")

    @classmethod
    def from_problem(cls, problem: dict, status: Optional[int] = None) -> "MercerError":
        """The error for a problem object (an error answer's body, or a failed
        model's ``error``); :class:`PreconditionFailed` for a 412."""
        errors = problem.get("errors") or []
        status = int(problem.get("status", status or 0))
        return _error_class(cls, status, problem.get("type"))(
            status=status,
            title=str(problem.get("title", "")),
            detail=str(problem.get("detail", "")),
            type=problem.get("type"),
            pointers=[e.get("pointer", "") for e in errors if isinstance(e, dict)],
            body=problem,
        )

    @classmethod
    def from_response(cls, response) -> "MercerError":
        """The error for a ``requests`` response with a 4xx or 5xx status."""
        try:
            problem = response.json()
        except (ValueError, json.JSONDecodeError):
            problem = None
        if isinstance(problem, dict) and ("title" in problem or "detail" in problem):
            return cls.from_problem(problem, response.status_code)
        return _error_class(cls, response.status_code, None)(
            status=response.status_code,
            title=response.reason or "",
            detail=response.text[:1000],
            body=problem if problem is not None else response.text,
        )


class PreconditionFailed(MercerError):
    """A 412 (problem type ``/problems/precondition-failed``): a conditional write
    (``if_match=`` a generation, or ``if_none_match=True``) whose condition did not hold,
    because someone else wrote the alias in between (or it does not exist, or it does
    and was to be created). A :class:`MercerError`, with the same attributes; read the
    alias again and decide."""


#: The problem types with an exception class of their own (by the type's last part).
_BY_TYPE = {"precondition-failed": PreconditionFailed}
_BY_STATUS = {412: PreconditionFailed}


def _error_class(cls: type, status: int, type: Optional[str]) -> type:
    """``cls``, or the subclass of :class:`MercerError` for the problem when ``cls`` is
    :class:`MercerError` itself."""
    if cls is not MercerError:
        return cls
    slug = type.rsplit("/", 1)[-1] if isinstance(type, str) else None
    return _BY_TYPE.get(slug) or _BY_STATUS.get(status) or MercerError

"""The one exception the client raises for an error answer from mercer."""

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
        model's ``error``)."""
        errors = problem.get("errors") or []
        return cls(
            status=int(problem.get("status", status or 0)),
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
        return cls(
            status=response.status_code,
            title=response.reason or "",
            detail=response.text[:1000],
            body=problem if problem is not None else response.text,
        )

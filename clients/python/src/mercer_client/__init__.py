"""mercer-client: a Python client and scikit-learn estimators for the mercer
kernel-machine service.

- :class:`Client` speaks the HTTP API (``client.models``, ``client.aliases``,
  ``client.datasets``, ``client.studies``).
- :class:`MercerError` is the exception for the service's error answers;
  :class:`PreconditionFailed`, its subclass, is a 412 (a conditional alias write whose
  generation was stale).
- ``client.aliases`` sets, reads, rolls back and deletes model aliases (:class:`Alias`,
  :class:`AliasChange`, :class:`Route`); the model calls take an alias name in place
  of a model id, and say which model answered (:class:`Prediction`'s ``served``,
  ``client.last_served``: a :class:`Served`).
- :meth:`Client.create_study` returns a :class:`Study` with Optuna's API
  (``study.optimize(objective, n_trials)``, :class:`Trial`, :class:`TrialPruned`, the
  pruners :class:`MedianPruner` and :class:`SuccessiveHalvingPruner`).
- The estimators fit and predict through the service with scikit-learn's API.

The package's version is the server's: ``mercer_client.__version__`` goes with the
mercer release of the same number.
"""

from ._version import __version__
from .aliases import Alias, AliasChange, Prediction, Route, Served
from .client import Client
from .errors import MercerError, PreconditionFailed
from .study import (
    FrozenTrial,
    MedianPruner,
    MultiObjectiveError,
    NopPruner,
    Study,
    SuccessiveHalvingPruner,
    Trial,
    TrialPruned,
)
from . import estimators
from .estimators import *  # noqa: F401,F403 (the estimators, listed once in estimators.__all__)

__all__ = [
    "__version__",
    "Client",
    "MercerError",
    "PreconditionFailed",
    "Alias",
    "AliasChange",
    "Route",
    "Served",
    "Prediction",
    "Study",
    "Trial",
    "FrozenTrial",
    "TrialPruned",
    "MultiObjectiveError",
    "MedianPruner",
    "SuccessiveHalvingPruner",
    "NopPruner",
    *estimators.__all__,
]

"""mercer-client: a Python client and scikit-learn estimators for the mercer
kernel-machine service.

- :class:`Client` speaks the HTTP API (``client.models``, ``client.datasets``,
  ``client.studies``).
- :class:`MercerError` is the one exception for the service's error answers.
- :meth:`Client.create_study` returns a :class:`Study` with Optuna's API
  (``study.optimize(objective, n_trials)``, :class:`Trial`, :class:`TrialPruned`, the
  pruners :class:`MedianPruner` and :class:`SuccessiveHalvingPruner`).
- The estimators fit and predict through the service with scikit-learn's API.

The package's version is the server's: ``mercer_client.__version__`` goes with the
mercer release of the same number.
"""

from ._version import __version__
from .client import Client
from .errors import MercerError
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

"""mercer-client: a Python client and scikit-learn estimators for the mercer
kernel-machine service.

- :class:`Client` speaks the HTTP API (``client.models``, ``client.datasets``,
  ``client.studies``).
- :class:`MercerError` is the one exception for the service's error answers.
- The estimators fit and predict through the service with scikit-learn's API.

The package's version is the server's: ``mercer_client.__version__`` goes with the
mercer release of the same number.
"""

from ._version import __version__
from .client import Client
from .errors import MercerError
from . import estimators
from .estimators import *  # noqa: F401,F403 (the estimators, listed once in estimators.__all__)

__all__ = ["__version__", "Client", "MercerError", *estimators.__all__]

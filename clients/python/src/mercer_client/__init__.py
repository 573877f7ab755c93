"""mercer-client: a Python client and scikit-learn estimators for the mercer
kernel-machine service.

- :class:`Client` speaks the HTTP API (``client.models``, ``client.datasets``,
  ``client.studies``).
- :class:`MercerError` is the one exception for the service's error answers.
- The estimators fit and predict through the service with scikit-learn's API.
"""

from .client import Client
from .errors import MercerError
from .estimators import (
    UPLOAD_THRESHOLD,
    GaussianProcessClassifier,
    GaussianProcessRegressor,
    KernelPCA,
    KernelRidge,
    NuSVC,
    OneClassSVM,
    SVC,
    SVR,
    gp_kernel_json,
)

__version__ = "0.1.0"

__all__ = [
    "Client",
    "MercerError",
    "UPLOAD_THRESHOLD",
    "GaussianProcessClassifier",
    "GaussianProcessRegressor",
    "KernelPCA",
    "KernelRidge",
    "NuSVC",
    "OneClassSVM",
    "SVC",
    "SVR",
    "gp_kernel_json",
]

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
from .estimators import (
    SVC,
    SVR,
    UPLOAD_THRESHOLD,
    GaussianProcessClassifier,
    GaussianProcessRegressor,
    KernelLogisticRegression,
    KernelPCA,
    KernelPerceptron,
    KernelRidge,
    NadarayaWatsonRegressor,
    NuSVC,
    NuSVR,
    OneClassSVM,
    RBFNetworkRegressor,
    gp_kernel_json,
)

__all__ = [
    "__version__",
    "Client",
    "MercerError",
    "UPLOAD_THRESHOLD",
    "GaussianProcessClassifier",
    "GaussianProcessRegressor",
    "KernelLogisticRegression",
    "KernelPCA",
    "KernelPerceptron",
    "KernelRidge",
    "NadarayaWatsonRegressor",
    "NuSVC",
    "NuSVR",
    "OneClassSVM",
    "RBFNetworkRegressor",
    "SVC",
    "SVR",
    "gp_kernel_json",
]

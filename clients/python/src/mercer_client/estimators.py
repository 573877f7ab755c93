"""scikit-learn estimators whose fits and predictions run on a mercer server.

Each estimator takes scikit-learn's parameter names where they map (``C``, ``gamma``,
``kernel``, ``alpha``, ``nu``, ``n_components``, ...), translates them to mercer's JSON
at ``fit``, and keeps the id of the model the server fitted in ``model_id_``; predict,
transform and the other methods send rows to that model. Pickling keeps the id (and
``url``/``token``), so an unpickled estimator predicts through the same server model.

Every estimator also takes ``url`` and ``token`` (``None``: ``$MERCER_URL`` /
``$MERCER_TOKEN`` at call time, else ``http://127.0.0.1:8080``) and ``search``: a
server-side search spec (``{"space": {"/params/c": {"log_grid": [0.1, 10, 5]}}, "cv":
5, ...}``, pointers into mercer's ``kernel``/``params`` JSON) run instead of fitting the
one setting; the search report is then in ``search_``.

Server models outlive the estimators: ``delete_model()`` removes an estimator's model.

The estimators live in modules by concept (``_regression``, ``_svm``,
``_classification``, ``_decomposition``; the shared machinery in ``_base``, kernel
translation in ``_kernels``); this module, like the package, exports them all.
"""

from ._base import UPLOAD_THRESHOLD
from ._classification import GaussianProcessClassifier, KernelLogisticRegression, KernelPerceptron
from ._decomposition import KernelPCA
from ._kernels import gp_kernel_json
from ._regression import GaussianProcessRegressor, KernelRidge, NadarayaWatsonRegressor, RBFNetworkRegressor
from ._svm import SVC, SVR, NuSVC, NuSVR, OneClassSVM

__all__ = [
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

"""mercer-client in a minute: the HTTP client, then scikit-learn estimators.

Start a server (``mercer`` serves on 127.0.0.1:8080 by default), then:

    python examples/quickstart.py [URL]

URL defaults to $MERCER_URL, else http://127.0.0.1:8080 ($MERCER_TOKEN is sent as the
bearer token if set). The models that appear
while the script runs are deleted at the end.
"""

import sys

import numpy as np
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from mercer_client import SVC, Client, GaussianProcessRegressor, MercerError

url = sys.argv[1] if len(sys.argv) > 1 else None
client = Client(url)
rng = np.random.RandomState(0)
existing = {model["id"] for model in client.models.list()}

# 1. The client: fit a Gaussian process on the server, predict with its uncertainty.
x = np.linspace(0, 6, 25)[:, None]
y = np.sin(x[:, 0]) + 0.1 * rng.randn(25)
gp = client.models.fit(
    "gaussian_process", x, y, kernel={"type": "rbf", "length_scale": 1.0}, params={"noise": 0.01, "optimize": True}
)
print("fitted kernel:", gp["kernel"], "log marginal likelihood:", gp["training"]["log_marginal_likelihood"])
answer = client.models.predict(gp["id"], [[1.5], [7.0]])
print("mean:", answer["predictions"], "std:", answer["std"])

# 2. Errors are MercerError, with the status and the JSON pointer of the bad field.
try:
    client.models.fit("svm", x, (y > 0).astype(int), params={"c": -1})
except MercerError as error:
    print(f"refused: {error.status} at {error.pointers}: {error.detail}")

# 3. Estimators: scikit-learn's API, fitted by the server.
regressor = GaussianProcessRegressor(kernel=RBF(1.0) + WhiteKernel(0.1), url=url).fit(x, y)
mean, std = regressor.predict([[1.5]], return_std=True)
print("GaussianProcessRegressor:", mean, std, "fitted:", regressor.kernel_)

X = rng.randn(200, 2)
labels = np.where(X[:, 0] * X[:, 1] > 0, "same sign", "opposite")
search = GridSearchCV(make_pipeline(StandardScaler(), SVC(url=url)), {"svc__C": [0.1, 1, 10]}, cv=3).fit(X, labels)
print("best C:", search.best_params_, "accuracy:", round(search.best_score_, 3))
print("predicted:", search.predict([[1.0, 1.0], [1.0, -1.0]]))

# The server keeps every model until it is deleted (GridSearchCV fitted one per fold
# and candidate): delete the models that appeared while the script ran.
for model in client.models.list():
    if model["id"] not in existing:
        client.models.delete(model["id"])

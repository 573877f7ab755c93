"""The HTTP client against the session's server: models, predictions, online updates,
transforms, posterior draws, datasets, errors and auth."""

import io

import numpy as np
import pytest

from mercer_client import Client, MercerError

RBF = {"type": "rbf", "length_scale": 0.8}


@pytest.fixture(scope="module")
def regression():
    rng = np.random.RandomState(0)
    X = rng.uniform(-3, 3, size=(40, 2))
    y = np.sin(X[:, 0]) + 0.1 * X[:, 1] + 0.05 * rng.randn(40)
    return X, y


@pytest.fixture(scope="module")
def gp(client, regression):
    X, y = regression
    return client.models.fit("gaussian_process", X, y, kernel=RBF, params={"noise": 0.01}, name="gp")


def test_fit_get_list_delete(client, regression):
    X, y = regression
    model = client.models.fit("kernel_ridge", X, y, kernel=RBF, params={"lambda": 0.1}, metadata={"k": 1})
    assert model["status"] == "ready" and model["n_train"] == 40 and model["metadata"] == {"k": 1}
    assert client.models.get(model["id"])["params"]["lambda"] == 0.1
    assert model["id"] in [m["id"] for m in client.models.list()]
    client.models.delete(model["id"])
    with pytest.raises(MercerError) as error:
        client.models.get(model["id"])
    assert error.value.status == 404


def test_kinds_say_what_each_kind_can_do(client, regression):
    kinds = {k["name"]: k for k in client.models.kinds()}
    assert kinds["gaussian_process"]["posterior"] and kinds["gaussian_process"]["targets"]
    assert kinds["kernel_pca"]["transform"] and not kinds["kernel_pca"]["targets"]
    assert not kinds["svr"]["posterior"]
    # A kind said to have a posterior answers a variance; one said not to answers none.
    X, y = regression
    for name in ["gaussian_process", "kernel_ridge"]:
        model = client.models.fit(name, X, y, kernel=RBF)
        answer = client.models.predict(model["id"], X[:3], variance=True)
        assert ("variance" in answer) == kinds[name]["posterior"], name
        client.models.delete(model["id"])


def test_fit_without_wait_polls_and_reports_progress(client):
    """?wait=false answers 202 at once; the client polls and hands each progress object
    (a search: phase, fold fits done and planned) to the callback."""
    rng = np.random.RandomState(1)
    X = rng.randn(1500, 5)
    y = (X[:, 0] + 0.5 * rng.randn(1500) > 0).astype(int)
    seen = []
    search = {"space": {"/params/c": {"log_grid": [0.01, 100, 20]}}, "cv": 5}
    model = client.models.fit(
        "svm", X, y, kernel={"type": "rbf", "gamma": 0.2}, search=search, wait=False,
        progress=seen.append, poll_interval=0.02,
    )
    assert model["status"] == "ready"
    assert model["training"]["search"]["n_fits"] == 100
    assert all({"phase", "iteration", "elapsed_ms"} <= set(p) for p in seen)
    searching = [p for p in seen if p["phase"] == "search"]
    assert searching, f"no poll saw the search running: {seen}"
    assert all(p["total"] == 100 for p in searching)
    done = [p["iteration"] for p in searching]
    assert done == sorted(done) and done[-1] <= 100


def test_a_failed_background_fit_raises(client):
    """A kernel matrix that cannot be factorised even with jitter fails the fit after
    its 202: polling finds status failed and raises the model's problem."""
    gram = [[-1.0, 0.0], [0.0, -1.0]]
    with pytest.raises(MercerError) as error:
        client.models.fit(
            "kernel_ridge", gram, [1.0, 2.0], kernel={"type": "precomputed"}, params={"lambda": 0.0}, wait=False
        )
    assert error.value.status == 422 and error.value.type == "/problems/fit-failed"


def test_gp_predict_options(client, gp, regression):
    X, _ = regression
    q = X[:5]
    plain = client.models.predict(gp["id"], q, variance=False)
    assert set(plain) == {"predictions"} and plain["predictions"].shape == (5,)
    full = client.models.predict(gp["id"], q, covariance=True)
    assert full["covariance"].shape == (5, 5)
    np.testing.assert_allclose(np.diag(full["covariance"]), full["variance"], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(full["std"] ** 2, full["variance"], rtol=1e-12)
    noisy = client.models.predict(gp["id"], q, include_noise=True)
    np.testing.assert_allclose(noisy["variance"] - full["variance"], 0.01, rtol=1e-9)


def test_classifier_answers(client):
    X = np.array([[0.0], [0.3], [0.5], [1.0], [2.0], [2.2], [2.5], [3.0]] * 2)
    y = ["a", "a", "a", "a", "b", "b", "b", "b"] * 2
    model = client.models.fit("svm", X, y, kernel={"type": "rbf", "gamma": 1.0}, params={"probability": True})
    answer = client.models.predict(model["id"], [[0.1], [2.9]])
    assert answer["predictions"].tolist() == ["a", "b"] and answer["classes"].tolist() == ["a", "b"]
    assert answer["decision_function"][0] < 0 < answer["decision_function"][1]
    assert answer["probabilities"].shape == (2, 2)
    np.testing.assert_allclose(answer["probabilities"].sum(axis=1), 1.0)
    assert "probabilities" not in client.models.predict(model["id"], [[0.1]], probabilities=False)


def test_observations_equal_a_refit(client, regression):
    X, y = regression
    for model, params in (("gaussian_process", {"noise": 0.01}), ("kernel_ridge", {"lambda": 0.1})):
        first = client.models.fit(model, X[:30], y[:30], kernel=RBF, params=params)
        grown = client.models.add_observations(first["id"], X[30:], y[30:])
        assert grown["version"] == 2 and grown["n_train"] == 40
        refit = client.models.fit(model, X, y, kernel=RBF, params=params)
        got = client.models.predict(first["id"], X[:7])["predictions"]
        want = client.models.predict(refit["id"], X[:7])["predictions"]
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)  # the contract's 1e-9


def test_observations_with_per_row_noise(client, regression):
    X, y = regression
    model = client.models.fit("gaussian_process", X[:30], y[:30], kernel=RBF, params={"noise": [0.01] * 30})
    with pytest.raises(MercerError) as error:
        client.models.add_observations(model["id"], X[30:], y[30:])
    assert error.value.status == 422 and error.value.pointers == ["/noise"]
    grown = client.models.add_observations(model["id"], X[30:], y[30:], noise=[0.02] * 10)
    assert grown["n_train"] == 40


def test_posterior_samples(client, gp, regression):
    X, _ = regression
    draws = client.models.posterior_samples(gp["id"], X[:6], 4, seed=3)
    assert draws.shape == (6, 4)
    np.testing.assert_array_equal(draws, client.models.posterior_samples(gp["id"], X[:6], 4, seed=3))
    assert not np.allclose(draws, client.models.posterior_samples(gp["id"], X[:6], 4, seed=4))


def test_transform_and_inverse(client):
    rng = np.random.RandomState(2)
    X = rng.randn(30, 3)
    model = client.models.fit(
        "kernel_pca", X, kernel={"type": "rbf", "gamma": 0.5}, params={"n_components": 2, "fit_inverse_transform": True}
    )
    embedding = client.models.transform(model["id"], X[:4])
    assert embedding.shape == (4, 2)
    assert client.models.inverse_transform(model["id"], embedding).shape == (4, 3)


def test_datasets_from_arrays_frames_and_csv(client, regression, tmp_path):
    pd = pytest.importorskip("pandas")
    X, y = regression
    inline = client.models.fit("kernel_ridge", X, y, kernel=RBF)
    want = client.models.predict(inline["id"], X[:5])["predictions"]

    frame = pd.DataFrame(X, columns=["a", "b"])
    path = tmp_path / "train.csv"
    frame.assign(target=y).to_csv(path, index=False)
    uploads = [
        client.datasets.upload(X, y, name="array"),
        client.datasets.upload(frame, pd.Series(y, name="target")),
        client.datasets.upload(str(path), target="target"),
    ]
    for dataset in uploads:
        assert dataset["n_rows"] == 40 and dataset["n_features"] == 2
        assert client.datasets.get(dataset["id"])["id"] == dataset["id"]
        model = client.models.fit("kernel_ridge", kernel=RBF, dataset=dataset["id"])
        assert model["dataset"] == dataset["id"]
        # Floats are written in full (JSON and CSV alike): the same fit, bit for bit.
        np.testing.assert_array_equal(client.models.predict(model["id"], X[:5])["predictions"], want)
    assert uploads[1]["features"] == ["a", "b"] and uploads[1]["target"] == "target"
    listed = {d["id"] for d in client.datasets.list()}
    for dataset in uploads:
        assert dataset["id"] in listed
        client.datasets.delete(dataset["id"])
        with pytest.raises(MercerError) as error:
            client.datasets.get(dataset["id"])
        assert error.value.status == 404


class CountingReader(io.RawIOBase):
    """A binary file that records the size of every read."""

    def __init__(self, data: bytes):
        self._inner = io.BytesIO(data)
        self.reads = []

    def readable(self):
        return True

    def read(self, size=-1):
        chunk = self._inner.read(size)
        self.reads.append(len(chunk))
        return chunk


def test_csv_upload_streams_from_the_file(client):
    """A file object goes to the server in small reads, never read whole."""
    rng = np.random.RandomState(3)
    table = np.column_stack([rng.randn(40_000, 4), rng.randint(0, 2, 40_000)])
    text = io.StringIO()
    text.write("a,b,c,d,label\n")
    np.savetxt(text, table, delimiter=",", fmt="%.17g")
    data = text.getvalue().encode()
    reader = CountingReader(data)
    dataset = client.datasets.upload(reader, target="label")
    assert dataset["n_rows"] == 40_000 and dataset["features"] == ["a", "b", "c", "d"]
    assert sum(reader.reads) == len(data)
    assert max(reader.reads) <= 1 << 20 < len(data)
    client.datasets.delete(dataset["id"])


def test_problem_errors(client, regression):
    X, y = regression
    with pytest.raises(MercerError) as error:
        client.models.fit("svm", X, (y > 0).astype(int), params={"c": -1.0})
    problem = error.value
    assert (problem.status, problem.title, problem.type) == (422, "Unprocessable Entity", "/problems/invalid-input")
    assert problem.pointers == ["/params/c"] and "positive" in problem.detail
    assert problem.body["errors"][0]["pointer"] == "/params/c"

    with pytest.raises(MercerError) as error:
        client.models.predict("00000000-0000-0000-0000-000000000000", X[:1])
    assert error.value.status == 404 and error.value.type == "/problems/not-found"

    with pytest.raises(MercerError) as error:
        client.models.fit("kernel_ridge", X, y, params={"C": 1.0})
    assert error.value.status == 400 and error.value.pointers == ["/params/C"]


def test_bearer_token(secured_server, regression):
    X, y = regression
    with pytest.raises(MercerError) as error:
        Client(secured_server.url, token="").models.list()
    assert error.value.status == 401
    with pytest.raises(MercerError) as error:
        Client(secured_server.url, token="wrong").models.list()
    assert error.value.status == 401
    authorised = Client(secured_server.url, token="s3cret")
    model = authorised.models.fit("kernel_ridge", X, y)
    assert [m["id"] for m in authorised.models.list()] == [model["id"]]

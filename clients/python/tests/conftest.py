"""Runs the tests against a real mercer binary: ``$MERCER_BIN``, by default
``../../target/release/mercer`` from this package (the repository's release build)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from pathlib import Path

# scikit-learn's check_array_api_input runs only with this set before scipy loads
# (mercer_client imports scikit-learn, which imports scipy).
os.environ.setdefault("SCIPY_ARRAY_API", "1")

import pytest  # noqa: E402
import requests  # noqa: E402

from mercer_client import Client  # noqa: E402
from sklearn.datasets import make_classification, make_regression  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

PACKAGE = Path(__file__).resolve().parents[1]
STARTUP_SECONDS = 30


def mercer_binary() -> Path:
    path = Path(os.environ.get("MERCER_BIN") or PACKAGE / "../../target/release/mercer")
    path = path if path.is_absolute() else (Path.cwd() / path)
    if not path.is_file():
        pytest.exit(f"no mercer binary at {path}: build it or set MERCER_BIN", returncode=2)
    return path.resolve()


class Server:
    """A mercer process on a free loopback port, models in memory. Its stderr (JSON
    log lines) is read by a thread, which finds the listening address and then keeps
    the pipe drained."""

    def __init__(self, **env: str):
        environment = {
            **os.environ,
            "MERCER_BIND": "127.0.0.1:0",
            "MERCER_DATA_DIR": "",
            "MERCER_LOG": "info",
            "MERCER_API_KEYS": "",
            **env,
        }
        self.process = subprocess.Popen(
            [str(mercer_binary())], env=environment, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True,
        )
        self.lines: list[str] = []
        addresses: queue.Queue = queue.Queue()
        threading.Thread(target=self._read_log, args=(addresses,), daemon=True).start()
        try:
            addr = addresses.get(timeout=STARTUP_SECONDS)
        except queue.Empty:
            addr = None
        if addr is None:
            self.stop()
            raise RuntimeError("mercer did not log its address:\n" + "".join(self.lines[-20:]))
        self.url = f"http://{addr}"
        self._wait_ready()

    def _read_log(self, addresses: queue.Queue) -> None:
        for line in self.process.stderr:
            self.lines.append(line)
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("message") == "mercer listening" and "addr" in record:
                addresses.put(record["addr"])
        addresses.put(None)  # the process ended (or closed stderr) without an address

    def _wait_ready(self) -> None:
        """Polls /readyz (503 while stored models load) with a deadline."""
        deadline = time.monotonic() + STARTUP_SECONDS
        while requests.get(self.url + "/readyz", timeout=5).status_code != 200:
            if time.monotonic() > deadline:
                raise RuntimeError("mercer did not become ready")
            time.sleep(0.05)

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(timeout=10)


@pytest.fixture(scope="session", autouse=True)
def mercer_url():
    """The session's server. Its URL is also ``$MERCER_URL`` for the session, which is
    where estimators built without ``url`` (the parametrized scikit-learn checks,
    created at collection) connect."""
    server = Server()
    saved = {k: os.environ.get(k) for k in ("MERCER_URL", "MERCER_TOKEN")}
    os.environ["MERCER_URL"] = server.url
    os.environ.pop("MERCER_TOKEN", None)
    yield server.url
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    server.stop()


@pytest.fixture(scope="session")
def client(mercer_url) -> Client:
    return Client(mercer_url)


@pytest.fixture(scope="module")
def secured_server():
    """A second server that requires the bearer token ``s3cret``."""
    server = Server(MERCER_API_KEYS="s3cret")
    yield server
    server.stop()


# The data sets the estimator tests fit (test_coefficients.py defines smaller ones of its own).
@pytest.fixture(scope="module")
def regression():
    X, y = make_regression(n_samples=80, n_features=4, noise=5.0, random_state=0)
    return StandardScaler().fit_transform(X), y / 50


@pytest.fixture(scope="module")
def binary():
    return make_classification(n_samples=100, n_features=4, n_informative=3, n_redundant=0, random_state=0)


@pytest.fixture(scope="module")
def three_classes():
    return make_classification(
        n_samples=120, n_features=4, n_informative=3, n_redundant=0, n_classes=3, random_state=1
    )

"""The Open Inference Protocol v2 routes through a real client of the protocol:
tritonclient's HTTP client (PyPI `tritonclient[http]`, the one Triton, KServe and
MLServer users have). Run by scripts/oip.sh against a running mercer.

    python scripts/oip_client.py http://127.0.0.1:PORT

Checks server and model metadata and health; infer on a GP (predictions and variance
equal to the predict route's), on a classifier with string labels (BYTES out), on a
string model (BYTES in); and that a bad shape comes back as the client's error. Each
infer runs twice: in JSON and with the binary tensor data extension
(`binary_data=True` on inputs and outputs), which must give the same numbers. Last, a
10,000-row infer both ways: equal numbers, and the time of each (median of 5) printed
as `TIMING json_ms=... binary_ms=...`.
"""

import json
import sys
import time
import urllib.request

import numpy as np
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

URL = sys.argv[1].rstrip("/")
passed = 0


def post(path, body):
    req = urllib.request.Request(URL + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)


def check(name, ok, detail=""):
    global passed
    if not ok:
        print(f"FAIL {name} {detail}")
        sys.exit(1)
    passed += 1
    print(f"PASS {name}")


def numbers(arr):
    return np.asarray(arr, dtype=np.float64)


client = httpclient.InferenceServerClient(url=URL.split("://", 1)[1])
check("server live and ready", client.is_server_live() and client.is_server_ready())
check("server metadata", client.get_server_metadata()["name"] == "mercer")

rng = np.random.RandomState(0)
X = rng.uniform(-3, 3, (60, 2))
y = np.sin(X[:, 0]) + 0.3 * X[:, 1]
gp = post("/models", {"model": "gaussian_process", "kernel": {"type": "rbf", "length_scale": 1.0},
                      "params": {"noise": 0.01}, "x": X.tolist(), "y": y.tolist()})["id"]
check("GP ready", client.is_model_ready(gp))
meta = client.get_model_metadata(gp)
check("GP metadata", meta["inputs"] == [{"name": "x", "datatype": "FP64", "shape": [-1, 2]}]
      and [o["name"] for o in meta["outputs"]] == ["predictions", "variance", "std"], meta)

Q = rng.uniform(-3, 3, (5, 2))
want = post(f"/models/{gp}/predict", {"x": Q.tolist()})
for binary in (False, True):
    x = httpclient.InferInput("x", list(Q.shape), "FP64")
    x.set_data_from_numpy(Q, binary_data=binary)
    outs = [httpclient.InferRequestedOutput(n, binary_data=binary) for n in ("predictions", "variance")]
    res = client.infer(gp, [x], outputs=outs)
    how = "binary" if binary else "JSON"
    check(f"GP predictions equal the predict route's ({how})",
          np.array_equal(res.as_numpy("predictions"), numbers(want["predictions"])))
    check(f"GP variance equals the predict route's ({how})",
          np.array_equal(res.as_numpy("variance"), numbers(want["variance"])))
# No outputs named: tritonclient asks for every output in binary form.
x = httpclient.InferInput("x", list(Q.shape), "FP32")
x.set_data_from_numpy(Q.astype(np.float32), binary_data=True)
res = client.infer(gp, [x])
want32 = post(f"/models/{gp}/predict", {"x": Q.astype(np.float32).astype(np.float64).tolist(), "variance": True})
check("FP32 in, every output binary out",
      np.array_equal(res.as_numpy("predictions"), numbers(want32["predictions"]))
      and np.array_equal(res.as_numpy("std"), np.sqrt(numbers(want32["variance"]))))

labels = np.where(X[:, 1] > 0, "up", "down")
svm = post("/models", {"model": "svm", "kernel": {"type": "rbf", "gamma": 0.5}, "x": X.tolist(), "y": labels.tolist()})["id"]
for binary in (False, True):
    x = httpclient.InferInput("x", [2, 2], "FP64")
    x.set_data_from_numpy(np.array([[0.0, 2.0], [0.0, -2.0]]), binary_data=binary)
    res = client.infer(svm, [x], outputs=[httpclient.InferRequestedOutput("predictions", binary_data=binary)])
    got = [v.decode() if isinstance(v, bytes) else v for v in res.as_numpy("predictions").tolist()]
    check(f"string labels come back as BYTES ({'binary' if binary else 'JSON'})", got == ["up", "down"], got)

texts = ["aaab", "aaba", "abaa", "baaa", "cccd", "ccdc", "cdcc", "dccc"]
spec = post("/models", {"model": "kernel_ridge", "kernel": {"type": "spectrum", "k": 2}, "params": {"lambda": 0.1},
                        "x": texts, "y": [1, 1, 1, 1, 2, 2, 2, 2]})["id"]
want = post(f"/models/{spec}/predict", {"x": ["aaab", "dccc"]})
for binary in (False, True):
    x = httpclient.InferInput("x", [2], "BYTES")
    x.set_data_from_numpy(np.array([b"aaab", b"dccc"], dtype=object), binary_data=binary)
    res = client.infer(spec, [x], outputs=[httpclient.InferRequestedOutput("predictions", binary_data=binary)])
    check(f"a string model takes BYTES ({'binary' if binary else 'JSON'})",
          np.array_equal(res.as_numpy("predictions"), numbers(want["predictions"])))

# 10,000 rows each way: the same numbers; the binary form skips printing and parsing
# 20,000 numbers as text (and sending 10,000 x 2 more).
big = rng.uniform(-3, 3, (10000, 2))


def infer_big(binary):
    x = httpclient.InferInput("x", list(big.shape), "FP64")
    x.set_data_from_numpy(big, binary_data=binary)
    outs = [httpclient.InferRequestedOutput(n, binary_data=binary) for n in ("predictions", "variance")]
    return client.infer(gp, [x], outputs=outs)


def median_ms(f, reps=5):
    f()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        times.append((time.perf_counter() - t) * 1e3)
    return sorted(times)[reps // 2]


a, b = infer_big(False), infer_big(True)
check("10,000 rows: binary and JSON give equal numbers",
      np.array_equal(a.as_numpy("predictions"), b.as_numpy("predictions"))
      and np.array_equal(a.as_numpy("variance"), b.as_numpy("variance")))
print(f"TIMING rows=10000 json_ms={median_ms(lambda: infer_big(False)):.1f} binary_ms={median_ms(lambda: infer_big(True)):.1f}")

x = httpclient.InferInput("x", [1, 3], "FP64")
x.set_data_from_numpy(np.array([[0.0, 1.0, 2.0]]), binary_data=False)
try:
    client.infer(gp, [x], outputs=[httpclient.InferRequestedOutput("predictions", binary_data=False)])
    check("a bad shape is refused", False, "no error")
except InferenceServerException as e:
    check("a bad shape is refused with the protocol's error", "/x" in str(e) or "feature" in str(e), str(e))

print(f"{passed} passed, 0 failed")

#!/usr/bin/env python3
"""Batched predictions under wrk: single-row predicts with variance on an exact GP, from
many connections, against mercer with batching at several delays (MERCER_BATCH_DELAY_US,
0 = off) and, when given, a running peer service of the same HTTP contract, in one run.

    python3 scripts/bench_batching.py --mercer target/release/mercer [--peer URL]
        [--cases 5000:64,1000:16] [--delays 0,50,200,1000] [--seconds 10]

Each case is N:CONNECTIONS: a GP fitted on N rows (d = 3, rbf, noise 0.01: its factor is
N^2 doubles, 200 MB at N = 5000) and wrk on POST /models/{id}/predict with one row and
`variance: true`. Prints a Markdown table (req/s, p50, p99, rows per predict call) with
the CPU model. Standard library and wrk only.
"""
import argparse
import http.client
import json
import os
import platform
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse

WRK_LUA = r"""
local f = assert(io.open(os.getenv("BENCH_BODY_FILE"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("BENCH_JSON {\"requests\":%d,\"duration_us\":%d,\"errors\":%d,\"non2xx\":%d,\"p50_us\":%d,\"p99_us\":%d}\n",
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout, e.status,
    latency:percentile(50), latency:percentile(99)))
end
"""


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def call(url, method, path, body=None, timeout=600):
    u = urllib.parse.urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    data = json.dumps(body).encode() if body is not None else None
    c.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
    r = c.getresponse()
    text = r.read().decode()
    c.close()
    return r.status, text


def gp_data(n):
    # A smooth function of three features plus noise, rows in no order.
    x, y = [], []
    state = 12345
    for _ in range(n):
        row = []
        for _ in range(3):
            state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
            row.append((state >> 11) / float(1 << 53) * 4.0 - 2.0)
        x.append(row)
        state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        noise = ((state >> 11) / float(1 << 53) - 0.5) * 0.2
        y.append(sum(v * v for v in row) ** 0.5 * 0.7 + noise)
    return x, y


def fit(url, n):
    x, y = gp_data(n)
    body = {"model": "gaussian_process", "kernel": {"type": "rbf", "length_scale": 1.0},
            "params": {"noise": 0.01}, "x": x, "y": y}
    status, text = call(url, "POST", "/models", body)
    if status != 201:
        raise RuntimeError(f"fit failed at {url}: {status} {text[:300]}")
    return json.loads(text)["id"]


def wrk(url, body, connections, seconds):
    with tempfile.TemporaryDirectory() as tmp:
        bf, lf = os.path.join(tmp, "body.json"), os.path.join(tmp, "post.lua")
        open(bf, "w").write(json.dumps(body))
        open(lf, "w").write(WRK_LUA)
        env = dict(os.environ, BENCH_BODY_FILE=bf)
        threads = min(connections, os.cpu_count() or 1)

        def run(d):
            out = subprocess.run(["wrk", f"-t{threads}", f"-c{connections}", f"-d{d}s", "--timeout", "30s", "-s", lf,
                                  url], env=env, capture_output=True, text=True, timeout=d + 120)
            for line in out.stdout.splitlines():
                if line.startswith("BENCH_JSON "):
                    return json.loads(line[len("BENCH_JSON "):])
            raise RuntimeError(f"wrk gave no result: {out.stdout[-400:]} {out.stderr[-400:]}")

        run(2)  # warm-up: the model decoded, connections open
        r = run(seconds)
    secs = r["duration_us"] / 1e6
    return {"rps": (r["requests"] - r["non2xx"]) / secs, "p50": r["p50_us"] / 1000, "p99": r["p99_us"] / 1000,
            "failures": r["errors"] + r["non2xx"]}


def metric(url, name):
    _, text = call(url, "GET", "/metrics")
    m = re.search(rf"^{name} ([0-9.e+-]+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def start(binary, delay):
    port = free_port()
    env = dict(os.environ, MERCER_BIND=f"127.0.0.1:{port}", MERCER_DATA_DIR="", MERCER_LOG="warn",
               MERCER_BATCH_DELAY_US=str(delay), MERCER_MAX_BODY_BYTES=str(1 << 28))
    proc = subprocess.Popen([binary], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if call(url, "GET", "/readyz", timeout=2)[0] == 200:
                return proc, url
        except OSError:
            pass
        time.sleep(0.05)  # polling for the server to listen
    proc.kill()
    raise RuntimeError("mercer did not start")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mercer", required=True)
    p.add_argument("--peer", help="URL of a running peer service (same contract)")
    p.add_argument("--cases", default="5000:64,1000:16")
    p.add_argument("--delays", default="0,50,200,1000")
    p.add_argument("--seconds", type=int, default=10)
    a = p.parse_args()
    cases = [tuple(int(v) for v in c.split(":")) for c in a.cases.split(",")]
    delays = [int(d) for d in a.delays.split(",")]
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; wrk {a.seconds} s per row after a 2 s warm-up", flush=True)
    print("| GP rows | connections | server | req/s | p50 ms | p99 ms | rows per call | failures |")
    print("|---|---|---|---|---|---|---|---|")
    query = {"x": [[0.3, -0.7, 1.1]], "variance": True}
    for n, conns in cases:
        for delay in delays:
            proc, url = start(a.mercer, delay)
            try:
                mid = fit(url, n)
                r = wrk(f"{url}/models/{mid}/predict", query, conns, a.seconds)
                calls = metric(url, "mercer_predict_batch_rows_count")
                rows = metric(url, "mercer_predict_batch_rows_sum")
                per_call = f"{rows / calls:.1f}" if calls else "-"
                label = "mercer, batching off" if delay == 0 else f"mercer, delay {delay} us"
                print(f"| {n} | {conns} | {label} | {r['rps']:.0f} | {r['p50']:.2f} | {r['p99']:.2f} | {per_call} | "
                      f"{r['failures']} |", flush=True)
            finally:
                proc.terminate()
                proc.wait(timeout=30)
        if a.peer:
            mid = fit(a.peer, n)
            r = wrk(f"{a.peer}/models/{mid}/predict", query, conns, a.seconds)
            print(f"| {n} | {conns} | peer | {r['rps']:.0f} | {r['p50']:.2f} | {r['p99']:.2f} | - | {r['failures']} |",
                  flush=True)
            call(a.peer, "DELETE", f"/models/{mid}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

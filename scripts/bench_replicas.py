#!/usr/bin/env python3
"""Replica latencies over a real S3-compatible store (s3s-fs on loopback): GP models of
n = 1000 and 10,000 fitted through replica 1; predict latency on replica 2 at first use
(store read + decode) and once cached; the fit time the S3 PUT adds (from replica 1's
mercer_store_request_duration_seconds). Prints a markdown table for BENCHMARKS.md.

    scripts/bench_replicas.py target/release/mercer [--sizes 1000,10000] [--repeats 3]

Needs s3s-fs on PATH (scripts/install_cluster_tools.sh).
"""
import argparse, json, os, random, re, shutil, signal, socket, statistics, subprocess, sys, tempfile, time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(method, url, body=None, timeout=600):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"content-type": "application/json"})
    t = time.perf_counter()
    with urllib.request.urlopen(req, timeout=timeout) as r:
        out = r.read()
    return time.perf_counter() - t, out


def wait_ready(url, deadline=60):
    end = time.time() + deadline
    while time.time() < end:
        try:
            call("GET", url + "/readyz", timeout=2)
            return
        except Exception:
            time.sleep(0.1)
    sys.exit(f"{url} not ready")


def put_seconds(url):
    _, text = call("GET", url + "/metrics")
    m = re.search(r'mercer_store_request_duration_seconds_sum\{op="put",outcome="ok"\} (\S+)', text.decode())
    return float(m.group(1)) if m else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="mercer-bench-replicas.")
    procs = []
    try:
        s3_port = free_port()
        os.makedirs(f"{tmp}/s3/mercer")
        procs.append(subprocess.Popen(
            ["s3s-fs", "--host", "127.0.0.1", "--port", str(s3_port), "--access-key", "k", "--secret-key", "secret-key",
             f"{tmp}/s3"], stdout=subprocess.DEVNULL, stderr=open(f"{tmp}/s3.log", "w")))
        urls = []
        for i in (1, 2):
            port = free_port()
            env = dict(os.environ, MERCER_BIND=f"127.0.0.1:{port}", MERCER_STORE_URL="s3://mercer/bench",
                       MERCER_DATA_DIR=f"{tmp}/r{i}", AWS_ACCESS_KEY_ID="k", AWS_SECRET_ACCESS_KEY="secret-key",
                       AWS_REGION="us-east-1", AWS_ENDPOINT_URL=f"http://127.0.0.1:{s3_port}", AWS_ALLOW_HTTP="true",
                       MERCER_LOG="warn", MERCER_MAX_BODY_BYTES=str(256 << 20))
            procs.append(subprocess.Popen([args.binary], env=env, stdout=subprocess.DEVNULL,
                                          stderr=open(f"{tmp}/r{i}.log", "w")))
            urls.append(f"http://127.0.0.1:{port}")
        for u in urls:
            wait_ready(u)
        rng = random.Random(0)
        query = {"x": [[rng.uniform(-3, 3) for _ in range(5)] for _ in range(100)], "variance": True}
        print("| n | fit (replica 1) | of which S3 PUT | stored MB | first predict on replica 2 (read + decode) | cached predict (100 rows + variance) |")
        print("|---|---|---|---|---|---|")
        for n in [int(s) for s in args.sizes.split(",")]:
            x = [[rng.uniform(-3, 3) for _ in range(5)] for _ in range(n)]
            y = [sum(r) / 5 + 0.1 * rng.gauss(0, 1) for r in x]
            body = {"model": "gaussian_process", "kernel": {"type": "rbf", "length_scale": 2.0},
                    "params": {"noise": 0.01}, "x": x, "y": y}
            fits, puts, firsts, cached = [], [], [], []
            size_mb = 0.0
            for _ in range(args.repeats):
                before = put_seconds(urls[0])
                t, out = call("POST", urls[0] + "/models", body)
                fits.append(t)
                puts.append(put_seconds(urls[0]) - before)
                model = json.loads(out)
                obj = f"{tmp}/s3/mercer/bench/{model['id']}.model"
                size_mb = os.path.getsize(obj) / 1e6
                t, _ = call("POST", f"{urls[1]}/models/{model['id']}/predict", query)
                firsts.append(t)
                for _ in range(20):
                    t, _ = call("POST", f"{urls[1]}/models/{model['id']}/predict", query)
                    cached.append(t)
                call("DELETE", f"{urls[0]}/models/{model['id']}")
            ms = lambda v: f"{statistics.median(v) * 1e3:.1f} ms"
            print(f"| {n} | {ms(fits)} | {ms(puts)} | {size_mb:.1f} | {ms(firsts)} | {ms(cached)} |", flush=True)
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=40)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

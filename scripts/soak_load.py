#!/usr/bin/env python3
"""The mixed load of scripts/soak.sh: fits (waited for and not), predictions, appends,
deletes, dataset uploads and CLI calls against two replicas, for a given time, plus
uploaders that only post CSV datasets to the stable replica; then the check that
everything acknowledged is there. Every request is on a new connection.

    python3 scripts/soak_load.py --stable URL --other URL [--balancer URL] --seconds N --mercer BIN --out FILE
    python3 scripts/soak_load.py --verify FILE --stable URL --other URL

The stable replica is never killed: every request to it must be answered (a connection
that ends without an answer is a failure), and its only 5xx may be 503 with Retry-After.
The same holds for the balancer (haproxy in front of both, which re-sends a request that a
killed replica dropped), which takes a quarter of the requests when given.
Requests to the other replica, which soak.sh kills -9 every 30 s, may also fail to connect
while it is down (counted apart). Every acknowledged model (with the version and the
predictions its last acknowledged write answered) and dataset is recorded in FILE; --verify
reads each back from both replicas, allowing them --settle seconds (default 10) to show the
last writes, which reach the replica that did not acknowledge them at its next refresh.
Standard library only.
"""
import argparse
import gzip
import http.client
import json
import os
import random
import re
import subprocess
import sys
import threading
import time
import urllib.parse
import zlib

X = [[i / 8.0] for i in range(24)]
QUERY = {"x": [[0.3], [1.7], [2.9]], "variance": False}
# Live models and datasets kept at most (older ones are deleted).
LIVE = 30
# Each uploader's pace.
UPLOADS_PER_SECOND = 12
# Deleted models and datasets read again at the end (the last ones deleted; reads during
# the load cover the others).
FINAL_DELETED = 300
# Suggestions a study takes before the load replaces it.
STUDY_TRIALS = 40


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}
        self.failures = []

    def add(self, kind, failure=None):
        with self.lock:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            if failure and len(self.failures) < 50:
                self.failures.append(failure)


def call(url, method, path, body=None, content_type="application/json", timeout=60, split=False):
    """(status, headers, parsed body) or raises the connection error. Each call on a new
    connection. `split`: as requests (urllib3) sends a request: the head and the body in
    two sends, and its headers (compressed answers accepted)."""
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        headers = {"Content-Type": content_type} if data is not None else {}
        if split and data is not None:
            conn.putrequest(method, path, skip_accept_encoding=True)
            for k, v in {**headers, "Content-Length": str(len(data)), "Accept-Encoding": "gzip, deflate",
                         "Accept": "*/*", "Connection": "keep-alive", "User-Agent": "soak-uploader"}.items():
                conn.putheader(k, v)
            conn.endheaders()
            conn.send(data)
        else:
            conn.request(method, path, body=data, headers=headers)
        r = conn.getresponse()
        raw = r.read()
        if r.getheader("Content-Encoding", "").lower() == "gzip":
            raw = gzip.decompress(raw)
        elif r.getheader("Content-Encoding", "").lower() == "deflate":
            raw = zlib.decompress(raw)
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw.decode(errors="replace")
        return r.status, {k.lower(): v for k, v in r.getheaders()}, parsed
    finally:
        conn.close()


ROUTES = [  # (method, path pattern, kind): what each request is in the history
    ("POST", r"/models(\?.*)?", "fit"),
    ("GET", r"/models/([0-9a-f-]{36})", "read"),
    ("POST", r"/models/([0-9a-f-]{36})/predict", "predict"),
    ("POST", r"/models/([0-9a-f-]{36})/observations", "append"),
    ("DELETE", r"/models/([0-9a-f-]{36})", "delete"),
    ("POST", r"/datasets", "upload"),
    ("GET", r"/datasets/([0-9a-f-]{36})", "read-dataset"),
    ("DELETE", r"/datasets/([0-9a-f-]{36})", "delete-dataset"),
    ("POST", r"/studies", "study-create"),
    ("POST", r"/studies/([0-9a-f-]{36})/suggest", "suggest"),
    ("POST", r"/studies/([0-9a-f-]{36})/trials/([0-9a-f-]+)", "tell"),
    ("GET", r"/studies/([0-9a-f-]{36})", "read-study"),
    ("DELETE", r"/studies/([0-9a-f-]{36})", "study-delete"),
    ("PUT", r"/aliases/([A-Za-z0-9._-]+)", "alias-set"),
    ("GET", r"/aliases/([A-Za-z0-9._-]+)", "alias-read"),
]
# The alias the load sets and reads, over two models of its own that it never deletes.
ALIAS = "soak-champion"


class History:
    """Every request as an operation: who sent it (proc), to which replica (target) and
    which answered it (node), its kind, when it was invoked and completed (Unix seconds),
    its status (None: no answer) and what it said (ids, versions,
    predictions, trials). scripts/check_history.py reads it."""

    def __init__(self, path, mode="w"):
        self.lock = threading.Lock()
        self.out = open(path, mode) if path else None

    def record(self, proc, target, node, method, path, invoke, complete, status, headers, body, final=False):
        if self.out is None:
            return
        kind, groups = None, ()
        for m, pattern, k in ROUTES:
            match = re.fullmatch(pattern, path)
            if m == method and match:
                kind, groups = k, match.groups()
                break
        if kind is None:
            return
        op = {"proc": proc, "target": target, "node": node, "kind": kind, "invoke": round(invoke, 6),
              "complete": round(complete, 6), "status": status}
        if final:
            op["final"] = True
        if groups and groups[0] and kind not in ("fit",):
            op["id"] = groups[0]
        body = body if isinstance(body, dict) else {}
        if kind in ("fit", "upload", "study-create") and status in (200, 201, 202):
            op["id"] = body.get("id")
        if kind in ("fit", "read", "append") and status in (200, 201, 202):
            op["version"] = body.get("version")
            op["state"] = body.get("status")
        if kind == "predict" and status == 200:
            v = (headers or {}).get("x-mercer-model-version")
            op["version"] = int(v) if v else None
            op["predictions"] = body.get("predictions")
        if kind == "suggest" and status == 200:
            op["trials"] = [str(t["id"]) for t in body.get("trials", [])]
        if kind == "tell":
            op["trial"] = str(groups[1])
            op["value"] = body.get("value") if status == 200 else None
        if kind in ("alias-set", "alias-read"):
            op["name"] = groups[0]
            if status in (200, 201):
                op["generation"] = body.get("generation")
        if kind == "read-study" and status == 200:
            op["trials"] = {str(t["id"]): {"state": t.get("state"), "value": t.get("value")}
                            for t in body.get("trials", [])}
        with self.lock:
            self.out.write(json.dumps(op) + "\n")

    def close(self):
        if self.out:
            self.out.close()


class Load:
    def __init__(self, a):
        self.a, self.tally = a, Tally()
        self.history = History(a.history)
        self.study, self.study_suggested = None, 0
        self.alias_models = []
        self.lock = threading.Lock()
        self.models = {}     # id -> {"version": v, "predictions": [...]} (acknowledged)
        self.datasets = {}   # insertion-ordered: id -> None
        self.deleted = set()
        self.deleted_datasets = set()
        self.stop = time.monotonic() + a.seconds

    def request(self, replica, method, path, body=None, content_type="application/json", split=False):
        """One request, classified; (status, body, who) or None when it got no answer. `who`
        is the replica that answered: for the balancer, the one its X-Backend header names,
        so that a write's follow-up reads (its version, its predictions) go where it landed
        (another replica sees a new version only at its next refresh)."""
        url = {"stable": self.a.stable, "other": self.a.other, "balancer": self.a.balancer}[replica]
        proc = threading.current_thread().name
        invoke = time.time()  # the wall clock: --verify's final reads are another process's
        try:
            status, headers, parsed = call(url, method, path, body, content_type, split=split)
        except (OSError, http.client.HTTPException) as e:
            self.history.record(proc, replica, None, method, path, invoke, time.time(), None, None, None)
            if replica != "other":
                self.tally.add(f"{replica}: no answer", f"{replica} {method} {path}: {e!r}")
            else:
                self.tally.add("other: no answer (down)")
            return None
        node = replica
        if replica == "balancer":
            node = {"r1": "stable", "r2": "other"}.get(headers.get("x-backend"))
        sent = body if isinstance(body, dict) else {}
        told = {"value": sent.get("value")} if method == "POST" and "/trials/" in path and status == 200 else parsed
        self.history.record(proc, replica, node, method, path, invoke, time.time(), status, headers, told)
        if status >= 500 and not (status == 503 and "retry-after" in headers):
            self.tally.add(f"{replica}: {status} (failure)", f"{replica} {method} {path}: {status} {str(parsed)[:200]}")
        else:
            self.tally.add(f"{replica}: {status}")
        who = replica
        if replica == "balancer":
            who = {"r1": "stable", "r2": "other"}.get(headers.get("x-backend"), "balancer")
        return status, parsed, who

    def fit(self, replica, wait):
        y = [((i / 8.0) * random.uniform(0.5, 2.0)) % 3.0 for i in range(24)]
        body = {"model": "gaussian_process", "kernel": {"type": "rbf", "length_scale": 1.0},
                "params": {"noise": 0.01}, "x": X, "y": y, "name": "soak"}
        got = self.request(replica, "POST", "/models" + ("" if wait else "?wait=false"), body)
        if not got or got[0] not in (201, 202):
            return
        mid, replica = got[1]["id"], got[2]
        if got[0] == 202:
            for _ in range(100):
                st = self.request(replica, "GET", f"/models/{mid}")
                if st and st[0] == 200 and st[1]["status"] in ("ready", "failed"):
                    if st[1]["status"] == "failed":
                        return
                    break
                time.sleep(0.1)  # polling interval of a 202's client
            else:
                return
        self.remember(replica, mid)
        self.trim(replica)

    def trim(self, replica):
        """Keeps the live models and datasets at most LIVE each (the oldest deleted), so
        that a long run reaches a steady state whose memory can be judged flat."""
        with self.lock:
            while len(self.models) > LIVE:
                mid = next(iter(self.models))
                got = self.request(replica, "DELETE", f"/models/{mid}")
                if not got or got[0] not in (204, 404):
                    break
                self.models.pop(mid)
                self.deleted.add(mid)
            while len(self.datasets) > LIVE:
                ds = next(iter(self.datasets))
                got = self.request(replica, "DELETE", f"/datasets/{ds}")
                if not got or got[0] not in (204, 404):
                    break
                self.datasets.pop(ds)
                self.deleted_datasets.add(ds)

    def remember(self, replica, mid):
        got = self.request(replica, "POST", f"/models/{mid}/predict", QUERY)
        st = self.request(replica, "GET", f"/models/{mid}")
        if got and got[0] == 200 and st and st[0] == 200:
            with self.lock:
                if mid not in self.deleted:
                    self.models[mid] = {"version": st[1]["version"], "predictions": got[1]["predictions"]}

    def pick(self):
        with self.lock:
            return random.choice(list(self.models)) if self.models else None

    def append(self, replica):
        mid = self.pick()
        if mid is None:
            return
        # Appends of one model go through one lock here so that the acknowledged version
        # and predictions are those of the last acknowledged append.
        with self.lock:
            if mid in self.deleted:
                return
            got = self.request(replica, "POST", f"/models/{mid}/observations",
                               {"x": [[random.uniform(0, 3)]], "y": [random.uniform(-1, 1)]})
            if got and got[0] == 200:
                p = self.request(got[2], "POST", f"/models/{mid}/predict", QUERY)
                if p and p[0] == 200:
                    self.models[mid] = {"version": got[1]["version"], "predictions": p[1]["predictions"]}
                else:
                    self.models.pop(mid, None)  # acknowledged but not read back: not checked

    def delete(self, replica):
        mid = self.pick()
        if mid is None or random.random() < 0.5:
            return
        with self.lock:
            got = self.request(replica, "DELETE", f"/models/{mid}")
            if got and got[0] in (204, 404):
                self.models.pop(mid, None)
                self.deleted.add(mid)

    def upload(self, replica, rows=None, split=False):
        n = rows or random.randint(50, 400)
        rows = "\n".join(f"{i / 10},{(i * 7) % 5},{i % 3}" for i in range(n))
        got = self.request(replica, "POST", "/datasets", ("a,b,y\n" + rows + "\n").encode(), "text/csv", split)
        if got and got[0] == 201:
            with self.lock:
                self.datasets[got[1]["id"]] = None
            self.trim(replica)

    def predict(self, replica):
        mid = self.pick()
        if mid is not None:
            self.request(replica, "POST", f"/models/{mid}/predict", QUERY)

    def cli(self, replica):
        url = {"stable": self.a.stable, "other": self.a.other, "balancer": self.a.balancer}[replica]
        r = subprocess.run([self.a.mercer, "models", "--json"], env=dict(os.environ, MERCER_URL=url),
                           capture_output=True, text=True, timeout=60)
        self.tally.add(f"{replica}: cli exit {r.returncode}",
                       None if r.returncode == 0 or replica == "other" else f"{replica} cli: {r.stderr[:200]}")

    def new_study(self, replica):
        got = self.request(replica, "POST", "/studies", {"name": "soak", "space": {"x": {"uniform": [-5, 5]}},
                                                         "direction": "minimize", "seed": 1, "initial": 4})
        return got[1]["id"] if got and got[0] == 201 else None

    def study_step(self, replica):
        """Suggest a trial of the shared study and tell its value, through any replica.
        After STUDY_TRIALS suggestions the study is replaced by a new one and deleted, so
        that a long run keeps a steady state (each suggestion's surrogate grows with the
        trials)."""
        with self.lock:
            study = self.study
            self.study_suggested += 1
            if self.study_suggested > STUDY_TRIALS:
                fresh = self.new_study(replica)
                if fresh:
                    self.study, self.study_suggested = fresh, 0
                    self.request(replica, "DELETE", f"/studies/{study}")
                    study = fresh
        if study is None:
            return
        got = self.request(replica, "POST", f"/studies/{study}/suggest", {"count": 1})
        if not got or got[0] != 200 or not got[1].get("trials"):
            return
        trial = got[1]["trials"][0]
        x = trial["values"]["x"]
        teller = random.choice(["stable", "other", "balancer"] if self.a.balancer else ["stable", "other"])
        self.request(teller, "POST", f"/studies/{study}/trials/{trial['id']}", {"value": (x - 1.0) ** 2})

    def new_alias(self, replica):
        """Two models of the alias's own (never in `models`, so never deleted) and the
        alias set to the first."""
        for k in range(2):
            y = [((i / 8.0) * (1.0 + k)) % 3.0 for i in range(24)]
            got = self.request(replica, "POST", "/models", {"model": "gaussian_process", "x": X, "y": y,
                                                            "params": {"noise": 0.01}, "name": "soak-alias"})
            if got and got[0] == 201:
                self.alias_models.append(got[1]["id"])
        if len(self.alias_models) == 2:
            self.request(replica, "PUT", f"/aliases/{ALIAS}", {"model": self.alias_models[0]})

    def alias_step(self, replica):
        """Issue 54's traffic: the alias set (one model, or a 90/10 canary either way
        round), read, and predicted through, on any replica."""
        if len(self.alias_models) != 2:
            return
        a, b = random.sample(self.alias_models, 2)
        u = random.random()
        if u < 0.3:
            body = {"model": a} if u < 0.15 else {"routes": [{"model": a, "weight": 90}, {"model": b, "weight": 10}]}
            self.request(replica, "PUT", f"/aliases/{ALIAS}", body)
        elif u < 0.6:
            self.request(replica, "GET", f"/aliases/{ALIAS}")
        else:
            self.request(replica, "POST", f"/models/{ALIAS}/predict", QUERY)

    def uploader(self):
        """Issue 52's traffic: 200-row CSV uploads of about 12 KB to the stable replica,
        each on a new connection with its head and body sent apart as requests sends
        them, about UPLOADS_PER_SECOND of them through the kills and the store's restart
        (its reporter's rate: 5,900 uploads from 4 clients in 480 s)."""
        next_at = time.monotonic()
        while time.monotonic() < self.stop:
            self.upload("stable", rows=200 + random.randint(0, 40), split=True)
            next_at += 1.0 / UPLOADS_PER_SECOND
            time.sleep(max(0.0, next_at - time.monotonic()))  # the pace of the traffic, not a wait for a state

    def worker(self, seed):
        rnd = random.Random(seed)
        actions = [(self.predict, 50), (self.fit, 10), (self.append, 12), (self.upload, 10),
                   (self.delete, 4), (self.cli, 2), (self.study_step, 4), (self.alias_step, 4)]
        while time.monotonic() < self.stop:
            u = rnd.random()
            if self.a.balancer:
                replica = "stable" if u < 0.5 else "balancer" if u < 0.75 else "other"
            else:
                replica = "stable" if u < 0.7 else "other"
            action = rnd.choices([a for a, _ in actions], [w for _, w in actions])[0]
            if action == self.fit:
                self.fit(replica, wait=rnd.random() < 0.7)
            else:
                action(replica)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stable", required=True)
    p.add_argument("--other", required=True)
    p.add_argument("--balancer")
    p.add_argument("--seconds", type=float, default=180)
    p.add_argument("--mercer")
    p.add_argument("--out")
    p.add_argument("--verify")
    p.add_argument("--settle", type=float, default=10.0,
                   help="--verify: seconds the replicas may take to show the last writes (their refresh)")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--history", help="write every operation here (JSON lines; --verify appends its last reads)")
    p.add_argument("--uploaders", type=int, default=1,
                   help="threads that only upload CSV datasets to the stable replica, a new connection each")
    a = p.parse_args()
    if a.verify:
        return verify(a)
    load = Load(a)
    load.study = load.new_study("stable")
    load.new_alias("stable")
    threads = [threading.Thread(target=load.worker, args=(i,), name=f"worker-{i}") for i in range(a.workers)]
    threads += [threading.Thread(target=load.uploader, name=f"uploader-{i}") for i in range(a.uploaders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    load.history.close()
    out = {"counts": load.tally.counts, "failures": load.tally.failures,
           "models": load.models, "datasets": sorted(load.datasets), "deleted": sorted(load.deleted),
           "deleted_datasets": sorted(load.deleted_datasets), "study": load.study, "alias": ALIAS}
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    total = sum(load.tally.counts.values())
    print(f"soak load: {total} requests, {len(load.models)} models and {len(load.datasets)} datasets acknowledged, "
          f"{len(load.tally.failures)} failures")
    for k in sorted(load.tally.counts):
        print(f"  {k}: {load.tally.counts[k]}")
    for f in load.tally.failures[:20]:
        print(f"  FAILURE {f}")
    return 1 if load.tally.failures else 0


def verify(a):
    with open(a.verify) as f:
        rec = json.load(f)
    # A write acknowledged by one replica reaches the other at its next refresh (the
    # contract): the last writes of the load may not have yet. Checked again until
    # everything holds or --settle seconds have passed; what still differs then fails.
    started = time.monotonic()
    first = None
    while True:
        bad = problems(rec, a)
        first = bad if first is None else first
        if not bad or time.monotonic() >= started + a.settle:
            break
        time.sleep(0.25)
    if a.history:
        final_reads(rec, a)
    if first and not bad:
        print(f"soak verify: {len(first)} differences settled within {time.monotonic() - started:.1f} s "
              f"(a replica's refresh), the first: {first[0]}")
    print(f"soak verify: {len(rec['models'])} models, {len(rec['datasets'])} datasets, {len(rec['deleted'])} deleted; "
          f"{len(bad)} problems")
    for b in bad[:30]:
        print(f"  {b}")
    return 1 if bad else 0


def final_reads(rec, a):
    """One read of every model, dataset and study the load touched and did not delete,
    and of the last FINAL_DELETED of each it deleted, on each replica, appended to the
    history as final: what the checker holds the acknowledged writes to."""
    history = History(a.history, "a")
    with open(a.history) as f:
        ops = [json.loads(line) for line in f if line.strip()]
    def touched(kinds, delete):
        """Every id of these kinds not deleted, and the last FINAL_DELETED deleted."""
        ids, deleted = {}, {}
        for o in ops:
            if o["kind"] in kinds and o.get("id"):
                ids.setdefault(o["id"], o["invoke"])
                if o["kind"] == delete:
                    deleted[o["id"]] = o["invoke"]
        recent = sorted(deleted, key=deleted.get)[-FINAL_DELETED:]
        return sorted(set(ids) - set(deleted)) + recent

    models = touched(("fit", "read", "append", "delete"), "delete")
    datasets = touched(("upload", "read-dataset", "delete-dataset"), "delete-dataset")
    studies = touched(("study-create", "study-delete"), "study-delete")
    aliases = sorted({o["name"] for o in ops if o["kind"] in ("alias-set", "alias-read") and o.get("name")})
    for name, url in (("stable", a.stable), ("other", a.other)):
        reads = [("GET", f"/models/{m}", None) for m in models] + \
                [("POST", f"/models/{m}/predict", QUERY) for m in rec["models"]] + \
                [("GET", f"/datasets/{d}", None) for d in datasets] + [("GET", f"/studies/{s}", None) for s in studies] + \
                [("GET", f"/aliases/{n}", None) for n in aliases]
        for method, path, body in reads:
            invoke = time.time()
            try:
                status, headers, parsed = call(url, method, path, body)
            except (OSError, http.client.HTTPException):
                status, headers, parsed = None, None, None
            history.record("final", name, name, method, path, invoke, time.time(), status, headers, parsed,
                           final=True)
    history.close()


def problems(rec, a):
    """What differs from the record on either replica now."""
    bad = []
    for url in (a.stable, a.other):
        for mid, want in rec["models"].items():
            status, _, m = call(url, "GET", f"/models/{mid}")
            if status != 200 or m["version"] != want["version"]:
                bad.append(f"{url} model {mid}: {status} version {m and m.get('version')} (acknowledged {want['version']})")
                continue
            status, _, got = call(url, "POST", f"/models/{mid}/predict", QUERY)
            if status != 200 or got["predictions"] != want["predictions"]:
                bad.append(f"{url} model {mid}: predictions differ from the acknowledged ones")
        for ds in rec["datasets"]:
            status, _, _ = call(url, "GET", f"/datasets/{ds}")
            if status != 200:
                bad.append(f"{url} dataset {ds}: {status}")
        for mid in rec["deleted"]:
            status, _, _ = call(url, "GET", f"/models/{mid}")
            if status != 404:
                bad.append(f"{url} deleted model {mid}: {status}")
        for ds in rec.get("deleted_datasets", []):
            status, _, _ = call(url, "GET", f"/datasets/{ds}")
            if status != 404:
                bad.append(f"{url} deleted dataset {ds}: {status}")
    return bad


if __name__ == "__main__":
    sys.exit(main())

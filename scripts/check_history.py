#!/usr/bin/env python3
"""Checks a history of operations against two or more replicas sharing a store, as
Jepsen's checkers do: what was acknowledged must be there at the end, what was deleted
must stay deleted, and each replica must never go back in time.

    python3 scripts/check_history.py HISTORY [--settle SECONDS] [--json OUT]

HISTORY holds one operation per line (scripts/soak_load.py --history writes it): `proc`
(who sent it), `target` and `node` (the replica asked and the one that answered; None when
no answer came), `kind`, `invoke` and `complete` (Unix seconds), `status` (None: no
answer), and what the answer said: `id`, `version`, `state`, `predictions`, `trials`,
`trial`, `value`, `name`, `generation`. Operations with `final` are the reads made once the
load stopped; the acknowledged writes are held to the last final read of each node.

Anomalies found (each printed with the operations that show it; exit 1 if any):

- lost-model, lost-dataset: acknowledged (a fit answered 201, or 202 and then read as
  ready; an upload answered 201), never the target of a delete, and not found (or not
  ready) by a node's last final read.
- lost-version: a node's last final read of a model shows a version below one an append
  acknowledged.
- lost-trial: a trial a suggestion answered with, or a value a tell acknowledged, missing
  from a node's last final read of the study (or with another value or state), for
  studies never the target of a delete.
- lost-alias: a node's last final read of an alias shows a generation below one a setting
  acknowledged.
- deleted-visible: a model or dataset answered 200 by any node for an operation invoked
  more than SETTLE seconds after a delete of it completed with 204 (default 3: the
  refresh interval of 1 s and 2 s).
- version-regression, alias-regression: on one node, an operation invoked after another
  completed shows an older model version (or alias generation) than it.
- prediction-mismatch: two predictions of one model that name the same version
  (X-Mercer-Model-Version) differ, bit for bit, for the same query rows.
Standard library only.
"""
import argparse
import json
import sys
from collections import defaultdict

READS = ("read", "predict", "append")


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def brief(op):
    keep = ("proc", "node", "kind", "id", "status", "version", "generation", "invoke", "complete", "final")
    return {k: op[k] for k in keep if k in op}


def last_final(ops, kind):
    """(node, id) -> the last final read of that kind."""
    last = {}
    for op in ops:
        if op.get("final") and op["kind"] == kind and op.get("id"):
            key = (op["node"], op["id"])
            if key not in last or op["invoke"] >= last[key]["invoke"]:
                last[key] = op
    return last


def nodes_of(ops):
    return sorted({op["node"] for op in ops if op.get("final") and op.get("node")})


def check(ops, settle=3.0):
    """The anomalies in `ops`: a list of {"anomaly", "id", "detail", "ops"}."""
    found = []

    def anomaly(kind, ident, detail, *shown):
        found.append({"anomaly": kind, "id": ident, "detail": detail, "ops": [brief(o) for o in shown]})

    nodes = nodes_of(ops)
    delete_invoked = defaultdict(set)  # kind of resource -> ids with any delete sent
    deleted_at = {}                    # (resource, id) -> the earliest completion of a 204 delete
    for op in ops:
        if op["kind"] in ("delete", "delete-dataset") and op.get("id"):
            resource = "model" if op["kind"] == "delete" else "dataset"
            delete_invoked[resource].add(op["id"])
            if op["status"] == 204:
                key = (resource, op["id"])
                deleted_at[key] = min(deleted_at.get(key, op["complete"]), op["complete"])

    # Acknowledged models and versions.
    acked_model = {}
    acked_version = defaultdict(int)
    ready_seen = {op["id"] for op in ops if op["kind"] == "read" and op["status"] == 200 and op.get("state") == "ready"}
    for op in ops:
        if op["kind"] == "fit" and op.get("id") and (op["status"] == 201 or (op["status"] == 202 and op["id"] in ready_seen)):
            acked_model[op["id"]] = op
            acked_version[op["id"]] = max(acked_version[op["id"]], 1)
        if op["kind"] == "append" and op["status"] == 200 and op.get("version"):
            acked_version[op["id"]] = max(acked_version[op["id"]], op["version"])
    final_models = last_final(ops, "read")
    for mid, fit in acked_model.items():
        if mid in delete_invoked["model"]:
            continue
        for node in nodes:
            last = final_models.get((node, mid))
            if last is None or last["status"] != 200 or last.get("state") not in (None, "ready"):
                anomaly("lost-model", mid, f"acknowledged, never deleted, and {node}'s last read found "
                        f"{'nothing' if last is None else last['status']}", fit, *([last] if last else []))
            elif last.get("version") is not None and last["version"] < acked_version[mid]:
                anomaly("lost-version", mid, f"version {acked_version[mid]} was acknowledged; {node}'s last read "
                        f"shows {last['version']}", last)

    # Datasets.
    final_datasets = last_final(ops, "read-dataset")
    for op in ops:
        if op["kind"] == "upload" and op["status"] == 201 and op.get("id"):
            if op["id"] in delete_invoked["dataset"]:
                continue
            for node in nodes:
                last = final_datasets.get((node, op["id"]))
                if last is None or last["status"] != 200:
                    anomaly("lost-dataset", op["id"], f"acknowledged, never deleted, and {node}'s last read found "
                            f"{'nothing' if last is None else last['status']}", op, *([last] if last else []))

    # Deleted and still visible.
    for op in ops:
        if op["status"] != 200 or not op.get("id"):
            continue
        resource = "model" if op["kind"] in READS else "dataset" if op["kind"] == "read-dataset" else None
        at = deleted_at.get((resource, op["id"]))
        if at is not None and op["invoke"] > at + settle:
            anomaly("deleted-visible", op["id"], f"{op['node']} answered 200 {op['invoke'] - at:.2f} s after the "
                    f"delete's 204 (allowed {settle} s)", op)

    # Versions never go back on one node.
    found += regressions(ops, "version", lambda o: o["kind"] in READS and o["status"] in (200,), "version-regression")

    # Same model, same version, same predictions.
    first_of = {}
    for op in ops:
        if op["kind"] == "predict" and op["status"] == 200 and op.get("version") is not None:
            key = (op["id"], op["version"])
            if key not in first_of:
                first_of[key] = op
            elif op.get("predictions") != first_of[key].get("predictions"):
                anomaly("prediction-mismatch", op["id"], f"two answers name version {op['version']} and differ",
                        first_of[key], op)

    # Study trials (of studies never the target of a delete).
    final_studies = last_final(ops, "read-study")
    dropped = {op["id"] for op in ops if op["kind"] == "study-delete" and op.get("id")}
    for op in ops:
        study = op.get("id")
        if study in dropped:
            continue
        if op["kind"] == "suggest" and op["status"] == 200:
            for node in nodes:
                last = final_studies.get((node, study))
                trials = (last or {}).get("trials") or {}
                for t in op.get("trials", []):
                    if t not in trials:
                        anomaly("lost-trial", study, f"suggested trial {t} is missing from {node}'s last read", op)
        if op["kind"] == "tell" and op["status"] == 200:
            for node in nodes:
                last = final_studies.get((node, study))
                got = ((last or {}).get("trials") or {}).get(op["trial"])
                if got is None or got.get("state") != "complete" or got.get("value") != op.get("value"):
                    anomaly("lost-trial", study, f"trial {op['trial']} told {op.get('value')}; {node}'s last read "
                            f"shows {got}", op, *([last] if last else []))

    # Aliases (settings acknowledged with their generation).
    acked_generation = defaultdict(int)
    for op in ops:
        if op["kind"] == "alias-set" and op["status"] in (200, 201) and op.get("generation") is not None:
            acked_generation[op["name"]] = max(acked_generation[op["name"]], op["generation"])
    final_aliases = {}
    for op in ops:
        if op.get("final") and op["kind"] == "alias-read":
            key = (op["node"], op["name"])
            if key not in final_aliases or op["invoke"] >= final_aliases[key]["invoke"]:
                final_aliases[key] = op
    for name, generation in acked_generation.items():
        for node in nodes:
            last = final_aliases.get((node, name))
            if last is None or last["status"] != 200 or (last.get("generation") or 0) < generation:
                anomaly("lost-alias", name, f"generation {generation} was acknowledged; {node}'s last read shows "
                        f"{None if last is None else last.get('generation')}", *([last] if last else []))
    found += regressions(ops, "generation", lambda o: o["kind"] in ("alias-set", "alias-read") and o["status"] in (200, 201),
                         "alias-regression", key="name")
    return found


def regressions(ops, field, counts, name, key="id"):
    """On each node, an operation invoked after another one completed must not show a
    smaller `field` of the same object."""
    found = []
    by = defaultdict(list)
    for op in ops:
        if counts(op) and op.get(field) is not None and op.get("node") and op.get(key):
            by[(op["node"], op[key])].append(op)
    for (node, ident), seq in by.items():
        done = sorted(seq, key=lambda o: o["complete"])
        pending = sorted(seq, key=lambda o: o["invoke"])
        best, best_op, i = None, None, 0
        for op in pending:
            while i < len(done) and done[i]["complete"] < op["invoke"]:
                if best is None or done[i][field] > best:
                    best, best_op = done[i][field], done[i]
                i += 1
            if best is not None and op[field] < best:
                found.append({"anomaly": name, "id": ident,
                              "detail": f"on {node}, {field} {op[field]} after {best} had been answered",
                              "ops": [brief(best_op), brief(op)]})
    return found


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("history")
    p.add_argument("--settle", type=float, default=3.0,
                   help="seconds after a delete's 204 within which replicas may still show the object")
    p.add_argument("--json", help="write the anomalies here as JSON")
    a = p.parse_args()
    ops = load(a.history)
    found = check(ops, a.settle)
    kinds = defaultdict(int)
    for op in ops:
        kinds[op["kind"]] += 1
    print(f"history: {len(ops)} operations ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))}), "
          f"{sum(1 for o in ops if o['status'] is None)} unanswered")
    counts = defaultdict(int)
    for f in found:
        counts[f["anomaly"]] += 1
    print(f"history: {len(found)} anomalies" + (": " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items()))
                                                if found else ""))
    for f in found[:20]:
        print(f"  {f['anomaly']} {f['id']}: {f['detail']}")
        for o in f["ops"]:
            print(f"      {json.dumps(o)}")
    if a.json:
        with open(a.json, "w") as out:
            json.dump(found, out, indent=1)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The history checker's own tests: a clean history passes, and each anomaly planted in
it is found, as that anomaly and no other.

    python3 scripts/test_check_history.py
"""
import copy
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_history  # noqa: E402

M, X, D, E, S, T = "m" * 8, "x" * 8, "d" * 8, "e" * 8, "s" * 8, "t1"


def op(kind, node, invoke, status, **said):
    return {"proc": "w0", "target": node, "node": node, "kind": kind, "invoke": invoke, "complete": invoke + 0.05,
            "status": status, **said}


def clean():
    """Two nodes, a model appended to and predicted, one deleted, a dataset, a study trial
    and an alias; then the final reads of both nodes."""
    h = [
        op("fit", "stable", 1.0, 201, id=M, version=1, state="ready"),
        op("read", "other", 2.0, 200, id=M, version=1, state="ready"),
        op("append", "stable", 3.0, 200, id=M, version=2, state="ready"),
        op("predict", "stable", 3.5, 200, id=M, version=2, predictions=[0.25, 1.5]),
        op("read", "other", 3.6, 200, id=M, version=1, state="ready"),   # the other replica is a refresh behind
        op("predict", "other", 6.0, 200, id=M, version=2, predictions=[0.25, 1.5]),
        op("fit", "other", 4.0, 202, id=X, version=1, state="queued"),
        op("read", "other", 4.5, 200, id=X, version=1, state="ready"),
        op("delete", "stable", 10.0, 204, id=X),
        op("read", "other", 11.0, 200, id=X, version=1, state="ready"),  # within the settle time
        op("read", "other", 14.0, 404, id=X),
        op("upload", "stable", 5.0, 201, id=D),
        op("upload", "stable", 5.5, 201, id=E),
        op("delete-dataset", "other", 7.0, 204, id=E),
        op("study-create", "stable", 0.5, 201, id=S),
        op("suggest", "other", 8.0, 200, id=S, trials=[T]),
        op("tell", "stable", 8.5, 200, id=S, trial=T, value=0.5),
        op("append", "other", 20.0, None, id=M),                         # no answer: in doubt, not acknowledged
        {**op("alias-set", "stable", 9.0, 200, generation=2), "name": "champion"},
        {**op("alias-read", "stable", 9.5, 200, generation=2), "name": "champion"},
    ]
    for node in ("stable", "other"):
        t = 30.0 if node == "stable" else 31.0
        h += [
            op("read", node, t, 200, id=M, version=2, state="ready", final=True),
            op("read", node, t + 0.1, 404, id=X, final=True),
            op("read-dataset", node, t + 0.2, 200, id=D, final=True),
            op("read-dataset", node, t + 0.3, 404, id=E, final=True),
            op("read-study", node, t + 0.4, 200, id=S, trials={T: {"state": "complete", "value": 0.5}}, final=True),
            {**op("alias-read", node, t + 0.5, 200, generation=2, final=True), "name": "champion"},
        ]
    return h


def kinds(history, settle=3.0):
    return sorted({a["anomaly"] for a in check_history.check(history, settle)})


def find(history, kind, node=None, ident=None):
    """The index of the first operation of this kind (on this node, of this id)."""
    for i, o in enumerate(history):
        if o["kind"] == kind and (node is None or o["node"] == node) and (ident is None or o.get("id") == ident):
            return i
    raise KeyError(kind)


class Checker(unittest.TestCase):
    def test_a_clean_history_has_no_anomaly(self):
        self.assertEqual(check_history.check(clean()), [])

    def test_a_lost_model(self):
        h = clean()
        final = [i for i, o in enumerate(h) if o.get("final") and o["kind"] == "read" and o["id"] == M]
        h[final[1]] = op("read", "other", 31.0, 404, id=M, final=True)
        self.assertEqual(kinds(h), ["lost-model"])

    def test_a_lost_model_fitted_with_202(self):
        h = clean()
        h.append(op("fit", "stable", 12.0, 202, id="y" * 8, state="queued"))
        h.append(op("read", "stable", 12.5, 200, id="y" * 8, version=1, state="ready"))
        self.assertEqual(kinds(h), ["lost-model"], "ready, never deleted, and no final read finds it")

    def test_a_lost_version(self):
        h = clean()
        i = [i for i, o in enumerate(h) if o.get("final") and o["kind"] == "read" and o["id"] == M][0]
        h[i] = {**h[i], "version": 1}
        # That node had answered version 2 before: going back to 1 is also a regression.
        self.assertEqual(kinds(h), ["lost-version", "version-regression"])

    def test_a_lost_dataset(self):
        h = clean()
        i = [i for i, o in enumerate(h) if o.get("final") and o["kind"] == "read-dataset" and o["id"] == D][1]
        h[i] = {**h[i], "status": 404}
        self.assertEqual(kinds(h), ["lost-dataset"])

    def test_a_deleted_model_visible_after_the_settle_time(self):
        h = clean()
        h.append(op("predict", "stable", 13.2, 200, id=X, version=1, predictions=[0.0]))
        self.assertEqual(kinds(h), ["deleted-visible"])
        self.assertEqual(kinds(h, settle=5.0), [], "within a longer settle time it is allowed")

    def test_a_deleted_model_back_in_the_final_reads(self):
        h = clean()
        i = [i for i, o in enumerate(h) if o.get("final") and o["kind"] == "read" and o["id"] == X][0]
        h[i] = {**h[i], "status": 200, "version": 1, "state": "ready"}
        self.assertEqual(kinds(h), ["deleted-visible"])

    def test_a_deleted_dataset_visible(self):
        h = clean()
        i = [i for i, o in enumerate(h) if o.get("final") and o["kind"] == "read-dataset" and o["id"] == E][0]
        h[i] = {**h[i], "status": 200}
        self.assertEqual(kinds(h), ["deleted-visible"])

    def test_a_version_going_back_on_one_node(self):
        h = clean()
        h.append(op("read", "stable", 4.0, 200, id=M, version=1, state="ready"))
        self.assertEqual(kinds(h), ["version-regression"])

    def test_overlapping_operations_are_not_ordered(self):
        h = clean()
        # Invoked before the append (3.0 - 3.05) completed: it may see either version.
        h.append(op("read", "stable", 3.01, 200, id=M, version=1, state="ready"))
        self.assertEqual(kinds(h), [])

    def test_nodes_are_apart(self):
        h = clean()
        h.append(op("read", "other", 7.0, 200, id=M, version=1, state="ready"))
        self.assertEqual(kinds(h), ["version-regression"], "other had shown version 2 at 6.0")
        h = clean()
        h[find(h, "predict", "other")]["node"] = "third"
        h.append(op("read", "other", 7.0, 200, id=M, version=1, state="ready"))
        self.assertEqual(kinds(h), [], "a node a refresh behind another is not a regression")

    def test_a_prediction_that_differs_for_the_same_version(self):
        h = clean()
        i = find(h, "predict", "other")
        h[i] = {**h[i], "predictions": [0.25, 1.5000000000000002]}
        self.assertEqual(kinds(h), ["prediction-mismatch"])

    def test_a_lost_trial_value(self):
        h = clean()
        i = [i for i, o in enumerate(h) if o.get("final") and o["kind"] == "read-study"][1]
        h[i] = {**h[i], "trials": {T: {"state": "pending", "value": None}}}
        self.assertEqual(kinds(h), ["lost-trial"])

    def test_trials_of_a_deleted_study_are_not_held(self):
        h = clean()
        i = [i for i, o in enumerate(h) if o.get("final") and o["kind"] == "read-study"][1]
        h[i] = {**h[i], "status": 404, "trials": None}
        self.assertEqual(kinds(h), ["lost-trial"])
        h.append(op("study-delete", "other", 25.0, 204, id=S))
        self.assertEqual(kinds(h), [])

    def test_a_lost_suggested_trial(self):
        h = clean()
        h.append(op("suggest", "stable", 9.0, 200, id=S, trials=["t2"]))
        self.assertEqual(kinds(h), ["lost-trial"])

    def test_a_lost_alias_setting(self):
        h = clean()
        i = [i for i, o in enumerate(h) if o.get("final") and o["kind"] == "alias-read"][0]
        h[i] = {**h[i], "generation": 1}
        self.assertIn("lost-alias", kinds(h))

    def test_an_alias_generation_going_back(self):
        h = clean()
        h.append({**op("alias-read", "stable", 12.0, 200, generation=1), "name": "champion"})
        self.assertEqual(kinds(h), ["alias-regression"])

    def test_unanswered_writes_are_in_doubt_not_lost(self):
        h = clean()
        h.append(op("upload", "stable", 12.0, None))
        h.append(op("fit", "other", 12.0, None))
        self.assertEqual(kinds(h), [])

    def test_the_command_exits_1_on_an_anomaly_and_0_on_none(self):
        with tempfile.TemporaryDirectory() as d:
            for history, want in ((clean(), 0), (clean() + [op("read", "stable", 4.0, 200, id=M, version=1)], 1)):
                path = os.path.join(d, "history.jsonl")
                with open(path, "w") as f:
                    f.writelines(json.dumps(o) + "\n" for o in copy.deepcopy(history))
                r = subprocess.run([sys.executable, check_history.__file__, path], capture_output=True, text=True)
                self.assertEqual(r.returncode, want, r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main()

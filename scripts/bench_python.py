"""The Python the benchmark scripts run under: $MERCER_BENCH_PYTHON, else the one running
if it imports what the script needs, else the peer's venv (~/.cache/mercer-peer-venv).
A script calls `ensure` before importing numpy; it re-executes itself when needed."""
import importlib.util
import os
import sys


def ensure(name, modules):
    """Re-exec the calling script under a Python that has `modules` (once)."""
    flag = f"_{name.upper()}_EXEC"
    if os.environ.get(flag):
        return
    want = os.environ.get("MERCER_BENCH_PYTHON")
    if not want:
        if all(importlib.util.find_spec(m) for m in modules):
            return
        want = os.path.expanduser("~/.cache/mercer-peer-venv/bin/python")
        if not os.access(want, os.X_OK):
            sys.exit(f"{name}: needs {', '.join(modules)}: set MERCER_BENCH_PYTHON or run ../shared/peer/setup-venv.sh")
    os.environ[flag] = "1"
    os.execv(want, [want] + sys.argv)

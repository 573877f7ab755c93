#!/usr/bin/env bash
# Tests the Python client against a real mercer binary:
#   clients/python/run_tests.sh [MERCER_BINARY] [PYTEST_ARGS...]
# The binary defaults to this repository's target/release/mercer. A virtualenv at
# $MERCER_CLIENT_VENV (default ~/.cache/mercer-client-venv) is created on first use
# and gets the package with its test extra (re)installed on every run.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
binary="${1:-$here/../../target/release/mercer}"
if [ ! -x "$binary" ]; then
    echo "run_tests.sh: no mercer binary at $binary (cargo build --release, or pass its path)" >&2
    exit 2
fi
binary="$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")"

venv="${MERCER_CLIENT_VENV:-$HOME/.cache/mercer-client-venv}"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$here[test]"

cd "$here"
MERCER_BIN="$binary" exec "$venv/bin/python" -m pytest -p no:cacheprovider tests "${@:2}"

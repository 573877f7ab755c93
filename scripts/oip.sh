#!/usr/bin/env bash
# The Open Inference Protocol v2 routes through tritonclient (PyPI tritonclient[http]):
# installs it in a venv of its own, starts the given mercer binary, runs
# scripts/oip_client.py against it.
#
#   scripts/oip.sh [path/to/mercer]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/release/mercer}
[ -x "$BIN" ] || cargo build --release --locked
VENV=${OIP_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/mercer-oip-venv}
if ! "$VENV/bin/python" -c 'import tritonclient.http, numpy' 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "tritonclient[http]" numpy
fi
PORT=${OIP_PORT:-18101}
log=$(mktemp)
MERCER_BIND=127.0.0.1:$PORT MERCER_DATA_DIR= MERCER_LOG=warn "$BIN" 2>"$log" &
pid=$!
trap 'kill -9 $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -f "$log"' EXIT
curl -fsS --retry 50 --retry-delay 0 --retry-all-errors --retry-max-time 30 -o /dev/null "http://127.0.0.1:$PORT/readyz" \
  || { echo "mercer did not start:"; cat "$log"; exit 1; }
"$VENV/bin/python" scripts/oip_client.py "http://127.0.0.1:$PORT"

#!/usr/bin/env bash
# The web page in headless Chromium (scripts/browser_test.py), against the given binary:
# once without API keys (screenshots to $SCREENSHOTS, default a temp dir), once with them.
#   scripts/install_browser_tools.sh && scripts/browser.sh target/release/mercer
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:?usage: scripts/browser.sh PATH_TO_MERCER}
py=${MERCER_BROWSER_VENV:-$HOME/.cache/mercer-browser-venv}/bin/python
shots=${SCREENSHOTS:-$(mktemp -d)}
# Ports of their own: scripts/load.sh's server (18095) may still be draining.
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true' EXIT

run() { # PORT EXTRA_ENV... -- TEST_ARGS...
  local port=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local log
  log=$(mktemp)
  env MERCER_BIND=127.0.0.1:$port MERCER_DATA_DIR= MERCER_LOG=warn "${envs[@]}" "$bin" 2>"$log" &
  pid=$!
  if ! curl -fsS --retry 50 --retry-delay 0 --retry-all-errors --retry-max-time 30 -o /dev/null "http://127.0.0.1:$port/readyz"; then
    echo "browser: mercer on port $port did not become ready:"; tail -20 "$log"; exit 1
  fi
  "$py" scripts/browser_test.py "http://127.0.0.1:$port" "$@"
  kill -TERM "$pid"; wait "$pid" || true; pid=
}

run 18097 -- --screenshots "$shots"
run 18098 MERCER_API_KEYS=browser-test-token -- --token browser-test-token
echo "browser: both runs passed; screenshots in $shots"

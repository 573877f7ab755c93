#!/usr/bin/env bash
# Contract tests: standard tooling's view of the served spec and metrics
# (scripts/check_standards.py), then schemathesis against a running mercer
# ($MERCER_URL) and openapi.yaml,
# every operation, positive and negative data, stateful sequences through the spec's
# links, checking server errors, status codes, content types, headers and response
# schemas.
#
#   MERCER_URL=http://127.0.0.1:8080 scripts/contract.sh            # CI: 60 examples per operation
#   ST_MAX_EXAMPLES=2000 ST_SEED=7 MERCER_URL=... scripts/contract.sh  # a longer local run
#
# One check is left out: positive_data_acceptance expects every schema-valid request to
# succeed, but the contract's 422s are cross-field rules no OpenAPI 3.0 schema can state
# (y as long as x, at least two classes, centres <= rows, the feature count at predict).
# Two passes: coverage and fuzzing with predict pinned to a real model (a probability SVM
# created first), then stateful sequences (create, get, predict, delete through the spec's
# links) unpinned: a pinned id in the stateful pass is deleted by one sequence and then
# reported as a "created resource not found" by the next. (The pin lives in pinned.toml:
# schemathesis reads a schemathesis.toml in its working directory by itself.)
set -euo pipefail
cd "$(dirname "$0")/.."
URL=${MERCER_URL:?set MERCER_URL}
VENV=${ST_VENV:-$HOME/.cache/mercer-schemathesis-venv}
if [ ! -x "$VENV/bin/st" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "schemathesis==4.32.5"
fi
if ! "$VENV/bin/python" -c "import openapi_spec_validator, prometheus_client" 2>/dev/null; then
  "$VENV/bin/pip" install -q "openapi-spec-validator==0.9.0" "prometheus-client==0.26.0"
fi

# The served spec through a real OpenAPI validator and its examples against their schemas;
# /metrics through the Prometheus client library's parsers, in both formats.
"$VENV/bin/python" scripts/check_standards.py "$URL"

train() { curl -fsS -d "$1" "$URL/models" | sed -n 's/.*"id":"\([0-9a-f-]*\)".*/\1/p'; }
svm=$(train '{"model":"svm","params":{"probability":true},"x":[[0,0],[0.1,0],[0,0.1],[1,1],[0.9,1],[1,0.9],[0.2,0.1],[0.8,0.9],[0.1,0.2],[0.9,0.8]],"y":["a","a","a","b","b","b","a","b","a","b"]}')
[ -n "$svm" ] || { echo "contract: could not create the seed model" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/pinned.toml" <<TOML
[[operations]]
include-operation-id = "predict"
parameters = { "path.id" = "$svm" }
TOML

args=(run "$PWD/openapi.yaml" --url "$URL" --checks all --exclude-checks positive_data_acceptance
      --max-examples "${ST_MAX_EXAMPLES:-60}" --seed "${ST_SEED:-20261121}" --no-color --request-timeout 30)
(cd "$work" && "$VENV/bin/st" --config-file "$work/pinned.toml" "${args[@]}" --phases examples,coverage,fuzzing)
(cd "$work" && "$VENV/bin/st" "${args[@]}" --phases stateful)
echo "contract: OK"

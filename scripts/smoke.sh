#!/usr/bin/env bash
# Smoke test of a running mercer with curl only: trains a GP on a few points, predicts with
# variance, lists, deletes, checks the 404. Uses jq when present, grep otherwise.
#   MERCER_URL=http://127.0.0.1:8080 scripts/smoke.sh      (MERCER_TOKEN for a bearer token)
set -euo pipefail
URL=${MERCER_URL:-http://127.0.0.1:8080}
AUTH=()
[ -n "${MERCER_TOKEN:-}" ] && AUTH=(-H "Authorization: Bearer $MERCER_TOKEN")
fail() { echo "smoke: FAIL: $*" >&2; exit 1; }
have_jq() { command -v jq >/dev/null 2>&1; }
# field JSON KEY: the raw value of a top-level string or number field
field() {
  if have_jq; then printf '%s' "$1" | jq -r ".$2"
  else printf '%s' "$1" | grep -o "\"$2\":\"\?[^\",}]*" | head -1 | sed 's/^.*:"\{0,1\}//'; fi
}

health=$(curl -fsS "$URL/healthz")
grep -q '"status":"ok"' <<<"$health" || fail "/healthz"
echo "smoke: /healthz ok"

body='{"model":"gaussian_process","kernel":{"type":"rbf","length_scale":1.0},"params":{"noise":0.01},
       "x":[[0.0],[1.0],[2.0],[3.0],[4.0]],"y":[0.0,0.84,0.91,0.14,-0.76],"name":"smoke"}'
resp=$(curl -sS "${AUTH[@]}" -w '\n%{http_code}' -d "$body" "$URL/models")
code=${resp##*$'\n'}; model=${resp%$'\n'*}
[ "$code" = 201 ] || fail "POST /models answered $code: $model"
id=$(field "$model" id)
[ -n "$id" ] || fail "no id in $model"
[ "$(field "$model" status)" = ready ] || fail "status not ready: $model"
grep -q '"log_marginal_likelihood"' <<<"$model" || fail "no log_marginal_likelihood: $model"
echo "smoke: trained $id"

pred=$(curl -fsS "${AUTH[@]}" -d '{"x":[[1.5],[2.5]],"variance":true}' "$URL/models/$id/predict") || fail "predict"
for f in predictions variance std; do
  grep -q "\"$f\":\[" <<<"$pred" || fail "predict response lacks $f: $pred"
done
if have_jq; then
  [ "$(echo "$pred" | jq '.predictions | length')" = 2 ] || fail "two predictions expected: $pred"
  echo "$pred" | jq -e 'all(.variance[]; . >= 0)' >/dev/null || fail "negative variance: $pred"
fi
echo "smoke: predicted $pred"

# Bodies are read whole before grep: `grep -q` exits at its first match, and under
# pipefail curl's write into the closed pipe would fail the check.
listed=$(curl -fsS "${AUTH[@]}" "$URL/models")
grep -q "\"$id\"" <<<"$listed" || fail "model not listed"
echo "smoke: listed"
code=$(curl -sS "${AUTH[@]}" -o /dev/null -w '%{http_code}' -X DELETE "$URL/models/$id")
[ "$code" = 204 ] || fail "DELETE answered $code"
code=$(curl -sS "${AUTH[@]}" -o /dev/null -w '%{http_code}' "$URL/models/$id")
[ "$code" = 404 ] || fail "GET after DELETE answered $code"
echo "smoke: deleted, 404 after"
metrics=$(curl -fsS "$URL/metrics")
grep -q '^mercer_fits_total' <<<"$metrics" || fail "/metrics lacks mercer_fits_total"
echo "smoke: OK"

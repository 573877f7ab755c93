#!/usr/bin/env bash
# Load test of a mercer binary with wrk: finds the concurrency that saturates single-row
# predictions, then runs predictions and fits at 1x and 2x their saturating concurrency
# and checks the service sheds rather than breaks: no 5xx but 503, every 503 with
# Retry-After, no timeouts (hangs), and full recovery afterwards.
#
#   scripts/load.sh [path/to/mercer]     # default target/release/mercer (built if missing)
#
# Fits saturate when every worker and queue slot is taken (workers + MERCER_FIT_QUEUE, here
# 2 + 4); beyond that mercer answers 503 with Retry-After. Prints a Markdown table.
# Needs wrk (Debian package) and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/release/mercer}
[ -x "$BIN" ] || cargo build --release --locked
PORT=${LOAD_PORT:-18095}
URL=http://127.0.0.1:$PORT
SECONDS_PER_RUN=${LOAD_SECONDS:-10}
WORKERS=${LOAD_FIT_WORKERS:-2}
QUEUE=${LOAD_FIT_QUEUE:-4}
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }

work=$(mktemp -d)
MERCER_BIND=127.0.0.1:$PORT MERCER_DATA_DIR= MERCER_FIT_WORKERS=$WORKERS MERCER_FIT_QUEUE=$QUEUE MERCER_LOG=warn \
  "$BIN" 2>"$work/server.log" &
pid=$!
trap 'kill -9 $pid 2>/dev/null || true; rm -rf "$work"' EXIT
curl -fsS --retry 50 --retry-delay 0 --retry-all-errors --retry-max-time 30 -o /dev/null "$URL/readyz"

python3 - "$work" <<'PY'
import json, math, random, sys
work = sys.argv[1]
rng = random.Random(20261121)
def gp(n, d):
    x = [[rng.uniform(-1, 1) for _ in range(d)] for _ in range(n)]
    y = [math.sin(sum(r)) + 0.1 * rng.gauss(0, 1) for r in x]
    return {"model": "gaussian_process", "kernel": {"type": "rbf", "length_scale": 1.0},
            "params": {"noise": 0.01}, "x": x, "y": y}
json.dump(gp(1000, 8), open(f"{work}/model.json", "w"))
json.dump(gp(300, 8), open(f"{work}/fit.json", "w"))
json.dump({"x": [[0.1] * 8], "variance": True}, open(f"{work}/predict.json", "w"))
PY
id=$(curl -fsS -d @"$work/model.json" "$URL/models" | sed -n 's/.*"id":"\([0-9a-f-]*\)".*/\1/p')
[ -n "$id" ] || { echo "load: could not train the model to predict with" >&2; exit 1; }

# run NAME CONNECTIONS PATH BODY SECONDS -> one JSON line in $work/NAME-CONNECTIONS.json
run() {
  local threads=$(( $2 < 2 ? 1 : 2 ))
  LOAD_BODY_FILE=$4 wrk -t "$threads" -c "$2" -d "${5}s" --timeout 30s -s scripts/load/post.lua "$URL$3" \
    | tail -1 >"$work/$1-$2.json"
}
rps() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(round(d["requests"]/d["seconds"]))' "$1"; }

# Saturation: the smallest concurrency within 10% of the best throughput.
best=0
for c in 1 2 4 8 16 32 64; do
  run sat "$c" "/models/$id/predict" "$work/predict.json" 3
  r=$(rps "$work/sat-$c.json"); echo "load: predict c=$c ${r} req/s" >&2
  echo "$c $r" >>"$work/sat.txt"
  [ "$r" -gt "$best" ] && best=$r
done
sat=$(awk -v b="$best" '$2 >= 0.9 * b { print $1; exit }' "$work/sat.txt")
fit_sat=$((WORKERS + QUEUE))

run predict "$sat" "/models/$id/predict" "$work/predict.json" "$SECONDS_PER_RUN"
run predict $((2 * sat)) "/models/$id/predict" "$work/predict.json" "$SECONDS_PER_RUN"
run fit "$fit_sat" "/models" "$work/fit.json" "$SECONDS_PER_RUN"
run fit $((2 * fit_sat)) "/models" "$work/fit.json" "$SECONDS_PER_RUN"

# Recovery: everything answers at once and normally after the overload.
code() { curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$@"; }
[ "$(code "$URL/healthz")" = 200 ] || { echo "load: /healthz failed after the load" >&2; exit 1; }
[ "$(code "$URL/readyz")" = 200 ] || { echo "load: /readyz failed after the load" >&2; exit 1; }
[ "$(code -d @"$work/fit.json" "$URL/models")" = 201 ] || { echo "load: a fit failed after the load" >&2; exit 1; }
[ "$(code -d @"$work/predict.json" "$URL/models/$id/predict")" = 200 ] || { echo "load: predict failed after the load" >&2; exit 1; }

python3 - "$work" "$sat" "$fit_sat" <<'PY'
import json, sys
work, sat, fit_sat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
print("| load | connections | req/s | p50 ms | p99 ms | 2xx | 503 | other |")
print("|---|---|---|---|---|---|---|---|")
bad = []
for name, c, label in [("predict", sat, "1x"), ("predict", 2 * sat, "2x"), ("fit", fit_sat, "1x"), ("fit", 2 * fit_sat, "2x")]:
    d = json.load(open(f"{work}/{name}-{c}.json"))
    st = {int(k): v for k, v in d["status"].items()}
    ok = sum(v for k, v in st.items() if 200 <= k < 300)
    shed = st.get(503, 0)
    other = d["requests"] - ok - shed
    what = "single-row predict + variance (GP n=1000, d=8)" if name == "predict" else "fit (GP n=300, d=8, wait)"
    print(f"| {what}, {label} | {c} | {d['requests'] / d['seconds']:.0f} | {d['p50_us'] / 1e3:.1f} | {d['p99_us'] / 1e3:.1f} | {ok} | {shed} | {other} |")
    if any(k >= 500 and k != 503 for k in st):
        bad.append(f"{name} at {c}: 5xx other than 503: {st}")
    if d["missing_retry_after"]:
        bad.append(f"{name} at {c}: {d['missing_retry_after']} 503s without Retry-After")
    if d["timeouts"]:
        bad.append(f"{name} at {c}: {d['timeouts']} requests timed out (30 s)")
    if name == "predict" and other:
        bad.append(f"{name} at {c}: {other} non-2xx answers")
print()
print("Recovery after the 2x runs: /healthz, /readyz, a fit and a prediction all answered normally.")
if bad:
    print("\n".join("FAIL: " + b for b in bad), file=sys.stderr)
    sys.exit(1)
PY

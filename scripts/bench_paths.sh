#!/usr/bin/env bash
# The serving side of issue 17's measurements, on one mercer binary (memory store):
#   - peak resident memory added by a fixed GP fit at n = 4000 (d = 8) and by a
#     1000-row predict with variance on it (VmHWM, reset before each through
#     /proc/PID/clear_refs), against the n x n matrix the mathematics needs;
#   - the HTTP stack's ceiling (GET /healthz) and single-row predicts with variance on
#     an n = 1000 GP, both under the same wrk load (16 connections), and their ratio;
#   - the batch sizes the batcher formed meanwhile (mercer_predict_batch_rows).
#
#   scripts/bench_paths.sh [path/to/mercer] [seconds per load run, default 10]
#
# Needs wrk and a python3 with numpy (the peer's venv is used when present). Prints
# Markdown. The data are bench.py's (../shared/peer): X ~ N(0, 1)^8, y = sin(2 sum x / sqrt 8).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/release/mercer}
SECS=${2:-10}
[ -x "$BIN" ] || cargo build --release --locked
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
PY=${BENCH_PYTHON:-$HOME/.cache/mercer-peer-venv/bin/python}
[ -x "$PY" ] || PY=python3
PORT=${PATHS_PORT:-18099}
URL=http://127.0.0.1:$PORT

work=$(mktemp -d)
MERCER_BIND=127.0.0.1:$PORT MERCER_DATA_DIR= MERCER_LOG=warn "$BIN" 2>"$work/server.log" &
pid=$!
trap 'kill -9 $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$work"' EXIT
curl -fsS --retry 50 --retry-delay 0 --retry-all-errors --retry-max-time 30 -o /dev/null "$URL/readyz"

"$PY" - "$work" <<'PY'
import json, sys
import numpy as np
work = sys.argv[1]
D = 8
def data(n, seed):
    rng = np.random.RandomState(seed)
    X = rng.randn(n, D)
    return X, np.sin(2.0 * X.sum(axis=1) / np.sqrt(D)) + 0.1 * rng.randn(n)
for n, name in ((4000, "fit4000"), (1000, "fit1000"), (20, "fit20")):
    X, y = data(n, 0)
    json.dump({"model": "gaussian_process", "kernel": {"type": "rbf", "length_scale": 2.0},
               "params": {"noise": 0.01}, "x": X.tolist(), "y": y.tolist()}, open(f"{work}/{name}.json", "w"))
json.dump({"x": data(1000, 3)[0].tolist(), "variance": True}, open(f"{work}/q1000.json", "w"))
json.dump({"x": data(1, 4)[0].tolist()}, open(f"{work}/q1.json", "w"))
PY

hwm_kb() { awk '/VmHWM/ {print $2}' "/proc/$pid/status"; }
rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$pid/status"; }
reset_hwm() { echo 5 > "/proc/$pid/clear_refs"; }
post() { curl -fsS -o "$work/out.json" -H 'content-type: application/json' --data-binary "@$1" "$URL$2"; }

echo "| operation | RSS before | peak during | added | what the mathematics needs |"
echo "|---|---|---|---|---|"
before=$(rss_kb); reset_hwm
post "$work/fit4000.json" /models
id4000=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$work/out.json")
peak=$(hwm_kb)
printf '| fit GP n = 4000 | %d MiB | %d MiB | %d MiB | L, n x n: %d MiB |\n' $((before / 1024)) $((peak / 1024)) $(((peak - before) / 1024)) $((4000 * 4000 * 8 / 1048576))
before=$(rss_kb); reset_hwm
post "$work/q1000.json" "/models/$id4000/predict"
peak=$(hwm_kb)
printf '| predict 1000 rows + variance, n = 4000 | %d MiB | %d MiB | %d MiB | K*, 4000 x 1000: %d MiB |\n' \
  $((before / 1024)) $((peak / 1024)) $(((peak - before) / 1024)) $((4000 * 1000 * 8 / 1048576))

post "$work/fit1000.json" /models
id1000=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$work/out.json")
post "$work/fit20.json" /models
id20=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$work/out.json")
cat > "$work/post.lua" <<LUA
local f = assert(io.open("$work/q1.json", "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
LUA
load() {  # url [lua]: "req/s p50 p99"
  local args=(-t2 -c16 -d"${SECS}s" --latency)
  [ -n "${2:-}" ] && args+=(-s "$2")
  wrk "${args[@]}" "$1" >"$work/wrk.txt"
  awk '/Requests\/sec/ {r=$2} /^ +50%/ {p50=$2} /^ +99%/ {p99=$2} END {print r, p50, p99}' "$work/wrk.txt"
}
wrk -t2 -c16 -d1s "$URL/healthz" >/dev/null  # warm-up
read -r h_rps h_p50 h_p99 < <(load "$URL/healthz")
wrk -t2 -c16 -d1s -s "$work/post.lua" "$URL/models/$id20/predict" >/dev/null
read -r t_rps t_p50 t_p99 < <(load "$URL/models/$id20/predict" "$work/post.lua")
wrk -t2 -c16 -d1s -s "$work/post.lua" "$URL/models/$id1000/predict" >/dev/null
read -r p_rps p_p50 p_p99 < <(load "$URL/models/$id1000/predict" "$work/post.lua")
echo
echo "| wrk, 16 connections, ${SECS} s | req/s | p50 | p99 |"
echo "|---|---|---|---|"
echo "| GET /healthz (the HTTP stack's ceiling) | $h_rps | $h_p50 | $h_p99 |"
echo "| POST 1-row predict + variance, n = 20 GP (the predict route, no real work) | $t_rps | $t_p50 | $t_p99 |"
echo "| POST 1-row predict + variance, n = 1000 GP | $p_rps | $p_p50 | $p_p99 |"
python3 -c "import sys; a, b, c = map(float, sys.argv[1:]); print(f'\nsingle-row predict at n = 1000: {a / b:.0%} of the ceiling, {a / c:.0%} of the bare predict route')" "$p_rps" "$h_rps" "$t_rps"
curl -fsS "$URL/metrics" | python3 -c '
import sys
s = {l.split(" ")[0]: float(l.split(" ")[1]) for l in sys.stdin if l.startswith("mercer_predict_batch_rows_")}
count, rows = s["mercer_predict_batch_rows_count"], s["mercer_predict_batch_rows_sum"]
print(f"batcher: {count:.0f} predict calls for {rows:.0f} rows, {rows / count:.2f} rows per call")'

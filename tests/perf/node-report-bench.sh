#!/usr/bin/env bash
# The nodeReport preload's cost (issue #30.3): two clusters of the plain Node server
# (tests/fixtures/plain-node-server.js, a `$lookup`-sized answer), one worker each, the preload
# off in one and on in the other, run side by side; two wrk load both at once, ROUNDS rounds of
# SECONDS s each. Per round: requests/s through the front door and the
# worker's CPU time per request (utime+stime from /proc). Prints each round, and the ratios
# (on / off) per round and their median. Loopback only; everything it starts it stops by pid.
# Usage: tests/perf/node-report-bench.sh [ROUNDS] [SECONDS]   (after `cargo build`)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-6}
SECONDS_EACH=${2:-5}
# The debug build: the figure that matters is the worker's CPU per request, not the front door's.
BIN=target/debug/fhircluster
SERVER=$PWD/tests/fixtures/plain-node-server.js
WORK=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT

start() { # name port nodeReport admin
  mkdir -p "$WORK/$1"
  cat > "$WORK/$1/config.json" <<JSON
{ "server": { "port": $2, "cluster": { "internalPort": $(($2 + 1)), "workers": 1,
  "masterServesTx": false, "nodeReport": $3, "adminAddress": $4, "statusSeconds": 1,
  "command": ["node", "$SERVER"] } },
  "modules": { "tx": { "endpoints": [ { "path": "/r4" } ] } } }
JSON
  XDG_RUNTIME_DIR=$WORK/$1 "$BIN" --data-dir "$WORK/$1" > "$WORK/$1/log" 2>&1 &
  pids+=($!)
}
start off 39610 false 39619
start on 39620 true 39629
for port in 39610 39620; do
  for _ in $(seq 100); do curl -sf "127.0.0.1:$port/r4/x" >/dev/null && break; sleep 0.2; done
done
worker_pid() { curl -s "127.0.0.1:$1/status" | python3 -c 'import json,sys; print([p["pid"] for p in json.load(sys.stdin)["processes"] if p["code"]=="tx1"][0])'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
declare -A W=([off]=$(worker_pid 39619) [on]=$(worker_pid 39629))
declare -A P=([off]=39610 [on]=39620)
URL='/r4/CodeSystem/$lookup?system=http://loinc.org&code=718-7'
HZ=$(getconf CLK_TCK)
echo "round mode req/s worker-cpu-us/req"
for r in $(seq "$ROUNDS"); do
  # Both at once, so whatever else the machine does weighs on both alike.
  declare -A before=([off]=$(cpu_ticks "${W[off]}") [on]=$(cpu_ticks "${W[on]}"))
  for mode in off on; do
    wrk -t1 -c8 -d"${SECONDS_EACH}s" "http://127.0.0.1:${P[$mode]}$URL" > "$WORK/wrk-$mode" &
  done
  wait
  for mode in off on; do
    after=$(cpu_ticks "${W[$mode]}")
    reqs=$(awk '/requests in/ {print $1}' "$WORK/wrk-$mode")
    rate=$(awk '/Requests\/sec/ {print $2}' "$WORK/wrk-$mode")
    echo "$r $mode $rate $(python3 -c "print(round((${after}-${before[$mode]})/$HZ*1e6/$reqs, 1))")"
  done
done | tee "$WORK/rounds"
python3 - "$WORK/rounds" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l[0].isdigit()]
by = {(r[0], r[1]): r for r in rows}
for col, name in ((2, "req/s"), (3, "worker CPU us/request")):
    med = {m: statistics.median(float(r[col]) for r in rows if r[1] == m) for m in ("off", "on")}
    ratios = [float(by[(k, "on")][col]) / float(by[(k, "off")][col]) for k, m in by if m == "off"]
    print(f"{name}: median off {med['off']:.1f}, on {med['on']:.1f}; "
          f"on/off per round {' '.join(f'{x:.3f}' for x in ratios)}, median {statistics.median(ratios):.4f}")
PY

#!/bin/bash
# The 3x surge through fhircluster with predictiveAdmission on and off, side by side (DEC-50):
# ROUNDS interleaved rounds (on, off; then off, on ...), each `fhircluster-load surge` for 20 s
# at 111.6 heavy/s (3x this 2-core machine's heavy capacity, as the compare's surge part) and
# 5 s after, against 1 master + 2 fhirsmith-sim workers burning the compare's costs. Loopback
# only; each launcher is stopped by its own pid. Prints one line per round and the medians.
#   ./release-lto.sh build --bins && tests/perf/predictive-surge.sh [ROUNDS] [OUT_DIR]
set -eu
rounds=${1:-4}
out=${2:-$(mktemp -d /tmp/predictive-surge.XXXX)}
# PROFILE=release measures the plain build (`cargo build --release --bins`) instead.
bin=$(cd "$(dirname "$0")/../.." && pwd)/target/${PROFILE:-release-lto}
mkdir -p "$out"

free_base() {
    python3 "$(dirname "$0")/free-ports.py" 4
}

round() { # on|off, output file
    local on=$1 file=$2 dir base pid
    dir=$(mktemp -d "$out/cluster.XXXX")
    base=$(free_base)
    cat > "$dir/config.json" <<JSON
{"server": {"port": $base, "cluster": {"workers": 2, "internalPort": $((base + 1)),
  "command": ["$bin/fhirsmith-sim"], "killSeconds": 5, "proxyThreads": 1,
  "predictiveAdmission": $([ "$on" = on ] && echo true || echo false)}},
 "modules": {"tx": {"endpoints": [{"path": "/r4"}]}}}
JSON
    RUST_LOG=warn SIM_COST_METADATA_MS=0 SIM_COST_LOOKUP_MS=4 SIM_COST_VALIDATE_MS=5 \
        SIM_COST_EXPAND_MS=200 "$bin/fhircluster" --data-dir "$dir" > "$dir/log" 2>&1 &
    pid=$!
    for _ in $(seq 1 100); do
        curl -sf -o /dev/null "http://127.0.0.1:$base/r4/metadata" \
            && curl -sf -o /dev/null "http://127.0.0.1:$((base + 3))/r4/metadata" && break
        sleep 0.3
    done
    "$bin/fhircluster-load" surge --base "http://127.0.0.1:$base" --rate 111.6 --seconds 20 \
        --after-seconds 5 --json > "$file"
    kill -TERM "$pid"
    wait "$pid" || true
}

for r in $(seq 1 "$rounds"); do
    if [ $((r % 2)) = 1 ]; then order="on off"; else order="off on"; fi
    for on in $order; do round "$on" "$out/round$r-$on.json"; done
done

python3 - "$out" <<'PY'
import glob, json, statistics, sys
figures = {
    "probe median (ms)": lambda d: d["probe"]["during_surge"]["latency_ms"]["p50_ms"],
    "heavy 2xx within the surge": lambda d: d["heavy"]["completed_within_surge"],
    "heavy 503s": lambda d: d["heavy"]["status_503"],
    "of those, at once (< 100 ms)": lambda d: d["heavy"]["refused_at_once"],
    "a refused client waited, median (ms)": lambda d: d["heavy"]["refused_latency_ms"]["p50_ms"],
    "a refused client waited, p99 (ms)": lambda d: d["heavy"]["refused_latency_ms"]["p99_ms"],
}
runs = {on: [json.load(open(f)) for f in sorted(glob.glob(f"{sys.argv[1]}/round*-{on}.json"))]
        for on in ("on", "off")}
print(f"| measure | on | off |\n|---|--:|--:|")
for name, get in figures.items():
    med = {on: statistics.median(get(d) or 0 for d in ds) for on, ds in runs.items()}
    print(f"| {name} | {med['on']:,} | {med['off']:,} |")
PY

#!/bin/bash
# Callgrind instructions per forwarded request through fhircluster (the method in README.md,
# "Where the front door's own cost stands"): a release launcher with `--workers 0` whose only
# process is a static nginx answering 628 bytes (as `fhircluster-load compare --only fast`
# sets it up), run under `valgrind --tool=callgrind`; 3 s of `wrk -t1 -c8` to warm up, the
# counters zeroed, `wrk -t1 -c8 -d10s`, a dump; total instructions ÷ requests. Instruction
# counts hold on a shared, noisy machine where throughput does not. Loopback only; the
# launcher is stopped by its own pid. Prints the figure and keeps the profile for
# `callgrind_annotate --inclusive=yes OUT_DIR/callgrind.out.*`.
# FHIRCLUSTER=path runs another build (an A/B against a copy of the binary before a change);
# EXTRA_CLUSTER_JSON='{"accessLog": "text"}' adds settings to server.cluster; CONNECTIONS=256
# loads it with wrk's 256 connections instead of 8 (past the process's 20 slots, so most
# requests wait in the launcher's queue: the queued path's cost). DOOR=haproxy measures HAProxy
# the same way, set up as `fhircluster-load compare` sets it up (one thread, `maxconn 16` to
# the upstream, `timeout queue 1s`). CACHE_SIM=1 adds callgrind's cache simulation (the host's
# first-level caches) and prints the instruction- and data-cache misses per request too.
#   ./release-lto.sh build --bins && tests/perf/callgrind-per-request.sh [OUT_DIR] [SECONDS]
set -eu
out=${1:-$(mktemp -d /tmp/callgrind-per-request.XXXX)}
seconds=${2:-10}
connections=${CONNECTIONS:-8}
# PROFILE=release measures the plain build (`cargo build --release --bins`) instead.
bin=$(cd "$(dirname "$0")/../.." && pwd)/target/${PROFILE:-release-lto}
mkdir -p "$out"
out=$(cd "$out" && pwd)

base=$(python3 "$(dirname "$0")/free-ports.py" 3)

# The fast upstream: `fhircluster-load`'s compare/upstream.rs, the same 628 bytes.
. "$(dirname "$0")/fast-upstream.sh"
fast_upstream_cluster "$out" "$base" 0 "${EXTRA_CLUSTER_JSON:-{\}}"

cachesim=()
if [ "${CACHE_SIM:-0}" = 1 ]; then cachesim=(--cache-sim=yes); fi
up=
if [ "${DOOR:-fhircluster}" = haproxy ]; then
    # The upstream on its own, and HAProxy in front of it, as compare/conf.rs writes it.
    sed "s/@PORT@/$((base + 1))/g" "$out/upstream.conf.in" > "$out/upstream-own.conf"
    nginx -p "$out" -e "$out/upstream-error.log" -c "$out/upstream-own.conf" > "$out/upstream.log" 2>&1 &
    up=$!
    cat > "$out/haproxy.cfg" <<CFG
global
    maxconn 4096
    nbthread 1

defaults
    mode http
    option http-keep-alive
    timeout connect 5s
    timeout client 90s
    timeout server 90s
    timeout queue 1s

frontend fast
    bind 127.0.0.1:$base
    default_backend fast

backend fast
    balance leastconn
    server p0 127.0.0.1:$((base + 1)) maxconn 16
CFG
    valgrind --tool=callgrind "${cachesim[@]}" --callgrind-out-file="$out/callgrind.out.%p" \
        haproxy -db -f "$out/haproxy.cfg" > "$out/log" 2>&1 &
else
    RUST_LOG=warn valgrind --tool=callgrind "${cachesim[@]}" \
        --callgrind-out-file="$out/callgrind.out.%p" \
        "${FHIRCLUSTER:-$bin/fhircluster}" --data-dir "$out" --workers 0 > "$out/log" 2>&1 &
fi
pid=$!
trap 'kill -TERM $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; if [ -n "$up" ]; then kill -QUIT $up 2>/dev/null || true; wait $up 2>/dev/null || true; fi' EXIT
url="http://127.0.0.1:$base/r4/metadata"
for _ in $(seq 1 300); do
    if curl -fs -o /dev/null "$url"; then break; fi
    sleep 0.2
done
curl -fs -o /dev/null "$url" || { echo "the launcher did not answer (see $out/log)" >&2; exit 1; }

wrk -t1 -c"$connections" -d3s "$url" > "$out/warm.txt"
callgrind_control -z "$pid" > /dev/null
wrk -t1 -c"$connections" -d"${seconds}s" "$url" > "$out/wrk.txt"
callgrind_control -d "$pid" > /dev/null
sleep 1
requests=$(awk '/requests in/ {print $1}' "$out/wrk.txt")
file=$(ls -t "$out"/callgrind.out.* | head -1)
totals=$(callgrind_annotate "$file" 2>/dev/null | grep -m1 'PROGRAM TOTALS' | tr -d ,)
total=$(echo "$totals" | awk '{print $1}')
misses=
if [ "${CACHE_SIM:-0}" = 1 ]; then
    # The events in callgrind_annotate's order: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw.
    misses=$(echo "$totals" | awk -v n="$requests" '{
        for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+$/) v[++k] = $i
        printf " L1i-misses-per-request %d L1d-misses-per-request %d", v[4] / n, (v[5] + v[6]) / n }')
fi
echo "requests $requests instructions $total per-request $((total / requests))$misses profile $file"

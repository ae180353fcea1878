#!/bin/bash
# Records the profile the optimised build is made with (`./release-lto.sh`, cluster.md DEC-69):
# builds the launcher instrumented (the release-lto profile with `-Cprofile-generate`, its own
# target directory), runs it under load against the fast upstream on loopback, and merges what
# it counted into `pgo/llvm-N.profdata` (N: rustc's LLVM major version; `llvm-profdata-N` from the
# `llvm-N` package, or LLVM_PROFDATA=path). Run it again after a change to the request path:
# a function changed since the profile was recorded is compiled as if there were none.
# The load, each run `wrk -t1 -d${SECONDS_EACH}s` (5 s) after a 2 s warm-up, loopback only:
#   - two tx-workers: GET at 8 and 256 connections (most requests then wait for a process),
#     GET with an `X-Cache-Id` at 32, POST with a 1 KB body at 32, and GET at 8 with
#     `Connection: close` (a new client connection a request, as behind a proxy without
#     keep-alive);
#   - no workers (the master answers, as `fhircluster-load compare` sets it up): GET at 8
#     and 256.
#   tests/perf/pgo-profile.sh [WORK_DIR]     then: ./release-lto.sh
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:-$(mktemp -d /tmp/pgo-profile.XXXX)}
each=${SECONDS_EACH:-5}
mkdir -p "$work"
work=$(cd "$work" && pwd)
llvm=$(rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
profdata=${LLVM_PROFDATA:-llvm-profdata-$llvm}
command -v "$profdata" > /dev/null || { echo "no $profdata (apt-get install llvm-$llvm, or LLVM_PROFDATA=path)" >&2; exit 1; }
. "$root/tests/perf/fast-upstream.sh"

rm -rf "$work/raw"
(cd "$root" && CARGO_TARGET_DIR="$work/target" \
    RUSTFLAGS="-Cprofile-generate=$work/raw" cargo build --profile release-lto --bin fhircluster)

cat > "$work/post.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/fhir+json"
wrk.body = '{"resourceType":"Parameters","parameter":[' .. string.rep('{"name":"x","valueString":"abcdefghij"},', 24) .. '{"name":"y"}]}'
LUA

# One launcher with WORKERS tx-workers, loaded by each wrk argument list given, then stopped.
train() {
    local workers=$1; shift
    local dir="$work/run-$workers" base
    rm -rf "$dir"; mkdir -p "$dir"
    base=$(python3 "$root/tests/perf/free-ports.py" 3)
    fast_upstream_cluster "$dir" "$base" "$workers"
    RUST_LOG=warn "$work/target/release-lto/fhircluster" --data-dir "$dir" > "$dir/log" 2>&1 &
    local pid=$!
    # A load that fails (set -e) still stops this launcher, and its processes with it.
    trap "kill -TERM $pid 2> /dev/null || true" EXIT
    local url="http://127.0.0.1:$base/r4/metadata" ready=
    for _ in $(seq 1 300); do
        if curl -fs -o /dev/null "$url"; then ready=1; break; fi
        sleep 0.2
    done
    if [ -z "$ready" ]; then kill -TERM $pid; echo "the launcher did not answer (see $dir/log)" >&2; exit 1; fi
    local load
    for load in "$@"; do
        # shellcheck disable=SC2086
        wrk -t1 -d2s $load "$url" > /dev/null
        # shellcheck disable=SC2086
        echo "workers $workers, wrk $load: $(wrk -t1 -d"${each}s" $load "$url" | awk '/requests in/ {print $1}') requests"
    done
    # The counts are written as the launcher exits, after its stop in order.
    kill -TERM $pid
    wait $pid || true
    trap - EXIT
}
train 2 "-c8" "-c256" "-c32 -H X-Cache-Id:session-7" "-c32 -s $work/post.lua" "-c8 -H Connection:close"
train 0 "-c8" "-c256"

mkdir -p "$root/pgo"
out="$root/pgo/llvm-$llvm.profdata"
"$profdata" merge --sparse -o "$out" "$work"/raw/*.profraw
echo "profile $out ($(wc -c < "$out") bytes) from $(ls "$work"/raw/*.profraw | wc -l) runs; build with: ./release-lto.sh"

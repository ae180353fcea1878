#!/bin/sh
# Runs the reliability suite and prints tests/reliability.md's table from the figures each
# test prints on a `RELIABILITY {json}` line. Usage: tests/reliability-table.sh [cargo test args]
set -eu
cd "$(dirname "$0")/.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
started=$(date +%s)
cargo test --test integration "$@" -- --nocapture \
    reliability_faults:: reliability_resources:: reliability_clients:: reliability_orphans:: \
    reliability_front:: reliability_retry:: reliability_query_of_death:: \
    reliability_upstream_heads:: \
    reliability_attribution:: upgrade_faults:: upgrade_setup:: upgrade::ten_upgrades upgrade_keepalive:: \
    ops_access_log::on_a_full_disk ops_logrotate:: ops_scale::ttin_and_ttou reload_whole_file:: rolling_overlap:: \
    proxy_predict:: reliability_admin:: ops_pid_file::the_pid_files_temporary_file \
    ops_logs::a_childs_control_characters hang_watchdog:: memory_recycle::a_recycle_with_room \
    overlap_workers::a_worker_count_raised >"$out" 2>&1 || {
    cat "$out" >&2
    echo "reliability suite failed" >&2
    exit 1
}
took=$(( $(date +%s) - started ))
grep '^RELIABILITY ' "$out" | sed 's/^RELIABILITY //' | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin]
print("| Test | What was tried | Faults / hostile inputs | Requests | Lost | What held |")
print("|---|---|---:|---:|---:|---|")
for r in sorted(rows, key=lambda r: r["test"]):
    print("| `{test}` | {tried} | {faults} | {requests} | {lost} | {held} |".format(**r))
t = {k: sum(r[k] for r in rows) for k in ("faults", "requests", "lost")}
print("| **total** | {} tests | {faults} | {requests} | {lost} | |".format(len(rows), **t))
'
echo
echo "($(grep -c '^test .* ok$' "$out") tests passed in ${took} s: tests/reliability-table.sh)"

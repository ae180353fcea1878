#!/usr/bin/env bash
# README's test command: installs what the tests need and is missing (Debian or Ubuntu), then
# checks the formatting and the lints, runs the whole suite and tests the Debian package
# (dpkg -i, dpkg -P). As root: it runs itself through sudo otherwise. `.ci/run` runs this on a
# fresh machine.
set -euo pipefail
[ "$(id -u)" = 0 ] || exec sudo env "PATH=$PATH" "$0" "$@"
cd "$(dirname "$0")/.."

export DEBIAN_FRONTEND=noninteractive
# What the tests run for real, by command (package):
#   node (nodejs): tests/ipc_node.rs, a plain Node child on the IPC channel
#   npm (npm, Debian's node has it apart): tests/node_report.rs runs node-fhir-server-core,
#     installed from its committed package-lock.json
#   python3: tests/anyserver.rs and tests/ops_status.rs, a plain Python server
#   nginx, haproxy, wrk: tests/ops_nginx.rs (nginx.md's configurations), tests/bench_compare.rs
#   systemd-analyze (systemd): tests/ops_systemd.rs verifies the unit `fhircluster print systemd-unit` prints
#   ip (iproute2), taskset and prlimit (util-linux): a network namespace of the tests' own; CPU sets;
#     the launcher's open-file limit (tests/reliability_resources.rs)
#   curl: tests that talk to the launcher as an operator would
#   logrotate (logrotate): tests/ops_logrotate.rs runs `fhircluster print logrotate` for real
#   promtool (prometheus): tests/ops_metrics.rs lints /metrics; tests/monitoring.rs checks and
#     tests the alert rules, and runs a real prometheus (the same package) with them
#   chromium: tests/ops_status_page.rs loads the admin status page in a real (headless) browser
#   lintian: tests/package/run.sh lints the Debian package
need=()
for pair in node:nodejs npm:npm python3:python3 nginx:nginx haproxy:haproxy wrk:wrk \
            systemd-analyze:systemd ip:iproute2 taskset:util-linux prlimit:util-linux curl:curl \
            promtool:prometheus logrotate:logrotate chromium:chromium lintian:lintian; do
  command -v "${pair%%:*}" >/dev/null || need+=("${pair#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  apt-get update
  apt-get install -y --no-install-recommends "${need[@]}"
fi

# kubernetes-validate (PyPI): tests/ops_kubernetes.rs validates `fhircluster print kubernetes`
# against the Kubernetes API's schemas. Debian's python3 takes pip's packages only when told to.
if ! command -v kubernetes-validate >/dev/null; then
  if ! python3 -m pip --version >/dev/null 2>&1; then
    apt-get update
    apt-get install -y --no-install-recommends python3-pip
  fi
  python3 -m pip install kubernetes-validate \
    || python3 -m pip install --break-system-packages kubernetes-validate
fi

if ! cargo nextest --version >/dev/null 2>&1; then
  cargo install cargo-nextest --locked
fi
# cargo-deb builds the Debian package (tests/package/run.sh).
if ! cargo deb --version >/dev/null 2>&1; then
  cargo install cargo-deb --locked
fi

# node-fhir-server-core for tests/node_report.rs, exactly as locked (no node_modules committed).
(cd tests/fixtures/node-fhir-server && npm ci --no-audit --no-fund --ignore-scripts)

cargo fmt --all -- --check
cargo clippy --all-targets -- -D warnings
cargo nextest run --no-fail-fast
# The Debian package from the optimised build (release-lto, about 13 minutes on 2 cores): it
# builds, lintian finds no error, install and purge leave the machine as they found it, and
# installing the next version over it upgrades a serving launcher in place.
tests/package/run.sh

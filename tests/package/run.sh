#!/bin/bash
# The Debian package, tested for real (root, on a Debian or Ubuntu machine; `.ci/run` runs it
# after the suite; needs cargo-deb, lintian, wrk, curl):
#   1. it builds (debian/build.sh: the release-lto build), and so does N+1, the same binaries
#      with the version bumped (`cargo deb --deb-version`);
#   2. lintian reports no error;
#   3. `dpkg -i` then `dpkg -P` leave the machine as they found it: the files under /etc, /usr,
#      /var/lib and /opt, the users and the groups, the data directory aside; in between, the
#      service user and the data directory (0750) are there and the installed binary runs
#      `--check` as that user;
#   4. N+1 installed over N while a launcher from the package serves under load (run by hand
#      from /usr/bin as the service user: no systemd here) keeps its pid and its processes,
#      now runs the new file, and fails no request: the postinst found it by its control socket
#      in /var/lib/fhirsmith and asked for the in-place upgrade (spec: DEC-87, an upgrade of the
#      package restarts nothing).
#   tests/package/run.sh [--no-build]     (--no-build: package target/release-lto/ as it is)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
work=$(mktemp -d /tmp/package-test.XXXX)
data=/var/lib/fhirsmith
say() { echo "package test: $*" >&2; }
fail() { say "FAILED: $*"; exit 1; }

if dpkg -s fhircluster > /dev/null 2>&1; then
    fail "fhircluster is installed already: this test installs and purges it (dpkg -P fhircluster)"
fi
[ ! -e "$data" ] || fail "$data exists already: this test makes and removes it"

# 1. The package, and N+1.
debian/build.sh "$@"
deb=$(ls -t "${CARGO_TARGET_DIR:-target}"/debian/fhircluster_*.deb | head -1)
version=$(dpkg-deb -f "$deb" Version)
cp "$deb" "$work/n.deb"
debian/build.sh --no-build --fast --deb-version "$version.1" --output "$work/n1.deb"
[ "$(dpkg-deb -f "$work/n1.deb" Version)" = "$version.1" ] || fail "N+1's version"
dpkg --compare-versions "$version.1" gt "$version" || fail "N+1 is not newer"
say "built $version and $version.1"

# 2. lintian: warnings are printed, an error fails.
lintian --fail-on error "$work/n.deb" || fail "lintian reports an error"

# 3. Install, look, purge, compare.
snapshot() {
    find /etc /usr /var/lib /opt -xdev \( -path /var/lib/dpkg -o -path /var/lib/apt \
        -o -path "$data" \) -prune -o -print | sort
    getent passwd | cut -d: -f1 | sort | sed 's/^/user /'
    getent group | cut -d: -f1 | sort | sed 's/^/group /'
}
snapshot > "$work/before"
dpkg -i "$work/n.deb"
id fhirsmith > /dev/null || fail "no user fhirsmith"
[ "$(stat -c '%a %U' "$data")" = "750 fhirsmith" ] || fail "$data: $(stat -c '%a %U' "$data")"
for f in /usr/bin/fhircluster /usr/bin/fhirsmith-sim /usr/lib/systemd/system/fhircluster.service \
         /etc/logrotate.d/fhircluster /usr/share/fhircluster/fhircluster-alerts.yml \
         /usr/share/fhircluster/fhircluster-dashboard.json /usr/share/man/man1/fhircluster.1.gz \
         /usr/share/doc/fhircluster/copyright; do
    [ -f "$f" ] || fail "$f is not installed"
done
grep -qx 'ExecStart=/usr/bin/fhircluster' /usr/lib/systemd/system/fhircluster.service \
    || fail "the unit's ExecStart="

# The cluster the rest runs: fhirsmith-sim as master and two workers, on free ports.
port=$(python3 tests/perf/free-ports.py 4)
cat > "$work/config.json" <<JSON
{"server": {"port": $port, "cluster": {"workers": 2, "internalPort": $((port + 1)),
  "listenAddress": "127.0.0.1", "command": ["/usr/bin/fhirsmith-sim"], "drainSeconds": 5}},
 "modules": {"tx": {"endpoints": [{"path": "/r4"}]}}}
JSON
install -o root -g fhirsmith -m 640 "$work/config.json" "$data/config.json"
as_user() { runuser -u fhirsmith -- "$@"; }
(cd / && as_user /usr/bin/fhircluster --check --data-dir "$data") > "$work/check" 2>&1 \
    || { cat "$work/check"; fail "--check as the service user"; }
grep -q "configuration ok" "$work/check" || { cat "$work/check"; fail "--check said no 'configuration ok'"; }

dpkg -P fhircluster > "$work/purge" 2>&1 || { cat "$work/purge"; fail "dpkg -P"; }
cat "$work/purge"
grep -q "kept $data" "$work/purge" || fail "purge did not say it keeps $data"
snapshot > "$work/after"
diff "$work/before" "$work/after" || fail "dpkg -i then dpkg -P left the machine changed (above)"
rm -rf "$data"
say "install and purge: the machine as it was, the data directory aside"

# 4. N+1 over N under load.
dpkg -i "$work/n.deb" > /dev/null
install -o root -g fhirsmith -m 640 "$work/config.json" "$data/config.json"
(cd / && exec runuser -u fhirsmith -- /usr/bin/fhircluster --data-dir "$data") > "$work/launcher.log" 2>&1 &
runner=$!
pid=
stop() {
    [ -z "$pid" ] || kill -TERM "$pid" 2> /dev/null || true
    wait "$runner" 2> /dev/null || true
    dpkg -P fhircluster > /dev/null 2>&1 || true
    rm -rf "$data"
}
trap stop EXIT
url=http://127.0.0.1:$port/r4/metadata
for _ in $(seq 1 600); do
    /usr/bin/fhircluster status --data-dir "$data" > /dev/null 2>&1 && break
    kill -0 "$runner" 2> /dev/null || { cat "$work/launcher.log"; fail "the launcher ended"; }
    sleep 0.1
done
/usr/bin/fhircluster status --data-dir "$data" > /dev/null || { cat "$work/launcher.log"; fail "the cluster is not ready"; }
pid=$(pgrep -P "$runner" -x fhircluster) || fail "no launcher under runuser"
procs() { ps --ppid "$pid" -o pid= | sort -n | tr '\n' ' '; }
before=$(procs)
[ "$(echo "$before" | wc -w)" -ge 3 ] || fail "the launcher's processes: $before"
wrk -t1 -c8 -d20s "$url" > "$work/wrk" 2>&1 &
load=$!
sleep 3
dpkg -i "$work/n1.deb" > "$work/upgrade" 2>&1 || { cat "$work/upgrade"; fail "installing N+1"; }
cat "$work/upgrade"
grep -q "upgraded in place" "$work/upgrade" || fail "the postinst did not upgrade the launcher"
wait "$load"
cat "$work/wrk"
[ "$(pgrep -P "$runner" -x fhircluster)" = "$pid" ] || fail "the launcher's pid changed"
[ "$(procs)" = "$before" ] || fail "its processes changed: $before -> $(procs)"
[ "$(stat -Lc %i "/proc/$pid/exe")" = "$(stat -c %i /usr/bin/fhircluster)" ] \
    || fail "the launcher does not run N+1's file"
[ "$(dpkg-query -W -f '${Version}' fhircluster)" = "$version.1" ] || fail "N+1 is not installed"
! grep -qE "Non-2xx|Socket errors" "$work/wrk" || fail "requests failed under the upgrade"
grep -qE "^ +[0-9]+ requests in" "$work/wrk" || fail "no load ran"
say "N+1 over N under load: pid $pid and processes $before kept, no request failed"
rm -rf "$work"

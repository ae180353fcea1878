#!/bin/bash
# Builds the Debian package, target/debian/fhircluster_<version>_<arch>.deb:
#   1. the optimised build (`./release-lto.sh`: the release-lto profile, with the committed PGO
#      profile when rustc's LLVM is its own) of the launcher and fhirsmith-sim;
#   2. what the built launcher prints for a package (`print systemd-unit`, `print logrotate`,
#      with Deploy's layout: /var/lib/fhirsmith, user fhirsmith, /opt/fhirsmith), into
#      target/deb-files/, so the packaged files are always the binary's own; the unit's
#      ExecStart= is the installed path, /usr/bin/fhircluster;
#   3. `cargo deb --no-build` (cargo-deb: `cargo install cargo-deb --locked`), whose metadata,
#      maintainer scripts (debian/) and man pages (debian/man/, tests/man_page.rs) are in the
#      repository.
#   debian/build.sh [--no-build] [cargo deb arguments, e.g. --deb-version 0.1.0-2]
# --no-build packages the binaries already in target/release-lto/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if [ "${1-}" = --no-build ]; then
    shift
else
    ./release-lto.sh build --bin fhircluster --bin fhirsmith-sim
fi
target=${CARGO_TARGET_DIR:-$root/target}
bin=$target/release-lto/fhircluster
out=$root/target/deb-files
mkdir -p "$out"
# Deploy's layout, not whatever data directory this shell names.
unset FHIRSMITH_DATA_DIR
"$bin" print systemd-unit | sed 's|^ExecStart=.*|ExecStart=/usr/bin/fhircluster|' > "$out/fhircluster.service"
[ "$(grep -c '^ExecStart=' "$out/fhircluster.service")" = 1 ] \
    || { echo "debian/build.sh: the printed unit has not one ExecStart=" >&2; exit 1; }
"$bin" print logrotate > "$out/logrotate"
exec cargo deb --profile release-lto --no-build "$@"

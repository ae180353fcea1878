#!/bin/bash
# The optimised build of what is shipped (the Debian package, the performance figures): cargo
# with the `release-lto` profile (Cargo.toml: fat LTO, one codegen unit; cluster.md DEC-61) and
# the committed profile of the launcher under load, `pgo/llvm-N.profdata`, given to rustc as
# `-Cprofile-use` (DEC-69) when rustc's LLVM major version is N. Another toolchain (Debian's
# rustc, an older one) builds the same profile without it, and says so.
#   ./release-lto.sh                        cargo build --profile release-lto: target/release-lto/
#   ./release-lto.sh build --bins           any cargo subcommand, its arguments after the profile
# The Debian package is built from it by debian/build.sh.
# The flag goes in CARGO_ENCODED_RUSTFLAGS (a path with a space stays one argument), after any
# RUSTFLAGS or CARGO_ENCODED_RUSTFLAGS already set. Like RUSTFLAGS, it takes the place of the
# `rustflags` of cargo's config files for this build. `cargo build --release` is the plain build.
set -eu
root=$(cd "$(dirname "$0")" && pwd)
rustc=${RUSTC:-rustc}
cargo=${CARGO:-cargo}
llvm=$("$rustc" -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
profile="$root/pgo/llvm-$llvm.profdata"
[ $# -gt 0 ] || set -- build
sub=$1
shift
if [ -n "$llvm" ] && [ -f "$profile" ]; then
    sep=$'\x1f'
    flags=${CARGO_ENCODED_RUSTFLAGS-}
    if [ -z "${CARGO_ENCODED_RUSTFLAGS+set}" ] && [ -n "${RUSTFLAGS-}" ]; then
        # RUSTFLAGS is split on whitespace, as cargo splits it.
        read -ra words <<< "$RUSTFLAGS"
        flags=$(IFS=$sep; printf '%s' "${words[*]}")
    fi
    export CARGO_ENCODED_RUSTFLAGS="${flags:+$flags$sep}-Cprofile-use=$profile"
    unset RUSTFLAGS
else
    echo "release-lto.sh: no profile in pgo/ for rustc's LLVM ${llvm:-(unknown)}: building without it" >&2
fi
exec "$cargo" "$sub" --profile release-lto "$@"

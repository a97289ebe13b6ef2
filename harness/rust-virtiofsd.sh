#!/usr/bin/env bash
# Print the path of the reference Rust virtiofsd 1.14.0, building it from
# crates.io into the cache the first time.
set -euo pipefail
. "$(dirname "$0")/../mk/common.sh"

version=1.14.0
root=$CACHE/rust-virtiofsd
bin=$root/bin/virtiofsd
if [ ! -x "$bin" ] || ! "$bin" --version 2>/dev/null | grep -qF "$version"; then
    command -v cargo >/dev/null ||
        die "cargo is missing (the Rust virtiofsd is built from crates.io): install Rust, e.g. apt-get install cargo"
    "$TOP/mk/deps.sh" build >&2
    say "building the Rust virtiofsd $version (cargo install, cached in $root)"
    cargo install --quiet --locked virtiofsd --version "$version" --root "$root" \
        >"$CACHE/rust-virtiofsd.log" 2>&1 ||
        die "cargo install virtiofsd $version failed (see $CACHE/rust-virtiofsd.log)"
fi
echo "$bin"

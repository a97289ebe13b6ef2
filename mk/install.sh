#!/usr/bin/env bash
# make install PREFIX=...: QEMU's own install (qemu-system-x86_64, tools,
# virtiofsd when built) under PREFIX, optionally below DESTDIR.
set -euo pipefail
. "$(dirname "$0")/common.sh"
"$CACHE/pyvenv/bin/meson" install -C "$BUILD/qemu" --no-rebuild \
    ${DESTDIR:+--destdir "$DESTDIR"} >"$BUILD/install.log" 2>&1 ||
    die "install failed (see build/install.log)"
say "installed under ${DESTDIR:-}${PREFIX:-/usr/local}"

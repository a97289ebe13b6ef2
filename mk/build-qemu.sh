#!/usr/bin/env bash
# Configure (when the options changed) and build QEMU from $BUILD/src into
# $BUILD/qemu (build/ for the default base, build/base-X/ for base X).
# Extra arguments are ninja targets to build as well, e.g.
# qtest binaries.
set -euo pipefail
. "$(dirname "$0")/common.sh"

QBUILD=$BUILD/qemu
cc=gcc
command -v ccache >/dev/null && cc="ccache gcc"
# Paths relative to $BUILD make ccache hits survive a second clone or worktree.
export CCACHE_BASEDIR=$BUILD CCACHE_DIR=${CCACHE_DIR:-$CACHE/ccache}
export CCACHE_NOHASHDIR=1

args=(
    --python="$CACHE/pyvenv/bin/python3"
    --prefix="${PREFIX:-/usr/local}"
    --target-list=x86_64-softmmu
    --cc="$cc"
    --enable-vhost-user --enable-seccomp --enable-cap-ng --enable-tools
    --enable-slirp --enable-linux-aio --enable-linux-io-uring
    --disable-docs --disable-install-blobs
    --firmwarepath=/usr/share/qemu:/usr/share/seabios:/usr/lib/ipxe/qemu
    ${QEMU_CONFIGURE_EXTRA:-}
)
stamp=$QBUILD/.virtiofs-dax-configure
if [ ! -f "$QBUILD/build.ninja" ] || [ "$(cat "$stamp" 2>/dev/null)" != "${args[*]}" ]; then
    rm -rf "$QBUILD"
    mkdir -p "$QBUILD"
    say "configuring QEMU in $(rel "$QBUILD") (log: $(rel "$BUILD")/configure.log)"
    : >"$BUILD/configure.log"
    (cd "$QBUILD" && "$SRC/configure" "${args[@]}") 2>&1 |
        "$TOP/mk/progress.py" "configuring QEMU" "$BUILD/configure.log" || {
        tail -n 20 "$BUILD/configure.log" >&2
        die "QEMU's configure failed (full log: $(rel "$BUILD")/configure.log)"; }
    printf '%s' "${args[*]}" > "$stamp"
fi

jobs=${JOBS:-$(nproc)}
# QEMU's Makefile runs ninja and builds the x86 option ROMs (linuxboot_dma.bin
# for -kernel) that Debian's source tarball does not ship.
# Output goes to build/build.log; the terminal gets one line of progress.
: >"$BUILD/build.log"
make -C "$QBUILD" -j"$jobs" --no-print-directory 2>&1 |
    "$TOP/mk/progress.py" "building QEMU" "$BUILD/build.log" || {
    grep -E 'error|Error' "$BUILD/build.log" | head -n 20 >&2
    die "QEMU build failed (full log: $(rel "$BUILD")/build.log)"; }
if [ $# -gt 0 ]; then
    ninja -C "$QBUILD" -j"$jobs" "$@" 2>&1 |
        "$TOP/mk/progress.py" "building $*" "$BUILD/build.log" || {
        grep -E 'error|Error' "$BUILD/build.log" | tail -n 20 >&2
        die "building $* failed (full log: $(rel "$BUILD")/build.log)"; }
fi
# Run from the build tree, QEMU looks for firmware in qemu-bundle/ only.  With
# Debian's tarball there is none: link Debian's seabios, ipxe and option ROMs
# there so qtests and direct runs need no -L.
bundle=$QBUILD/qemu-bundle${PREFIX:-/usr/local}/share/qemu
mkdir -p "$bundle"
for d in /usr/share/seabios /usr/lib/ipxe/qemu /usr/share/qemu; do
    for f in "$d"/*.bin "$d"/*.rom; do
        [ -f "$f" ] && [ ! -e "$bundle/${f##*/}" ] && ln -s "$f" "$bundle/${f##*/}"
    done
done
say "QEMU built: $QBUILD/qemu-system-x86_64"

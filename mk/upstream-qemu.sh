#!/usr/bin/env bash
# Unmodified upstream QEMU, as Debian builds it, for the tests that check our
# virtiofsd against a front-end that is not our fork.
#
# Debian's qemu-system-x86 1:11.1.x is built for Debian 13's glibc, newer
# than this machine's.  It is installed into a minimal Debian 13 root under
# the cache (debootstrap; the system's apt sources are never touched), and
# build/upstream-qemu/qemu-system-x86_64 runs it with that root's dynamic
# loader and libraries.  So it sees the host's paths (sockets, memfds, the
# guest kernel) as any QEMU would, with no chroot or mount namespace.
#
#   mk/upstream-qemu.sh          set up (idempotent), print the wrapper's path
set -euo pipefail
. "$(dirname "$0")/common.sh"

# The sid package this was checked with; when the archive has moved on, the
# newest 11.1.y it serves is taken and the run says so.
UPSTREAM_QEMU_VERSION=${UPSTREAM_QEMU_VERSION:-1:11.1.3+ds-1}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org}
UQ=$CACHE/upstream-qemu
ROOT=$UQ/root-trixie
OUT=$BUILD/upstream-qemu
WRAPPER=$OUT/qemu-system-x86_64
LOG=$UQ/setup.log

mkdir -p "$UQ" "$OUT"
exec 9>"$UQ/.lock"
flock 9

if [ ! -f "$ROOT/.debootstrap-done" ]; then
    command -v debootstrap >/dev/null ||
        die "debootstrap is missing: apt-get install debootstrap"
    say "upstream QEMU: making a Debian 13 root in $ROOT (log: $LOG)"
    rm -rf "$ROOT.tmp"
    debootstrap --variant=minbase trixie "$ROOT.tmp" "$MIRROR/debian" \
        >"$LOG" 2>&1 ||
        die "debootstrap of Debian 13 failed (log: $LOG)"
    touch "$ROOT.tmp/.debootstrap-done"
    rm -rf "$ROOT"
    mv "$ROOT.tmp" "$ROOT"
fi

# apt inside the root, in a private mount namespace so that /proc and /dev
# are there for maintainer scripts without being mounted on the system.
in_root() {
    unshare -m -- sh -c '
        root=$1; shift
        mount -t proc proc "$root/proc" && mount --rbind /dev "$root/dev" &&
        exec chroot "$root" "$@"' sh "$ROOT" "$@"
}

have=$(cat "$ROOT/.qemu-version" 2>/dev/null || true)
if [ -z "$have" ] || { [ -z "${UPSTREAM_QEMU_ANY:-}" ] &&
                       [ "$have" != "$UPSTREAM_QEMU_VERSION" ]; }; then
    say "upstream QEMU: installing Debian's qemu-system-x86 $UPSTREAM_QEMU_VERSION from sid (log: $LOG)"
    kr=/usr/share/keyrings/debian-archive-keyring.gpg
    cp /etc/resolv.conf "$ROOT/etc/resolv.conf" 2>/dev/null || true
    cp "$kr" "$ROOT/etc/apt/trusted.gpg.d/debian-archive-keyring.gpg"
    # sid's Release file is signed with a Valid-Until that Debian's archive
    # lets lapse between pushes; only the date check is relaxed.
    cat > "$ROOT/etc/apt/sources.list.d/sid.list" <<EOS
deb $MIRROR/debian sid main
EOS
    cat > "$ROOT/etc/apt/apt.conf.d/90virtiofs-dax" <<EOS
Acquire::Check-Valid-Until "false";
APT::Install-Recommends "false";
EOS
    in_root apt-get -q update >>"$LOG" 2>&1 ||
        die "apt-get update in the Debian 13 root failed (log: $LOG)"
    ver=$UPSTREAM_QEMU_VERSION
    if ! in_root apt-cache show "qemu-system-x86=$ver" >/dev/null 2>&1; then
        newest=$(in_root apt-cache madison qemu-system-x86 2>/dev/null |
                 awk '{print $3}' | grep -E '^1:11\.1\.' | sort -V | tail -n 1)
        [ -n "$newest" ] ||
            die "Debian's archive serves no qemu-system-x86 11.1.y (wanted $ver; log: $LOG)"
        say "note: Debian no longer has qemu-system-x86 $ver; using $newest"
        ver=$newest
    fi
    # Its dependencies (glibc among them) come from sid as well.
    DEBIAN_FRONTEND=noninteractive in_root apt-get -q -y -t sid install \
        "qemu-system-x86=$ver" "qemu-system-common=$ver" "qemu-system-data=$ver" \
        >>"$LOG" 2>&1 ||
        die "installing qemu-system-x86 $ver in the Debian 13 root failed (log: $LOG)"
    in_root apt-get -q clean >>"$LOG" 2>&1 || true
    printf '%s\n' "$ver" > "$ROOT/.qemu-version"
fi

ldso=$ROOT/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
[ -x "$ROOT/usr/bin/qemu-system-x86_64" ] && [ -e "$ldso" ] ||
    die "the Debian 13 root in $ROOT has no qemu-system-x86_64: remove it and run again"

cat > "$WRAPPER.new" <<EOF
#!/bin/sh
# Debian's QEMU $(cat "$ROOT/.qemu-version"), unmodified, run with its own Debian 13
# libraries (written by mk/upstream-qemu.sh).
R=$ROOT
export QEMU_MODULE_DIR="\$R/usr/lib/x86_64-linux-gnu/qemu"
exec "\$R/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" \\
    --library-path "\$R/usr/lib/x86_64-linux-gnu:\$R/lib/x86_64-linux-gnu" \\
    "\$R/usr/bin/qemu-system-x86_64" \\
    -L "\$R/usr/share/qemu" -L "\$R/usr/share/seabios" -L "\$R/usr/lib/ipxe/qemu" \\
    "\$@"
EOF
chmod +x "$WRAPPER.new"
mv "$WRAPPER.new" "$WRAPPER"
"$WRAPPER" --version | head -n 1 >&2 ||
    die "$WRAPPER does not run (log: $LOG)"
printf '%s\n' "$WRAPPER"

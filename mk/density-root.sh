#!/usr/bin/env bash
# A Debian 13 root for the density benchmark (bench/density.py): what a
# container image or a VM's root file system holds, an interpreter with its
# standard library and the usual binaries, that many guests boot their
# user space from, read-only, over virtio-fs.
#
# Made the way mk/fstests-root.sh makes the fstests root (debootstrap
# minbase, packages installed in a private mount namespace), but without
# fstests' build tools and sources: the benchmark counts the host's page
# cache of the root's files, and what it measures should be a root that
# people run, not a build tree.
#
#   mk/density-root.sh      set up (idempotent), print the root's path
#
# The root lives in $CACHE/density/root-KEY, KEY a hash of the package
# list and of this layout's version: a change to either makes a new root
# (and drops the old ones).
set -euo pipefail
. "$(dirname "$0")/common.sh"

ROOT_LAYOUT=1
# python3 for the interpreter and its modules; file (libmagic and its
# 8 MiB database, mapped), gawk, xz-utils and bzip2 for binaries with
# libraries of their own beside minbase's coreutils, grep, sed, tar, gzip.
PKGS="python3 file gawk xz-utils bzip2"
KEY=$(printf 'layout %s\n%s\n' "$ROOT_LAYOUT" "$PKGS" | sha256sum | cut -c1-12)

MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org}
DD=$CACHE/density
ROOT=$DD/root-$KEY
LOG=$DD/setup.log

mkdir -p "$DD"
exec 9>"$DD/.lock"
flock 9

in_root() {
    # /proc and /dev for maintainer scripts, never mounted on the system
    unshare -m -- sh -c '
        root=$1; shift
        mount -t proc proc "$root/proc" && mount --rbind /dev "$root/dev" &&
        exec chroot "$root" "$@"' sh "$1" "${@:2}"
}

if [ ! -f "$ROOT/.root-done" ]; then
    command -v debootstrap >/dev/null ||
        die "debootstrap is missing: apt-get install debootstrap"
    t0=$SECONDS
    say "density: making a Debian 13 root in $ROOT (log: $LOG)"
    tmp=$ROOT.tmp
    rm -rf "$tmp"
    : >"$LOG"
    debootstrap --variant=minbase trixie "$tmp" "$MIRROR/debian" \
        >>"$LOG" 2>&1 ||
        die "debootstrap of Debian 13 failed (log: $LOG)"
    cp /etc/resolv.conf "$tmp/etc/resolv.conf" 2>/dev/null || true
    cat > "$tmp/etc/apt/apt.conf.d/90virtiofs-dax" <<EOS
APT::Install-Recommends "false";
EOS
    in_root "$tmp" apt-get -q update >>"$LOG" 2>&1 ||
        die "apt-get update in the density root failed (log: $LOG)"
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive in_root "$tmp" apt-get -q -y install $PKGS \
        >>"$LOG" 2>&1 ||
        die "installing the density root's packages failed (log: $LOG)"
    in_root "$tmp" apt-get -q clean >>"$LOG" 2>&1 || true
    # Python writes no bytecode into a read-only root: compile what the
    # standard library has not compiled yet, as a root built for
    # read-only use would ship it.
    in_root "$tmp" sh -c 'python3 -m compileall -q /usr/lib/python3*' \
        >>"$LOG" 2>&1 || true
    echo density-guest > "$tmp/etc/hostname"
    touch "$tmp/.root-done"
    rm -rf "$ROOT"
    mv "$tmp" "$ROOT"
    for old in "$DD"/root-*; do
        [ "$old" = "$ROOT" ] || [ ! -d "$old" ] || rm -rf "$old"
    done
    say "density: root made in $((SECONDS - t0)) s"
fi

# shellcheck disable=SC2086
missing=$(in_root "$ROOT" sh -c 'for p; do
        dpkg-query -W -f="\${Status}" "$p" 2>/dev/null | grep -q " installed$" ||
            printf "%s " "$p"
    done' sh $PKGS) || die "cannot look into the density root $ROOT"
[ -z "$missing" ] ||
    die "the density root $ROOT lacks packages: $missing(remove the directory and run again)"
printf '%s\n' "$ROOT"

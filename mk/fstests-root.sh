#!/usr/bin/env bash
# A Debian 13 root with fstests (xfstests) built in it, for harness/fstests.py.
#
# fstests is a large shell suite that runs xfs_io, fsstress, fsx, perl,
# setfacl and the like: nothing the harness's busybox initramfs has.  The
# guest mounts this root from a read-only share and chroots into it
# (harness/fstests-guest.sh), so the suite runs with Debian's tools
# against the shares under test.
#
# Debian does not package fstests: its source is given as a tarball or a
# clone (FSTESTS=), or is the pinned tag (harness/fstests/source.pin) from
# ../shared/deps/ beside the project, from the cache, or fetched from
# fstests' upstream git (mk/fstests-source.sh), and is built inside the
# root (chroot) with the root's own compiler and libraries.
#
#   mk/fstests-root.sh [SOURCE]     set up (idempotent), print the root's path
#
# The root lives in $CACHE/fstests/root-KEY, KEY a hash of the package
# list below and of this layout's version: a change to either makes a new
# root (and drops the old ones).  The fstests build inside it is redone
# when the source's content changes (/fstests/.source-key).
set -euo pipefail
. "$(dirname "$0")/common.sh"

# Bump when the root's layout changes in a way the package list does not
# show (users, directories).
ROOT_LAYOUT=1
# What fstests needs to run on virtiofs (its README's Debian list, less
# what only block-device file systems use), then to build.
RUN_PKGS="acl attr bc e2fsprogs fio gawk psmisc python3 sed xfsprogs
          util-linux mount procps kmod file hostname uuid-runtime libcap2-bin
          diffutils findutils coreutils perl bsdextrautils xxd ncurses-bin
          passwd login keyutils dbench quota sqlite3 time"
BUILD_PKGS="autoconf automake libtool libtool-bin make gcc pkg-config
            uuid-dev xfslibs-dev libattr1-dev libacl1-dev libaio-dev
            liburing-dev libcap-dev libgdbm-dev libgdbm-compat-dev"
PKGS=$(echo $RUN_PKGS $BUILD_PKGS | tr ' ' '\n' | sort -u | tr '\n' ' ')
KEY=$(printf 'layout %s\n%s\n' "$ROOT_LAYOUT" "$PKGS" | sha256sum | cut -c1-12)

MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org}
FD=$CACHE/fstests
ROOT=$FD/root-$KEY
LOG=$FD/setup.log
# The source, found and checked (mk/fstests-source.sh: FSTESTS= or $1,
# ../shared/deps/, the cache, or fetched from upstream), before the lock:
# that script takes its own
SOURCE=$("$TOP/mk/fstests-source.sh" "${1:-${FSTESTS:-}}") || exit 1

mkdir -p "$FD"
exec 9>"$FD/.lock"
flock 9

# --- what identifies the source ---------------------------------------------------
if [ -f "$SOURCE" ]; then
    SOURCE_KEY="tarball $(sha256_of "$SOURCE")"
else
    # Its content, not its commit: an edited clone is rebuilt too
    SOURCE_KEY="tree $(tar -C "$SOURCE" --exclude=.git --sort=name --mtime=@0 \
        --owner=0 --group=0 -cf - . | sha256sum | cut -c1-64)"
fi

# --- the Debian root ------------------------------------------------------------
in_root() {
    # A private mount namespace: /proc and /dev are there for maintainer
    # scripts and builds without being mounted on the system.
    unshare -m -- sh -c '
        root=$1; shift
        mount -t proc proc "$root/proc" && mount --rbind /dev "$root/dev" &&
        exec chroot "$root" "$@"' sh "$ROOT" "$@"
}

if [ ! -f "$ROOT/.root-done" ]; then
    command -v debootstrap >/dev/null ||
        die "debootstrap is missing: apt-get install debootstrap"
    t0=$SECONDS
    say "fstests: making a Debian 13 root in $ROOT (log: $LOG)"
    rm -rf "$ROOT.tmp"
    : >"$LOG"
    debootstrap --variant=minbase trixie "$ROOT.tmp" "$MIRROR/debian" \
        >>"$LOG" 2>&1 ||
        die "debootstrap of Debian 13 failed (log: $LOG)"
    cp /etc/resolv.conf "$ROOT.tmp/etc/resolv.conf" 2>/dev/null || true
    cat > "$ROOT.tmp/etc/apt/apt.conf.d/90virtiofs-dax" <<EOS
APT::Install-Recommends "false";
EOS
    ROOT=$ROOT.tmp
    in_root apt-get -q update >>"$LOG" 2>&1 ||
        die "apt-get update in the fstests root failed (log: $LOG)"
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive in_root apt-get -q -y install $PKGS \
        >>"$LOG" 2>&1 ||
        die "installing fstests' packages in the root failed (log: $LOG)"
    in_root apt-get -q clean >>"$LOG" 2>&1 || true
    # The users fstests' tests switch to (_require_user, _require_group)
    for u in fsgqa fsgqa2 123456-fsgqa; do
        in_root useradd -m -U "$u" >>"$LOG" 2>&1 ||
            die "useradd $u in the fstests root failed (log: $LOG)"
    done
    # Mount points the guest script uses inside the root (it is read-only
    # there): the shares under test, the run's own share, scratch space
    mkdir -p "$ROOT/mnt/test" "$ROOT/mnt/scratch" "$ROOT/run-share" "$ROOT/fstests"
    echo fstests-guest > "$ROOT/etc/hostname"
    ROOT=${ROOT%.tmp}
    touch "$ROOT.tmp/.root-done"
    rm -rf "$ROOT"
    mv "$ROOT.tmp" "$ROOT"
    # Roots of older package lists
    for old in "$FD"/root-*; do
        [ "$old" = "$ROOT" ] || [ ! -d "$old" ] || rm -rf "$old"
    done
    say "fstests: root made in $((SECONDS - t0)) s"
fi

# Every package must be there: a root made by hand or half-removed is
# refused rather than run with tools missing.
# shellcheck disable=SC2086
missing=$(in_root sh -c 'for p; do
        dpkg-query -W -f="\${Status}" "$p" 2>/dev/null | grep -q " installed$" ||
            printf "%s " "$p"
    done' sh $PKGS) || die "cannot look into the fstests root $ROOT"
[ -z "$missing" ] ||
    die "the fstests root $ROOT lacks packages: $missing(remove the directory and run again)"

# --- fstests, built inside the root ---------------------------------------------
if [ "$(cat "$ROOT/fstests/.source-key" 2>/dev/null)" != "$SOURCE_KEY" ]; then
    t0=$SECONDS
    say "fstests: building $SOURCE in the root (log: $FD/build.log)"
    rm -rf "$ROOT/fstests.tmp"
    mkdir -p "$ROOT/fstests.tmp"
    if [ -f "$SOURCE" ]; then
        tar -C "$ROOT/fstests.tmp" --strip-components=1 -xzf "$SOURCE" ||
            die "cannot unpack $SOURCE"
    else
        tar -C "$SOURCE" --exclude=.git -cf - . | tar -C "$ROOT/fstests.tmp" -xf -
    fi
    in_root sh -c 'cd /fstests.tmp && make -j"$1"' sh "$(nproc)" \
        >"$FD/build.log" 2>&1 ||
        die "building fstests failed (log: $FD/build.log)"
    for p in ltp/fsstress ltp/fsx src/aio-dio-regress/aio-dio-append-write-read-race; do
        [ -x "$ROOT/fstests.tmp/$p" ] ||
            die "the fstests build made no $p (log: $FD/build.log)"
    done
    printf '%s\n' "$SOURCE_KEY" > "$ROOT/fstests.tmp/.source-key"
    printf '%s\n' "$SOURCE" > "$ROOT/fstests.tmp/.source"
    rm -rf "$ROOT/fstests"
    mv "$ROOT/fstests.tmp" "$ROOT/fstests"
    say "fstests: built in $((SECONDS - t0)) s"
fi
printf '%s\n' "$ROOT"

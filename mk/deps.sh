#!/usr/bin/env bash
# Make sure what the build and the tests need is installed.  As root on
# Debian or Ubuntu the missing packages are installed; otherwise the missing
# ones are named with the command that installs them.
#
#   mk/deps.sh [build|guest|libvirt|fuzz|docs|upstream|fstests|density]...  (default: build guest)
set -euo pipefail
. "$(dirname "$0")/common.sh"

declare -A PKGS=(
    [build]="build-essential pkg-config ninja-build python3 python3-venv flex bison git
             libglib2.0-dev libpixman-1-dev libseccomp-dev libcap-ng-dev libfdt-dev
             zlib1g-dev libslirp-dev libaio-dev liburing-dev ccache dpkg-dev xz-utils
             debian-archive-keyring curl"
    [guest]="seabios ipxe-qemu qemu-system-data busybox-static fio cpio kmod gdb uidmap"
    [libvirt]="libvirt-daemon-system libvirt-clients"
    [fuzz]="clang libclang-rt-14-dev"
    [docs]="python3-sphinx"
    [upstream]="debootstrap"
    [fstests]="debootstrap debian-archive-keyring"
    [density]="debootstrap debian-archive-keyring"
)

groups=("$@")
[ ${#groups[@]} -gt 0 ] || groups=(build guest)

missing=()
for g in "${groups[@]}"; do
    [ -n "${PKGS[$g]:-}" ] || die "mk/deps.sh: unknown group $g"
    for p in ${PKGS[$g]}; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
            missing+=("$p")
    done
done

if [ ${#missing[@]} -gt 0 ]; then
    if ! command -v apt-get >/dev/null; then
        die "missing packages (${missing[*]}); this script installs them only on Debian/Ubuntu"
    elif [ "$(id -u)" -ne 0 ]; then
        die "missing packages: run: sudo apt-get install ${missing[*]}"
    fi
    say "installing: ${missing[*]}"
    mkdir -p "$CACHE"
    stamp=/var/lib/apt/periodic/virtiofs-dax-update
    if [ ! -f "$stamp" ] || [ -n "$(find "$stamp" -mmin +720)" ]; then
        apt-get -q update >/dev/null 2>&1 || true
        mkdir -p "$(dirname "$stamp")" && touch "$stamp"
    fi
    DEBIAN_FRONTEND=noninteractive apt-get -q install -y --no-install-recommends \
        "${missing[@]}" >"$CACHE/apt-install.log" 2>&1 || {
        die "apt-get install ${missing[*]} failed (see $CACHE/apt-install.log)"; }
fi

# QEMU 10 needs meson >= 1.5, newer than Debian 12's: keep one from PyPI in a
# private virtual environment, whose python then runs QEMU's configure.
if [[ " ${groups[*]} " == *" build "* ]]; then
    venv=$CACHE/pyvenv
    if ! "$venv/bin/python3" -c 'import mesonbuild.coredata as c, sys
v = tuple(int(x) for x in c.version.split(".")[:2]); sys.exit(v < (1, 5))' 2>/dev/null; then
        mkdir -p "$CACHE"
        rm -rf "$venv"
        /usr/bin/python3 -m venv --system-site-packages "$venv" ||
            die "cannot create a python venv: apt-get install python3-venv"
        "$venv/bin/python3" -m pip install -q 'meson>=1.5,<1.9' >"$CACHE/pip.log" 2>&1 ||
            die "cannot install meson >= 1.5 from PyPI (see $CACHE/pip.log)"
    fi
fi

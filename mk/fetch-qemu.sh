#!/usr/bin/env bash
# Obtain pristine upstream QEMU and keep it, as a one-commit git repository,
# under the download cache.  Prints that repository's path on stdout.
#
# Sources, first match wins:
#   1. QEMU_SOURCE=/path/to/qemu-X.tar.xz or an extracted tree;
#   2. the upstream release tarball, when qemu.pin pins its sha256;
#   3. Debian's source package (pinned revision, else the newest of the
#      base's X.Y.z),
#      extracted with Debian's patch series applied.
set -euo pipefail
. "$(dirname "$0")/common.sh"

mkdir -p "$CACHE/src" "$CACHE/trees"

# Turn an extracted tree into the cached pristine repository $2.
make_pristine_repo() {
    local tree=$1 repo=$2 desc=$3
    local tmp=$repo.tmp
    rm -rf "$tmp"
    git -C "$tree" init -q
    git -C "$tree" add -A -f .
    git -C "$tree" -c user.name=upstream -c user.email=upstream@invalid \
        -c core.autocrlf=false commit -q -m "upstream: $desc" \
        --date="2000-01-01T00:00:00Z"
    git clone -q --bare "$tree" "$tmp"
    printf '%s\n' "${desc%%;*}" "$desc" > "$tmp/virtiofs-dax-source"
    mv "$tmp" "$repo"
}

from_local() {
    local src=$QEMU_SOURCE id tree
    if [ -d "$src" ]; then
        [ -f "$src/VERSION" ] || die "QEMU_SOURCE=$src is not a QEMU source tree (no VERSION)"
        id=local-$(cat "$src/VERSION")-$(printf '%s' "$(realpath "$src")" | sha256sum | cut -c1-12)
        [ -d "$CACHE/trees/$id.git" ] && rm -rf "$CACHE/trees/$id.git"   # a tree may change
        tree=$(mktemp -d "$CACHE/src/extract.XXXXXX")
        cp -a "$src/." "$tree/"
        rm -rf "$tree/.git"
        make_pristine_repo "$tree" "$CACHE/trees/$id.git" "local tree $src (VERSION $(cat "$src/VERSION"))"
        rm -rf "$tree"
    elif [ -f "$src" ]; then
        local sum
        sum=$(sha256_of "$src")
        id=tarball-$sum
        if [ ! -d "$CACHE/trees/$id.git" ]; then
            tree=$(mktemp -d "$CACHE/src/extract.XXXXXX")
            tar -xf "$src" -C "$tree" --strip-components=1 || die "cannot extract QEMU_SOURCE=$src"
            [ -f "$tree/VERSION" ] || die "QEMU_SOURCE=$src does not hold a QEMU tree"
            make_pristine_repo "$tree" "$CACHE/trees/$id.git" "local tarball $src sha256 $sum"
            rm -rf "$tree"
        fi
    else
        die "QEMU_SOURCE=$src: no such file or directory"
    fi
    echo "$CACHE/trees/$id.git"
}

from_upstream() {
    local id=upstream-$QEMU_VERSION tar=$CACHE/src/qemu-$QEMU_VERSION.tar.xz
    if [ -d "$CACHE/trees/$id.git" ]; then echo "$CACHE/trees/$id.git"; return 0; fi
    if [ ! -f "$tar" ] || [ "$(sha256_of "$tar")" != "$UPSTREAM_SHA256" ]; then
        command -v curl >/dev/null || return 1
        curl -fsSL --connect-timeout 10 --max-time 600 -o "$tar.part" "$UPSTREAM_URL" 2>/dev/null || {
            rm -f "$tar.part"; return 1; }
        mv "$tar.part" "$tar"
    fi
    [ "$(sha256_of "$tar")" = "$UPSTREAM_SHA256" ] || {
        say "warning: $UPSTREAM_URL does not match the pinned sha256; not used"; return 1; }
    local tree
    tree=$(mktemp -d "$CACHE/src/extract.XXXXXX")
    tar -xf "$tar" -C "$tree" --strip-components=1
    make_pristine_repo "$tree" "$CACHE/trees/$id.git" "upstream qemu-$QEMU_VERSION.tar.xz sha256 $UPSTREAM_SHA256"
    rm -rf "$tree"
    echo "$CACHE/trees/$id.git"
}

from_debian() {
    local ver=$DEBIAN_VERSION id
    id=debian-${ver//:/_}
    if [ -d "$CACHE/trees/$id.git" ]; then echo "$CACHE/trees/$id.git"; return 0; fi
    command -v dpkg-source >/dev/null || die "dpkg-source is missing: apt-get install dpkg-dev"
    apt_private_setup source
    local avail
    avail=$(apt-cache "${APT_OPTS[@]}" showsrc qemu 2>/dev/null |
            sed -n 's/^Version: //p' | sort -u)
    if ! grep -qxF "$ver" <<<"$avail"; then
        local newest
        newest=$(grep -E "^1:${QEMU_BASE//./\\.}\\.[0-9]+" <<<"$avail" | sort -V | tail -n1)
        [ -n "$newest" ] || die "Debian ${DEBIAN_SOURCE_SUITES:-$DEBIAN_SUITE} carries no qemu $QEMU_BASE.y source (has: $(echo $avail))"
        say "note: Debian no longer has qemu $ver; using the newest $QEMU_BASE.y it has, $newest"
        ver=$newest
        id=debian-${ver//:/_}
        if [ -d "$CACHE/trees/$id.git" ]; then echo "$CACHE/trees/$id.git"; return 0; fi
    fi
    local up=${ver#*:} dl=$CACHE/src
    up=${up%-*}
    local dsc=$dl/qemu_${ver#*:}.dsc orig=$dl/qemu_${up}.orig.tar.xz
    if [ ! -f "$dsc" ] || [ ! -f "$orig" ]; then
        ( cd "$dl" && apt-get "${APT_OPTS[@]}" -q source --download-only "qemu=$ver" \
              >"$dl/download.log" 2>&1 ) ||
            die "cannot download Debian's qemu $ver source (see $dl/download.log)"
    fi
    if [ "$ver" = "$DEBIAN_VERSION" ]; then
        [ "$(sha256_of "$orig")" = "$DEBIAN_ORIG_SHA256" ] || die "$orig does not match the pinned sha256"
        [ "$(sha256_of "$dsc")" = "$DEBIAN_DSC_SHA256" ] || die "$dsc does not match the pinned sha256"
        [ "$(sha256_of "$dl/qemu_${ver#*:}.debian.tar.xz")" = "$DEBIAN_DEBIAN_SHA256" ] ||
            die "qemu_${ver#*:}.debian.tar.xz does not match the pinned sha256"
    fi
    local tree
    tree=$(mktemp -d "$CACHE/src/extract.XXXXXX")
    rmdir "$tree"
    dpkg-source --no-check -x "$dsc" "$tree" >"$dl/extract.log" 2>&1 ||
        die "dpkg-source could not extract $dsc (see $dl/extract.log)"
    # debian/ is packaging, not QEMU: keep the patched tree only.
    rm -rf "$tree/debian" "$tree/.pc"
    make_pristine_repo "$tree" "$CACHE/trees/$id.git" \
        "Debian qemu $ver with Debian's patch series; orig tarball sha256 $(sha256_of "$orig")"
    rm -rf "$tree"
    echo "$CACHE/trees/$id.git"
}

if [ -n "${QEMU_SOURCE:-}" ]; then
    from_local
elif [ -n "$UPSTREAM_SHA256" ] && from_upstream; then
    :
else
    from_debian
fi

#!/usr/bin/env bash
# Guest assets for every end-to-end test and benchmark, in build/guest/:
#   vmlinuz             Debian 13's 6.12 kernel (virtio-fs, FUSE DAX built in)
#   initramfs.cpio.gz   busybox, fio and the 9p modules, with harness/guest-init
# Both are rebuilt only when what they are made of changed.
set -euo pipefail
. "$(dirname "$0")/../mk/common.sh"

GUEST=$GUEST_DIR
mkdir -p "$GUEST" "$CACHE/kernel"

# --- kernel -----------------------------------------------------------------
kernel_deb() {
    local pkg=$KERNEL_PACKAGE deb
    deb=$(ls "$CACHE/kernel/${pkg}_"*.deb 2>/dev/null | head -n1 || true)
    if [ -z "$deb" ]; then
        apt_private_setup
        if ! apt-cache "${APT_OPTS[@]}" show "$pkg" >/dev/null 2>&1; then
            local newest
            newest=$(apt-cache "${APT_OPTS[@]}" pkgnames linux-image-6.12. 2>/dev/null |
                     grep -E '^linux-image-6\.12\.[0-9]+\+deb13-amd64$' | sort -V | tail -n1)
            [ -n "$newest" ] || die "Debian $DEBIAN_SUITE has no linux-image-6.12.*+deb13-amd64"
            say "note: Debian no longer has $pkg; using $newest"
            pkg=$newest
            deb=$(ls "$CACHE/kernel/${pkg}_"*.deb 2>/dev/null | head -n1 || true)
        fi
        if [ -z "$deb" ]; then
            (cd "$CACHE/kernel" && apt-get "${APT_OPTS[@]}" -q download "$pkg" \
                 >"$CACHE/kernel/download.log" 2>&1) ||
                die "cannot download $pkg (see $CACHE/kernel/download.log)"
            deb=$(ls "$CACHE/kernel/${pkg}_"*.deb | head -n1)
        fi
    fi
    echo "$deb"
}

# Several worktrees share the cache: one of them unpacks at a time.
mkdir -p "$CACHE/kernel"
exec 9>"$CACHE/kernel/.lock"
flock 9
deb=$(kernel_deb)
kdir=$CACHE/kernel/$(basename "$deb" .deb)
if [ ! -f "$kdir/.done" ] || ! ls "$kdir"/boot/vmlinuz-* >/dev/null 2>&1; then
    rm -rf "$kdir"
    dpkg-deb -x "$deb" "$kdir" || die "cannot unpack $deb"
    # The package leaves modules.dep to depmod at install time.
    for base in "$kdir" "$kdir/usr"; do
        [ -d "$base/lib/modules" ] || continue
        for m in "$base"/lib/modules/*; do
            /sbin/depmod -b "$base" "${m##*/}" || die "depmod failed for $m"
        done
    done
    touch "$kdir/.done"
fi
vmlinuz=$(ls "$kdir"/boot/vmlinuz-* | head -n1)
kver=${vmlinuz##*/vmlinuz-}
if ! cmp -s "$vmlinuz" "$GUEST/vmlinuz" 2>/dev/null; then
    cp "$vmlinuz" "$GUEST/vmlinuz"
fi
echo "$kver ($(basename "$deb"))" > "$GUEST/kernel.txt"
flock -u 9

# --- initramfs --------------------------------------------------------------
busybox=/bin/busybox
[ -x "$busybox" ] && file -L "$busybox" 2>/dev/null | grep -q static ||
    busybox=$(command -v busybox || true)
[ -x "$busybox" ] || die "busybox is missing: apt-get install busybox-static"
progs=(fio)
for p in "${progs[@]}"; do
    command -v "$p" >/dev/null || die "$p is missing: apt-get install $p"
done
# Guest helpers compiled from harness/guest-tools/*.c, static.
tools_src=("$TOP"/harness/guest-tools/*.c)

key=$( {
    echo "$kver"
    sha256sum "$TOP/harness/guest-init" "$TOP/harness/guest-lib.sh" "$TOP/harness/build-guest.sh" "$busybox"
    for p in "${progs[@]}"; do sha256sum "$(command -v "$p")"; done
    if [ -e "${tools_src[0]}" ]; then sha256sum "${tools_src[@]}"; fi
} | sha256sum | cut -d' ' -f1)
if [ "$(cat "$GUEST/initramfs.key" 2>/dev/null)" = "$key" ] && [ -f "$GUEST/initramfs.cpio.gz" ]; then
    say "guest: kernel $kver, initramfs up to date"
    exit 0
fi

root=$(mktemp -d "$GUEST/root.XXXXXX")
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,sbin,etc,proc,sys,dev,tmp,mnt,run,root,lib/modules,usr/bin}
cp "$busybox" "$root/bin/busybox"
cp "$TOP/harness/guest-init" "$root/init"
mkdir -p "$root/vfsdax"
cp "$TOP/harness/guest-lib.sh" "$root/lib/vfsdax.sh"
chmod 755 "$root/init"

# Dynamic programs and the libraries they load.
copy_with_libs() {
    local bin=$1 dest=$2
    cp -L "$bin" "$root$dest"
    ldd "$bin" 2>/dev/null | grep -oE '/[^ ]+' | while read -r lib; do
        [ -f "$lib" ] || continue
        mkdir -p "$root$(dirname "$lib")"
        [ -f "$root$lib" ] || cp -L "$lib" "$root$lib"
    done
}
for p in "${progs[@]}"; do copy_with_libs "$(command -v "$p")" "/usr/bin/$p"; done
# fio dlopens its ioengines' libraries lazily; libaio is linked directly.

for src in "${tools_src[@]}"; do
    [ -e "$src" ] || continue
    gcc -O2 -static -Wall -o "$root/usr/bin/$(basename "$src" .c)" "$src" ||
        die "cannot build guest tool $src"
done

# virtio-9p is a module in Debian's kernel (the benchmarks compare against
# it): ship it with what it depends on, decompressed for busybox's insmod.
mdir=$kdir/lib/modules/$kver
[ -d "$mdir" ] || mdir=$kdir/usr/lib/modules/$kver
if [ -f "$mdir/modules.dep" ]; then
    want() {
        local m=$1 line dep
        line=$(grep -E "(^|/)$m\.ko(\.xz|\.zst|\.gz)?:" "$mdir/modules.dep" | head -n1) || return 0
        for dep in ${line#*:}; do want "$(basename "${dep%%.ko*}")"; done
        grep -qxF "${line%%:*}" "$root/lib/modules/order" 2>/dev/null ||
            echo "${line%%:*}" >> "$root/lib/modules/order"
    }
    for m in 9pnet_virtio 9p; do want "$m"; done
    while read -r rel; do
        out=$root/lib/modules/$(basename "${rel%%.ko*}").ko
        case "$rel" in
        *.xz) xz -dc "$mdir/$rel" > "$out" ;;
        *.zst) zstd -qdc "$mdir/$rel" > "$out" ;;
        *.gz) gzip -dc "$mdir/$rel" > "$out" ;;
        *) cp "$mdir/$rel" "$out" ;;
        esac
    done < "$root/lib/modules/order"
    sed -i 's#.*/##; s#\.ko.*#.ko#' "$root/lib/modules/order"
fi

(cd "$root" && find . -print0 | sort -z | cpio --null -o -H newc --quiet) |
    gzip -1 > "$GUEST/initramfs.cpio.gz.new"
mv "$GUEST/initramfs.cpio.gz.new" "$GUEST/initramfs.cpio.gz"
echo "$key" > "$GUEST/initramfs.key"
say "guest: kernel $kver, initramfs $(du -h "$GUEST/initramfs.cpio.gz" | cut -f1)"

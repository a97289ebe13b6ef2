#!/usr/bin/env bash
# Guest assets for every end-to-end test and benchmark, in $GUEST_DIR
# (build/guest for the default kernel, build/guest-NAME for the others):
#   vmlinuz             the kernel of Debian release $GUEST_KERNEL:
#                       trixie's 6.12 (the default), bookworm's 6.1, sid's
#   kernel.txt          "VERSION (PACKAGE.deb)", then "release: NAME"
#   initramfs.cpio.gz   busybox, fio, the modules the harness needs that
#                       this kernel has as modules, with harness/guest-init
# Both are rebuilt only when what they are made of changed.
set -euo pipefail
. "$(dirname "$0")/../mk/common.sh"

GUEST=$GUEST_DIR
mkdir -p "$GUEST" "$CACHE/kernel"

# --- kernel -----------------------------------------------------------------
# Per release: the pinned package (qemu.pin), and the names of the packages
# of the same line that replace it once the archive has dropped it.
case $GUEST_KERNEL in
trixie)
    PIN=$KERNEL_PACKAGE PIN_NAME=KERNEL_PACKAGE PREFIX=linux-image-6.12.
    NEWER='^linux-image-6\.12\.[0-9]+\+deb13-amd64$' ;;
bookworm)
    PIN=$KERNEL_PACKAGE_BOOKWORM PIN_NAME=KERNEL_PACKAGE_BOOKWORM
    PREFIX=linux-image-6.1.0- NEWER='^linux-image-6\.1\.0-[0-9]+-amd64$' ;;
sid)
    # The image package only depends on the split ones: linux-binary
    # holds the kernel (modules are another package, not needed: sid
    # builds virtio-fs in)
    PIN=$KERNEL_PACKAGE_SID PIN_NAME=KERNEL_PACKAGE_SID PREFIX=linux-binary-
    NEWER='^linux-binary-[0-9][0-9.]*\+deb[0-9]+-amd64$' ;;
esac

# The package's .deb in the cache, fetched when it is not there
fetch_deb() {
    local pkg=$1 deb
    deb=$(ls "$CACHE/kernel/${pkg}_"*.deb 2>/dev/null | head -n1 || true)
    if [ -z "$deb" ]; then
        # apt checks the Release signature and the .deb's checksum
        (cd "$CACHE/kernel" && apt-get "${APT_OPTS[@]}" -q download "$pkg" \
             >"$CACHE/kernel/download.log" 2>&1) ||
            die "cannot download $pkg (see $CACHE/kernel/download.log)"
        deb=$(ls "$CACHE/kernel/${pkg}_"*.deb | head -n1)
    fi
    echo "$deb"
}

# The kernel's .debs: the kernel's package, then for sid's split one
# linux-base-VERSION, whose modules.builtin and config say what is built in.
kernel_debs() {
    local pkg=$PIN deb
    deb=$(ls "$CACHE/kernel/${pkg}_"*.deb 2>/dev/null | head -n1 || true)
    if [ -z "$deb" ]; then
        apt_private_setup binary "$GUEST_KERNEL"
        if ! apt-cache "${APT_OPTS[@]}" show "$pkg" >/dev/null 2>&1; then
            local newest
            newest=$(apt-cache "${APT_OPTS[@]}" pkgnames "$PREFIX" 2>/dev/null |
                     grep -E "$NEWER" | sort -V | tail -n1)
            [ -n "$newest" ] || die "Debian $GUEST_KERNEL has no package like $PIN ($NEWER)"
            say "note: Debian $GUEST_KERNEL no longer has $pkg; using $newest (update $PIN_NAME in qemu.pin)"
            pkg=$newest
        fi
        deb=$(fetch_deb "$pkg")
    fi
    echo "$deb"
    case $pkg in
    linux-binary-*)
        local base=linux-base-${pkg#linux-binary-}
        if ! ls "$CACHE/kernel/${base}_"*.deb >/dev/null 2>&1; then
            apt_private_setup binary "$GUEST_KERNEL"
        fi
        fetch_deb "$base" ;;
    esac
}

# The kernel image in an unpacked package: boot/vmlinuz-VERSION, or in the
# split packages (sid) usr/lib/modules/VERSION/vmlinuz.
find_vmlinuz() {
    local f
    for f in "$1"/boot/vmlinuz-* "$1"/usr/lib/modules/*/vmlinuz "$1"/lib/modules/*/vmlinuz; do
        [ -f "$f" ] && { echo "$f"; return 0; }
    done
    return 1
}

# Several worktrees share the cache: one of them unpacks at a time.
mkdir -p "$CACHE/kernel"
exec 9>"$CACHE/kernel/.lock"
flock 9
debs=$(kernel_debs) || exit 1
deb=$(head -n1 <<<"$debs")
kdir=$CACHE/kernel/$(basename "$deb" .deb)
if [ ! -f "$kdir/.done" ] || ! find_vmlinuz "$kdir" >/dev/null; then
    rm -rf "$kdir"
    while read -r d; do
        dpkg-deb -x "$d" "$kdir" || die "cannot unpack $d"
    done <<<"$debs"
    # The package leaves modules.dep to depmod at install time.
    for base in "$kdir" "$kdir/usr"; do
        [ -d "$base/lib/modules" ] || continue
        for m in "$base"/lib/modules/*; do
            /sbin/depmod -b "$base" "${m##*/}" || die "depmod failed for $m"
        done
    done
    touch "$kdir/.done"
fi
vmlinuz=$(find_vmlinuz "$kdir") || die "no kernel image in $deb"
case $vmlinuz in
*/boot/vmlinuz-*) kver=${vmlinuz##*/vmlinuz-} ;;
*) kver=$(basename "$(dirname "$vmlinuz")") ;;
esac
if ! cmp -s "$vmlinuz" "$GUEST/vmlinuz" 2>/dev/null; then
    cp "$vmlinuz" "$GUEST/vmlinuz"
fi
printf '%s (%s)\nrelease: %s\n' "$kver" "$(basename "$deb")" "$GUEST_KERNEL" > "$GUEST/kernel.txt"
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

# Modules, shipped with what they depend on (modules.dep), decompressed for
# busybox's insmod, each list in load order.  Only what this kernel has as
# a module: trixie's and sid's kernels build virtio, FUSE and virtio-fs
# in, bookworm's 6.1 has them as modules.
#   boot.order  what every guest needs before it mounts anything: the
#               virtio PCI transport, FUSE and virtio-fs (guest-init
#               loads it always)
#   order       virtio-9p, and ext4 on virtio-blk, which the benchmarks
#               compare against (loaded when vm.py is given --p9, or
#               VFSDAX_MODULES=1); sid's split package carries no
#               modules, so its guest has neither.
mdir=$kdir/lib/modules/$kver
[ -d "$mdir" ] || mdir=$kdir/usr/lib/modules/$kver
touch "$root/lib/modules/boot.order" "$root/lib/modules/order"
# want LIST MODULE [required]: add MODULE after what it depends on
want() {
    local list=$1 m=$2 line dep
    if [ -f "$mdir/modules.builtin" ] &&
       grep -qE "(^|/)$m\.ko$" "$mdir/modules.builtin"; then
        return 0
    fi
    line=$(grep -E "(^|/)$m\.ko(\.xz|\.zst|\.gz)?:" "$mdir/modules.dep" 2>/dev/null | head -n1) || true
    if [ -z "$line" ]; then
        [ "${3:-}" != required ] ||
            die "kernel $kver ($GUEST_KERNEL) has $m neither built in nor as a module"
        return 0
    fi
    for dep in ${line#*:}; do want "$list" "$(basename "${dep%%.ko*}")" required; done
    grep -qxF "${line%%:*}" "$root/lib/modules/boot.order" "$root/lib/modules/order" ||
        echo "${line%%:*}" >> "$root/lib/modules/$list"
}
for m in virtio_pci fuse virtiofs; do want boot.order "$m" required; done
# ext4 asks for crypto's crc32c at mount (a soft dependency: not in
# modules.dep)
for m in 9pnet_virtio 9p virtio_blk crc32c_generic ext4; do want order "$m"; done
for list in boot.order order; do
    while read -r rel; do
        out=$root/lib/modules/$(basename "${rel%%.ko*}").ko
        case "$rel" in
        *.xz) xz -dc "$mdir/$rel" > "$out" ;;
        *.zst) zstd -qdc "$mdir/$rel" > "$out" ;;
        *.gz) gzip -dc "$mdir/$rel" > "$out" ;;
        *) cp "$mdir/$rel" "$out" ;;
        esac
    done < "$root/lib/modules/$list"
    sed -i 's#.*/##; s#\.ko.*#.ko#' "$root/lib/modules/$list"
done
if [ -s "$root/lib/modules/boot.order" ]; then
    say "guest: modules loaded at boot: $(tr '\n' ' ' < "$root/lib/modules/boot.order")"
fi

(cd "$root" && find . -print0 | sort -z | cpio --null -o -H newc --quiet) |
    gzip -1 > "$GUEST/initramfs.cpio.gz.new"
mv "$GUEST/initramfs.cpio.gz.new" "$GUEST/initramfs.cpio.gz"
echo "$key" > "$GUEST/initramfs.key"
say "guest: kernel $kver, initramfs $(du -h "$GUEST/initramfs.cpio.gz" | cut -f1)"

#!/usr/bin/env bash
# Prepare build/src: pristine upstream QEMU (commit tagged "upstream"), then
# one commit with this repository's new files ("overlay"), then patches/ in
# order, one commit each.  Idempotent: when nothing changed it does nothing,
# and when something did it rewrites only the files whose content changed, so
# the QEMU build recompiles only what it must.
#
# FORCE=1 drops edits made in build/src that were not saved with
# "make refresh-patches".
set -euo pipefail
. "$(dirname "$0")/common.sh"

pristine=$("$TOP/mk/fetch-qemu.sh")
mkdir -p "$BUILD"

if [ -d "$SRC/.git" ]; then
    have=$(git -C "$SRC" rev-parse -q --verify 'upstream^{commit}' || true)
    want=$(git -C "$pristine" rev-parse HEAD)
    if [ "$have" != "$want" ]; then
        if [ -z "${FORCE:-}" ] && [ -n "$(state_get head)" ] &&
           { tree_dirty || [ "$(git -C "$SRC" rev-parse HEAD)" != "$(state_get head)" ]; }; then
            die "$(rel "$SRC") holds edits and the upstream source changed; save them with 'make refresh-patches$BASE_ARG' or drop them with FORCE=1"
        fi
        say "upstream source changed; preparing $(rel "$SRC") afresh"
        rm -rf "$SRC"
    fi
fi
if [ ! -d "$SRC/.git" ]; then
    rm -rf "$SRC"
    git clone -q "$pristine" "$SRC"
    git -C "$SRC" tag upstream
    git -C "$SRC" remote remove origin
    git -C "$SRC" checkout -q -b fork
fi
# Commits made by hand in build/src become patches: give them the series'
# author whatever the user's own git identity is.
git -C "$SRC" config user.name "virtiofs-dax developers"
git -C "$SRC" config user.email "dev@virtiofs-dax.invalid"
cp "$pristine/virtiofs-dax-source" "$BUILD/qemu-source.txt"

stale=$(stale_variants)
[ -z "$stale" ] || say "warning: patches/ changed since these variants of bases/$QEMU_BASE/patches/ were ported from them: $(echo $stale); port them again (make port-base$BASE_ARG)"

key=$(inputs_key "$pristine")
head=$(git -C "$SRC" rev-parse HEAD)
if [ "$(state_get key)" = "$key" ] && [ "$(state_get head)" = "$head" ] && ! tree_dirty; then
    say "$(rel "$SRC") is up to date ($(head -n1 "$BUILD/qemu-source.txt"))"
    exit 0
fi
if [ -z "${FORCE:-}" ] && [ -n "$(state_get head)" ] &&
   { tree_dirty || [ "$head" != "$(state_get head)" ]; }; then
    git -C "$SRC" status --short | head -20 >&2
    die "$(rel "$SRC") has edits that are not in patches/ or the overlay; save them with 'make refresh-patches$BASE_ARG' or drop them with 'make prepare FORCE=1$BASE_ARG'"
fi

new=$(wanted_history tag)
n=$(git -C "$SRC" rev-list --count overlay.."$new")
git -C "$SRC" reset -q --hard "$new"
git -C "$SRC" clean -q -fdx
printf 'key=%s\nhead=%s\n' "$key" "$new" > "$STATE"
say "$(rel "$SRC") prepared: $(head -n1 "$BUILD/qemu-source.txt"), $(overlay_files | wc -l) new files, $n patches"

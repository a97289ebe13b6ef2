#!/usr/bin/env bash
# Port the series to another base (make port-base QEMU_BASE=X): prepare
# build/base-X/src at "overlay" (base X's upstream + our files), then
# "git am -3" the series there: the base's variants that are still current,
# patches/ for the rest.  The default base's history is put in the same
# repository first (tag "default-series", its upstream "upstream-default"),
# so that a 3-way merge finds every patch's preimage and "git show
# default-series~N" shows each patch as the default base has it.
#
# A patch that does not merge stops "git am" with conflict markers: resolve
# them in build/base-X/src, "git add", "git am --continue"; when the series
# is through, "make refresh-patches QEMU_BASE=X" writes the variants.
set -euo pipefail
. "$(dirname "$0")/common.sh"

[ -n "$BASE_DIR" ] || die "port-base is for another base than the default: make port-base QEMU_BASE=X"

# (fails at the first patch that needs porting, having made the tree)
"$TOP/mk/prepare-tree.sh" >/dev/null 2>&1 || true
[ -d "$SRC/.git" ] || die "cannot prepare $(rel "$SRC"): run make prepare$BASE_ARG"
if [ -z "${FORCE:-}" ] && [ -n "$(state_get head)" ] &&
   { tree_dirty || [ "$(git -C "$SRC" rev-parse HEAD)" != "$(state_get head)" ]; }; then
    die "$(rel "$SRC") holds edits: save them with 'make refresh-patches$BASE_ARG' or drop them with FORCE=1"
fi
git -C "$SRC" am --abort 2>/dev/null || true

# The default base's upstream and series, for the 3-way merges
default_pristine=$(env -u QEMU_BASE -u BUILD -u GUEST_DIR "$TOP/mk/fetch-qemu.sh")
git -C "$SRC" fetch -q "$default_pristine" "+HEAD:refs/tags/upstream-default"
default_tip=$(DEFAULT_SERIES=1 WH_UPSTREAM=upstream-default wanted_history)
git -C "$SRC" tag -f default-series "$default_tip" >/dev/null

# Base X's own history up to our files, without any patch
( wanted_history tag ) >/dev/null 2>&1 || true
git -C "$SRC" rev-parse -q --verify overlay >/dev/null || die "no 'overlay' tag in $(rel "$SRC")"
git -C "$SRC" reset -q --hard overlay
git -C "$SRC" clean -q -fdx
rm -f "$STATE"

# Each patch as its current variant; a variant whose patch changed only
# its message with that message; the rest as patches/ has them.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
series=()
while read -r p; do
    v=$(variant_of "$p")
    if [ -n "$v" ]; then
        case $(variant_state "$v") in
            current) p=$v ;;
            message)
                { sed '/^---$/q' "$p"; sed '1,/^---$/d' "$v"; } > "$tmp/${p##*/}"
                p=$tmp/${p##*/} ;;
            stale) say "bases/$QEMU_BASE/patches/${v##*/} is stale: porting patches/${p##*/} afresh" ;;
        esac
    fi
    series+=("$p")
done < <(default_patch_files)
say "porting ${#series[@]} patches onto $(head -n1 "$BUILD/qemu-source.txt") in $(rel "$SRC")"
if git_src am -q -3 --committer-date-is-author-date "${series[@]}"; then
    say "the series applies; save it with: make refresh-patches$BASE_ARG"
else
    say "stopped at a patch that needs porting (above): resolve it in $(rel "$SRC"), 'git add' and 'git am --continue' there (see 'git show default-series~N' for the default base's version); when the series is through: make refresh-patches$BASE_ARG"
    exit 1
fi

#!/usr/bin/env bash
# Save work done in build/src back into this repository:
#  - uncommitted edits to this fork's new files go back to their place here;
#  - the commits after "overlay" become patches/NNNN-*.patch.
# Uncommitted edits to upstream files must be committed first (git commit,
# or git commit --amend / rebase -i into the patch they belong to).
set -euo pipefail
. "$(dirname "$0")/common.sh"

[ -d "$SRC/.git" ] || die "no $(rel "$SRC"): run 'make prepare$BASE_ARG' first"
git -C "$SRC" rev-parse -q --verify overlay >/dev/null || die "$(rel "$SRC") has no 'overlay' tag: run 'make prepare$BASE_ARG'"

# Files that belong to the overlay: those in the overlay commit, plus new
# untracked files under the overlay roots.
declare -A owned=()
while read -r f; do owned[$f]=1; done < <(git -C "$SRC" diff --name-only upstream overlay)

stray=()
while IFS= read -r line; do
    st=${line:0:2} f=${line:3}
    if [ -n "${owned[$f]:-}" ] || [ "$st" = "??" ]; then
        if [[ $st == *D* ]]; then
            rm -f "$TOP/$f"; say "removed $f"
        else
            mkdir -p "$TOP/$(dirname "$f")"; cp -p "$SRC/$f" "$TOP/$f"; say "saved $f"
        fi
    else
        stray+=("$f")
    fi
done < <(git -C "$SRC" status --porcelain --untracked-files=all)
[ ${#stray[@]} -eq 0 ] ||
    die "uncommitted edits to upstream files in $(rel "$SRC") (${stray[*]}): commit them there first"

# Commits after the overlay that touch overlay files would be lost on the
# next prepare: refuse rather than guess.
touch_overlay=$(git -C "$SRC" diff --name-only overlay HEAD | while read -r f; do
    [ -n "${owned[$f]:-}" ] && echo "$f"; done || true)
[ -z "$touch_overlay" ] ||
    die "commits after 'overlay' change this fork's own files ($touch_overlay): edit those in the repository instead"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git -C "$SRC" format-patch -q --zero-commit --no-signature --no-numbered --abbrev=8 \
    -o "$tmp" overlay..HEAD
if [ -z "$BASE_DIR" ]; then
    rm -f "$TOP"/patches/[0-9][0-9][0-9][0-9]-*.patch
    mkdir -p "$TOP/patches"
    cp "$tmp"/*.patch "$TOP/patches/" 2>/dev/null || true
    say "patches/: $(ls "$tmp" | wc -l) patches written"
else
    # Another base: its series is patches/ one for one (same names, same
    # order; the default base owns the series' shape and messages).  A
    # commit that patches/ reproduces as it is needs no variant; any other
    # becomes bases/X/patches/NAME, recorded with the patch it was ported
    # from.
    have=$(cd "$tmp" && ls -- *.patch 2>/dev/null || true)
    want=$(default_patch_files | sed 's|.*/||')
    if [ "$have" != "$want" ]; then
        diff <(echo "$want") <(echo "$have") | sed -n 's/^</  patches\/ only:/p; s/^>/  here only:/p' >&2
        die "the commits after 'overlay' in $(rel "$SRC") must be patches/ one for one (same subjects, same order): change the series on the default base first"
    fi
    vdir=$BASE_DIR/patches
    mkdir -p "$vdir"
    rm -f "$vdir"/[0-9][0-9][0-9][0-9]-*.patch
    : > "$BASE_DIR/ported-from.new"
    idx=$(mktemp)
    commits=$(git -C "$SRC" rev-list --reverse overlay..HEAD)
    nv=0
    for c in $commits; do
        name=$(head -n1 <<<"$want"); want=$(sed 1d <<<"$want")
        git mailinfo "$tmp/msg" "$tmp/diff" < "$TOP/patches/$name" > "$tmp/info"
        GIT_INDEX_FILE=$idx git -C "$SRC" read-tree "$c^"
        if GIT_INDEX_FILE=$idx git -C "$SRC" apply --cached "$tmp/diff" 2>/dev/null &&
           [ "$(GIT_INDEX_FILE=$idx git -C "$SRC" write-tree)" = "$(git -C "$SRC" rev-parse "$c^{tree}")" ]; then
            continue
        fi
        cp "$tmp/$name" "$vdir/$name"
        echo "$(patch_key "$name") $(patch_sums "$TOP/patches/$name")" >> "$BASE_DIR/ported-from.new"
        nv=$((nv + 1))
    done
    rm -f "$idx"
    mv "$BASE_DIR/ported-from.new" "$BASE_DIR/ported-from"
    say "bases/$QEMU_BASE/patches/: $nv variants written; the other $(( $(wc -l <<<"$have") - nv )) patches of patches/ apply as they are"
fi

# Everything is saved: rebuild the history from the repository, which leaves
# the files as they are and makes the next prepare a no-op.
FORCE=1 "$TOP/mk/prepare-tree.sh"

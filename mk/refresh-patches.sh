#!/usr/bin/env bash
# Save work done in build/src back into this repository:
#  - uncommitted edits to this fork's new files go back to their place here;
#  - the commits after "overlay" become patches/NNNN-*.patch.
# Uncommitted edits to upstream files must be committed first (git commit,
# or git commit --amend / rebase -i into the patch they belong to).
set -euo pipefail
. "$(dirname "$0")/common.sh"

[ -d "$SRC/.git" ] || die "no build/src: run 'make prepare' first"
git -C "$SRC" rev-parse -q --verify overlay >/dev/null || die "build/src has no 'overlay' tag: run 'make prepare'"

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
    die "uncommitted edits to upstream files in build/src (${stray[*]}): commit them there first"

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
rm -f "$TOP"/patches/[0-9][0-9][0-9][0-9]-*.patch
mkdir -p "$TOP/patches"
cp "$tmp"/*.patch "$TOP/patches/" 2>/dev/null || true
say "patches/: $(ls "$tmp" | wc -l) patches written"

# Everything is saved: rebuild the history from the repository, which leaves
# the files as they are and makes the next prepare a no-op.
FORCE=1 "$TOP/mk/prepare-tree.sh"

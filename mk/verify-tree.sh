#!/usr/bin/env bash
# Check that patches/ plus this repository's new files reproduce build/src
# exactly, uncommitted edits included: nothing done in build/src is lost.
set -euo pipefail
. "$(dirname "$0")/common.sh"

[ -d "$SRC/.git" ] || die "no build/src: run 'make prepare' first"

# The tree build/src holds right now, as a git tree object.
idx=$(mktemp)
wt=$BUILD/.verify-wt
cleanup() { rm -f "$idx"; git -C "$SRC" worktree remove --force "$wt" 2>/dev/null || true; }
trap cleanup EXIT
cp "$SRC/.git/index" "$idx"
GIT_INDEX_FILE=$idx git -C "$SRC" add -A
have=$(GIT_INDEX_FILE=$idx git -C "$SRC" write-tree)

# The tree the repository describes.
git -C "$SRC" worktree remove --force "$wt" 2>/dev/null || rm -rf "$wt"
git -C "$SRC" worktree prune
git -C "$SRC" worktree add -q --detach "$wt" upstream
overlay_files | while read -r f; do
    mkdir -p "$wt/$(dirname "$f")"; cp -p "$TOP/$f" "$wt/$f"
done
git -C "$wt" add -A
while read -r p; do
    [ -n "$p" ] || continue
    git -C "$wt" apply --index "$p" 2>/dev/null ||
        die "patches/$(basename "$p") does not apply"
done < <(patch_files)
want=$(git -C "$wt" write-tree)

if [ "$have" != "$want" ]; then
    say "build/src differs from patches/ + the repository's files:"
    git -C "$SRC" diff --stat "$want" "$have" >&2
    say "save the edits with 'make refresh-patches' (or drop them with 'make prepare FORCE=1')"
    exit 1
fi
echo "build/src matches patches/ and the repository's files ($(patch_files | wc -l) patches, $(overlay_files | wc -l) files)"

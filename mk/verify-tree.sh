#!/usr/bin/env bash
# Check that patches/ plus this repository's new files reproduce build/src
# exactly, uncommitted edits included: nothing done in build/src is lost.
# Works on git indexes only (no checkout), so it takes seconds.
set -euo pipefail
. "$(dirname "$0")/common.sh"

[ -d "$SRC/.git" ] || die "no build/src: run 'make prepare' first"

have_idx=$(mktemp) want_idx=$(mktemp)
trap 'rm -f "$have_idx" "$want_idx"' EXIT

# The tree build/src holds right now.  Starting from its own index keeps the
# stat cache, so only changed files are hashed.
cp "$SRC/.git/index" "$have_idx"
GIT_INDEX_FILE=$have_idx git -C "$SRC" add -A
have=$(GIT_INDEX_FILE=$have_idx git -C "$SRC" write-tree)

# The tree the repository describes: upstream, our files, the patches.
files=$(overlay_files)
gw() { GIT_INDEX_FILE=$want_idx git -C "$SRC" "$@"; }
gw read-tree upstream
while read -r f; do
    [ -n "$f" ] || continue
    mode=100644
    [ -x "$TOP/$f" ] && mode=100755
    printf '%s %s\t%s\n' "$mode" "$(git -C "$SRC" hash-object -w "$TOP/$f")" "$f"
done <<<"$files" | gw update-index --add --index-info
while read -r p; do
    [ -n "$p" ] || continue
    gw apply --cached "$p" 2>/dev/null || die "patches/$(basename "$p") does not apply"
done < <(patch_files)
want=$(gw write-tree)

if [ "$have" != "$want" ]; then
    say "build/src differs from patches/ + the repository's files:"
    git -C "$SRC" diff --stat "$want" "$have" >&2
    say "save the edits with 'make refresh-patches' (or drop them with 'make prepare FORCE=1')"
    exit 1
fi
echo "build/src matches patches/ and the repository's files ($(patch_files | wc -l) patches, $(overlay_files | wc -l) files)"

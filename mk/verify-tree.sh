#!/usr/bin/env bash
# Check that patches/ plus this repository's new files reproduce build/src
# exactly, uncommitted edits included: nothing done in build/src is lost.
# Works on git indexes only (no checkout), so it takes seconds.
set -euo pipefail
. "$(dirname "$0")/common.sh"

[ -d "$SRC/.git" ] || die "no $(rel "$SRC"): run 'make prepare$BASE_ARG' first"

have_idx=$(mktemp)
trap 'rm -f "$have_idx"' EXIT

# The tree build/src holds right now.  Starting from its own index keeps the
# stat cache, so only changed files are hashed.
cp "$SRC/.git/index" "$have_idx"
GIT_INDEX_FILE=$have_idx git -C "$SRC" add -A
have=$(GIT_INDEX_FILE=$have_idx git -C "$SRC" write-tree)

# The tree the repository describes: upstream, our files, the patches.
tip=$(wanted_history)
want=$(git -C "$SRC" rev-parse "$tip^{tree}")

if [ "$have" != "$want" ]; then
    say "$(rel "$SRC") differs from patches/ + the repository's files:"
    git -C "$SRC" diff --stat "$want" "$have" >&2
    say "save the edits with 'make refresh-patches$BASE_ARG' (or drop them with 'make prepare FORCE=1$BASE_ARG')"
    exit 1
fi
stale=$(stale_variants)
if [ -n "$stale" ]; then
    say "patches/ changed since these variants of bases/$QEMU_BASE/patches/ were ported from them: $(echo $stale)"
    say "port them again: make port-base$BASE_ARG, then make refresh-patches$BASE_ARG"
    exit 1
fi
echo "$(rel "$SRC") matches patches/ and the repository's files ($(patch_files | wc -l) patches, $(overlay_files | wc -l) files)"

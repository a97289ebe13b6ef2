#!/usr/bin/env bash
# How many lines the series adds to upstream files: the '+' lines of each
# patch's diff (not its "+++" headers, not its message), per patch and in
# all, for the base being built (QEMU_BASE=X counts bases/X's variants in
# place of the patches they replace).  Every such line is one a rebase
# onto the next upstream release may have to merge by hand; the fork's
# new files are not counted, they never conflict.
set -euo pipefail
. "$(dirname "$0")/common.sh"
total=0
while read -r p; do
    [ -n "$p" ] || continue
    # The diff starts at the first "diff --git"; the message before it may
    # hold lines that start with '+' too.
    n=$(sed -n '/^diff --git /,$p' "$p" | grep -c '^+\([^+]\|+[^+]\|$\)' || true)
    printf '%5d  %s\n' "$n" "$(rel "$p")"
    total=$((total + n))
done < <(patch_files)
printf '%5d  lines added to upstream files (base %s)\n' "$total" "$QEMU_BASE"

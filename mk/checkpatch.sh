#!/usr/bin/env bash
# QEMU's checkpatch.pl over the patch series and this fork's new C files.
set -euo pipefail
. "$(dirname "$0")/common.sh"
cp=$SRC/scripts/checkpatch.pl
[ -f "$cp" ] || die "no $cp: run make prepare"
rc=0
while read -r p; do
    [ -n "$p" ] || continue
    out=$(perl "$cp" --no-tree --terse "$p" 2>&1) || { echo "$out"; rc=1; }
done < <(patch_files)
while read -r f; do
    case "$f" in *.c|*.h) ;; *) continue ;; esac
    # Relative to the top: checkpatch applies some rules by path (tests/).
    out=$(cd "$TOP" && perl "$cp" --no-tree --terse -f "$f" 2>&1) || { echo "$out"; rc=1; }
done < <(overlay_files)
[ $rc -eq 0 ] && echo "checkpatch: clean ($(patch_files | wc -l) patches, $(overlay_files | grep -cE '\.[ch]$') C files)"
exit $rc

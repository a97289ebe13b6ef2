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
            die "build/src holds edits and the upstream source changed; save them with 'make refresh-patches' or drop them with FORCE=1"
        fi
        say "upstream source changed; preparing build/src afresh"
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
cp "$pristine/virtiofs-dax-source" "$BUILD/qemu-source.txt"

key=$(inputs_key "$pristine")
head=$(git -C "$SRC" rev-parse HEAD)
if [ "$(state_get key)" = "$key" ] && [ "$(state_get head)" = "$head" ] && ! tree_dirty; then
    say "build/src is up to date ($(head -n1 "$BUILD/qemu-source.txt"))"
    exit 0
fi
if [ -z "${FORCE:-}" ] && [ -n "$(state_get head)" ] &&
   { tree_dirty || [ "$head" != "$(state_get head)" ]; }; then
    git -C "$SRC" status --short | head -20 >&2
    die "build/src has edits that are not in patches/ or the overlay; save them with 'make refresh-patches' or drop them with 'make prepare FORCE=1'"
fi

# Build the wanted history in a scratch worktree, then move build/src to it.
wt=$BUILD/.prepare-wt
git -C "$SRC" worktree remove --force "$wt" 2>/dev/null || rm -rf "$wt"
git -C "$SRC" worktree prune
git -C "$SRC" worktree add -q --detach "$wt" upstream
cleanup() { git -C "$SRC" worktree remove --force "$wt" 2>/dev/null || true; }
trap cleanup EXIT

overlay_files | while read -r f; do
    mkdir -p "$wt/$(dirname "$f")"
    cp -p "$TOP/$f" "$wt/$f"
done
git -C "$wt" add -A
if ! git -C "$wt" diff --cached --quiet; then
    git -C "$wt" -c user.name=virtiofs-dax -c user.email=virtiofs-dax@invalid \
        commit -q -m "overlay: this fork's new files" --date="2000-01-01T00:00:00Z"
fi
git -C "$wt" tag -f overlay >/dev/null

n=0
while read -r p; do
    [ -n "$p" ] || continue
    if ! out=$(git -C "$wt" -c user.name=virtiofs-dax -c user.email=virtiofs-dax@invalid \
               am --committer-date-is-author-date --quiet "$p" 2>&1); then
        git -C "$wt" am --abort >/dev/null 2>&1 || true
        die "patches/$(basename "$p") does not apply to $(head -n1 "$BUILD/qemu-source.txt"): $(grep -m1 -E '^error:' <<<"$out" || head -1 <<<"$out")"
    fi
    n=$((n + 1))
done < <(patch_files)

new=$(git -C "$wt" rev-parse HEAD)
git -C "$SRC" reset -q --hard "$new"
git -C "$SRC" clean -q -fdx
printf 'key=%s\nhead=%s\n' "$key" "$new" > "$STATE"
say "build/src prepared: $(head -n1 "$BUILD/qemu-source.txt"), $(overlay_files | wc -l) new files, $n patches"

#!/usr/bin/env bash
# fstests' source for mk/fstests-root.sh: find it, check it, print its
# path (a tarball or a clone).  Debian does not package fstests; the tag
# and its digests are pinned in harness/fstests/source.pin.  First match
# wins:
#
#   1. SOURCE ($1, or FSTESTS=): a tarball or a clone given by hand; a
#      tarball listed in a SHA256SUMS beside it, or named as the pinned
#      one, is checked;
#   2. the pinned tarball beside the project, ../shared/deps/
#      (FSTESTS_DEPS= another directory), checked against the pinned
#      sha256 and kept in the cache, so that a clone of the project
#      elsewhere on the machine finds it;
#   3. what an earlier run kept in the cache ($CACHE/fstests/src/): that
#      tarball, or the clone fetched from upstream, checked again;
#   4. the pinned tag fetched from fstests' upstream git (FSTESTS_GIT_URL=
#      another URL, a mirror), checked against the pinned commit, or the
#      pinned tree (the same files under another commit), kept in the
#      cache; what was fetched is printed.
#
# Where none of them gives it, it fails naming each place it looked.
#
#   mk/fstests-source.sh [SOURCE]
#
# FSTESTS_PIN= another pin file (the tests of this script use one).
set -euo pipefail
. "$(dirname "$0")/common.sh"
# shellcheck source=../harness/fstests/source.pin
. "${FSTESTS_PIN:-$TOP/harness/fstests/source.pin}"

GIT_URL=${FSTESTS_GIT_URL:-$FSTESTS_GIT}
DEPS=${FSTESTS_DEPS:-$(cd "$TOP/.." && pwd)/shared/deps}
FD=$CACHE/fstests
SRC_DIR=$FD/src
CACHED_TARBALL=$SRC_DIR/$FSTESTS_TARBALL
CLONE=$SRC_DIR/xfstests-dev-$FSTESTS_TAG
SOURCE=${1:-${FSTESTS:-}}

# --- given by hand ------------------------------------------------------------
if [ -n "$SOURCE" ]; then
    [ -e "$SOURCE" ] || die "FSTESTS=$SOURCE does not exist"
    SOURCE=$(realpath "$SOURCE")
    if [ -f "$SOURCE" ]; then
        sums=$(dirname "$SOURCE")/SHA256SUMS
        have=$(sha256_of "$SOURCE")
        if [ -f "$sums" ] && grep -q " $(basename "$SOURCE")\$" "$sums"; then
            want=$(awk -v f="$(basename "$SOURCE")" '$2 == f { print $1 }' "$sums")
            [ "$have" = "$want" ] ||
                die "$SOURCE: sha256 $have, but $sums says $want"
        elif [ "$(basename "$SOURCE")" = "$FSTESTS_TARBALL" ]; then
            [ "$have" = "$FSTESTS_TARBALL_SHA256" ] ||
                die "$SOURCE: sha256 $have, not the pinned $FSTESTS_TARBALL_SHA256"
        else
            say "note: $SOURCE is not listed in a SHA256SUMS beside it; using it unchecked"
        fi
    elif [ -d "$SOURCE" ]; then
        [ -x "$SOURCE/check" ] && [ -f "$SOURCE/configure.ac" ] ||
            die "$SOURCE does not look like an fstests tree (no check, no configure.ac)"
    else
        die "FSTESTS=$SOURCE is neither a tarball nor a directory"
    fi
    printf '%s\n' "$SOURCE"
    exit 0
fi

mkdir -p "$SRC_DIR"
exec 9>"$FD/.source-lock"
flock 9

# The clone DIR holds the pinned commit, or the pinned tree, checked out
# and unchanged; otherwise what it holds instead, on stdout
clone_differs() {
    local d=$1 commit tree
    commit=$(git -C "$d" rev-parse -q --verify 'HEAD^{commit}') ||
        { echo "no commit checked out"; return 0; }
    tree=$(git -C "$d" rev-parse 'HEAD^{tree}')
    if [ "$commit" != "$FSTESTS_COMMIT" ] && [ "$tree" != "$FSTESTS_TREE" ]; then
        echo "commit $commit, tree $tree: not the pinned commit $FSTESTS_COMMIT or tree $FSTESTS_TREE"
    elif [ -n "$(git -C "$d" status --porcelain --untracked-files=all --ignored)" ]; then
        echo "its files differ from its commit $commit"
    fi
}

# --- beside the project ----------------------------------------------------------
deps_tarball=$DEPS/$FSTESTS_TARBALL
if [ -f "$deps_tarball" ]; then
    have=$(sha256_of "$deps_tarball")
    [ "$have" = "$FSTESTS_TARBALL_SHA256" ] ||
        die "$deps_tarball: sha256 $have, not the pinned $FSTESTS_TARBALL_SHA256 (harness/fstests/source.pin)"
    if ! [ -f "$CACHED_TARBALL" ] ||
       [ "$(sha256_of "$CACHED_TARBALL")" != "$have" ]; then
        cp "$deps_tarball" "$CACHED_TARBALL.tmp"
        mv "$CACHED_TARBALL.tmp" "$CACHED_TARBALL"
    fi
    printf '%s\n' "$deps_tarball"
    exit 0
fi

# --- kept in the cache by an earlier run -------------------------------------------
if [ -f "$CACHED_TARBALL" ]; then
    if [ "$(sha256_of "$CACHED_TARBALL")" = "$FSTESTS_TARBALL_SHA256" ]; then
        printf '%s\n' "$CACHED_TARBALL"
        exit 0
    fi
    say "fstests: $CACHED_TARBALL is not the pinned tarball (sha256); dropped"
    rm -f "$CACHED_TARBALL"
fi
if [ -d "$CLONE" ]; then
    why=$(clone_differs "$CLONE")
    if [ -z "$why" ]; then
        printf '%s\n' "$CLONE"
        exit 0
    fi
    say "fstests: the clone in the cache, $CLONE: $why; fetched again"
    rm -rf "$CLONE"
fi

# --- fetched from upstream ---------------------------------------------------------
fetch_error=
if ! command -v git >/dev/null; then
    fetch_error="git is missing (apt-get install git)"
else
    tmp=$CLONE.tmp
    rm -rf "$tmp" "$tmp.log"
    git init -q "$tmp"
    say "fstests: no source beside the project ($deps_tarball) or in the cache: fetching tag $FSTESTS_TAG from $GIT_URL"
    if timeout "${FSTESTS_FETCH_TIMEOUT:-600}" \
           git -C "$tmp" fetch -q --depth 1 "$GIT_URL" \
               "+refs/tags/$FSTESTS_TAG:refs/tags/$FSTESTS_TAG" \
           > "$tmp.log" 2>&1; then
        commit=$(git -C "$tmp" rev-parse "refs/tags/$FSTESTS_TAG^{commit}")
        tree=$(git -C "$tmp" rev-parse "refs/tags/$FSTESTS_TAG^{tree}")
        if [ "$commit" != "$FSTESTS_COMMIT" ] && [ "$tree" != "$FSTESTS_TREE" ]; then
            rm -rf "$tmp" "$tmp.log"
            die "tag $FSTESTS_TAG of $GIT_URL is commit $commit, tree $tree: not the pinned commit $FSTESTS_COMMIT or tree $FSTESTS_TREE (harness/fstests/source.pin); refused"
        fi
        git -C "$tmp" -c advice.detachedHead=false checkout -q \
            "refs/tags/$FSTESTS_TAG^{commit}"
        why=$(clone_differs "$tmp")
        [ -z "$why" ] || die "the fetched clone $tmp: $why"
        rm -f "$tmp.log"
        mv "$tmp" "$CLONE"
        say "fstests: fetched tag $FSTESTS_TAG from $GIT_URL: commit $commit, tree $tree, as pinned; kept in $CLONE"
        [ "$commit" = "$FSTESTS_COMMIT" ] ||
            say "fstests: note: the pinned commit is $FSTESTS_COMMIT; this one has the same files (tree)"
        printf '%s\n' "$CLONE"
        exit 0
    fi
    fetch_error=$(grep -v '^$' "$tmp.log" | tail -n 1)
    fetch_error=${fetch_error:-git fetch failed or ran past ${FSTESTS_FETCH_TIMEOUT:-600} s}
    rm -rf "$tmp" "$tmp.log"
fi

die "no fstests source: Debian does not package it, and none was found:
  - beside the project: no $deps_tarball
  - in the cache: nothing in $SRC_DIR
  - upstream: tag $FSTESTS_TAG of $GIT_URL could not be fetched: $fetch_error
Pass one: make fstests FSTESTS=/path/to/xfstests-dev (a clone of tag $FSTESTS_TAG, or a .tar.gz of one)"

#!/usr/bin/env bash
# mk/fstests-source.sh against a made-up upstream: a small git repository
# with a tag, reached by file://, and a pin of its own (FSTESTS_PIN), in a
# cache of its own, with no ../shared/deps (FSTESTS_DEPS names an empty
# directory).  Where no source is beside the project the pinned tag is
# fetched, checked and kept; a tag that is not the pinned content is
# refused; a changed clone in the cache is fetched again; without any
# source it fails naming each place it looked; the tarball beside the
# project wins and must match its pin.  No network; about a second.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
src=$top/mk/fstests-source.sh
work=$(mktemp -d /tmp/vfsdax-fstests-src.XXXXXX)
trap 'rm -rf "$work"' EXIT

fail() { echo "FAIL: $*"; [ -e "$work/err" ] && sed 's/^/    /' "$work/err"; exit 1; }
ok() { echo "ok: $*"; }

export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t \
       GIT_COMMITTER_EMAIL=t@t GIT_CONFIG_NOSYSTEM=1 HOME=$work
# A made-up fstests: what the scripts ask of a tree (check, configure.ac)
up=$work/upstream
mkdir -p "$up"
git -C "$up" init -q
printf '#!/bin/sh\n' > "$up/check"
chmod +x "$up/check"
echo 'AC_INIT([xfstests])' > "$up/configure.ac"
git -C "$up" add -A
git -C "$up" commit -q -m one
git -C "$up" tag -a -m tag vTEST
commit=$(git -C "$up" rev-parse 'vTEST^{commit}')
tree=$(git -C "$up" rev-parse 'vTEST^{tree}')
echo two > "$up/later"
git -C "$up" add -A
git -C "$up" commit -q -m two

pin() {  # pin COMMIT TREE [TARBALL-SHA256]
    cat > "$work/pin" <<EOF
FSTESTS_TAG=vTEST
FSTESTS_GIT=file://$up
FSTESTS_COMMIT=$1
FSTESTS_TREE=$2
FSTESTS_TARBALL=fstests-vTEST.tar.gz
FSTESTS_TARBALL_SHA256=${3:-0}
EOF
}
mkdir -p "$work/nodeps"
export FSTESTS_PIN=$work/pin FSTESTS_DEPS=$work/nodeps FSTESTS=
unset FSTESTS_GIT_URL
run() {  # run CACHE: mk/fstests-source.sh with that cache; its path in $out
    out=$(VIRTIOFS_DAX_CACHE=$1 "$src" 2> "$work/err")
}

# 1. Nothing beside the project, nothing cached: fetched, checked, kept
pin "$commit" "$tree"
run "$work/c1" || fail "the pinned tag was not fetched"
[ "$out" = "$work/c1/fstests/src/xfstests-dev-vTEST" ] ||
    fail "printed $out, not the clone in the cache"
[ "$(git -C "$out" rev-parse HEAD)" = "$commit" ] && [ ! -e "$out/later" ] ||
    fail "the clone is not at the pinned commit"
grep -q "fetched tag vTEST from file://$up: commit $commit, tree $tree" \
    "$work/err" || fail "it did not say what it fetched"
ok "fetched the pinned tag and said so: $(grep -m1 'fetched tag' "$work/err")"

# 2. Again: the clone kept in the cache, nothing fetched (the URL is gone)
FSTESTS_GIT_URL=file://$work/nowhere run "$work/c1" ||
    fail "the clone kept in the cache was not used"
[ "$out" = "$work/c1/fstests/src/xfstests-dev-vTEST" ] ||
    fail "printed $out the second time"
! grep -q "fetching" "$work/err" || fail "it fetched again"
ok "the clone kept in the cache is used without fetching"

# 3. A clone in the cache whose files changed: fetched again
echo tampered >> "$out/configure.ac"
run "$work/c1" || fail "a changed clone was not fetched again"
grep -q "its files differ from its commit" "$work/err" ||
    fail "it did not say why it fetched again"
grep -qx 'AC_INIT(\[xfstests\])' "$out/configure.ac" ||
    fail "the changed file is still there"
ok "a clone whose files changed is fetched again"

# 4. A tag whose commit and tree are not the pinned ones: refused
pin 1111111111111111111111111111111111111111 \
    2222222222222222222222222222222222222222
! run "$work/c2" || fail "a tag of other content was taken: $out"
grep -q "tag vTEST of file://$up is commit $commit, tree $tree: not the pinned" \
    "$work/err" || fail "the refusal does not say why"
[ ! -e "$work/c2/fstests/src/xfstests-dev-vTEST" ] ||
    fail "the refused clone was kept"
ok "a tag of other content is refused, and nothing is kept"

# 5. The same files under another commit (a mirror): taken by the tree
pin 1111111111111111111111111111111111111111 "$tree"
run "$work/c3" || fail "the pinned tree under another commit was refused"
grep -q "has the same files" "$work/err" ||
    fail "it did not say that the commit differs"
ok "the pinned tree under another commit is taken, saying so"

# 6. No source anywhere, and upstream out of reach: it fails, naming each
pin "$commit" "$tree"
! FSTESTS_GIT_URL=file://$work/nowhere run "$work/c4" ||
    fail "it found a source where there is none: $out"
for want in "no fstests source" "no $work/nodeps/fstests-vTEST.tar.gz" \
            "nothing in $work/c4/fstests/src" \
            "tag vTEST of file://$work/nowhere could not be fetched" \
            "make fstests FSTESTS="; do
    grep -qF "$want" "$work/err" || fail "the error does not say: $want"
done
ok "without any source it fails naming each place it looked"

# 7. The tarball beside the project wins, checked against its pin
tar -C "$work" -czf "$work/nodeps/fstests-vTEST.tar.gz" upstream
sum=$(sha256sum "$work/nodeps/fstests-vTEST.tar.gz" | cut -d' ' -f1)
pin "$commit" "$tree" "$sum"
FSTESTS_GIT_URL=file://$work/nowhere run "$work/c5" ||
    fail "the tarball beside the project was not used"
[ "$out" = "$work/nodeps/fstests-vTEST.tar.gz" ] ||
    fail "printed $out, not the tarball beside the project"
cmp -s "$out" "$work/c5/fstests/src/fstests-vTEST.tar.gz" ||
    fail "the tarball was not kept in the cache"
pin "$commit" "$tree" "$(printf '0%.0s' $(seq 64))"
! run "$work/c6" || fail "a tarball of another sha256 was taken"
grep -q "not the pinned" "$work/err" || fail "the refusal does not say why"
ok "the tarball beside the project is used and kept, and must match its pin"

# Shared settings for the mk/ scripts.  Sourced, not run.

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${VIRTIOFS_DAX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/virtiofs-dax}

# shellcheck source=../qemu.pin
. "$TOP/qemu.pin"

# The guest's kernel, by Debian release (README "Guest kernels"): trixie's
# is the default and lives in build/guest, the others in build/guest-NAME.
GUEST_KERNEL=${GUEST_KERNEL:-trixie}
case $GUEST_KERNEL in
bookworm|trixie|sid) ;;
*) printf 'error: GUEST_KERNEL=%s: not one of bookworm, trixie, sid\n' "$GUEST_KERNEL" >&2
   exit 1 ;;
esac
GUEST_NAME=guest
[ "$GUEST_KERNEL" = trixie ] || GUEST_NAME=guest-$GUEST_KERNEL

# The upstream base this build applies to (README "Upstream bases").
# qemu.pin and patches/ are the default base; another base X has
# bases/X/qemu.pin (overriding qemu.pin's QEMU and Debian source settings,
# the guest's stay) and bases/X/patches/ (its variants of patches/), and
# builds in build/base-X/.  The guest is the same for every base.
DEFAULT_BASE=$(sed -E 's/^([0-9]+\.[0-9]+).*/\1/' <<<"$QEMU_VERSION")
QEMU_BASE=${QEMU_BASE:-$DEFAULT_BASE}
BASE_DIR=
if [ "$QEMU_BASE" != "$DEFAULT_BASE" ]; then
    BASE_DIR=$TOP/bases/$QEMU_BASE
    if [ ! -f "$BASE_DIR/qemu.pin" ]; then
        printf 'error: no upstream base %s: bases/%s/qemu.pin is missing (bases: %s)\n' \
            "$QEMU_BASE" "$QEMU_BASE" "$DEFAULT_BASE $(cd "$TOP/bases" 2>/dev/null && ls -d */ 2>/dev/null | tr -d / | tr '\n' ' ')" >&2
        exit 1
    fi
    # shellcheck disable=SC1091
    . "$BASE_DIR/qemu.pin"
    # BUILD, when set, is the base's own directory (the Makefile passes
    # build/base-X); run by hand without it, the same is derived.
    if [ -z "${BUILD:-}" ]; then
        GUEST_DIR=${GUEST_DIR:-$TOP/build/$GUEST_NAME}
        BUILD=$TOP/build/base-$QEMU_BASE
    fi
fi
BUILD=${BUILD:-$TOP/build}
GUEST_DIR=${GUEST_DIR:-$BUILD/$GUEST_NAME}
export QEMU_BASE BUILD GUEST_DIR GUEST_KERNEL
# What the messages add to a make command line for this base
BASE_ARG=
[ -z "$BASE_DIR" ] || BASE_ARG=" QEMU_BASE=$QEMU_BASE"

say() { printf '%s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# A private apt configuration under the cache: it reaches Debian 13's archive
# without touching the system's sources or package lists.  With an argument
# "source", the suites a base's pin names for QEMU's source instead
# (DEBIAN_SOURCE_SUITES, e.g. sid and experimental), deb-src only, in an
# apt directory of their own.  With "binary SUITE", another release's
# binary packages (the guest kernel matrix: bookworm, sid): SUITE and its
# security suite where it has one, in $CACHE/apt-SUITE.
APT_DIR=$CACHE/apt
apt_private_setup() {
    local kr=/usr/share/keyrings/debian-archive-keyring.gpg
    [ -r "$kr" ] || die "no Debian archive keyring: apt-get install debian-archive-keyring"
    local mirror=${DEBIAN_MIRROR:-http://deb.debian.org} suites=$DEBIAN_SUITE s
    local valid_until=true lists='*Sources*'
    APT_DIR=$CACHE/apt
    if [ "${1:-}" = source ] && [ -n "${DEBIAN_SOURCE_SUITES:-}" ]; then
        suites=$DEBIAN_SOURCE_SUITES
        valid_until=${DEBIAN_SOURCE_CHECK_VALID_UNTIL:-true}
        APT_DIR=$CACHE/apt-${DEBIAN_SOURCE_SUITES// /-}
    elif [ "${1:-}" = binary ] && [ "${2:-$DEBIAN_SUITE}" != "$DEBIAN_SUITE" ]; then
        suites=$2
        lists='*Packages*'
        APT_DIR=$CACHE/apt-$2
        [ "$2" != sid ] || valid_until=false
    fi
    mkdir -p "$APT_DIR/lists/partial" "$APT_DIR/cache/archives/partial" \
             "$APT_DIR/etc"
    if [ "$suites" = "$DEBIAN_SUITE" ]; then
        cat > "$APT_DIR/etc/sources.list.new" <<EOS
deb [signed-by=$kr] $mirror/debian $DEBIAN_SUITE main
deb-src [signed-by=$kr] $mirror/debian $DEBIAN_SUITE main
deb [signed-by=$kr] $mirror/debian-security $DEBIAN_SUITE-security main
deb-src [signed-by=$kr] $mirror/debian-security $DEBIAN_SUITE-security main
EOS
    elif [ "${1:-}" = binary ]; then
        {
            echo "deb [signed-by=$kr] $mirror/debian $suites main"
            # A stable release's kernel updates come through security
            # before its next point release; sid has no security suite.
            [ "$suites" = sid ] ||
                echo "deb [signed-by=$kr] $mirror/debian-security $suites-security main"
        } > "$APT_DIR/etc/sources.list.new"
    else
        for s in $suites; do
            echo "deb-src [signed-by=$kr] $mirror/debian $s main"
        done > "$APT_DIR/etc/sources.list.new"
    fi
    mv "$APT_DIR/etc/sources.list.new" "$APT_DIR/etc/sources.list"
    APT_OPTS=(-o "Dir::Etc::sourcelist=$APT_DIR/etc/sources.list"
              -o "Dir::Etc::sourceparts=-"
              -o "Dir::State::Lists=$APT_DIR/lists"
              -o "Dir::Cache=$APT_DIR/cache"
              -o "APT::Sandbox::User=root"
              -o "Debug::NoLocking=1")
    # sid's and experimental's Release files are past their Valid-Until
    # here; the signature is still checked.
    [ "$valid_until" = true ] ||
        APT_OPTS+=(-o "Acquire::Check-Valid-Until=false")
    # Package lists older than a day are refreshed; a failure to refresh is
    # fine as long as some lists are there.
    if [ -z "$(find "$APT_DIR/lists" -name "$lists" -mtime -1 2>/dev/null)" ]; then
        apt-get "${APT_OPTS[@]}" -q update >"$APT_DIR/update.log" 2>&1 ||
            say "warning: could not refresh Debian $suites package lists (see $APT_DIR/update.log)"
    fi
    [ -n "$(find "$APT_DIR/lists" -name "$lists" 2>/dev/null)" ] ||
        die "cannot reach Debian's archive for $suites (see $APT_DIR/update.log)"
}

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# Where our new files live, at their QEMU path.  Everything under these is
# copied over the upstream tree; the rest of this repository (mk/, harness/,
# patches/, docs/benchmarks/ ...) is the project's own.
OVERLAY_ROOTS=(hw include system tools tests/qtest tests/unit docs/system docs/interop docs/devel docs/tools
              subprojects/libvhost-user)

SRC=$BUILD/src
STATE=$SRC/.git/virtiofs-dax-state

overlay_files() {
    git -C "$TOP" ls-files --cached --others --exclude-standard -- \
        "${OVERLAY_ROOTS[@]}" | while read -r f; do
        [ -f "$TOP/$f" ] && printf '%s\n' "$f"
    done | sort -u
}

default_patch_files() {
    [ -d "$TOP/patches" ] || return 0
    find "$TOP/patches" -maxdepth 1 -name '[0-9][0-9][0-9][0-9]-*.patch' | sort
}

# The series of the base being built: patches/, each replaced by the base's
# variant where it has one: bases/X/patches/ holds it under the same name,
# numbers aside, so that renumbering the series keeps it.  A variant
# without its patch in patches/ means the default series changed under it.
patch_key() { local n=${1##*/}; printf '%s' "${n#[0-9][0-9][0-9][0-9]-}"; }

variant_of() {
    local v
    [ -n "$BASE_DIR" ] || return 0
    for v in "$BASE_DIR"/patches/[0-9][0-9][0-9][0-9]-"$(patch_key "$1")"; do
        [ -f "$v" ] && echo "$v"
    done
    return 0
}

default_patch_of() {
    local p
    for p in "$TOP"/patches/[0-9][0-9][0-9][0-9]-"$(patch_key "$1")"; do
        [ -f "$p" ] && echo "$p"
    done
    return 0
}

patch_files() {
    local p v
    if [ -n "$BASE_DIR" ] && [ -z "${DEFAULT_SERIES:-}" ]; then
        for v in "$BASE_DIR"/patches/[0-9][0-9][0-9][0-9]-*.patch; do
            [ -f "$v" ] || continue
            [ -n "$(default_patch_of "$v")" ] ||
                die "bases/$QEMU_BASE/patches/${v##*/} replaces no patch of patches/: the default series changed; port it again (make port-base$BASE_ARG, README \"Upstream bases\")"
        done
    fi
    default_patch_files | while read -r p; do
        v=
        [ -n "${DEFAULT_SERIES:-}" ] || v=$(variant_of "$p")
        echo "${v:-$p}"
    done
}

# A patch's two fingerprints, "DIFF MESSAGE": sha256s of its changes
# (without the index lines and hunk positions, which move with the rest of
# the series) and of its subject and message.
patch_sums() {
    local t
    t=$(mktemp -d)
    git mailinfo "$t/msg" "$t/diff" < "$1" > "$t/info"
    printf '%s %s\n' \
        "$(sed -e '/^index /d' -e 's/^@@ [^@]* @@/@@/' "$t/diff" | sha256sum | cut -c1-64)" \
        "$(cat <(sed -n 's/^Subject: //p' "$t/info") "$t/msg" | sha256sum | cut -c1-64)"
    rm -rf "$t"
}

# bases/X/ported-from records, per variant (by name without its number),
# the fingerprints of the patches/ patch it was ported from.  The state of
# a variant: "current"; "message" when only that patch's message changed
# since (port-base takes the new message with the variant's changes);
# "stale" when its changes did, or it is gone.
variant_state() {
    local v=$1 p key want
    key=$(patch_key "$v")
    p=$(default_patch_of "$v")
    [ -n "$p" ] || { echo stale; return 0; }
    want=$(awk -v k="$key" '$1 == k { print $2, $3 }' "$BASE_DIR/ported-from" 2>/dev/null)
    read -r have_diff have_msg <<<"$(patch_sums "$p")"
    if [ "$want" = "$have_diff $have_msg" ]; then
        echo current
    elif [ "${want%% *}" = "$have_diff" ]; then
        echo message
    else
        echo stale
    fi
}

# The variants that are not current, with their state
stale_variants() {
    [ -n "$BASE_DIR" ] || return 0
    local v st
    for v in "$BASE_DIR"/patches/[0-9][0-9][0-9][0-9]-*.patch; do
        [ -f "$v" ] || continue
        st=$(variant_state "$v")
        [ "$st" = current ] || echo "${v##*/} ($st)"
    done
}

# A path as the messages show it: relative to the repository.
rel() { printf '%s' "${1#"$TOP"/}"; }

# One hash over everything the prepared tree is made of.
inputs_key() {
    local pristine=$1
    {
        echo "pristine $(git -C "$pristine" rev-parse HEAD)"
        overlay_files | while read -r f; do
            echo "file $f $(sha256_of "$TOP/$f") $(stat -c %a "$TOP/$f")"
        done
        patch_files | while read -r p; do
            local n
            n=$(rel "$p")
            echo "patch ${n#patches/} $(sha256_of "$p")"
        done
    } | sha256sum | cut -d' ' -f1
}

state_get() { [ -f "$STATE" ] && sed -n "s/^$1=//p" "$STATE" || true; }

tree_dirty() { [ -n "$(git -C "$SRC" status --porcelain --untracked-files=all)" ]; }

git_src() { git -C "$SRC" -c user.name="${GIT_AUTHOR_NAME:-virtiofs-dax}" \
                -c user.email="${GIT_AUTHOR_EMAIL:-virtiofs-dax@invalid}" "$@"; }

# index_info [ROOT]: for the file names on stdin (files under ROOT, this
# repository by default), the lines "git update-index --index-info"
# takes, their blobs written into build/src's object store.
index_info() {
    local root=${1:-$TOP} f mode
    while read -r f; do
        mode=100644
        [ -x "$root/$f" ] && mode=100755
        printf '%s %s\t%s\n' "$mode" "$(git -C "$SRC" hash-object -w "$root/$f")" "$f"
    done
}

# commit_mail TREE PARENT DIR: commit TREE on PARENT in build/src with the
# author, date and message of the patch that git mailinfo split into
# DIR/info and DIR/msg, committer the same as author so the commit is
# the same on every run; prints the commit.
commit_mail() {
    local tree=$1 parent=$2 dir=$3 author email date subject
    author=$(sed -n 's/^Author: //p' "$dir/info")
    email=$(sed -n 's/^Email: //p' "$dir/info")
    date=$(sed -n 's/^Date: //p' "$dir/info")
    subject=$(sed -n 's/^Subject: //p' "$dir/info")
    { printf '%s\n\n' "$subject"; cat "$dir/msg"; } |
        GIT_AUTHOR_NAME=$author GIT_AUTHOR_EMAIL=$email GIT_AUTHOR_DATE=$date \
        GIT_COMMITTER_NAME=$author GIT_COMMITTER_EMAIL=$email GIT_COMMITTER_DATE=$date \
        git -C "$SRC" commit-tree "$tree" -p "$parent" -F -
}

# Build, without touching any work tree, the history the repository
# describes on top of the "upstream" tag of build/src (or of $WH_UPSTREAM):
# one commit with our
# files, then one commit per patch (author, date and message from the patch,
# so commit ids are reproducible).  Prints the last commit's id; with
# argument "tag", also tags the overlay commit "overlay".  A patch that does
# not apply stops with its name.
wanted_history() {
    local idx tmp parent tree p n=0
    idx=$(mktemp) tmp=$(mktemp -d)
    # shellcheck disable=SC2064
    trap "rm -rf '$idx' '$tmp'" RETURN
    gi() { GIT_INDEX_FILE=$idx git -C "$SRC" "$@"; }
    local up=${WH_UPSTREAM:-upstream}
    gi read-tree "$up"
    overlay_files | index_info | gi update-index --add --index-info
    parent=$(git -C "$SRC" rev-parse "$up^{commit}")
    tree=$(gi write-tree)
    if [ "$tree" != "$(git -C "$SRC" rev-parse "$up^{tree}")" ]; then
        parent=$(GIT_AUTHOR_NAME=virtiofs-dax GIT_AUTHOR_EMAIL=virtiofs-dax@invalid \
                 GIT_AUTHOR_DATE="2000-01-01T00:00:00Z" GIT_COMMITTER_NAME=virtiofs-dax \
                 GIT_COMMITTER_EMAIL=virtiofs-dax@invalid GIT_COMMITTER_DATE="2000-01-01T00:00:00Z" \
                 git -C "$SRC" commit-tree "$tree" -p "$parent" -m "overlay: this fork's new files")
    fi
    [ "${1:-}" != tag ] || git -C "$SRC" tag -f overlay "$parent" >/dev/null
    local series
    series=$(patch_files) || exit 1
    while read -r p; do
        [ -n "$p" ] || continue
        git mailinfo "$tmp/msg" "$tmp/diff" < "$p" > "$tmp/info" ||
            die "$(rel "$p") is not a patch in mail format"
        local err
        if ! err=$(gi apply --cached "$tmp/diff" 2>&1); then
            local hint=
            [ -z "$BASE_DIR" ] || [ -n "${DEFAULT_SERIES:-}" ] ||
                hint=" (port it: make port-base QEMU_BASE=$QEMU_BASE, README \"Upstream bases\")"
            die "$(rel "$p") does not apply to $(head -n1 "$BUILD/qemu-source.txt"): $(head -n1 <<<"$err")$hint"
        fi
        parent=$(commit_mail "$(gi write-tree)" "$parent" "$tmp")
        n=$((n + 1))
    done <<<"$series"
    echo "$parent"
}

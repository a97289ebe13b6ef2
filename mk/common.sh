# Shared settings for the mk/ scripts.  Sourced, not run.

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$TOP/build}
CACHE=${VIRTIOFS_DAX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/virtiofs-dax}

# shellcheck source=../qemu.pin
. "$TOP/qemu.pin"

say() { printf '%s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# A private apt configuration under the cache: it reaches Debian 13's archive
# without touching the system's sources or package lists.
APT_DIR=$CACHE/apt
apt_private_setup() {
    mkdir -p "$APT_DIR/lists/partial" "$APT_DIR/cache/archives/partial" \
             "$APT_DIR/etc"
    local kr=/usr/share/keyrings/debian-archive-keyring.gpg
    [ -r "$kr" ] || die "no Debian archive keyring: apt-get install debian-archive-keyring"
    local mirror=${DEBIAN_MIRROR:-http://deb.debian.org}
    cat > "$APT_DIR/etc/sources.list.new" <<EOS
deb [signed-by=$kr] $mirror/debian $DEBIAN_SUITE main
deb-src [signed-by=$kr] $mirror/debian $DEBIAN_SUITE main
deb [signed-by=$kr] $mirror/debian-security $DEBIAN_SUITE-security main
deb-src [signed-by=$kr] $mirror/debian-security $DEBIAN_SUITE-security main
EOS
    mv "$APT_DIR/etc/sources.list.new" "$APT_DIR/etc/sources.list"
    APT_OPTS=(-o "Dir::Etc::sourcelist=$APT_DIR/etc/sources.list"
              -o "Dir::Etc::sourceparts=-"
              -o "Dir::State::Lists=$APT_DIR/lists"
              -o "Dir::Cache=$APT_DIR/cache"
              -o "APT::Sandbox::User=root"
              -o "Debug::NoLocking=1")
    # Package lists older than a day are refreshed; a failure to refresh is
    # fine as long as some lists are there.
    if [ -z "$(find "$APT_DIR/lists" -name '*Sources*' -mtime -1 2>/dev/null)" ]; then
        apt-get "${APT_OPTS[@]}" -q update >"$APT_DIR/update.log" 2>&1 ||
            say "warning: could not refresh Debian $DEBIAN_SUITE package lists (see $APT_DIR/update.log)"
    fi
    [ -n "$(find "$APT_DIR/lists" -name '*Sources*' 2>/dev/null)" ] ||
        die "cannot reach Debian's archive for $DEBIAN_SUITE (see $APT_DIR/update.log)"
}

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# Where our new files live, at their QEMU path.  Everything under these is
# copied over the upstream tree; the rest of this repository (mk/, harness/,
# patches/, docs/benchmarks/ ...) is the project's own.
OVERLAY_ROOTS=(hw include tools tests/qtest tests/unit docs/system docs/interop docs/devel)

SRC=$BUILD/src
STATE=$SRC/.git/virtiofs-dax-state

overlay_files() {
    git -C "$TOP" ls-files --cached --others --exclude-standard -- \
        "${OVERLAY_ROOTS[@]}" | while read -r f; do
        [ -f "$TOP/$f" ] && printf '%s\n' "$f"
    done | sort -u
}

patch_files() {
    find "$TOP/patches" -maxdepth 1 -name '[0-9][0-9][0-9][0-9]-*.patch' | sort
}

# One hash over everything the prepared tree is made of.
inputs_key() {
    local pristine=$1
    {
        echo "pristine $(git -C "$pristine" rev-parse HEAD)"
        overlay_files | while read -r f; do
            echo "file $f $(sha256_of "$TOP/$f") $(stat -c %a "$TOP/$f")"
        done
        patch_files | while read -r p; do
            echo "patch $(basename "$p") $(sha256_of "$p")"
        done
    } | sha256sum | cut -d' ' -f1
}

state_get() { [ -f "$STATE" ] && sed -n "s/^$1=//p" "$STATE" || true; }

tree_dirty() { [ -n "$(git -C "$SRC" status --porcelain --untracked-files=all)" ]; }

git_src() { git -C "$SRC" -c user.name="${GIT_AUTHOR_NAME:-virtiofs-dax}" \
                -c user.email="${GIT_AUTHOR_EMAIL:-virtiofs-dax@invalid}" "$@"; }

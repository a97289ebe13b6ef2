#!/usr/bin/env bash
# The fork as one upstream-style series against the pinned upstream.
#
#   series.sh export [DIR]    write it to DIR (default build/series) and
#                             check that it applies with git am
#   series.sh bisect [N]      export, then build QEMU after each patch
#                             (the first N patches only, when N is given)
#
# patches/ holds only the changes to upstream files; this fork's new files
# live in the overlay.  The export puts each new file into the patch that
# introduces it (patches/series.map), so every patch of the series is
# what a reviewer would get: the new code together with its hooks.
#
# The protocol text that the repository keeps in docs/interop/*.rst.inc
# files goes into vhost-user.rst itself (mk/series-inline.py).
#
# A new file may grow across the series: patches/series.d/SLUG.diff is a
# diff (paths a/FILE b/FILE, as git diff writes them) of new files that
# the patch SLUG applies on top of their earlier version.  A file enters
# the series as it is in the overlay less every later patch's growth, so
# each patch compiles with what exists at that point (make bisect-check).
set -euo pipefail
. "$(dirname "$0")/common.sh"

MAP=$TOP/patches/series.map
STAGES=$TOP/patches/series.d
GROUP_FILE=$TOP/patches/series.groups
OUT_DIR=$BUILD/series
BISECT=$BUILD/bisect

[ -d "$SRC/.git" ] || die "no build/src: run 'make prepare' first"

# The slug of a patch file: its name without the number and ".patch"
slug() { local b=${1##*/}; b=${b#[0-9][0-9][0-9][0-9]-}; echo "${b%.patch}"; }

# Print "slug<TAB>file" for every overlay file, from the map's first
# matching rule; fail on a file no rule matches or a rule naming no patch.
assign_files() {
    local -a pats=() slugs=()
    local pat s f i found rc=0
    declare -A have=()
    while read -r p; do have[$(slug "$p")]=1; done < <(patch_files)
    while read -r pat s; do
        case "$pat" in ''|'#'*) continue ;; esac
        [ -n "${have[$s]:-}" ] || { say "series.map: no patch '$s' (rule $pat)"; rc=1; }
        pats+=("$pat") slugs+=("$s")
    done < "$MAP"
    while read -r f; do
        found=
        for i in "${!pats[@]}"; do
            # shellcheck disable=SC2254
            case "$f" in ${pats[$i]}) found=${slugs[$i]}; break ;; esac
        done
        if [ -z "$found" ]; then
            say "series.map: no rule for the new file $f"; rc=1
        else
            printf '%s\t%s\n' "$found" "$f"
        fi
    done < <(overlay_files)
    return $rc
}

# For each patch, in $2/SLUG, the index lines ("mode blob\tpath") of the
# new files it introduces, in the version they have at that point: the
# overlay's, less the growth (series.d) of every later patch.  $1: the
# output of assign_files.
staged_files() {
    local assign=$1 out=$2 tree=$3/tree p s f i
    local -a slugs=()
    mkdir -p "$out" "$tree"
    while read -r f; do
        mkdir -p "$tree/$(dirname "$f")"
        cp -p "$TOP/$f" "$tree/$f"
    done < <(cut -f2 "$assign")
    while read -r p; do slugs+=("$(slug "$p")"); done < <(patch_files)
    for f in "$STAGES"/*.diff; do
        [ -f "$f" ] || continue
        s=${f##*/}; s=${s%.diff}
        printf '%s\n' "${slugs[@]}" | grep -qxF "$s" ||
            die "patches/series.d/${f##*/} names no patch of the series"
    done
    # From the last patch back: take the files a patch introduces as they
    # are now, then undo its growth of earlier ones
    for ((i = ${#slugs[@]} - 1; i >= 0; i--)); do
        s=${slugs[$i]}
        awk -F'\t' -v s="$s" '$1 == s { print $2 }' "$assign" |
            index_info "$tree" > "$out/$s"
        if [ -f "$STAGES/$s.diff" ]; then
            (cd "$tree" && git apply -R "$STAGES/$s.diff") ||
                die "patches/series.d/$s.diff does not match the overlay's files: make it again from them"
        fi
    done
}

# Build the series as commits on top of the "upstream" tag of build/src,
# without touching its work tree; print the last commit.
build_history() {
    local idx tmp assign parent tree p s f staged
    idx=$(mktemp) tmp=$(mktemp -d) assign=$(mktemp) staged=$(mktemp -d)
    # shellcheck disable=SC2064
    trap "rm -rf '$idx' '$tmp' '$assign' '$staged'" RETURN
    assign_files > "$assign" || die "fix patches/series.map"
    staged_files "$assign" "$staged/index" "$staged"
    gi() { GIT_INDEX_FILE=$idx git -C "$SRC" "$@"; }
    gi read-tree upstream
    parent=$(git -C "$SRC" rev-parse 'upstream^{commit}')
    while read -r p; do
        s=$(slug "$p")
        if [ -f "$STAGES/$s.diff" ]; then
            gi apply --cached "$STAGES/$s.diff" ||
                die "patches/series.d/$s.diff does not apply in the series"
        fi
        gi update-index --add --index-info < "$staged/index/$s"
        git mailinfo "$tmp/msg" "$tmp/diff" < "$p" > "$tmp/info" ||
            die "patches/${p##*/} is not a patch in mail format"
        gi apply --cached "$tmp/diff" ||
            die "patches/${p##*/} does not apply in the series"
        tree=$("$TOP/mk/series-inline.py" "$SRC" "$idx") ||
            die "cannot put the protocol text into vhost-user.rst"
        parent=$(commit_mail "$tree" "$parent" "$tmp")
    done < <(patch_files)
    # The series must describe the same tree as patches/ plus the overlay,
    # the protocol text in the page
    local want
    want=$(wanted_history)
    gi read-tree "$want"
    [ "$(git -C "$SRC" rev-parse "$parent^{tree}")" = \
      "$("$TOP/mk/series-inline.py" "$SRC" "$idx")" ] ||
        die "the series does not reproduce patches/ + the overlay"
    echo "$parent"
}

# A clone of build/src with a work tree, for git am and the builds
work_clone() {
    local dir=$1
    if [ ! -d "$dir/.git" ]; then
        rm -rf "$dir"
        mkdir -p "$(dirname "$dir")"
        git clone -q --shared --no-checkout "$SRC" "$dir"
    fi
    git -C "$dir" fetch -q "$SRC" '+refs/tags/upstream:refs/tags/upstream'
    git -C "$dir" config user.name "virtiofs-dax series check"
    git -C "$dir" config user.email "series-check@virtiofs-dax.invalid"
}

# Write the series to $1 and git am it in the clone $2
export_series() {
    local dir=$1 am=$2 head n
    head=$(build_history)
    git -C "$SRC" update-ref refs/virtiofs-dax/series "$head"
    rm -rf "$dir"
    mkdir -p "$dir"
    git -C "$SRC" format-patch -q --zero-commit --no-signature --binary \
        -o "$dir" upstream.."$head"
    n=$(ls "$dir" | wc -l)
    # The proof a reviewer needs: git am of the files onto upstream
    work_clone "$am"
    git -C "$am" am --abort >/dev/null 2>&1 || true
    git -C "$am" checkout -q -f --detach upstream
    git -C "$am" clean -q -fdx
    git -C "$am" am -q --keep-cr "$dir"/*.patch ||
        die "the series in $dir does not apply with git am"
    [ "$(git -C "$am" rev-parse 'HEAD^{tree}')" = \
      "$(git -C "$SRC" rev-parse "$head^{tree}")" ] ||
        die "git am of $dir gives another tree than the series"
    say "series: $n patches in ${dir#"$TOP"/}, applying with git am to $(head -n1 "$BUILD/qemu-source.txt")"
    export_groups "$dir" "$head"
}

# The series as it is sent: $1/send/NAME/ for each group of
# patches/series.groups, with its cover letter.  $2: the series' last
# commit.
export_groups() {
    local dir=$1 head=$2 name first cover from to n i
    local -a names=() starts=() covers=() commits=()
    [ -f "$GROUP_FILE" ] || return 0
    mapfile -t commits < <(git -C "$SRC" rev-list --reverse upstream.."$head")
    while read -r name first cover; do
        case "$name" in ''|'#'*) continue ;; esac
        [ -f "$TOP/$cover" ] || die "series.groups: no cover letter $cover"
        n=$(ls "$dir"/[0-9][0-9][0-9][0-9]-"$first".patch 2>/dev/null | head -n1)
        [ -n "$n" ] || die "series.groups: no patch '$first'"
        n=${n##*/}; n=$((10#${n:0:4}))
        names+=("$name") starts+=("$n") covers+=("$TOP/$cover")
    done < "$GROUP_FILE"
    [ "${starts[0]:-1}" = 1 ] || die "series.groups: the first group must start with the first patch"
    rm -rf "$dir/send"
    for i in "${!names[@]}"; do
        from=${starts[$i]}
        to=${starts[$((i + 1))]:-$((${#commits[@]} + 1))}
        to=$((to - 1))
        [ "$to" -ge "$from" ] || die "series.groups: group ${names[$i]} is empty"
        git -C "$SRC" format-patch -q --zero-commit --no-signature --binary \
            --cover-letter -o "$dir/send/${names[$i]}" \
            "${commits[$((from - 1))]}~1..${commits[$((to - 1))]}"
        python3 - "$dir/send/${names[$i]}"/0000-cover-letter.patch "${covers[$i]}" <<'PY'
import sys
path, cover = sys.argv[1], sys.argv[2]
subject, _, body = open(cover).read().partition("\n\n")
text = open(path).read()
text = text.replace("*** SUBJECT HERE ***", subject.strip(), 1)
text = text.replace("*** BLURB HERE ***", body.rstrip("\n"), 1)
open(path, "w").write(text)
PY
        say "series: ${names[$i]}: patches $from-$to with a cover letter in ${dir#"$TOP"/}/send/${names[$i]}"
    done
}

bisect() {
    local max=${1:-} commits c i=0 n failed=() log
    export_series "$OUT_DIR" "$BISECT/src"
    mapfile -t commits < <(git -C "$BISECT/src" rev-list --reverse upstream..HEAD)
    n=${#commits[@]}
    [ -z "$max" ] || [ "$max" -ge "$n" ] || n=$max
    mkdir -p "$BISECT/logs"
    for c in "${commits[@]:0:$n}"; do
        i=$((i + 1))
        git -C "$BISECT/src" checkout -q -f --detach "$c"
        log=$BISECT/logs/$(printf '%04d' $i).log
        say "bisect-check: [$i/$n] $(git -C "$BISECT/src" log -1 --format=%s "$c")"
        # build-qemu.sh with build/bisect as its build directory: the same
        # configuration as build/qemu, and ccache hits from it
        if BUILD=$BISECT "$TOP/mk/build-qemu.sh" >"$log" 2>&1; then
            cp "$BISECT/build.log" "$log.ninja" 2>/dev/null || true
        else
            cp "$BISECT/build.log" "$log.ninja" 2>/dev/null || true
            say "bisect-check: patch $i does not build (log: ${log#"$TOP"/}.ninja)"
            failed+=("$i")
        fi
    done
    if [ ${#failed[@]} -gt 0 ]; then
        die "bisect-check: ${#failed[@]} of $n patches do not build: ${failed[*]}"
    fi
    say "bisect-check: QEMU builds after each of the first $n of ${#commits[@]} patches"
}

case "${1:-}" in
export) export_series "${2:-$OUT_DIR}" "$BUILD/series-am" ;;
bisect) bisect "${2:-}" ;;
*) die "usage: $0 export [DIR] | bisect [N]" ;;
esac

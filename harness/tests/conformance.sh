#!/usr/bin/env bash
# Differential conformance: the host is the oracle.  harness/guest-tools/
# fsconform.c runs a fixed sequence of system calls (as root, then as uid
# 1000 with supplementary groups) and dumps the tree they leave.  It runs
# once on a host directory and once per configuration in a guest, on a
# virtio-fs mount of a directory of the same file system; every line must
# match the host's, except the differences listed, with their reason, in
# harness/tests/conformance-expected-<daemon>.
#
#   conformance.sh [--timeout S] CONFIG...
#
# CONFIG is DAEMON:CACHE[:dax], e.g. ours:auto:dax, ours:never, rust:auto.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
take_timeout "$@"
set -- "${args[@]}"
timeout=${timeout_args[1]:-300}
[ $# -gt 0 ] || { echo "usage: $0 [--timeout S] DAEMON:CACHE[:dax]..." >&2; exit 2; }

chmod 755 "$work"

# The guest's copy is built the same way by harness/build-guest.sh
gcc -O2 -static -Wall -o "$work/fsconform" "$top/harness/guest-tools/fsconform.c"
mkdir -m 755 "$work/host"
"$work/fsconform" "$work/host" > "$work/host.out"
grep -q '^end$' "$work/host.out" || { tail "$work/host.out"; fail "the host run did not finish"; }
calls=$(grep -c '^[0-9][0-9]* ' "$work/host.out")
entries=$(grep -c '^tree: ' "$work/host.out")

# Linux's link and O_CREAT protections are sysctls: the guest gets the
# host's, so that they are no difference of the file system.
sysctls=
for s in protected_hardlinks protected_symlinks protected_regular protected_fifos; do
    v=$(cat "/proc/sys/fs/$s" 2>/dev/null) && sysctls="$sysctls echo $v > /proc/sys/fs/$s;"
done

guest_script "$work/guest.sh" <<GUEST
$sysctls
opts=
[ "\$VFS_DAX" = 1 ] && opts=dax=always
mount_virtiofs "\$VFS_TAG" /mnt \$opts
mkdir -m 755 /mnt/t && fsconform /mnt/t
GUEST

# CONFIG KEY | reason lines of the expected differences of DAEMON that
# apply to CONFIG, as keys (what comes before " = " or " mode ").
expected_keys() {  # daemon config
    local f=$top/harness/tests/conformance-expected-$1
    [ -f "$f" ] || return 0
    awk -F' [|] ' -v cfg="$2" '
        /^#/ || NF == 0 { next }
        NF != 3 || $3 == "" { print "BAD " $0; next }
        { n = split($1, c, ","); for (i = 1; i <= n; i++)
              if (c[i] == "*" || c[i] == cfg) { print $2; break } }' "$f"
}
key_of() {  # the part of an output line that names the call or the entry
    sed -E 's/ = .*//; s/^(tree: [^ ]*) mode .*/\1/; s/^(tree: [^:]*): .*/\1/'
}

for cfg in "$@"; do
    IFS=: read -r daemon cache dax <<< "$cfg"
    args=(--daemon "$daemon" --cache-mode "$cache" --daemon-args=--xattr)
    [ "$dax" = dax ] && args+=(--cache-size 1G)
    mkdir -m 755 "$work/$cfg"
    if ! vm --quiet --shared "$work/$cfg" \
            --timeout "$timeout" "${args[@]}" "$work/guest.sh" > "$work/$cfg.out" 2>&1 ||
       ! grep -q '^end$' "$work/$cfg.out"; then
        bad "$cfg: the guest run did not finish:"
        tail -n 15 "$work/$cfg.out"
        continue
    fi
    expected_keys "$daemon" "$cfg" > "$work/$cfg.expected"
    if grep -q '^BAD ' "$work/$cfg.expected"; then
        bad "conformance-expected-$daemon: lines need CONFIGS | KEY | reason:"
        grep '^BAD ' "$work/$cfg.expected"
        continue
    fi
    # Line by line, keyed: a listed difference drops the line on both sides
    paste -d'\t' <(key_of < "$work/host.out") "$work/host.out" > "$work/host.keyed"
    paste -d'\t' <(key_of < "$work/$cfg.out") "$work/$cfg.out" > "$work/$cfg.keyed"
    drop() {
        awk -F'\t' -v list="$work/$cfg.expected" '
            BEGIN { while ((getline k < list) > 0) x[k] = 1 }
            !($1 in x) { print $2 }' "$1"
    }
    if diff <(drop "$work/host.keyed") <(drop "$work/$cfg.keyed") > "$work/$cfg.diff"; then
        pass "$cfg: $calls calls and $entries tree entries as on the host" \
             "($(grep -c . "$work/$cfg.expected") listed differences)"
    else
        bad "$cfg: differs from the host (< host, > guest):"
        cat "$work/$cfg.diff"
    fi
    # A listed difference that did not happen is a stale entry
    while IFS= read -r key; do
        h=$(awk -F'\t' -v k="$key" '$1 == k { print $2 }' "$work/host.keyed")
        g=$(awk -F'\t' -v k="$key" '$1 == k { print $2 }' "$work/$cfg.keyed")
        if [ "$h" = "$g" ]; then
            bad "$cfg: listed difference did not occur: $key"
        else
            echo "  expected difference: host: ${h:-(none)}"
            echo "                       $cfg: ${g:-(none)}"
        fi
    done < "$work/$cfg.expected"
done
finish

#!/usr/bin/env bash
# Requests per file operation: the round trips our virtiofsd spares a
# guest, each counted from the daemon's --stats, so that a spared request
# that comes back fails here.  A guest creates, writes and closes
# $FILES small files, then opens, reads and closes each; the daemon's
# per-opcode counts, divided by $FILES, are printed for the record.
#
# Spared today:
#   FLUSH   close() needs none unless the guest's POSIX locks live on the
#           host (FOPEN_NOFLUSH); with --posix-lock every close() sends
#           one, which shows the count would see them.
# Extra arguments go to harness/vm.py (mk/check.py gives --timeout).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/harness/tests/lib.sh"
split_timeout 2 "$@"
FILES=200
work=$(mktemp -d /tmp/vfsdax-roundtrips.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT

cat > "$work/guest.sh" <<GUEST
. /lib/vfsdax.sh
mount_virtiofs "\$VFS_TAG" /mnt
mkdir /mnt/d || fail "mkdir"
i=0
while [ \$i -lt $FILES ]; do
    echo "file \$i" > /mnt/d/f\$i || fail "create f\$i"
    i=\$((i + 1))
done
i=0
while [ \$i -lt $FILES ]; do
    read -r line < /mnt/d/f\$i || fail "read f\$i"
    [ "\$line" = "file \$i" ] || fail "f\$i reads \$line"
    i=\$((i + 1))
done
pass "$FILES files created, written, read back"
umount /mnt || fail "umount"
GUEST

# run NAME DAEMON-ARGS: one guest, its daemon's log in $work/NAME
run() {
    local name=$1
    shift
    python3 "$top/harness/vm.py" --daemon ours --cache-mode auto \
        --shared "$work/share-$name" --log-dir "$work/$name" \
        --daemon-args="--stats $*" "${vm_args[@]}" "$work/guest.sh"
}

# count NAME OP: how many OP requests the daemon of run NAME served
count() {
    local n
    n=$(sed -n "s/.*stats: $2: \([0-9]*\) requests.*/\1/p" \
        "$work/$1/virtiofsd.log" | tail -n1)
    echo "${n:-0}"
}

mkdir "$work/share-plain" "$work/share-locks"
run plain
run locks --posix-lock

rc=0
grep -q "stats: CREATE: [1-9]" "$work/plain/virtiofsd.log" || {
    echo "FAIL: no --stats report in the daemon's log"
    exit 1
}
echo "requests per file (of $FILES), without and with --posix-lock:"
for op in LOOKUP CREATE OPEN WRITE READ FLUSH RELEASE GETATTR SETATTR; do
    a=$(count plain $op) b=$(count locks $op)
    awk -v op="$op" -v a="$a" -v b="$b" -v n=$FILES \
        'BEGIN { printf "  %-8s %5.2f %5.2f\n", op, a / n, b / n }'
done

flush=$(count plain FLUSH)
if [ "$flush" != 0 ]; then
    echo "FAIL: $flush FLUSH requests without --posix-lock (FOPEN_NOFLUSH lost?)"
    rc=1
else
    echo "ok: no FLUSH without the guest's locks on the host"
fi
flush=$(count locks FLUSH)
if [ "$flush" -lt $((2 * FILES)) ]; then
    echo "FAIL: $flush FLUSH requests with --posix-lock, fewer than the" \
         "$((2 * FILES)) close()s"
    rc=1
else
    echo "ok: with --posix-lock every close() flushes ($flush FLUSH)"
fi
exit $rc

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
#   walks   --cache=adaptive: walking again a tree the host has left
#           alone (ls -lR, $WALKS times) costs no READDIRPLUS, LOOKUP or
#           GETATTR while its names' timeouts last: the guest keeps the
#           listings and the names (only OPENDIR and RELEASEDIR go).
#           With cache=auto every walk costs its READDIRPLUS again,
#           which shows the count would see them.  A tree the guest has
#           just made, walked again past its short timeouts, costs no
#           more LOOKUP and GETATTR than with cache=auto: its listings
#           are read again (a READDIRPLUS renews a page of names at
#           once) rather than kept with their names gone stale.
# Extra arguments go to harness/vm.py (mk/check.py gives --timeout).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
split_timeout 6 "$@"
WALKS=4
FILES=200

guest_script "$work/guest.sh" <<GUEST
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

# The walks: a tree of 20 directories of 40 files, made on the host, at
# least 20 s old when the guest first walks it (by the host's clock)
guest_script "$work/walk.sh" <<GUEST
mount_virtiofs "\$VFS_TAG" /mnt
made=\$(cat /mnt/made)
while [ \$((\$(date +%s) - made)) -lt 20 ]; do sleep 0.5; done
i=0
while [ \$i -lt $WALKS ]; do
    ls -lR /mnt/t > /dev/null || fail "walk \$i"
    i=\$((i + 1))
done
pass "$WALKS walks"
umount /mnt || fail "umount"
GUEST

# A young tree: 10 directories of 20 files the guest makes, walked,
# then walked twice more 1.5 s apart (past MIN, 1 s)
guest_script "$work/young.sh" <<GUEST
mount_virtiofs "\$VFS_TAG" /mnt
for d in 1 2 3 4 5 6 7 8 9 10; do
    mkdir -p /mnt/y/d\$d || fail "mkdir"
    for f in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
        echo \$f > /mnt/y/d\$d/f\$f || fail "create"
    done
done
for i in 1 2 3; do
    sleep 1.5
    ls -lR /mnt/y > /dev/null || fail "walk \$i"
done
pass "young tree walked"
umount /mnt || fail "umount"
GUEST

# run NAME DAEMON-ARGS: one guest, its daemon's log in $work/NAME
run() {
    local name=$1
    shift
    vm --daemon ours --cache-mode auto \
        --shared "$work/share-$name" --log-dir "$work/$name" \
        --daemon-args="--stats $*" "${vm_args[@]}" "$work/guest.sh"
}

# walk NAME CACHE DAEMON-ARGS: the walks, with --cache=CACHE
walk() {
    local name=$1 cache=$2 d f
    shift 2
    for d in $(seq 20); do
        mkdir -p "$work/share-$name/t/d$d"
        for f in $(seq 40); do
            echo "$f" > "$work/share-$name/t/d$d/f$f"
        done
    done
    date +%s > "$work/share-$name/made"
    vm --daemon ours --cache-mode "$cache" \
        --shared "$work/share-$name" --log-dir "$work/$name" \
        --daemon-args="--stats $*" "${vm_args[@]}" "$work/walk.sh"
}

# count NAME OP: how many OP requests the daemon of run NAME served
count() {
    local n
    n=$(stat_count "$work/$1/virtiofsd.log" "$2")
    echo "${n:-0}"
}

mkdir "$work/share-plain" "$work/share-locks"
run plain
run locks --posix-lock
# MAX 30 s, FRACTION 1: 20 s unchanged gives 20 s, longer than the walks
walk walk-auto auto
walk walk-adaptive adaptive --adaptive-timeouts=1:30:1
for cache in auto adaptive; do
    mkdir "$work/share-young-$cache"
    vm --daemon ours --cache-mode $cache \
        --shared "$work/share-young-$cache" --log-dir "$work/young-$cache" \
        --daemon-args=--stats "${vm_args[@]}" "$work/young.sh"
done

grep -q "stats: CREATE: [1-9]" "$work/plain/virtiofsd.log" ||
    fail "no --stats report in the daemon's log"
echo "requests per file (of $FILES), without and with --posix-lock:"
for op in LOOKUP CREATE OPEN WRITE READ FLUSH RELEASE GETATTR SETATTR; do
    a=$(count plain $op) b=$(count locks $op)
    awk -v op="$op" -v a="$a" -v b="$b" -v n=$FILES \
        'BEGIN { printf "  %-8s %5.2f %5.2f\n", op, a / n, b / n }'
done

flush=$(count plain FLUSH)
if [ "$flush" != 0 ]; then
    bad "$flush FLUSH requests without --posix-lock (FOPEN_NOFLUSH lost?)"
else
    pass "no FLUSH without the guest's locks on the host"
fi
flush=$(count locks FLUSH)
if [ "$flush" -lt $((2 * FILES)) ]; then
    bad "$flush FLUSH requests with --posix-lock, fewer than the" \
        "$((2 * FILES)) close()s"
else
    pass "with --posix-lock every close() flushes ($flush FLUSH)"
fi

echo "requests for $WALKS walks of 20 directories of 40 files, cache=auto" \
     "and cache=adaptive:"
for op in OPENDIR READDIRPLUS LOOKUP GETATTR; do
    printf '  %-12s %5d %5d\n' $op "$(count walk-auto $op)" \
        "$(count walk-adaptive $op)"
done
rdp_auto=$(count walk-auto READDIRPLUS)
rdp=$(count walk-adaptive READDIRPLUS)
names=$(($(count walk-adaptive LOOKUP) + $(count walk-adaptive GETATTR)))
# The first walk reads each directory once (a few READDIRPLUS each)
if [ "$rdp_auto" -lt $((WALKS * 20)) ]; then
    bad "cache=auto: $rdp_auto READDIRPLUS for $WALKS walks of 20" \
        "directories: the walks did not reach the daemon"
elif [ $((rdp * WALKS)) -gt $((rdp_auto + 20)) ]; then
    bad "cache=adaptive: $rdp READDIRPLUS for $WALKS walks, more" \
        "than one walk's ($rdp_auto / $WALKS with cache=auto): the" \
        "listings were not kept"
elif [ "$names" -gt 40 ]; then
    bad "cache=adaptive: $names LOOKUP and GETATTR for $WALKS" \
        "walks of 800 names: the names were not kept"
else
    pass "cache=adaptive walks again with no READDIRPLUS ($rdp for" \
         "$WALKS walks, auto $rdp_auto) and $names LOOKUP and GETATTR"
fi

young_auto=$(($(count young-auto LOOKUP) + $(count young-auto GETATTR)))
young=$(($(count young-adaptive LOOKUP) + $(count young-adaptive GETATTR)))
echo "a young tree of 200 files made and walked 3 times: LOOKUP and" \
     "GETATTR $young_auto with cache=auto, $young with cache=adaptive"
if [ "$young" -gt $((young_auto + 40)) ]; then
    bad "cache=adaptive costs $young LOOKUP and GETATTR on a young" \
        "tree against $young_auto with cache=auto: stale names kept"
else
    pass "a young tree costs no more LOOKUP and GETATTR than with" \
         "cache=auto"
fi
finish

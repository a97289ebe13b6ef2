#!/usr/bin/env bash
# DAX under concurrency: four vCPUs, four request queues and a daemon
# thread pool, so that SETUPMAPPING and REMOVEMAPPING of the one window
# arrive in parallel and dax.c's locking is what keeps them apart.  The
# window (32 MiB, 16 ranges) is smaller than the data (40 MiB): the
# guest keeps reclaiming ranges while others map them.
#  - two fsx (harness/guest-tools/fsx.c) on files of up to 8 MiB each,
#    every read checked against its model, the host's copies compared
#    with the models at the end;
#  - two mmap writers, each filling an 8 MiB file through a shared
#    mapping with a new pattern, over and over, checking it each time
#    and the host checking the last one;
# each pinned to its own vCPU, hence its own request queue.  Run twice:
# plain, and with --dax-unmap-delay (removed ranges stay mapped a while
# and are taken over by the next SETUPMAPPING of their slot).
# Checked, not assumed: every request queue completed requests (the
# guest's /proc/interrupts), the window was remapped more often than it
# has ranges (QEMU's trace), and with the delay the daemon kept removed
# ranges mapped (--stats).
# DAXPAR_OPS (default 3000) fsx operations per fsx.  Extra arguments go
# to harness/vm.py; the --timeout among them is for both guests.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
split_timeout 2 "$@"
pattern="python3 $top/harness/tests/pattern.py"
ops=${DAXPAR_OPS:-3000}
window=$((32 << 20))
range=$((2 << 20))

guest_script "$work/guest.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt dax=always
dax_active /mnt || fail "dax=always requested, DAX not active"
[ "$(nproc)" = 4 ] || fail "$(nproc) vCPUs, not 4"
mkdir /tmp/m1 /tmp/m2
# fsx -w: a call that never returns (a lost wake-up in the daemon) fails
# the run instead of holding it until the harness's timeout
taskset -c 0 fsx -n "$DAXPAR_OPS" -s 11 -l $((8 << 20)) -c 1000 -w 120 \
    -o /tmp/m1 /mnt/fa > /tmp/fsx1.out 2>&1 &
f1=$!
taskset -c 1 fsx -n "$DAXPAR_OPS" -s 12 -l $((8 << 20)) -c 1000 -w 120 \
    -o /tmp/m2 /mnt/fb > /tmp/fsx2.out 2>&1 &
f2=$!
# writer NAME SEED0: fill and check until the fsx are done
cat > /tmp/writer.sh <<'WRITER'
seed=$2
while [ ! -e /tmp/stop ]; do
    seed=$((seed + 1))
    mmapio fill "/mnt/$1" $((8 << 20)) $seed > /tmp/$1.out 2>&1 &&
        mmapio check "/mnt/$1" $seed >> /tmp/$1.out 2>&1 ||
        { echo "FAIL seed $seed: $(cat /tmp/$1.out)" > /tmp/$1.verdict; exit 1; }
    echo $seed > /tmp/$1.seed
done
echo "ok $(cat /tmp/$1.seed)" > /tmp/$1.verdict
WRITER
taskset -c 2 sh /tmp/writer.sh wa 100 &
w1=$!
taskset -c 3 sh /tmp/writer.sh wb 200 &
w2=$!
rc1=0; wait $f1 || rc1=$?
rc2=0; wait $f2 || rc2=$?
touch /tmp/stop
wait $w1 $w2
cat /tmp/fsx1.out /tmp/fsx2.out | grep -v '^  ' | tail -n 6
[ $rc1 = 0 ] || fail "fsx on fa: $(grep -m1 -e MISMATCH -e FAIL -e 'has not returned' /tmp/fsx1.out)"
[ $rc2 = 0 ] || fail "fsx on fb: $(grep -m1 -e MISMATCH -e FAIL -e 'has not returned' /tmp/fsx2.out)"
for w in wa wb; do
    v=$(cat /tmp/$w.verdict 2>/dev/null)
    case $v in
    "ok "[0-9]*) echo "writer $w: last seed ${v#ok }" ;;
    *) fail "mmap writer $w: ${v:-no verdict}" ;;
    esac
done
pass "two fsx and two mmap writers in parallel"
(cd /tmp/m1 && sha256sum fa; cd /tmp/m2 && sha256sum fb) > /mnt/model.sha256
# Completions per request queue (per-queue interrupt vectors)
grep requests /proc/interrupts | awk '{ n = 0; for (i = 2; i <= NF; i++) if ($i ~ /^[0-9]+$/) n += $i; print "irq " $NF " " n }'
umount /mnt || fail umount
GUEST

# run NAME DAEMON-ARGS
run() {
    local name=$1 dargs=$2 rc=0 shared=$work/$1.share
    mkdir -p "$shared"
    vm --quiet --shared "$shared" \
        --cache-size $((window >> 20))M --smp 4 --request-queues 4 \
        --log-dir "$work/$name" \
        --qemu-args "-trace enable=virtio_shmem_arena_map,file=$work/$name.trace" \
        --env DAXPAR_OPS="$ops" "${vm_args[@]}" --daemon ours \
        --daemon-args="--thread-pool-size=4 --stats $dargs" \
        "$work/guest.sh" > "$work/$name.out" 2>&1 || rc=$?
    sed "s/^/  $name| /" "$work/$name.out"
    if [ $rc != 0 ]; then
        bad "$name: the guest run failed (status $rc)"
        tail -n 20 "$work/$name/virtiofsd.log" 2>/dev/null || true
        return
    fi
    if (cd "$shared" && sha256sum -c --quiet model.sha256); then
        pass "$name: the host's files equal the fsx models"
    else
        bad "$name: the host's files differ from the fsx models"
    fi
    local w seed
    for w in wa wb; do
        seed=$(sed -n "s/^writer $w: last seed \([0-9][0-9]*\)\$/\1/p" "$work/$name.out")
        if [ -n "$seed" ] && $pattern check "$shared/$w" "$seed" $((8 << 20)); then
            pass "$name: $w on the host holds the writer's last pattern"
        else
            bad "$name: $w on the host is not pattern ${seed:-?}"
        fi
    done
    local queues
    queues=$(awk '$1 == "irq" && $3 > 0' "$work/$name.out" | wc -l)
    if [ "$queues" = 4 ]; then
        pass "$name: all 4 request queues completed requests"
    else
        bad "$name: $queues of 4 request queues completed requests"
    fi
    local remaps nr=$((window / range))
    remaps=$(awk '
        /virtio_shmem_arena_map / {
            for (i = 1; i < NF; i++) {
                if ($i == "offset") { off = $(i + 1) }
                if ($i == "fd_offset") { foff = $(i + 1) }
            }
            if ((off in last) && last[off] != foff) { remaps++ }
            last[off] = foff
        }
        END { print remaps + 0 }' "$work/$name.trace")
    if [ "$remaps" -gt "$nr" ]; then
        pass "$name: $remaps window ranges remapped (> $nr ranges)"
    else
        bad "$name: $remaps remaps for a window of $nr ranges"
    fi
    grep 'stats: \(SETUPMAPPING\|REMOVEMAPPING\|removed range\)' \
        "$work/$name/virtiofsd.log" | sed "s/^/  $name| /" || true
}
run plain ""
run delay "--dax-unmap-delay=20"
if grep -q 'stats: removed range kept until [a-z ]*: [1-9]' "$work/delay/virtiofsd.log"; then
    pass "delay: the daemon kept removed ranges mapped"
else
    bad "delay: no removed range was kept mapped (--dax-unmap-delay unused)"
fi
finish

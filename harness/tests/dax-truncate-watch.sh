#!/usr/bin/env bash
# DAX and host-side truncation, with our virtiofsd's --watch-truncate.
# The guest reads a 4 MiB file through a DAX mmap, every byte of it, over
# and over; a host program truncates the file to nothing.
#  - plain: without the option, QEMU must catch SIGBUS for the guest's
#    accesses past the new end (it logs and traces that it did): the
#    test reaches the case the option is for;
#  - watch: with it, the daemon unmaps the ranges first and QEMU must
#    never get there.  The reader is stopped while the host truncates and
#    for a second after: inotify reports a truncate only once it is done,
#    so a reader touching the pages meanwhile faults whatever we do;
#  - watch-hot: the same with the reader never stopped, to measure that
#    window: how often QEMU still caught a SIGBUS is reported, not judged.
# Every run: the guest survives, reads zeros where the file was (or gets
# SIGBUS itself), the mount stays usable; with the option, the file
# written anew by the host, then refilled by the guest, reads back right
# through the guest's DAX ranges (the daemon mapped them back).
# Extra arguments go to harness/vm.py; the --timeout among them is for the
# three runs.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
split_timeout 3 "$@"
# KEEP=1 keeps the guest outputs and logs in $work for a look afterwards

guest_script "$work/guest.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt dax=always
dax_active /mnt || fail "dax=always requested, DAX not active"
mmapio survey /mnt/victim.bin 12 > /tmp/survey.out 2>&1 &
survey=$!
sleep 3
if [ -e /mnt/hot ]; then
    host_step /mnt
else
    kill -STOP $survey
    host_step /mnt
    sleep 1
    kill -CONT $survey
fi
wait $survey || fail "mmapio survey: $(cat /tmp/survey.out)"
cat /tmp/survey.out
echo "guest size after truncate: $(stat -c %s /mnt/victim.bin)"
# The host writes the file anew (mmapio's pattern, seed 9) and the guest
# reads it through the ranges it has kept: they must map the file again.
touch /mnt/regrow1
i=0
while [ ! -e /mnt/regrow2 ]; do
    i=$((i + 1)); [ $i -gt 600 ] && fail "the host never wrote the file anew"
    sleep 0.1
done
sleep 2     # the attributes the guest holds expire (--cache=auto: 1 s)
if mmapio check /mnt/victim.bin 9 > /tmp/regrow.out 2>&1; then
    echo "regrow: ok"
else
    echo "regrow: FAILED: $(tr '\n' ' ' < /tmp/regrow.out)"
fi
# The same file, refilled and read through mmap again: the guest reuses
# its DAX ranges, which must map the file again.
if mmapio fill /mnt/victim.bin $((4 << 20)) 7 > /tmp/remap.out 2>&1 &&
   mmapio check /mnt/victim.bin 7 >> /tmp/remap.out 2>&1; then
    echo "remap: ok"
else
    echo "remap: FAILED: $(tr '\n' ' ' < /tmp/remap.out)"
fi
# And the mount still serves other files
echo fresh > /mnt/fresh.txt && [ "$(cat /mnt/fresh.txt)" = fresh ] ||
    fail "the mount is no longer usable"
pass "guest kept reading a file truncated on the host"
umount /mnt || fail umount
GUEST

# Step one: the truncate.  Step two, in the background until the guest
# asks for it: the file written anew, without truncating it again.
host_truncate() {
    truncate -s 0 "$shared/victim.bin"
    (
        for _ in $(seq 1 3000); do
            if [ -e "$shared/regrow1" ]; then
                python3 -c '
import sys
n = 4 << 20
data = bytes((i * 31 + 9 + (i >> 12)) & 255 for i in range(n))
with open(sys.argv[1], "r+b") as f:
    f.write(data)
' "$shared/victim.bin"
                touch "$shared/regrow2"
                exit 0
            fi
            sleep 0.1
        done
    ) &
    echo $! > "$shared.regrow.pid"
}

# run NAME DAEMON-ARGS VM-ARGS...: one guest run; its guest output goes
# to $work/NAME.out, the logs to $work/NAME/
run() {
    local name=$1 dargs=$2 rc=0
    shift 2
    shared=$work/$name.share
    mkdir -p "$shared"
    head -c $((4 << 20)) /dev/urandom > "$shared/victim.bin"
    case $name in *-hot) touch "$shared/hot" ;; esac
    run_vm_with_host_step "$shared" host_truncate --daemon ours \
        --daemon-args="$dargs" --cache-size 16M --log-dir "$work/$name" \
        --qemu-args "-trace virtio_shmem_arena_sigbus" \
        "$@" "$work/guest.sh" > "$work/$name.out" || rc=$?
    if [ -e "$shared.regrow.pid" ]; then
        kill "$(cat "$shared.regrow.pid")" 2>/dev/null || true
    fi
    sed "s/^/  $name| /" "$work/$name.out"
    if [ $rc -ne 0 ]; then
        on_fail "tail -n 20 '$work/$name/qemu.log' '$work/$name/virtiofsd.log'"
        fail "the $name run failed (status $rc)"
    fi
}

# Pages QEMU's SIGBUS fixup filled with zeros (its trace counts them)
sigbus_pages() {
    sed -n 's/.*virtio_shmem_arena_sigbus [0-9]* fix-ups: \([0-9]*\) pages.*/\1/p' \
        "$work/$1/qemu.log" | awk '{ n += $1 } END { print n + 0 }'
}

# ... and its warning, once per run
sigbus_seen() {
    grep -q "accessed pages past the end of files" "$work/$1/qemu.log" ||
        [ "$(sigbus_pages "$1")" -gt 0 ]
}

# A number from the survey's line ("survey FILE: passes N pages N ..."),
# empty when it is not there
field() {
    sed -n "s/^survey .* $2 \([0-9][0-9]*\)\( .*\)\{0,1\}\$/\1/p" \
        "$work/$1.out" | head -n1
}

run plain "" "${vm_args[@]}"
run watch "--watch-truncate --log-level=debug" "${vm_args[@]}"
run watch-hot "--watch-truncate" "${vm_args[@]}"

# holds WHAT COMMAND: ok or FAIL by the status of the shell command
holds() {
    if eval "$2"; then
        pass "$1"
    else
        bad "$1"
    fi
}

holds "without --watch-truncate, QEMU took the SIGBUS path" "sigbus_seen plain"
holds "with --watch-truncate, QEMU never took the SIGBUS path" \
      "! sigbus_seen watch"
holds "the daemon dropped the ranges past the new end" \
      "grep -q 'DAX: file shrank' '$work/watch/virtiofsd.log'"
holds "the daemon mapped them back once the file grew again" \
      "grep -q 'DAX: file grew' '$work/watch/virtiofsd.log'"
for r in plain watch watch-hot; do
    zeros=$(field $r zero-pages-last-pass)
    pages=$(field $r pages)
    bus=$(field $r sigbus)
    echo "note: $r: the guest's last pass read $zeros of $pages pages as" \
         "zeros; SIGBUS in the guest: $bus"
    # A survey format that changed must not make both sides empty
    holds "$r: the survey reported its counts" \
          "[ -n '$zeros' ] && [ -n '$bus' ] && [ '${pages:-0}' -gt 0 ]"
    # Zeros everywhere, or the guest's own SIGBUS (it learnt the new size)
    holds "$r: the guest read zeros past the new end or got SIGBUS" \
          "[ -n '$pages' ] && [ '$zeros' = '$pages' ] || [ '$bus' = 1 ]"
done
for r in watch watch-hot; do
    holds "$r: the file refilled after the truncate reads back" \
          "grep -q '^remap: ok' '$work/$r.out'"
done
for r in watch watch-hot; do
    holds "$r: the file written anew on the host reads back" \
          "grep -q '^regrow: ok' '$work/$r.out'"
done
echo "note: without the option, the file written anew gave:" \
     "$(grep '^regrow:' "$work/plain.out")"
echo "note: without the option, the file refilled by the guest gave:" \
     "$(grep '^remap:' "$work/plain.out")"
for r in plain watch watch-hot; do
    echo "note: $r: QEMU filled $(sigbus_pages $r) pages after SIGBUS"
done

finish "--watch-truncate kept QEMU out of its SIGBUS path"

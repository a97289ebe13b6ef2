#!/usr/bin/env bash
# Live migration of a guest whose DAX window is in use: two QEMUs, two
# daemons on one directory, migrated by harness/migrate.py.  The window
# holds host files, not guest RAM: the daemon carries its mapping table
# in its state (VHOST_USER_PROTOCOL_F_SHMEM_MIGRATE) and the destination
# daemon maps every range again before the destination QEMU runs the
# guest.
#
#   migrate-dax.sh [migrate.py/vm.py options] CASE
#
# CASE:
#   mmap     a guest process keeps a file mapped (MAP_SHARED) across the
#            migration, having written a pattern through the mapping
#            (which the host checks before migrating); a child process
#            reads the mapping all along and fails on any other byte, so
#            a range that reads as zeros after the guest resumes fails
#            the run.  Afterwards the process reads the pattern back and
#            writes another one through the same mapping, which the host
#            then finds in the file.  QEMU's traces show the order: the
#            source saved the back-end state with N live mappings, and
#            on the destination N mappings were made while the state
#            loaded, before the guest ran (runstate_set to running).
#   fsx      fsx runs through a 32 MiB window (the guest keeps
#            reclaiming ranges) and the guest migrates in the middle of
#            it: zero mismatches, and the host's files equal fsx's model.
#   refused  the back-end does not offer the feature (the test variable
#            VIRTIOFSD_TEST_NO_SHMEM_MIGRATE): QEMU refuses the migration
#            with its blocker's message, and the guest goes on on the
#            source, its mapping intact.
#   dest-fails  the destination daemon cannot restore the mapped file
#            (the host moved it out of the shared directory, and the
#            destination runs with --migration-on-error=abort): it fails
#            CHECK_DEVICE_STATE, the migration fails and the guest goes
#            on on the source, its mapping intact and read all along.
#   size-differs  the destination QEMU (and its daemon) has a 128 MiB
#            window, the source 64 MiB: the window's length is in the
#            shared memory capability of the PCI config space, which the
#            destination compares before it loads anything, so it
#            refuses the state before its daemon sees the table (no map),
#            and the guest goes on on the source, its mapping intact.
#   full     a 1 GiB window mapped by 1 GiB of files: prints the
#            migration's downtime, RAM and state sizes (docs).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
pick_case "migrate-dax.sh [options] CASE" "mmap|fsx|refused|dest-fails|size-differs|full" "$@"
set -- "${args[@]}"
shared=$work/shared
logs=$work/logs
mkdir -p "$shared" "$logs"
size=$((8 << 20))
cache=64M
expect=completed
extra=()
traces="-msg timestamp=on -trace virtio_shmem_arena_map -trace vuf_migration_*"
traces="$traces -trace runstate_set -trace vhost_user_backend_serve_while_waiting"

case $case_ in
mmap)
    guest_script "$work/guest.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt dax=always
dax_active /mnt || fail "dax=always requested, DAX not active"
mmapio migrate /mnt/mapped 8388608 7 9 /mnt || fail "the mapping across the migration"
mmapio check /mnt/mapped 9 || fail "read(2) after the migration"
cat /mnt/.migrate-done > /mnt/post.txt
umount /mnt || fail umount
pass "mapped across the migration"
GUEST
    extra=(--host-step "python3 '$top/harness/tests/pattern.py' check \"\$SHARED/mapped\" 7 $size")
    ;;
refused|dest-fails|size-differs)
    guest_script "$work/guest.sh" <<GUEST
mount_virtiofs "\$VFS_TAG" /mnt dax=always
dax_active /mnt || fail "dax=always requested, DAX not active"
mmapio migrate /mnt/mapped 8388608 7 9 /mnt || fail "the mapping across the $case_ migration"
cat /mnt/.migrate-done > /mnt/post.txt
umount /mnt || fail umount
pass "the guest went on on the source"
GUEST
    expect=failed
    if [ $case_ = refused ]; then
        export VIRTIOFSD_TEST_NO_SHMEM_MIGRATE=1
        extra=(--expect-error "does not carry the window's mappings")
    elif [ $case_ = size-differs ]; then
        extra=(--dest-cache-size 128M
               --expect-error "get_pci_config_device: Bad config data")
    else
        extra=(--dest-daemon-args=--migration-on-error=abort
               --host-step 'mv "$SHARED/mapped" "$SHARED/../mapped-away"')
    fi
    ;;
fsx)
    cache=32M
    guest_script "$work/guest.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt dax=always
dax_active /mnt || fail "dax=always requested, DAX not active"
mkdir /tmp/model
fsx -n "$FSX_OPS" -s "$FSX_SEED" -c 5000 -w 120 -o /tmp/model \
    /mnt/f0 /mnt/f1 /mnt/f2 > /tmp/fsx.out 2>&1 &
fsx_pid=$!
# In the middle of it
sleep "$FSX_BEFORE"
kill -0 $fsx_pid 2>/dev/null || { cat /tmp/fsx.out; fail "fsx ended before the migration"; }
touch /mnt/.migrate-ready
while [ ! -e /mnt/.migrate-done ]; do sleep 0.1; done
echo "migration $(cat /mnt/.migrate-done), fsx still running: $(kill -0 $fsx_pid 2>/dev/null && echo yes || echo no)"
wait $fsx_pid || { cat /tmp/fsx.out; fail "$(grep -m1 -e "fsx: FAIL" -e MISMATCH /tmp/fsx.out)"; }
cat /tmp/fsx.out
(cd /tmp/model && sha256sum f0 f1 f2) > /mnt/model.sha256
cat /mnt/.migrate-done > /mnt/post.txt
umount /mnt || fail umount
pass "fsx across the migration"
GUEST
    extra=(--env "FSX_OPS=${FSX_OPS:-20000}" --env "FSX_SEED=${FSX_SEED:-1}"
           --env "FSX_BEFORE=${FSX_BEFORE:-20}")
    ;;
full)
    cache=1G
    for i in 0 1 2 3; do
        head -c $((256 << 20)) /dev/urandom > "$shared/big$i"
    done
    guest_script "$work/guest.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt dax=always
dax_active /mnt || fail "dax=always requested, DAX not active"
for i in 0 1 2 3; do cat /mnt/big$i > /dev/null || fail "read big$i"; done
touch /mnt/.migrate-ready
while [ ! -e /mnt/.migrate-done ]; do sleep 0.1; done
for i in 0 1 2 3; do cat /mnt/big$i | sha256sum > /mnt/big$i.sum; done
cat /mnt/.migrate-done > /mnt/post.txt
umount /mnt || fail umount
pass "1 GiB of files through the window across the migration"
GUEST
    extra=(--mem 2G --stats-file "$work/stats.json")
    ;;
*) echo "unknown case $case_" >&2; exit 2 ;;
esac

rc=0
migrate_vm --shared "$shared" --cache-size "$cache" \
    --log-dir "$logs" --qemu-args "$traces" --expect-migration "$expect" \
    "${extra[@]}" "$@" "$work/guest.sh" || rc=$?
if [ $rc != 0 ]; then
    for f in qemu-src qemu-dst virtiofsd-src virtiofsd-dst; do
        echo "--- $f.log"; grep -v -e virtio_shmem_arena_map "$logs/$f.log" | tail -n 15
    done
    fail "migrate.py ended with status $rc"
fi
[ "$(cat "$shared/post.txt")" = "$expect" ] ||
    fail "post.txt on the host: $(cat "$shared/post.txt")"
pass "the guest ran to its end on the $([ $expect = completed ] && echo destination || echo source)"

# "N" of the source's vuf_migration_saved; the destination's maps before
# its vuf_migration_loaded, the N that one says, and whether the guest
# ran only after it
saved_maps() {
    sed -n 's/.*vuf_migration_saved .* saved with \([0-9]*\) live.*/\1/p' "$logs/qemu-src.log"
}
dest_order() {
    awk '
        /vuf_migration_loaded / {
            for (i = 1; i < NF; i++) if ($i == "loaded,") said = $(i + 1)
            loaded = 1; maps_at_load = maps
        }
        /virtio_shmem_arena_map / { maps++ }
        # SHMEM_MAP (9) served while QEMU waited for a reply, i.e. for
        # the answer to CHECK_DEVICE_STATE: nothing else is sent then
        /vhost_user_backend_serve_while_waiting request 9$/ && !loaded { served++ }
        /runstate_set / && / new_state [0-9]* \(running\)/ {
            if (!ran) { ran = 1; ran_after_load = loaded }
        }
        END { printf "%d %d %d %d %d\n", maps_at_load, said, ran, ran_after_load, served }
    ' "$logs/qemu-dst.log"
}

# After a failed migration: the host file FILE holds what the guest
# wrote through its mapping on the source, which had saved its state
source_went_on() {
    python3 "$top/harness/tests/pattern.py" check "$1" 9 $size ||
        fail "the host does not see what the guest wrote after the failure"
    pass "the host sees what the guest wrote on the source after the failure"
    grep -q "vuf_migration_saved" "$logs/qemu-src.log" ||
        fail "the source never saved its back-end state"
}

case $case_ in
mmap)
    python3 "$top/harness/tests/pattern.py" check "$shared/mapped" 9 $size ||
        fail "the host does not see what the guest wrote after the migration"
    pass "the host sees the pattern the guest wrote through the mapping after the migration"
    ;;
dest-fails)
    source_went_on "$work/mapped-away"
    grep -m1 "migration: inode [0-9]*: the source found no path to it" "$logs/virtiofsd-dst.log" ||
        fail "the destination daemon did not refuse the mapped file"
    ! grep -q "vuf_migration_loaded" "$logs/qemu-dst.log" ||
        fail "the destination loaded the state"
    pass "the source saved, the destination refused the state"
    exit 0
    ;;
size-differs)
    source_went_on "$shared/mapped"
    ! grep -q "virtio_shmem_arena_map" "$logs/qemu-dst.log" ||
        fail "the destination mapped part of the table"
    ! grep -q "migration:" "$logs/virtiofsd-dst.log" ||
        fail "the destination daemon received state"
    # The length's top byte: 0x04 (64 MiB) came, 0x08 (128 MiB) is here
    grep -m1 "Bad config data: i=0x[0-9a-f]* read: 4 device: 8 " "$logs/qemu-dst.log" ||
        fail "the refusal is not for the window's length"
    pass "the destination refused the window's length before its back-end saw any state"
    exit 0
    ;;
refused)
    python3 "$top/harness/tests/pattern.py" check "$shared/mapped" 9 $size ||
        fail "the host does not see what the guest wrote after the refusal"
    pass "the host sees what the guest wrote on the source after the refusal"
    ! grep -q "vuf_migration_saved" "$logs/qemu-src.log" ||
        fail "the source saved a back-end state"
    pass "no back-end state was saved"
    exit 0
    ;;
fsx)
    (cd "$shared" && sha256sum -c --quiet model.sha256) ||
        fail "the host's files differ from fsx's model"
    pass "the host's files equal fsx's model"
    ;;
full)
    for i in 0 1 2 3; do
        [ "$(sha256sum < "$shared/big$i")" = "$(cat "$shared/big$i.sum")" ] ||
            fail "big$i reads differently in the guest"
    done
    pass "the guest read the 1 GiB of files unchanged after the migration"
    ;;
esac

saved=$(saved_maps)
read -r at_load said ran after served < <(dest_order)
echo "source: back-end state saved with ${saved:-?} live window mappings"
echo "destination: $at_load mappings made before the state was loaded" \
     "(QEMU says $said, $served served while it waited for the back-end)," \
     "guest started: $ran, after the load: $after"
[ -n "$saved" ] && [ "$saved" -gt 0 ] ||
    fail "the source had no live mappings to carry"
[ "$at_load" = "$saved" ] && [ "$said" = "$saved" ] && [ "$served" = "$saved" ] ||
    fail "the destination re-established $at_load/$said of $saved mappings"
[ "$ran" = 1 ] && [ "$after" = 1 ] ||
    fail "the destination ran the guest before its mappings were back"
pass "all $saved mappings were back before the destination ran the guest"
grep -h "DAX mappings saved\|state saved\|state restored" "$logs/virtiofsd-src.log" "$logs/virtiofsd-dst.log" || true
if [ "$case_" = full ]; then
    cat "$work/stats.json"; echo
    # From the first mapping of the load to the end of the load
    awk '/vuf_migration_loaded / { split($1, a, "@"); done = a[2] + 0; exit }
         /virtio_shmem_arena_map / { split($1, a, "@"); if (!first) first = a[2] + 0 }
         END { printf "destination: mappings re-established in %.1f ms\n", (done - first) * 1000 }' \
        "$logs/qemu-dst.log"
fi

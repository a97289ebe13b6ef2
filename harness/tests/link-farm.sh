#!/usr/bin/env bash
# A hard-link farm, as ostree and container stores make them, walked and
# read by the guest while the host adds and removes links: the guest must
# see no ESTALE, nor any error but the host's own ENOENT for a link the
# host removed between the guest's listing and its read.
#
# OBJECTS (default 8) files of a few KiB, each with LINKS (1000) links
# o<obj>-<n> spread over DIRS (100) directories of farm/.  The guest
# lists the farm with find and reads every link it found with md5sum (two
# readers, one a vCPU), PASSES (2) times, checking each read against the
# object's checksum.  A host process makes 1000 more links c<obj>-<seq>
# among them before the guest starts, then adds and removes such links
# (never an o link: no object loses its last link) from the guest's
# walk-start mark on the share to its walk-end, and counts what it did
# in between.  The guest reads many c links that live on, and meets the
# host's ENOENT for many that went between its listing and its read.
# The test fails unless at least CHURN_MIN (100) links were added and as
# many removed during the walk, the guest read some c links, and its
# listings differ from pass to pass: a run where the churn missed the
# walk proves nothing.  NO_CHURN=1 leaves the
# churn out (and fails on that).
#
# Cases (the daemon and how it holds inodes):
#   ours           our virtiofsd with its defaults (inodes by file handle
#                  through the broker, idle fds kept)
#   ours-handles   --inode-file-handles=mandatory --inode-fd-cache=0:
#                  every request on an inode nobody uses opens it again
#                  from its handle (the daemon's count must show it)
#   rust           the Rust virtiofsd with its defaults (O_PATH fds)
#   rust-handles   the Rust virtiofsd --inode-file-handles=mandatory
# Extra arguments go to harness/vm.py (mk/check.py gives --timeout).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
pick_case "$0 [--timeout N] ours|ours-handles|rust|rust-handles [VM-ARGS]" \
    "ours|ours-handles|rust|rust-handles" "$@"
OBJECTS=${OBJECTS:-8}
LINKS=${LINKS:-1000}
DIRS=${DIRS:-100}
PASSES=${PASSES:-2}
CHURN_MIN=${CHURN_MIN:-100}
NO_CHURN=${NO_CHURN:-0}
case $case_ in
ours) daemon=(--daemon ours) ;;
ours-handles) daemon=(--daemon ours
    "--daemon-args=--inode-file-handles=mandatory --inode-fd-cache=0") ;;
rust) daemon=(--daemon rust) ;;
rust-handles) daemon=(--daemon rust
    --daemon-args=--inode-file-handles=mandatory) ;;
esac
churn_pid=
on_exit '[ -z "$churn_pid" ] || { kill "$churn_pid"; wait "$churn_pid"; } 2>/dev/null || true'
shared=$work/share
mkdir -p "$shared" "$work/logs"

# The farm and each object's checksum, made on the host
python3 - "$shared" "$OBJECTS" "$LINKS" "$DIRS" <<'PY'
import hashlib, os, sys
shared, objects, links, dirs = sys.argv[1], *map(int, sys.argv[2:])
farm = os.path.join(shared, "farm")
for d in range(dirs):
    os.makedirs(os.path.join(farm, f"d{d:03d}"))
with open(os.path.join(shared, "expected"), "w") as exp:
    for o in range(objects):
        # Sizes differ, so that a read of another object's data shows
        data = (f"object {o}\n".encode() * 4000)[:3000 + 517 * o]
        first = os.path.join(farm, f"d{0:03d}", f"o{o}-0")
        with open(first, "wb") as f:
            f.write(data)
        for n in range(1, links):
            os.link(first, os.path.join(farm, f"d{n % dirs:03d}", f"o{o}-{n}"))
        exp.write(f"{hashlib.md5(data).hexdigest()} {o}\n")
PY

# The churn, in the background: it makes its first links, says it is
# ready, and waits for walk-start
churn_out=$work/churn.out
python3 - "$shared" "$OBJECTS" "$DIRS" "$churn_out" "$NO_CHURN" "$work" \
    "$LINKS" <<'PY' &
import os, random, sys, time
shared, objects, dirs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
links = int(sys.argv[7])
out, no_churn = sys.argv[4], sys.argv[5] == "1"
stop = os.path.join(sys.argv[6], "stop")
farm = os.path.join(shared, "farm")
start = os.path.join(shared, "walk-start")
end = os.path.join(shared, "walk-end")
rnd = random.Random(42)
deadline = time.time() + 900
def stopped():
    return os.path.exists(stop) or time.time() > deadline
def link(seq):
    o, n = rnd.randrange(objects), rnd.randrange(links)
    src = os.path.join(farm, f"d{n % dirs:03d}", f"o{o}-{n}")
    dst = os.path.join(farm, f"d{rnd.randrange(dirs):03d}", f"c{o}-{seq}")
    os.link(src, dst)
    return dst
# A thousand of ours from the start, so that many live from the guest's
# listing to its read, and many do not
pool = [link(seq) for seq in range(1000)]
seq, added, removed, errors = len(pool), 0, 0, 0
open(os.path.join(sys.argv[6], "ready"), "w").close()
while not os.path.exists(start) and not stopped():
    time.sleep(0.02)
t0 = time.time()
while os.path.exists(start) and not os.path.exists(end) and not stopped():
    if no_churn:
        time.sleep(0.05)
        continue
    # Keep 500 to 1500 of ours about, adding and removing by turns
    add = len(pool) < 500 or (len(pool) < 1500 and rnd.random() < 0.5)
    try:
        if add:
            pool.append(link(seq))
            seq += 1
            added += 1
        else:
            os.unlink(pool.pop(rnd.randrange(len(pool))))
            removed += 1
    except OSError as e:
        errors += 1
        print(f"churn: {e}", file=sys.stderr)
    time.sleep(0.01)
ended = os.path.exists(end)
with open(out, "w") as f:
    f.write(f"{added} {removed} {errors} {time.time() - t0:.1f} "
            f"{int(ended)} {len(pool)}\n")
PY
churn_pid=$!
while [ ! -e "$work/ready" ]; do
    kill -0 "$churn_pid" 2>/dev/null || fail "the churn did not start"
    sleep 0.1
done

guest_script "$work/guest.sh" <<'GUEST'
mount_virtiofs "$VFS_TAG" /mnt
[ -s /mnt/expected ] || fail "no checksums on the share"
now() { awk '{ print $1 }' /proc/uptime; }
touch /mnt/walk-start || fail "walk-start"
t0=$(now)
pass=0 reads=0 churn_seen=0 gone=0 stale=0 other=0 appeared=0 went=0
while [ $pass -lt "$PASSES" ]; do
    pass=$((pass + 1))
    ts=$(now)
    find /mnt/farm -type f > /tmp/list 2> /tmp/errs.f
    tl=$(now)
    # Two readers, one a vCPU, each its own half of the list
    awk '{ print > ("/tmp/list." NR % 2) }' /tmp/list
    # Through a pipe: busybox's xargs runs md5sum in a child that seeks a
    # shared regular-file stdin back as it exits, so names come twice
    for r in 0 1; do
        cat /tmp/list.$r | xargs md5sum > /tmp/sums.$r 2> /tmp/errs.$r &
    done
    wait
    cat /tmp/sums.0 /tmp/sums.1 > /tmp/sums
    cat /tmp/errs.f /tmp/errs.0 /tmp/errs.1 > /tmp/errs
    # Each read against its object's checksum; each error sorted: the
    # host's ENOENT for one of its own links (c...) is the only one
    # allowed, and the first others are shown
    set -- $(awk -v sums=/mnt/expected '
        BEGIN { while ((getline l < sums) > 0) { split(l, f, " "); sum[f[2]] = f[1] } }
        FILENAME == "/tmp/sums" {
            n = split($2, p, "/"); name = p[n]
            obj = substr(name, 2); sub(/-.*/, "", obj)
            reads++
            if (substr(name, 1, 1) == "c") { churn++ }
            if (sum[obj] != $1) {
                bad++
                if (bad <= 5) { print "WRONG-DATA:" name > "/dev/stderr" }
            }
            next
        }
        {
            path = $0; sub(/^[a-z0-9]+: /, "", path); sub(/^can.t open ./, "", path)
            sub(/[:'"'"'].*/, "", path)
            n = split(path, p, "/"); name = p[n]
            if ($0 ~ /Stale file handle/) { stale++ }
            else if ($0 ~ /No such file or directory/ && substr(name, 1, 1) == "c") { gone++; next }
            else { other++ }
            if (stale + other <= 5) { print "ERROR:" $0 > "/dev/stderr" }
        }
        END { printf "%d %d %d %d %d %d\n", reads, churn, gone, stale, other, bad }
    ' /tmp/sums /tmp/errs)
    listed=$(wc -l < /tmp/list)
    echo "pass $pass: listed $listed, read $1 (of them $2 host-added links)," \
         "$3 host-removed before the read (ENOENT), $4 ESTALE, $5 other" \
         "errors, $6 wrong data," \
         "$(awk -v a="$(now)" -v b="$ts" -v c="$tl" 'BEGIN { printf "%.1f s (find %.1f s)", a - b, c - b }')"
    # The host's links this listing has and the last one had not, and
    # the other way round: the churn seen from the guest
    grep '/c[0-9]*-[0-9]*$' /tmp/list | sort > /tmp/c.$pass
    if [ $pass -gt 1 ]; then
        set -- "$@" $(awk 'NR == FNR { old[$0] = 1; next }
                           { if ($0 in old) { delete old[$0] } else { born++ } }
                           END { n = 0; for (k in old) { n++ }; print born + 0, n }' \
                      /tmp/c.$((pass - 1)) /tmp/c.$pass)
        echo "  since pass $((pass - 1)): $7 host links appeared, $8 went"
        appeared=$((appeared + $7)) went=$((went + $8))
    fi
    reads=$((reads + $1)) churn_seen=$((churn_seen + $2)) gone=$((gone + $3))
    stale=$((stale + $4)) other=$((other + $5 + $6))
done
touch /mnt/walk-end || fail "walk-end"
echo "walk: $PASSES passes, $reads reads, $churn_seen of host-added links," \
     "$gone ENOENT, $stale ESTALE, $other other errors or wrong data," \
     "$(awk -v a="$(now)" -v b="$t0" 'BEGIN { printf "%.1f", a - b }') s"
[ $stale = 0 ] || fail "$stale reads or lookups got ESTALE"
[ $other = 0 ] || fail "$other reads or lookups failed, or read wrong data"
[ $churn_seen -gt 0 ] || fail "the walk never read a link the host added"
if [ "$PASSES" -ge 2 ] && { [ $appeared = 0 ] || [ $went = 0 ]; }; then
    fail "the host's links did not change from pass to pass"
fi
pass "hard-link farm walked, no error but the host's ENOENT"
GUEST

rc=0
vm --quiet --shared "$shared" "${daemon[@]}" \
    --log-dir "$work/logs" --env PASSES="$PASSES" "${args[@]}" \
    "$work/guest.sh" > "$work/out" || rc=$?
cat "$work/out"
# The guest is gone: the churn stops, walk-end seen or not
touch "$work/stop"
wait "$churn_pid" || true
churn_pid=
if [ $rc != 0 ] || ! grep -q "^ok: hard-link farm" "$work/out"; then
    bad "$case_: the guest's walk failed (status $rc)"
    tail -n 5 "$work/logs/virtiofsd.log" 2>/dev/null || true
fi
# The churn overlapped the walk: it counted only between the marks
[ -s "$churn_out" ] || fail "$case_: the host churn never reported"
read -r added removed cerr secs ended left < "$churn_out"
echo "host churn during the walk: $added links added, $removed removed," \
     "$cerr failed, over $secs s ($left left)"
if [ "$ended" != 1 ] || [ "$added" -lt "$CHURN_MIN" ] ||
   [ "$removed" -lt "$CHURN_MIN" ] || [ "$cerr" != 0 ]; then
    bad "$case_: the host churn did not overlap the walk" \
        "(at least $CHURN_MIN links added and $CHURN_MIN removed, no error)"
fi
case $case_ in
ours*)
    # The defaults hold inodes by handle too, with idle fds
    made=$(sed -n 's/.*file handles: \([0-9]*\) inodes held by handle.*/\1/p' \
           "$work/logs/virtiofsd.log" | tail -n 1)
    if [ "${made:-0}" -lt "$OBJECTS" ]; then
        bad "$case_: our virtiofsd held ${made:-no} inodes by handle"
    fi ;;
esac
if [ $case_ = ours-handles ]; then
    # Every request on an unused inode opened it from its handle: as
    # many opens as the guest's reads at least
    reads=$(sed -n 's/^walk: .* passes, \([0-9]*\) reads.*/\1/p' "$work/out")
    opened=$(sed -n 's/.*file handles: [0-9]* inodes held by handle, \([0-9]*\) opened.*/\1/p' \
             "$work/logs/virtiofsd.log" | tail -n 1)
    echo "our virtiofsd opened inodes from their handles $opened times"
    if [ -z "$opened" ] || [ -z "$reads" ] || [ "$opened" -lt "$reads" ]; then
        bad "$case_: ${opened:-no} opens by handle for ${reads:-no} reads"
    fi
fi
finish "$case_: hard-link farm under host churn"

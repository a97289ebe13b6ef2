#!/usr/bin/env bash
# Seeds for fuzz-request.c captured from a real guest, next to the ones
# gen-corpus.py builds by hand: Debian's 6.12 kernel (harness/vm.py) runs
# small workloads on a virtio-fs share served by our virtiofsd, which
# records every request it processes (VIRTIOFSD_CAPTURE, see capture.c).
#
#   tools/virtiofsd/fuzz/capture-corpus.sh [OUTDIR]
#
# replaces OUTDIR (default: captured/ next to this script) with the seeds.
# Needs make qemu guest.  Under TCG it takes a few minutes.
#
# Each workload gets a guest and a daemon of its own: the daemon numbers
# nodes and file handles from the start of its life, the fuzzer from the
# start of each input, so one session per daemon keeps the numbers the
# guest used valid in the seeds.  The daemon runs with the options the
# fuzzer gives its sessions (xattrs, POSIX ACLs, locks, submounts), and
# the share starts empty, as the workloads create all they touch under
# names the fuzzer's own scratch files do not use.
#
# A session longer than the fuzzer takes in one input (256 requests, and
# mk/fuzz.sh's -max_len of 16 KiB) is cut into several inputs; those after
# the first start without the nodes the guest had looked up, which still
# makes well-formed requests for the decoder.  Requests the fuzzer's
# records cannot hold (over 64 KiB) are left out by the daemon, so the
# workloads write little at a time.  To keep the corpus small, at most
# $PER_WORKLOAD inputs of a workload are kept: the first, then others
# spread over the session.  Identical inputs are kept once.
set -euo pipefail
top=$(cd "$(dirname "$0")/../../.." && pwd)
out=${1:-$top/tools/virtiofsd/fuzz/captured}
PER_WORKLOAD=4
work=$(mktemp -d /tmp/vfsd-capture.XXXXXX)
trap 'rm -rf "$work"' EXIT

# workload NAME MOUNT-OPTIONS COMMAND...: one guest session, recorded in
# $work/NAME.cap; the commands run in the guest, the share mounted on $M
workload() {
    local name=$1 opts=$2
    shift 2
    {
        echo '. /lib/vfsdax.sh'
        echo "M=/mnt; mount_virtiofs \"\$VFS_TAG\" \$M $opts"
        printf '%s\n' "$@"
        echo 'cd /; umount $M || fail umount'
        echo 'pass "workload done"'
    } > "$work/$name.sh"
    mkdir "$work/$name.share"
    echo "capture: $name"
    VIRTIOFSD_CAPTURE=$work/$name.cap python3 "$top/harness/vm.py" --quiet \
        --daemon ours --cache-size 64M --timeout 600 \
        --shared "$work/$name.share" \
        --daemon-args="--xattr --posix-acl --flock --posix-lock --announce-submounts" \
        "$work/$name.sh" > "$work/$name.out" 2>&1 ||
        { cat "$work/$name.out"; echo "capture: $name failed" >&2; exit 1; }
}

# Names, modes, links, xattrs and ACLs, directories, renames
workload meta "" \
    'mkdir $M/w $M/w/d && cd $M/w' \
    'echo hello > a && cat a && echo more >> a && stat a' \
    'ln a hardlink && ln -s a symlink && readlink symlink && cat symlink' \
    'chmod 640 a && chown 1000:1000 a && touch -d "2020-01-01 00:00" a' \
    'acltool setacl a access u::6,u:1000:6,g::4,m::6,o::0; acltool getacl a access; acltool create 022 644 c2' \
    'mv a d/b && mv d/b d/c && ls -la . d' \
    'mknod d/fifo p && mkdir -p d/e/f && rmdir d/e/f' \
    'truncate -s 10000 d/c && truncate -s 10 d/c && cat d/c' \
    'find . -type f | xargs ls -l && df $M' \
    'rm -r d && rm hardlink symlink c2 && cd .. && rmdir w'

# The scripted POSIX exercise of posix.sh
workload posix "" 'mkdir $M/t && posixops $M/t > /dev/null'

# Reads and writes through FUSE: small random operations without DAX
workload rw "dax=never" \
    'mkdir $M/r && fsx -n 200 -s 3 -l 65536 -m 4096 -c 50 $M/r/x $M/r/y'

# The DAX window: mappings set up, upgraded, reclaimed and removed
workload dax "dax=always" \
    'mkdir $M/m && mmapio fill $M/m/p 4194304 5 && mmapio check $M/m/p 5' \
    'fsx -n 200 -s 4 -l 4194304 -m 4096 -c 50 $M/m/x $M/m/y' \
    'truncate -s 1000 $M/m/p && mmapio check $M/m/p 5; rm -r $M/m'

# The hiprio queue: FORGETs for inodes the guest drops
workload forget "" \
    'mkdir $M/f && for i in $(seq 1 60); do echo $i > $M/f/n$i; done' \
    'ls -l $M/f > /dev/null && echo 2 > /proc/sys/vm/drop_caches' \
    'ls $M/f > /dev/null && rm -r $M/f && echo 3 > /proc/sys/vm/drop_caches'

python3 - "$work" "$out" "$PER_WORKLOAD" <<'EOF'
import hashlib
import os
import shutil
import struct
import sys

work, out, per_workload = sys.argv[1], sys.argv[2], int(sys.argv[3])
FUSE_INIT = 26
# fuzz-request.c: no cache option (auto), writable, POSIX ACLs, DAX
# policy always, a front-end offering SHMEM_REPLACE, a window
CONFIG = 0x40
MAX_INPUT = 16384
MAX_RECORDS = 256


def records(path):
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos + 4 <= len(data):
        length = struct.unpack_from("<H", data, pos)[0]
        rec = data[pos:pos + 4 + length]
        if len(rec) < 4 + length:
            break
        yield rec
        pos += 4 + length


def opcode(rec):
    return struct.unpack_from("<I", rec, 8)[0] if len(rec) >= 12 else None


def inputs(path):
    cur = []
    size = 1
    for rec in records(path):
        full = (size + len(rec) > MAX_INPUT or len(cur) == MAX_RECORDS)
        if cur and (opcode(rec) == FUSE_INIT or full):
            yield bytes([CONFIG]) + b"".join(cur)
            cur, size = [], 1
        cur.append(rec)
        size += len(rec)
    if cur:
        yield bytes([CONFIG]) + b"".join(cur)


if os.path.isdir(out):
    shutil.rmtree(out)
os.makedirs(out)
seen = set()
total = 0
for cap in sorted(f for f in os.listdir(work) if f.endswith(".cap")):
    name = cap[:-4]
    n = 0
    all_inputs = list(inputs(os.path.join(work, cap)))
    step = max(len(all_inputs) / per_workload, 1)
    picked = sorted({int(i * step) for i in range(per_workload)})
    for data in (all_inputs[i] for i in picked if i < len(all_inputs)):
        digest = hashlib.sha1(data).hexdigest()
        if digest in seen:
            continue
        seen.add(digest)
        with open(os.path.join(out, f"{name}-{n:02d}-{digest[:8]}"), "wb") as f:
            f.write(data)
        n += 1
        total += len(data)
    print(f"capture: {name}: {n} of {len(all_inputs)} inputs kept")
print(f"capture: {len(seen)} inputs, {total} bytes in {out}")
EOF

#!/usr/bin/env python3
"""The request streams the load generator's replay mix replays: what a
real guest sends running the tree steps (bench/tree.py), recorded by our
virtiofsd with its replies (VIRTIOFSD_RECORD, tools/virtiofsd/capture.c,
record-format.h).

    bench/replay_stream.py [--small] OUT

boots a guest (harness/vm.py, make qemu guest) on an empty share of
/dev/shm served by our daemon, runs the tree steps there (unpack, find,
ls -lR three times, grep -r, cp -a, rm -rf) and writes the stream to OUT
(xz-compressed if OUT ends in .xz).  The tree is bench/tree.py's (QEMU's
hw, include and docs: about 3,700 entries, 34 MiB, a 170 MB stream), or
with --small the few files of small_tree() (a stream of about 50 KB
compressed): make check replays that one, committed as
bench/loadgen-tree-small.rec.xz, since it runs no guest; make bench
records the full one afresh.  A stream is replayed against an empty
directory of tmpfs, as it was recorded, so that the listings' offsets
agree.
"""

import argparse
import lzma
import os
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tree  # noqa: E402  (the tree steps: their guest script and tree)

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMALL = os.path.join(TOP, "bench", "loadgen-tree-small.rec.xz")
MAGIC = b"VFSDREC1"
RECORD = struct.Struct("<IIQII")    # kind, len, unique, room, flags
REQUEST, REPLY = 1, 2
HIPRIO = 1
# Fixed times: tar x sets them, and the stream carries them
MTIME = 1700000000


def text(name, lines):
    return "".join(f"{name}: line {i:05d} of {lines}, some words to grep "
                   "through\n" for i in range(lines)).encode()


def small_tree(root):
    """A few files and directories of each kind tar x makes: text of a few
    sizes (one past a 128 KiB WRITE), an empty file, modes, a symlink, a
    hard link, nested directories and one of 60 entries (a listing of
    several READDIRPLUS pages)"""
    top = os.path.join(root, "src")
    files = {"README": text("README", 40), "Makefile": text("Makefile", 20),
             "big.c": text("big.c", 4000), "mid.h": text("mid.h", 900),
             "empty": b"", "lib/a.c": text("a.c", 100),
             "lib/b.c": text("b.c", 7), "lib/sub/deep/x.txt": text("x", 3)}
    files.update({f"many/f{i:03d}": text(f"f{i}", 1) for i in range(60)})
    for name, data in files.items():
        path = os.path.join(top, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    os.chmod(os.path.join(top, "Makefile"), 0o755)
    os.chmod(os.path.join(top, "mid.h"), 0o600)
    os.symlink("README", os.path.join(top, "link"))
    os.link(os.path.join(top, "lib", "a.c"), os.path.join(top, "hard.c"))
    for d, dirs, names in os.walk(top):
        for n in dirs + names:
            os.utime(os.path.join(d, n), (MTIME, MTIME), follow_symlinks=False)
    os.utime(top, (MTIME, MTIME))
    return top


def make_tar(work, small):
    if not small:
        return tree.make_tar(work)
    src = os.path.join(work, "small")
    small_tree(src)
    tar = os.path.join(work, "tree.tar")
    subprocess.run(["tar", "cf", tar, "--owner=0", "--group=0",
                    "--numeric-owner", "--sort=name", "-C", src, "src"],
                   check=True)
    return tar


def record(out, small=False, log=print, timeout=1800):
    """Records the tree steps' stream into OUT; raises RuntimeError with
    what failed"""
    work = tempfile.mkdtemp(prefix="vfsdax-record.",
                            dir="/dev/shm" if os.path.isdir("/dev/shm")
                            else None)
    try:
        tar = make_tar(work, small)
        share = os.path.join(work, "share")
        os.makedirs(share)
        script = os.path.join(work, "guest.sh")
        with open(script, "w") as f:
            f.write(tree.guest_script(tree.VFS, "tree"))
        raw = os.path.join(work, "stream.rec")
        log(f"recording the tree steps ({'small tree' if small else 'tree'}"
            f" of {os.path.getsize(tar) >> 10} KiB) from a guest")
        p = subprocess.run(
            [sys.executable, tree.VM, "--quiet", "--mem", tree.GUEST_MEM,
             "--shared", share, "--timeout", str(timeout), "--daemon",
             "ours", "--cache-mode", "auto", "--env", "VFSDAX_MODULES=1",
             "--qemu-args=" + tree.drive(tar, "tree", True), script],
            env=dict(os.environ, VIRTIOFSD_RECORD=raw),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0 or "tree steps done" not in p.stdout:
            raise RuntimeError(f"the guest's tree steps failed "
                               f"({p.returncode}): {p.stdout.strip()[-600:]}")
        requests, replies = count(raw)
        if not requests or not replies:
            raise RuntimeError(f"the daemon recorded {requests} requests "
                               f"and {replies} replies")
        if out.endswith(".xz"):
            with open(raw, "rb") as f, lzma.open(out + ".tmp", "wb",
                                                 preset=9) as z:
                shutil.copyfileobj(f, z)
            os.rename(out + ".tmp", out)
        else:
            shutil.move(raw, out)
        log(f"recorded {requests} requests, {replies} replies: {out} "
            f"({os.path.getsize(out) >> 10} KiB)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def records(path):
    """(kind, unique, flags, body) of each record of the stream at PATH"""
    with open(path, "rb") as f:
        data = f.read()
    if data[:len(MAGIC)] != MAGIC:
        raise ValueError(f"{path}: not a stream of VIRTIOFSD_RECORD's")
    at = len(MAGIC)
    while at < len(data):
        kind, length, unique, _, flags = RECORD.unpack_from(data, at)
        at += RECORD.size
        yield kind, unique, flags, data[at:at + length]
        at += (length + 7) & ~7


def count(path):
    """(requests, replies) in the stream at PATH; raises ValueError on a
    reply to nothing asked, or one whose header is not its record's"""
    asked, requests, replies = set(), 0, 0
    for kind, unique, _, body in records(path):
        if kind == REQUEST:
            asked.add(unique)
            requests += 1
        elif kind == REPLY:
            length, _, u = struct.unpack_from("<IiQ", body)
            if unique not in asked or u != unique or length != len(body):
                raise ValueError(f"{path}: a reply to {unique} out of place")
            asked.discard(unique)
            replies += 1
        else:
            raise ValueError(f"{path}: a record of kind {kind}")
    return requests, replies


def unpacked(path, work):
    """PATH itself, or its decompressed copy in WORK if it ends in .xz"""
    if not path.endswith(".xz"):
        return path
    out = os.path.join(work, os.path.basename(path)[:-3])
    with lzma.open(path, "rb") as z, open(out, "wb") as f:
        shutil.copyfileobj(z, f)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="the stream to write (.xz: compressed)")
    ap.add_argument("--small", action="store_true",
                    help="the small tree (make check's stream)")
    args = ap.parse_args()
    try:
        record(args.out, args.small)
    except RuntimeError as e:
        sys.exit(f"replay_stream: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

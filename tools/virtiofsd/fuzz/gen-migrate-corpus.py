#!/usr/bin/env python3
"""Writes the seed corpus of fuzz-migrate.c: live-migration state streams
a destination virtiofsd loads.  good-* are streams a source writes for
the harness's share (fuzz-migrate.c's replay checks they load); forged-*
are what a source a guest took over could write instead: file handles of
files outside the share, paths that lead out, session flags and counters
no source gives, a flood of lost inodes, DAX tables for a window the
destination does not have.

The format is migrate.c's (and dax-migrate.c's DAX section), little-endian: see
docs/tools/virtiofsd.rst, "Live migration".  File handles are the host's,
so a seed names a file by a placeholder the harness resolves at run time:
handle type HANDLE_MAGIC, one byte, the index of a file in fuzz-migrate.c's
targets[].

Each file is fuzz-migrate.c's input: a configuration byte, then the
stream.

    tools/virtiofsd/fuzz/gen-migrate-corpus.py [OUTDIR]

writes OUTDIR/migrate-corpus (default: next to this script).
"""

import os
import struct
import sys

MAGIC = b"VFSDMIG\n"
VERSION = 1
SEC_END, SEC_SESSION, SEC_INODES, SEC_HANDLES, SEC_LOCKS, SEC_DAX, \
    SEC_REQUESTS = range(7)
SEC_OPTIONAL = 1
INODE_PATH, INODE_HANDLE = 1, 2
LOCK_READ, LOCK_WRITE = 1, 2
DAX_VERSION, DAX_RW = 1, 1
MIG_ID_MAX = 1 << 62

# fuzz-migrate.c's byte 0
GUEST_ERROR, FILE_HANDLES, READ_ONLY, NO_WINDOW, NO_SHMEM_MIGRATE, \
    REPLACE, WRITEBACK = 1, 2, 4, 8, 0x10, 0x20, 0x40

# fuzz-migrate.c's placeholder handle and its targets[]
HANDLE_MAGIC = 0x4d5a5a46
OUTSIDE, OUTDIR, SECRET, PARENT, ROOT, FILE, DIR, SUB, BIG, HARD = range(10)

S_IFREG, S_IFDIR, S_IFLNK, S_IFIFO = 0o100000, 0o40000, 0o120000, 0o10000
O_RDONLY, O_WRONLY, O_RDWR, O_APPEND, O_CREAT = 0, 1, 2, 0o2000, 0o100

FUSE_MINOR = 42
MIN_MINOR = 31
# Offered by the harness's options whatever its configuration byte
FLAGS = ((1 << 0) | (1 << 1) | (1 << 3) | (1 << 5) | (1 << 10) |
         (1 << 30))
FUSE_POSIX_ACL = 1 << 20
FUSE_SECURITY_CTX = 1 << 32
PAGE = 4096


def u8(v):
    return struct.pack("<B", v)


def u32(v):
    return struct.pack("<I", v)


def u64(v):
    return struct.pack("<Q", v)


def blob(b):
    return u32(len(b)) + b


def section(typ, payload, flags=0):
    return u32(typ) + u32(flags) + u64(len(payload)) + payload


def stream(*sections, version=VERSION, hflags=0, end=True):
    out = MAGIC + u32(version) + u32(hflags) + b"".join(sections)
    if end:
        out += section(SEC_END, b"")
    return out


def session(flags=FLAGS, minor=FUSE_MINOR, initialized=1):
    return section(SEC_SESSION, u32(minor) + u32(0) + u64(flags) +
                   u8(initialized))


def inode(nodeid, typ, path=None, handle=None, nlookup=1, flags=None):
    """handle: a targets[] index (a placeholder), or (type, bytes)"""
    if flags is None:
        flags = ((INODE_PATH if path is not None else 0) |
                 (INODE_HANDLE if handle is not None else 0))
    out = u64(nodeid) + u64(nlookup) + u32(typ) + u32(flags)
    if path is not None:
        out += blob(path.encode())
    if handle is not None:
        if isinstance(handle, int):
            out += u32(HANDLE_MAGIC) + blob(bytes([handle]))
        else:
            out += u32(handle[0]) + blob(handle[1])
    return out


def inodes(*recs, count=None):
    n = len(recs) if count is None else count
    return section(SEC_INODES, u64(n) + b"".join(recs))


def handle(fh, nodeid, flags=O_RDWR, is_dir=0, flock=0):
    return u64(fh) + u64(nodeid) + u32(flags) + u8(is_dir) + u8(flock)


def handles(*recs):
    return section(SEC_HANDLES, u64(len(recs)) + b"".join(recs))


def lock(nodeid, owner, typ, start, length):
    return u64(nodeid) + u64(owner) + u32(typ) + u64(start) + u64(length)


def locks(*recs):
    return section(SEC_LOCKS, u64(len(recs)) + b"".join(recs))


def dax_map(moffset, length, foffset, nodeid, flags=0, zero=0):
    return (u64(moffset) + u64(length) + u64(foffset) + u64(nodeid) +
            u32(flags) + u32(zero))


def dax(*recs, version=DAX_VERSION):
    return section(SEC_DAX, u32(version) + u64(len(recs)) + b"".join(recs))


# A guest that looked up and opened the share's files, by path
TREE = [
    inode(2, S_IFREG, "file"),
    inode(3, S_IFDIR, "dir"),
    inode(4, S_IFREG, "dir/sub"),
    inode(5, S_IFLNK, "link"),
    inode(6, S_IFREG, "big", nlookup=3),
    inode(7, S_IFDIR, "dir/nested"),
    inode(8, S_IFLNK, "escape"),
]
TREE_HANDLES = [
    handle(1, 2, O_RDWR),
    handle(2, 3, O_RDONLY, is_dir=1),
    handle(3, 6, O_RDONLY, flock=LOCK_READ),
    handle(5, 4, O_WRONLY | O_APPEND, flock=LOCK_WRITE),
]


def seeds():
    out = {}

    # Good: what a source writes
    out["good-empty"] = bytes([0]) + stream(session())
    out["good-before-init"] = bytes([GUEST_ERROR]) + stream(
        session(flags=0, minor=0, initialized=0))
    out["good-paths"] = bytes([0]) + stream(
        session(), inodes(*TREE), handles(*TREE_HANDLES),
        locks(lock(2, 7, LOCK_WRITE, 0, 100), lock(2, 8, LOCK_READ, 200, 0),
              lock(6, 7, LOCK_READ, 4096, 4096)))
    out["good-paths-fh"] = bytes([FILE_HANDLES | GUEST_ERROR]) + out[
        "good-paths"][1:]
    # --migration-mode=file-handles: the share's files by handle alone,
    # to a destination that opens handles (a daemon that opens none
    # refuses them)
    out["good-handles"] = bytes([FILE_HANDLES]) + stream(
        session(), inodes(inode(2, S_IFREG, handle=FILE),
                          inode(3, S_IFDIR, handle=DIR),
                          inode(4, S_IFREG, handle=SUB),
                          inode(6, S_IFREG, handle=BIG)),
        handles(handle(1, 2), handle(2, 3, O_RDONLY, is_dir=1),
                handle(3, 4, O_RDONLY)))
    # --migration-verify-handles: a path, and a handle to check it by
    out["good-verified"] = bytes([0]) + stream(
        session(), inodes(inode(2, S_IFREG, "file", handle=FILE),
                          inode(3, S_IFDIR, "dir", handle=DIR)),
        handles(handle(1, 2)))
    # A live DAX window, a read-only and a writable mapping
    out["good-dax"] = bytes([0]) + stream(
        session(), inodes(*TREE), handles(*TREE_HANDLES),
        dax(dax_map(0, 2 * PAGE, 0, 2, DAX_RW),
            dax_map(0x200000, 0x200000, 0x200000, 6),
            dax_map(0x400000, PAGE, 0, 4, DAX_RW)))
    out["good-dax-replace"] = bytes([REPLACE | GUEST_ERROR]) + out[
        "good-dax"][1:]
    # Files the source could not find: lost for the guest
    out["good-lost"] = bytes([GUEST_ERROR]) + stream(
        session(), inodes(inode(2, S_IFREG, "file"), inode(9, S_IFREG),
                          inode(10, S_IFREG, "gone")),
        handles(handle(1, 9), handle(2, 10), handle(3, 2)),
        locks(lock(9, 1, LOCK_WRITE, 0, 0)))

    # Forged: file handles of what lies outside the share
    for name, target, typ in (("outside", OUTSIDE, S_IFREG),
                              ("outdir", OUTDIR, S_IFDIR),
                              ("secret", SECRET, S_IFREG),
                              ("parent", PARENT, S_IFDIR)):
        is_dir = int(typ == S_IFDIR)
        body = stream(
            session(), inodes(inode(2, S_IFREG, "file"),
                              inode(7, typ, handle=target)),
            handles(handle(1, 2), handle(3, 7, O_RDONLY if is_dir else O_RDWR,
                                         is_dir=is_dir)))
        out["forged-handle-" + name] = bytes([0]) + body
        out["forged-handle-" + name + "-guest-error"] = (
            bytes([GUEST_ERROR]) + body)
        out["forged-handle-" + name + "-fh"] = (
            bytes([GUEST_ERROR | FILE_HANDLES]) + body)
    # Outside, with a lock and a DAX mapping on it
    out["forged-handle-outside-dax"] = bytes([GUEST_ERROR]) + stream(
        session(), inodes(inode(7, S_IFREG, handle=OUTSIDE)),
        handles(handle(3, 7, O_RDWR, flock=LOCK_WRITE)),
        locks(lock(7, 1, LOCK_WRITE, 0, 0)),
        dax(dax_map(0, PAGE, 0, 7, DAX_RW)))
    # The share's own root under another nodeid
    out["forged-handle-root"] = bytes([GUEST_ERROR]) + stream(
        session(), inodes(inode(2, S_IFDIR, handle=ROOT)),
        handles(handle(1, 2, O_RDONLY, is_dir=1)))
    # One file twice, by path and by a hard link's handle
    out["forged-handle-twice"] = bytes([GUEST_ERROR]) + stream(
        session(), inodes(inode(2, S_IFREG, "file"),
                          inode(3, S_IFREG, handle=HARD)))
    # A path of the share, with the handle of a file outside
    out["forged-path-handle-mismatch"] = bytes([GUEST_ERROR]) + stream(
        session(), inodes(inode(2, S_IFREG, "file", handle=OUTSIDE)),
        handles(handle(1, 2)))
    # A handle of a type no file system has
    out["forged-handle-junk"] = bytes([GUEST_ERROR]) + stream(
        session(), inodes(inode(2, S_IFREG, handle=(0x7fffffff, b"\x01" * 8)),
                          inode(3, S_IFREG, handle=(1, b"\xff" * 128))))

    # Paths that lead out
    for name, path in (("dotdot", "../outside"), ("absolute", "/etc/passwd"),
                       ("symlink", "out"), ("through-symlink", "up/outside"),
                       ("escape", "escape"), ("nul", "file\0x"),
                       ("empty", ""), ("dot", "./file")):
        out["forged-path-" + name] = bytes([GUEST_ERROR]) + stream(
            session(), inodes(inode(2, S_IFREG, path)),
            handles(handle(1, 2)))
    out["forged-path-fifo"] = bytes([GUEST_ERROR]) + stream(
        session(), inodes(inode(2, S_IFIFO, "fifo")))

    # The session
    out["forged-session-flags"] = bytes([0]) + stream(
        session(flags=FLAGS | (1 << 63)))
    out["forged-session-security-ctx"] = bytes([0]) + stream(
        session(flags=FLAGS | FUSE_SECURITY_CTX))
    out["forged-session-acl-writeback"] = bytes([WRITEBACK]) + stream(
        session(flags=FLAGS | FUSE_POSIX_ACL))
    out["forged-session-minor"] = bytes([0]) + stream(
        session(minor=MIN_MINOR - 1))
    out["forged-session-minor-new"] = bytes([0]) + stream(
        session(minor=FUSE_MINOR + 1))
    out["forged-header"] = bytes([0]) + stream(session(), version=2,
                                               hflags=1)

    # Counters near the top
    # The highest a source may give (the guest's next ones come after)
    out["forged-nodeid-max"] = bytes([GUEST_ERROR]) + stream(
        session(), inodes(inode(MIG_ID_MAX, S_IFREG, "file")),
        handles(handle(MIG_ID_MAX, MIG_ID_MAX)))
    out["forged-nodeid-over"] = bytes([GUEST_ERROR]) + stream(
        session(), inodes(inode(MIG_ID_MAX + 1, S_IFREG, "file")))
    for name, fh in (("over", MIG_ID_MAX + 1), ("zero", 0),
                     ("all-ones", 2 ** 64 - 1)):
        out["forged-fh-" + name] = bytes([GUEST_ERROR]) + stream(
            session(), inodes(inode(2, S_IFREG, "file")),
            handles(handle(fh, 2)))
    out["forged-nodeid-root"] = bytes([GUEST_ERROR]) + stream(
        session(), inodes(inode(1, S_IFDIR, "dir"), inode(0, S_IFREG,
                                                          "file")))
    out["forged-nodeid-twice"] = bytes([GUEST_ERROR]) + stream(
        session(), inodes(inode(2, S_IFREG, "file"),
                          inode(2, S_IFREG, "big")))
    out["forged-fh-twice"] = bytes([GUEST_ERROR]) + stream(
        session(), inodes(inode(2, S_IFREG, "file")),
        handles(handle(1, 2), handle(1, 2, O_RDONLY)))
    for name, rec in (("creat", handle(1, 2, O_RDWR | O_CREAT)),
                      ("file-as-dir", handle(1, 2, O_RDONLY, is_dir=1)),
                      ("dir-as-file", handle(1, 3, O_RDONLY)),
                      ("dir-flock", handle(1, 3, O_RDONLY, is_dir=1,
                                           flock=LOCK_READ)),
                      ("flock-type", handle(1, 2, O_RDWR, flock=3)),
                      ("unknown-node", handle(1, 99))):
        out["forged-fh-" + name] = bytes([GUEST_ERROR]) + stream(
            session(), inodes(inode(2, S_IFREG, "file"),
                              inode(3, S_IFDIR, "dir")),
            handles(rec))
    out["forged-count-huge"] = bytes([GUEST_ERROR]) + stream(
        session(), inodes(inode(2, S_IFREG, "file"), count=2 ** 64 - 1))

    # Many inodes the source says it could not find
    out["forged-lost-many"] = bytes([GUEST_ERROR]) + stream(
        session(), inodes(*[inode(2 + i, S_IFREG) for i in range(600)]))
    out["forged-lost-many-abort"] = bytes([0]) + out["forged-lost-many"][1:]

    # Locks
    for name, rec in (("type", lock(2, 1, 3, 0, 0)),
                      ("range", lock(2, 1, LOCK_READ, 2 ** 63 - 1, 2)),
                      ("dir", lock(3, 1, LOCK_READ, 0, 0)),
                      ("unknown-node", lock(99, 1, LOCK_READ, 0, 0))):
        out["forged-lock-" + name] = bytes([GUEST_ERROR]) + stream(
            session(), inodes(inode(2, S_IFREG, "file"),
                              inode(3, S_IFDIR, "dir")),
            locks(rec))

    # DAX tables the destination cannot take
    dax_stream = stream(session(), inodes(*TREE),
                        dax(dax_map(0, PAGE, 0, 2, DAX_RW)))
    out["forged-dax-no-window"] = bytes([NO_WINDOW]) + dax_stream
    out["forged-dax-no-shmem-migrate"] = bytes([NO_SHMEM_MIGRATE]) + \
        dax_stream
    out["forged-dax-read-only"] = bytes([READ_ONLY | GUEST_ERROR]) + \
        dax_stream
    for name, rec in (
            ("past-window", dax_map(64 << 20, PAGE, 0, 2)),
            ("unaligned", dax_map(100, PAGE, 0, 2)),
            ("wraps", dax_map(2 ** 64 - PAGE, PAGE, 0, 2)),
            ("file-offset", dax_map(0, PAGE, 2 ** 63 - PAGE, 2)),
            ("dir", dax_map(0, PAGE, 0, 3)),
            ("unknown-node", dax_map(0, PAGE, 0, 99)),
            ("flags", dax_map(0, PAGE, 0, 2, 6, 1))):
        out["forged-dax-" + name] = bytes([GUEST_ERROR]) + stream(
            session(), inodes(*TREE), dax(rec))
    out["forged-dax-overlap"] = bytes([GUEST_ERROR]) + stream(
        session(), inodes(*TREE),
        dax(dax_map(0, 2 * PAGE, 0, 2), dax_map(PAGE, PAGE, 0, 6)))
    out["forged-dax-empty"] = bytes([GUEST_ERROR]) + stream(
        session(), inodes(*TREE), dax())
    out["forged-dax-version"] = bytes([GUEST_ERROR]) + stream(
        session(), inodes(*TREE), dax(dax_map(0, PAGE, 0, 2), version=9))

    # Sections: unknown, out of order, requests nothing here takes
    out["forged-sections"] = bytes([GUEST_ERROR]) + stream(
        session(), section(99, b"skipped", SEC_OPTIONAL),
        inodes(inode(2, S_IFREG, "file")), section(SEC_SESSION, b""))
    out["forged-section-unknown"] = bytes([0]) + stream(
        session(), section(99, b"x"))
    out["forged-section-flags"] = bytes([0]) + stream(
        session(), section(SEC_INODES, u64(0), 2))
    out["forged-requests"] = bytes([GUEST_ERROR]) + stream(
        session(), section(SEC_REQUESTS, u64(1) + b"\0" * 40))
    out["forged-truncated"] = bytes([0]) + stream(
        session(), inodes(*TREE))[:-40]
    out["forged-trailing"] = bytes([0]) + stream(session()) + b"more"
    return out


def main():
    outdir = os.path.join(sys.argv[1] if len(sys.argv) > 1 else
                          os.path.dirname(os.path.abspath(__file__)),
                          "migrate-corpus")
    os.makedirs(outdir, exist_ok=True)
    for name, data in seeds().items():
        with open(os.path.join(outdir, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes the seed corpus of fuzz-request.c: guest sessions GENERATED from
well-formed requests laid out the way a Linux 6.12 guest lays them out
(fs/fuse: struct sizes, flags, argument order), not captured from a guest;
capture-corpus.sh captures those, into captured/.

Each file is fuzz-request.c's input format: a configuration byte, then
records (u16 length, u8 segmentation, u8 reply room) each holding one FUSE
request.  The harness populates the shared directory (file, empty, big,
dir/{sub,nested}, link -> file, escape -> a file outside, fifo, hard) and
sends the guest's INIT itself unless a session starts with one, so nodeids
count from 2 in lookup order and file handles from 1.

    tools/virtiofsd/fuzz/gen-corpus.py [OUTDIR]

writes OUTDIR/corpus (default: next to this script) and OUTDIR/regressions,
the minimal inputs of the bugs the seeds found.  Crashes the fuzzer finds
go to regressions/ as they are.
"""

import os
import struct
import sys

# Opcodes (include/standard-headers/linux/fuse.h)
LOOKUP, FORGET, GETATTR, SETATTR, READLINK, SYMLINK = 1, 2, 3, 4, 5, 6
MKNOD, MKDIR, UNLINK, RMDIR, RENAME, LINK, OPEN, READ = 8, 9, 10, 11, 12, 13, 14, 15
WRITE, STATFS, RELEASE, FSYNC, SETXATTR, GETXATTR = 16, 17, 18, 20, 21, 22
LISTXATTR, REMOVEXATTR, FLUSH, INIT, OPENDIR, READDIR = 23, 24, 25, 26, 27, 28
RELEASEDIR, FSYNCDIR, GETLK, SETLK, SETLKW, ACCESS = 29, 30, 31, 32, 33, 34
CREATE, INTERRUPT, DESTROY, BATCH_FORGET, FALLOCATE = 35, 36, 38, 42, 43
READDIRPLUS, RENAME2, LSEEK, COPY_FILE_RANGE = 44, 45, 46, 47
SETUPMAPPING, REMOVEMAPPING, SYNCFS, TMPFILE, STATX = 48, 49, 50, 51, 52
COPY_FILE_RANGE_64 = 53  # 7.45 (tools/virtiofsd/fuse-proto.h)

ROOT = 1
O_RDONLY, O_WRONLY, O_RDWR = 0, 1, 2
O_CREAT, O_EXCL, O_TRUNC, O_APPEND = 0o100, 0o200, 0o1000, 0o2000
O_LARGEFILE, O_DIRECTORY, O_NOFOLLOW = 0o100000, 0o200000, 0o400000
S_IFREG, S_IFDIR, S_IFIFO, S_IFCHR, S_IFSOCK = 0o100000, 0o40000, 0o10000, 0o20000, 0o140000

# The flags a 6.12 guest sends in INIT (fs/fuse/inode.c, fuse_send_init)
INIT_FLAGS = (
    (1 << 0) | (1 << 1) | (1 << 3) | (1 << 4) | (1 << 5) | (1 << 6) |
    (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12) |
    (1 << 13) | (1 << 14) | (1 << 15) | (1 << 16) | (1 << 17) | (1 << 18) |
    (1 << 19) | (1 << 20) | (1 << 21) | (1 << 22) | (1 << 23) | (1 << 24) |
    (1 << 25) | (1 << 26) | (1 << 27) | (1 << 28) | (1 << 29) | (1 << 30) |
    (1 << 32) | (1 << 33) | (1 << 34) | (1 << 35) | (1 << 36) | (1 << 37) |
    (1 << 38) | (1 << 39) | (1 << 40))


class Session:
    def __init__(self, cfg=0):
        self.cfg = cfg
        self.records = []
        self.unique = 2

    def req(self, opcode, nodeid=0, *args, seg=0, out=0, uid=0, gid=0):
        body = b"".join(args)
        self.unique += 2
        hdr = struct.pack("<IIQQIIIHH", 40 + len(body), opcode, self.unique,
                          nodeid, uid, gid, 1234, 0, 0)
        self.raw(hdr + body, seg, out)

    def raw(self, data, seg=0, out=0):
        self.records.append(struct.pack("<HBB", len(data), seg, out) + data)

    def bytes(self):
        return bytes([self.cfg]) + b"".join(self.records)


def name(s):
    return s.encode() + b"\0"


def init_in(minor=41, flags=INIT_FLAGS):
    return struct.pack("<IIIII44x", 7, minor, 128 * 1024,
                       flags & 0xffffffff, flags >> 32)


def getattr_in(fh=0, flags=0):
    return struct.pack("<IIQ", flags, 0, fh)


def open_in(flags, open_flags=0):
    return struct.pack("<II", flags, open_flags)


def read_in(fh, off, size, flags=O_RDONLY | O_LARGEFILE, owner=0):
    return struct.pack("<QQIIQII", fh, off, size, 0, owner, flags, 0)


def write_in(fh, off, size, wflags=0, flags=O_WRONLY | O_LARGEFILE):
    return struct.pack("<QQIIQII", fh, off, size, wflags, 0, flags, 0)


def release_in(fh, flags=O_RDONLY | O_LARGEFILE, rflags=0, owner=0):
    return struct.pack("<QIIQ", fh, flags, rflags, owner)


def flush_in(fh, owner=0x1234):
    return struct.pack("<QIIQ", fh, 0, 0, owner)


def create_in(flags, mode=S_IFREG | 0o644, umask=0o22, open_flags=0):
    return struct.pack("<IIII", flags, mode, umask, open_flags)


def setattr_in(valid, fh=0, size=0, atime=0, mtime=0, mode=0, uid=0, gid=0):
    return struct.pack("<IIQQQQQQIIIIIIII", valid, 0, fh, size, 0, atime,
                       mtime, 0, 0, 0, 0, mode, 0, uid, gid, 0)


def lk_in(fh, owner, start, end, typ, lk_flags=0, pid=1234):
    return struct.pack("<QQQQIIII", fh, owner, start, end, typ, pid,
                       lk_flags, 0)


def setupmapping_in(foff, length, flags, moff, fh=0xffffffffffffffff):
    return struct.pack("<QQQQQ", fh, foff, length, flags, moff)


def removemapping_in(*ranges):
    return struct.pack("<I", len(ranges)) + b"".join(
        struct.pack("<QQ", m, n) for m, n in ranges)


FATTR_MODE, FATTR_UID, FATTR_GID, FATTR_SIZE = 1, 2, 4, 8
FATTR_ATIME, FATTR_MTIME, FATTR_FH = 16, 32, 64
FATTR_ATIME_NOW, FATTR_MTIME_NOW, FATTR_KILL_SUIDGID = 128, 256, 1 << 11
F_RDLCK, F_WRLCK, F_UNLCK = 0, 1, 2
MAP_R, MAP_W = 2, 1
MiB = 1 << 20


def seeds():
    s = {}

    # mount: INIT (explicit here), GETATTR of the root, STATFS
    m = Session()
    m.req(INIT, 0, init_in())
    m.req(GETATTR, ROOT, getattr_in())
    m.req(STATFS, ROOT)
    s["mount"] = m

    # an old guest, then one from the future that must be told our version
    m = Session()
    m.req(INIT, 0, init_in(minor=31, flags=INIT_FLAGS & 0xffffffff))
    s["init-7.31"] = m
    m = Session()
    m.req(INIT, 0, struct.pack("<IIIII44x", 8, 0, 0, 0, 0))
    m.req(INIT, 0, init_in())
    s["init-major-8"] = m

    # ls -l /mnt: OPENDIR, READDIRPLUS until empty, RELEASEDIR
    m = Session()
    m.req(OPENDIR, ROOT, open_in(O_RDONLY | O_LARGEFILE | O_DIRECTORY))
    m.req(READDIRPLUS, ROOT, read_in(1, 0, 4096, O_DIRECTORY), out=255)
    m.req(READDIRPLUS, ROOT, read_in(1, 0x7fffffffffffffff, 4096,
                                     O_DIRECTORY), out=255)
    m.req(RELEASEDIR, ROOT, release_in(1, O_DIRECTORY))
    s["ls"] = m

    m = Session()
    m.req(LOOKUP, ROOT, name("dir"))
    m.req(OPENDIR, 2, open_in(O_RDONLY | O_DIRECTORY))
    m.req(READDIR, 2, read_in(1, 0, 4096, O_DIRECTORY))
    m.req(READDIRPLUS, 2, read_in(1, 0, 80, O_DIRECTORY), out=10)
    m.req(FSYNCDIR, 2, struct.pack("<QII", 1, 0, 0))
    m.req(RELEASEDIR, 2, release_in(1, O_DIRECTORY))
    m.req(FORGET, 2, struct.pack("<Q", 1))
    s["readdir-sub"] = m

    # cat /mnt/file without DAX
    m = Session(cfg=0x90)
    m.req(LOOKUP, ROOT, name("file"))
    m.req(OPEN, 2, open_in(O_RDONLY | O_LARGEFILE))
    m.req(READ, 2, read_in(1, 0, 8192), out=0)
    m.req(READ, 2, read_in(1, 8192, 4096))
    m.req(FLUSH, 2, flush_in(1))
    m.req(RELEASE, 2, release_in(1))
    m.req(FORGET, 2, struct.pack("<Q", 1))
    s["cat"] = m

    # the same read split over descriptors, some inside the DAX window
    m = Session(cfg=0x90)
    m.req(LOOKUP, ROOT, name("file"))
    m.req(OPEN, 2, open_in(O_RDONLY | O_LARGEFILE))
    m.req(READ, 2, read_in(1, 100, 3000), seg=0x80 | 64, out=200)
    m.req(READ, 2, read_in(1, 0, 4096), seg=17)
    s["read-segments"] = m

    # echo x > /mnt/new: LOOKUP (negative), CREATE, WRITE, SETATTR, RELEASE
    m = Session(cfg=0x10)
    m.req(LOOKUP, ROOT, name("new"))
    m.req(CREATE, ROOT, create_in(O_WRONLY | O_CREAT | O_TRUNC | O_LARGEFILE),
          name("new"))
    m.req(WRITE, 2, write_in(1, 0, 6), b"hello\n")
    m.req(WRITE, 2, write_in(1, 4096, 12, 1 << 2), b"x" * 12, seg=0x80 | 8)
    m.req(SETATTR, 2, setattr_in(FATTR_SIZE | FATTR_FH, fh=1, size=3))
    m.req(GETATTR, 2, getattr_in(1, 1))
    m.req(FSYNC, 2, struct.pack("<QII", 1, 1, 0))
    m.req(FLUSH, 2, flush_in(1))
    m.req(RELEASE, 2, release_in(1, O_WRONLY))
    s["create-write"] = m

    # O_APPEND, O_TRUNC with killpriv, writes with the killpriv flag
    m = Session(cfg=0x08)
    m.req(LOOKUP, ROOT, name("file"))
    m.req(SETATTR, 2, setattr_in(FATTR_MODE, mode=0o6755))
    m.req(OPEN, 2, open_in(O_WRONLY | O_TRUNC | O_LARGEFILE, 1 << 0))
    m.req(WRITE, 2, write_in(1, 0, 4, 1 << 2), b"abcd")
    m.req(OPEN, 2, open_in(O_WRONLY | O_APPEND))
    m.req(WRITE, 2, write_in(2, 0, 4), b"efgh")
    m.req(SETATTR, 2, setattr_in(FATTR_SIZE | FATTR_KILL_SUIDGID, size=1))
    m.req(RELEASE, 2, release_in(2))
    s["killpriv"] = m

    # mkdir, mknod (FIFO, socket), symlink, readlink, link, rename, unlink
    m = Session()
    m.req(MKDIR, ROOT, struct.pack("<II", 0o755, 0o22), name("d"))
    m.req(MKNOD, 2, struct.pack("<IIII", S_IFIFO | 0o644, 0, 0o22, 0),
          name("p"))
    m.req(MKNOD, 2, struct.pack("<IIII", S_IFSOCK | 0o644, 0, 0o22, 0),
          name("s"))
    m.req(SYMLINK, 2, name("l"), name("../file"))
    m.req(READLINK, 5)
    m.req(LOOKUP, ROOT, name("file"))
    m.req(LINK, 2, struct.pack("<Q", 6), name("f2"))
    m.req(RENAME2, 2, struct.pack("<QII", ROOT, 1, 0), name("f2"),
          name("moved"))
    m.req(RENAME, ROOT, struct.pack("<Q", 2), name("moved"), name("back"))
    m.req(UNLINK, 2, name("back"))
    m.req(UNLINK, 2, name("p"))
    m.req(RMDIR, ROOT, name("d"))
    s["namespace"] = m

    # a device node: refused or harmless, never opened
    m = Session()
    m.req(MKNOD, ROOT, struct.pack("<IIII", S_IFCHR | 0o666, (1 << 8) | 3,
                                   0, 0), name("null"))
    m.req(OPEN, 2, open_in(O_RDWR))
    m.req(CREATE, ROOT, create_in(O_RDWR | O_CREAT), name("null"))
    m.req(GETXATTR, 2, struct.pack("<II", 0, 0), name("user.x"))
    s["mknod-dev"] = m

    # what a guest must not reach: symlinks out, special files, dot names
    m = Session()
    m.req(LOOKUP, ROOT, name("escape"))
    m.req(READLINK, 2)
    m.req(OPEN, 2, open_in(O_RDONLY))
    m.req(LOOKUP, ROOT, name("fifo"))
    m.req(OPEN, 3, open_in(O_RDONLY))
    m.req(CREATE, ROOT, create_in(O_RDONLY | O_CREAT), name("fifo"))
    m.req(CREATE, ROOT, create_in(O_RDONLY | O_CREAT), name("escape"))
    m.req(LOOKUP, ROOT, name(".."))
    m.req(LOOKUP, ROOT, name("a/b"))
    m.req(SETATTR, 2, setattr_in(FATTR_MODE, mode=0o777))
    s["escape"] = m

    # xattrs: set (EXT layout), get size then value, list, remove
    m = Session()
    m.req(LOOKUP, ROOT, name("file"))
    m.req(SETXATTR, 2, struct.pack("<IIII", 5, 0, 0, 0), name("user.a"),
          b"value")
    m.req(GETXATTR, 2, struct.pack("<II", 0, 0), name("user.a"))
    m.req(GETXATTR, 2, struct.pack("<II", 64, 0), name("user.a"))
    m.req(LISTXATTR, 2, struct.pack("<II", 0, 0))
    m.req(LISTXATTR, 2, struct.pack("<II", 256, 0))
    m.req(REMOVEXATTR, 2, name("user.a"))
    m.req(LOOKUP, ROOT, name("link"))
    m.req(SETXATTR, 3, struct.pack("<IIII", 1, 1, 0, 0),
          name("trusted.t"), b"1")
    m.req(LISTXATTR, 3, struct.pack("<II", 256, 0))
    s["xattr"] = m

    # --posix-acl and the harness's id maps: ACL values carry ids both
    # ways, creations run under the guest's umask (FUSE_DONT_MASK), chown
    # and callers outside the map
    def acl(*ents):
        return struct.pack("<I", 2) + b"".join(
            struct.pack("<HHI", tag, perm, i) for tag, perm, i in ents)
    named = acl((1, 6, 0xffffffff), (2, 4, 70000), (4, 4, 0xffffffff),
                (8, 4, 65537), (0x10, 6, 0xffffffff), (0x20, 0, 0xffffffff))
    m = Session()
    m.req(LOOKUP, ROOT, name("file"))
    m.req(SETXATTR, 2, struct.pack("<IIII", len(named), 0, 1, 0),
          name("system.posix_acl_access"), named)
    m.req(GETXATTR, 2, struct.pack("<II", 0, 0),
          name("system.posix_acl_access"))
    m.req(GETXATTR, 2, struct.pack("<II", 256, 0),
          name("system.posix_acl_access"))
    m.req(LOOKUP, ROOT, name("dir"))
    m.req(SETXATTR, 3, struct.pack("<IIII", 28, 0, 0, 0),
          name("system.posix_acl_default"),
          acl((1, 7, 0xffffffff), (4, 7, 0xffffffff), (0x20, 5, 0xffffffff)))
    m.req(CREATE, 3, create_in(O_RDWR | O_CREAT | O_EXCL, umask=0o77),
          name("f"), uid=70000, gid=70000)
    m.req(MKDIR, 3, struct.pack("<II", 0o777, 0o27), name("d"))
    m.req(MKDIR, 3, struct.pack("<II", 0o777, 0o27), name("e"), uid=140000)
    m.req(SETATTR, 2, setattr_in(FATTR_UID | FATTR_GID, uid=70000,
                                 gid=65536))
    m.req(SETATTR, 2, setattr_in(FATTR_UID, uid=140000))
    s["acl-idmap"] = m

    # locks: POSIX (OFD per owner), flock, GETLK
    m = Session()
    m.req(LOOKUP, ROOT, name("file"))
    m.req(OPEN, 2, open_in(O_RDWR))
    m.req(SETLK, 2, lk_in(1, 7, 0, 99, F_WRLCK))
    m.req(GETLK, 2, lk_in(1, 8, 50, 0x7fffffffffffffff, F_RDLCK))
    m.req(SETLK, 2, lk_in(1, 8, 0, 10, F_RDLCK))
    m.req(SETLK, 2, lk_in(1, 7, 0, 99, F_UNLCK))
    m.req(SETLK, 2, lk_in(1, 9, 0, 0, F_WRLCK, lk_flags=1))
    m.req(FLUSH, 2, flush_in(1, 7))
    m.req(RELEASE, 2, release_in(1, O_RDWR, 2, 9))
    s["locks"] = m

    # fallocate, lseek, copy_file_range, syncfs, access
    m = Session()
    m.req(LOOKUP, ROOT, name("file"))
    m.req(OPEN, 2, open_in(O_RDWR))
    m.req(FALLOCATE, 2, struct.pack("<QQQII", 1, 0, 65536, 0, 0))
    m.req(FALLOCATE, 2, struct.pack("<QQQII", 1, 4096, 4096, 3, 0))
    m.req(LSEEK, 2, struct.pack("<QQII", 1, 0, 4, 0))
    m.req(LSEEK, 2, struct.pack("<QQII", 1, 0, 3, 0))
    m.req(LOOKUP, ROOT, name("empty"))
    m.req(OPEN, 3, open_in(O_WRONLY))
    m.req(COPY_FILE_RANGE, 2, struct.pack("<QQQQQQQ", 1, 0, 3, 2, 0, 8192,
                                          0))
    m.req(SYNCFS, ROOT, struct.pack("<Q", 0))
    m.req(ACCESS, 2, struct.pack("<II", 6, 0), uid=1000, gid=1000)
    s["file-ops"] = m

    # statx(2) with a birth time, as a 6.6+ guest sends it (getattr_flags,
    # fh, sx_flags, sx_mask), with sync hints, on a handle, and bad flags
    STATX_BASIC_BTIME = 0x7ff | 0x800
    m = Session()
    m.req(STATX, ROOT, struct.pack("<IIQII", 0, 0, 0, 0, STATX_BASIC_BTIME))
    m.req(LOOKUP, ROOT, name("file"))
    m.req(OPEN, 2, open_in(O_RDONLY))
    m.req(STATX, 2, struct.pack("<IIQII", 1, 0, 1, 0x2000, 0x800))
    m.req(STATX, 2, struct.pack("<IIQII", 0, 0, 0, 0x4000, 0xffffffff))
    m.req(STATX, 2, struct.pack("<IIQII", 0, 0, 0, 0x6000, 0x7ff))
    m.req(STATX, 2, struct.pack("<IIQII", 0, 0, 0, 0x100, 0x7ff))
    m.req(STATX, 99, struct.pack("<IIQII", 0, 0, 0, 0, 0x7ff))
    s["statx"] = m

    # copy_file_range(2) of a 7.45 guest: a 64-bit count, to the end, past
    # 4 GiB, between handles of one file, and with bad handles and flags
    m = Session()
    m.req(LOOKUP, ROOT, name("file"))
    m.req(OPEN, 2, open_in(O_RDONLY))
    m.req(LOOKUP, ROOT, name("empty"))
    m.req(OPEN, 3, open_in(O_RDWR))
    m.req(COPY_FILE_RANGE_64, 2, struct.pack("<QQQQQQQ", 1, 0, 3, 2, 0,
                                             0xffffffffffffffff, 0))
    m.req(COPY_FILE_RANGE_64, 2, struct.pack("<QQQQQQQ", 1, 1, 3, 2, 4096,
                                             1 << 33, 0))
    m.req(COPY_FILE_RANGE_64, 3, struct.pack("<QQQQQQQ", 2, 0, 3, 2, 1, 5,
                                             0))
    m.req(COPY_FILE_RANGE_64, 2, struct.pack("<QQQQQQQ", 7, 0, 3, 2, 0, 5,
                                             0))
    m.req(COPY_FILE_RANGE_64, 2, struct.pack("<QQQQQQQ", 1, 0, 3, 2, 0, 5,
                                             1 << 32))
    m.req(COPY_FILE_RANGE, 2, struct.pack("<QQQQQQQ", 1, 0, 3, 2, 0,
                                          1 << 32, 0))
    s["copy-range-64"] = m

    # setattr: chmod, chown, utimes, truncate without a handle
    m = Session()
    m.req(LOOKUP, ROOT, name("file"))
    m.req(SETATTR, 2, setattr_in(FATTR_MODE, mode=0o600))
    m.req(SETATTR, 2, setattr_in(FATTR_UID | FATTR_GID, uid=1000, gid=100))
    m.req(SETATTR, 2, setattr_in(FATTR_ATIME | FATTR_MTIME, atime=1,
                                 mtime=2))
    m.req(SETATTR, 2, setattr_in(FATTR_ATIME | FATTR_MTIME |
                                 FATTR_ATIME_NOW | FATTR_MTIME_NOW))
    m.req(SETATTR, 2, setattr_in(FATTR_SIZE, size=100))
    s["setattr"] = m

    # O_TMPFILE and as another user
    m = Session()
    m.req(TMPFILE, ROOT, create_in(O_RDWR), name("/"))
    m.req(WRITE, 2, write_in(1, 0, 3), b"tmp")
    m.req(CREATE, ROOT, create_in(O_RDWR | O_CREAT | O_EXCL),
          name("mine"), uid=1000, gid=1000)
    s["tmpfile"] = m

    # DAX read: SETUPMAPPING read-only, then upgraded (6.12 on first write)
    for replace in (False, True):
        m = Session(cfg=0x40 if replace else 0)
        m.req(LOOKUP, ROOT, name("file"))
        m.req(OPEN, 2, open_in(O_RDWR | O_LARGEFILE))
        m.req(SETUPMAPPING, 2, setupmapping_in(0, 2 * MiB, MAP_R, 0))
        m.req(SETUPMAPPING, 2, setupmapping_in(0, 2 * MiB, MAP_R | MAP_W, 0))
        m.req(REMOVEMAPPING, 2, removemapping_in((0, 2 * MiB)))
        m.req(RELEASE, 2, release_in(1, O_RDWR))
        s["dax-upgrade" + ("-replace" if replace else "")] = m

    # DAX: several ranges, one removal of adjacent ones, bad ones
    m = Session(cfg=0x40)
    m.req(LOOKUP, ROOT, name("big"))
    m.req(SETUPMAPPING, 2, setupmapping_in(0, 2 * MiB, MAP_R, 0))
    m.req(SETUPMAPPING, 2, setupmapping_in(2 * MiB, 2 * MiB, MAP_R, 2 * MiB))
    m.req(SETUPMAPPING, 2, setupmapping_in(0, 2 * MiB, MAP_R | MAP_W,
                                           6 * MiB))
    m.req(SETUPMAPPING, 2, setupmapping_in(0, 4 * MiB, MAP_R, 1 * MiB))
    m.req(REMOVEMAPPING, 2, removemapping_in((2 * MiB, 2 * MiB), (0, 2 * MiB)))
    m.req(SETUPMAPPING, 2, setupmapping_in(4096, 4096, MAP_R, 60 * MiB))
    m.req(REMOVEMAPPING, 2, removemapping_in((60 * MiB, 2 * MiB)))
    m.req(REMOVEMAPPING, 2, removemapping_in((6 * MiB, 1 * MiB)))
    s["dax-ranges"] = m

    # DAX: one REMOVEMAPPING of 70 ranges, in reverse order.  Sorting more
    # than a kilobyte of them makes glibc's qsort() call sysinfo(), which
    # the seccomp filter must allow (replay-seccomp.c replays this seed).
    m = Session(cfg=0x40)
    m.req(LOOKUP, ROOT, name("big"))
    for i in range(70):
        m.req(SETUPMAPPING, 2, setupmapping_in(i * 4096, 4096, MAP_R,
                                               i * 4096))
    m.req(REMOVEMAPPING, 2,
          removemapping_in(*[(i * 4096, 4096) for i in reversed(range(70))]))
    s["dax-remove-many"] = m

    # DAX with dax=inode policies: the attr flag, then a mapping
    for cfg, n in ((0x20, "size"), (0x30, "xattr")):
        m = Session(cfg=cfg)
        m.req(LOOKUP, ROOT, name("file"))
        m.req(SETXATTR, 2, struct.pack("<IIII", 1, 0, 0, 0),
              name("user.virtiofsd.dax"), b"1")
        m.req(LOOKUP, ROOT, name("big"))
        m.req(GETATTR, 2, getattr_in())
        m.req(SETUPMAPPING, 3, setupmapping_in(0, 2 * MiB, MAP_R, 0))
        s["dax-policy-" + n] = m

    # a mapping the guest never removes, then DESTROY (umount)
    m = Session()
    m.req(LOOKUP, ROOT, name("file"))
    m.req(SETUPMAPPING, 2, setupmapping_in(0, 2 * MiB, MAP_R | MAP_W, 0))
    m.req(BATCH_FORGET, 0, struct.pack("<II", 1, 0),
          struct.pack("<QQ", 2, 1))
    m.req(DESTROY, 0)
    m.req(INIT, 0, init_in())
    m.req(GETATTR, ROOT, getattr_in())
    s["destroy"] = m

    # read-only share, caches: every mutation refused
    for cfg, n in ((0x04, "readonly"), (0x01, "cache-never"),
                   (0x03, "cache-always"), (0x0a, "writeback-metadata")):
        m = Session(cfg=cfg)
        m.req(LOOKUP, ROOT, name("file"))
        m.req(OPEN, 2, open_in(O_WRONLY | O_TRUNC))
        m.req(OPEN, 2, open_in(O_RDONLY))
        m.req(WRITE, 2, write_in(1, 0, 1), b"x")
        m.req(CREATE, ROOT, create_in(O_WRONLY | O_CREAT), name("n"))
        m.req(SETUPMAPPING, 2, setupmapping_in(0, 2 * MiB, MAP_R | MAP_W, 0))
        m.req(OPENDIR, ROOT, open_in(O_RDONLY))
        s["opts-" + n] = m

    # malformed: short header, lying lengths, unterminated names, INIT twice
    m = Session()
    m.raw(b"\x10\x00\x00")
    m.raw(struct.pack("<IIQQIIIHH", 4096, LOOKUP, 9, ROOT, 0, 0, 0, 0, 0) +
          b"file\0")
    m.raw(struct.pack("<IIQQIIIHH", 44, LOOKUP, 10, ROOT, 0, 0, 0, 0, 0) +
          b"file")
    m.raw(struct.pack("<IIQQIIIHH", 20, GETATTR, 11, ROOT, 0, 0, 0, 0, 0))
    m.req(INIT, 0, init_in())
    m.req(READ, 2, struct.pack("<QQ", 1, 0))
    m.req(REMOVEMAPPING, 0, struct.pack("<I", 1000))
    m.req(REMOVEMAPPING, 0, struct.pack("<I", 2), struct.pack("<QQ", 0, 4096))
    m.req(BATCH_FORGET, 0, struct.pack("<II", 70000, 0))
    m.req(INTERRUPT, 0, struct.pack("<Q", 3))
    m.req(STATX, ROOT, b"\0" * 24)
    m.req(LOOKUP, ROOT, b"x" * 300 + b"\0")
    s["malformed"] = m

    # requests before INIT are refused (the harness adds an INIT unless
    # the first request is one: here a truncated INIT the daemon refuses)
    m = Session()
    m.raw(struct.pack("<IIQQIIIHH", 48, INIT, 3, 0, 0, 0, 0, 0, 0) +
          struct.pack("<II", 7, 41))
    m.req(GETATTR, ROOT, getattr_in())
    s["before-init"] = m

    # small reply room: replies that do not fit become errors
    m = Session()
    m.req(GETATTR, ROOT, getattr_in(), out=5)
    m.req(LOOKUP, ROOT, name("file"), out=1)
    m.req(OPEN, 2, open_in(O_RDONLY), out=2)
    m.req(READ, 2, read_in(1, 0, 8192), out=3, seg=0x80 | 5)
    s["small-reply"] = m

    # a guest that opens without end and never forgets, past the
    # harness's fds_max (96): every kind of request that needs an fd
    # must then fail with ENFILE, and work again once handles go
    m = Session()
    m.req(LOOKUP, ROOT, name("file"))
    m.req(LOOKUP, ROOT, name("dir"))
    for _ in range(100):
        m.req(OPEN, 2, open_in(O_RDONLY))
    m.req(OPENDIR, 3, open_in(O_RDONLY | O_DIRECTORY))
    m.req(LOOKUP, ROOT, name("big"))
    m.req(CREATE, ROOT, create_in(O_RDWR | O_CREAT), name("n"))
    m.req(TMPFILE, ROOT, create_in(O_RDWR), name("/"))
    m.req(MKDIR, ROOT, struct.pack("<II", 0o755, 0o22), name("d"))
    m.req(SETATTR, 2, setattr_in(FATTR_SIZE, size=10))
    m.req(GETXATTR, 2, struct.pack("<II", 0, 0), name("user.a"))
    m.req(SETUPMAPPING, 2, setupmapping_in(0, 2 * MiB, MAP_R, 0))
    m.req(SETLK, 2, lk_in(1, 7, 0, 99, F_WRLCK))
    m.req(SYNCFS, ROOT, struct.pack("<Q", 0))
    m.req(READDIRPLUS, ROOT, read_in(1, 0, 4096, O_DIRECTORY), out=255)
    for fh in range(1, 4):
        m.req(RELEASE, 2, release_in(fh))
    m.req(CREATE, ROOT, create_in(O_RDWR | O_CREAT), name("n"))
    s["many-opens"] = m

    # a guest rewriting its requests while they are decoded: every piece
    # through the access callback, which fails on a byte read twice (the
    # names and values after the fixed arguments are the ones at risk);
    # seg 0x80 is also how a request popped before the memory table
    # changed is reached, by guest address
    m = Session(cfg=0x10)
    m.req(LOOKUP, ROOT, name("file"), seg=0x80)
    m.req(SYMLINK, ROOT, name("sl"), name("file"), seg=0x80 | 1)
    m.req(RENAME2, ROOT, struct.pack("<QII", ROOT, 0, 0), name("sl"),
          name("sl2"), seg=0x80 | 3)
    m.req(LINK, ROOT, struct.pack("<Q", 2), name("hl"), seg=0x80)
    m.req(MKNOD, ROOT, struct.pack("<IIII", S_IFREG | 0o644, 0, 0o22, 0),
          name("nod"), seg=0x80 | 2)
    m.req(SETXATTR, 2, struct.pack("<IIII", 5, 0, 0, 0), name("user.a"),
          b"value", seg=0x80 | 1)
    m.req(GETXATTR, 2, struct.pack("<II", 64, 0), name("user.a"), seg=0x80)
    m.req(OPEN, 2, open_in(O_RDWR), seg=0x80)
    m.req(WRITE, 2, write_in(1, 0, 9, flags=O_RDWR), b"read once", seg=0x80)
    m.req(READ, 2, read_in(1, 0, 9, flags=O_RDWR), seg=0x80)
    m.req(BATCH_FORGET, 0, struct.pack("<II", 2, 0),
          struct.pack("<QQQQ", 2, 1, 3, 1), seg=0x80 | 1)
    s["read-once"] = m

    # DAX: the front-end fails to unmap (32 MiB in the harness's window)
    m = Session()
    m.req(LOOKUP, ROOT, name("big"))
    m.req(SETUPMAPPING, 2, setupmapping_in(0, 2 * MiB, MAP_R, 32 * MiB))
    m.req(SETUPMAPPING, 2, setupmapping_in(0, 2 * MiB, MAP_R | MAP_W,
                                           32 * MiB))
    m.req(REMOVEMAPPING, 2, removemapping_in((32 * MiB, 2 * MiB)))
    m.req(SETUPMAPPING, 2, setupmapping_in(0, 2 * MiB, MAP_R, 32 * MiB))
    m.req(DESTROY, 0)
    s["dax-unmap-fails"] = m
    return s


def regressions():
    """Minimal inputs for bugs found, replayed by every fuzz run."""
    s = {}

    # CREATE without O_EXCL of an existing device node opened the device
    # (CVE-2020-35517 again): 1:3 is /dev/null, harmless even unguarded
    m = Session()
    m.req(MKNOD, ROOT, struct.pack("<IIII", S_IFCHR | 0o666, (1 << 8) | 3,
                                   0, 0), name("null"))
    m.req(CREATE, ROOT, create_in(O_RDWR | O_CREAT | O_LARGEFILE),
          name("null"))
    s["create-opens-device-node"] = m

    # ...and an existing FIFO (the harness's "fifo")
    m = Session()
    m.req(CREATE, ROOT, create_in(O_RDONLY | O_CREAT), name("fifo"))
    s["create-opens-fifo"] = m
    return s


def write(out, sessions):
    os.makedirs(out, exist_ok=True)
    for n, sess in sorted(sessions.items()):
        with open(os.path.join(out, n), "wb") as f:
            f.write(sess.bytes())
    print(f"{len(sessions)} inputs in {out}")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else here
    write(os.path.join(out, "corpus"), seeds())
    write(os.path.join(out, "regressions"), regressions())


if __name__ == "__main__":
    main()

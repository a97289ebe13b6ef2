#!/usr/bin/env python3
"""Writes the seed corpus of fuzz-vhost.c: virtqueue layouts a guest could
make, well-formed ones (a request per chain, split over descriptors, in an
indirect table) and the malformed ones a driver never makes (a loop, an
address outside guest memory, a length past its end, an avail index ahead
of the ring, a head past the table, an indirect table without the feature).

Each file is fuzz-vhost.c's input format: a configuration byte, how far
the avail index moves, the descriptor table, the avail ring's heads, then
guest memory from DATA_OFF.

    tools/virtiofsd/fuzz/gen-vhost-corpus.py [OUTDIR]

writes OUTDIR/vhost-corpus (default: next to this script).
"""

import os
import struct
import sys

GUEST_BASE = 0x100000
DATA_OFF = 0x4000
DATA = GUEST_BASE + DATA_OFF
F_NEXT, F_WRITE, F_INDIRECT = 1, 2, 4
# byte 0
REQUEST_QUEUE, INDIRECT, EVENT_IDX = 8, 0x10, 0x20
GETATTR, LOOKUP, FORGET, STATFS = 3, 1, 2, 17


def fuse_req(opcode, unique, nodeid, args=b""):
    """A FUSE request: fuse_in_header (40 bytes), then its arguments"""
    return struct.pack("<IIQQIIIHH", 40 + len(args), opcode, unique, nodeid,
                       0, 0, 1, 0, 0) + args


def getattr_req(unique, nodeid=1):
    # fuse_getattr_in: getattr_flags, dummy, fh
    return fuse_req(GETATTR, unique, nodeid, struct.pack("<IIQ", 0, 0, 0))


def desc(addr, length, flags=0, nxt=0):
    return struct.pack("<QIHH", addr, length, flags, nxt)


def session(cfg, descs, heads, data, num_log2=2, moved=None):
    """cfg: byte 0's flags; a queue of 2 << num_log2 entries"""
    num = 2 << num_log2
    table = b"".join(descs).ljust(num * 16, b"\0")[:num * 16]
    moved = len(heads) if moved is None else moved
    ring = b"".join(struct.pack("<H", h) for h in heads)
    return bytes([cfg | num_log2, moved]) + table + ring + data


def seeds():
    req = getattr_req(10)
    reply = 0x1000              # reply buffers at DATA + 0x1000...
    out = {}

    # One GETATTR: a readable and a writable descriptor
    out["getattr"] = session(REQUEST_QUEUE, [
        desc(DATA, len(req), F_NEXT, 1),
        desc(DATA + reply, 0x100, F_WRITE)], [0], req)

    # Three requests, the header split from its arguments
    reqs = b"".join(getattr_req(20 + i).ljust(0x80, b"\0") for i in range(3))
    descs = []
    for i in range(3):
        base = 4 * i
        descs += [desc(DATA + 0x80 * i, 16, F_NEXT, base + 1),
                  desc(DATA + 0x80 * i + 16, len(req) - 16, F_NEXT,
                       base + 2),
                  desc(DATA + reply + 0x100 * i, 16, F_NEXT | F_WRITE,
                       base + 3),
                  desc(DATA + reply + 0x100 * i + 16, 0xf0, F_WRITE)]
    out["split-three"] = session(REQUEST_QUEUE, descs, [0, 4, 8], reqs,
                                 num_log2=3)

    # A LOOKUP of "file" then a STATFS, event index on
    lookup = fuse_req(LOOKUP, 30, 1, b"file\0")
    statfs = fuse_req(STATFS, 31, 1)
    data = lookup.ljust(0x100, b"\0") + statfs
    out["lookup-statfs-event-idx"] = session(REQUEST_QUEUE | EVENT_IDX, [
        desc(DATA, len(lookup), F_NEXT, 1),
        desc(DATA + reply, 0x100, F_WRITE),
        desc(DATA + 0x100, len(statfs), F_NEXT, 3),
        desc(DATA + reply + 0x100, 0x100, F_WRITE)], [0, 2], data)

    # The same GETATTR through an indirect table in guest memory
    table = desc(DATA, len(req), F_NEXT, 1) + desc(DATA + reply, 0x100,
                                                    F_WRITE)
    data = req.ljust(0x800, b"\0") + table
    out["indirect"] = session(REQUEST_QUEUE | INDIRECT, [
        desc(DATA + 0x800, len(table), F_INDIRECT)], [0], data)
    # ... without the feature negotiated
    out["indirect-not-offered"] = session(REQUEST_QUEUE, [
        desc(DATA + 0x800, len(table), F_INDIRECT)], [0], data)
    # ... an indirect table whose length is not a multiple of 16
    out["indirect-odd-length"] = session(REQUEST_QUEUE | INDIRECT, [
        desc(DATA + 0x800, len(table) - 3, F_INDIRECT)], [0], data)

    # A FORGET on the hiprio queue: no reply
    forget = fuse_req(FORGET, 40, 2, struct.pack("<Q", 1))
    out["hiprio-forget"] = session(0, [desc(DATA, len(forget))], [0], forget)

    # Malformed: a loop, an address outside memory, a length past its end,
    # a head past the table, the avail index far ahead of the ring
    out["loop"] = session(REQUEST_QUEUE, [
        desc(DATA, len(req), F_NEXT, 1),
        desc(DATA + reply, 0x100, F_WRITE | F_NEXT, 0)], [0], req)
    out["outside-memory"] = session(REQUEST_QUEUE, [
        desc(0x40000000, len(req), F_NEXT, 1),
        desc(DATA + reply, 0x100, F_WRITE)], [0], req)
    out["length-past-end"] = session(REQUEST_QUEUE, [
        desc(DATA, len(req), F_NEXT, 1),
        desc(DATA + reply, 0x7fffffff, F_WRITE)], [0], req)
    out["head-past-table"] = session(REQUEST_QUEUE, [
        desc(DATA, len(req), F_NEXT, 1),
        desc(DATA + reply, 0x100, F_WRITE)], [200], req)
    out["avail-ahead"] = session(REQUEST_QUEUE, [
        desc(DATA, len(req), F_NEXT, 1),
        desc(DATA + reply, 0x100, F_WRITE)], [0], req, moved=200)
    # A readable descriptor after a writable one
    out["write-then-read"] = session(REQUEST_QUEUE, [
        desc(DATA + reply, 0x100, F_WRITE | F_NEXT, 1),
        desc(DATA, len(req))], [0], req)
    return out


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(
        os.path.abspath(__file__))
    corpus = os.path.join(outdir, "vhost-corpus")
    os.makedirs(corpus, exist_ok=True)
    for name, data in seeds().items():
        with open(os.path.join(corpus, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""bench/upstream_shmem.py's back-end against a scripted front-end on a
socketpair, the messages as upstream QEMU 11.1 sends them: its answers
(features, config space, shared memory regions, acks), the memory-table
bookkeeping, and a timed map that fails when QEMU refuses it or closes
the channel.  No QEMU, no guest: runs in a second."""

import array
import os
import socket
import struct
import sys
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import upstream_shmem as us  # noqa: E402

WINDOW = 1 << 30


def send(sock, req, flags, payload=b"", fds=()):
    anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
            array.array("i", fds).tobytes())] if fds else []
    sock.sendmsg([us.HDR.pack(req, flags, len(payload)) + payload], anc)


def receive(sock):
    """(request, flags, payload, fds) of one message."""
    fds = []
    req, flags, size = us.HDR.unpack(us.recv_exact(sock, us.HDR.size, fds))
    payload = us.recv_exact(sock, size, fds) if size else b""
    return req, flags, payload, fds


class Channel(unittest.TestCase):
    def setUp(self):
        self.qemu, theirs = socket.socketpair(socket.AF_UNIX,
                                              socket.SOCK_STREAM)
        self.fe = us.FrontEndChannel(theirs, WINDOW, 509, "bench")
        self.fe.start()
        # A back-end that does not answer fails the test, not hangs it
        self.qemu.settimeout(5)
        self.addCleanup(theirs.close)
        self.addCleanup(self.qemu.close)

    def ask(self, req, payload=b"", flags=us.VERSION, fds=()):
        send(self.qemu, req, flags, payload, fds)
        rreq, rflags, answer, rfds = receive(self.qemu)
        self.assertEqual((rreq, rflags), (req, us.VERSION | us.REPLY))
        return answer

    def test_answers(self):
        feats = struct.unpack("<Q", self.ask(us.GET_FEATURES))[0]
        self.assertEqual(feats, 1 << 32 | 1 << 30)
        proto = struct.unpack("<Q", self.ask(us.GET_PROTOCOL_FEATURES))[0]
        for bit in (us.F_REPLY_ACK, us.F_BACKEND_REQ, us.F_CONFIG,
                    us.F_CONFIGURE_MEM_SLOTS, 22):
            self.assertTrue(proto & 1 << bit, bit)
        self.assertEqual(struct.unpack("<Q", self.ask(us.GET_MAX_MEM_SLOTS))[0],
                         509)
        # the whole virtio-fs config space, then a piece of it
        cfg = self.ask(us.GET_CONFIG, struct.pack("<III", 0, 40, 0) + bytes(40))
        self.assertEqual(cfg[:12], struct.pack("<III", 0, 40, 0))
        self.assertEqual(cfg[12:17], b"bench")
        self.assertEqual(cfg[17:48], bytes(31))
        self.assertEqual(struct.unpack("<I", cfg[48:52])[0], 1)
        cfg = self.ask(us.GET_CONFIG, struct.pack("<III", 36, 4, 0) + bytes(4))
        self.assertEqual(struct.unpack("<I", cfg[12:])[0], 1)
        shm = self.ask(us.GET_SHMEM_CONFIG)
        self.assertEqual(len(shm), 8 + 8 * us.MAX_SHMEM_REGIONS)
        n, _, first, second = struct.unpack_from("<IIQQ", shm)
        self.assertEqual((n, first, second), (1, WINDOW, 0))

    def test_acks_and_table(self):
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(a.close)
        self.assertEqual(self.ask(us.SET_BACKEND_REQ_FD, b"",
                                  us.VERSION | us.NEED_REPLY, [b.fileno()]),
                         struct.pack("<Q", 0))
        b.close()
        self.assertIsNotNone(self.fe.backend)
        self.addCleanup(self.fe.backend.close)
        region = struct.pack("<Q4Q", 0, 1 << 32, 2 << 20, 0x7f0000, 0)
        memfd = os.memfd_create("t")
        self.addCleanup(os.close, memfd)
        for req in (us.ADD_MEM_REG, us.ADD_MEM_REG, us.REM_MEM_REG):
            self.assertEqual(self.ask(req, region, us.VERSION | us.NEED_REPLY,
                                      [memfd] if req == us.ADD_MEM_REG else []),
                             struct.pack("<Q", 0))
        self.assertTrue(self.fe.wait(lambda: len(self.fe.table) == 3, 5))
        self.assertEqual(self.fe.regions, 1)
        self.assertEqual([t[0] for t in self.fe.table],
                         [us.ADD_MEM_REG, us.ADD_MEM_REG, us.REM_MEM_REG])
        # a request without NEED_REPLY gets no answer: the next one's comes
        send(self.qemu, us.SET_OWNER, us.VERSION)
        self.assertEqual(struct.unpack("<Q", self.ask(us.GET_QUEUE_NUM))[0],
                         us.NUM_VQS)


class Timed(unittest.TestCase):
    """Bench.map as upstream answers it: reply, then ADD_MEM_REG."""

    def setUp(self):
        self.qemu, theirs = socket.socketpair(socket.AF_UNIX,
                                              socket.SOCK_STREAM)
        self.fe = us.FrontEndChannel(theirs, WINDOW, 509, "bench")
        self.fe.start()
        self.be_qemu, be = socket.socketpair(socket.AF_UNIX,
                                             socket.SOCK_STREAM)
        self.fe.backend = be
        self.qemu.settimeout(5)
        self.be_qemu.settimeout(5)
        self.memfd = os.memfd_create("w")
        os.ftruncate(self.memfd, WINDOW)
        self.bench = us.Bench(self.fe, self.memfd, 0.1)
        for c in (theirs.close, self.qemu.close, self.be_qemu.close, be.close):
            self.addCleanup(c)
        self.addCleanup(os.close, self.memfd)

    def fake_qemu(self, result, table):
        """Serve one SHMEM_MAP: answer result, then (table) send the
        memory-table message; returns what the map carried."""
        seen = {}

        def run():
            req, flags, payload, fds = receive(self.be_qemu)
            seen["msg"] = (req, flags, us.MMAP.unpack(payload), len(fds))
            for fd in fds:
                os.close(fd)
            send(self.be_qemu, req, us.VERSION | us.REPLY,
                 struct.pack("<Q", result))
            if table:
                send(self.qemu, us.ADD_MEM_REG, us.VERSION | us.NEED_REPLY,
                     bytes(40))
                seen["ack"] = receive(self.qemu)
        t = threading.Thread(target=run)
        t.start()
        return t, seen

    def test_map_waits_for_the_table_message(self):
        t, seen = self.fake_qemu(0, True)
        t0, t1, tab = self.bench.map(4 << 20)
        t.join(5)
        req, flags, (shmid, fd_off, shm_off, length, mflags), nfds = seen["msg"]
        self.assertEqual((req, flags), (us.BACKEND_SHMEM_MAP,
                                        us.VERSION | us.NEED_REPLY))
        self.assertEqual((shmid, fd_off, shm_off, length, mflags, nfds),
                         (0, 4 << 20, 4 << 20, us.RANGE, us.MAP_RW, 1))
        self.assertTrue(self.bench.table_follows)
        self.assertEqual(tab[0], us.ADD_MEM_REG)
        self.assertGreaterEqual(tab[1], t0)
        self.assertEqual(seen["ack"][0], us.ADD_MEM_REG)

    def test_refused_map_fails(self):
        t, _ = self.fake_qemu(1, False)
        with self.assertRaisesRegex(us.Failed, "SHMEM_MAP at 2 MiB answered 1"):
            self.bench.map(2 << 20)
        t.join(5)

    def test_closed_channel_fails(self):
        def run():
            receive(self.be_qemu)
            self.be_qemu.shutdown(socket.SHUT_RDWR)
        t = threading.Thread(target=run)
        t.start()
        with self.assertRaisesRegex(us.Failed, "closed the back-end channel"):
            self.bench.map(0)
        t.join(5)


if __name__ == "__main__":
    unittest.main()

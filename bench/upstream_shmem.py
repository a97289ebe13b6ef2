#!/usr/bin/env python3
"""Map+unmap pairs/s of unmodified upstream QEMU (>= 11.1) with N live
mappings, and the live count at which it fails or slows past a limit.

Upstream QEMU has no qtest for its generic shared memory, so this program
is the back-end: it listens on a vhost-user socket, QEMU's
vhost-user-test-device-pci (virtio-id=26) connects to it, and a minimal
guest (harness initramfs, a script that only sleeps) binds its virtio-fs
driver so that QEMU starts the device.  That matters: upstream puts every
mapping into the vhost memory table of a started device, and that is the
cost being measured; without a driver the table is never sent.

The back-end answers GET_SHMEM_CONFIG with one region (the window), then
on the back-end channel sends SHMEM_MAP / SHMEM_UNMAP (NEED_REPLY) for
2 MiB ranges of one memfd: N-1 ranges stay mapped, one more is mapped and
unmapped repeatedly.  A pair is timed from sending the map until QEMU has
answered the unmap and the memory-table messages both caused have been
answered, so that QEMU is idle again; each part is recorded apart:

  map     SHMEM_MAP sent -> its reply
  add     map reply -> the table message for the new mapping arrives
          (QEMU's memory transaction and vhost's listener, in QEMU)
  unmap   SHMEM_UNMAP sent -> its reply
  rem     unmap reply -> the table message for the removal arrives
  be      time this back-end spent answering the table messages

and the CPU time QEMU's main thread (which runs all of it) used per pair,
from its schedstat: on a loaded machine the pair's wall time also holds
the time QEMU waited for a CPU.

Output, one line per live count, for bench/run.py:

  upstream map+unmap: N live: median pair P us, R pairs/s; map M us,
    add A us, unmap U us, rem D us, back-end B us, QEMU main thread
    C us of CPU a pair (K pairs)
  upstream slow: N live: reached: the first count whose median pair
    passed --slow-ms (or "not reached: why")
  upstream fill: N live: last map M ms, table T regions   (--find-limit)
  upstream limit: N live: failed: WHY   (N mapped, the next map failed)
  upstream limit: N live: none: the window is full

    bench/upstream_shmem.py [--qemu PATH] [--live 1,16,64,...]
        [--slow-ms 100] [--max-slots N] [--find-limit] [--trace FILE]
        [--perf FILE]
"""

import argparse
import array
import mmap
import os
import select
import shlex
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "harness"))
import vm  # noqa: E402  (the guest files and the initramfs builder)

UPSTREAM_QEMU = os.path.join(vm.BUILD, "upstream-qemu", "qemu-system-x86_64")
MiB = 1 << 20
RANGE = 2 * MiB                    # the guest's DAX range size

# vhost-user, as the spec numbers them
VERSION, REPLY, NEED_REPLY = 0x1, 0x4, 0x8
GET_FEATURES, SET_FEATURES, SET_OWNER, RESET_OWNER = 1, 2, 3, 4
SET_MEM_TABLE, GET_VRING_BASE, SET_VRING_KICK = 5, 11, 12
GET_PROTOCOL_FEATURES, SET_PROTOCOL_FEATURES, GET_QUEUE_NUM = 15, 16, 17
SET_BACKEND_REQ_FD, GET_CONFIG = 21, 24
GET_MAX_MEM_SLOTS, ADD_MEM_REG, REM_MEM_REG = 36, 37, 38
GET_SHMEM_CONFIG = 44
BACKEND_SHMEM_MAP, BACKEND_SHMEM_UNMAP = 9, 10
TABLE_MSGS = (SET_MEM_TABLE, ADD_MEM_REG, REM_MEM_REG)
NAMES = {SET_MEM_TABLE: "SET_MEM_TABLE", ADD_MEM_REG: "ADD_MEM_REG",
         REM_MEM_REG: "REM_MEM_REG"}

F_MQ, F_REPLY_ACK, F_BACKEND_REQ, F_CONFIG = 0, 3, 5, 9
F_BACKEND_SEND_FD, F_CONFIGURE_MEM_SLOTS, F_SHMEM = 10, 15, 22
PROTOCOL = sum(1 << b for b in (F_MQ, F_REPLY_ACK, F_BACKEND_REQ, F_CONFIG,
                                F_BACKEND_SEND_FD, F_CONFIGURE_MEM_SLOTS,
                                F_SHMEM))
FEATURES = 1 << 32 | 1 << 30       # VERSION_1, VHOST_USER_F_PROTOCOL_FEATURES
MAX_SHMEM_REGIONS = 256
NUM_VQS = 2
HDR = struct.Struct("<III")
MMAP = struct.Struct("<B7xQQQQ")   # shmid, fd_offset, shm_offset, len, flags
MAP_RW = 1


class Failed(Exception):
    pass


def recv_exact(sock, n, fds):
    """n bytes from sock; file descriptors passed with them go to fds."""
    buf = b""
    while len(buf) < n:
        data, anc, _, _ = sock.recvmsg(n - len(buf),
                                       socket.CMSG_LEN(16 * 4))
        if not data:
            raise EOFError
        buf += data
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                a = array.array("i")
                a.frombytes(payload[:len(payload) - len(payload) % 4])
                fds.extend(a)
    return buf


class FrontEndChannel(threading.Thread):
    """Answers QEMU's requests; notes when the device started and every
    memory-table message with its arrival and answer times."""

    def __init__(self, sock, window, max_slots, tag):
        super().__init__(daemon=True)
        self.sock, self.window, self.max_slots = sock, window, max_slots
        self.tag = tag.encode()
        self.protocol = 0
        self.backend = None
        self.kicked = set()
        self.regions = 0
        self.table = []             # (request, arrived, answered)
        self.cond = threading.Condition()
        self.error = None

    def reply(self, req, payload, fds=()):
        msg = HDR.pack(req, VERSION | REPLY, len(payload)) + payload
        self.sock.sendmsg([msg])

    def run(self):
        try:
            while True:
                self.one()
        except EOFError:
            self.error = "QEMU closed the vhost-user connection"
        except OSError as e:
            self.error = f"vhost-user connection: {e}"
        with self.cond:
            self.cond.notify_all()

    def one(self):
        fds = []
        req, flags, size = HDR.unpack(recv_exact(self.sock, HDR.size, fds))
        arrived = time.perf_counter()
        payload = recv_exact(self.sock, size, fds) if size else b""
        keep = None
        answer = None
        if req == GET_FEATURES:
            answer = struct.pack("<Q", FEATURES)
        elif req == GET_PROTOCOL_FEATURES:
            answer = struct.pack("<Q", PROTOCOL)
        elif req == SET_PROTOCOL_FEATURES:
            self.protocol = struct.unpack_from("<Q", payload)[0]
        elif req == GET_QUEUE_NUM:
            answer = struct.pack("<Q", NUM_VQS)
        elif req == GET_MAX_MEM_SLOTS:
            answer = struct.pack("<Q", self.max_slots)
        elif req == SET_BACKEND_REQ_FD:
            keep = fds[0] if fds else None
        elif req == GET_SHMEM_CONFIG:
            sizes = [self.window] + [0] * (MAX_SHMEM_REGIONS - 1)
            answer = struct.pack(f"<II{MAX_SHMEM_REGIONS}Q", 1, 0, *sizes)
        elif req == GET_CONFIG:
            off, length, cflags = struct.unpack_from("<III", payload)
            # struct virtio_fs_config: tag[36], num_request_queues
            cfg = self.tag.ljust(36, b"\0") + struct.pack("<I", NUM_VQS - 1)
            cfg = cfg[off:off + length].ljust(length, b"\0")
            answer = struct.pack("<III", off, length, cflags) + cfg
        elif req == GET_VRING_BASE:
            answer = payload[:4] + struct.pack("<I", 0)
        elif req == SET_VRING_KICK:
            self.kicked.add(struct.unpack_from("<Q", payload)[0] & 0xff)
        elif req == ADD_MEM_REG:
            self.regions += 1
        elif req == REM_MEM_REG:
            self.regions -= 1
        elif req == SET_MEM_TABLE:
            self.regions = struct.unpack_from("<I", payload)[0]
        for fd in fds:
            if fd != keep:
                os.close(fd)
        if keep is not None:
            self.backend = socket.socket(fileno=keep)
        if answer is not None:
            self.reply(req, answer)
        elif flags & NEED_REPLY:
            self.reply(req, struct.pack("<Q", 0))
        with self.cond:
            if req in TABLE_MSGS:
                self.table.append((req, arrived, time.perf_counter()))
            self.cond.notify_all()

    def wait(self, pred, timeout):
        end = time.monotonic() + timeout
        with self.cond:
            while not pred():
                if self.error:
                    raise Failed(self.error)
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
        return True


class Bench:
    def __init__(self, fe, memfd, slow_s):
        self.fe, self.memfd, self.slow_s = fe, memfd, slow_s
        self.live = set()            # offsets of the background mappings
        self.table_follows = None    # does a map change the memory table?

    def request(self, req, off, flags, fd=None):
        """One back-end request with NEED_REPLY; returns the reply's u64."""
        be = self.fe.backend
        msg = HDR.pack(req, VERSION | NEED_REPLY, MMAP.size) + \
            MMAP.pack(0, off if fd is not None else 0, off, RANGE, flags)
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                array.array("i", [fd]).tobytes())] if fd is not None else []
        be.sendmsg([msg], anc)
        ready, _, _ = select.select([be], [], [], max(60, 20 * self.slow_s))
        if not ready:
            raise Failed(f"no reply to {'SHMEM_MAP' if req == 9 else 'SHMEM_UNMAP'} "
                         f"within {max(60, 20 * self.slow_s):.0f}s")
        fds = []
        try:
            rreq, rflags, size = HDR.unpack(recv_exact(be, HDR.size, fds))
            payload = recv_exact(be, size, fds) if size else b""
        except EOFError:
            raise Failed("QEMU closed the back-end channel") from None
        for f in fds:
            os.close(f)
        if rreq != req or not rflags & REPLY or size != 8:
            raise Failed(f"unexpected reply {rreq}/{rflags:#x}/{size}")
        return struct.unpack("<Q", payload)[0]

    def table_after(self, start, timeout):
        """The first memory-table message that arrived after start, once
        answered: (request, arrived, answered) or None."""
        def found():
            return any(a >= start for _, a, _ in self.fe.table)
        if not self.fe.wait(found, timeout):
            return None
        with self.fe.cond:
            return next(t for t in self.fe.table if t[1] >= start)

    def map(self, off):
        t0 = time.perf_counter()
        r = self.request(BACKEND_SHMEM_MAP, off, MAP_RW, self.memfd)
        t1 = time.perf_counter()
        if r:
            raise Failed(f"SHMEM_MAP at {off >> 20} MiB answered {r} "
                         f"(table: {self.fe.regions} regions)")
        return t0, t1, self.settle(t0)

    def unmap(self, off):
        t0 = time.perf_counter()
        r = self.request(BACKEND_SHMEM_UNMAP, off, 0)
        t1 = time.perf_counter()
        if r:
            raise Failed(f"SHMEM_UNMAP at {off >> 20} MiB answered {r}")
        return t0, t1, self.settle(t0)

    def settle(self, t0):
        """The memory-table message the request sent at t0 caused, once
        answered; whether upstream sends one is found out on the first
        map (5 s of waiting), and not waited for again if not."""
        if self.table_follows is False:
            return None
        t = self.table_after(t0, 5 if self.table_follows is None
                             else max(60, 20 * self.slow_s))
        if self.table_follows is None:
            self.table_follows = t is not None
            self.follows = NAMES[t[0]] if t else "-"
        elif t is None:
            raise Failed("no memory-table message after a request")
        return t

    def pair(self, off):
        """One map+unmap of the range at off: the parts, in seconds."""
        m0, m1, madd = self.map(off)
        u0, u1, urem = self.unmap(off)
        end = max(u1, urem[2] if urem else 0)
        part = {"pair": end - m0, "map": m1 - m0, "unmap": u1 - u0,
                "add": (madd[1] - m1) if madd else 0.0,
                "rem": (urem[1] - u1) if urem else 0.0,
                "be": ((madd[2] - madd[1]) if madd else 0) +
                      ((urem[2] - urem[1]) if urem else 0)}
        return part

    def fill(self, n, window, limit_s, report=None):
        """Background mappings until n are live besides the timed one;
        report(live, seconds) after each map when given."""
        while len(self.live) < n:
            off = (len(self.live) + 1) * RANGE
            if off + RANGE > window:
                raise Failed(f"the {window >> 20} MiB window holds no more "
                             "ranges")
            t0, t1, t = self.map(off)
            self.live.add(off)
            took = (t[2] if t else t1) - t0
            if report:
                report(len(self.live), took)
            if took > limit_s:
                raise Failed(f"one map took {took:.1f}s (limit {limit_s:.0f}s)")


def thread_cpu(pid):
    """Seconds the thread pid (QEMU's main loop) has run on a CPU."""
    try:
        with open(f"/proc/{pid}/task/{pid}/schedstat") as f:
            return int(f.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


def fmt_line(label, live, parts, cpu):
    med = {k: statistics.median(p[k] for p in parts) for k in parts[0]}
    return (f"{label} map+unmap: {live} live: median pair "
            f"{med['pair'] * 1e6:.1f} us, {1 / med['pair']:.0f} pairs/s; "
            f"map {med['map'] * 1e6:.1f} us, add {med['add'] * 1e6:.1f} us, "
            f"unmap {med['unmap'] * 1e6:.1f} us, rem {med['rem'] * 1e6:.1f} us, "
            f"back-end {med['be'] * 1e6:.1f} us, QEMU main thread "
            f"{cpu * 1e6:.1f} us of CPU a pair ({len(parts)} pairs)"), med


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--qemu", help="the QEMU binary (default: "
                    "build/upstream-qemu's, or with --fork build/qemu's)")
    ap.add_argument("--fork", action="store_true",
                    help="our fork's vhost-user-fs-pci with cache-size "
                    "instead of upstream's generic device, for the same "
                    "measurement on both")
    ap.add_argument("--live", default="1,16,64,256,384,448",
                    help="live mapping counts to time, ascending")
    ap.add_argument("--pairs", type=int, default=20,
                    help="pairs timed per live count (fewer when slow)")
    ap.add_argument("--slow-ms", type=float, default=100,
                    help="stop once a pair takes this long")
    ap.add_argument("--max-slots", type=int, default=509,
                    help="GET_MAX_MEM_SLOTS answer (libvhost-user's: 509)")
    ap.add_argument("--window", default="4G")
    ap.add_argument("--find-limit", action="store_true",
                    help="then map more ranges, one at a time, until a map "
                    "fails or the window is full")
    ap.add_argument("--trace", help="QEMU trace events to FILE "
                    "(vhost_commit, vhost_section)")
    ap.add_argument("--attach", metavar="CMD",
                    help="a profiler to run on QEMU while the pairs of the "
                    "last live count run, {pid} for QEMU's process id "
                    "(e.g. 'perf record -g -p {pid} -o FILE'); it gets "
                    "SIGINT when they are done")
    ap.add_argument("--timeout", type=int, default=900)
    args = ap.parse_args()
    window = vm.parse_size(args.window)
    args.label = "fork" if args.fork else "upstream"
    args.qemu = args.qemu or (vm.QEMU if args.fork else UPSTREAM_QEMU)
    levels = [int(x) for x in args.live.split(",")]
    slow = args.slow_ms / 1e3
    if not os.access(args.qemu, os.X_OK):
        print(f"{args.label} limit: 0 live: error: {args.qemu} is missing "
              "(mk/upstream-qemu.sh)")
        return 1

    tmp = tempfile.mkdtemp(prefix="vfsdax-ushm-")
    path = os.path.join(tmp, "vu.sock")
    lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lsock.bind(path)
    lsock.listen(1)
    memfd = os.memfd_create("window")
    os.ftruncate(memfd, window)
    initrd = vm.make_initrd(tmp, "echo up\nsleep 100000\n", {})
    qcmd = [args.qemu, "-nodefaults", "-no-user-config", "-display", "none",
            "-machine", "q35,memory-backend=mem",
            "-object", "memory-backend-memfd,id=mem,size=512M,share=on",
            "-m", "512M", "-smp", "1", "-accel", "tcg", "-cpu", "max",
            "-kernel", os.path.join(vm.GUEST, "vmlinuz"), "-initrd", initrd,
            "-append", "console=ttyS0 panic=-1 loglevel=4",
            "-serial", f"file:{tmp}/console.log", "-no-reboot",
            "-chardev", f"socket,id=vu,path={path}",
            "-device", f"vhost-user-fs-pci,chardev=vu,tag=bench,"
                       f"cache-size={window >> 20}M" if args.fork else
                       "vhost-user-test-device-pci,chardev=vu,virtio-id=26,"
                       f"num_vqs={NUM_VQS},config_size=40"]
    for d in vm.FIRMWARE_DIRS:
        if os.path.isdir(d):
            qcmd += ["-L", d]
    if args.trace:
        qcmd += ["-trace", "vhost_commit", "-trace", "vhost_section",
                 "-D", args.trace]
    qlog = open(os.path.join(tmp, "qemu.log"), "w")
    qemu = subprocess.Popen(qcmd, stdout=qlog, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + args.timeout
    rc = 0
    b = fe = None
    try:
        lsock.settimeout(60)
        conn, _ = lsock.accept()
        conn.settimeout(None)
        fe = FrontEndChannel(conn, window, args.max_slots, "bench")
        fe.start()
        # The driver kicks both queues once QEMU starts the device
        if not fe.wait(lambda: len(fe.kicked) >= NUM_VQS and fe.backend, 120):
            raise Failed("the guest did not start the device within 120s: " +
                         vm.tail(os.path.join(tmp, "console.log")))
        time.sleep(1)
        print(f"{args.label}: {qemu_version(args.qemu)}; device started, "
              f"{fe.regions} memory-table regions (guest RAM), window "
              f"{window >> 20} MiB, GET_MAX_MEM_SLOTS answered "
              f"{args.max_slots}", flush=True)
        b = Bench(fe, memfd, slow)
        for live in levels:
            if time.monotonic() > deadline:
                print(f"{args.label} slow: {live} live: not reached: out of time")
                break
            b.fill(live - 1, window, max(10, 100 * slow))
            perf = None
            if args.attach and live == levels[-1]:
                perf = subprocess.Popen(
                    shlex.split(args.attach.replace("{pid}", str(qemu.pid))),
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(1)
            b.pair(0)   # not timed: the first one waits to see what follows
            parts, t_end = [], time.monotonic() + 5
            cpu0 = thread_cpu(qemu.pid)
            while len(parts) < args.pairs and \
                    (len(parts) < 3 or time.monotonic() < t_end):
                parts.append(b.pair(0))
            cpu = (thread_cpu(qemu.pid) - cpu0) / len(parts)
            if perf:
                perf.send_signal(2)
                perf.wait()
            line, med = fmt_line(args.label, live, parts, cpu)
            print(line, flush=True)
            if live == levels[0]:
                print(f"{args.label}: a map {'is' if b.table_follows else 'is not'} "
                      f"followed by a memory-table message ({b.follows}); "
                      f"table now {fe.regions} regions", flush=True)
            if med["pair"] > slow:
                print(f"{args.label} slow: {live} live: reached: median pair "
                      f"{med['pair'] * 1e3:.1f} ms > {args.slow_ms:.0f} ms",
                      flush=True)
                break
        else:
            print(f"{args.label} slow: {levels[-1]} live: not reached: every "
                  f"count kept under {args.slow_ms:.0f} ms", flush=True)
        if args.find_limit:
            def report(n, took):
                if n % 16 == 0:
                    print(f"{args.label} fill: {n} live: last map "
                          f"{took * 1e3:.1f} ms, table {fe.regions} regions",
                          flush=True)
            # Every range of the window, or the first map that fails
            b.fill(window // RANGE - 1, window, 30, report)
            print(f"{args.label} limit: {len(b.live)} live: none: the "
                  f"{window >> 20} MiB window is full", flush=True)
    except Failed as e:
        live = len(b.live) if b else 0
        try:
            qemu.wait(5)    # a QEMU that aborts closes its sockets first
        except subprocess.TimeoutExpired:
            pass
        alive = qemu.poll() is None
        print(f"{args.label} limit: {live} live: failed: one more: {e}; "
              f"table {fe.regions if fe else 0} regions; QEMU "
              f"{'still runs' if alive else f'exited ({qemu.returncode})'}: "
              + " | ".join(vm.tail(os.path.join(tmp, 'qemu.log'), 4)
                           .strip().splitlines()), flush=True)
    except Exception as e:  # a broken harness, not a measurement
        print(f"{args.label} limit: 0 live: error: {e!r}", flush=True)
        rc = 1
    finally:
        vm.stop(qemu)
        qlog.close()
        os.close(memfd)
        lsock.close()
        subprocess.run(["rm", "-rf", tmp])
    return rc


def qemu_version(q):
    try:
        return subprocess.run([q, "--version"], stdout=subprocess.PIPE,
                              text=True, timeout=30).stdout.splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown QEMU"


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""make check: build what the tests need, run every test, report.

Each suite below is a command.  A suite that speaks TAP contributes one
result per test point; any other suite is one result by its exit status.
A suite whose program is missing FAILS with what is missing: nothing is
skipped silently.  The last line is "N passed, N failed[, N skipped]".
A test of MUST_RUN that skips where its probe says this machine can run
it (KVM answers, root, a file system with the ioctl) fails its suite.

TAP is read from the suite's stdout only (its stderr is shown, never
counted).  A TAP suite fails unless its plan (1..N) matches the test
points it gave, at least one of them passed, and no "Bail out!"; a qos
suite fails unless each path it names ran and passed.

Each suite runs in its own session with $VFSDAX_DEADLINE set to a moment
before its limit, so that harness/vm.py ends its guests in time.  This
program is the subreaper of everything a suite starts: a suite that runs
past its limit is sent SIGTERM, then SIGKILL, with every process it left,
QEMU and daemons in sessions of their own included; a suite that ends
and leaves processes running fails.

    [QEMU_BASE=X] mk/check.py [-k SUBSTRING] [--list] [-v]

On a base X other than the default (bases/X/), built in build/base-X,
only the EVERY_BASE suites run unless -k picks others.
"""

import argparse
import ctypes
import fcntl
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def default_base():
    """The default upstream base, X.Y of qemu.pin's QEMU_VERSION."""
    with open(os.path.join(TOP, "qemu.pin")) as f:
        m = re.search(r"^QEMU_VERSION=(\d+\.\d+)", f.read(), re.M)
    return m.group(1)


# The upstream base (README "Upstream bases"): QEMU_BASE=X builds and
# tests in build/base-X, with the one guest of build/guest.  The Makefile
# passes BUILD (the base's own directory) and GUEST_DIR; run by hand
# without BUILD, they follow from QEMU_BASE.
DEFAULT_BASE = default_base()
QEMU_BASE = os.environ.get("QEMU_BASE") or DEFAULT_BASE
if QEMU_BASE != DEFAULT_BASE and \
        not os.path.isfile(os.path.join(TOP, "bases", QEMU_BASE, "qemu.pin")):
    sys.exit(f"check: no upstream base {QEMU_BASE} (bases/{QEMU_BASE}/qemu.pin)")
BUILD = os.environ.get("BUILD", os.path.join(TOP, "build"))
if QEMU_BASE != DEFAULT_BASE and "BUILD" not in os.environ:
    os.environ.setdefault("GUEST_DIR", os.path.join(BUILD, "guest"))
    BUILD = os.path.join(BUILD, f"base-{QEMU_BASE}")
GUEST_DIR = os.environ.get("GUEST_DIR", os.path.join(BUILD, "guest"))
INITRAMFS = os.path.join(GUEST_DIR, "initramfs.cpio.gz")
# What the suites (vm.py, mk/verify-tree.sh) must see
os.environ.update(QEMU_BASE=QEMU_BASE, BUILD=BUILD, GUEST_DIR=GUEST_DIR)
QBUILD = os.path.join(BUILD, "qemu")
QEMU = os.path.join(QBUILD, "qemu-system-x86_64")
VM = os.path.join(TOP, "harness", "vm.py")
VIRTIOFSD = os.path.join(QBUILD, "tools", "virtiofsd", "virtiofsd")
UPSTREAM_QEMU = os.path.join(BUILD, "upstream-qemu", "qemu-system-x86_64")
LOADGEN = os.path.join(QBUILD, "tests", "unit", "virtiofsd", "loadgen")

QOS_ENV = {"QTEST_QEMU_BINARY": QEMU,
           "QTEST_QEMU_STORAGE_DAEMON_BINARY":
               os.path.join(QBUILD, "storage-daemon", "qemu-storage-daemon"),
           "QTEST_QEMU_IMG": os.path.join(QBUILD, "qemu-img"),
           "G_TEST_DBUS_DAEMON": "/bin/true"}


# A suite's processes get this long to end after SIGTERM before SIGKILL,
# and vm.py's guests must end this long before the suite's limit.
KILL_GRACE = 20
DEADLINE_MARGIN = 15


class Suite:
    def __init__(self, name, cmd, tap=False, env=None, needs=(), ninja=(),
                 timeout=600, must_run=()):
        self.name, self.cmd, self.tap = name, cmd, tap
        # run on every base, not only the default one (see EVERY_BASE)
        self.every_base = False
        self.env = env or {}
        self.needs = list(needs)        # files that must exist to run
        self.ninja = list(ninja)        # ninja targets in build/qemu to build first
        self.timeout = timeout
        # TAP descriptions: each prefix must begin a passed test point
        self.must_run = list(must_run)
        # Test points that must run and pass where their probe says this
        # machine can run them: (path, probe, why), from MUST_RUN
        self.must_pass = []


def qos(name, paths, timeout=300):
    """Upstream's qgraph tests (qos-test), restricted to the given paths."""
    binary = os.path.join(QBUILD, "tests", "qtest", "qos-test")
    cmd = [binary, "--tap", "-k"]
    for p in paths:
        cmd += ["-r", p]
    return Suite(name, cmd, tap=True, env=QOS_ENV, needs=[binary, QEMU],
                 ninja=["tests/qtest/qos-test"], timeout=timeout,
                 must_run=paths)


def qtest(name, binary_name, args=(), env=None, ninja=(), timeout=300):
    """A qtest program of ours; ENV adds to QOS_ENV, NINJA are more targets
    it needs built."""
    binary = os.path.join(QBUILD, "tests", "qtest", binary_name)
    return Suite(name, [binary, "--tap", "-k"] + list(args), tap=True,
                 env=dict(QOS_ENV, **(env or {})), needs=[binary, QEMU],
                 ninja=[f"tests/qtest/{binary_name}", *ninja],
                 timeout=timeout)


# The long fsx run: 50,000 operations on the default base (about 4
# minutes under TCG; 100,000 until 2026-11-28, halved to make room in
# CI's time for the fstests subset); on the
# other bases, which differ from it only in the patches' hooks, 20,000
# keep check-bases inside CI's time.
FSX_LONG_OPS = 50000 if QEMU_BASE == DEFAULT_BASE else 20000
FSX_LONG = (f"guest: DAX fsx, {FSX_LONG_OPS:,} random operations, "
            "32 MiB window")


def guest(name, script, *vm_args, timeout=600):
    """A guest-harness test: harness/tests/SCRIPT runs on the host, boots a
    guest through harness/vm.py (given VM_ARGS) and gives the verdict."""
    return Suite(name, ["bash", os.path.join(TOP, "harness", "tests", script),
                        "--timeout", str(timeout - 30), *vm_args],
                 needs=[QEMU, INITRAMFS], timeout=timeout)


def guest_inodes(how, name, script, *vm_args, timeout=600):
    """A guest test with our virtiofsd holding inodes by HOW, "handle"
    (--inode-file-handles=mandatory) or "fd" (never), which
    harness/tests/inodes-by.sh checks in the daemon's log."""
    s = guest(name, script, *vm_args, timeout=timeout)
    s.cmd[1:2] = [os.path.join(TOP, "harness", "tests", "inodes-by.sh"),
                  how, script]
    return s


# The guest kernel matrix (README "Guest kernels"): the suites boot
# GUEST_KERNEL's guest (trixie's 6.12 by default) from GUEST_DIR; those of
# on_kernel() boot the other kernels' (bookworm's 6.1 and sid's), from
# GUEST_DIR_BOOKWORM, GUEST_DIR_SID or GUEST_DIR_TRIXIE, by default beside
# GUEST_DIR (guest-NAME, trixie's guest); make guest-matrix builds them.
GUEST_KERNEL = os.environ.get("GUEST_KERNEL") or "trixie"
# On by default (about 3.5 minutes on an idle machine); CHECK_KERNELS=0
# leaves the other kernels out.
MATRIX_KERNELS = [k for k in ("bookworm", "trixie", "sid")
                  if k != GUEST_KERNEL] \
    if os.environ.get("CHECK_KERNELS", "1") != "0" else []


def kernel_series(kernel):
    """Linux X.Y of the kernel qemu.pin pins for Debian release KERNEL."""
    var = "KERNEL_PACKAGE" if kernel == "trixie" \
        else "KERNEL_PACKAGE_" + kernel.upper()
    with open(os.path.join(TOP, "qemu.pin")) as f:
        m = re.search(rf"^{var}=linux-[a-z]+-(\d+\.\d+)", f.read(), re.M)
    return m.group(1) if m else "?"


def kernel_guest_dir(kernel):
    if kernel == GUEST_KERNEL:
        return GUEST_DIR
    return os.environ.get("GUEST_DIR_" + kernel.upper()) or \
        os.path.join(os.path.dirname(GUEST_DIR),
                     "guest" if kernel == "trixie" else "guest-" + kernel)


def checking_init(s, kernel=GUEST_KERNEL):
    """Guest suite S run through harness/tests/on-kernel.sh, which checks
    what KERNEL negotiated at FUSE_INIT (FUSE version, flags) against what
    it is known to."""
    script = os.path.basename(s.cmd[1])
    s.cmd[1:2] = [os.path.join(TOP, "harness", "tests", "on-kernel.sh"),
                  kernel, script]
    return s


def on_kernel(kernel, what, script, *vm_args, timeout=600, env=None):
    """A guest test on Debian release KERNEL's kernel, its FUSE_INIT
    checked (checking_init())."""
    s = checking_init(guest(f"guest on {kernel}'s {kernel_series(kernel)}: "
                            f"{what}", script, *vm_args, timeout=timeout),
                      kernel)
    d = kernel_guest_dir(kernel)
    s.env = dict(env or {}, GUEST_KERNEL=kernel, GUEST_DIR=d)
    s.needs = [QEMU, os.path.join(d, "initramfs.cpio.gz")]
    return s


def kernel_matrix(kernel):
    """What runs on each of the matrix's other kernels: a smoke test, the
    POSIX exercise, DAX through the window (dax=always, and dax=inode),
    fsx through a window smaller than its files, and a live migration with
    a DAX mapping, each shortened: the full set runs on trixie's."""
    return [
        on_kernel(kernel, "virtio-fs smoke (our virtiofsd)", "smoke.sh",
                  "--daemon", "ours", "--cache-mode", "never", timeout=300),
        # Without the third run (locks on the host), the daemon's alone
        on_kernel(kernel, "POSIX exercise, ours = Rust virtiofsd = host",
                  "posix.sh", timeout=900, env={"POSIX_LOCKS": "0"}),
        on_kernel(kernel, "DAX (our virtiofsd), dax=always, window smaller "
                  "than the data", "dax.sh", "--daemon", "ours",
                  timeout=600),
        # size:1M: one file by DAX, two not, in one guest
        on_kernel(kernel, "DAX per file, dax=inode, --dax-policy=size:1M",
                  "dax-policy.sh", timeout=300,
                  env={"DAX_POLICIES": "size:1M"}),
        on_kernel(kernel, "DAX fsx, 20,000 operations", "fsx.sh",
                  "--daemon", "ours", "--env", "FSX_OPS=20000", timeout=900),
        on_kernel(kernel, "live migration with a DAX mmap, re-mapped "
                  "before resume", "migrate-dax.sh", "mmap", timeout=300),
    ]


def many_inodes(mode, what):
    """harness/tests/many-inodes.sh, smaller than its 200,000 files"""
    s = guest(f"guest: 40,000 stats under --rlimit-nofile=10000, {what}",
              "many-inodes.sh", mode, timeout=900)
    s.env = {"FILES": "40000", "NOFILE": "10000"}
    return s


def unit(name, target, timeout=120, env=None):
    """A GLib test program of ours, built by ninja in build/qemu."""
    binary = os.path.join(QBUILD, target)
    return Suite(name, [binary, "--tap", "-k"], tap=True, needs=[binary],
                 ninja=[target], timeout=timeout, env=env)


# Scratch directories of the unit tests that compare the daemon with the
# host's own answers: on the build directory's file system rather than
# TMPDIR's, which may lack what they compare (ramfs has no attribute
# ioctls, and there a daemon that never answers would match the host).
BUILD_TMP = os.path.join(BUILD, "tmp")


VHOST_USER_PATH = "/x86_64/pc/i440FX-pcihost/pci-bus-pc/pci-bus"

SUITES = [
    Suite("tree: patches/ and our files reproduce build/src",
          [os.path.join(TOP, "mk", "verify-tree.sh")]),
    # Every new file has its patch in patches/series.map, and the export
    # applies to the pinned upstream with git am (make series).
    Suite("series: the fork exports as one git-am series",
          [os.path.join(TOP, "mk", "series.sh"), "export"], timeout=300),
    # make bench's verdicts from made-up figures (no guest)
    Suite("bench: targets and reports from known figures",
          [sys.executable, os.path.join(TOP, "bench", "test_report.py")]),
    # The fstests gate (harness/fstests/run.py --gate, the fstests
    # suite's verdict) from made-up results: a result missing, a test run
    # nowhere or failed everywhere unexplained fail it (no guest)
    Suite("fstests: the gate's verdicts from made-up results",
          [sys.executable, os.path.join(TOP, "harness", "fstests",
                                        "test_gate.py")]),
    # Where fstests' source comes from (mk/fstests-source.sh): the
    # pinned tag fetched from a made-up upstream (file://) where nothing
    # is beside the project, checked against its pin, kept, refused when
    # it differs; no network
    Suite("fstests: the source is fetched and checked where none is beside "
          "the project",
          ["bash", os.path.join(TOP, "harness", "fstests",
                                "test_source.sh")], timeout=60),
    # make bench's own vhost-user back-end, against a scripted front-end
    Suite("bench: upstream_shmem's back-end against scripted messages",
          [sys.executable, os.path.join(TOP, "bench",
                                        "test_upstream_shmem.py")]),
    # Upstream tests covering what the fork touches: vhost-user (its test
    # back-end drives the vhost-user protocol code we extend) and the
    # virtio-pci devices.
    qos("qos: vhost-user", [f"{VHOST_USER_PATH}/virtio-net-pci/virtio-net/"
                            "virtio-net-tests/vhost-user",
                            # the same stub back-end, behind our device
                            f"{VHOST_USER_PATH}/vhost-user-fs-pci/"
                            "vhost-user-fs/vhost-user-fs-tests"]),
    qos("qos: virtio-pci devices", [
        f"{VHOST_USER_PATH}/virtio-blk-pci",
        f"{VHOST_USER_PATH}/virtio-scsi-pci",
        f"{VHOST_USER_PATH}/virtio-rng-pci",
        f"{VHOST_USER_PATH}/virtio-balloon-pci",
        f"{VHOST_USER_PATH}/virtio-serial-pci",
        f"{VHOST_USER_PATH}/virtio-9p-pci",
    ]),
    # The device half of DAX: vhost-user-fs-pci, its cache window and the
    # shared memory back-end requests, against an in-test back-end.
    qtest("qtest: vhost-user-fs DAX window", "vhost-user-fs-test"),
    # The same window driven by FUSE requests to our virtiofsd.  The test
    # itself fails when the daemon is missing: it is not in `needs`.
    qtest("qtest: vhost-user-fs DAX window with our virtiofsd",
          "vhost-user-fs-daemon-test", env={"QTEST_VIRTIOFSD": VIRTIOFSD},
          ninja=["tools/virtiofsd/virtiofsd"]),
    guest("guest: virtio-fs smoke (Rust virtiofsd)", "smoke.sh",
          "--daemon", "rust", "--cache-mode", "never"),
    # Our virtiofsd: its dispatch layer and libvhost-user's shared memory
    # requests without a guest, then end to end.
    # Its files form layers: no cycle among them (includes, and calls
    # read from the objects), each header declares its own file's API
    Suite("virtiofsd: layers, no file depends on one above it",
          [sys.executable, os.path.join(TOP, "mk", "layers.py")],
          ninja=["tools/virtiofsd/virtiofsd"]),
    unit("virtiofsd: request decoding", "tests/unit/virtiofsd/test-fuse-decode"),
    unit("virtiofsd: file system operations",
         "tests/unit/virtiofsd/test-fuse-ops", env={"TMPDIR": BUILD_TMP}),
    unit("virtiofsd: DAX window bookkeeping", "tests/unit/virtiofsd/test-dax"),
    unit("virtiofsd: command line", "tests/unit/virtiofsd/test-options"),
    unit("virtiofsd: migration state stream",
         "tests/unit/virtiofsd/test-migrate"),
    unit("virtiofsd: --xattrmap rules", "tests/unit/virtiofsd/test-xattrmap"),
    unit("virtiofsd: --xattrmap through the request path",
         "tests/unit/virtiofsd/test-xattrmap-fs"),
    unit("virtiofsd: vhost-user transport against a fake front-end",
         "tests/unit/virtiofsd/test-vhost-queue"),
    unit("virtiofsd: sandboxes, and a taken-over daemon reaches nothing "
         "beyond the share", "tests/unit/virtiofsd/test-sandbox"),
    # The real daemon, started as libvirt starts it: what each of its
    # processes holds, seen from the host
    Suite("virtiofsd: no fd outside the share, CAP_DAC_READ_SEARCH in the "
          "broker alone, each sandbox",
          ["bash", os.path.join(TOP, "harness", "tests", "contained.sh")],
          needs=[VIRTIOFSD], ninja=["tools/virtiofsd/virtiofsd"],
          timeout=120),
    # Both daemons under the vhost-user load generator (no guest): every
    # mix of make bench's, short, each reply checked against the host
    # (bench/loadgen.py --check); the Rust daemon's absence fails it.
    # Both also replay a guest's tree steps (bench/loadgen-tree-small.rec.xz),
    # each reply checked against the recorded one, and ours records a
    # session (VIRTIOFSD_RECORD).
    Suite("loadgen: every mix from ours and the Rust virtiofsd, replies "
          "checked", [sys.executable, os.path.join(TOP, "bench", "loadgen.py"),
                      "--check"], tap=True,
          needs=[LOADGEN, VIRTIOFSD],
          ninja=["tests/unit/virtiofsd/loadgen", "tools/virtiofsd/virtiofsd"],
          timeout=180,
          must_run=[f"{d}: {m} at depth 8" for d in
                    ("ours on 2 request queue(s)",
                     "Rust 1.14 on 1 request queue(s)")
                    for m in ("getattr", "unpack", "readdirplus", "read-128k",
                              "write-128k", "unlink")] +
          [f"{d} on 1 request queue(s), a guest's tree steps replayed: "
           f"replay at depth {n}" for d in ("ours", "Rust 1.14")
           for n in (1, 32)] +
          ["ours with VIRTIOFSD_RECORD"]),
    unit("virtiofsd: seccomp actions stop a forbidden call",
         "tests/unit/virtiofsd/test-seccomp"),
    unit("libvhost-user: shared memory requests",
         "tests/unit/virtiofsd/test-vhost-shmem"),
    # A hostile guest's requests: the seed corpus (generated, and captured
    # from a guest) and every crash found so far
    # (tools/virtiofsd/fuzz/regressions/) replayed, then new inputs; and
    # its virtqueues: the transport fuzzer's seeds (fuzz-vhost.c,
    # vhost-corpus/) replayed.
    Suite("fuzz: virtiofsd request path, 60 s",
          [os.path.join(TOP, "mk", "fuzz.sh"), "run", "60"], timeout=400),
    # A live migration's state stream, from a source a guest may have
    # taken over (fuzz-migrate.c): the seeds (migrate-corpus/, forged
    # file handles of files outside the share among them) replayed, then
    # new streams.  The destination may not reach outside its share.
    Suite("fuzz: virtiofsd migration state stream, 30 s",
          [os.path.join(TOP, "mk", "fuzz.sh"), "run-migrate", "30"],
          timeout=300),
    # The same seeds and regressions, each in a process under the daemon's
    # own seccomp filter (--seccomp=trap), installed where main.c does: a
    # guest-reachable path that makes a forbidden call fails here
    # (tools/virtiofsd/fuzz/replay-seccomp.c).
    Suite("fuzz: corpus replayed under virtiofsd's seccomp filter",
          [os.path.join(TOP, "mk", "fuzz.sh"), "seccomp"], timeout=300),
    # FUSE_INIT of GUEST_KERNEL's kernel checked, as on the matrix's
    # other kernels (on_kernel())
    checking_init(guest("guest: virtio-fs smoke (our virtiofsd)", "smoke.sh",
                        "--daemon", "ours", "--cache-mode", "never")),
    # Several request queues (Linux >= 6.11 uses one per CPU group) served
    # by the thread pool
    guest("guest: virtio-fs smoke, 4 request queues and a thread pool",
          "smoke.sh", "--daemon", "ours", "--cache-mode", "never",
          "--request-queues", "4", "--daemon-args=--thread-pool-size=4"),
    guest("guest: POSIX exercise, ours = Rust virtiofsd = host", "posix.sh",
          timeout=900),
    # The host is the oracle: the same system calls, as root and as a user
    # with supplementary groups, on a host directory and in a guest on a
    # share of the same file system (harness/guest-tools/fsconform.c);
    # results and trees must match but for the listed differences
    # (harness/tests/conformance-expected-*).
    # cache=auto and cache=never+DAX are run by hand:
    # harness/tests/conformance.sh ours:auto ours:never:dax
    guest("guest: conformance with the host, ours, cache=auto+DAX, "
          "cache=never", "conformance.sh", "ours:auto:dax", "ours:never",
          timeout=600),
    guest("guest: conformance with the host, Rust virtiofsd",
          "conformance.sh", "rust:auto", timeout=400),
    # Options that change what a guest sees, each against its absence:
    # --fd, --socket-group, --cache=metadata|always (vs never), --readonly,
    # --allow-mmap, --announce-submounts (a host tmpfs in the share),
    # --writeback, --no-killpriv-v2 (three guest runs).
    guest("guest: virtiofsd options seen from a guest (fd, socket group, "
          "cache modes, readonly, mmap, submounts, writeback, killpriv)",
          "options.sh", timeout=330),
    # Requests per file operation from the daemon's --stats: the round
    # trips we spare (FLUSH without host-side POSIX locks) stay spared.
    guest("guest: requests per small-file operation, spared ones stay "
          "spared", "roundtrips.sh", timeout=500),
    # --cache=adaptive: host changes seen within the bound, and later than
    # cache=auto for what the host left alone (harness/tests/adaptive-cache.sh)
    guest("guest: adaptive cache timeouts, host changes seen within the "
          "bound", "adaptive-cache.sh", timeout=200),
    # A host process appends through one long-lived fd to a file the guest
    # reads as it grows: each record seen within --cache=adaptive's bound
    # (measured delays printed), read right through the page cache, and
    # through the DAX window as soon as stat shows the new size
    # (harness/tests/append-watch.sh)
    guest("guest: host appends seen within the adaptive bound",
          "append-watch.sh", "adaptive", timeout=240),
    guest("guest: host appends seen within the adaptive bound, read at "
          "once through the DAX window", "append-watch.sh", "dax",
          timeout=240),
    # A guest that holds and looks up files without end (CVE-2020-10717)
    # QEMU killed mid-I/O: the daemon exits by itself, status 0
    guest("guest: our virtiofsd when QEMU is killed mid-request",
          "qemu-kill.sh", timeout=300),
    guest("guest: our virtiofsd under fd exhaustion", "exhaust.sh",
          timeout=300),
    # 12,000 FORGETs on the hiprio queue, twice, inodes by fd: the
    # daemon's fds return to where they were and stay under
    # --rlimit-nofile's bound.
    guest("guest: our virtiofsd under a FORGET flood", "forget-flood.sh",
          timeout=900),
    # The Rust virtiofsd's command-line forms (libvirt's, kata's, a
    # user's), a daemon each, all seen from one guest
    guest("guest: our virtiofsd started with the Rust virtiofsd's options",
          "rust-options.sh", timeout=600),
    # --inode-file-handles: the suites that touch inodes, with the daemon
    # holding them by handle (mandatory: the default, prefer, holds fds
    # on the tests' shares, directories of /tmp rather than whole file
    # systems), shorter under TCG where they are long.  The plain runs
    # above (POSIX exercise, fsx, the forget flood) are the fd ones; the
    # smoke test by fd (never) shows what the default does.
    guest_inodes("handle", "guest: virtio-fs smoke, inodes by file handle",
                 "smoke.sh", "--daemon", "ours", "--cache-mode", "never"),
    guest_inodes("fd", "guest: virtio-fs smoke, inodes by fd", "smoke.sh",
                 "--daemon", "ours", "--cache-mode", "never"),
    guest_inodes("handle", "guest: POSIX exercise, inodes by file handle",
                 "posix.sh", timeout=900),
    guest_inodes("handle", "guest: DAX fsx, 20,000 operations, inodes by "
                 "file handle", "fsx.sh", "--daemon", "ours", "--env",
                 "FSX_OPS=20000", timeout=900),
    guest_inodes("handle", "guest: FORGET flood, inodes by file handle",
                 "forget-flood.sh", timeout=900),
    # More files than --rlimit-nofile allows fds: with fds the lookups
    # past the bound fail with ENFILE, by handle all of them work
    # --poll-us: the guest's requests found by polling, kicks off, and
    # a QMP stop/cont with the queues polled
    guest("guest: virtio-fs smoke, request queues polled (--poll-us)",
          "poll.sh", "smoke.sh", "--daemon", "ours", timeout=300),
    guest("guest: DAX stop/cont with the request queues polled (--poll-us)",
          "poll.sh", "dax-stop-cont.sh", timeout=400),
    many_inodes("fds", "inodes by fd"),
    many_inodes("handles", "by file handle"),
    # The usual case at full size: a share that is a directory of a
    # larger file system, every option at its default
    Suite("guest: 200,000 stats of a directory share under "
          "--rlimit-nofile=20000, the defaults",
          ["bash", os.path.join(TOP, "harness", "tests", "many-inodes.sh"),
           "--timeout", "870", "defaults"],
          env={"FILES": "200000", "NOFILE": "20000"},
          needs=[QEMU, INITRAMFS], timeout=900),
    # A hard-link farm (8 objects, 1000 links each) walked and read
    # twice while the host adds and removes links: no ESTALE, no error
    # but the host's ENOENT, the churn proven to overlap the walk
    # (harness/tests/link-farm.sh); our daemon with its defaults, with
    # every request re-opening its inode through the broker, and the
    # Rust virtiofsd by fd and by handle, which pass it too.
    guest("guest: hard-link farm under host churn, our virtiofsd",
          "link-farm.sh", "ours", timeout=300),
    guest("guest: hard-link farm under host churn, our virtiofsd, "
          "every inode re-opened by handle", "link-farm.sh", "ours-handles",
          timeout=300),
    guest("guest: hard-link farm under host churn, Rust virtiofsd",
          "link-farm.sh", "rust", timeout=300),
    guest("guest: hard-link farm under host churn, Rust virtiofsd by "
          "file handle", "link-farm.sh", "rust-handles", timeout=300),
    # --posix-acl with --uid-map/--gid-map: ids, umask, ACLs end to end
    guest("guest: our virtiofsd with POSIX ACLs and id maps",
          "acl-idmap.sh", timeout=300),
    # --xattrmap: each rule type and the map shorthand, seen from a guest
    # and on the host; the same checks against the Rust daemon show that
    # the rules mean the same to both.
    guest("guest: --xattrmap (our virtiofsd)", "xattrmap.sh",
          "--daemon", "ours", timeout=300),
    guest("guest: --xattrmap (Rust virtiofsd)", "xattrmap.sh",
          "--daemon", "rust", timeout=300),
    # Escape attempts from the guest; the daemon as every guest test runs
    # it (namespace sandbox, seccomp kill), then without the namespace,
    # where the daemon's own care must hold.
    guest("guest: sandbox, escapes from the share (namespace, seccomp)",
          "sandbox.sh", timeout=300),
    guest("guest: sandbox, escapes from the share with --sandbox=none",
          "sandbox.sh", "--sandbox-off", timeout=300),
    # An ordinary user (uid 1000) runs QEMU and the daemon: our user
    # namespace by default, and libvirt 10's session command line
    # through newuidmap, both with the DAX window
    guest("guest: unprivileged QEMU and virtiofsd with DAX, a user "
          "namespace of the daemon's own, newuidmap", "unprivileged.sh",
          timeout=300),
    # prefer holds inodes by handle only on a share that is a whole file
    # system (a handle opens any inode of its file system): there, with
    # Landlock in each sandbox mode; elsewhere by fd, saying why
    guest("guest: file handles on any share through the broker, Landlock "
          "with them", "handles-any-share.sh", timeout=300),
    # Needs the device's cache window (cache-size)
    guest("guest: our virtiofsd with DAX, window I/O, truncate",
          "virtiofsd.sh"),
    guest("guest: DAX (our virtiofsd)", "dax.sh", "--daemon", "ours"),
    # GET_SHMEM_CONFIG: QEMU refuses a daemon that expects another window
    guest("guest: the window's size checked against the daemon's "
          "(GET_SHMEM_CONFIG)", "shmem-config.sh", timeout=240),
    # Data integrity: 50,000 random operations checked against a model,
    # through a 32 MiB window (16 ranges) over up to 48 MiB of files, the
    # reclaim that forces proven from QEMU's trace of window mappings, and
    # the host's copies compared with the model at the end.
    guest(FSX_LONG, "fsx.sh", "--daemon", "ours", "--env",
          f"FSX_OPS={FSX_LONG_OPS}", timeout=1500),
    # Two QEMUs, each with its own virtiofsd on one directory, count
    # together through one file both map with DAX (harness/two-vms.py).
    guest("guest: two guests share a DAX mmap, 1000 increments observed",
          "two-guests.sh", timeout=300),
    # Hardening of the window: a host-side truncate of a mapped file, and
    # code executed from the window after a remap (TCG's translation cache).
    guest("guest: DAX survives host truncate", "dax-truncate.sh"),
    # The same with virtiofsd --watch-truncate: the daemon unmaps first,
    # QEMU must not need its SIGBUS fixup (three guest runs).
    guest("guest: DAX host truncate, virtiofsd --watch-truncate",
          "dax-truncate-watch.sh", timeout=600),
    # The window past the end of a small file: the guest reads and writes
    # it through the BAR, QEMU's SIGBUS fix-up must never run; the file
    # grows and the guest reads the new data through the same range.
    guest("guest: DAX past the end of a file, no SIGBUS fix-up, growth",
          "dax-eof.sh", timeout=300),
    # What the fix-up costs: the guest reads every page of a 32 MiB file
    # truncated to nothing on the host, the VM lives on at a few VMAs per
    # mapping; and a fault whose page the host re-filled before the fix-up
    # ran (held there by gdb) reads the file, never the fix-up's zeros.
    guest("guest: DAX SIGBUS fix-up, every page past the end, bounded VMAs",
          "dax-fixup-cap.sh", timeout=400),
    # The same fix-up under the back-end's MEM_READ/MEM_WRITE: O_DIRECT
    # I/O whose buffer is the mapping of a file truncated on the host.
    guest("guest: DAX SIGBUS fix-up under MEM_READ and MEM_WRITE",
          "dax-fixup-backend.sh", timeout=300),
    guest("guest: DAX SIGBUS fix-up racing a re-filled page (gdb)",
          "dax-fixup-race.sh", timeout=300),
    # The window's holes cost a small scratch buffer, not a page per page
    # the guest writes: every page of an empty 4 GiB window written.
    guest("guest: DAX window holes, 4 GiB written, QEMU memory bounded",
          "dax-holes.sh", timeout=400),
    guest("guest: DAX REMOVEMAPPING of 80 ranges", "dax-batch.sh",
          "--daemon", "ours", timeout=240),
    # Parallel SETUPMAPPING/REMOVEMAPPING: 4 vCPUs, 4 request queues, a
    # thread pool, a window smaller than the data; fsx and mmap writers,
    # plain and with --dax-unmap-delay (two guest runs).
    guest("guest: DAX under concurrency, 4 queues, thread pool, unmap delay",
          "dax-parallel.sh", timeout=600),
    # --dax-policy=always|size:N|xattr|never, and the default (size:2M),
    # seen from the guest (statx STATX_ATTR_DAX per file, five guest runs).
    guest("guest: DAX policies by their outcome (statx)", "dax-policy.sh",
          timeout=480),
    # cache-size=16G as users type it, on pc and on q35 (two guest runs).
    guest("guest: DAX, a 16 GiB window on pc and on q35",
          "dax-window-16g.sh", timeout=300),
    # A guest reboot with live DAX mappings, then a new mount (a second
    # FUSE_INIT is a new session).
    guest("guest: DAX, a reboot with live mappings, then a new mount",
          "dax-reboot.sh", timeout=300),
    guest("guest: DAX remap flushes TCG code", "dax-exec.sh"),
    # A shared root through the window with --dax-policy=exec: the
    # dynamic loader, an interpreter, a program replaced on the host by
    # rename while it runs (one guest); a library's pages shared by two
    # guests, by each QEMU's Pss and the host's page cache (two guests).
    guest("guest: exec and mmap from a shared root through the window",
          "shared-root-exec.sh", timeout=240),
    guest("guest: two guests share a library's pages through their windows",
          "shared-root-two.sh", timeout=240),
    # TCG: a vCPU keeps using MMIO while another changes the memory map
    # (the accel/tcg patch of patches/); without the fix the guest hangs or QEMU aborts.
    guest("guest: TCG, MMIO while the memory map changes", "tcg-map-race.sh",
          timeout=150),
    # QMP stop/cont while the guest churns DAX mappings: QEMU must serve
    # the daemon's SHMEM_MAP while it waits for GET_VRING_BASE (the
    # vhost-user serve-while-waiting patch).
    guest("guest: DAX stop/cont while the guest maps", "dax-stop-cont.sh",
          timeout=600),
    # A guest's lock wait (FUSE_SETLKW, POSIX and flock) blocked in the
    # daemon while QMP stops the VM: released after cont, and released
    # while stopped; the guest must get each lock, held by our daemon.
    guest("guest: a guest's lock wait (SETLKW) across QMP stop/cont",
          "lock-wait.sh", "stop-cont", timeout=240),
    # Live migration without DAX: two QEMUs, two of our daemons on one
    # directory (harness/migrate.py).  The guest keeps files open, a lock
    # and a half-read directory across; a source that offers no state
    # transfer is refused; a file gone from the directory follows
    # --migration-on-error.
    guest("guest: live migration carries open files, a lock, a listing",
          "migrate.sh", "basic", timeout=300),
    guest("guest: live migration by file handles",
          "migrate.sh", "file-handles", timeout=300),
    # A destination that opens no handles (the default on a share that is
    # part of a file system) refuses a stream of handles, saying why
    guest("guest: live migration by file handles to a destination that "
          "opens none, refused", "migrate.sh", "file-handles-refused",
          timeout=300),
    # The guest waits on a POSIX lock and a flock the host holds while it
    # migrates; once the host lets go the destination's daemon must take
    # them for it.
    guest("guest: live migration while a guest waits on a lock (SETLKW)",
          "lock-wait.sh", "migrate", timeout=300),
    # Prints the state's size, save and restore times and the downtime
    guest("guest: live migration with 10,000 known inodes",
          "migrate-inodes.sh", timeout=400),
    guest("guest: live migration from the Rust virtiofsd to ours, refused",
          "migrate.sh", "from-rust", timeout=300),
    guest("guest: live migration refused without back-end state transfer",
          "migrate.sh", "refused", timeout=300),
    guest("guest: live migration, file gone, --migration-on-error=abort",
          "migrate.sh", "missing-abort", timeout=300),
    guest("guest: live migration, file gone, "
          "--migration-on-error=guest-error",
          "migrate.sh", "missing-guest-error", timeout=300),
    # Live migration with the DAX window in use: the daemon carries its
    # mapping table, the destination maps it again before the guest runs
    # (QEMU's traces prove the order).  A process keeps a file mapped
    # across, read all along by another; fsx runs through a 32 MiB window
    # across; a back-end without VHOST_USER_PROTOCOL_F_SHMEM_MIGRATE is
    # refused by QEMU's blocker, and a destination that cannot restore the
    # mapped file, or has a window of another size, fails the migration:
    # the guest goes on on the source.
    guest("guest: live migration with a DAX mmap, re-mapped before resume",
          "migrate-dax.sh", "mmap", timeout=300),
    guest("guest: live migration with DAX refused without SHMEM_MIGRATE",
          "migrate-dax.sh", "refused", timeout=300),
    guest("guest: live migration with DAX, destination cannot restore the "
          "mapped file, source goes on", "migrate-dax.sh", "dest-fails",
          timeout=300),
    guest("guest: live migration with DAX to another cache-size refused, "
          "source goes on", "migrate-dax.sh", "size-differs", timeout=300),
    guest("guest: live migration in the middle of DAX fsx, 20,000 ops",
          "migrate-dax.sh", "fsx", timeout=900),
    # libvirt 9.0 drives the fork: a private libvirtd in its own mount
    # namespace starts domains with our QEMU and virtiofsd, DAX included.
    Suite("libvirt: virtio-fs through a private libvirtd",
          [sys.executable, os.path.join(TOP, "harness", "libvirt", "test_libvirt.py"),
           "--daemon", "ours"],
          tap=True, needs=[QEMU, INITRAMFS],
          timeout=600),
    # The back-end dies under live DAX mappings: QEMU survives and clears
    # the window; a restarted daemon gets the device back (reconnect-ms).
    guest("guest: virtiofsd killed, restarted, new mount works",
          "daemon-kill.sh"),
    guest("guest: virtiofsd killed, guest powers off with requests hung",
          "daemon-kill.sh", "--no-restart"),
    # fstests (xfstests), a quick subset of its generic group
    # (harness/fstests/quick.list), on ours without and with a DAX window
    # (dax=always) and on the Rust virtiofsd: a test that passes on the
    # Rust daemon must pass on ours in both modes.  Without fstests'
    # source (FSTESTS, the tarball beside the project, the cache, or the
    # pinned tag fetched from upstream: mk/fstests-source.sh) or with a
    # root that lacks a tool it fails, saying what is missing.  make fstests
    # runs the whole group (README "fstests").
    Suite("fstests: quick subset, ours and ours+DAX pass what the Rust "
          "virtiofsd passes",
          [sys.executable, os.path.join(TOP, "harness", "fstests", "run.py"),
           "--tests", os.path.join(TOP, "harness", "fstests", "quick.list"),
           "--out", os.path.join(BUILD, "fstests-quick"), "--gate",
           "--test-timeout", "120", "--parallel"],
          needs=[QEMU, VIRTIOFSD, INITRAMFS], timeout=600),
    # Unmodified upstream QEMU 11.1 (Debian's, mk/upstream-qemu.sh) with
    # its generic vhost-user device: DAX served by our virtiofsd alone.
    Suite("guest: DAX through unmodified upstream QEMU 11.1",
          ["bash", os.path.join(TOP, "harness", "tests", "upstream-dax.sh")],
          needs=[UPSTREAM_QEMU, VIRTIOFSD, INITRAMFS],
          timeout=1100),
    # There a long run of unmaps fills the back-end socket while QEMU
    # waits for our answer to a memory-table message: no hang.
    Suite("guest: DAX through upstream QEMU 11.1, 180 ranges given back at once",
          ["bash", os.path.join(TOP, "harness", "tests",
                                "upstream-unmap-burst.sh")],
          needs=[UPSTREAM_QEMU, VIRTIOFSD, INITRAMFS],
          timeout=400),
    # There the truncation watch and a thread pool wait for the window's
    # lock while maps are in flight: no thread may wait for it holding
    # the dispatch lock (QEMU would freeze holding the BQL).
    Suite("guest: DAX through upstream QEMU 11.1, --watch-truncate and a "
          "thread pool while maps are in flight",
          ["bash", os.path.join(TOP, "harness", "tests",
                                "upstream-watch-pool.sh")],
          needs=[UPSTREAM_QEMU, VIRTIOFSD, INITRAMFS],
          timeout=700),
    # The guest kernel matrix: some of the above, shortened, on the other
    # kernels: Debian 12's 6.1 (virtio and virtio-fs as modules, FUSE
    # 7.38) and sid's (FUSE past ours)
    *[s for k in MATRIX_KERNELS for s in kernel_matrix(k)],
]

# On a base other than the default (make check QEMU_BASE=X, make
# check-bases) these run: what the patches that differ between bases
# touch (the device and its reconnect, vhost-user, libvhost-user, the
# window under TCG).
EVERY_BASE = [
    "tree: patches/ and our files reproduce build/src",
    "qos: vhost-user",
    "qtest: vhost-user-fs DAX window",
    "qtest: vhost-user-fs DAX window with our virtiofsd",
    "libvhost-user: shared memory requests",
    "guest: virtio-fs smoke (our virtiofsd)",
    "guest: DAX (our virtiofsd)",
    FSX_LONG,
    "guest: DAX survives host truncate",
    "guest: DAX remap flushes TCG code",
    "guest: TCG, MMIO while the memory map changes",
    "guest: virtiofsd killed, restarted, new mount works",
]
for _s in SUITES:
    _s.every_base = _s.name in EVERY_BASE
assert sum(s.every_base for s in SUITES) == len(EVERY_BASE), \
    "EVERY_BASE names a suite that is not in SUITES"


def kvm_answers():
    """/dev/kvm opens and makes a VM (kvm_pvm's does too): what the
    qtests' KVM cases need (qtest_has_accel() asks only for access)."""
    KVM_GET_API_VERSION, KVM_CREATE_VM = 0xAE00, 0xAE01
    try:
        fd = os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if fcntl.ioctl(fd, KVM_GET_API_VERSION) != 12:
            return False
        os.close(fcntl.ioctl(fd, KVM_CREATE_VM, 0))
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def kvm_hardware():
    """KVM that virtualizes in hardware (kvm_intel, kvm_amd), not one
    that shadows the guest's page tables (kvm_pvm): there a guest access
    to a file page that is gone fails KVM_RUN with EFAULT."""
    mods = set(os.listdir("/sys/module")) if os.path.isdir("/sys/module") \
        else set()
    return kvm_answers() and bool(mods & {"kvm_intel", "kvm_amd"}) and \
        "kvm_pvm" not in mods


def build_fs_fileattr():
    """The file system of BUILD_TMP answers FS_IOC_GETFLAGS and
    FS_IOC_FSGETXATTR (ext4, xfs, btrfs, tmpfs do; ramfs does not)."""
    FS_IOC_GETFLAGS, FS_IOC_FSGETXATTR = 0x80086601, 0x801c581f
    os.makedirs(BUILD_TMP, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=BUILD_TMP) as f:
        try:
            fcntl.ioctl(f.fileno(), FS_IOC_GETFLAGS, b"\0" * 8)
            fcntl.ioctl(f.fileno(), FS_IOC_FSGETXATTR, b"\0" * 28)
        except OSError:
            return False
    return True


def is_root():
    return os.geteuid() == 0


# Tests that must run, and pass, on a machine that can run them: a GLib
# test skips where it cannot make its case (no KVM, no root, a file
# system without the ioctl), and a skip is never a pass, so where the
# probe says this machine can, the skip fails its suite, saying why it
# had to run.  (suite, test path, probe, what the probe found)
MUST_RUN = [
    ("qtest: vhost-user-fs DAX window",
     "/x86_64/vhost-user-fs/window/kvm-truncate", kvm_answers,
     "/dev/kvm answers and makes a VM"),
    ("qtest: vhost-user-fs DAX window",
     "/x86_64/vhost-user-fs/window/kvm-truncate-efault", kvm_hardware,
     "KVM virtualizes in hardware here (kvm_intel or kvm_amd, no kvm_pvm)"),
    ("qtest: vhost-user-fs DAX window",
     "/x86_64/vhost-user-fs/window/kvm-readonly-stores", kvm_answers,
     "/dev/kvm answers and makes a VM"),
    ("qtest: vhost-user-fs DAX window",
     "/x86_64/vhost-user-fs/window/kvm-readonly-stores-efault", kvm_hardware,
     "KVM virtualizes in hardware here (kvm_intel or kvm_amd, no kvm_pvm)"),
    *[("virtiofsd: file system operations", f"/virtiofsd/ops/{p}",
       build_fs_fileattr, f"the file system of {BUILD_TMP} has the "
       "attribute ioctls") for p in ("ioctl-fileattr",
                                     "handles/ioctl-fileattr")],
    *[("virtiofsd: file system operations", f"/virtiofsd/ops/{p}", is_root,
       "running as root") for p in ("killpriv-v2", "killpriv-v2/group",
                                    "killpriv-v2/no-setgid",
                                    "handles/killpriv-v2")],
]
for _name, _path, _probe, _why in MUST_RUN:
    _found = [s for s in SUITES if s.name == _name]
    assert _found, f"MUST_RUN names a suite that is not in SUITES: {_name}"
    _found[0].must_pass.append((_path, _probe, _why))


def tap_results(output, must_run=(), must_pass=()):
    """(status, description) per TAP test point, status in pass/fail/skip,
    then a "fail" for each way the stream itself is wrong, and for each
    (path, why) of MUST_PASS whose test point did not pass."""
    results, plans, bail = [], [], None
    for line in output.splitlines():
        line = line.strip()
        m = re.match(r"^1\.\.(\d+)\b", line)
        if m:
            # (the plan, the points before it)
            plans.append((int(m.group(1)), len(results)))
            continue
        if line.startswith("Bail out!"):
            bail = bail or line
            continue
        m = re.match(r"^(not ok|ok)\b\s*\d*\s*-?\s*(.*)$", line)
        if not m:
            continue
        desc = m.group(2)
        if re.search(r"#\s*(SKIP|skip)", desc):
            results.append(("skip", desc))
        elif m.group(1) == "ok" and not re.search(r"#\s*TODO", desc):
            results.append(("pass", desc))
        else:
            results.append(("fail", desc))
    points = len(results)
    # One plan, before or after the points; GLib given several -r paths
    # runs one suite each and ends each with a plan counting the points
    # so far.
    if not plans:
        results.append(("fail", "no TAP plan (1..N)"))
    elif plans[0][1] == 0 and plans[0][0] > 0:
        if len(plans) > 1 or plans[0][0] != points:
            results.append(("fail", f"the plan announced {plans[0][0]} test "
                                    f"points, {points} were reported"))
    else:
        for n, before in plans:
            if n != before:
                results.append(("fail", f"a plan of {n} test points came "
                                        f"after {before}"))
        if plans[-1][1] != points:
            results.append(("fail", f"{points - plans[-1][1]} test points "
                                    "after the last plan"))
    if bail:
        results.append(("fail", bail))
    if not any(st == "pass" for st, _ in results):
        results.append(("fail", "no test point passed"))
    for prefix in must_run:
        if not any(st == "pass" and d.startswith(prefix) for st, d in results):
            results.append(("fail", f"nothing under {prefix} ran and passed"))
    for path, why in must_pass:
        seen = [(st, d) for st, d in results
                if re.split(r"\s+#", d, maxsplit=1)[0].strip() == path]
        if not seen:
            results.append(("fail", f"{path} did not run, and it must here: "
                                    f"{why}"))
        elif seen[0][0] == "skip":
            reason = re.split(r"#\s*(?:SKIP|skip)\s*", seen[0][1],
                              maxsplit=1)[-1]
            results.append(("fail", f"{path} skipped ({reason}), and it "
                                    f"must run here: {why}"))
    return results


def proc_table():
    """{pid: (ppid, state, start time)} of every process now."""
    table = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name may hold spaces and parentheses
        fields = stat[stat.rfind(")") + 2:].split()
        table[int(d)] = (int(fields[1]), fields[0], fields[19])
    return table


def descendants(root):
    """{pid: start time} of ROOT's live descendants (zombies left out)."""
    table = proc_table()
    kids = {}
    for pid, (ppid, _, _) in table.items():
        kids.setdefault(ppid, []).append(pid)
    found, todo = {}, [root]
    while todo:
        for pid in kids.get(todo.pop(), []):
            if table[pid][1] != "Z":
                found[pid] = table[pid][2]
            todo.append(pid)
    return found


def signal_all(pids, sig):
    """Signal each process of {pid: start time} still the same process."""
    now = proc_table()
    for pid, start in pids.items():
        if pid in now and now[pid][2] == start:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass


def reap():
    """Collect the orphans of earlier suites that were handed to us."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def reap_orphans(keep):
    """Reap the orphans handed to us while a suite runs, all but KEEP (the
    suite itself, which subprocess waits for).  A test that checks that a
    daemon whose parent it killed is gone (kill -0) must not find it
    lingering as our zombie."""
    while True:
        try:
            info = os.waitid(os.P_ALL, 0,
                             os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if info is None or info.si_pid == keep:
            return
        try:
            os.waitpid(info.si_pid, 0)
        except ChildProcessError:
            return


def wait_reaping(proc, timeout):
    """proc.wait(TIMEOUT), reaping the suite's orphans meanwhile."""
    end = time.monotonic() + timeout
    while True:
        reap_orphans(proc.pid)
        rc = proc.poll()
        if rc is not None:
            return rc
        if time.monotonic() > end:
            raise subprocess.TimeoutExpired(proc.args, timeout)
        time.sleep(0.1)


def describe(pids):
    out = []
    for pid in sorted(pids):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            cmd = "?"
        out.append(f"{pid} {cmd.strip()[:100]}")
    return "; ".join(out)


def end_all(proc, grace):
    """SIGTERM PROC's process group and every process below us, then,
    after GRACE seconds, SIGKILL what is left of them."""
    me = os.getpid()
    left = descendants(me)
    if proc.poll() is None:
        # Its whole group at once: bash reaps none of its jobs meanwhile
        os.killpg(proc.pid, signal.SIGTERM)
    signal_all(left, signal.SIGTERM)
    end = time.monotonic() + grace
    while time.monotonic() < end:
        if proc.poll() is not None:
            reap()
        left = descendants(me)
        if not left:
            break
        time.sleep(0.2)
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    signal_all(descendants(me), signal.SIGKILL)
    proc.wait()
    time.sleep(0.2)
    reap()


def run_suite(s, env):
    """Run suite S; returns (stdout, stderr, status, problems).

    TAP suites' stderr is kept apart from the stdout that is parsed;
    other suites' streams are merged, as they were written.
    """
    env["VFSDAX_DEADLINE"] = str(time.time() + s.timeout - DEADLINE_MARGIN)
    problems = []
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(s.cmd, env=env, stdout=out,
                                stderr=err if s.tap else subprocess.STDOUT,
                                stdin=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            rc = wait_reaping(proc, s.timeout)
        except KeyboardInterrupt:
            # Stopped ourselves (Ctrl-C, or SIGTERM from a CI limit):
            # what the suite started must not outlive us
            end_all(proc, KILL_GRACE)
            raise
        except subprocess.TimeoutExpired:
            before = describe(descendants(os.getpid()))
            end_all(proc, KILL_GRACE)
            rc = -1
            problems.append(f"timed out after {s.timeout}s; ended it and "
                            f"what it had started: {before}")
        else:
            # What it started must end with it (a moment for the last
            # teardown to finish)
            reap()
            end = time.monotonic() + 5
            while descendants(os.getpid()) and time.monotonic() < end:
                time.sleep(0.2)
                reap()
            left = descendants(os.getpid())
            if left:
                problems.append("left running after it ended, now killed: "
                                + describe(left))
                end_all(proc, 5)
        streams = []
        for f in (out, err):
            f.seek(0)
            streams.append(f.read().decode(errors="replace"))
    return streams[0], streams[1], rc, problems


def on_signal(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    raise KeyboardInterrupt


def become_subreaper():
    """Have orphans of the suites reparented to us instead of init, so
    that a daemon whose parent died can still be found and ended."""
    PR_SET_CHILD_SUBREAPER = 36
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("check: cannot become a child subreaper: "
              f"{os.strerror(ctypes.get_errno())}", file=sys.stderr)


def build(targets):
    if not targets:
        return None
    r = subprocess.run(["ninja", "-C", QBUILD] + sorted(set(targets)),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return None if r.returncode == 0 else r.stdout[-3000:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-k", help="run only suites whose name contains this")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("-v", action="store_true", help="print every suite's output")
    args = ap.parse_args()

    # On another base, the EVERY_BASE suites; -k picks from all of them
    suites = [s for s in SUITES
              if (args.k in s.name if args.k else
                  QEMU_BASE == DEFAULT_BASE or s.every_base)]
    if args.list:
        for s in suites:
            print(s.name)
        return 0

    become_subreaper()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    build_error = build([t for s in suites for t in s.ninja])
    passed = failed = skipped = 0
    start = time.monotonic()
    # Each suite's time, for whoever has to keep check inside CI's limit
    times_path = os.path.join(os.path.dirname(QBUILD), "check-times.tsv")
    times = open(times_path, "w")
    for s in suites:
        t0 = time.monotonic()
        missing = [n for n in s.needs if not os.path.exists(n)]
        if build_error or missing:
            why = ("build failed:\n" + build_error) if build_error else \
                  "missing: " + ", ".join(missing)
            print(f"FAIL {s.name}: {why}", flush=True)
            failed += 1
            continue
        env = dict(os.environ, **s.env)
        if "TMPDIR" in s.env:
            os.makedirs(s.env["TMPDIR"], exist_ok=True)
        out, err, rc, problems = run_suite(s, env)
        dt = time.monotonic() - t0
        if s.tap:
            results = tap_results(out, s.must_run,
                                  [(p, why) for p, probe, why in s.must_pass
                                   if probe()])
            results += [("fail", p) for p in problems]
            if rc != 0 and all(st != "fail" for st, _ in results):
                results.append(("fail", f"exit status {rc}"))
        elif problems:
            results = [("fail", "; ".join(problems))]
        else:
            results = [("pass" if rc == 0 else "fail", "")]
        p = sum(1 for st, _ in results if st == "pass")
        f = sum(1 for st, _ in results if st == "fail")
        k = sum(1 for st, _ in results if st == "skip")
        passed, failed, skipped = passed + p, failed + f, skipped + k
        verdict = "FAIL" if f else "PASS"
        counts = f" ({p} passed, {f} failed{f', {k} skipped' if k else ''})" \
            if s.tap else ""
        print(f"{verdict} {s.name}{counts} [{dt:.1f}s]", flush=True)
        times.write(f"{dt:.1f}\t{verdict}\t{s.name}\n")
        times.flush()
        for st, desc in results:
            if st != "pass" and desc:
                print(f"    {st}: {desc}")
        if f or args.v:
            print("    " + "\n    ".join(out.rstrip().splitlines()[-40:]))
            if err.strip():
                print("    --- stderr\n    "
                      + "\n    ".join(err.rstrip().splitlines()[-20:]))
    total = time.monotonic() - start
    base = "" if QEMU_BASE == DEFAULT_BASE else f" on upstream base {QEMU_BASE}"
    print(f"check: {len(suites)} suites{base} in {total:.0f}s")
    print(f"{passed} passed, {failed} failed" +
          (f", {skipped} skipped" if skipped else ""))
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("check: interrupted; the running suite was ended", flush=True)
        sys.exit(130)

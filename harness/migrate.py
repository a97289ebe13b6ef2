#!/usr/bin/env python3
"""Live-migrate a test guest between two QEMUs on this host.

    harness/migrate.py [vm.py options] [migration options] SCRIPT

Boots the guest of harness/vm.py (the same options: --daemon,
--daemon-args, --cache-size, --cache-mode, --mem, ...) as the source,
with its back-end on --shared, and starts a second QEMU with -incoming and
a second back-end on the same directory as the destination.  The guest
script says when its state is ready by creating SHARED/.migrate-ready;
the harness then runs --host-step (if any), migrates over a unix socket
with QMP, and writes the outcome ("completed" or "failed") to
SHARED/.migrate-done, which the guest waits for before going on: on the
destination if the migration completed, on the source otherwise.

The exit status is the guest script's, or 1 when the migration's outcome
is not --expect-migration (or its error lacks --expect-error), 125 on a
harness failure.  Each end's QEMU and back-end must exit as harness/vm.py
judges them, whatever the outcome (a destination that failed the
migration stays up and is told to quit): a QEMU or a daemon that
crashes, or hangs, fails the run.  The outcome, downtime and times go
to stderr and, with --stats-file, as JSON to that file.  With --state-dir, each end's
back-end and QEMU leave their pids there (daemon-src.pid, daemon-dst.pid,
qemu-src.pid, qemu-dst.pid), for a test that must tell which daemon holds
what.
"""

import argparse
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vm  # noqa: E402


class Qmp:
    """A QMP connection: commands in order, events skipped."""

    def __init__(self, path, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.sock.connect(path)
                break
            except OSError:
                self.sock.close()
                if time.monotonic() > deadline:
                    raise vm.HarnessError(f"no QMP socket at {path}")
                time.sleep(0.1)
        self.sock.settimeout(timeout)
        self.file = self.sock.makefile("r")
        self.read()
        self.cmd("qmp_capabilities")

    def read(self):
        while True:
            line = self.file.readline()
            if not line:
                raise vm.HarnessError("QMP connection closed")
            msg = json.loads(line)
            if "event" not in msg:
                return msg

    def cmd(self, name, **kw):
        self.sock.sendall(json.dumps({"execute": name,
                                      "arguments": kw}).encode() + b"\n")
        msg = self.read()
        if "error" in msg:
            raise vm.HarnessError(f"QMP {name}: {msg['error']['desc']}")
        return msg["return"]

    def close(self):
        self.sock.close()


class Tail:
    """The lines a guest writes to a serial file, as they come."""

    def __init__(self, path):
        self.path, self.pos, self.buf = path, 0, ""

    def lines(self):
        if os.path.exists(self.path):
            with open(self.path, "rb") as f:
                f.seek(self.pos)
                chunk = f.read()
            self.pos += len(chunk)
            self.buf += chunk.decode("utf-8", "replace").replace("\r", "")
        out = []
        while "\n" in self.buf:
            line, self.buf = self.buf.split("\n", 1)
            out.append(line)
        return out


def forward(tail, rc):
    """Hands the guest's lines on; the exit mark's status, or RC."""
    for line in tail.lines():
        if line.startswith(vm.EXIT_MARK):
            rc = int(line[len(vm.EXIT_MARK):].rstrip("@"))
        else:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
    return rc


def migrate(args, src_qmp, dst_qmp, uri):
    """Migrates; query-migrate's last answer on the source."""
    caps = [{"capability": "return-path", "state": True}]
    dst_qmp.cmd("migrate-set-capabilities", capabilities=caps)
    src_qmp.cmd("migrate-set-capabilities", capabilities=caps)
    # A destination that fails stays up, for the harness to end with quit:
    # then both QEMUs must exit with status 0 whatever the outcome, and
    # one that crashes is told from one that refused (an exit on error
    # would end it with status 1 either way)
    dst_qmp.cmd("migrate-incoming", uri=uri, **{"exit-on-error": False})
    try:
        src_qmp.cmd("migrate", uri=uri)
    except vm.HarnessError as e:
        # Refused before it began (a migration blocker): a failed one
        return {"status": "failed", "error-desc": str(e)}
    deadline = time.monotonic() + args.migrate_timeout
    while time.monotonic() < deadline:
        info = src_qmp.cmd("query-migrate")
        if info.get("status") in ("completed", "failed", "cancelled"):
            return info
        time.sleep(0.05)
    src_qmp.cmd("migrate_cancel")
    raise vm.HarnessError(f"migration still {info.get('status')} after "
                          f"{args.migrate_timeout:g}s")


def quit_qemu(qmp):
    """Asks a QEMU to quit.  One that cannot be asked is gone already: how
    it ended is judged with the others' exits (vm.judge_exits)."""
    try:
        qmp.cmd("quit")
    except (OSError, vm.HarnessError) as e:
        vm.log(f"quit: {e}")


def run(args):
    qemu = args.qemu or vm.QEMU
    tmp = tempfile.mkdtemp(prefix="vfsdax-mig-")
    logdir = args.log_dir or tmp
    os.makedirs(logdir, exist_ok=True)
    procs = []
    ours_logs = []
    src_qmp = dst_qmp = None
    try:
        with open(args.script) as f:
            script_text = f.read()
        shared = args.shared
        if shared is None:
            shared = os.path.join(tmp, "shared")
            os.makedirs(shared)
        for name in (".migrate-ready", ".migrate-done"):
            if os.path.exists(os.path.join(shared, name)):
                os.unlink(os.path.join(shared, name))
        env = {"VFS_TAG": args.tag, "VFS_DAX": 1 if args.cache_size else 0,
               "VFS_DAEMON": args.daemon, "VFS_ACCEL": args.accel,
               "VFS_REQUEST_QUEUES": args.request_queues,
               "VFS_DEST_DAEMON": args.dest_daemon or args.daemon,
               "VFSDAX_MODULES": 0}
        for kv in args.env:
            k, _, v = kv.partition("=")
            env[k] = v
        initrd = vm.make_initrd(tmp, script_text, env)

        ends = {}
        for end in ("src", "dst"):
            sock = os.path.join(tmp, f"vfs-{end}.sock")
            eargs = args
            if end == "dst" and args.dest_cache_size is not None:
                eargs = argparse.Namespace(**vars(args))
                eargs.cache_size = args.dest_cache_size
            daemon = args.daemon if end == "src" else \
                (args.dest_daemon or args.daemon)
            dargs = args.daemon_args if end == "src" else \
                (args.dest_daemon_args if args.dest_daemon_args is not None
                 else args.daemon_args)
            dproc, _, dlog = vm.start_daemon(eargs, shared, sock, logdir,
                                             f"virtiofsd-{end}", daemon,
                                             dargs)
            procs.append(dproc)
            if daemon == "ours":
                ours_logs.append(dlog)
            if args.state_dir:
                vm.write_state(args.state_dir, f"daemon-{end}.pid",
                               str(dproc.pid))
            qmp = os.path.join(tmp, f"qmp-{end}.sock")
            qcmd = vm.qemu_command(eargs, qemu, initrd, logdir, sock,
                                   suffix=f"-{end}")
            qcmd += ["-qmp", f"unix:{qmp},server=on,wait=off"]
            if end == "dst":
                qcmd += ["-incoming", "defer"]
            qlog = os.path.join(logdir, f"qemu-{end}.log")
            if not args.quiet:
                vm.log(f"qemu ({end}): " +
                       " ".join(shlex.quote(c) for c in qcmd))
            qproc = subprocess.Popen(qcmd, stdout=open(qlog, "w"),
                                     stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL,
                                     start_new_session=True)
            procs.append(qproc)
            if args.state_dir:
                vm.write_state(args.state_dir, f"qemu-{end}.pid",
                               str(qproc.pid))
            ends[end] = {"daemon": dproc, "dlog": dlog, "qemu": qproc,
                         "qlog": qlog, "qmp": qmp,
                         "tail": Tail(os.path.join(logdir,
                                                   f"output-{end}.log"))}
        src, dst = ends["src"], ends["dst"]
        src_qmp, dst_qmp = Qmp(src["qmp"]), Qmp(dst["qmp"])

        def logs(end):
            return (f"--- qemu-{end}.log\n{vm.tail(ends[end]['qlog'])}"
                    f"--- virtiofsd-{end}.log\n{vm.tail(ends[end]['dlog'])}")

        deadline = time.monotonic() + args.timeout
        rc = None
        ready = os.path.join(shared, ".migrate-ready")
        while not os.path.exists(ready):
            rc = forward(src["tail"], rc)
            if rc is not None or src["qemu"].poll() is not None:
                raise vm.HarnessError("the guest ended before it was ready "
                                      "to migrate\n" + logs("src"))
            if time.monotonic() > deadline:
                raise vm.HarnessError("the guest was not ready to migrate "
                                      f"within {args.timeout:g}s\n" +
                                      logs("src"))
            time.sleep(0.1)
        rc = forward(src["tail"], rc)
        if args.host_step:
            vm.log(f"host step: {args.host_step}")
            step = subprocess.run(args.host_step, shell=True,
                                  env=dict(os.environ, SHARED=shared))
            if step.returncode != 0:
                raise vm.HarnessError(f"the host step failed (status "
                                      f"{step.returncode}): "
                                      f"{args.host_step}\n" + logs("src"))

        info = migrate(args, src_qmp, dst_qmp,
                       f"unix:{os.path.join(tmp, 'migration.sock')}")
        status = info.get("status")
        stats = {"status": status, "error": info.get("error-desc", ""),
                 "total_ms": info.get("total-time"),
                 "downtime_ms": info.get("downtime"),
                 "setup_ms": info.get("setup-time"),
                 "ram_transferred": info.get("ram", {}).get("transferred"),
                 "ram_total": info.get("ram", {}).get("total")}
        vm.log("migration " + ", ".join(f"{k} {v}" for k, v in stats.items()
                                        if v not in (None, "")))
        if args.stats_file:
            with open(args.stats_file, "w") as f:
                json.dump(stats, f)
        if status == "completed":
            # The destination runs the guest now; it must not be paused
            for _ in range(100):
                if dst_qmp.cmd("query-status")["status"] == "running":
                    break
                time.sleep(0.1)
            else:
                raise vm.HarnessError("the destination does not run the "
                                      "guest after the migration\n" +
                                      logs("dst"))
            quit_qemu(src_qmp)
            on = dst
        else:
            on = src
            if src_qmp.cmd("query-status")["status"] != "running":
                raise vm.HarnessError("the source guest does not run after "
                                      "the failed migration\n" + logs("src"))
            # The destination stays after a failure (exit-on-error off), or
            # never heard of a migration refused before it began (a
            # blocker) and would wait for it forever: end it, as libvirt
            # does.  Its error, if any, is said here.
            try:
                dst_info = dst_qmp.cmd("query-migrate")
                stats["dest_error"] = dst_info.get("error-desc", "")
                if stats["dest_error"]:
                    vm.log(f"destination: {stats['dest_error']}")
            except (OSError, vm.HarnessError) as e:
                vm.log(f"destination: {e}")
            quit_qemu(dst_qmp)
        vm.write_state(shared, ".migrate-done", status)

        while rc is None:
            rc = forward(on["tail"], rc)
            if rc is not None:
                break
            if on["qemu"].poll() is not None:
                rc = forward(on["tail"], rc)
                if rc is None:
                    raise vm.HarnessError("QEMU ended before the guest "
                                          "script finished\n" +
                                          logs("dst" if on is dst else "src"))
            if time.monotonic() > deadline:
                raise vm.HarnessError(f"the guest did not finish within "
                                      f"{args.timeout:g}s\n" +
                                      logs("dst" if on is dst else "src"))
            time.sleep(0.1)
        # Both QEMUs end (the guest powers off, or the harness quit it)
        # as vm.py's must, and each back-end must notice and exit
        for end in ("src", "dst"):
            vm.judge_exits(args, rc, ends[end]["qemu"], ends[end]["qlog"],
                           ends[end]["daemon"], ends[end]["dlog"], logdir,
                           suffix=f"-{end}")
        if args.show_logs:
            for end in ("src", "dst"):
                sys.stderr.write(logs(end))

        if status != args.expect_migration:
            print(f"FAIL: migration {status}, expected "
                  f"{args.expect_migration}: {stats['error']}")
            return 1
        if args.expect_error:
            # query-migrate has a summary; why is in the logs of QEMU
            # (its stderr) or of the daemon that refused
            said = []
            for end in ("src", "dst"):
                for key in ("qlog", "dlog"):
                    with open(ends[end][key], errors="replace") as f:
                        said += [ln.strip() for ln in f
                                 if args.expect_error in ln]
            for key in ("dest_error", "error"):
                if args.expect_error in (stats.get(key) or ""):
                    said.insert(0, stats[key])
            if not said:
                print(f"FAIL: neither the migration's error "
                      f"({stats['error']}) nor a log says "
                      f"\"{args.expect_error}\"")
                return 1
            print(f"ok: migration refused: {said[0]}")
        return rc
    finally:
        for q in (src_qmp, dst_qmp):
            if q:
                q.close()
        for p in procs:
            vm.stop(p)
        # As vm.py does: our daemons' logs for a wrapper to judge
        # (tests/inodes-by.sh, tests/on-kernel.sh)
        if os.environ.get("VFSD_OURS_LOG"):
            with open(os.environ["VFSD_OURS_LOG"], "a") as out:
                for dlog in ours_logs:
                    with open(dlog, errors="replace") as f:
                        out.write(f.read())
        shutil.rmtree(tmp, ignore_errors=True)


def build_parser():
    p = vm.build_parser()
    p.description = __doc__
    p.add_argument("--dest-daemon",
                   help="the destination's back-end (default: --daemon)")
    p.add_argument("--dest-daemon-args",
                   help="the destination's back-end options (default: "
                   "--daemon-args)")
    p.add_argument("--dest-cache-size",
                   help="the destination's cache-size, for it and its "
                   "back-end (default: --cache-size)")
    p.add_argument("--host-step",
                   help="shell command run on the host (with $SHARED) once "
                   "the guest is ready, before migrating")
    p.add_argument("--expect-migration", default="completed",
                   choices=["completed", "failed"])
    p.add_argument("--expect-error", default="",
                   help="text a log of QEMU or of a daemon must contain "
                   "(why the migration failed)")
    p.add_argument("--migrate-timeout", type=float, default=120)
    p.add_argument("--stats-file", help="write the outcome and times as JSON")
    p.add_argument("--show-logs", action="store_true",
                   help="print QEMU and daemon logs of both ends at the end")
    return p


def main():
    args = build_parser().parse_args()
    if not args.script:
        build_parser().error("give a guest SCRIPT")
    signal.signal(signal.SIGTERM, vm.on_signal)
    signal.signal(signal.SIGHUP, vm.on_signal)
    try:
        if args.daemon == "auto":
            args.daemon = "ours"
        if args.accel == "auto":
            args.accel = "kvm" if vm.kvm_usable() else "tcg"
        vm.apply_deadline(args)
        return run(args)
    except vm.HarnessError as e:
        print(f"migrate: error: {e}", file=sys.stderr)
        return vm.HARNESS_FAILURE
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

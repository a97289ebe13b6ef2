#!/usr/bin/env python3
"""Host side of harness/tests/lock-wait.sh: holds locks a guest waits for,
proves the guest's request really waits in our virtiofsd, stops and
continues the VM or lets it migrate, releases, and checks who holds the
lock afterwards.

    locks.py stop-cont --shared DIR --state-dir DIR --log-dir DIR
                       --qmp SOCK -- VM-COMMAND...
    locks.py migrate --shared DIR --state-dir DIR --log-dir DIR
                     -- MIGRATE-COMMAND...
    locks.py waiters --state-dir DIR --end src FILE:KIND...

The first two run the VM command themselves (harness/vm.py or
harness/migrate.py; its output passes through) so that no wait outlives
the guest.  "waiters" is migrate.py's --host-step: it returns once our
daemon waits on each FILE, or fails.  KIND is posix or flock.

What the host sees comes from /proc/locks, whose lines read

    1: POSIX  ADVISORY  WRITE 4242 fe:00:1234 0 EOF
    1: -> OFDLCK ADVISORY  WRITE -1 fe:00:1234 0 EOF

(a "->" line is a request blocked behind the lock above it; the device is
major:minor in hex, then the inode number).  Our daemon takes a guest's
POSIX locks as open-file-description locks, which /proc/locks shows with
pid -1: the holder is found in /proc/PID/fdinfo, whose "lock:" lines are
the locks that PID's open files hold.  flock locks show the pid of the
process that took them.

The exit status is 1 when a step failed (each says "FAIL: step ...", with
the daemons' last log lines), otherwise the VM command's.
"""

import argparse
import errno
import fcntl
import os
import signal
import subprocess
import sys
import time

HARNESS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HARNESS)
import vm  # noqa: E402
from migrate import Qmp  # noqa: E402

FILES = (("p.lock", "posix"), ("f.lock", "flock"))
# stop-cont's order, with how the VM is stopped around each release: the
# two controls, released while the VM runs, show the harness's path to a
# pass works on its own
STOP_CONT = (("cp.lock", "posix", "none"), ("cf.lock", "flock", "none"),
             ("p.lock", "posix", "before"), ("f.lock", "flock", "around"))


class StepFailed(Exception):
    pass


def say(msg):
    print(msg, flush=True)


def inode_key(path):
    st = os.stat(path)
    return f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"


def locks_on(path):
    """/proc/locks' entries on PATH: (blocked, class, type, pid) each."""
    key = inode_key(path)
    out = []
    with open("/proc/locks") as f:
        for line in f:
            words = line.split()
            blocked = len(words) > 1 and words[1] == "->"
            if blocked:
                del words[1]
            if len(words) >= 6 and words[5] == key:
                out.append((blocked, words[1], words[3], int(words[4])))
    return out


def daemon_pid(state_dir, name):
    """The process serving the guest among the daemon whose pid vm.py or
    migrate.py left in STATE_DIR/NAME (as harness/tests/lib.sh's
    serving_pid: under the namespace sandbox the daemon is the one child
    of the pid it started)."""
    with open(os.path.join(state_dir, name)) as f:
        pid = int(f.read())
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = f.read().split()
    except OSError:
        kids = []
    return int(kids[0]) if len(kids) == 1 else pid


def fd_locks(pid, path):
    """The "lock:" lines of PID's open files on PATH (fdinfo)."""
    key = inode_key(path)
    out = []
    fddir = f"/proc/{pid}/fdinfo"
    try:
        fds = os.listdir(fddir)
    except OSError:
        return out
    for fd in fds:
        try:
            with open(os.path.join(fddir, fd)) as f:
                out += [ln.strip() for ln in f
                        if ln.startswith("lock:") and key in ln.split()]
        except OSError:
            pass
    return out


def describe(path):
    entries = locks_on(path)
    if not entries:
        return "no lock"
    return "; ".join(f"{'waiting ' if b else ''}{c} {t} pid {p}"
                     for b, c, t, p in entries)


class Run:
    """One test run: the VM command, the host's holders, the steps."""

    def __init__(self, args):
        self.args = args
        self.shared = args.shared
        self.vm = None
        self.holders = {}
        self.failed = []

    def alive(self):
        return self.vm is None or self.vm.poll() is None

    def wait_for(self, what, cond, limit, show=None):
        """Polls COND until it holds, for LIMIT seconds at most and no
        longer than the VM lives.  A failure says what /proc/locks shows
        on SHOW (a path) by then."""
        deadline = time.monotonic() + limit
        while True:
            got = cond()
            if got:
                return got
            if time.monotonic() > deadline:
                why = f"not within {limit:g} s"
                break
            if not self.alive():
                # One last look: it may have happened as the guest ended
                got = cond()
                if got:
                    return got
                why = "the guest ended first"
                break
            time.sleep(0.1)
        if show:
            why += f"; /proc/locks: {describe(show)}"
        raise StepFailed(f"{what}: {why}")

    def fail(self, step, e):
        say(f"FAIL: step {step}: {e}")
        logdir = self.args.log_dir
        for name in sorted(os.listdir(logdir)) if logdir else ():
            if name.startswith("virtiofsd"):
                sys.stdout.write(f"--- {name} (last lines)\n" +
                                 vm.tail(os.path.join(logdir, name), 15))
        sys.stdout.flush()
        self.failed.append(step)

    def hold(self, name, kind):
        """A process of the host's own takes the lock and keeps it until
        its stdin closes."""
        path = os.path.join(self.shared, name)
        code = ("import fcntl, os, sys\n"
                "fd = os.open(sys.argv[1], os.O_RDWR)\n"
                + ("fcntl.lockf(fd, fcntl.LOCK_EX)\n" if kind == "posix" else
                   "fcntl.flock(fd, fcntl.LOCK_EX)\n") +
                "print('held', flush=True)\n"
                "sys.stdin.read()\n")
        p = subprocess.Popen([sys.executable, "-c", code, path],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
        if p.stdout.readline().strip() != "held":
            raise StepFailed(f"the host could not lock {name}")
        self.holders[name] = p
        say(f"ok: the host holds {name} ({kind}): {describe(path)}")

    def release(self, name):
        p = self.holders.pop(name)
        p.stdin.close()
        p.wait(10)

    def daemon(self, end):
        return daemon_pid(self.args.state_dir, f"daemon{end}.pid")

    def waiter_seen(self, name, kind, pid):
        """Whether the daemon PID's request for NAME waits in the host
        kernel behind the host's lock."""
        for blocked, cls, typ, lpid in locks_on(os.path.join(self.shared,
                                                             name)):
            if not blocked or typ != "WRITE":
                continue
            if kind == "posix" and cls == "OFDLCK":
                return True
            if kind == "flock" and cls == "FLOCK" and lpid == pid:
                return True
        return False

    def holds(self, name, kind, pid):
        """Whether the daemon PID holds NAME's lock (and nobody waits)."""
        path = os.path.join(self.shared, name)
        cls = "OFDLCK" if kind == "posix" else "FLOCK"
        entries = locks_on(path)
        if len(entries) != 1:
            return False
        blocked, lcls, typ, lpid = entries[0]
        if blocked or lcls != cls or typ != "WRITE" or \
                (kind == "flock" and lpid != pid):
            return False
        return any(cls in ln and "WRITE" in ln for ln in fd_locks(pid, path))

    def host_cannot_lock(self, name, kind):
        path = os.path.join(self.shared, name)
        fd = os.open(path, os.O_RDWR)
        try:
            if kind == "posix":
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            else:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.EACCES):
                raise StepFailed(f"the host's try on {name}: {e}")
            say(f"ok: the host cannot take {name} meanwhile "
                f"({errno.errorcode[e.errno]})")
            return
        finally:
            os.close(fd)
        raise StepFailed(f"the host took {name} while the guest holds it")

    def guest_has_it(self, name, kind, pid, who):
        """The guest says it holds NAME: it must be PID's lock on the
        host; then the guest lets go and the host sees the lock go."""
        path = os.path.join(self.shared, name)
        self.wait_for(f"{name}.held from the guest after the release",
                      lambda: os.path.exists(path + ".held"), 25, path)
        self.wait_for(f"{name} held by {who} (pid {pid})",
                      lambda: self.holds(name, kind, pid), 5, path)
        say(f"ok: {name} is held on the host by {who} (pid {pid}): "
            f"{describe(path)}")
        self.host_cannot_lock(name, kind)
        with open(path + ".release", "w"):
            pass
        self.wait_for(f"{name} unlocked on the host after the guest's "
                      "release", lambda: not locks_on(path), 30, path)
        say(f"ok: {name}: the guest's unlock reached the host")

    def finish(self):
        for name in list(self.holders):
            self.release(name)
        rc = self.vm.wait() if self.vm else 0
        if self.failed:
            say(f"FAIL: {len(self.failed)} step(s) failed: "
                + ", ".join(self.failed))
            return 1
        return rc


def stop_cont(args):
    """The controls: released while the VM runs.  p.lock (posix): stop,
    cont, then release: the daemon's wait goes on across the stop.
    f.lock (flock): stop, release while stopped, cont: whether the
    daemon's thread took the lock while the queues were stopped (its reply
    must then wait for cont) or gave its wait up at the stop (to run it
    again at cont), the guest must get the lock after cont."""
    run = Run(args)
    qmp = None
    try:
        for name, kind, _ in STOP_CONT:
            run.hold(name, kind)
        run.vm = subprocess.Popen(args.command, start_new_session=True)
        for i, (name, kind, stop) in enumerate(STOP_CONT):
            path = os.path.join(args.shared, name)
            step = f"{i + 1} ({name}, {kind})"
            try:
                # vm.py leaves daemon.pid once the daemon listens
                pid = run.wait_for(
                    f"the guest's request for {name} waiting in the daemon",
                    lambda: os.path.exists(os.path.join(args.state_dir,
                                                        "daemon.pid")) and
                    run.waiter_seen(name, kind, run.daemon("")) and
                    run.daemon(""), 120 if i == 0 else 60, path)
                say(f"ok: {name}: the guest's request waits in the daemon "
                    f"(pid {pid}): {describe(path)}")
                if stop == "none":
                    run.release(name)
                    run.guest_has_it(name, kind, pid, "our daemon")
                    continue
                if qmp is None:
                    qmp = Qmp(args.qmp)
                qmp.cmd("stop")
                if qmp.cmd("query-status")["status"] != "paused":
                    raise StepFailed("QEMU is not paused after stop")
                if stop == "before":
                    time.sleep(1)
                    qmp.cmd("cont")
                    # The wait must be alive again (or still) once the VM
                    # runs, before the host lets go
                    run.wait_for(f"{name}: the request waiting after cont",
                                 lambda: run.waiter_seen(name, kind, pid), 5,
                                 path)
                    say(f"ok: {name}: stopped 1 s and continued, the "
                        "request still waits; the host releases")
                    run.release(name)
                else:
                    run.release(name)
                    time.sleep(1)
                    if qmp.cmd("query-status")["status"] != "paused":
                        raise StepFailed("QEMU runs before cont")
                    who = "the daemon" if run.holds(name, kind, pid) else \
                        "nobody"
                    say(f"ok: {name}: released while stopped; 1 s later "
                        f"{who} holds it: {describe(path)}")
                    qmp.cmd("cont")
                if qmp.cmd("query-status")["status"] != "running":
                    raise StepFailed("QEMU does not run after cont")
                run.guest_has_it(name, kind, pid, "our daemon")
            except (StepFailed, vm.HarnessError, OSError) as e:
                run.fail(step, e)
                if qmp is not None:
                    try:
                        if qmp.cmd("query-status")["status"] == "paused":
                            qmp.cmd("cont")
                    except (vm.HarnessError, OSError):
                        pass
        return run.finish()
    finally:
        if qmp is not None:
            qmp.close()
        if run.vm and run.vm.poll() is None:
            vm.stop(run.vm)


def migrate(args):
    """The guest waits on both files when the migration begins (migrate.py
    runs "waiters" as its host step); once it has completed the waits go
    on in the destination's daemon, the host lets go, and that daemon must
    take both locks for the guest."""
    run = Run(args)
    done = os.path.join(args.shared, ".migrate-done")
    ready = os.path.join(args.shared, ".migrate-ready")
    try:
        for name, kind in FILES:
            run.hold(name, kind)
        run.vm = subprocess.Popen(args.command, start_new_session=True)
        try:
            # Both daemons serve once the guest is ready to migrate
            run.wait_for("the guest ready to migrate (.migrate-ready)",
                         lambda: os.path.exists(ready), 120)
            src = run.daemon("-src")
            dst = run.daemon("-dst")
            run.wait_for("the migration's outcome (.migrate-done)",
                         lambda: os.path.exists(done), 300)
            with open(done) as f:
                outcome = f.read().strip()
            if outcome != "completed":
                raise StepFailed(f"the migration {outcome}")
        except (StepFailed, OSError) as e:
            run.fail("migration", e)
            return run.finish()
        # The migration carried the waits: they go on in the destination
        # (for POSIX, whose OFD locks show no pid, an OFD waiter on the
        # file: the source has no queue left to answer through)
        for i, (name, kind) in enumerate(FILES):
            path = os.path.join(args.shared, name)
            try:
                run.wait_for(f"{name}: the guest's request waiting in the "
                             f"destination daemon (pid {dst}; the source's "
                             f"is {src}) after the migration",
                             lambda: run.waiter_seen(name, kind, dst), 10,
                             path)
                say(f"ok: {name}: after the migration the request waits in "
                    f"the destination daemon (pid {dst}): {describe(path)}")
            except StepFailed as e:
                run.fail(f"{i + 1} ({name}, {kind}) after the migration", e)
        for name, kind in FILES:
            run.release(name)
        say("ok: the host released both locks")
        for i, (name, kind) in enumerate(FILES):
            try:
                run.guest_has_it(name, kind, dst, "the destination daemon")
            except (StepFailed, OSError) as e:
                run.fail(f"{i + 1} ({name}, {kind})", e)
        return run.finish()
    finally:
        if run.vm and run.vm.poll() is None:
            vm.stop(run.vm)


def waiters(args):
    pid = daemon_pid(args.state_dir, f"daemon-{args.end}.pid")
    run = Run(args)
    for spec in args.files:
        path, _, kind = spec.rpartition(":")
        run.shared = os.path.dirname(path)
        name = os.path.basename(path)
        try:
            run.wait_for(f"the guest's request for {name} waiting in the "
                         f"{args.end} daemon (pid {pid})",
                         lambda: run.waiter_seen(name, kind, pid), 60, path)
        except StepFailed as e:
            run.fail("waiters", e)
            return 1
        say(f"ok: {name}: the guest's request waits in the {args.end} "
            f"daemon (pid {pid}): {describe(path)}")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("case", choices=["stop-cont", "migrate", "waiters"])
    p.add_argument("--shared")
    p.add_argument("--state-dir", required=True)
    p.add_argument("--log-dir")
    p.add_argument("--qmp")
    p.add_argument("--end", default="src")
    p.add_argument("files", nargs="*", help="FILE:KIND (waiters)")
    argv = sys.argv[1:]
    command = argv[argv.index("--") + 1:] if "--" in argv else []
    args = p.parse_intermixed_args(
        argv[:len(argv) - len(command) - bool(command)])
    args.command = command
    # Ending (mk/check.py's limit) takes the VM down with us
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))
    if args.case == "waiters":
        return waiters(args)
    if not args.command or not args.shared:
        p.error("give --shared and -- COMMAND")
    return stop_cont(args) if args.case == "stop-cont" else migrate(args)


if __name__ == "__main__":
    sys.exit(main())

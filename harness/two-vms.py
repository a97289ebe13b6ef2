#!/usr/bin/env python3
"""Boot two test guests on the same shared host directory, side by side.

    harness/two-vms.py [vm.py options] SCRIPT_A SCRIPT_B

Each guest is one harness/vm.py run with the same options (--shared is
required: that is the point), so each gets its own QEMU and its own
virtio-fs back-end serving the one directory.  Guest A runs SCRIPT_A and
sees VFS_GUEST=A, guest B runs SCRIPT_B with VFS_GUEST=B.  Their output is
interleaved on stdout, each line prefixed with "A: " or "B: ".

With --state-dir DIR, guest A's vm.py writes its state (QEMU's and the
daemon's pids...) to DIR/A and guest B's to DIR/B, so that the host can
look at each; so with --log-dir.

The exit status is 0 when both scripts exit 0, else the first failure's
(125: a harness failure).  When one guest fails, the other is given
--peer-grace seconds to finish, then stopped: a guest waiting for a peer
that is gone must not hold the run until its own timeout.  vm.py tears its
QEMU and daemon down when interrupted, so the driver stops a guest with
SIGINT and both are always stopped before it returns, whatever happens.
"""

import os
import signal
import subprocess
import sys
import threading
import time

VM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vm.py")
HARNESS_FAILURE = 125


def pump(name, proc, lock):
    for line in proc.stdout:
        with lock:
            sys.stdout.write(f"{name}: {line}")
            sys.stdout.flush()


def interrupt(proc, grace=20):
    """Stop one vm.py the way that lets it clean up after itself."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        # Only a wedged vm.py gets here; its QEMU and daemon run in their
        # own sessions and would outlive it, which we accept over hanging.
        proc.kill()
        proc.wait()


def main():
    argv = sys.argv[1:]
    grace = 30.0
    if "--peer-grace" in argv:
        i = argv.index("--peer-grace")
        grace = float(argv[i + 1])
        del argv[i:i + 2]
    if len(argv) < 2 or not any(a == "--shared" or a.startswith("--shared=")
                                for a in argv):
        print(__doc__, file=sys.stderr)
        print("two-vms: give --shared DIR and two guest scripts",
              file=sys.stderr)
        return HARNESS_FAILURE
    options, scripts = argv[:-2], argv[-2:]

    def own_state(options, name):
        """OPTIONS with a --state-dir and --log-dir of its own for guest
        NAME"""
        out, i = [], 0
        while i < len(options):
            a, opt = options[i], options[i].split("=", 1)[0]
            if opt in ("--state-dir", "--log-dir"):
                if "=" in a:
                    a = opt + "=" + os.path.join(a.split("=", 1)[1], name)
                elif i + 1 < len(options):
                    out += [a, os.path.join(options[i + 1], name)]
                    i += 2
                    continue
            out.append(a)
            i += 1
        return out

    # SIGTERM (a CI timeout) must tear the guests down like Ctrl-C does.
    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)

    lock = threading.Lock()
    procs, pumps = {}, []
    try:
        for name, script in zip("AB", scripts):
            procs[name] = subprocess.Popen(
                [sys.executable, VM, *own_state(options, name),
                 "--env", f"VFS_GUEST={name}",
                 script],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                errors="replace", stdin=subprocess.DEVNULL,
                # Started from a shell's background job, we may have
                # inherited SIGINT ignored; vm.py needs it to clean up.
                preexec_fn=lambda: signal.signal(signal.SIGINT,
                                                 signal.SIG_DFL))
            t = threading.Thread(target=pump, args=(name, procs[name], lock),
                                 daemon=True)
            t.start()
            pumps.append(t)

        rc, failed_at = None, None
        while any(p.poll() is None for p in procs.values()):
            for name, p in procs.items():
                if p.poll() not in (None, 0) and rc is None:
                    rc, failed_at = p.returncode, time.monotonic()
                    with lock:
                        print(f"two-vms: guest {name} failed (status {rc}); "
                              f"the other gets {grace:.0f} s", flush=True)
            if failed_at is not None and time.monotonic() - failed_at > grace:
                break
            time.sleep(0.2)
        for p in procs.values():
            interrupt(p)
        for t in pumps:
            t.join(5)
        if rc is None:
            rc = next((p.returncode for p in procs.values()
                       if p.returncode != 0), 0)
        return rc
    except KeyboardInterrupt:
        for p in procs.values():
            interrupt(p)
        return 130
    finally:
        for p in procs.values():
            if p.poll() is None:
                interrupt(p)


if __name__ == "__main__":
    sys.exit(main())

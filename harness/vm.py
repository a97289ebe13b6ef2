#!/usr/bin/env python3
"""Boot a test guest that shares a host directory, run a script in it.

    harness/vm.py [options] SCRIPT            (SCRIPT: a guest shell script)
    harness/vm.py [options] --cmd 'ls /mnt'

The guest is Debian 13's kernel with the harness initramfs (build/guest/),
or with GUEST_KERNEL=bookworm|sid in the environment Debian 12's or sid's
(build/guest-NAME/, make guest GUEST_KERNEL=NAME); GUEST_DIR names another
directory.
A virtio-fs back-end (ours, the Rust virtiofsd, or any compatible binary) is
started on a private socket, QEMU boots with shared guest memory, the script
runs as the guest's PID 1 child with its output on a second serial port, and
everything is torn down afterwards, whatever happens.

The script's output goes to stdout as it comes; the exit status is the
script's.  125 means the harness itself failed, with a message on stderr
saying what did not come up, or what did not go down: after the guest's
verdict QEMU must exit with status 0 within --exit-limit seconds, and the
daemon must then end by itself, with status 0, within as long again
(--expect-qemu-exit and --expect-daemon-exit name another status, or
"any", for a test that breaks one of them on purpose), and so must every
--extra-daemon, with status 0.  A QEMU that hangs or aborts while it
tears the device down, or a daemon that crashes on DESTROY or on the
disconnect, fails the run whatever the guest said.

VFSDAX_DEADLINE in the environment (seconds since the epoch, as
mk/check.py sets it for a suite) cuts --timeout so that the run, teardown
included, ends before it.  SIGTERM and SIGHUP tear everything down like
Ctrl-C does.

Inside the guest the script sees VFS_TAG (the tag to mount), VFS_DAX (1 when
a cache window was configured), VFS_DAEMON, VFS_ACCEL (kvm or tcg),
VFS_REQUEST_QUEUES (0: the device's default) and /lib/vfsdax.sh.
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

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("BUILD", os.path.join(TOP, "build"))
# Another upstream base than the default (QEMU_BASE, README "Upstream
# bases") has its QEMU in build/base-X; the guest is the same for all.
# The guest's kernel, by Debian release (README "Guest kernels"): trixie's
# in build/guest, the others' in build/guest-NAME.
GUEST_KERNELS = ("bookworm", "trixie", "sid")
GUEST_KERNEL = os.environ.get("GUEST_KERNEL") or "trixie"
if GUEST_KERNEL not in GUEST_KERNELS:
    sys.exit(f"vm.py: GUEST_KERNEL={GUEST_KERNEL}: not one of "
             + ", ".join(GUEST_KERNELS))
GUEST_NAME = "guest" if GUEST_KERNEL == "trixie" else "guest-" + GUEST_KERNEL
if os.environ.get("QEMU_BASE") and "BUILD" not in os.environ and \
        os.path.isdir(os.path.join(TOP, "bases", os.environ["QEMU_BASE"])):
    os.environ.setdefault("GUEST_DIR", os.path.join(BUILD, GUEST_NAME))
    BUILD = os.path.join(BUILD, "base-" + os.environ["QEMU_BASE"])
GUEST = os.environ.get("GUEST_DIR") or os.path.join(BUILD, GUEST_NAME)
QEMU = os.path.join(BUILD, "qemu", "qemu-system-x86_64")
OUR_VIRTIOFSD = os.path.join(BUILD, "qemu", "tools", "virtiofsd", "virtiofsd")
# Debian's unmodified QEMU 11.1 (mk/upstream-qemu.sh), for --upstream-device
UPSTREAM_QEMU = os.path.join(BUILD, "upstream-qemu", "qemu-system-x86_64")
FIRMWARE_DIRS = [os.path.join(BUILD, "qemu", "pc-bios", "optionrom"),
                 os.path.join(BUILD, "qemu", "pc-bios"),
                 "/usr/share/seabios", "/usr/lib/ipxe/qemu", "/usr/share/qemu"]
EXIT_MARK = "@@VFSDAX-EXIT="
HARNESS_FAILURE = 125


class HarnessError(Exception):
    pass


def log(msg):
    print("vm: " + msg, file=sys.stderr, flush=True)


def rust_virtiofsd():
    path = subprocess.run([os.path.join(TOP, "harness", "rust-virtiofsd.sh")],
                          stdout=subprocess.PIPE, text=True)
    if path.returncode != 0:
        raise HarnessError("the Rust virtiofsd is not available "
                           "(harness/rust-virtiofsd.sh failed)")
    return path.stdout.strip()


def daemon_command(kind, binary, sock, shared, cache, extra):
    """The command line for a back-end, in the form its binary accepts."""
    if kind == "ours":
        if not os.access(binary, os.X_OK):
            raise HarnessError(f"our virtiofsd is not built ({binary}): run make")
        cmd = [binary, f"--socket-path={sock}", f"--shared-dir={shared}",
               f"--cache={cache}"]
    else:
        cmd = [binary, "--socket-path", sock, "--shared-dir", shared,
               "--cache", cache]
    return cmd + extra


def write_state(state_dir, name, text):
    """Write STATE_DIR/NAME atomically: a test polls for it."""
    os.makedirs(state_dir, exist_ok=True)
    tmp = os.path.join(state_dir, f".{name}.tmp")
    with open(tmp, "w") as f:
        f.write(text if text.endswith("\n") else text + "\n")
    os.rename(tmp, os.path.join(state_dir, name))


def parse_size(text):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    text = text.strip().upper()
    if text and text[-1] in mult:
        return int(text[:-1]) * mult[text[-1]]
    return int(text)


def kvm_usable(timeout=40):
    """Whether a probe guest really boots under KVM here (cached per kernel).

    /dev/kvm answering ioctls is not enough: some hosts run a KVM variant on
    which a stock kernel dies early with an emulation failure.
    """
    if os.environ.get("VFSDAX_ACCEL") in ("tcg", "kvm"):
        return os.environ["VFSDAX_ACCEL"] == "kvm"
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False
    cache = os.path.join(GUEST, "accel-probe")
    stamp = str(os.stat(os.path.join(GUEST, "vmlinuz")).st_mtime_ns)
    try:
        with open(cache) as f:
            got_stamp, verdict = f.read().split()
            if got_stamp == stamp:
                return verdict == "kvm"
    except (OSError, ValueError):
        pass
    with tempfile.TemporaryDirectory(prefix="vfsdax-probe-") as tmp:
        script = os.path.join(tmp, "probe.sh")
        with open(script, "w") as f:
            f.write("echo probe-ok\n")
        args = argparse.Namespace(**vars(default_args()))
        args.accel, args.daemon, args.script = "kvm", "none", script
        args.timeout, args.quiet = timeout, True
        out = []
        try:
            rc = run_guest(args, sink=out.append)
        except HarnessError:
            rc = -1
        ok = rc == 0 and "probe-ok" in "".join(out)
    with open(cache, "w") as f:
        f.write(f"{stamp} {'kvm' if ok else 'tcg'}\n")
    return ok


def make_initrd(tmp, script_text, env):
    """The harness initramfs with /vfsdax/{script,env} appended as a second
    cpio archive (the kernel unpacks concatenated archives in order)."""
    extra = os.path.join(tmp, "extra")
    os.makedirs(os.path.join(extra, "vfsdax"))
    with open(os.path.join(extra, "vfsdax", "script"), "w") as f:
        f.write(script_text)
    with open(os.path.join(extra, "vfsdax", "env"), "w") as f:
        for k, v in env.items():
            f.write(f"export {k}={shlex.quote(str(v))}\n")
    cpio = subprocess.run(
        "find . | cpio -o -H newc --quiet | gzip -1",
        shell=True, cwd=extra, stdout=subprocess.PIPE, check=True).stdout
    initrd = os.path.join(tmp, "initrd")
    base = os.path.join(GUEST, "initramfs.cpio.gz")
    if not os.path.exists(base):
        raise HarnessError(f"{base} is missing: run make guest")
    with open(initrd, "wb") as out, open(base, "rb") as b:
        shutil.copyfileobj(b, out)
        out.write(cpio)
    return initrd


def wait_for_socket(path, proc, timeout, what, logfile):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path):
            return
        if proc.poll() is not None:
            raise HarnessError(f"{what} exited with status {proc.returncode} "
                               f"before creating {path}:\n" + tail(logfile))
        time.sleep(0.05)
    raise HarnessError(f"{what} did not create {path} within {timeout}s:\n"
                       + tail(logfile))


def tail(path, lines=25):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def describe_status(rc):
    if rc is None:
        return "still running"
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"status {rc}"


def status_ok(rc, want):
    return want == "any" or rc == int(want)


def judge_exits(args, rc, qemu_proc, qlog, daemon, dlog, logdir, suffix="",
                extras=()):
    """After the guest's verdict RC: QEMU must exit as expected within the
    limit, then the daemon by itself, and so must each of EXTRAS (TAG,
    PROC, LOG): the --extra-daemon ones, with status 0.  SUFFIX names one
    end of a migration (-src, -dst), as qemu_command() names its logs.
    Raises HarnessError otherwise."""
    end = f" ({suffix.lstrip('-')})" if suffix else ""

    def logs(more=""):
        return (f"--- {os.path.basename(qlog)}\n{tail(qlog)}"
                f"--- guest console{end} (tail)\n"
                f"{tail(os.path.join(logdir, f'console{suffix}.log'))}"
                + (f"--- {os.path.basename(dlog)}\n{tail(dlog)}"
                   if daemon else "")
                + (f"--- {os.path.basename(more)}\n{tail(more)}"
                   if more else ""))
    verdict = f"the guest script ended with status {rc}, but "
    try:
        qemu_proc.wait(args.exit_limit)
    except subprocess.TimeoutExpired:
        raise HarnessError(verdict + f"QEMU{end} did not exit within "
                           f"{args.exit_limit:g}s after it.\n" + logs())
    if not status_ok(qemu_proc.returncode, args.expect_qemu_exit):
        raise HarnessError(verdict + f"QEMU{end} ended with "
                           f"{describe_status(qemu_proc.returncode)} "
                           f"(expected {args.expect_qemu_exit}).\n" + logs())
    # Their front-end is gone: back-ends must notice and end by themselves
    # (all at once: the limit is for them all).
    deadline = time.monotonic() + args.exit_limit
    judged = [("virtiofsd" + end, daemon, dlog, args.expect_daemon_exit)] \
        if daemon else []
    judged += [(f"virtiofsd for {tag}", proc, log_, "0")
               for tag, proc, log_ in extras]
    for name, proc, log_, want in judged:
        more = "" if proc is daemon else log_
        try:
            proc.wait(max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            raise HarnessError(verdict + f"{name} was still running "
                               f"{args.exit_limit:g}s after QEMU exited.\n"
                               + logs(more))
        if not status_ok(proc.returncode, want):
            raise HarnessError(verdict + f"{name} ended with "
                               f"{describe_status(proc.returncode)} "
                               f"(expected {want}).\n" + logs(more))


def apply_deadline(args):
    """Cut args.timeout to end, teardown included, by $VFSDAX_DEADLINE."""
    deadline = os.environ.get("VFSDAX_DEADLINE")
    if not deadline:
        return
    # Two exit limits, the grace of stop() twice, and a margin
    left = float(deadline) - time.time() - (2 * args.exit_limit + 15)
    if left < args.timeout:
        if not args.quiet:
            log(f"timeout cut from {args.timeout:g}s to {max(left, 1):.0f}s: "
                "the suite's limit ($VFSDAX_DEADLINE) is near")
        args.timeout = max(left, 1)


def stop(proc, grace=5):
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(grace)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def start_daemon(args, shared, sock, logdir, name="virtiofsd",
                 daemon=None, daemon_args=None):
    """Start the back-end args names (or DAEMON: ours, rust, a binary) on
    SOCK, logging to LOGDIR/NAME.log.  Returns (proc, command, log)."""
    daemon = daemon or args.daemon
    if daemon == "ours":
        kind, binary = "ours", (args.daemon_binary if args.daemon == "ours"
                                else None) or OUR_VIRTIOFSD
    elif daemon == "rust":
        kind, binary = "rust", (args.daemon_binary if args.daemon == "rust"
                                else None) or rust_virtiofsd()
    else:
        kind, binary = "other", daemon
    extra = shlex.split(args.daemon_args if daemon_args is None
                        else daemon_args)
    if kind == "ours":
        # tests/inodes-by.sh: a whole test with an option more
        extra += shlex.split(os.environ.get("VFSD_OURS_ARGS", ""))
    if args.upstream_device:
        # The generic device asks the back-end for tag and window
        extra = [f"--tag={args.tag}"] + extra
        if args.cache_size:
            extra = [f"--cache-size={args.cache_size}"] + extra
    dcmd = daemon_command(kind, binary, sock, shared, args.cache_mode,
                          extra)
    pass_fds = ()
    lsock = None
    if args.daemon_fd:
        # As libvirt does: we listen, the daemon gets the listening
        # socket as --fd and never sees the path QEMU connects to.
        lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        lsock.bind(sock)
        lsock.listen(1)
        dcmd = [c for c in dcmd if not c.startswith("--socket-path")]
        dcmd.insert(1, f"--fd={lsock.fileno()}")
        pass_fds = (lsock.fileno(),)
    dlog = os.path.join(logdir, f"{name}.log")
    if not args.quiet:
        log(f"{name}: " + " ".join(shlex.quote(c) for c in dcmd))
    proc = subprocess.Popen(dcmd, stdout=open(dlog, "w"),
                            stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL,
                            pass_fds=pass_fds,
                            start_new_session=True)
    if lsock:
        lsock.close()
    wait_for_socket(sock, proc, 15, f"{name} ({binary})", dlog)
    return proc, dcmd, dlog


def qemu_command(args, qemu, initrd, logdir, sock, suffix=""):
    """QEMU's command line for args, its back-end on SOCK (unless --daemon
    none), its serial ports in LOGDIR/{console,output}SUFFIX.log."""
    mem = args.mem
    qcmd = [qemu, "-nodefaults", "-no-user-config", "-display", "none",
            "-machine", f"{args.machine},memory-backend=mem",
            "-object", f"memory-backend-memfd,id=mem,size={mem},share=on",
            "-m", mem, "-smp", str(args.smp),
            "-kernel", os.path.join(GUEST, "vmlinuz"), "-initrd", initrd,
            "-append", "console=ttyS0 panic=-1 loglevel=4 " + args.append,
            "-serial", f"file:{os.path.join(logdir, f'console{suffix}.log')}",
            "-serial", f"file:{os.path.join(logdir, f'output{suffix}.log')}"]
    if not args.allow_reboot:
        # A guest that reboots (or panics) ends the run
        qcmd += ["-no-reboot"]
    for d in FIRMWARE_DIRS:
        if os.path.isdir(d):
            qcmd += ["-L", d]
    if args.accel == "kvm":
        qcmd += ["-accel", "kvm", "-cpu", "max"]
    else:
        qcmd += ["-accel", "tcg,thread=multi", "-cpu", "max"]

    if args.daemon != "none":
        if args.upstream_device:
            # virtio-fs's config space: tag[36], num_request_queues
            dev = ("vhost-user-test-device-pci,chardev=vfs,virtio-id=26,"
                   "num_vqs=2,config_size=40")
            if args.queue_size:
                dev += f",vq_size={args.queue_size}"
        else:
            dev = f"vhost-user-fs-pci,chardev=vfs,tag={args.tag}"
            if args.queue_size:
                dev += f",queue-size={args.queue_size}"
            if args.request_queues:
                dev += f",num-request-queues={args.request_queues}"
            if args.cache_size:
                dev += f",cache-size={args.cache_size}"
        chardev = f"socket,id=vfs,path={sock}"
        if args.reconnect_ms:
            chardev += f",reconnect-ms={args.reconnect_ms}"
        qcmd += ["-chardev", chardev, "-device", dev]
    if args.p9:
        qcmd += ["-fsdev", f"local,id=p9,path={args.p9},security_model=none",
                 "-device", "virtio-9p-pci,fsdev=p9,mount_tag=p9"]
    return qcmd + shlex.split(args.qemu_args)


def guest_release():
    """The Debian release whose kernel GUEST holds ("release:" in its
    kernel.txt), None for a guest built before the kernel matrix."""
    try:
        with open(os.path.join(GUEST, "kernel.txt")) as f:
            for line in f:
                if line.startswith("release:"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def run_guest(args, sink=None):
    """Boot, run, tear down.  Returns the guest script's exit status."""
    sink = sink or (lambda s: (sys.stdout.write(s), sys.stdout.flush()))
    for f in ("vmlinuz", "initramfs.cpio.gz"):
        if not os.path.exists(os.path.join(GUEST, f)):
            raise HarnessError(f"{GUEST}/{f} is missing: run make guest"
                               f" GUEST_KERNEL={GUEST_KERNEL}")
    # A test run for one kernel must not quietly boot another
    release = guest_release()
    if release and "GUEST_KERNEL" in os.environ and release != GUEST_KERNEL:
        raise HarnessError(f"{GUEST} holds {release}'s kernel, not "
                           f"GUEST_KERNEL={GUEST_KERNEL}'s")
    qemu = args.qemu or (UPSTREAM_QEMU if args.upstream_device else QEMU)
    if not os.access(qemu, os.X_OK):
        raise HarnessError(f"{qemu} is not built: run " +
                           ("mk/upstream-qemu.sh" if args.upstream_device
                            else "make"))

    tmp = tempfile.mkdtemp(prefix="vfsdax-vm-")
    logdir = args.log_dir or tmp
    os.makedirs(logdir, exist_ok=True)
    daemon = qemu_proc = None
    daemon_kind = None
    extras = []
    try:
        if args.script:
            with open(args.script) as f:
                script_text = f.read()
        else:
            script_text = args.cmd + "\n"

        shared = args.shared
        if shared is None and args.daemon != "none":
            shared = os.path.join(tmp, "shared")
            os.makedirs(shared)

        env = {"VFS_TAG": args.tag, "VFS_DAX": 1 if args.cache_size else 0,
               "VFS_DAEMON": args.daemon, "VFS_ACCEL": args.accel,
               "VFS_REQUEST_QUEUES": args.request_queues, "VFSDAX_MODULES": 1 if args.p9 else 0}
        for kv in args.env:
            k, _, v = kv.partition("=")
            env[k] = v
        initrd = make_initrd(tmp, script_text, env)

        daemon = dlog = None
        sock = os.path.join(tmp, "vfs.sock")
        if args.daemon != "none":
            daemon, dcmd, dlog = start_daemon(args, shared, sock, logdir)
            daemon_kind = args.daemon
            if args.state_dir:
                write_state(args.state_dir, "socket", sock)
                # What a test needs to kill this daemon and start another.
                write_state(args.state_dir, "daemon.pid", str(daemon.pid))
                write_state(args.state_dir, "daemon.cmd",
                            json.dumps(dcmd) + "\n")
        qcmd = qemu_command(args, qemu, initrd, logdir, sock)
        # More shares, each served by one of our daemons (or the Rust
        # one, or a binary the spec names) started with the given
        # arguments as they are (the test names its shared directory,
        # and the socket as @SOCK@), for tests of many command lines in
        # one boot, or of several shares of one daemon under test
        # (harness/fstests: TEST_DEV and SCRATCH_DEV), each with its own
        # window when the spec gives cache-size.
        for i, spec in enumerate(args.extra_daemon):
            tag, attrs, dargs = parse_extra(spec)
            xsock = os.path.join(tmp, f"extra{i}.sock")
            xlog = os.path.join(logdir, f"virtiofsd-{tag}.log")
            xbin = attrs.get("daemon", "ours")
            if xbin == "ours":
                xbin = args.daemon_binary or OUR_VIRTIOFSD
            elif xbin == "rust":
                xbin = rust_virtiofsd()
            xcmd = [xbin] + \
                [a.replace("@SOCK@", xsock) for a in shlex.split(dargs)]
            if not args.quiet:
                log(f"daemon {tag}: " + " ".join(shlex.quote(c) for c in xcmd))
            xproc = subprocess.Popen(xcmd, stdout=open(xlog, "w"),
                                     stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL,
                                     start_new_session=True)
            extras.append((tag, xproc, xlog))
            wait_for_socket(xsock, xproc, 15, f"virtiofsd for {tag}", xlog)
            xdev = f"vhost-user-fs-pci,chardev=x{i},tag={tag}"
            if attrs.get("cache-size"):
                xdev += f",cache-size={attrs['cache-size']}"
            qcmd += ["-chardev", f"socket,id=x{i},path={xsock}", "-device",
                     xdev]

        qlog = os.path.join(logdir, "qemu.log")
        if not args.quiet:
            log(f"accel: {args.accel}; qemu: " +
                " ".join(shlex.quote(c) for c in qcmd))
        qemu_proc = subprocess.Popen(qcmd, stdout=open(qlog, "w"),
                                     stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        if args.state_dir:
            write_state(args.state_dir, "qemu.pid", str(qemu_proc.pid))

        out_path = os.path.join(logdir, "output.log")
        deadline = time.monotonic() + args.timeout
        pos, buf, rc = 0, "", None
        daemon_noted = False
        while True:
            done = qemu_proc.poll() is not None
            if os.path.exists(out_path):
                with open(out_path, "rb") as f:
                    f.seek(pos)
                    chunk = f.read()
                pos += len(chunk)
                buf += chunk.decode("utf-8", "replace").replace("\r", "")
                # Hand on whole lines, holding back a possible exit mark.
                while "\n" in buf:
                    line, buf = buf.split("\n", 1)
                    if line.startswith(EXIT_MARK):
                        rc = int(line[len(EXIT_MARK):].rstrip("@"))
                    else:
                        sink(line + "\n")
            if rc is not None:
                # The guest powers off by itself right after its verdict
                judge_exits(args, rc, qemu_proc, qlog, daemon,
                            dlog if daemon else None, logdir, extras=extras)
                break
            if done:
                if buf:
                    sink(buf)
                raise HarnessError(
                    f"QEMU ended ({describe_status(qemu_proc.returncode)}) "
                    f"before the guest script finished.\n"
                    f"--- qemu.log\n{tail(qlog)}"
                    f"--- guest console (tail)\n"
                    f"{tail(os.path.join(logdir, 'console.log'))}"
                    + (f"--- virtiofsd.log\n{tail(dlog)}" if daemon else ""))
            if time.monotonic() > deadline:
                raise HarnessError(
                    f"timeout: the guest did not finish within {args.timeout}s."
                    f"\n--- guest console (tail)\n"
                    f"{tail(os.path.join(logdir, 'console.log'))}"
                    + (f"--- virtiofsd.log\n{tail(dlog)}" if daemon else ""))
            if daemon is not None and daemon.poll() is not None and args.daemon_must_live:
                raise HarnessError(
                    f"virtiofsd exited with status {daemon.returncode} while "
                    f"the guest was running.\n--- virtiofsd.log\n{tail(dlog)}")
            if daemon is not None and daemon.poll() is not None and not daemon_noted:
                # A dead back-end is reported, but the guest may still finish
                # (a test may kill the daemon on purpose): its status is
                # judged once the guest is done.
                log(f"note: virtiofsd ended with "
                    f"{describe_status(daemon.returncode)}")
                daemon_noted = True
            time.sleep(0.1)
        if args.show_console:
            sys.stderr.write(tail(os.path.join(logdir, "console.log"), 200))
        return rc
    finally:
        stop(qemu_proc)
        ours_log = os.environ.get("VFSD_OURS_LOG") if daemon_kind == "ours" \
            else None
        if daemon is not None and (args.state_dir or ours_log):
            # A back-end must end by itself once its front-end is gone:
            # say how it did, for tests that kill QEMU.
            try:
                daemon.wait(10)
            except subprocess.TimeoutExpired:
                pass
        if daemon is not None and args.state_dir:
            write_state(args.state_dir, "daemon.exit",
                        "running" if daemon.poll() is None
                        else str(daemon.returncode))
        stop(daemon)
        for _, x, _ in extras:
            # They log what they did when the front-end goes away
            try:
                x.wait(10)
            except subprocess.TimeoutExpired:
                pass
            stop(x)
        if daemon is not None and ours_log:
            # Its last words (what it did, at exit) for the wrapper to judge
            with open(dlog) as f, open(ours_log, "a") as out:
                out.write(f.read())
        # The logs are in LOG_DIR when one was given; the rest (initrd,
        # socket, default shared directory) is never needed afterwards.
        shutil.rmtree(tmp, ignore_errors=True)


def parse_extra(spec):
    """An --extra-daemon's TAG[,KEY:VALUE...]=ARGS: (TAG, {KEY: VALUE},
    ARGS).  KEYs: daemon (ours, rust, or a binary's path; ours by
    default) and cache-size (the device's window; none by default)."""
    head, _, dargs = spec.partition("=")
    tag, *pairs = head.split(",")
    attrs = {}
    for pair in pairs:
        key, colon, value = pair.partition(":")
        if key not in ("daemon", "cache-size") or not colon:
            raise HarnessError(f"--extra-daemon {spec}: {pair} is not "
                               "daemon:D or cache-size:N")
        attrs[key] = value
    return tag, attrs, dargs


def default_args():
    return build_parser().parse_args(["--cmd", "true"])


def exit_status(text):
    if text != "any":
        int(text)
    return text


def build_parser():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("script", nargs="?", help="guest shell script to run")
    p.add_argument("--cmd", help="guest shell command instead of a script")
    p.add_argument("--daemon", default="auto",
                   help="ours | rust | none | PATH of a compatible binary "
                        "(default: ours when built, else rust)")
    p.add_argument("--daemon-binary", help="binary for --daemon ours/rust")
    p.add_argument("--daemon-args", default="", help="extra daemon options")
    p.add_argument("--extra-daemon", action="append", default=[],
                   metavar="TAG[,daemon:D][,cache-size:N]=ARGS",
                   help="another share, tag TAG, served by our virtiofsd "
                        "(or D: rust, a binary) started with ARGS (@SOCK@: "
                        "its socket), with a window of N when given; "
                        "repeatable")
    p.add_argument("--shared", help="host directory to share (default: a "
                   "fresh empty one)")
    p.add_argument("--tag", default="vfs")
    p.add_argument("--cache-mode", default="auto",
                   help="daemon --cache mode (never|auto|always)")
    p.add_argument("--cache-size", default="",
                   help="device cache window (e.g. 1G); empty = no DAX window")
    p.add_argument("--queue-size", type=int, default=0)
    p.add_argument("--request-queues", type=int, default=0,
                   help="device num-request-queues (default: the device's)")
    p.add_argument("--reconnect-ms", type=int, default=0,
                   help="chardev reconnect-ms: QEMU reconnects to a "
                   "restarted daemon")
    p.add_argument("--state-dir", help="write daemon.pid, daemon.cmd (JSON "
                   "argv), socket (its path) and qemu.pid here, for tests "
                   "that kill the daemon or look at it")
    p.add_argument("--daemon-fd", action="store_true",
                   help="listen on the socket here and hand it to the "
                   "daemon as --fd=N, as libvirt does (ours only)")
    p.add_argument("--p9", help="also share this directory over virtio-9p "
                   "(mount tag p9)")
    p.add_argument("--mem", default="1G")
    p.add_argument("--smp", type=int, default=2)
    p.add_argument("--machine", default="pc")
    p.add_argument("--accel", default="auto", choices=["auto", "kvm", "tcg"])
    p.add_argument("--append", default="", help="extra kernel arguments")
    p.add_argument("--allow-reboot", action="store_true",
                   help="a guest reboot boots the same initramfs and script "
                        "again (default: QEMU exits); the output goes on")
    p.add_argument("--qemu", help="QEMU binary (default: build/qemu's)")
    p.add_argument("--upstream-device", action="store_true",
                   help="unmodified upstream QEMU >= 11.1 (default: "
                   "build/upstream-qemu's) with its generic "
                   "vhost-user-test-device-pci; the daemon gets --tag and "
                   "--cache-size")
    p.add_argument("--qemu-args", default="", help="extra QEMU arguments")
    p.add_argument("--env", action="append", default=[],
                   help="KEY=VALUE for the guest script (repeatable)")
    p.add_argument("--timeout", type=float, default=300)
    p.add_argument("--log-dir", help="keep logs here (default: discarded)")
    p.add_argument("--show-console", action="store_true",
                   help="print the guest console's tail afterwards")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--daemon-must-live", action="store_true",
                   help="fail at once if the daemon exits before the guest "
                        "script finishes (default: note it and go on)")
    p.add_argument("--exit-limit", type=float, default=20,
                   help="seconds QEMU has to exit after the guest's verdict, "
                        "and the daemon after QEMU (default 20)")
    p.add_argument("--expect-qemu-exit", default="0", type=exit_status,
                   help="QEMU's exit status after the verdict: N, -SIGNAL "
                        "or any (default 0)")
    p.add_argument("--expect-daemon-exit", default="0", type=exit_status,
                   help="the daemon's exit status once QEMU is gone: N, "
                        "-SIGNAL (killed by it) or any (default 0)")
    return p


def on_signal(signum, frame):
    # Once: a second signal must not cut the teardown short
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    raise KeyboardInterrupt


def main():
    args = build_parser().parse_args()
    if not args.script and not args.cmd:
        build_parser().error("give a guest SCRIPT or --cmd")
    # Killed by a CI or check.py timeout, QEMU and the daemon (in their
    # own sessions) would live on and load whatever runs next: tear down.
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    try:
        if args.daemon == "auto":
            args.daemon = "ours" if os.access(OUR_VIRTIOFSD, os.X_OK) else "rust"
        picked = args.accel == "auto"
        if picked:
            args.accel = "kvm" if kvm_usable() else "tcg"
        if not args.quiet:
            why = ""
            if picked and args.accel == "tcg" and \
                    os.environ.get("VFSDAX_ACCEL") != "tcg":
                why = (" (a probe guest did not boot under KVM here)"
                       if os.access("/dev/kvm", os.R_OK | os.W_OK)
                       else " (no usable /dev/kvm)")
            log(f"accelerator: {args.accel}{why}")
        apply_deadline(args)
        rc = run_guest(args)
    except HarnessError as e:
        print(f"vm: error: {e}", file=sys.stderr)
        return HARNESS_FAILURE
    except KeyboardInterrupt:
        return 130
    return rc


if __name__ == "__main__":
    sys.exit(main())

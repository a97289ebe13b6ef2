#!/usr/bin/env python3
"""virtio-fs through a real libvirt daemon, driving this fork's QEMU.

    harness/libvirt/test_libvirt.py [--daemon PATH|ours|rust] [--variant V]
                                    [-k SUBSTRING] [--keep] [--list]

Run as root.  The test installs libvirt if needed (mk/deps.sh libvirt), then
starts its own libvirtd in a private mount namespace: private directories
are mounted over /etc/libvirt, /run, /var/lib/libvirt, /var/log/libvirt and
/var/cache/libvirt, and /etc is an overlay so that /etc/qemu/vhost-user can
hold a descriptor, so the system's libvirt configuration and state are never
touched.  virsh talks to it through qemu:///system?socket=PRIVATE.

Each case defines a domain (TCG, direct kernel boot of the harness guest,
memfd-backed shared memory, a virtiofs <filesystem>), starts it, reads the
guest script's verdict from the second serial port's log file and checks
the host side.  The output is TAP; libvirt's and QEMU's own error text is
given in comments.  Everything is torn down at the end, whatever happens:
domains destroyed, libvirtd killed, every process left in its namespace or
naming the private directory killed, and that is checked.

--daemon picks the virtiofsd libvirt starts (default: ours when built, else
the Rust virtiofsd).  libvirt runs it through a small wrapper that records
the options libvirt chose and, for the "legacy" variant, hides the
"separate-options" feature from --print-capabilities so that libvirt must
use the old "-o source=..." form.  --variant: "separate" (the daemon's own
capabilities), "legacy", or "both" (default).
"""

import argparse
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.sax.saxutils

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(TOP, "harness"))
sys.path.insert(0, os.path.join(TOP, "harness", "tests"))
import vm  # noqa: E402  (BUILD, GUEST, firmware dirs, make_initrd)
import pattern  # noqa: E402  (the host side of the guest's mmapio)

BUILD = vm.BUILD
QEMU = vm.QEMU
CACHE = os.environ.get("VIRTIOFS_DAX_CACHE") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
    "virtiofs-dax")
DAX_WINDOW = 512 << 20
TAG = "vfsdax"
BOOT_TIMEOUT = 120      # boot + guest script, TCG
STOP_TIMEOUT = 30       # domain gone after poweroff / destroy / shutdown
VIRSH_TIMEOUT = 60


def esc(text):
    return xml.sax.saxutils.quoteattr(str(text))


def note(msg):
    for line in str(msg).rstrip().splitlines() or [""]:
        print("# " + line, flush=True)


class CaseFailure(Exception):
    pass


# --- private libvirtd --------------------------------------------------------

LIBVIRTD_CONF = """\
# Private libvirtd for harness/libvirt/test_libvirt.py
listen_tls = 0
listen_tcp = 0
unix_sock_group = "root"
unix_sock_rw_perms = "0700"
auth_unix_ro = "none"
auth_unix_rw = "none"
log_outputs = "3:file:/var/log/libvirt/libvirtd.log"
log_filters = "1:qemu.qemu_virtiofs 1:qemu.qemu_vhost_user 1:qemu.qemu_process"
"""

# What this container allows: no cgroups, no security driver, no per-domain
# /dev namespace, everything as root, QEMU's output to plain files.
QEMU_CONF = """\
user = "root"
group = "root"
dynamic_ownership = 0
security_driver = "none"
cgroup_controllers = [ ]
namespaces = [ ]
stdio_handler = "file"
remember_owner = 0
"""


class Libvirtd:
    def __init__(self, priv):
        self.priv = priv
        self.proc = None
        self.system_before = None
        self.ns = None
        self.sock = os.path.join(priv, "run", "libvirt", "libvirt-sock")
        self.uri = f"qemu:///system?socket={self.sock}"
        self.log = os.path.join(priv, "log", "libvirtd.log")

    def start(self):
        p = self.priv
        for d in ("etc-libvirt", "etc-upper/qemu/vhost-user", "etc-work", "run",
                  "lib", "log", "cache"):
            os.makedirs(os.path.join(p, d), exist_ok=True)
        with open(os.path.join(p, "etc-libvirt", "libvirtd.conf"), "w") as f:
            f.write(LIBVIRTD_CONF)
        with open(os.path.join(p, "etc-libvirt", "qemu.conf"), "w") as f:
            f.write(QEMU_CONF)
        q = shlex.quote
        mounts = [
            # /etc as an overlay first: the descriptor directory
            # /etc/qemu/vhost-user does not exist on the system.
            # Without overlayfs only the descriptor case suffers.
            f"mount -t overlay vfsdax-etc -o lowerdir=/etc,"
            f"upperdir={q(p + '/etc-upper')},workdir={q(p + '/etc-work')} /etc"
            f" || echo \"$?\" > {q(p + '/no-etc-overlay')}",
            f"mount --bind {q(p + '/etc-libvirt')} /etc/libvirt",
            f"mount --bind {q(p + '/run')} /run",
            f"mount --bind {q(p + '/lib')} /var/lib/libvirt",
            f"mount --bind {q(p + '/log')} /var/log/libvirt",
            f"mount --bind {q(p + '/cache')} /var/cache/libvirt",
        ]
        script = "set -e\n" + "\n".join(mounts) + \
            "\nexec libvirtd -f /etc/libvirt/libvirtd.conf\n"
        self.system_before = system_state()
        with open(os.path.join(p, "libvirtd.stderr"), "w") as out:
            self.proc = subprocess.Popen(
                ["unshare", "--mount", "--propagation", "private", "--",
                 "/bin/sh", "-c", script],
                stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.ns is None:
                try:
                    ns = os.readlink(f"/proc/{self.proc.pid}/ns/mnt")
                    if ns != os.readlink("/proc/self/ns/mnt"):
                        self.ns = ns
                except OSError:
                    pass
            if self.proc.poll() is not None:
                raise CaseFailure(
                    f"libvirtd exited with status {self.proc.returncode}:\n"
                    + vm.tail(os.path.join(p, "libvirtd.stderr"))
                    + vm.tail(self.log))
            if os.path.exists(self.sock):
                # "virsh version" needs a default emulator; there is none.
                r = self.virsh("uri", check=False, timeout=30)
                if r.returncode == 0:
                    return subprocess.run(["libvirtd", "--version"],
                                          stdout=subprocess.PIPE,
                                          text=True).stdout
            time.sleep(0.2)
        raise CaseFailure("libvirtd did not answer within 60 s:\n"
                          + vm.tail(self.log))

    def virsh(self, *args, check=True, timeout=VIRSH_TIMEOUT):
        cmd = ["virsh", "-q", "-c", self.uri] + list(args)
        try:
            r = subprocess.run(cmd, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise CaseFailure(f"virsh {' '.join(args)} hung for {timeout} s")
        if check and r.returncode != 0:
            raise CaseFailure(f"virsh {' '.join(args)} failed: "
                              + (r.stderr.strip() or r.stdout.strip()))
        return r

    def domstate(self, name):
        r = self.virsh("domstate", "--reason", name, check=False, timeout=30)
        return r.stdout.strip() if r.returncode == 0 else None

    def stop(self):
        """Destroy every domain, stop libvirtd, kill whatever is left."""
        problems = []
        if self.proc is not None and self.proc.poll() is None:
            try:
                r = self.virsh("list", "--all", "--name", check=False,
                               timeout=30)
                for name in r.stdout.split():
                    self.virsh("destroy", name, check=False, timeout=30)
                    self.virsh("undefine", name, check=False, timeout=30)
            except CaseFailure as e:
                problems.append(str(e))
            try:
                os.kill(self.proc.pid, signal.SIGTERM)
                self.proc.wait(15)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
            if self.proc.poll() is None:
                problems.append("libvirtd ignored SIGTERM for 15 s")
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        strays = self.strays()
        if strays:
            problems.append("left behind, now killed: " + "; ".join(
                f"{pid} {cmd}" for pid, cmd in strays))
            for pid, _ in strays:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + 10
            while self.strays() and time.monotonic() < deadline:
                time.sleep(0.1)
        if self.strays():
            problems.append("processes survive SIGKILL: " + str(self.strays()))
        if self.system_before is not None:
            after = system_state()
            changed = sorted(k for k in set(after) | set(self.system_before)
                             if after.get(k) != self.system_before.get(k))
            if changed:
                problems.append("the system's libvirt files changed: "
                                + ", ".join(changed[:10]))
        return problems

    def strays(self, token=None):
        """Processes in libvirtd's namespace or naming the private dir."""
        token = token or self.priv
        found = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
                ns = os.readlink(f"/proc/{pid}/ns/mnt")
            except OSError:
                continue
            if self.proc is not None and int(pid) == self.proc.pid and \
                    self.proc.poll() is None:
                continue
            if (self.ns and ns == self.ns) or token in cmd:
                found.append((int(pid), cmd.strip()[:200]))
        return found


# What the private daemon must leave alone.
SYSTEM_PATHS = ("/etc/libvirt", "/etc/qemu", "/run/libvirt", "/var/lib/libvirt",
                "/var/log/libvirt", "/var/cache/libvirt",
                "/usr/share/qemu/vhost-user")


def system_state():
    state = {}
    for top in SYSTEM_PATHS:
        for dirpath, dirs, files in os.walk(top):
            for fn in [""] + files:
                path = os.path.join(dirpath, fn) if fn else dirpath
                try:
                    st = os.lstat(path)
                except OSError:
                    continue
                state[path] = (st.st_mtime_ns, st.st_size, st.st_ino)
    return state


# --- domains -----------------------------------------------------------------

GUEST_SCRIPT = r"""
. /lib/vfsdax.sh
mount_virtiofs "$VFS_TAG" /mnt $MOUNT_OPTS
grep " /mnt " /proc/self/mountinfo
sum=$(sha256sum /mnt/from-host.bin | cut -d' ' -f1)
[ "$sum" = "$HOST_SUM" ] || fail "host file reads wrong in the guest: $sum"
pass "host file read in the guest"
if [ "$VFS_DAX" = 1 ]; then
    dax_active /mnt || fail "DAX requested but not active on /mnt"
    pass "DAX active"
    mmapio check /mnt/pattern.bin 5 || fail "host file read through a DAX mmap"
    mmapio fill /mnt/mmap.bin 4194304 6 || fail "writes through a DAX mmap"
    pass "mmap reads and writes through the DAX window"
fi
head -c 262144 /dev/urandom > /mnt/from-guest.bin || fail "write from the guest"
sha256sum /mnt/from-guest.bin | cut -d' ' -f1 > /mnt/from-guest.sum
sync
pass "guest file written"
if [ "$WAIT" = power ]; then
    # Stay up until the ACPI power button (virsh shutdown) is pressed.
    for m in button evdev; do insmod /lib/modules/extra/$m.ko || fail "insmod $m"; done
    ev=
    for i in 1 2 3 4 5 6 7 8 9 10; do
        for d in /sys/class/input/input*; do
            grep -q "Power Button" $d/name 2>/dev/null || continue
            ev=$(ls -d $d/event* 2>/dev/null | head -n1)
            [ -n "$ev" ] && break 2
        done
        sleep 1
    done
    [ -n "$ev" ] || fail "no power button input device"
    umount /mnt || fail "umount"
    echo "@@VFSDAX-READY@@"
    dd if=/dev/input/${ev##*/} of=/dev/null bs=24 count=1 2>/dev/null
    pass "power button pressed"
elif [ "$WAIT" = forever ]; then
    echo "@@VFSDAX-READY@@"
    # Creating a file always reaches the daemon, whatever the cache mode.
    i=0
    while :; do
        i=$((i + 1))
        if echo $i > /mnt/tick.$i; then echo "tick $i ok"; else echo "tick $i error"; fi
        sleep 1
    done
else
    umount /mnt || fail "umount"
fi
"""


def fs_xml(case, shared):
    if case.binary is not None:
        binary = (f"<binary path={esc(case.binary)} xattr='on'>"
                  f"<cache mode='always'/><sandbox mode={esc(case.sandbox)}/>"
                  f"</binary>")
    else:
        binary = (f"<binary xattr='on'><cache mode='always'/>"
                  f"<sandbox mode={esc(case.sandbox)}/></binary>")
    alias = "<alias name='ua-fs0'/>" if case.dax else ""
    return (f"<filesystem type='mount' accessmode='passthrough'>"
            f"<driver type='virtiofs'/>{binary}"
            f"<source dir={esc(shared)}/><target dir={esc(TAG)}/>{alias}"
            f"</filesystem>")


def domain_xml(name, case, work, shared, initrd):
    qargs = "".join(f"<qemu:arg value='-L'/><qemu:arg value={esc(d)}/>"
                    for d in vm.FIRMWARE_DIRS if os.path.isdir(d))
    override = ""
    if case.dax:
        override = ("<qemu:override><qemu:device alias='ua-fs0'><qemu:frontend>"
                    f"<qemu:property name='cache-size' type='unsigned' "
                    f"value='{DAX_WINDOW}'/>"
                    "</qemu:frontend></qemu:device></qemu:override>")
    return f"""<domain type='qemu' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <name>{name}</name>
  <memory unit='MiB'>1024</memory>
  <vcpu>2</vcpu>
  <memoryBacking><source type='memfd'/><access mode='shared'/></memoryBacking>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>{xml.sax.saxutils.escape(os.path.join(vm.GUEST, "vmlinuz"))}</kernel>
    <initrd>{xml.sax.saxutils.escape(initrd)}</initrd>
    <cmdline>console=ttyS0 panic=-1 loglevel=4</cmdline>
  </os>
  <features><acpi/></features>
  <cpu mode='maximum' check='none'/>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>{xml.sax.saxutils.escape(case.qemu)}</emulator>
    <serial type='file'><source path={esc(os.path.join(work, "console.log"))}/><target port='0'/></serial>
    <serial type='file'><source path={esc(os.path.join(work, "output.log"))}/><target port='1'/></serial>
    {fs_xml(case, shared)}
    <controller type='usb' model='none'/>
    <memballoon model='none'/>
  </devices>
  <qemu:commandline>{qargs}</qemu:commandline>
  {override}
</domain>
"""


# --- daemon wrappers ---------------------------------------------------------

WRAPPER = """#!/bin/sh
# Written by harness/libvirt/test_libvirt.py: records the options libvirt
# starts the daemon with, then runs it.
real={real}
variant={variant}
printf '%s %s\\n' "$variant" "$*" >> {argv_log}
if [ "$1" = --print-capabilities ]; then
    caps=$("$real" --print-capabilities) || exit $?
    if [ "$variant" = legacy ]; then
        # Without "separate-options" libvirt must use the "-o source=" form.
        printf '%s' "$caps" | python3 -c 'import json, sys
d = json.load(sys.stdin)
d["features"] = [f for f in d.get("features", []) if f != "separate-options"]
print(json.dumps(d, indent=2))'
    else
        printf '%s\\n' "$caps"
    fi
    exit 0
fi
exec "$real" "$@"
"""


def write_wrapper(path, real, variant, argv_log):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(WRAPPER.format(real=shlex.quote(real),
                               variant=shlex.quote(variant),
                               argv_log=shlex.quote(argv_log)))
    os.chmod(path, 0o755)


def descriptor_from_template(bindir):
    """tools/virtiofsd/50-virtiofsd.json.in with @BINDIR@ substituted, as
    mk/install.sh installs it."""
    tmpl = os.path.join(TOP, "tools", "virtiofsd", "50-virtiofsd.json.in")
    with open(tmpl) as f:
        text = f.read().replace("@BINDIR@", bindir)
    json.loads(text)        # a broken template fails here, not in libvirt
    return text


# --- cases -------------------------------------------------------------------

class Case:
    def __init__(self, name, sandbox="chroot", variant="separate", dax=False,
                 descriptor=False, wait="exit", action="run"):
        self.name, self.sandbox, self.variant = name, sandbox, variant
        self.dax, self.descriptor = dax, descriptor
        self.wait, self.action = wait, action
        self.binary = None      # set by the runner (None: use a descriptor)
        self.qemu = QEMU


class Runner:
    def __init__(self, args, priv):
        self.args, self.priv = args, priv
        self.lv = Libvirtd(priv)
        self.argv_log = os.path.join(priv, "daemon-argv.log")
        self.seq = 0
        self.modules = {}

    # The guest's extra modules (ACPI power button, evdev) for virsh shutdown.
    def find_modules(self):
        try:
            with open(os.path.join(vm.GUEST, "kernel.txt")) as f:
                kver, deb = f.read().split()[:2]
        except (OSError, ValueError):
            return {}
        kdir = os.path.join(CACHE, "kernel", deb.strip("()")[:-len(".deb")])
        found = {}
        for base in (kdir, os.path.join(kdir, "usr")):
            for m, rel in (("button", "kernel/drivers/acpi/button.ko.xz"),
                           ("evdev", "kernel/drivers/input/evdev.ko.xz")):
                p = os.path.join(base, "lib", "modules", kver, rel)
                if os.path.exists(p) and m not in found:
                    found[m] = p
        return found

    def make_initrd(self, work, env, extra_modules):
        text = GUEST_SCRIPT
        initrd = vm.make_initrd(work, text, env)
        if extra_modules:
            # A third archive with the modules, decompressed for busybox.
            root = os.path.join(work, "mods")
            os.makedirs(os.path.join(root, "lib", "modules", "extra"))
            for m, p in self.modules.items():
                with open(os.path.join(root, "lib", "modules", "extra",
                                       m + ".ko"), "wb") as out:
                    out.write(subprocess.run(["xz", "-dc", p], check=True,
                                             stdout=subprocess.PIPE).stdout)
            cpio = subprocess.run(
                "find . | cpio -o -H newc --quiet | gzip -1", shell=True,
                cwd=root, stdout=subprocess.PIPE, check=True).stdout
            with open(initrd, "ab") as f:
                f.write(cpio)
        return initrd

    def daemon_argv_since(self, pos):
        try:
            with open(self.argv_log) as f:
                f.seek(pos)
                return [l.rstrip("\n") for l in f]
        except OSError:
            return []

    def argv_pos(self):
        try:
            return os.path.getsize(self.argv_log)
        except OSError:
            return 0

    def wait_output(self, name, work, want_mark, timeout):
        """Wait for the guest to print WANT_MARK on its script port."""
        out = os.path.join(work, "output.log")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            # The state first: a guest that stopped has written everything
            # by then, so reading the log afterwards cannot miss its verdict.
            state = self.lv.domstate(name) or ""
            try:
                with open(out, errors="replace") as f:
                    text = f.read().replace("\r", "")
            except OSError:
                text = ""
            if want_mark == "exit":
                m = re.search(r"@@VFSDAX-EXIT=(\d+)@@", text)
                if m:
                    return int(m.group(1)), text
            elif "@@VFSDAX-READY@@" in text:
                return None, text
            m = re.search(r"@@VFSDAX-EXIT=(\d+)@@", text)
            if m or state.startswith("shut off"):
                raise CaseFailure(
                    f"the guest stopped early (state: {state}):\n{text}"
                    + self.diagnostics(name, work))
            time.sleep(0.5)
        raise CaseFailure(f"no verdict from the guest within {timeout} s:\n"
                          + self.diagnostics(name, work))

    def wait_state(self, name, prefix, timeout):
        deadline = time.monotonic() + timeout
        state = None
        while time.monotonic() < deadline:
            state = self.lv.domstate(name) or ""
            if state.startswith(prefix):
                return state
            time.sleep(0.5)
        raise CaseFailure(f"domain still '{state}' {timeout} s later, "
                          f"expected '{prefix}'")

    def diagnostics(self, name, work):
        return ("\n--- guest console (tail)\n"
                + vm.tail(os.path.join(work, "console.log"), 15)
                + f"--- {name}.log (QEMU, tail)\n"
                + vm.tail(os.path.join(self.priv, "log", "qemu", name + ".log"),
                          15)
                + self.daemon_log(name))

    def daemon_log(self, name):
        logdir = os.path.join(self.priv, "log", "qemu")
        out = ""
        for fn in sorted(os.listdir(logdir)) if os.path.isdir(logdir) else []:
            if fn.startswith(name + "-") and fn.endswith("-virtiofsd.log"):
                out += f"--- {fn} (tail)\n" + vm.tail(os.path.join(logdir, fn),
                                                      10)
        return out

    def leftovers(self, name, shared):
        """What a stopped domain must not leave behind."""
        found = []
        for pid, cmd in self.lv.strays(token=shared):
            found.append(f"process {pid}: {cmd}")
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/maps") as f:
                    if shared in f.read():
                        found.append(f"process {pid} maps files of {shared}")
            except OSError:
                pass
        for sub in ("lib/qemu", "run/libvirt/qemu"):
            d = os.path.join(self.priv, sub)
            for dirpath, _, files in os.walk(d):
                for fn in files:
                    if name in dirpath or fn.startswith(name) or \
                            fn.endswith("-fs.sock"):
                        found.append(os.path.join(dirpath, fn))
        return found

    def run_case(self, case):
        self.seq += 1
        name = f"vfsdax-{os.getpid()}-{self.seq}"
        work = os.path.join(self.priv, "case", str(self.seq))
        shared = os.path.join(work, "shared")
        os.makedirs(shared)
        with open(os.path.join(shared, "from-host.bin"), "wb") as f:
            f.write(secrets.token_bytes(1 << 20))
        host_sum = vm_sha256(os.path.join(shared, "from-host.bin"))
        if case.dax:
            with open(os.path.join(shared, "pattern.bin"), "wb") as f:
                f.write(pattern.pattern(3 << 20, 5))
        if case.descriptor:
            case.binary = None
        else:
            case.binary = os.path.join(self.priv, "bin",
                                       f"virtiofsd-{case.variant}")
        env = {"VFS_TAG": TAG, "VFS_DAX": 1 if case.dax else 0,
               "VFS_DAEMON": "libvirt", "HOST_SUM": host_sum,
               "MOUNT_OPTS": "dax=always" if case.dax else "",
               "WAIT": case.wait}
        if case.wait == "power" and len(self.modules) != 2:
            raise CaseFailure("the guest kernel's button/evdev modules were "
                              f"not found under {CACHE}/kernel")
        initrd = self.make_initrd(work, env, case.wait == "power")
        xml_path = os.path.join(work, "domain.xml")
        with open(xml_path, "w") as f:
            f.write(domain_xml(name, case, work, shared, initrd))
        pos = self.argv_pos()
        self.lv.virsh("define", xml_path)
        info = []
        try:
            r = self.lv.virsh("start", name, check=False, timeout=120)
            if r.returncode != 0:
                raise CaseFailure("virsh start: " + " / ".join(
                    (r.stderr.strip() or r.stdout.strip()).splitlines())
                    + "\n" + self.daemon_log(name))
            calls = self.daemon_argv_since(pos)
            argv = [l for l in calls if "--print-capabilities" not in l]
            probed = len(calls) - len(argv)
            info += [f"daemon started as: {l}" for l in argv]
            info.append(f"libvirt ran --print-capabilities {probed} time(s)")
            if not argv:
                raise CaseFailure("libvirt did not start the daemon through "
                                  "the expected binary (no argv recorded)")
            started = argv[-1]
            if case.variant == "legacy" and "-o source=" not in started:
                raise CaseFailure("daemon without separate-options was not "
                                  f"given -o source=...: {started}")
            if case.variant == "separate" and "-o source=" in started and \
                    probed:
                # A libvirt that reads the capabilities and still picks the
                # old form did not understand what the daemon printed.
                raise CaseFailure("libvirt ran --print-capabilities, which "
                                  "announces separate-options, and still "
                                  f"used the -o form: {started}")
            if case.variant == "separate" and "-o source=" in started:
                info.append("libvirt chose the legacy -o form although the "
                            "daemon announces separate-options (libvirt 9.0 "
                            "has only that form)")
            if case.descriptor and not started.startswith("descriptor "):
                raise CaseFailure("libvirt did not use the daemon named by "
                                  f"the vhost-user descriptor: {started}")

            if case.wait == "exit":
                rc, text = self.wait_output(name, work, "exit", BOOT_TIMEOUT)
                if rc != 0:
                    raise CaseFailure(f"guest script failed ({rc}):\n{text}"
                                      + self.diagnostics(name, work))
                self.wait_state(name, "shut off", STOP_TIMEOUT)
            else:
                self.wait_output(name, work, "ready", BOOT_TIMEOUT)
                if case.action == "shutdown":
                    self.lv.virsh("shutdown", name)
                    rc, text = self.wait_output(name, work, "exit",
                                                STOP_TIMEOUT)
                    if rc != 0:
                        raise CaseFailure(f"guest script failed ({rc}):\n"
                                          + text)
                    info.append("state: " + self.wait_state(
                        name, "shut off", STOP_TIMEOUT))
                elif case.action == "destroy":
                    if case.dax:
                        n = self.qemu_maps_of(name, shared)
                        info.append(f"before destroy QEMU maps {n} range(s) "
                                    "of shared files (the DAX window)")
                        if n == 0:
                            raise CaseFailure(
                                "DAX is active in the guest but QEMU maps no "
                                "file of the shared directory")
                    self.lv.virsh("destroy", name, timeout=STOP_TIMEOUT)
                    info.append("state: " + self.wait_state(
                        name, "shut off", STOP_TIMEOUT))
                elif case.action == "killdaemon":
                    info += self.kill_daemon(name, work, shared)

            got = vm_sha256(os.path.join(shared, "from-guest.bin"))
            try:
                with open(os.path.join(shared, "from-guest.sum")) as f:
                    want = f.read().strip()
            except OSError:
                want = None
            if case.action != "killdaemon" and got != want:
                raise CaseFailure("the guest's file reads wrong on the host "
                                  f"(want {want}, got {got})")
            if case.dax:
                try:
                    with open(os.path.join(shared, "mmap.bin"), "rb") as f:
                        data = f.read()
                except OSError as e:
                    raise CaseFailure(f"mmap.bin from the guest: {e}")
                if data != pattern.pattern(4 << 20, 6):
                    raise CaseFailure("what the guest wrote through its DAX "
                                      "mapping reads wrong on the host")
                info.append("host sees the guest's mmap writes (4 MiB)")
            deadline = time.monotonic() + 10
            left = self.leftovers(name, shared)
            while left and time.monotonic() < deadline:
                time.sleep(0.5)
                left = self.leftovers(name, shared)
            if left:
                raise CaseFailure("left behind after the domain stopped:\n"
                                  + "\n".join(left))
        finally:
            if (self.lv.domstate(name) or "").startswith("running"):
                self.lv.virsh("destroy", name, check=False, timeout=30)
            self.lv.virsh("undefine", name, check=False, timeout=30)
        return info

    def qemu_maps_of(self, name, shared):
        try:
            with open(os.path.join(self.priv, "run", "libvirt", "qemu",
                                   name + ".pid")) as f:
                pid = int(f.read().strip())
            with open(f"/proc/{pid}/maps") as f:
                return sum(1 for line in f if shared in line)
        except (OSError, ValueError):
            return 0

    def kill_daemon(self, name, work, shared):
        """SIGKILL the domain's virtiofsd: the user must learn of it from
        the domain log and be able to stop the domain."""
        # The guest keeps creating files (one a second), so the dead
        # back-end is actually needed; first see that this works at all.
        out = os.path.join(work, "output.log")
        deadline = time.monotonic() + 15
        while count_ticks(out)[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.5)
        if count_ticks(out)[0] == 0:
            raise CaseFailure("the guest could not create files before the "
                              "daemon was killed")
        pids = [pid for pid, cmd in self.lv.strays(token=shared)
                if "virtiofsd" in cmd and "qemu-system" not in cmd]
        if not pids:
            raise CaseFailure("no virtiofsd process found for the domain")
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        info = [f"killed virtiofsd {pids}"]
        ticks_before = count_ticks(out)
        # libvirt 9.0 does not watch virtiofsd: what reaches the user is
        # QEMU's own report, in the domain's log.
        qlog_path = os.path.join(self.priv, "log", "qemu", name + ".log")
        t0 = time.monotonic()
        report = None
        while report is None and time.monotonic() < t0 + 30:
            try:
                with open(qlog_path, errors="replace") as f:
                    report = next((line.strip() for line in f
                                   if "back-end of device" in line and
                                   "disconnected" in line), None)
            except OSError:
                pass
            if report is None:
                time.sleep(0.5)
        if report is None:
            raise CaseFailure("QEMU's disconnect report is not in the domain "
                              "log 30 s after the kill:\n"
                              + vm.tail(qlog_path, 10))
        info.append(f"domain log after {time.monotonic() - t0:.1f} s: "
                    + report)
        state = self.lv.domstate(name)
        if state is None:
            raise CaseFailure("virsh domstate failed after the daemon died")
        info.append(f"domstate: {state} (libvirt 9.0 does not change the "
                    "domain state when virtiofsd dies)")
        after = count_ticks(out)
        info.append(f"guest file creation after the kill: "
                    f"{after[0] - ticks_before[0]} succeeded, "
                    f"{after[1] - ticks_before[1]} failed"
                    + (" (the guest waits in the file system)"
                       if after == ticks_before else ""))
        if not state.startswith("shut off"):
            # The domain must still be stoppable, and quickly.
            t1 = time.monotonic()
            r = self.lv.virsh("destroy", name, check=False,
                              timeout=STOP_TIMEOUT)
            took = time.monotonic() - t1
            info.append(f"virsh destroy: rc {r.returncode} in {took:.1f} s "
                        + (r.stderr.strip() or r.stdout.strip()))
            if r.returncode != 0:
                raise CaseFailure("virsh destroy failed after the daemon "
                                  "died:\n" + "\n".join(info))
            state = self.lv.domstate(name) or ""
            if not state.startswith("shut off"):
                raise CaseFailure(f"after virsh destroy the domain is "
                                  f"'{state}':\n" + "\n".join(info))
        return info


def count_ticks(path):
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except OSError:
        return (0, 0)
    return (len(re.findall(r"^tick \d+ ok", text, re.M)),
            len(re.findall(r"^tick \d+ error", text, re.M)))


def vm_sha256(path):
    import hashlib
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def default_daemon():
    if os.access(vm.OUR_VIRTIOFSD, os.X_OK):
        return vm.OUR_VIRTIOFSD
    return vm.rust_virtiofsd()


def cases(variants):
    out = []
    for v in variants:
        for sb in ("chroot", "namespace"):
            out.append(Case(f"virtiofs {v} options, sandbox={sb}: guest "
                            "reads a host file, host reads a guest file",
                            sandbox=sb, variant=v))
    out += [
        Case("daemon found through /etc/qemu/vhost-user descriptor "
             "(no <binary path>)", descriptor=True),
        Case("virsh shutdown (ACPI) stops the domain and leaves no "
             "virtiofsd, socket or mapping", wait="power", action="shutdown"),
        Case("virsh destroy leaves no virtiofsd, socket or mapping",
             wait="forever", action="destroy"),
        Case("virtiofsd killed under a running domain: QEMU's report is "
             "in the domain log, virsh answers, virsh destroy stops it "
             "(libvirt 9.0 leaves the state 'running')", wait="forever",
             action="killdaemon"),
        Case("DAX: cache-size set by <qemu:override>, guest mounts "
             "dax=always, reads and writes through it; destroy drops the "
             "mappings", dax=True, wait="forever", action="destroy"),
    ]
    return out


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--daemon", default="auto",
                    help="virtiofsd binary, or ours|rust (default: ours when "
                         "built, else rust)")
    ap.add_argument("--variant", default="both",
                    choices=["separate", "legacy", "both"])
    ap.add_argument("--qemu", default=QEMU)
    ap.add_argument("-k", help="run only cases whose name contains this")
    ap.add_argument("--keep", action="store_true",
                    help="keep the private directory (logs, XML)")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--max-time", type=float, default=420,
                    help="stop starting cases after this many seconds, so "
                         "that teardown always runs before an outer timeout")
    args = ap.parse_args()
    t_start = time.monotonic()

    variants = ["separate", "legacy"] if args.variant == "both" \
        else [args.variant]
    todo = [c for c in cases(variants) if not args.k or args.k in c.name]
    if args.list:
        for c in todo:
            print(c.name)
        return 0
    if os.geteuid() != 0:
        print("Bail out! run as root (it starts its own libvirtd)")
        return 1

    # Termination by a signal still tears everything down.
    def on_signal(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    print(f"1..{len(todo) + 2}", flush=True)
    n = 0
    failed = 0

    def report(ok, desc, detail=""):
        nonlocal n, failed
        n += 1
        first, _, rest = str(detail).strip().partition("\n")
        line = f"{'ok' if ok else 'not ok'} {n} - {desc}"
        if not ok:
            failed += 1
            if first:
                line += " # " + first
        print(line, flush=True)
        if ok:
            note(detail) if str(detail).strip() else None
        elif rest:
            note(rest)

    try:
        r = subprocess.run([os.path.join(TOP, "mk", "deps.sh"), "libvirt"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=900)
    except subprocess.TimeoutExpired:
        print("Bail out! mk/deps.sh libvirt did not finish in 900 s")
        return 1
    if r.returncode != 0:
        print("Bail out! mk/deps.sh libvirt: " + r.stdout.strip())
        return 1

    priv = tempfile.mkdtemp(prefix="vfsdax-libvirt-")
    runner = Runner(args, priv)
    try:
        daemon = args.daemon
        try:
            if daemon == "auto":
                daemon = default_daemon()
            elif daemon == "ours":
                daemon = vm.OUR_VIRTIOFSD
            elif daemon == "rust":
                daemon = vm.rust_virtiofsd()
        except vm.HarnessError as e:
            print(f"Bail out! {e}")
            failed += 1
            return 1
        note(f"daemon: {daemon}; qemu: {args.qemu}; private dir: {priv}")
        # A rebuild replaces binaries: give a vanished one a minute.
        for b in (daemon, args.qemu, os.path.join(vm.GUEST, "vmlinuz"),
                  os.path.join(vm.GUEST, "initramfs.cpio.gz")):
            deadline = time.monotonic() + 60
            while not os.path.exists(b) and time.monotonic() < deadline:
                time.sleep(2)
            if not os.path.exists(b):
                print(f"Bail out! {b} does not exist")
                failed += 1
                return 1
        for v in ("separate", "legacy"):
            write_wrapper(os.path.join(priv, "bin", f"virtiofsd-{v}"),
                          daemon, v, runner.argv_log)
        # The descriptor names BINDIR/virtiofsd: a wrapper by that name.
        write_wrapper(os.path.join(priv, "desc-bin", "virtiofsd"), daemon,
                      "descriptor", runner.argv_log)
        desc_err = None
        try:
            os.makedirs(os.path.join(priv, "etc-upper", "qemu", "vhost-user"))
            with open(os.path.join(priv, "etc-upper", "qemu", "vhost-user",
                                   "50-virtiofsd.json"), "w") as f:
                f.write(descriptor_from_template(
                    os.path.join(priv, "desc-bin")))
        except (OSError, ValueError) as e:
            desc_err = f"descriptor template: {e}"
        runner.modules = runner.find_modules()
        for c in todo:
            c.qemu = args.qemu

        try:
            version = runner.lv.start()
            report(True, "private libvirtd started in its own mount "
                   "namespace", version.strip().replace("\n", "; "))
            up = True
        except CaseFailure as e:
            report(False, "private libvirtd started in its own mount "
                   "namespace", str(e))
            up = False

        for c in todo:
            if not up:
                report(False, c.name, "libvirtd is not running")
                continue
            left = args.max_time - (time.monotonic() - t_start)
            if left < BOOT_TIMEOUT + 2 * STOP_TIMEOUT:
                report(False, c.name, f"not run: only {left:.0f} s left of "
                       f"--max-time {args.max_time:.0f}")
                continue
            if c.descriptor and os.path.exists(os.path.join(priv,
                                                            "no-etc-overlay")):
                desc_err = ("cannot overlay /etc in the private namespace "
                            "(see libvirtd.stderr): no /etc/qemu/vhost-user")
            if c.descriptor and desc_err:
                report(False, c.name, desc_err)
                continue
            t0 = time.monotonic()
            try:
                info = runner.run_case(c)
                report(True, c.name, f"[{time.monotonic() - t0:.0f} s]\n"
                       + "\n".join(info))
            except CaseFailure as e:
                report(False, c.name, str(e))
            except (OSError, subprocess.SubprocessError, vm.HarnessError) as e:
                report(False, c.name, f"harness error: {e}")
    except KeyboardInterrupt:
        note("interrupted: tearing down")
        failed += 1
    finally:
        problems = runner.lv.stop()
        report(not problems, "teardown: libvirtd, its namespace, QEMU and "
               "virtiofsd all gone, the system's libvirt files untouched",
               "\n".join(problems))
        if args.keep:
            note(f"kept {priv}")
        else:
            shutil.rmtree(priv, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

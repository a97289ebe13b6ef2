#!/usr/bin/env python3
"""make bench-density (and make bench): many guests, one root file system.

N guests (1, 2 and 4; --mem each, one vCPU each) boot their user space
from ONE read-only Debian 13 root (mk/density-root.sh) over virtio-fs,
each through its own QEMU and its own virtiofsd on the same directory,
as a host running container sandboxes or microVMs from one image does.
Each guest mounts the root, chroots into it and runs the same work:
python3 importing a few dozen standard modules, then a set of the root's
binaries (coreutils, grep, sed, gawk, tar, gzip, xz, bzip2, file, dpkg,
perl, bash).

Each guest's kernel and initramfs are the harness's kernel and an
initramfs of its init and busybox alone (small_guest()): the harness's own
initramfs carries test tools that would take 100 MiB of each guest's RAM.

Measured for the whole set, after the boot (root mounted, nothing run
from it yet) and after the work, while the guests wait:

    guest RAM     the pages allocated in each QEMU's memory-backend-memfd
                  (its st_blocks): what the guests touched, whoever wrote
                  it (QEMU, or a daemon writing READ data)
    TCG code      QEMU's buffer of translated code (an anonymous
                  executable mapping, Pss): TCG's alone, KVM has none
    QEMU, daemons the rest of the Pss of every QEMU and every daemon (its
                  children too), from /proc/PID/smaps, without their
                  mappings of the root's files (found by device and inode)
    root cache    the host's page cache of the root's files (mincore on
                  each): the pages the windows map are counted here once,
                  however many guests map them
    time          per guest, boot (host: from starting vm.py until the
                  guest has mounted the root) plus work (guest clock)

The host's page cache of the root is emptied before each set (fadvise
DONTNEED on each file; pages still mapped elsewhere stay), so each set
reads the root from the disk.  Configurations: no window; a 1 GiB window
mounted dax=inode with the default policy (size:2M), with
--dax-policy=exec and with --dax-policy=always; and exec with a 256 MiB
window (sized to the work) and a 64 MiB one (below it: every guest
reclaims all along).  Rounds alternate the configurations and the guest
counts; figures are medians of the rounds with min and max.  With
--stats the daemons count their requests: the report gives, per guest,
the SETUPMAPPINGs, READs and the exec policy's ELF checks (count and
mean time), and the window's 2 MiB ranges mapped after the work.

Targets: with the window and the chosen policy, host memory for 4 guests
at most 1.3 times that for 1 guest; without the window, the figure;
boot plus work with the window at most 1.1 times the time without.

Results: docs/benchmarks/density.json, density.md and density.svg.

    bench/density.py [--rounds N] [--configs a,b] [--guests 1,2,4] [--out DIR]
    bench/density.py --report density.json [--out DIR]
"""

import argparse
import ctypes
import datetime
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VM = os.path.join(TOP, "harness", "vm.py")
GUEST_MEM = "1G"
WINDOW = "1G"
CHOSEN = "dax-exec"
RANGE = 2 << 20

# The modules python3 imports: a few dozen of the standard library's, with
# the extension modules (ELF objects, 0644) and the libraries they load.
MODULES = """json re collections datetime decimal fractions statistics random
hashlib hmac base64 binascii struct zlib bz2 lzma gzip tarfile zipfile csv
sqlite3 ssl asyncio concurrent.futures subprocess threading multiprocessing
socket selectors email.mime.text http.client urllib.request urllib.parse
xml.etree.ElementTree xml.dom.minidom html.parser logging argparse
configparser pathlib shutil tempfile glob fnmatch textwrap difflib pprint
unittest typing dataclasses enum functools itertools heapq bisect array
ctypes uuid pickle copy inspect ast dis tokenize locale gettext calendar
ipaddress secrets mmap select platform sysconfig importlib.metadata
zoneinfo unicodedata""".split()

WORK = r"""
set -e
python3 - <<'PY'
import importlib, sys
mods = sys.argv[1:] or "MODULES".split()
for m in mods:
    importlib.import_module(m)
import hashlib, json, decimal, re
d = json.dumps({m: len(m) for m in mods}, sort_keys=True)
assert json.loads(d)[mods[0]] == len(mods[0])
hashlib.sha256(d.encode()).hexdigest()
decimal.Decimal(1) / decimal.Decimal(7)
re.compile(r"(\w+)\s*=\s*(\d+)").findall("a = 1, b = 22")
print("python3:", len(sys.modules), "modules")
PY
ls -l /usr/bin /usr/lib/x86_64-linux-gnu > /dev/null
grep -c . /etc/services > /dev/null
sed -n 's/^\([a-z]*\).*/\1/p' /etc/services | sort | uniq -c | sort -n | tail -n 1 > /dev/null
gawk -F: '{ n[$7]++ } END { for (s in n) print s, n[s] }' /etc/passwd > /dev/null
tar -cf - /etc 2>/dev/null | gzip -1 | wc -c > /dev/null
xz -1 -c /etc/services | xz -d | cmp - /etc/services
bzip2 -c /etc/services | bzip2 -d | cmp - /etc/services
file /usr/bin/python3.13 /usr/lib/x86_64-linux-gnu/libc.so.6 > /dev/null
sha256sum /usr/bin/gawk > /dev/null
dpkg-query -W > /dev/null
perl -e 'my %h = map { $_ => 1 } 1..1000; print scalar(keys %h), "\n"' > /dev/null
bash -c 'declare -A a; a[x]=1; echo ${a[x]}' > /dev/null
find /usr/lib/python3.13 -name '*.py' | wc -l > /dev/null
echo "binaries: done"
""".replace("MODULES", " ".join(MODULES))

GUEST = r"""
. /lib/vfsdax.sh
R=/droot
mkdir -p $R /ctl
mount -t virtiofs ctl /ctl || fail "mount the control share"
mount -t virtiofs -o "ro$DENSITY_MOUNT" $VFS_TAG $R || fail "mount the root"
[ -x $R/usr/bin/python3 ] || fail "the share is no density root"
mount -t proc proc $R/proc && mount -t sysfs sysfs $R/sys &&
    mount -o bind /dev $R/dev && mount -t tmpfs tmpfs $R/tmp &&
    mount -o bind /ctl $R/mnt || fail "mounts in the root"
if [ -n "$DENSITY_MOUNT" ]; then
    dax_active $R || fail "DAX requested, not active"
fi
cached() { awk '/^Cached:/ { print $2 }' /proc/meminfo; }
up() { cut -d' ' -f1 /proc/uptime; }
echo "$(up) $(cached)" > /ctl/.booted-$VFS_GUEST
mv /ctl/.booted-$VFS_GUEST /ctl/booted-$VFS_GUEST
i=0
while [ ! -e /ctl/go ]; do
    i=$((i + 1)); [ $i -gt 6000 ] && fail "the host never said go"
    sleep 0.1
done
t0=$(up)
chroot $R /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/tmp \
    LANG=C.UTF-8 /bin/sh /mnt/work.sh > /ctl/work-$VFS_GUEST.out 2>&1
rc=$?
t1=$(up)
echo "$rc $t0 $t1 $(cached)" > /ctl/.done-$VFS_GUEST
mv /ctl/.done-$VFS_GUEST /ctl/done-$VFS_GUEST
[ $rc = 0 ] || { cat /ctl/work-$VFS_GUEST.out; fail "the work failed ($rc)"; }
i=0
while [ ! -e /ctl/exit ]; do
    i=$((i + 1)); [ $i -gt 6000 ] && fail "the host never said exit"
    sleep 0.1
done
umount $R/mnt $R/tmp $R/dev $R/sys $R/proc
umount $R || fail "umount the root"
umount /ctl
pass "density guest $VFS_GUEST"
"""


def configurations():
    """name -> (window, daemon arguments, mount options, description)"""
    c = {"nowin": ("", "", "", "no window (cache=auto)")}
    for name, window, policy, what in (
            ("dax-size2M", WINDOW, "", "default policy, size:2M"),
            ("dax-exec", WINDOW, "--dax-policy=exec", "--dax-policy=exec"),
            ("dax-always", WINDOW, "--dax-policy=always",
             "--dax-policy=always"),
            # The window sized to what the work maps (75 ranges, 150 MiB),
            # and below it: every guest reclaims ranges all along
            ("dax-exec-256M", "256M", "--dax-policy=exec",
             "--dax-policy=exec, the window sized to the work"),
            ("dax-exec-64M", "64M", "--dax-policy=exec",
             "--dax-policy=exec, a window below what the work maps")):
        c[name] = (window, policy, ",dax=inode",
                   f"{window} window, dax=inode, {what}")
    return c


# ---------------------------------------------------------------- host side

def small_guest(work):
    """A guest directory for vm.py with the harness's kernel and an
    initramfs of its init, busybox and boot modules alone.  The harness's
    own initramfs carries the test tools and their libraries, 100 MiB in
    each guest's RAM once unpacked: a fixed cost per guest that a guest
    booting its user space from a shared root does not have."""
    src = os.environ.get("GUEST_DIR") or os.path.join(TOP, "build", "guest")
    base = os.path.join(src, "initramfs.cpio.gz")
    if not os.path.exists(base):
        raise SystemExit(f"bench: {base} is missing: run make guest")
    d = os.path.join(work, "guest")
    tree = os.path.join(work, "guest-tree")
    os.makedirs(d)
    os.makedirs(tree)
    os.symlink(os.path.join(src, "vmlinuz"), os.path.join(d, "vmlinuz"))
    # The accelerator probe's verdict is for the same kernel
    for f in ("kernel.txt", "accel-probe"):
        if os.path.exists(os.path.join(src, f)):
            shutil.copy(os.path.join(src, f), d)
    subprocess.run(f"gzip -dc {base} | cpio -id --quiet init bin/busybox "
                   "lib/vfsdax.sh 'lib/modules/*'", shell=True, cwd=tree,
                   check=True)
    mods = os.path.join(tree, "lib", "modules")
    with open(os.path.join(mods, "boot.order")) as f:
        keep = set(f.read().split()) | {"boot.order"}
    for m in os.listdir(mods):
        if m not in keep:
            os.unlink(os.path.join(mods, m))
    open(os.path.join(mods, "order"), "w").close()
    for sub in ("proc", "sys", "dev", "tmp", "root", "mnt", "usr/bin",
                "sbin"):
        os.makedirs(os.path.join(tree, sub), exist_ok=True)
    subprocess.run("find . | cpio -o -H newc --quiet | gzip -1 > "
                   f"{os.path.join(d, 'initramfs.cpio.gz')}", shell=True,
                   cwd=tree, check=True)
    return d


LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.mmap.restype = ctypes.c_void_p
LIBC.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                      ctypes.c_int, ctypes.c_int, ctypes.c_long]
LIBC.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
LIBC.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t,
                         ctypes.POINTER(ctypes.c_ubyte)]
PAGE = os.sysconf("SC_PAGE_SIZE")
MAP_FAILED = ctypes.c_void_p(-1).value


def root_files(root):
    """Each regular file of ROOT once (hard links are one file)"""
    seen, files = set(), []
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if not (st.st_mode & 0o170000 == 0o100000) or st.st_size == 0:
                continue
            key = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
            if key in seen:
                continue
            seen.add(key)
            files.append((p, st.st_size))
    return files, seen


def cached_pages(path, size):
    """Pages of PATH in the host's page cache (mincore)"""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return 0
    try:
        addr = LIBC.mmap(None, size, 1, 1, fd, 0)     # PROT_READ, MAP_SHARED
        if addr in (None, MAP_FAILED):
            return 0
        n = (size + PAGE - 1) // PAGE
        vec = (ctypes.c_ubyte * n)()
        ok = LIBC.mincore(addr, size, vec) == 0
        LIBC.munmap(addr, size)
        return sum(b & 1 for b in bytes(vec)) if ok else 0
    finally:
        os.close(fd)


def root_cache(root, files):
    """(kB of the root's files in the page cache, [(kB, path in the root)]
    largest)"""
    per = []
    for p, size in files:
        n = cached_pages(p, size)
        if n:
            per.append((n * PAGE // 1024, "/" + os.path.relpath(p, root)))
    per.sort(reverse=True)
    return sum(k for k, _ in per), per[:12]


def evict(files):
    for p, _ in files:
        try:
            fd = os.open(p, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def descendants(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def smaps(pid, keys):
    """kB of PID's Pss: {"guest RAM", "other", "root mapped"}, and the
    2 MiB window slots its mappings of root files touch.  The window's
    ranges are 2 MiB aligned in QEMU's address space (the window is)."""
    res = {"guest RAM": 0, "tcg code": 0, "other": 0, "root mapped": 0}
    slots, kind = set(), None
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                first = line.split(None, 1)[0]
                if "-" in first and not first.endswith(":"):
                    parts = line.split(None, 5)
                    path = parts[5].strip() if len(parts) > 5 else ""
                    major, minor = (int(x, 16) for x in parts[3].split(":"))
                    # By device and inode: QEMU gets the fds from a daemon
                    # whose mount namespace names them otherwise
                    if "memfd:memory-backend-memfd" in path:
                        kind = "guest RAM"
                    elif (major, minor, int(parts[4])) in keys:
                        kind = "root mapped"
                        a, b = (int(x, 16) for x in first.split("-"))
                        slots.update(range(a // RANGE, (b - 1) // RANGE + 1))
                    elif not path and "x" in parts[1] and int(parts[4]) == 0:
                        # TCG's buffer of translated code: KVM has none
                        kind = "tcg code"
                    else:
                        kind = "other"
                elif first == "Pss:" and kind:
                    res[kind] += int(line.split()[1])
    except OSError:
        pass
    return res, slots


def read_pid(state, name):
    try:
        with open(os.path.join(state, name)) as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def guest_ram_kb(qpid):
    """kB of the guest's RAM the host holds: the pages allocated in QEMU's
    memory-backend-memfd, whoever touched them (QEMU, or a daemon writing
    a READ's data), mapped or not"""
    try:
        for fd in os.listdir(f"/proc/{qpid}/fd"):
            p = f"/proc/{qpid}/fd/{fd}"
            try:
                if "memfd:memory-backend-memfd" in os.readlink(p):
                    return os.stat(p).st_blocks // 2
            except OSError:
                continue
    except OSError:
        pass
    return 0


def sample(states, root, keys, files):
    """The set's host memory, kB, and its parts"""
    s = {"guest RAM": 0, "qemu other": 0, "tcg code": 0, "daemons": 0,
         "root mapped": 0,
         "guest RAM per guest": [], "window ranges per guest": []}
    for st in states:
        q, d = read_pid(st, "qemu.pid"), read_pid(st, "daemon.pid")
        if q:
            m, slots = smaps(q, keys)
            ram = guest_ram_kb(q)
            s["guest RAM"] += ram
            s["qemu other"] += m["other"]
            s["tcg code"] += m["tcg code"]
            s["root mapped"] += m["root mapped"]
            s["guest RAM per guest"].append(ram)
            s["window ranges per guest"].append(len(slots))
        if d:
            for p in descendants(d):
                m, _ = smaps(p, keys)
                # Its mapping of guest RAM is counted above, as the memfd
                s["daemons"] += m["other"] + m["root mapped"] + m["tcg code"]
    s["root cache"], s["root cache top"] = root_cache(root, files)
    s["total"] = s["guest RAM"] + s["qemu other"] + s["tcg code"] + \
        s["daemons"] + s["root cache"]
    s["total less tcg code"] = s["total"] - s["tcg code"]
    return s


STATS_RE = re.compile(r"stats: (.+?): (\d+) requests, mean ([\d.]+) us")


def daemon_stats(logdir):
    out = {}
    try:
        with open(os.path.join(logdir, "virtiofsd.log"), errors="replace") as f:
            for line in f:
                m = STATS_RE.search(line)
                if m:
                    out[m.group(1)] = {"count": int(m.group(2)),
                                       "mean us": float(m.group(3))}
    except OSError:
        pass
    return out


def wait_files(paths, procs, deadline, what):
    """Waits for every path; returns {path: host time it appeared}"""
    seen = {}
    while len(seen) < len(paths):
        now = time.monotonic()
        for p in paths:
            if p not in seen and os.path.exists(p):
                seen[p] = now
        for i, pr in enumerate(procs):
            if pr.poll() is not None and len(seen) < len(paths):
                raise RuntimeError(f"guest {i} ended ({pr.returncode}) "
                                   f"before {what}")
        if now > deadline:
            raise RuntimeError(f"timeout waiting for {what}")
        time.sleep(0.05)
    return seen


def run_set(conf, n, root, files, keys, guest_dir, work, timeout):
    window, dargs, mount, _ = conf
    ctl = os.path.join(work, "ctl")
    shutil.rmtree(ctl, ignore_errors=True)
    os.makedirs(ctl)
    with open(os.path.join(ctl, "work.sh"), "w") as f:
        f.write(WORK)
    script = os.path.join(work, "guest.sh")
    with open(script, "w") as f:
        f.write(GUEST)
    evict(files)
    procs, states, logs, outs = [], [], [], []
    t_start = time.monotonic()
    deadline = t_start + timeout
    try:
        for i in range(n):
            st = os.path.join(work, f"state-{i}")
            lg = os.path.join(work, f"log-{i}")
            for d in (st, lg):
                shutil.rmtree(d, ignore_errors=True)
            states.append(st)
            logs.append(lg)
            out = open(os.path.join(work, f"out-{i}"), "w+")
            outs.append(out)
            cmd = [sys.executable, VM, "--quiet", "--mem", GUEST_MEM,
                   "--smp", "1", "--shared", root, "--daemon", "ours",
                   "--cache-mode", "auto", "--cache-size", window,
                   "--daemon-args", f"--readonly --stats {dargs}".strip(),
                   "--extra-daemon",
                   f"ctl=--socket-path=@SOCK@ --shared-dir={ctl} "
                   "--cache=never",
                   "--state-dir", st, "--log-dir", lg,
                   "--timeout", str(timeout),
                   "--env", f"VFS_GUEST={i}",
                   "--env", f"DENSITY_MOUNT={mount}", script]
            procs.append(subprocess.Popen(cmd, stdout=out,
                                          stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL,
                                          env=dict(os.environ,
                                                   GUEST_DIR=guest_dir)))
        booted = wait_files([os.path.join(ctl, f"booted-{i}")
                             for i in range(n)], procs, deadline, "boot")
        boot_s = [booted[os.path.join(ctl, f"booted-{i}")] - t_start
                  for i in range(n)]
        mem_boot = sample(states, root, keys, files)
        open(os.path.join(ctl, "go"), "w").close()
        wait_files([os.path.join(ctl, f"done-{i}") for i in range(n)],
                   procs, deadline, "the work")
        work_s, cached_kb = [], []
        for i in range(n):
            with open(os.path.join(ctl, f"done-{i}")) as f:
                rc, t0, t1, cached = f.read().split()
            if rc != "0":
                with open(os.path.join(ctl, f"work-{i}.out")) as w:
                    raise RuntimeError(f"guest {i}'s work failed ({rc}):\n"
                                       + w.read()[-1500:])
            work_s.append(float(t1) - float(t0))
            with open(os.path.join(ctl, f"booted-{i}")) as f:
                cached_kb.append(int(cached) - int(f.read().split()[1]))
        mem_work = sample(states, root, keys, files)
        open(os.path.join(ctl, "exit"), "w").close()
        for i, p in enumerate(procs):
            p.wait(max(deadline - time.monotonic(), 30))
            if p.returncode != 0:
                outs[i].seek(0)
                raise RuntimeError(f"guest {i}: vm.py ended with "
                                   f"{p.returncode}:\n" + outs[i].read()[-1500:])
    except BaseException:
        for p in procs:
            if p.poll() is None:
                # vm.py tears its QEMU and daemons down on SIGINT
                p.send_signal(signal.SIGINT)
        for p in procs:
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
        raise
    finally:
        for o in outs:
            o.close()
    stats = [daemon_stats(lg) for lg in logs]
    return {
        "boot s": statistics.mean(boot_s),
        "work s": statistics.mean(work_s),
        "boot+work s": statistics.mean(b + w for b, w in zip(boot_s, work_s)),
        "slowest boot+work s": max(b + w for b, w in zip(boot_s, work_s)),
        "mem boot": mem_boot, "mem work": mem_work,
        "guest Cached growth kB": statistics.mean(cached_kb),
        "daemon stats": stats,
    }


# ---------------------------------------------------------------- report

def summarize(vals):
    return {"median": statistics.median(vals), "min": min(vals),
            "max": max(vals), "n": len(vals)}


def per_guest_stat(runs, key, field="count"):
    vals = []
    for r in runs:
        st = r["daemon stats"]
        vals.append(statistics.mean(s.get(key, {}).get(field, 0) for s in st)
                    if st else 0)
    return summarize(vals) if vals else None


def summarize_all(raw):
    """{config: {n: {figure: summary}}} from the raw runs"""
    res = {}
    for c, by_n in raw.items():
        res[c] = {}
        for n, runs in by_n.items():
            if not runs:
                continue
            f = {}
            for k in ("boot s", "work s", "boot+work s",
                      "slowest boot+work s", "guest Cached growth kB"):
                f[k] = summarize([r[k] for r in runs])
            for phase in ("mem boot", "mem work"):
                for k in ("total", "total less tcg code", "guest RAM",
                          "qemu other", "tcg code", "daemons", "root cache",
                          "root mapped"):
                    f[f"{phase} {k}"] = summarize([r[phase][k] for r in runs])
            f["window ranges per guest"] = summarize(
                [statistics.mean(r["mem work"]["window ranges per guest"])
                 for r in runs])
            for key in ("SETUPMAPPING", "REMOVEMAPPING", "READ", "LOOKUP",
                        "OPEN", "ELF check (--dax-policy=exec)"):
                f[f"{key} per guest"] = per_guest_stat(runs, key)
            f["ELF check mean us"] = per_guest_stat(
                runs, "ELF check (--dax-policy=exec)", "mean us")
            res[c][n] = f
    return res


def ratio(a, b):
    return a / b if b else float("inf")


def memory_targets(res, chosen):
    out = []
    c = res.get(chosen, {})
    if "1" not in c or "4" not in c:
        return out
    one = c["1"]["mem work total"]["median"]
    four = c["4"]["mem work total"]["median"]
    r = ratio(four, one)
    out.append((f"{chosen}: host memory, 4 guests <= 1.3 x 1 guest",
                r <= 1.3, f"{four / 1024:.0f} vs {one / 1024:.0f} MiB: "
                f"{r:.2f}x"))
    w1 = one - c["1"]["mem boot total"]["median"]
    w4 = four - c["4"]["mem boot total"]["median"]
    out.append((f"{chosen}: the work's part alone (after the work less "
                "after the boot), 4 guests <= 1.3 x 1 guest",
                ratio(w4, w1) <= 1.3, f"{w4 / 1024:.0f} vs "
                f"{w1 / 1024:.0f} MiB: {ratio(w4, w1):.2f}x"))
    # What a host without TCG would hold: a figure, not a verdict (KVM
    # differs in more than the translated code)
    key, boot = "mem work total less tcg code", "mem boot total less tcg code"
    if key in c["1"] and key in c["4"] and boot in c["1"]:
        one, four = c["1"][key]["median"], c["4"][key]["median"]
        out.append((f"{chosen}: without TCG's translated code, 4 guests / "
                    "1 guest", None, f"{four / 1024:.0f} vs "
                    f"{one / 1024:.0f} MiB: {ratio(four, one):.2f}x"))
        w1 = one - c["1"][boot]["median"]
        w4 = four - c["4"][boot]["median"]
        out.append((f"{chosen}: the work's part without TCG's translated "
                    "code, 4 guests / 1 guest", None,
                    f"{w4 / 1024:.0f} vs {w1 / 1024:.0f} MiB: "
                    f"{ratio(w4, w1):.2f}x"))
    return out


def targets(res, chosen=CHOSEN, also=("dax-exec-256M",)):
    """[(name, met (None: a figure only), figures)]"""
    out = memory_targets(res, chosen)
    for other in also:
        out += memory_targets(res, other)
    c = res.get(chosen, {})
    nw = res.get("nowin", {})
    if "1" in nw and "4" in nw:
        one = nw["1"]["mem work total"]["median"]
        four = nw["4"]["mem work total"]["median"]
        out.append(("nowin: host memory, 4 guests / 1 guest", None,
                    f"{four / 1024:.0f} vs {one / 1024:.0f} MiB: "
                    f"{ratio(four, one):.2f}x"))
    for n in ("1", "2", "4"):
        if n in c and n in nw:
            t = c[n]["boot+work s"]
            t0 = nw[n]["boot+work s"]
            r = ratio(t["median"], t0["median"])
            # Overlapping spreads cannot tell a miss from noise
            noise = t["min"] <= t0["max"] and t0["min"] <= t["max"]
            out.append((f"{chosen}: boot+work with {n} guest(s) <= 1.1 x "
                        "without the window", r <= 1.1,
                        f"{t['median']:.1f} vs {t0['median']:.1f} s: "
                        f"{r:.2f}x" + (" (spreads overlap)"
                                       if r > 1.1 and noise else "")))
    return out


def fmt(s, scale=1.0, digits=0):
    if not s:
        return "-"
    m, lo, hi = (s[k] / scale for k in ("median", "min", "max"))
    return f"{m:.{digits}f} [{lo:.{digits}f}-{hi:.{digits}f}]"


def svg_chart(res, configs, path):
    """Grouped bars: host memory after the work, and boot+work, per N"""
    ns = sorted({n for c in configs for n in res.get(c, {})}, key=int)
    colors = ["#888888", "#4477aa", "#228833", "#ccbb44", "#ee6677"]
    W, H, pad, gap = 760, 300, 60, 30
    panels = [("host memory after the work (MiB)", "mem work total", 1024),
              ("boot + work per guest (s)", "boot+work s", 1)]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" '
           f'height="{H * 2 + 40}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H * 2 + 40}" fill="white"/>']
    for pi, (title, key, scale) in enumerate(panels):
        y0 = pi * H + 20
        vals = [res[c][n][key]["median"] / scale
                for c in configs for n in ns if n in res.get(c, {})]
        top = max(vals) * 1.15 if vals else 1
        plot_h = H - 80
        out.append(f'<text x="{pad}" y="{y0 + 5}" font-weight="bold">'
                   f'{title}</text>')
        out.append(f'<line x1="{pad}" y1="{y0 + 20 + plot_h}" '
                   f'x2="{W - 20}" y2="{y0 + 20 + plot_h}" stroke="black"/>')
        group_w = (W - pad - 20) / max(len(ns), 1)
        bar_w = (group_w - gap) / max(len(configs), 1)
        for gi, n in enumerate(ns):
            gx = pad + gi * group_w + gap / 2
            out.append(f'<text x="{gx + (group_w - gap) / 2:.1f}" '
                       f'y="{y0 + plot_h + 38}" text-anchor="middle">'
                       f'{n} guest{"s" if n != "1" else ""}</text>')
            for ci, c in enumerate(configs):
                if n not in res.get(c, {}):
                    continue
                s = res[c][n][key]
                v, lo, hi = (s[k] / scale for k in ("median", "min", "max"))
                h = plot_h * v / top
                x = gx + ci * bar_w
                y = y0 + 20 + plot_h - h
                out.append(f'<rect x="{x:.1f}" y="{y:.1f}" '
                           f'width="{bar_w - 2:.1f}" height="{h:.1f}" '
                           f'fill="{colors[ci % len(colors)]}"/>')
                ylo = y0 + 20 + plot_h - plot_h * lo / top
                yhi = y0 + 20 + plot_h - plot_h * hi / top
                xm = x + (bar_w - 2) / 2
                out.append(f'<line x1="{xm:.1f}" y1="{ylo:.1f}" '
                           f'x2="{xm:.1f}" y2="{yhi:.1f}" stroke="black"/>')
                out.append(f'<text x="{xm:.1f}" y="{y - 3:.1f}" '
                           f'text-anchor="middle" font-size="10">'
                           f'{v:.0f}</text>')
        step = (W - pad - 20) / max(len(configs), 1)
        for ci, c in enumerate(configs):
            lx = pad + ci * step
            ly = y0 + H - 22
            out.append(f'<rect x="{lx:.1f}" y="{ly - 9}" width="10" height="10" '
                       f'fill="{colors[ci % len(colors)]}"/>')
            out.append(f'<text x="{lx + 14:.1f}" y="{ly}">{c}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


NOTES_MARK = "## Notes (by hand; bench/density.py keeps them)"


def write_report(data, out):
    setup, res, configs = data["setup"], data["results"], data["configs"]
    names = list(configs)
    ns = sorted({n for c in names for n in res.get(c, {})}, key=int)
    lines = ["# Density: many guests, one root file system", "",
             f"{setup['date']}; {setup['root']}; {setup['guest']}; "
             f"{setup['rounds']} alternating rounds; median [min-max].  "
             "Host memory: the guests' RAM the host holds (each QEMU's "
             "memfd), TCG's translated code, the rest of every QEMU's and "
             "daemon's Pss without their mappings of the root's files, and "
             "the host's page cache of the root's files, which those "
             "mappings are (`bench/density.py` says how).", "",
             "Configurations:", ""]
    lines += [f"- `{c}`: {configs[c]}" for c in names]
    rows = [
        ("host memory after the work (MiB)", "mem work total", 1024, 0),
        ("... of which guest RAM (MiB)", "mem work guest RAM", 1024, 0),
        ("... of which the root's page cache (MiB)", "mem work root cache",
         1024, 0),
        ("... TCG's translated code (MiB)", "mem work tcg code", 1024, 0),
        ("... QEMU's other memory (MiB)", "mem work qemu other", 1024, 0),
        ("... the daemons (MiB)", "mem work daemons", 1024, 0),
        ("host memory after the work, less TCG's code (MiB)",
         "mem work total less tcg code", 1024, 0),
        ("host memory after the boot (MiB)", "mem boot total", 1024, 0),
        ("... of which guest RAM (MiB)", "mem boot guest RAM", 1024, 0),
        ("... TCG's translated code (MiB)", "mem boot tcg code", 1024, 0),
        ("guest page cache growth per guest (MiB)",
         "guest Cached growth kB", 1024, 1),
        ("boot + work per guest (s)", "boot+work s", 1, 1),
        ("... boot (s)", "boot s", 1, 1),
        ("... work (s)", "work s", 1, 1),
        ("slowest guest's boot + work (s)", "slowest boot+work s", 1, 1),
        ("window ranges mapped per guest", "window ranges per guest", 1, 0),
        ("SETUPMAPPING per guest", "SETUPMAPPING per guest", 1, 0),
        ("REMOVEMAPPING per guest", "REMOVEMAPPING per guest", 1, 0),
        ("READ per guest", "READ per guest", 1, 0),
        ("LOOKUP per guest", "LOOKUP per guest", 1, 0),
        ("ELF checks per guest", "ELF check (--dax-policy=exec) per guest",
         1, 0),
        ("ELF check, mean (us)", "ELF check mean us", 1, 1),
    ]
    for n in ns:
        lines += ["", f"## {n} guest{'s' if n != '1' else ''}", "",
                  "| | " + " | ".join(names) + " |",
                  "|---|" + "---|" * len(names)]
        for label, key, scale, digits in rows:
            cells = [fmt(res.get(c, {}).get(n, {}).get(key), scale, digits)
                     for c in names]
            if all(x == "-" for x in cells):
                continue
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "![host memory and time per guest count]"
              "(density.svg)", "", "## Targets", ""]
    for name, ok, figs in targets(res):
        tag = "figure" if ok is None else ("met" if ok else "MISSED")
        lines.append(f"- {tag}: {name}: {figs}")
    if data.get("errors"):
        lines += ["", "Errors:", ""] + [f"- {e}" for e in data["errors"]]
    # The notes below the figures are written by hand: kept across runs
    notes = NOTES_MARK + "\n\n(none yet)\n"
    try:
        with open(os.path.join(out, "density.md")) as f:
            old = f.read()
        if NOTES_MARK in old:
            notes = old[old.index(NOTES_MARK):]
    except OSError:
        pass
    with open(os.path.join(out, "density.md"), "w") as f:
        f.write("\n".join(lines) + "\n\n" + notes)
    svg_chart(res, names, os.path.join(out, "density.svg"))


def main():
    ap = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--configs", help="comma-separated configuration names")
    ap.add_argument("--guests", default="1,2,4")
    ap.add_argument("--out", default=os.path.join(TOP, "docs", "benchmarks"))
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--root", help="the root (default: mk/density-root.sh's)")
    ap.add_argument("--report", help="write the report from this JSON only")
    args = ap.parse_args()
    if args.report:
        with open(args.report) as f:
            data = json.load(f)
        write_report(data, args.out)
        print(f"bench: wrote {args.out}/density.{{md,svg}} from {args.report}")
        return 0
    confs = configurations()
    chosen = args.configs.split(",") if args.configs else list(confs)
    for c in chosen:
        if c not in confs:
            ap.error(f"unknown configuration {c}; known: {', '.join(confs)}")
    ns = [int(x) for x in args.guests.split(",")]
    root = args.root
    if not root:
        p = subprocess.run([os.path.join(TOP, "mk", "density-root.sh")],
                           stdout=subprocess.PIPE, text=True)
        if p.returncode != 0:
            print("bench: the density root could not be made (above)",
                  file=sys.stderr)
            return 1
        root = p.stdout.strip().splitlines()[-1]
    root = os.path.realpath(root)
    files, keys = root_files(root)
    work = tempfile.mkdtemp(prefix="vfsdax-density-")
    raw = {c: {str(n): [] for n in ns} for c in chosen}
    errors = []
    try:
        guest_dir = small_guest(work)
        total, k = args.rounds * len(chosen) * len(ns), 0
        for r in range(args.rounds):
            # Each round in another order of configurations
            order = chosen[r % len(chosen):] + chosen[:r % len(chosen)]
            for n in ns:
                for c in order:
                    k += 1
                    print(f"[{k}/{total}] round {r + 1}: {n} x {c}: "
                          f"{confs[c][3]}", flush=True)
                    try:
                        res = run_set(confs[c], n, root, files, keys,
                                      guest_dir, work, args.timeout)
                    except RuntimeError as e:
                        errors.append(f"round {r + 1}, {n} x {c}: {e}")
                        print(f"    error: {e}", flush=True)
                        continue
                    raw[c][str(n)].append(res)
                    m = res["mem work"]
                    print(f"    {m['total'] / 1024:.0f} MiB (guest RAM "
                          f"{m['guest RAM'] / 1024:.0f}, root cache "
                          f"{m['root cache'] / 1024:.0f}), boot "
                          f"{res['boot s']:.1f} s + work {res['work s']:.1f} s",
                          flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    setup = {
        "date": datetime.datetime.now(datetime.timezone.utc)
        .isoformat(timespec="seconds"),
        "root": f"a Debian 13 root of {len(files)} files, "
                f"{sum(s for _, s in files) >> 20} MiB (mk/density-root.sh), "
                "on the host's disk, served read-only (--readonly, "
                "cache=auto) by one of our daemons per guest",
        "guest": f"1 vCPU and {GUEST_MEM} per guest, TCG unless KVM boots "
                 f"(vm.py), on a host of {os.cpu_count()} CPUs",
        "rounds": args.rounds,
        "modules": MODULES,
    }
    data = {"setup": setup, "configs": {c: confs[c][3] for c in chosen},
            "results": summarize_all(raw), "runs": raw, "errors": errors}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "density.json"), "w") as f:
        json.dump(data, f, separators=(",", ":"))
    write_report(data, args.out)
    print(f"bench: wrote {args.out}/density.{{json,md,svg}}")
    for e in errors:
        print(f"  error: {e}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

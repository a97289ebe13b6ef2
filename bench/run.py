#!/usr/bin/env python3
"""make bench: virtio-9p vs virtio-fs (Rust virtiofsd, ours) vs ours with DAX
vs the guest's own tmpfs, side by side in one run.

Every configuration boots the same guest (harness/vm.py) over the same host
tmpfs directory and runs the same fio jobs and metadata loops; each figure is
the median of --runs runs, with min and max.  Results go to
docs/benchmarks/: results.json (every figure and the setup), results.md (a
table per workload group, targets met or not) and results.png.

Before the guests, the cache window's own cost is measured without a guest:
vhost-user-fs-test's map+unmap benchmark, with 1 and with 8192 live
mappings; and so is the cost of holding inodes by file handle
(--inode-file-handles): LOOKUP and GETATTR through the daemon's request
path with fds and with handles (tests/unit/virtiofsd/bench-inodes.c).
mappings.  Then bench/upstream_shmem.py times the same map+unmap pairs
with 1 to 448 live mappings on unmodified upstream QEMU 11.1 and on our
fork, side by side, and maps on upstream until a map fails: the
live-mapping limit.

--baseline-virtiofsd PATH (or BASELINE_VIRTIOFSD) runs another build of
our daemon beside the current one: each chosen configuration of ours gets
a twin NAME-baseline, the same but for the binary, and the report compares
every row with it (bench/baseline.py).  With --rounds N each configuration
boots N guests, the configurations alternating round by round, and each
figure pools their runs; --workloads keeps only the rows named, and
--guests-only leaves out the measurements without a guest.  Write such a
partial run somewhere else than docs/benchmarks (--out).

    bench/run.py [--quick] [--runs N] [--rounds N] [--configs a,b,...]
                 [--workloads a,b,...] [--guests-only] [--out DIR]
                 [--baseline-virtiofsd PATH [--baseline-commit REV]]
    bench/run.py --report results.json [--out DIR]
"""

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import baseline

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("BUILD", os.path.join(TOP, "build"))
VM = os.path.join(TOP, "harness", "vm.py")
QEMU = os.path.join(BUILD, "qemu", "qemu-system-x86_64")
OURS = os.path.join(BUILD, "qemu", "tools", "virtiofsd", "virtiofsd")
FS_QTEST = os.path.join(BUILD, "qemu", "tests", "qtest", "vhost-user-fs-test")
MAP_BENCH = "/x86_64/vhost-user-fs/bench/map-unmap"
MAP_LIVE = (1, 8192)                          # live mappings, as the test has
INODE_BENCH = os.path.join(BUILD, "qemu", "tests", "unit", "virtiofsd",
                           "bench-inodes")
INODE_N, INODE_ROUNDS = 10000, 7
SHMEM_TOOL = os.path.join(TOP, "bench", "upstream_shmem.py")
# Live counts timed on both front-ends; the fork also with a full window
SHMEM_LIVE = "1,16,64,256,384,448"
SHMEM_FORK_LIVE = SHMEM_LIVE + ",2048"
SHMEM_SLOW_MS = 100
MiB = 1 << 20

FILE_COUNT, FILE_SIZE = 4, 256 * MiB          # the data set: 1 GiB
WINDOW_BIG, WINDOW_HALF = "2G", "512M"        # >= and = half the data set
GUEST_MEM = "3G"

PATTERNS = ["read", "randread", "write", "randwrite", "randrw"]
PATTERN_NAME = {"read": "seqread", "randread": "randread", "write": "seqwrite",
                "randwrite": "randwrite", "randrw": "randrw"}
ENGINES = ["psync", "libaio", "mmap"]
METADATA = ["negstat", "create", "readdir", "smallread"]


def configurations():
    """name -> (vm.py arguments, guest mount command, description)."""
    vfs = "mount -t virtiofs $VFS_TAG /mnt"
    p9 = "mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache={} p9 /mnt"
    c = {"tmpfs": ([], "mount -t tmpfs -o size=2G tmpfs /mnt",
                   "the guest's own tmpfs (upper bound)")}
    for mode in ("none", "mmap", "loose"):
        c[f"9p-{mode}"] = (["--p9", "@SHARED@"], p9.format(mode),
                           f"virtio-9p cache={mode}")
    for daemon, label in (("rust", "Rust virtiofsd 1.14"), ("ours", "our virtiofsd")):
        for mode in ("never", "auto", "always"):
            c[f"{daemon}-{mode}"] = (["--daemon", daemon, "--cache-mode", mode],
                                     vfs, f"{label} cache={mode}")
    # The inodes the guest knows held by file handle rather than by fd
    for mode in ("never", "auto"):
        c[f"ours-{mode}-handles"] = (
            ["--daemon", "ours", "--cache-mode", mode,
             "--daemon-args=--inode-file-handles=mandatory"], vfs,
            f"our virtiofsd cache={mode}, --inode-file-handles=mandatory")
    for mode in ("never", "auto", "always"):
        for win, tag in ((WINDOW_BIG, "big"), (WINDOW_HALF, "half")):
            c[f"dax-{mode}-{tag}"] = (
                ["--daemon", "ours", "--cache-mode", mode, "--cache-size", win],
                vfs + " -o dax=always",
                f"our virtiofsd cache={mode} + DAX, {win} window")
    # Unmodified upstream QEMU 11.1 (mk/upstream-qemu.sh): the daemon caps
    # its window at 512M there, so only the half window compares.
    c["upstream-dax-auto-half"] = (
        ["--upstream-device", "--daemon", "ours", "--cache-mode", "auto",
         "--cache-size", WINDOW_HALF],
        vfs + " -o dax=always",
        f"our virtiofsd cache=auto + DAX, {WINDOW_HALF} window, "
        "upstream QEMU 11.1")
    return c


QUICK_CONFIGS = ["tmpfs", "rust-auto", "ours-auto", "dax-auto-big", "dax-auto-half"]


def workloads(quick):
    w = []
    for multi in ((False,) if quick else (False, True)):
        for engine in (("psync", "mmap") if quick else ENGINES):
            for pat in (PATTERNS[:4] if quick else PATTERNS):
                w.append(("fio", pat, engine, multi))
    for m in METADATA:
        w.append(("meta", m, None, False))
    return w


def wl_name(w):
    kind, pat, engine, multi = w
    if kind == "meta":
        return pat
    return f"{PATTERN_NAME[pat]}-{engine}" + ("-multi" if multi else "")


def guest_script(mount, wls, runs, runtime, meta_n, smp):
    """One guest script runs every workload of a configuration, printing
    RESULT lines the host parses."""
    s = [". /lib/vfsdax.sh", "mkdir -p /mnt", mount + " || fail mount",
         "echo 3 > /proc/sys/vm/drop_caches",
         "[ -d /mnt/bench ] || mkdir -p /mnt/bench",
         # tmpfs starts empty: lay the data set out in the guest.
         f"for i in $(seq 0 {FILE_COUNT - 1}); do [ -f /mnt/bench/f$i ] || "
         f"dd if=/dev/zero of=/mnt/bench/f$i bs=1M count={FILE_SIZE // MiB} "
         "2>/dev/null; done"]
    for w in wls:
        kind, pat, engine, multi = w
        name = wl_name(w)
        for r in range(runs):
            if kind == "meta":
                d = f"/mnt/meta-{pat}-{r}"
                s.append(f"rm -rf {d}; mkdir -p {d}")
                s.append(f"out=$(metabench {pat} {d} {meta_n} 2>&1) && "
                         f"echo \"RESULT {name} {r} $(echo $out | cut -d' ' -f4) 0\" || "
                         f"echo \"RESULT {name} {r} 0 0 # $out\"")
                s.append(f"rm -rf {d}")
                continue
            # Every workload touches the whole data set, so that the half
            # window really makes the guest reclaim ranges: one job spreads
            # its I/O over all the files, multi's jobs share them out.
            jobs = smp if multi else 1
            per_job = FILE_COUNT // jobs
            args = (f"--rw={pat} --bs=4k --ioengine={engine} "
                    f"--size={per_job * FILE_SIZE // MiB}M "
                    f"--runtime={runtime} --time_based "
                    f"--group_reporting --output-format=json")
            if pat == "randrw":
                args += " --rwmixread=70"
            if engine == "libaio":
                args += " --iodepth=16"
            job = " ".join(
                f"--name=j{j} --filename=" +
                ":".join(f"/mnt/bench/f{j * per_job + i}" for i in range(per_job))
                for j in range(jobs))
            s.append(f"fio {args} {job} > /tmp/fio.json 2>/tmp/fio.err; rc=$?")
            s.append("bw=$(grep -o '\"bw_bytes\" : [0-9]*' /tmp/fio.json | "
                     "head -2 | awk '{print $3}' | tr '\\n' ' ')")
            s.append(f"if [ $rc = 0 ]; then echo \"RESULT {name} {r} $bw\"; else "
                     f"echo \"RESULT {name} {r} 0 0 # $(head -c 200 /tmp/fio.err | tr '\\n' ' ')\"; fi")
    s.append("umount /mnt 2>/dev/null; true")
    return "\n".join(s) + "\n"


def run_config(name, conf, wls, args, shared, progress):
    vm_args, mount, _ = conf
    vm_args = [a.replace("@SHARED@", shared) for a in vm_args]
    script = guest_script(mount, wls, args.runs, args.runtime, args.meta_n, 2)
    with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False) as f:
        f.write(script)
        path = f.name
    daemon = [] if any(a in vm_args for a in ("--daemon",)) else ["--daemon", "none"]
    cmd = [sys.executable, VM, "--quiet", "--daemon-must-live",
           "--mem", GUEST_MEM, "--shared", shared,
           "--timeout", str(args.config_timeout)] + daemon + vm_args + [path]
    results, errors = {}, []
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    for line in proc.stdout:
        m = re.match(r"^RESULT (\S+) (\d+) (\S+)\s*(\S*)\s*(#.*)?$", line.strip())
        if not m:
            continue
        wl, _, a, b, note = m.groups()
        # fio: read and write bytes/s; metabench: ops/s.
        val = float(a or 0) + float(b or 0)
        if wl in METADATA:
            val = float(a or 0)
        else:
            val /= MiB
        results.setdefault(wl, []).append(val)
        if note:
            errors.append(f"{wl}: {note[1:].strip()}")
        progress(name, wl)
    proc.wait()
    err = proc.stderr.read()
    os.unlink(path)
    if proc.returncode != 0:
        errors.append(f"guest run failed ({proc.returncode}): {err.strip()[-400:]}")
    return results, errors


def map_unmap_bench():
    """Map+unmap pairs per second of the cache window with 1 and with 8192
    live mappings (vhost-user-fs-test, its back-end against the device, no
    guest): ({live: figures}, errors)."""
    if not os.path.exists(FS_QTEST):
        return {}, [f"map+unmap: {FS_QTEST} is not built"]
    env = dict(os.environ, QTEST_QEMU_BINARY=QEMU)
    try:
        r = subprocess.run([FS_QTEST, "-m", "perf", "-p", MAP_BENCH], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=600, stdin=subprocess.DEVNULL)
        out, rc = r.stdout, r.returncode
    except subprocess.TimeoutExpired:
        return {}, ["map+unmap: timed out after 600s"]
    res = {}
    # "min perf: 8192 live mappings: median pair 42.0 us, 23810 pairs/s;
    #  throughput 10594 pairs/s (medians of 9 rounds of 4000 pairs)"
    for m in re.finditer(r"min perf: (\d+) live mappings?: median pair "
                         r"([\d.]+) us, \d+ pairs/s; throughput ([\d.]+) "
                         r"pairs/s \(medians of (\d+) rounds of (\d+) pairs\)",
                         out):
        live, us = int(m.group(1)), float(m.group(2))
        res[live] = {"median_pair_us": us,
                     "pairs_per_s": 1e6 / us if us else 0.0,
                     "throughput": float(m.group(3)),
                     "rounds": int(m.group(4)), "pairs": int(m.group(5))}
    if rc != 0 or sorted(res) != list(MAP_LIVE):
        tail = " ".join(out.strip().splitlines()[-5:])
        return res, [f"map+unmap: benchmark failed ({rc}): {tail[-400:]}"]
    return res, []


def inode_bench():
    """ns per LOOKUP (new and known inode) and GETATTR with inodes held by
    fd and by file handle, no guest: ({"fds lookup-new": figures, ...},
    errors).  The scratch directories are on tmpfs, as the guests' share."""
    if not os.path.exists(INODE_BENCH):
        return {}, [f"inodes: {INODE_BENCH} is not built"]
    try:
        r = subprocess.run([INODE_BENCH, str(INODE_N), str(INODE_ROUNDS)],
                           env=dict(os.environ, TMPDIR="/dev/shm"),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=900, stdin=subprocess.DEVNULL)
        out, rc = r.stdout, r.returncode
    except subprocess.TimeoutExpired:
        return {}, ["inodes: timed out after 900s"]
    res = {}
    for m in re.finditer(r"bench-inodes: (\S+ \S+): median (\d+) ns, min "
                         r"(\d+), max (\d+) \((\d+) x (\d+)\)", out):
        res[m.group(1)] = {"median_ns": int(m.group(2)),
                           "min_ns": int(m.group(3)),
                           "max_ns": int(m.group(4)),
                           "rounds": int(m.group(5)), "n": int(m.group(6))}
    if rc != 0 or len(res) != 9:
        tail = " ".join(out.strip().splitlines()[-5:])
        return res, [f"inodes: benchmark failed ({rc}): {tail[-400:]}"]
    return res, []


def inode_report(ib):
    md = ["", "## Inodes by fd and by file handle", "",
          f"`{os.path.basename(INODE_BENCH)} {INODE_N} {INODE_ROUNDS}` "
          "(TMPDIR=/dev/shm): requests built in the process and sent "
          "through the daemon's request path, no guest; each round looks up "
          f"{INODE_N} new names, looks them up again and GETATTRs them, with "
          "--inode-file-handles=never (an O_PATH fd per inode), mandatory "
          "with --inode-fd-cache=0 (a file handle per inode, its fd opened "
          "through the broker for each request: a round trip to another "
          "process) and mandatory with an fd cache that holds them all "
          "(each inode keeps an idle fd: the default while the guest uses "
          "fewer inodes than the cache).  Median ns per request over the "
          "rounds, [min-max].", ""]
    if not ib:
        return md + ["Not measured.", ""]
    md += ["| request | fds (ns) | handles, broker each time (ns) | "
           "/ fds | handles, cached fds (ns) | / fds |",
           "|---|---|---|---|---|---|"]
    for op in ("lookup-new", "lookup-known", "getattr"):
        a = ib.get(f"fds {op}")
        b = ib.get(f"handles-broker {op}")
        c = ib.get(f"handles-cached {op}")
        if not a or not b or not c:
            continue
        base = max(a['median_ns'], 1)
        md.append(f"| {op} | {a['median_ns']} [{a['min_ns']}-{a['max_ns']}] "
                  f"| {b['median_ns']} [{b['min_ns']}-{b['max_ns']}] | "
                  f"{b['median_ns'] / base:.2f} "
                  f"| {c['median_ns']} [{c['min_ns']}-{c['max_ns']}] | "
                  f"{c['median_ns'] / base:.2f} |")
    return md + [""]


SHMEM_ROW = re.compile(
    r"^(fork|upstream) map\+unmap: (\d+) live: median pair ([\d.]+) us, "
    r"\d+ pairs/s; map ([-\d.]+) us, add ([-\d.]+) us, unmap ([-\d.]+) us, "
    r"rem ([-\d.]+) us, back-end ([-\d.]+) us, QEMU main thread "
    r"([-\d.]+) us of CPU a pair \((\d+) pairs\)$")
SHMEM_END = re.compile(r"^(fork|upstream) (slow|limit): (\d+) live: "
                       r"(reached|not reached|failed|none|error|stopped): (.*)$")
SHMEM_FILL = re.compile(r"^(fork|upstream) fill: (\d+) live: last map "
                        r"([\d.]+) ms")
SHMEM_HEAD = re.compile(r"^(fork|upstream): (QEMU emulator version [^;]*);")


def parse_shmem(out):
    """bench/upstream_shmem.py's lines -> {front-end: {"rows": {live:
    figures}, "slow": ..., "limit": ..., "fill": {live: map ms}, "qemu":
    version}}; lines that are not its own are left out."""
    r = {}
    for line in out.splitlines():
        line = line.strip()
        m = SHMEM_ROW.match(line)
        if m:
            us = float(m.group(3))
            d = r.setdefault(m.group(1), {})
            d.setdefault("rows", {})[int(m.group(2))] = {
                "median_pair_us": us, "pairs_per_s": 1e6 / us if us else 0.0,
                "map_us": float(m.group(4)), "add_us": float(m.group(5)),
                "unmap_us": float(m.group(6)), "rem_us": float(m.group(7)),
                "backend_us": float(m.group(8)),
                "qemu_cpu_us": float(m.group(9)), "pairs": int(m.group(10))}
            continue
        m = SHMEM_END.match(line)
        if m:
            r.setdefault(m.group(1), {})[m.group(2)] = {
                "live": int(m.group(3)), "status": m.group(4),
                "text": m.group(5)}
            continue
        m = SHMEM_FILL.match(line)
        if m:
            r.setdefault(m.group(1), {}).setdefault("fill", {})[
                int(m.group(2))] = float(m.group(3))
            continue
        m = SHMEM_HEAD.match(line)
        if m:
            r.setdefault(m.group(1), {})["qemu"] = m.group(2)
    return r


def shmem_bench(fork):
    """Map+unmap pairs with N live mappings through a started device, on
    upstream QEMU 11.1 (then mapping on until a map fails) or on our fork:
    (parse_shmem()'s entry for it, errors)."""
    name = "fork" if fork else "upstream"
    cmd = [sys.executable, SHMEM_TOOL, "--slow-ms", str(SHMEM_SLOW_MS)]
    cmd += ["--fork", "--live", SHMEM_FORK_LIVE] if fork else \
        ["--live", SHMEM_LIVE, "--find-limit"]
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=1200, stdin=subprocess.DEVNULL)
        out, rc = r.stdout, r.returncode
    except subprocess.TimeoutExpired:
        return {}, [f"map+unmap on {name}: timed out after 1200s"]
    got = parse_shmem(out).get(name, {})
    errors = []
    if rc != 0 or not got.get("rows"):
        tail = " ".join(out.strip().splitlines()[-3:])
        errors.append(f"map+unmap on {name}: failed ({rc}): {tail[-400:]}")
    return got, errors


def shmem_lines(sh):
    """The report's lines for the fork against upstream QEMU 11.1."""
    md = ["## Cache window map+unmap: our fork against upstream QEMU 11.1", "",
          f"`bench/{os.path.basename(SHMEM_TOOL)}` is the vhost-user "
          "back-end of a minimal guest whose virtio-fs driver starts the "
          "device (upstream puts mappings into the vhost memory table only "
          "then).  It maps and unmaps one 2 MiB range of a 4 GiB window "
          "with N-1 others live, on both front-ends the same way: "
          "`vhost-user-fs-pci,cache-size=4G` (fork) and "
          "`vhost-user-test-device-pci,virtio-id=26` (upstream).  A pair "
          "lasts until QEMU has answered the unmap and the back-end has "
          "answered the memory-table messages (`ADD_MEM_REG`, "
          "`REM_MEM_REG`) that upstream sends after each map and unmap.  "
          "QEMU CPU is the CPU time of QEMU's main thread per pair; the "
          "rest of a pair is the back-end (a Python program: about 0.1 ms "
          "a pair of its own) and waiting for a CPU.", ""]
    fork, up = sh.get("fork", {}), sh.get("upstream", {})
    lives = sorted({int(n) for d in (fork, up) for n in d.get("rows", {})})
    if lives:
        md += ["| live mappings | fork: median pair (us) | fork: pairs/s | "
               "upstream: median pair (us) | upstream: pairs/s | "
               "upstream: QEMU CPU a pair (us) | upstream: back-end a pair (us) |",
               "|---|---|---|---|---|---|---|"]
        for n in lives:
            f = fork.get("rows", {}).get(n)
            u = up.get("rows", {}).get(n)
            md.append(
                f"| {n} | " +
                (f"{f['median_pair_us']:.1f} | {f['pairs_per_s']:.0f}" if f
                 else "- | -") + " | " +
                (f"{u['median_pair_us']:.1f} | {u['pairs_per_s']:.0f} | "
                 f"{u['qemu_cpu_us']:.1f} | {u['backend_us']:.1f}" if u
                 else "- | - | - | -") + " |")
        md.append("")
    for label, d in (("upstream", up), ("fork", fork)):
        if d.get("qemu"):
            md.append(f"- {label}: {d['qemu']}")
        s = d.get("slow")
        if s:
            md.append(f"- {label}: a pair past {SHMEM_SLOW_MS} ms: " +
                      (f"at {s['live']} live ({s['text']})"
                       if s["status"] == "reached" else
                       f"not reached up to {s['live']} live"))
        lim = d.get("limit")
        if lim:
            md.append(f"- {label}: live-mapping limit: " +
                      (f"{lim['live']} live, the next map failed: {lim['text']}"
                       if lim["status"] == "failed" else
                       f"{lim['status']} at {lim['live']} live: {lim['text']}"))
        if d.get("fill"):
            md.append(f"- {label}: one map while filling the window: " +
                      ", ".join(f"{n} live {ms:.1f} ms"
                                for n, ms in sorted(
                                    (int(k), v) for k, v in d["fill"].items())))
    if not (fork or up):
        md.append("- not measured")
    md.append("")
    return md


def map_targets(mu):
    """The window's target: map+unmap costs the same however full it is."""
    a, b = (mu.get(n, {}).get("pairs_per_s") for n in (MAP_LIVE[1], MAP_LIVE[0]))
    if a is None or not b:
        return [("cache window map+unmap: 8192 live within 20% of 1 live",
                 False, "not measured")]
    return [("cache window map+unmap: 8192 live within 20% of 1 live",
             a >= 0.8 * b, f"{a:.0f} vs {b:.0f} pairs/s")]


def summarize(vals):
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals),
            "runs": vals}


def setup_info(args, confs):
    def out(cmd):
        try:
            return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return "unavailable"
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = re.search(r"model name\s*:\s*(.*)", f.read()).group(1)
    except (OSError, AttributeError):
        pass
    accel = os.environ.get("VFSDAX_ACCEL") or "auto (see vm.py; TCG unless KVM boots)"
    rust = os.path.join(os.path.expanduser("~"), ".cache", "virtiofs-dax",
                        "rust-virtiofsd", "bin", "virtiofsd")
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "qemu": out([QEMU, "--version"]).splitlines()[0],
        "qemu_source": open(os.path.join(BUILD, "qemu-source.txt")).readline().strip()
            if os.path.exists(os.path.join(BUILD, "qemu-source.txt")) else "",
        # "VERSION (PACKAGE)", then "release: NAME": one line here
        "kernel": ", ".join(ln.strip() for ln in open(
            os.path.join(os.environ.get("GUEST_DIR") or
                         os.path.join(BUILD, "guest"), "kernel.txt"))
            if ln.strip()),
        "accelerator": accel, "host_cpu": cpu, "host_kernel": platform.release(),
        "guest": f"2 vCPUs, {GUEST_MEM} memory-backend-memfd share=on, -machine pc",
        "host_dir": "tmpfs (/dev/shm)",
        "data_set": f"{FILE_COUNT} x {FILE_SIZE // MiB} MiB files; every fio "
                    "workload touches all of them: one job spreads its I/O over "
                    f"the {FILE_COUNT} files, multi's jobs (one per vCPU) take "
                    "an equal share each",
        "fio": f"bs=4k, runtime {args.runtime}s per run, libaio iodepth 16",
        "mode": "quick (make bench QUICK=1)" if args.quick else "full",
        "runs": args.runs, "rounds": args.rounds,
        "metadata_n": args.meta_n,
        "windows": {"big": WINDOW_BIG, "half": WINDOW_HALF},
        "daemons": {"rust": out([rust, "--version"]),
                    "ours": out([OURS, "--version"]) if os.path.exists(OURS) else "not built"},
        "configurations": {k: v[2] for k, v in confs.items()},
    }


def targets(res):
    """The issue's targets, each met or not, from one run's figures."""
    t = []

    def med(c, w):
        r = res.get(c, {}).get(w)
        return r["median"] if r else None

    def spread(c, w):
        r = res.get(c, {}).get(w)
        return (r["min"], r["max"]) if r else (0, 0)

    def add(name, a_conf, b_conf, w, factor, fig):
        """A miss whose runs overlap (a's best run reaches the target set by
        b's worst) cannot be told from noise: say so, still as a miss."""
        a, b = med(a_conf, w), med(b_conf, w)
        ok = a >= factor * b
        close = not ok and spread(a_conf, w)[1] >= factor * spread(b_conf, w)[0]
        t.append((name, ok, fig + (", within the runs' spread" if close else "")))
    rows = sorted({w for c in res.values() for w in c})
    for w in rows:
        unit = "ops/s" if w in METADATA else "MiB/s"
        if w not in METADATA and ("-psync" in w or "-mmap" in w):
            for mode in ("never", "auto", "always"):
                a, b = med(f"dax-{mode}-big", w), med("tmpfs", w)
                if a is not None and b:
                    add(f"DAX {mode} big window >= 0.9x tmpfs: {w}",
                        f"dax-{mode}-big", "tmpfs", w, 0.9,
                        f"{a:.1f} vs {b:.1f} MiB/s")
        for mode in ("never", "auto", "always"):
            a, b = med(f"dax-{mode}-half", w), med(f"ours-{mode}", w)
            if a is not None and b is not None:
                add(f"DAX {mode} half window >= ours without DAX: {w}",
                    f"dax-{mode}-half", f"ours-{mode}", w, 1,
                    f"{a:.1f} vs {b:.1f} {unit}")
            a, b = med(f"ours-{mode}", w), med(f"rust-{mode}", w)
            if a is not None and b is not None:
                add(f"ours >= Rust virtiofsd, cache={mode}: {w}",
                    f"ours-{mode}", f"rust-{mode}", w, 1,
                    f"{a:.1f} vs {b:.1f} {unit}")
    a, b = med("ours-auto", "negstat"), med("rust-auto", "negstat")
    if a is not None and b:
        t.append(("negative stat, cache=auto: ours >= 10x Rust", a >= 10 * b,
                  f"{a:.0f} vs {b:.0f} stat/s"))
    return t


def json_keys(d):
    """Live counts as JSON object keys (strings), as the file keeps them."""
    if isinstance(d, dict):
        return {str(k): json_keys(v) for k, v in d.items()}
    return d


def write_reports(out, setup, res, mu, errors, confs, ib=None, sh=None):
    os.makedirs(out, exist_ok=True)
    sh = sh or {}
    tg = targets(res) + map_targets(mu)
    ib = ib or {}
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"setup": setup, "results": res, "errors": errors,
                   "map_unmap": {str(n): v for n, v in mu.items()},
                   "inodes": ib,
                   "map_unmap_upstream": json_keys(sh),
                   "targets": [{"target": a, "met": b, "figures": c}
                               for a, b, c in tg]}, f, indent=1, sort_keys=True)
    names = [c for c in confs if c in res]
    rows = sorted({w for c in res.values() for w in c},
                  key=lambda w: (w in METADATA, w))
    md = ["# virtio-fs benchmarks", "",
          f"Run {setup['date']} with `make bench`. Setup:", ""]
    for k in ("mode", "qemu", "qemu_source", "kernel", "accelerator", "host_cpu", "guest",
              "host_dir", "data_set", "fio", "runs", "metadata_n"):
        md.append(f"- {k}: {setup.get(k, 'not recorded')}")
    md.append(f"- daemons: {setup['daemons']}")
    md.append(f"- windows: big {WINDOW_BIG}, half {WINDOW_HALF}")
    if setup.get("baseline"):
        b = setup["baseline"]
        md.append(f"- baseline: {b['label']} ({b['binary']})")
    rounds = setup.get("rounds", 1)
    runs = f"{setup['runs']} runs" if rounds == 1 else \
        f"{rounds} alternating rounds of {setup['runs']} run(s)"
    md += ["", "Figures: median MiB/s (fio) or operations/s (metadata) of "
           f"{runs}, [min-max]. 0 means the configuration "
           "cannot do it (e.g. mmap without a page cache).", ""]
    md.append("| workload | " + " | ".join(names) + " |")
    md.append("|---|" + "---|" * len(names))
    for w in rows:
        cells = []
        for c in names:
            r = res[c].get(w)
            cells.append("-" if r is None else
                         f"{r['median']:.1f} [{r['min']:.0f}-{r['max']:.0f}]")
        md.append(f"| {w} | " + " | ".join(cells) + " |")
    md += ["", "## Cache window map+unmap", "",
           f"`{os.path.basename(FS_QTEST)} -m perf -p {MAP_BENCH}`: its "
           "back-end maps and unmaps one 2 MiB range of a 16 GiB window, "
           "with nothing else mapped and with 8191 other mappings live, in "
           "alternating rounds; pairs/s is from the median pair time (the "
           "median over the rounds), throughput from whole blocks, which "
           "other processes on the machine slow down.", ""]
    if mu:
        md += ["| live mappings | median pair (us) | pairs/s | throughput (pairs/s) |",
               "|---|---|---|---|"]
        md += [f"| {n} | {v['median_pair_us']:.1f} | {v['pairs_per_s']:.0f} | "
               f"{v['throughput']:.0f} |" for n, v in sorted(mu.items())]
        md.append("")
    md += [f"- {'met' if ok else '**missed**'}: {a} ({fig})"
           for a, ok, fig in map_targets(mu)]
    md += baseline.lines(
        [(w, cur, res[cur].get(w), res[twin].get(w), False,
          " ops/s" if w in METADATA else " MiB/s")
         for cur, twin in baseline.pairs(names) for w in rows],
        setup.get("configurations", {}))
    md.append("")
    md += inode_report(ib)
    md += shmem_lines(sh)
    md += ["## Configurations", ""]
    md += [f"- `{c}`: {confs[c][2]}" for c in names]
    md += ["", "## Targets", "",
           "A miss marked \"within the runs' spread\" is one where the "
           "better run of the lagging configuration reached the target: "
           "the medians differ, the runs cannot tell them apart.", "",
           "| target | rows | met | missed within spread | missed |",
           "|---|---|---|---|---|"]
    groups = {}
    for a, ok, fig in tg:
        head, _, tail = a.rpartition(": ")
        g = groups.setdefault(head if tail in rows else a, [0, 0, 0, 0])
        g[0] += 1
        g[1 if ok else 2 if "spread" in fig else 3] += 1
    md += [f"| {g} | {n[0]} | {n[1]} | {n[2]} | {n[3]} |"
           for g, n in groups.items()]
    md.append("")
    md += [f"- {'met' if ok else '**missed**'}: {a} ({fig})" for a, ok, fig in tg]
    if errors:
        md += ["", "## Errors reported by the runs", ""]
        md += [f"- {e}" for e in errors]
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    chart(out, names, [w for w in rows if w not in METADATA], res)


def chart(out, names, rows, res):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("bench: matplotlib is missing, no chart (pip install matplotlib)",
              file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(max(10, len(rows) * 0.9), 6))
    width = 0.8 / max(1, len(names))
    for i, c in enumerate(names):
        vals = [res[c].get(w, {}).get("median", 0) if res[c].get(w) else 0 for w in rows]
        ax.bar([x + i * width for x in range(len(rows))], vals, width, label=c)
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(rows))])
    ax.set_xticklabels(rows, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("MiB/s (median)")
    ax.set_title("fio 4k, throughput per workload and configuration")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "results.png"), dpi=100)


def rewrite_reports(path, out):
    with open(path) as f:
        old = json.load(f)
    res, setup = old["results"], old["setup"]
    mu = {int(n): v for n, v in old.get("map_unmap", {}).items()}
    sh = {}
    for fe, d in old.get("map_unmap_upstream", {}).items():
        sh[fe] = dict(d)
        for k in ("rows", "fill"):
            if k in d:
                sh[fe][k] = {int(n): v for n, v in d[k].items()}
    described = configurations()
    # The JSON's keys are sorted; the tables read better in the order the
    # configurations are defined (upper bound, 9p, Rust, ours, DAX).
    ran = setup["configurations"]
    order = baseline.order([c for c in described if c in ran] +
                           sorted(c for c in ran if c not in described))
    confs = {c: described.get(c, ([], "", ran[c])) for c in order}
    write_reports(out, setup, res, mu, old.get("errors", []), confs,
                  old.get("inodes", {}), sh)
    print(f"bench: wrote {out}/results.{{json,md,png}} from {path}")
    return 0


def host_benches(args):
    """The measurements without a guest: (map+unmap, errors, inodes,
    upstream comparison)."""
    print("bench: cache window map+unmap (vhost-user-fs-test)", flush=True)
    mu, errors = map_unmap_bench()
    for n, v in sorted(mu.items()):
        print(f"  {n} live: {v['pairs_per_s']:.0f} map+unmap pairs/s", flush=True)
    print("bench: inodes by fd and by file handle (bench-inodes)", flush=True)
    ib, e = inode_bench()
    errors += e
    for k, v in sorted(ib.items()):
        print(f"  {k}: {v['median_ns']} ns [{v['min_ns']}-{v['max_ns']}]",
              flush=True)
    sh = {}
    if args.shmem:
        for fork in (False, True):
            name = "fork" if fork else "upstream QEMU 11.1"
            print(f"bench: cache window map+unmap through a started device, "
                  f"{name} ({os.path.basename(SHMEM_TOOL)})", flush=True)
            got, e = shmem_bench(fork)
            errors += e
            if got:
                sh["fork" if fork else "upstream"] = got
            for n, v in sorted(got.get("rows", {}).items()):
                print(f"  {n} live: {v['pairs_per_s']:.0f} map+unmap pairs/s "
                      f"(QEMU CPU {v['qemu_cpu_us']:.0f} us a pair)", flush=True)
            for k in ("slow", "limit"):
                if k in got:
                    print(f"  {k}: {got[k]['live']} live: {got[k]['status']}: "
                          f"{got[k]['text']}", flush=True)
    return mu, errors, ib, sh


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="fewer configurations and workloads, short runs")
    ap.add_argument("--runs", type=int, help="runs of each workload in "
                    "one guest")
    ap.add_argument("--rounds", type=int, default=1,
                    help="guests per configuration, the configurations "
                         "alternating round by round; figures pool them")
    ap.add_argument("--runtime", type=int)
    ap.add_argument("--meta-n", type=int)
    ap.add_argument("--configs", help="comma-separated configuration names "
                    "(none: only the map+unmap figures)")
    ap.add_argument("--workloads", help="comma-separated rows to run "
                    "(e.g. randread-psync,create; default: all)")
    ap.add_argument("--guests-only", action="store_true",
                    help="leave out the measurements without a guest "
                         "(map+unmap, inodes, upstream comparison)")
    baseline.add_arguments(ap)
    ap.add_argument("--out", default=os.path.join(TOP, "docs", "benchmarks"))
    ap.add_argument("--no-shmem", dest="shmem", action="store_false",
                    help="leave out the map+unmap comparison with upstream "
                         "QEMU 11.1 (bench/upstream_shmem.py)")
    ap.add_argument("--report", metavar="JSON",
                    help="measure nothing: write the reports again from the "
                         "figures of an earlier run (e.g. after the targets "
                         "changed)")
    args = ap.parse_args()
    if args.report:
        return rewrite_reports(args.report, args.out)
    args.runs = args.runs or (1 if args.quick else 3)
    args.runtime = args.runtime or (2 if args.quick else 5)
    args.meta_n = args.meta_n or (2000 if args.quick else 10000)

    confs = configurations()
    chosen = args.configs.split(",") if args.configs else \
        (QUICK_CONFIGS if args.quick else list(confs))
    if args.configs == "none":
        chosen = []     # the guest-less map+unmap figures alone
    for c in chosen:
        if c not in confs:
            ap.error(f"unknown configuration {c}; known: {', '.join(confs)}")
    if not os.path.exists(OURS):
        missing = [c for c in chosen if "--daemon" in confs[c][0] and
                   confs[c][0][confs[c][0].index("--daemon") + 1] == "ours"]
        if missing:
            print(f"bench: our virtiofsd is not built; these configurations will "
                  f"report 0: {', '.join(missing)}", file=sys.stderr)
    base, confs, chosen = baseline.from_args(ap, args, confs, chosen)
    confs = {c: confs[c] for c in chosen}
    wls = workloads(args.quick)
    if args.workloads:
        names = args.workloads.split(",")
        known = [wl_name(w) for w in wls]
        for n in names:
            if n not in known:
                ap.error(f"unknown workload {n}; known: {', '.join(known)}")
        wls = [w for w in wls if wl_name(w) in names]
    per_wl = args.runs * (args.runtime + 2)
    args.config_timeout = 120 + len(wls) * args.runs * (args.runtime + 60)

    shared = tempfile.mkdtemp(prefix="vfsdax-bench-", dir="/dev/shm")
    os.makedirs(os.path.join(shared, "bench"))
    # Real data, not holes: a sparse file would read faster than any file.
    block = bytes(range(256)) * (MiB // 256)
    for i in range(FILE_COUNT):
        with open(os.path.join(shared, "bench", f"f{i}"), "wb") as f:
            for _ in range(FILE_SIZE // MiB):
                f.write(block)
    total = len(confs) * len(wls) * args.rounds
    done = [0]
    t0 = time.monotonic()

    def progress(conf, wl):
        done[0] += 1
        el = time.monotonic() - t0
        eta = el / done[0] * (total * args.runs - done[0])
        print(f"[{done[0]}/{total * args.runs}] {conf}: {wl} "
              f"(elapsed {el / 60:.1f} min, about {eta / 60:.1f} min left)",
              flush=True)

    res, errors, mu, ib, sh = {}, [], {}, {}, {}
    if not args.guests_only:
        mu, errors, ib, sh = host_benches(args)
    try:
        print(f"bench: {len(confs)} configurations x {len(wls)} workloads x "
              f"{args.runs} runs x {args.rounds} round(s) "
              f"(~{total * per_wl / 60:.0f} min of measurement)", flush=True)
        raw = {name: {} for name in confs}
        for rnd in range(args.rounds):
            for name, conf in confs.items():
                print(f"bench: round {rnd + 1}: configuration {name}: "
                      f"{conf[2]}", flush=True)
                r, e = run_config(name, conf, wls, args, shared, progress)
                for w, v in r.items():
                    raw[name].setdefault(w, []).extend(v)
                errors += [f"{name}: " + (f"round {rnd + 1}: "
                                          if args.rounds > 1 else "") + x
                           for x in e]
                # Each configuration starts from the same files.
                for d in os.listdir(shared):
                    if d != "bench":
                        shutil.rmtree(os.path.join(shared, d),
                                      ignore_errors=True)
        for name in confs:
            res[name] = {w: summarize(v) for w, v in raw[name].items()}
            for w in wls:
                if wl_name(w) not in res[name]:
                    res[name][wl_name(w)] = summarize([0.0])
    finally:
        shutil.rmtree(shared, ignore_errors=True)
    setup = setup_info(args, confs)
    if base:
        setup["baseline"] = base
    write_reports(args.out, setup, res, mu, errors, confs, ib, sh)
    print(f"bench: wrote {args.out}/results.{{json,md,png}}")
    for a, ok, fig in targets(res) + map_targets(mu):
        print(f"  {'met   ' if ok else 'MISSED'} {a} ({fig})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

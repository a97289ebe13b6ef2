#!/usr/bin/env python3
"""make bench-memory (and make bench): what reading a large file costs in
memory, guest and host, with and without the DAX window.

Without a window a file the guest reads is copied into the guest's page
cache, which is guest RAM, which is QEMU's memory: a second copy of data
the host already holds in its own page cache.  With the window the guest
maps the host's pages instead and its page cache should not grow at all.
This measures it: a guest reads a FILE_MIB MiB file from the share once
(cat to /dev/null, caches dropped before), and before and after the read

    the guest     Cached in /proc/meminfo (its page cache)
    QEMU          its guest RAM resident (the memfd backend, from smaps:
                  the second copy, if any, is there), VmRSS and its parts
                  RssAnon, RssFile, RssShmem (window pages of a file on
                  the host's tmpfs count as RssShmem, though they are the
                  host's own copy, not a second one)
    the daemon    RssAnon, its own memory, and RssShmem, the guest RAM
                  it wrote the data into (the same pages as QEMU's guest
                  RAM, not a copy of their own); with its sandbox's child

are sampled, the host's at the moment the guest asks (a step file on the
share).  Configurations: ours cache=auto without a window, with a 1 GiB
window mounted dax=always and dax=inode (the default --dax-policy maps
files of 2 MiB and more), the Rust virtiofsd 1.14 (cache=auto) and 9p
cache=loose.  Each figure is the median of --rounds alternating rounds.

Results: docs/benchmarks/memory.json and memory.md.

    bench/memory.py [--rounds N] [--configs a,b,...] [--out DIR]
"""

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VM = os.path.join(TOP, "harness", "vm.py")
FILE_MIB = 512
GUEST_MEM = "2G"
WINDOW = "1G"
VFS = "mount -t virtiofs $VFS_TAG /mnt"
QEMU_FIELDS = ("VmRSS", "RssAnon", "RssFile", "RssShmem")


def configurations():
    """name -> (vm.py arguments, guest mount command, description)"""
    c = {
        "ours-auto": (["--daemon", "ours", "--cache-mode", "auto"], VFS,
                      "our virtiofsd cache=auto, no window"),
    }
    for mnt in ("always", "inode"):
        c[f"ours-auto-dax-{mnt}"] = (
            ["--daemon", "ours", "--cache-mode", "auto",
             "--cache-size", WINDOW], VFS + f" -o dax={mnt}",
            f"our virtiofsd cache=auto, {WINDOW} window, dax={mnt}")
    c["rust-auto"] = (["--daemon", "rust", "--cache-mode", "auto"], VFS,
                      "Rust virtiofsd 1.14 cache=auto")
    c["9p-loose"] = (["--daemon", "none", "--p9", "@SHARED@"],
                     "mount -t 9p -o trans=virtio,version=9p2000.L,"
                     "msize=512000,cache=loose p9 /mnt",
                     "virtio-9p cache=loose")
    return c


GUEST = r"""
. /lib/vfsdax.sh
mkdir -p /mnt
MOUNT || fail "mount"
cached() { awk '/^Cached:/ { print $2 }' /proc/meminfo; }
# ask_host N: the host samples QEMU and the daemon, then answers
ask_host() {
    touch /mnt/.ask-$1
    i=0
    while [ ! -e /mnt/.done-$1 ]; do
        i=$((i + 1)); [ $i -gt 600 ] && fail "the host never answered"
        sleep 0.1
    done
}
sync
echo 3 > /proc/sys/vm/drop_caches
c0=$(cached)
ask_host 1
t0=$(cut -d' ' -f1 /proc/uptime)
cat /mnt/data > /dev/null || fail "reading the file"
t1=$(cut -d' ' -f1 /proc/uptime)
c1=$(cached)
ask_host 2
echo "MEM $c0 $c1 $(awk -v a=$t0 -v b=$t1 'BEGIN { print b - a }')"
grep -q " /mnt .*dax" /proc/self/mountinfo && echo "DAX mounted"
umount /mnt || fail "umount"
pass "read"
"""


def proc_status(pid):
    """{field: kB} of /proc/PID/status for QEMU_FIELDS; {} if gone"""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in QEMU_FIELDS:
                    out[k] = int(v.split()[0])
    except OSError:
        pass
    return out


def guest_ram_rss(pid):
    """kB of QEMU's guest RAM (the memory-backend-memfd) resident"""
    kb, inside = 0, False
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                first = line.split(None, 1)[0]
                if "-" in first and not first.endswith(":"):
                    inside = "memfd:memory-backend-memfd" in line
                elif inside and first == "Rss:":
                    kb += int(line.split()[1])
    except OSError:
        pass
    return kb


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def sample(state):
    """QEMU's status fields and the daemon's VmRSS (its children too)"""
    def pid(name):
        try:
            with open(os.path.join(state, name)) as f:
                return int(f.read())
        except (OSError, ValueError):
            return None
    q, d = pid("qemu.pid"), pid("daemon.pid")
    s = {f"qemu {k}": v for k, v in proc_status(q).items()} if q else {}
    if q:
        s["qemu guest RAM"] = guest_ram_rss(q)
    if d:
        for k in ("RssAnon", "RssShmem"):
            s[f"daemon {k}"] = sum(proc_status(p).get(k, 0)
                                   for p in [d] + children(d))
    return s


def answer_steps(shared, state, samples, stop):
    """Answer the guest's .ask-N with a sample, as .done-N"""
    n = 1
    while not stop.is_set() and n <= 2:
        if os.path.exists(os.path.join(shared, f".ask-{n}")):
            samples[n] = sample(state)
            open(os.path.join(shared, f".done-{n}"), "w").close()
            n += 1
        else:
            time.sleep(0.05)


def make_data(path):
    chunk = os.urandom(1 << 20)
    with open(path, "wb") as f:
        for _ in range(FILE_MIB):
            f.write(chunk)


def run_one(name, conf, work, data, timeout):
    vm_args, mount, _ = conf
    shared = os.path.join(work, "share")
    shutil.rmtree(shared, ignore_errors=True)
    os.makedirs(shared)
    os.link(data, os.path.join(shared, "data"))
    state = os.path.join(work, "state-" + name)
    shutil.rmtree(state, ignore_errors=True)
    script = os.path.join(work, "guest.sh")
    with open(script, "w") as f:
        f.write(GUEST.replace("MOUNT", mount))
    args = [a.replace("@SHARED@", shared) for a in vm_args]
    cmd = [sys.executable, VM, "--quiet", "--mem", GUEST_MEM,
           "--shared", shared, "--state-dir", state,
           "--timeout", str(timeout)] + args + [script]
    samples, stop = {}, threading.Event()
    t = threading.Thread(target=answer_steps,
                         args=(shared, state, samples, stop))
    t.start()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    finally:
        stop.set()
        t.join()
    res, errors = {}, []
    for line in p.stdout.splitlines():
        f = line.split()
        if f[:1] == ["MEM"] and len(f) == 4:
            res["guest Cached"] = int(f[2]) - int(f[1])
            res["read s"] = float(f[3])
    res["dax"] = "DAX mounted" in p.stdout
    if p.returncode != 0 or "read s" not in res or len(samples) != 2:
        errors.append(f"{name}: guest run failed ({p.returncode}): "
                      f"{(p.stdout + p.stderr).strip()[-400:]}")
        return {}, errors
    for k in samples[2]:
        if k in samples[1]:
            res[k] = samples[2][k] - samples[1][k]
    res["after"] = samples[2]
    return res, errors


def main():
    ap = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--configs", help="comma-separated configuration names")
    ap.add_argument("--out", default=os.path.join(TOP, "docs", "benchmarks"))
    ap.add_argument("--timeout", type=int, default=600)
    args = ap.parse_args()
    confs = configurations()
    chosen = args.configs.split(",") if args.configs else list(confs)
    for c in chosen:
        if c not in confs:
            ap.error(f"unknown configuration {c}; known: {', '.join(confs)}")
    work = tempfile.mkdtemp(prefix="vfsdax-mem-", dir="/dev/shm")
    raw = {c: [] for c in chosen}
    errors = []
    try:
        data = os.path.join(work, "data")
        make_data(data)
        total, n = args.rounds * len(chosen), 0
        for r in range(args.rounds):
            for c in chosen:
                n += 1
                print(f"[{n}/{total}] round {r + 1}: {c}: {confs[c][2]}",
                      flush=True)
                res, e = run_one(c, confs[c], work, data, args.timeout)
                errors += e
                if res:
                    raw[c].append(res)
                    print("    " + ", ".join(
                        f"{k} {v}" for k, v in res.items() if k != "after"),
                        flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    keys = ["guest Cached", "qemu guest RAM", "qemu VmRSS", "qemu RssAnon",
            "qemu RssFile", "qemu RssShmem", "daemon RssAnon",
            "daemon RssShmem", "read s"]
    res = {}
    for c in chosen:
        res[c] = {"runs": raw[c], "description": confs[c][2]}
        for k in keys:
            vals = [r[k] for r in raw[c] if k in r]
            if vals:
                res[c][k] = {"median": statistics.median(vals),
                             "min": min(vals), "max": max(vals)}
    setup = {
        "date": datetime.datetime.now(datetime.timezone.utc)
        .isoformat(timespec="seconds"),
        "file": f"{FILE_MIB} MiB of random data on the host's /dev/shm",
        "guest": f"2 vCPUs, {GUEST_MEM}, TCG unless KVM boots (vm.py)",
        "rounds": args.rounds,
    }
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "memory.json"), "w") as f:
        json.dump({"setup": setup, "results": res, "errors": errors}, f,
                  indent=1)
    lines = ["# Memory: one read of a large file", "",
             f"{setup['date']}; {setup['file']}, read once with cat after "
             f"the guest dropped its caches; {setup['guest']}; "
             f"{setup['rounds']} alternating rounds; growth during the read "
             "in MiB (the read in seconds), median [min-max].", "",
             "| | " + " | ".join(chosen) + " |",
             "|---|" + "---|" * len(chosen)]
    for k in keys:
        row = ["read (s)" if k == "read s" else k + " (MiB)"]
        for c in chosen:
            s = res[c].get(k)
            if not s:
                row.append("-")
            elif k == "read s":
                row.append(f"{s['median']:.2f} [{s['min']:.2f}-"
                           f"{s['max']:.2f}]")
            else:
                row.append(f"{s['median'] / 1024:.0f} [{s['min'] / 1024:.0f}"
                           f"-{s['max'] / 1024:.0f}]")
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "With the window, QEMU's RssShmem grows by the file's "
              "pages it maps, which are the host's own copy (the file is "
              "on the host's tmpfs), not a second one; guest RAM is what "
              "a second copy takes.  The daemon's RssShmem is the guest "
              "RAM it wrote the data into, the same pages as QEMU's.", "",
              "The window's promise, checked:", ""]
    for c in chosen:
        s = res[c].get("guest Cached")
        if not s:
            continue
        dax = all(r.get("dax") for r in raw[c])
        grew = s["median"] / 1024
        if dax:
            ok = grew < FILE_MIB / 8
            lines.append(f"- {'met' if ok else 'MISSED'}: {c}: the guest's "
                         f"page cache grew by {grew:.0f} MiB for a "
                         f"{FILE_MIB} MiB file (no second copy: at most "
                         f"{FILE_MIB // 8})")
        else:
            lines.append(f"- {c} (no window): the guest's page cache grew "
                         f"by {grew:.0f} MiB for a {FILE_MIB} MiB file")
    if errors:
        lines += ["", "Errors:", ""] + [f"- {e}" for e in errors]
    with open(os.path.join(args.out, "memory.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"bench: wrote {args.out}/memory.{{json,md}}")
    for e in errors:
        print(f"  error: {e}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

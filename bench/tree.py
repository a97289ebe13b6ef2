#!/usr/bin/env python3
"""make bench-tree (and make bench): a developer's source tree on each
kind of guest storage, side by side in one run.

The tree is QEMU's hw/, include/ and docs/ from build/src (the source this
project builds), as a tar the guest first copies into its own memory.
The guest unpacks it onto the storage under test, then walks, lists,
greps, copies and deletes it, each step timed in the guest:

    tar x          unpack (create, write, close, chmod, utimes per file)
    find           a walk of names
    ls -lR cold    an lstat walk after the guest dropped its caches
    ls -lR again   the same at once, within cache=auto's 1 s timeout
    ls -lR later   the same 2 s later, past that timeout (git status's
                   pattern: the same tree stat'ed again and again)
    grep -r        every file read once
    cp -a          a copy within the storage
    rm -rf         both trees deleted

then, outside the tree's total:

    create 1000     create and unlink 1000 files (metabench)
    smallread 1000  open, read and close 1000 files of 4 KiB, caches
                    dropped first (metabench)
    build-like 300  300 times: write an object file, read it back,
                    rename it into place
    walk 50k        ls -lR of a tree of 50,250 entries (250 directories
                    of 200 empty files) laid out on the host (in the
                    share, or in the ext4 image; tmpfs unpacks it, not
                    timed): cold, again at once, again 2 s later

Configurations: the guest's tmpfs; ext4 on a virtio-blk disk inside the
guest (what a user compares a share against; the image lies on the
host's /dev/shm, as the shares do); virtio-9p cache=loose; the Rust
virtiofsd 1.14 (cache=auto); ours with cache=never, auto and always; and
ours (cache=auto) with a 1 GiB DAX window mounted dax=always, dax=inode
(the default --dax-policy: files of 2 MiB and more), dax=inode with
--dax-policy=exec (programs, ELF objects, files of 2 MiB and more) and
dax=inode with
every file in the window.  Each configuration boots one guest for the
tree and one for the rest.  Rounds alternate the configurations (round 1
runs each once, then round 2...), so that a slow spell of the machine
spreads over all of them.  Each figure is the median of --rounds, with
min and max.  For our daemon, --stats gives the requests it served per
tree entry during the tree's guest, by opcode, with its mean time per
request: every figure can be read against its round trips.

Results: docs/benchmarks/tree.json and tree.md, with the issue's targets
(ratios against guest ext4 and the Rust virtiofsd) marked met or missed.

--baseline-virtiofsd PATH (or BASELINE_VIRTIOFSD) runs another build of
our daemon beside the current one: each chosen configuration of ours gets
a twin NAME-baseline, the same but for the binary, in the same rounds,
and the report compares every step with it (bench/baseline.py).  Write
such a partial run somewhere else than docs/benchmarks (--out).

    bench/tree.py [--rounds N] [--configs a,b,...] [--out DIR] [--tree-only]
                  [--baseline-virtiofsd PATH [--baseline-commit REV]]
    bench/tree.py --report tree.json [--out DIR]
"""

import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

import baseline

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("BUILD", os.path.join(TOP, "build"))
VM = os.path.join(TOP, "harness", "vm.py")
SRC = os.path.join(BUILD, "src")
TREE_DIRS = ("hw", "include", "docs")
GUEST_MEM = "2G"
WINDOW = "1G"
EXT4_SIZE = 2 << 30

STEPS = ["tar x", "find", "ls -lR cold", "ls -lR again", "ls -lR later",
         "grep -r", "cp -a", "rm -rf"]
# After the tree (not in its total): small files one by one, a build's
# write/read/rename, and git status's pattern on a larger tree
WALK_DIRS, WALK_FILES = 250, 200
EXTRA_STEPS = ["create 1000", "smallread 1000", "build-like 300",
               "walk 50k cold", "walk 50k again", "walk 50k later"]
# Opcodes whose per-entry counts the report shows
OPS = ["LOOKUP", "GETATTR", "SETATTR", "CREATE", "MKDIR", "SYMLINK", "OPEN",
       "READ", "WRITE", "FLUSH", "RELEASE", "OPENDIR", "READDIRPLUS",
       "READDIR", "RELEASEDIR", "UNLINK", "RMDIR", "FORGET", "BATCH_FORGET",
       "SETUPMAPPING", "REMOVEMAPPING", "ELF check"]

VFS = "mount -t virtiofs $VFS_TAG /mnt"


def configurations():
    """name -> (vm.py arguments, guest mount command, description)"""
    c = {
        "tmpfs": (["--daemon", "none"],
                  "mount -t tmpfs -o size=1500M tmpfs /mnt",
                  "the guest's own tmpfs (upper bound)"),
        "ext4": (["--daemon", "none", "@EXT4@"],
                 "mount -t ext4 /dev/$(disk ext4) /mnt",
                 "ext4 on a virtio-blk disk in the guest"),
        "9p-loose": (["--daemon", "none", "--p9", "@SHARED@"],
                     "mount -t 9p -o trans=virtio,version=9p2000.L,"
                     "msize=512000,cache=loose p9 /mnt",
                     "virtio-9p cache=loose"),
        "rust-auto": (["--daemon", "rust", "--cache-mode", "auto"], VFS,
                      "Rust virtiofsd 1.14 cache=auto"),
    }
    for mode in ("never", "auto", "always"):
        c[f"ours-{mode}"] = (["--daemon", "ours", "--cache-mode", mode,
                              "--daemon-args=--stats"], VFS,
                             f"our virtiofsd cache={mode}")
    # Inodes by file handle: the default (prefer) holds fds on a share
    # that is a directory of a larger file system, as this one is
    # Timeouts by the time the host left a file alone (1 to 60 s); by
    # handle, as ours-auto-fh, so that the 50k walk fits a low fd limit
    c["ours-adaptive-fh"] = (["--daemon", "ours", "--cache-mode", "adaptive",
                              "--daemon-args=--stats "
                              "--inode-file-handles=mandatory"], VFS,
                             "our virtiofsd cache=adaptive (1:60:0.1), "
                             "inodes by file handle")
    c["ours-auto-fh"] = (["--daemon", "ours", "--cache-mode", "auto",
                          "--daemon-args=--stats "
                          "--inode-file-handles=mandatory"], VFS,
                         "our virtiofsd cache=auto, inodes by file handle")
    # The guest's writeback cache (FUSE_WRITEBACK_CACHE), off by default
    c["ours-auto-wb"] = (["--daemon", "ours", "--cache-mode", "auto",
                          "--daemon-args=--stats --writeback"], VFS,
                         "our virtiofsd cache=auto --writeback")
    for mnt in ("always", "inode"):
        c[f"ours-auto-dax-{mnt}"] = (
            ["--daemon", "ours", "--cache-mode", "auto", "--cache-size",
             WINDOW, "--daemon-args=--stats"], VFS + f" -o dax={mnt}",
            f"our virtiofsd cache=auto, {WINDOW} window, dax={mnt}"
            + (" (default --dax-policy: files of 2 MiB and more)"
               if mnt == "inode" else ""))
    # dax=inode with the window for every file, as dax=always
    c["ours-auto-dax-inode-all"] = (
        ["--daemon", "ours", "--cache-mode", "auto", "--cache-size", WINDOW,
         "--daemon-args=--stats --dax-policy=always"], VFS + " -o dax=inode",
        f"our virtiofsd cache=auto, {WINDOW} window, dax=inode, "
        "--dax-policy=always")
    # The policy for shared roots (docs/benchmarks/density.md): the tree's
    # unpack must not pay for it
    c["ours-auto-dax-inode-exec"] = (
        ["--daemon", "ours", "--cache-mode", "auto", "--cache-size", WINDOW,
         "--daemon-args=--stats --dax-policy=exec"], VFS + " -o dax=inode",
        f"our virtiofsd cache=auto, {WINDOW} window, dax=inode, "
        "--dax-policy=exec")
    return c


def guest_script(mount, part):
    """Times every step of PART ("tree" or "extra"); prints "STEP name
    seconds" and "ENTRIES n"."""
    head, tree, extra = GUEST.split("@@\n")
    return (head + (tree if part == "tree" else extra)).replace("MOUNT",
                                                                mount)


GUEST = r"""
. /lib/vfsdax.sh
# The disk whose serial is $1
disk() {
    for d in /sys/block/vd*; do
        [ "$(cat $d/serial 2>/dev/null)" = "$1" ] && { echo ${d##*/}; return; }
    done
    fail "no virtio-blk disk with serial $1"
}
now() { cut -d' ' -f1 /proc/uptime; }
step() {
    name=$1
    shift
    t0=$(now)
    rc=0
    "$@" > /dev/null 2>/tmp/step.err || rc=$?
    # grep finds nothing: status 1 is its success here
    [ "$name" = "grep -r" ] && [ $rc = 1 ] && rc=0
    [ $rc = 0 ] || fail "$name: status $rc: $(head -c 300 /tmp/step.err)"
    echo "STEP $name $(awk -v a=$t0 -v b=$(now) 'BEGIN { print b - a }')"
}
mkdir -p /mnt
MOUNT || fail "mount"
@@
cat /dev/$(disk tree) > /tmp/tree.tar || fail "reading the tree's tar"
sync
echo 3 > /proc/sys/vm/drop_caches
mkdir /mnt/w || fail "mkdir"
step "tar x" tar xf /tmp/tree.tar -C /mnt/w
echo "ENTRIES $(find /mnt/w | wc -l)"
step find find /mnt/w
sync
echo 3 > /proc/sys/vm/drop_caches
step "ls -lR cold" ls -lR /mnt/w
step "ls -lR again" ls -lR /mnt/w
sleep 2
step "ls -lR later" ls -lR /mnt/w
step "grep -r" grep -r zqxjkvwz-not-there /mnt/w
step "cp -a" cp -a /mnt/w /mnt/w2
step "rm -rf" rm -rf /mnt/w /mnt/w2
umount /mnt || fail "umount"
pass "tree steps done"
@@
for t in create smallread; do
    mkdir /mnt/sf
    out=$(metabench $t /mnt/sf 1000) || fail "metabench $t: $out"
    echo "STEP $t 1000 $(echo $out | cut -d' ' -f3)"
    rm -rf /mnt/sf
done
build_like() {
    mkdir -p $1 || return 1
    i=0
    while [ $i -lt $2 ]; do
        echo "object $i" > $1/f$i.tmp && cat $1/f$i.tmp &&
            mv $1/f$i.tmp $1/f$i.o || return 1
        i=$((i + 1))
    done
}
step "build-like 300" build_like /mnt/b 300
rm -rf /mnt/b
if [ ! -d /mnt/walk ]; then
    tar xf /dev/$(disk walk) -C /mnt || fail "unpacking the walk tree"
fi
sync
echo 3 > /proc/sys/vm/drop_caches
step "walk 50k cold" ls -lR /mnt/walk
step "walk 50k again" ls -lR /mnt/walk
sleep 2
step "walk 50k later" ls -lR /mnt/walk
umount /mnt || fail "umount"
pass "small files, build-like and walk steps done"
"""


def make_tar(work):
    missing = [d for d in TREE_DIRS if not os.path.isdir(os.path.join(SRC, d))]
    if missing:
        sys.exit(f"bench/tree.py: {SRC} lacks {', '.join(missing)}: "
                 f"run make prepare first")
    tar = os.path.join(work, "tree.tar")
    subprocess.run(["tar", "cf", tar, "--owner=0", "--group=0", "-C", SRC,
                    *TREE_DIRS], check=True)
    return tar


def make_walk(work):
    """The walk tree in WORK/walksrc/walk, and as WORK/walk.tar"""
    top = os.path.join(work, "walksrc", "walk")
    for d in range(WALK_DIRS):
        sub = os.path.join(top, f"d{d}")
        os.makedirs(sub)
        for f in range(WALK_FILES):
            open(os.path.join(sub, f"f{f}"), "w").close()
    tar = os.path.join(work, "walk.tar")
    subprocess.run(["tar", "cf", tar, "--owner=0", "--group=0", "-C",
                    os.path.dirname(top), "walk"], check=True)
    return os.path.dirname(top), tar


def make_ext4(work, populate):
    """An empty ext4 image but for POPULATE's content (the walk tree)"""
    img = os.path.join(work, "ext4.img")
    with open(img, "wb") as f:
        f.truncate(EXT4_SIZE)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-d", populate, img],
                   check=True)
    return img


def drive(path, serial, ro):
    return (f"-drive file={path},if=none,id={serial},format=raw"
            f"{',readonly=on' if ro else ''} "
            f"-device virtio-blk-pci,drive={serial},serial={serial}")


def run_one(name, conf, part, tar, walk, work, timeout):
    """One guest running PART of the steps: {step: seconds}, entries,
    {op: requests} (for "tree" only), errors."""
    vm_args, mount, _ = conf
    shared = os.path.join(work, "share")
    shutil.rmtree(shared, ignore_errors=True)
    os.makedirs(shared)
    walksrc, walktar = walk
    qargs = drive(tar, "tree", True) + " " + drive(walktar, "walk", True)
    args = []
    for a in vm_args:
        if a == "@EXT4@":
            qargs += " " + drive(make_ext4(work, walksrc), "ext4", False)
        else:
            args.append(a.replace("@SHARED@", shared))
    lent = "--daemon" in vm_args and \
        vm_args[vm_args.index("--daemon") + 1] != "none" or "--p9" in vm_args
    if lent:
        # The share holds the walk tree, moved in: a rename changes the
        # ctime of its top directory only, so that its files stay as old
        # as the run (a tree checked out a while ago, as git status finds
        # it; --cache=adaptive caches by that age).  Only read there.
        os.rename(os.path.join(walksrc, "walk"),
                  os.path.join(shared, "walk"))
    try:
        return run_guest(name, vm_args, mount, part, work, qargs, args,
                         shared, timeout)
    finally:
        if lent:
            os.rename(os.path.join(shared, "walk"),
                      os.path.join(walksrc, "walk"))


def run_guest(name, vm_args, mount, part, work, qargs, args, shared,
              timeout):
    logdir = os.path.join(work, "log-" + name)
    shutil.rmtree(logdir, ignore_errors=True)
    script = os.path.join(work, "guest.sh")
    with open(script, "w") as f:
        f.write(guest_script(mount, part))
    cmd = [sys.executable, VM, "--quiet", "--mem", GUEST_MEM,
           "--shared", shared, "--log-dir", logdir, "--timeout", str(timeout),
           "--env", "VFSDAX_MODULES=1", f"--qemu-args={qargs}"] + args + \
        [script]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    steps, entries, errors = {}, 0, []
    for line in p.stdout.splitlines():
        m = re.match(r"^STEP (.+) ([0-9.]+)$", line.strip())
        if m:
            steps[m.group(1)] = float(m.group(2))
        m = re.match(r"^ENTRIES (\d+)$", line.strip())
        if m:
            entries = int(m.group(1))
    if p.returncode != 0:
        errors.append(f"{name}: guest run failed ({p.returncode}): "
                      f"{(p.stdout + p.stderr).strip()[-400:]}")
    ops = {}
    dlog = os.path.join(logdir, "virtiofsd.log")
    if part == "tree" and os.path.exists(dlog) and \
            any(a.startswith("--daemon-args=--stats") for a in vm_args):
        with open(dlog) as f:
            for line in f:
                # Opcodes, and the exec policy's looks at files' heads
                m = re.search(r"stats: ([A-Z_]+|ELF check)(?: \(.*\))?: "
                              r"(\d+) requests, mean ([0-9.]+) us", line)
                if m:
                    ops[m.group(1)] = int(m.group(2))
                    ops[m.group(1) + " us"] = float(m.group(3))
        if not ops:
            errors.append(f"{name}: no --stats report in {dlog}")
    return steps, entries, ops, errors


def add_total(steps):
    """Put the tree steps' total into STEPS (a round's {step: seconds});
    None, or what is wrong when a tree step is missing: a step that did
    not run must not count as 0 s, so such a round has no total."""
    missing = [s for s in STEPS if s not in steps]
    if missing:
        return "no total: tree steps missing: " + ", ".join(missing)
    steps["total"] = sum(steps[s] for s in STEPS)
    return None


def tree_sum(res, conf):
    """The sum of CONF's tree step medians; None when CONF did not run,
    "missing" when it ran without every step."""
    if conf not in res:
        return None
    meds = [med(res, conf, s) for s in STEPS]
    return "missing" if any(m is None for m in meds) else sum(meds)


def summarize(vals):
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals),
            "max": max(vals), "runs": vals}


def med(res, conf, step):
    s = res.get(conf, {}).get("steps", {}).get(step)
    return s["median"] if s else None


def targets(res):
    """(what, met, figures) for the issue's targets that this run covers"""
    t = []
    for step in ("tar x", "cp -a", "rm -rf"):
        ours, ext4, rust = (med(res, c, step)
                            for c in ("ours-auto", "ext4", "rust-auto"))
        if ours and ext4:
            t.append((f"{step}: ours (cache=auto) at most 3x guest ext4",
                      ours <= 3 * ext4, f"{ours / ext4:.2f}x"))
        if ours and rust:
            t.append((f"{step}: ours at least 2x faster than Rust 1.14",
                      rust >= 2 * ours, f"{rust / ours:.2f}x faster"))
    for step in ("ls -lR again", "walk 50k again", "walk 50k later"):
        for conf in ("ours-auto", "ours-auto-fh", "ours-adaptive-fh"):
            ours, ext4 = med(res, conf, step), med(res, "ext4", step)
            if ours and ext4:
                t.append((f"repeated walk ({step}, {conf}): within 2x of "
                          "guest ext4", ours <= 2 * ext4,
                          f"{ours / ext4:.2f}x"))
    base = tree_sum(res, "ours-auto")
    for conf in ("ours-auto-dax-always", "ours-auto-dax-inode",
                 "ours-auto-dax-inode-all", "ours-auto-dax-inode-exec"):
        dax = tree_sum(res, conf)
        what = (f"window ({conf}): the tree steps at most 5% slower than "
                "without it")
        if base is None or dax is None:
            continue
        if "missing" in (base, dax):
            # A step that did not run is no figure, and no verdict
            t.append((what, False, "tree steps missing in " + " and ".join(
                c for c, v in (("ours-auto", base), (conf, dax))
                if v == "missing")))
        else:
            t.append((what, dax <= 1.05 * base, f"{dax / base:.2f}x"))
    # The exec policy against the default one: unpacking no slower
    for step in ("tar x", "cp -a"):
        exe = med(res, "ours-auto-dax-inode-exec", step)
        dflt = med(res, "ours-auto-dax-inode", step)
        if exe and dflt:
            t.append((f"{step}: --dax-policy=exec at most 5% slower than "
                      "the default policy (dax=inode)", exe <= 1.05 * dflt,
                      f"{exe / dflt:.2f}x"))
    return t


def write_reports(out, setup, res, errors):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "tree.json"), "w") as f:
        json.dump({"setup": setup, "results": res, "errors": errors}, f,
                  indent=1)
    confs = list(res)
    lines = ["# Source tree steps, side by side", "",
             f"{setup['date']}; {setup['tree']}; {setup['guest']}; "
             f"{setup['rounds']} alternating rounds; seconds, median "
             f"[min-max]; host: {setup['host']}.", ""]
    if setup.get("baseline"):
        b = setup["baseline"]
        lines += [f"Baseline: {b['label']} ({b['binary']}).", ""]
    lines += ["| step | " + " | ".join(confs) + " |",
              "|---|" + "---|" * len(confs)]
    for step in STEPS + ["total"] + EXTRA_STEPS:
        row = [step]
        for c in confs:
            s = res[c]["steps"].get(step)
            row.append(f"{s['median']:.2f} [{s['min']:.2f}-{s['max']:.2f}]"
                       if s else "-")
        lines.append("| " + " | ".join(row) + " |")
    daemons = [c for c in confs if res[c].get("ops")]
    if daemons:
        lines += ["", "Requests our virtiofsd served per tree entry during the "
                  "tree steps (its own guest), from --stats:", "",
                  "| opcode | " + " | ".join(daemons) + " |",
                  "|---|" + "---|" * len(daemons)]
        for op in OPS:
            if not any(res[c]["ops"].get(op) for c in daemons):
                continue
            lines.append(f"| {op} | " + " | ".join(
                f"{res[c]['ops'].get(op, 0):.2f}" +
                (f" ({res[c]['ops'][op + ' us']:.0f} us)"
                 if op + " us" in res[c]["ops"] else "")
                for c in daemons) + " |")
        lines += ["", "(in parentheses: the daemon's mean time per request, "
                  "from --stats; the rest of a round trip is the transport "
                  "and the guest)"]
    lines += baseline.lines(
        [(step, cur, res[cur]["steps"].get(step), res[twin]["steps"].get(step),
          True, " s")
         for cur, twin in baseline.pairs(confs)
         for step in STEPS + ["total"] + EXTRA_STEPS],
        setup.get("configurations", {}))
    lines += ["", "Targets (issue 31):", ""]
    for what, ok, fig in targets(res):
        lines.append(f"- {'met' if ok else 'MISSED'}: {what} ({fig})")
    if errors:
        lines += ["", "Errors:", ""] + [f"- {e}" for e in errors]
    with open(os.path.join(out, "tree.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--configs", help="comma-separated configuration names")
    ap.add_argument("--out", default=os.path.join(TOP, "docs", "benchmarks"))
    ap.add_argument("--timeout", type=int, default=900,
                    help="seconds for one guest")
    ap.add_argument("--report", metavar="JSON",
                    help="measure nothing: write tree.md again from the "
                         "figures of an earlier run's tree.json")
    baseline.add_arguments(ap)
    ap.add_argument("--tree-only", action="store_true",
                    help="only the tree's guest: no create, smallread, "
                         "build-like or walk steps")
    args = ap.parse_args()
    if args.report:
        with open(args.report) as f:
            old = json.load(f)
        write_reports(args.out, old["setup"], old["results"], old["errors"])
        return 0
    confs = configurations()
    chosen = args.configs.split(",") if args.configs else list(confs)
    for c in chosen:
        if c not in confs:
            ap.error(f"unknown configuration {c}; known: {', '.join(confs)}")
    base, confs, chosen = baseline.from_args(ap, args, confs, chosen)
    work = tempfile.mkdtemp(prefix="vfsdax-tree-", dir="/dev/shm")
    res = {c: {"steps": {}, "ops": {}} for c in chosen}
    raw = {c: {} for c in chosen}
    ops_raw = {c: [] for c in chosen}
    errors, entries = [], 0
    # Configurations with a round that lacks a tree step: no total
    incomplete = set()
    try:
        tar = make_tar(work)
        walk = make_walk(work)
        total = args.rounds * len(chosen)
        n = 0
        for r in range(args.rounds):
            for c in chosen:
                n += 1
                print(f"[{n}/{total}] round {r + 1}: {c}: {confs[c][2]}",
                      flush=True)
                steps, ent, ops, e = run_one(c, confs[c], "tree", tar,
                                             walk, work, args.timeout)
                if not args.tree_only:
                    more, _, _, e2 = run_one(c, confs[c], "extra", tar, walk,
                                             work, args.timeout)
                    e += e2
                else:
                    more = {}
                errors += e
                entries = entries or ent
                why = add_total(steps)
                if why:
                    errors.append(f"{c}: round {r + 1}: {why}")
                    incomplete.add(c)
                steps.update(more)
                print("    " + ", ".join(f"{k} {v:.2f}"
                                         for k, v in steps.items()),
                      flush=True)
                for k, v in steps.items():
                    raw[c].setdefault(k, []).append(v)
                if ops and ent:
                    ops_raw[c].append({k: v if k.endswith(" us") else v / ent
                                       for k, v in ops.items()})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for c in chosen:
        if c in incomplete:
            raw[c].pop("total", None)
        res[c]["steps"] = {k: summarize(v) for k, v in raw[c].items()}
        if ops_raw[c]:
            res[c]["ops"] = {k: statistics.median(d.get(k, 0)
                                                  for d in ops_raw[c])
                             for k in ops_raw[c][0]}
    setup = {
        "date": datetime.datetime.now(datetime.timezone.utc)
        .isoformat(timespec="seconds"),
        "tree": f"QEMU's {', '.join(TREE_DIRS)} from build/src, "
                f"{entries} entries",
        "guest": f"2 vCPUs, {GUEST_MEM}, TCG unless KVM boots (vm.py)",
        "host": f"{os.cpu_count()} CPUs, shares and ext4 image on /dev/shm",
        "rounds": args.rounds,
        "configurations": {c: confs[c][2] for c in chosen},
    }
    if base:
        setup["baseline"] = base
    write_reports(args.out, setup, res, errors)
    print(f"bench: wrote {args.out}/tree.{{json,md}}")
    for what, ok, fig in targets(res):
        print(f"  {'met   ' if ok else 'MISSED'} {what} ({fig})")
    for e in errors:
        print(f"  error: {e}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

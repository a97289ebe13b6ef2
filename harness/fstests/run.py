#!/usr/bin/env python3
"""fstests (xfstests) against our virtiofsd and the Rust one, side by side.

    harness/fstests/run.py [--config NAME]... [--tests LIST | --group G]
                           [--limit N] [--budget SECONDS] [--gate] ...

Each configuration boots guests (harness/vm.py) with four virtio-fs
shares: the test share (fstests' TEST_DEV, tag fstest) and the scratch
share (SCRATCH_DEV, tag fsscratch), both served by the daemon under test
in the configuration's mode, and two served by our virtiofsd for the
harness: the fstests root (mk/fstests-root.sh: Debian 13 with fstests
built in it, read-only) and the run's own share (the test list, a copy of
the fstests tree to write into, the results).  The guest chroots into the
root and runs the list through one ./check (harness/fstests/in-root.sh),
whose output and xunit report the host reads as they are written.

Configurations (--config, default all three):
  ours       our virtiofsd, cache=auto, no window
  ours-dax   our virtiofsd, cache=auto, a 1 GiB window on each share,
             mounted with dax=always (every file through the window)
  rust       the Rust virtiofsd 1.14 (harness/rust-virtiofsd.sh), cache=auto
All get --xattr --posix-acl: fstests needs extended attributes for many
tests and ACLs for some, and the two daemons must be compared alike.

A test that does not come back within --test-timeout seconds (a hang in
the guest) ends that guest: it is recorded as "timeout" and a fresh guest
runs the rest; a guest that dies under a test records it as failed.
Results go to OUT/CONFIG/ (OUT: --out, default $BUILD/fstests):
results.tsv (a line per test) and fstests' own results/boot-N/;
then OUT/report.md, report.json and report.tsv compare the
configurations: per test its status in each, and "ours alone" where the
Rust daemon passed and ours did not.  harness/fstests/known.tsv explains
failures (ours alone, and those both daemons share).

The test and scratch shares are file systems of their own, --share-size
each (default 8G): sparse ext4 images in OUT/CONFIG, loop-mounted in a
mount namespace private to the run, which goes with it.  fstests' fill
tests (generic/027, 213, 224...) then fill those and not the host's
file system.  That needs root (as the daemons do); otherwise, or with
--share-size=0, the shares are plain directories, said on the log.

--gate (CI): exit 1 when a test that passed on the Rust daemon did not
pass on ours in some configuration, failed on every configuration, or
was run on none (unless known.tsv explains it for exactly those
configurations), when a test asked for has no result in some
configuration, or when a configuration passed nothing (gate()).
Any failure of the harness itself (the root, the build, a guest that does
not start) exits 2 with what is missing.
"""

import argparse
import concurrent.futures
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("BUILD", os.path.join(TOP, "build"))
VM = os.path.join(TOP, "harness", "vm.py")
OUR_VIRTIOFSD = os.path.join(BUILD, "qemu", "tools", "virtiofsd", "virtiofsd")

CONFIGS = {
    "ours": dict(daemon="ours", window="", mount=""),
    "ours-dax": dict(daemon="ours", window="1G", mount="-o dax=always"),
    "rust": dict(daemon="rust", window="", mount=""),
}
# Options of the daemons under test, each in its own command-line form
DAEMON_OPTS = {"ours": ["--xattr", "--posix-acl"],
               "rust": ["--xattr", "--posix-acl"]}
STATUSES = ("pass", "fail", "notrun", "timeout")
TEST_NAME = re.compile(r"^[a-z0-9]+/\d+$")


class SetupError(Exception):
    pass


# The vm.py runs in flight: each in a session of its own (QEMU and the
# daemons below it), so a signal to us reaches none of them by itself.
GUESTS = set()


def end_guests(signum, frame):
    """SIGTERM or SIGINT: tear the guests down (vm.py does that on
    SIGTERM) before going, so that no QEMU outlives the run."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for proc in list(GUESTS):
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for proc in list(GUESTS):
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    log("interrupted; guests torn down")
    os._exit(130)


def log(msg):
    print(f"fstests: {msg}", file=sys.stderr, flush=True)


def fstests_root(source):
    """mk/fstests-root.sh's root (made or checked), or SetupError."""
    cmd = [os.path.join(TOP, "mk", "fstests-root.sh")]
    if source:
        cmd.append(source)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise SetupError("the fstests root could not be made (above)")
    return r.stdout.strip().splitlines()[-1]


def list_tests(root, group):
    """The tests of GROUP (a directory of tests/, e.g. generic): those of
    fstests' "quick" group first, then the others, each in number order,
    so that a run cut by --budget has covered as many as it could."""
    d = os.path.join(root, "fstests", "tests", group)
    if not os.path.isdir(d):
        raise SetupError(f"fstests has no tests/{group}")
    tests = [n for n in sorted(os.listdir(d)) if n.isdigit()]
    quick = set()
    try:
        # Made by fstests' build: "NNN group group ..." per test
        with open(os.path.join(d, "group.list")) as f:
            for line in f:
                words = line.split()
                if words and words[0].isdigit() and "quick" in words[1:]:
                    quick.add(words[0])
    except OSError:
        raise SetupError(f"fstests has no tests/{group}/group.list: "
                         "was it built?")
    return [f"{group}/{n}" for n in sorted(tests, key=lambda n: n not in quick)]


def read_list(path):
    with open(path) as f:
        return [ln.split("#", 1)[0].strip() for ln in f
                if ln.split("#", 1)[0].strip()]


def read_results(path):
    """{test: (status, seconds, why)} from a results.tsv."""
    res = {}
    try:
        with open(path) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) >= 3 and parts[1] in STATUSES:
                    res[parts[0]] = (parts[1], float(parts[2]),
                                     parts[3] if len(parts) > 3 else "")
    except OSError:
        pass
    return res


def daemon_cmd(kind, sock, shared, cache, extra):
    if kind == "rust":
        return ["--socket-path", sock, "--shared-dir", shared,
                "--cache", cache] + extra
    return [f"--socket-path={sock}", f"--shared-dir={shared}",
            f"--cache={cache}"] + extra


# Set by main(): whether the shares are bounded file systems, and how large
SHARE_SIZE = None
NS_MARK = "VFSDAX_FSTESTS_PRIVATE_MOUNTS"


def private_mounts(size):
    """Makes the shares bounded file systems of SIZE, if this run may: it
    runs itself again in a mount namespace of its own (unshare(1)
    execs in place: same process, same signals), so that the loop mounts
    are seen by nothing else and go when it ends, whatever happens."""
    global SHARE_SIZE
    if size in ("", "0"):
        log("the test and scratch shares are directories on the host's "
            "file system (--share-size=0)")
        return
    if os.environ.get(NS_MARK) == str(os.getpid()):
        SHARE_SIZE = size
        log(f"the test and scratch shares are ext4 file systems of {size} "
            "each, mounted for this run only")
        return
    missing = [t for t in ("unshare", "mkfs.ext4", "mount", "umount")
               if not shutil.which(t)]
    if os.geteuid() != 0 or missing:
        log("warning: the test and scratch shares are directories on the "
            "host's file system, which fill tests can fill: "
            + ("bounded ones need root" if os.geteuid() != 0 else
               "bounded ones need " + ", ".join(missing)))
        return
    env = dict(os.environ, **{NS_MARK: str(os.getpid())})
    os.execvpe("unshare", ["unshare", "--mount", "--propagation", "private",
                           sys.executable, os.path.abspath(__file__)]
               + sys.argv[1:], env)


def mount_share(path):
    """PATH becomes a fresh ext4 of SHARE_SIZE (a sparse image beside it)."""
    if not SHARE_SIZE:
        return
    img = path + ".img"
    if os.path.ismount(path):
        subprocess.run(["umount", path], check=True)
    if os.path.exists(img):
        os.remove(img)
    try:
        subprocess.run(["truncate", "-s", SHARE_SIZE, img], check=True,
                       capture_output=True, text=True)
        subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", img], check=True,
                       capture_output=True, text=True)
        subprocess.run(["mount", "-o", "loop", img, path], check=True,
                       capture_output=True, text=True)
    except subprocess.CalledProcessError as e:
        raise SetupError(f"cannot make {path} a {SHARE_SIZE} file system: "
                         f"{' '.join(e.cmd)}: {e.stderr.strip()}")
    st = os.statvfs(path)
    size = st.f_blocks * st.f_frsize
    if not os.path.ismount(path) or size > os.path.getsize(img):
        raise SetupError(f"{path} is not the {SHARE_SIZE} file system just "
                         f"made ({size} bytes)")


def unmount_share(path):
    """Drops PATH's file system and its image: what the tests left there
    is not part of the results, and an image may have grown to its size."""
    if not SHARE_SIZE:
        return
    if os.path.ismount(path):
        subprocess.run(["umount", path], check=False)
    if os.path.exists(path + ".img"):
        os.remove(path + ".img")


def prepare_run(cdir, root, tests, fresh):
    """CDIR's shares: test/ and scratch/ for the daemon under test, run/
    for the harness (a copy of the fstests tree, the list, the script)."""
    if fresh and os.path.isdir(cdir):
        for d in ("test", "scratch"):
            unmount_share(os.path.join(cdir, d))
        shutil.rmtree(cdir)
    run = os.path.join(cdir, "run")
    for d in (os.path.join(cdir, "test"), os.path.join(cdir, "scratch"), run,
              os.path.join(cdir, "logs")):
        os.makedirs(d, exist_ok=True)
    for d in ("test", "scratch"):
        mount_share(os.path.join(cdir, d))
    if not os.path.isdir(os.path.join(run, "fstests")):
        # The guest's fstests writes beside itself (results, local
        # files of some tests): each run writes into its own copy.
        subprocess.run(["cp", "-a", "--reflink=auto",
                        os.path.join(root, "fstests"),
                        os.path.join(run, "fstests")], check=True)
    shutil.copy(os.path.join(HERE, "in-root.sh"), os.path.join(run, "in-root.sh"))
    with open(os.path.join(run, "tests.list"), "w") as f:
        f.write("".join(t + "\n" for t in tests))
    return run


def tail(path, n=30):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


def in_progress(out_path):
    """The test check is running now, from its output so far: check
    prints a test's name, and ends that line only once the test and the
    checks after it are done.  None between tests or before the first."""
    try:
        with open(out_path, errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    if not text or text.endswith("\n"):
        return None
    last = text.rsplit("\n", 1)[-1].split()
    return last[0] if last and TEST_NAME.match(last[0]) else None


def boot_results(run, n):
    """{test: (status, seconds, why)} of boot N, from fstests' xunit
    report (rewritten before each test, so complete up to the test in
    progress when a guest was cut)."""
    rb = os.path.join(run, "results", f"boot-{n}")
    cases = []
    # One report per chunk of in-root.sh, and the one of a chunk cut
    # in a test
    for x in sorted(glob.glob(os.path.join(rb, "result*.xml"))):
        try:
            cases += ET.parse(x).getroot().iter("testcase")
        except (OSError, ET.ParseError):
            pass
    res = {}
    for tc in cases:
        t = tc.get("name")
        secs = float(tc.get("time") or 0)
        skipped, failure = tc.find("skipped"), tc.find("failure")
        if skipped is not None:
            res[t] = ("notrun", secs, (skipped.get("message") or "").strip())
        elif failure is not None:
            why = (failure.get("message") or "").strip()
            bad = os.path.join(rb, t + ".out.bad")
            good = os.path.join(run, "fstests", "tests", t + ".out")
            if os.path.exists(bad):
                # The first line the test got wrong says more than
                # "output mismatch"
                d = subprocess.run(["diff", good, bad], stdout=subprocess.PIPE,
                                   text=True, errors="replace").stdout
                first = next((ln for ln in d.splitlines()
                              if ln[:1] in "<>"), "")
                why = f"output mismatch: {first}"
            res[t] = ("fail", secs, " ".join(why.split())[:300])
        else:
            res[t] = ("pass", secs, "")
    return res


def boot(name, cfg, cdir, run, root, args, budget_end, n):
    """Boot N of a configuration: one guest runs the tests of
    run/tests.list until they are done, one hangs, or the budget ends.
    Returns (why it ended, the test in progress then, the guest's log)."""
    kind = cfg["daemon"]
    opts = DAEMON_OPTS[kind] + (args.ours_args.split() if kind == "ours"
                                else [])
    logs = os.path.join(cdir, "logs")
    gout = os.path.join(logs, f"guest-{n}.out")
    check_out = os.path.join(run, "check-out", f"boot-{n}.out")
    scratch = f"fsscratch,daemon:{kind}" + \
        (f",cache-size:{cfg['window']}" if cfg["window"] else "")
    cmd = [sys.executable, VM, "--quiet", "--daemon", kind,
           "--shared", os.path.join(cdir, "test"), "--tag", "fstest",
           "--cache-mode", "auto", "--daemon-args", " ".join(opts),
           "--mem", args.mem, "--smp", str(args.smp),
           "--log-dir", os.path.join(logs, f"vm-{n}"),
           "--timeout", str(max(60, budget_end - time.time())),
           "--extra-daemon", scratch + "=" + " ".join(
               daemon_cmd(kind, "@SOCK@", os.path.join(cdir, "scratch"),
                          "auto", opts)),
           "--extra-daemon", "fsroot=" + " ".join(
               daemon_cmd("ours", "@SOCK@", root, "always", ["--readonly"])),
           "--extra-daemon", "fsrun=" + " ".join(
               daemon_cmd("ours", "@SOCK@", run, "auto", [])),
           "--env", "FST_TEST_TAG=fstest", "--env", "FST_SCRATCH_TAG=fsscratch",
           "--env", f"FST_MOUNT_OPTS={cfg['mount']}",
           "--env", f"FST_BOOT={n}", "--env", f"FST_CHUNK={args.chunk}"]
    if cfg["window"]:
        cmd += ["--cache-size", cfg["window"]]
    cmd.append(os.path.join(HERE, "guest.sh"))
    with open(gout, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL,
                                start_new_session=True)
        GUESTS.add(proc)
        why = None
        cur, since = None, time.monotonic()
        while proc.poll() is None:
            time.sleep(2)
            now = in_progress(check_out)
            if now != cur:
                cur, since = now, time.monotonic()
            # A test past its limit: whether the guest's userspace or its
            # kernel is stuck in it, only a fresh guest goes on surely.
            if cur and time.monotonic() - since > args.test_timeout:
                why = f"hang: {cur}"
                break
            if time.time() > budget_end:
                why = "budget"
                break
        if proc.poll() is None:
            # vm.py tears QEMU and the daemons down on SIGTERM
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    GUESTS.discard(proc)
    rc = proc.returncode
    if why is None:
        why = "done" if rc == 0 else f"guest ended with status {rc}"
        cur = in_progress(check_out)
    return why, cur, gout


def check_mounts(name, cfg, run):
    """The guest's /proc/mounts lines for both shares (in-root.sh) must
    show the configuration's DAX mode: a run meant to go through the
    window must not pass by going around it."""
    try:
        with open(os.path.join(run, "mounts.txt")) as f:
            lines = f.read().splitlines()
    except OSError:
        return      # the guest did not get that far: judged by its tests
    want = cfg["mount"].split()[-1] if cfg["mount"] else None
    for ln in lines:
        opts = ln.split()[3].split(",") if len(ln.split()) > 3 else []
        if want and want not in opts:
            raise SetupError(f"{name}: a share mounted without {want}: {ln}")
        if not want and any(o.startswith("dax") for o in opts):
            raise SetupError(f"{name}: a share mounted with DAX: {ln}")
    if len(lines) != 2:
        raise SetupError(f"{name}: the guest mounted {len(lines)} of the two "
                         "shares under test")


def write_results(path, res):
    with open(path, "a") as f:
        for t, (st, secs, why) in res.items():
            f.write(f"{t}\t{st}\t{secs:.1f}\t{' '.join(why.split())}\n")


def harvest(run, tests=None):
    """Into RUN's results.tsv, what the guests of an interrupted run
    finished (in their reports, not yet there); TESTS: only those."""
    results = os.path.join(run, "results.tsv")
    done = read_results(results)
    for d in sorted(glob.glob(os.path.join(run, "results", "boot-*"))):
        got = {t: v for t, v in
               boot_results(run, int(d.rsplit("-", 1)[1])).items()
               if (tests is None or t in tests) and t not in done}
        write_results(results, got)
        done.update(got)


def run_config(name, args, root, tests):
    cfg = CONFIGS[name]
    cdir = os.path.join(args.out, name)
    run = prepare_run(cdir, root, tests, fresh=not args.resume)
    results = os.path.join(run, "results.tsv")
    budget_end = time.time() + args.budget if args.budget else float("inf")
    t0 = time.time()
    boots = 0
    problems = []
    first = len(os.listdir(os.path.join(run, "check-out"))) \
        if os.path.isdir(os.path.join(run, "check-out")) else 0
    if args.resume:
        harvest(run, tests)
    while True:
        done = read_results(results)
        left = [t for t in tests if t not in done]
        if not left or time.time() > budget_end:
            break
        n = first + boots
        boots += 1
        with open(os.path.join(run, "tests.list"), "w") as f:
            f.write("".join(t + "\n" for t in left))
        log(f"{name}: guest {boots}, {len(left)} tests to go")
        why, cur, gout = boot(name, cfg, cdir, run, root, args, budget_end, n)
        check_mounts(name, cfg, run)
        got = {t: v for t, v in boot_results(run, n).items() if t in left}
        if cur and cur not in got and why != "budget":
            # The guest ended, or was ended, under a test: a hang is
            # that test's timeout; a guest that died under it (QEMU or a
            # daemon crashed, the kernel panicked) is its failure, with
            # vm.py's word on it.
            if why.startswith("hang"):
                got[cur] = ("timeout", float(args.test_timeout),
                            f"no result within {args.test_timeout} s; "
                            "the guest was cut and a fresh one ran the rest")
            else:
                err = [ln for ln in tail(gout, 60).splitlines()
                       if ln.startswith("vm: error:") or "exited" in ln]
                got[cur] = ("fail", 0.0, (f"the guest ended during it "
                                          f"({why}): " + " / ".join(err[:2]))[:300])
            log(f"{name}: {cur}: {got[cur][2]}")
        write_results(results, got)
        if why == "budget":
            break
        if not got:
            # Nothing ran, nothing hung: the guest or the root is broken,
            # which no later guest would fix
            raise SetupError(f"{name}: the guest ran no test ({why}):\n"
                             + tail(gout))
        if not why.startswith("hang") and why != "done":
            # The guest did not end well (a daemon that crashed at the
            # disconnect, QEMU that hung at teardown): the report says
            # so, whatever the tests said.
            problems.append(f"guest {boots}: {why}: " + " / ".join(
                ln for ln in tail(gout, 40).splitlines()
                if ln.startswith("vm: error:"))[:300])
    wall = time.time() - t0
    for d in ("test", "scratch"):
        unmount_share(os.path.join(cdir, d))
    if args.resume:
        # The time and guests of the runs this one resumed count too
        try:
            with open(os.path.join(cdir, "meta.json")) as f:
                before = json.load(f)
            wall += before.get("wall_s", 0)
            boots += before.get("guests", 0)
            problems = before.get("problems", []) + problems
        except (OSError, ValueError):
            pass
    with open(os.path.join(cdir, "meta.json"), "w") as f:
        json.dump({"config": name, "wall_s": round(wall, 1), "guests": boots,
                   "tests": len(tests),
                   "daemon_options": DAEMON_OPTS[cfg["daemon"]] +
                   (args.ours_args.split() if cfg["daemon"] == "ours" else []),
                   "window": cfg["window"], "mount_options": cfg["mount"],
                   "problems": problems}, f)
    return wall


def load_known():
    """harness/fstests/known.tsv: TEST <tab> WHO <tab> REASON, WHO being
    ours, ours-dax, all (every configuration), or a comma list."""
    known = {}
    path = os.path.join(HERE, "known.tsv")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.startswith("#") or not line.strip():
                    continue
                t, who, reason = line.rstrip("\n").split("\t", 2)
                known[t] = (who, reason)
    return known


def report(out, names):
    """OUT/report.{md,json,tsv} from each configuration's results."""
    res, meta = {}, {}
    for n in names:
        res[n] = read_results(os.path.join(out, n, "run", "results.tsv"))
        try:
            with open(os.path.join(out, n, "meta.json")) as f:
                meta[n] = json.load(f)
        except OSError:
            meta[n] = {}
    known = load_known()
    tests = sorted(set().union(*[set(r) for r in res.values()]))
    ours_names = [n for n in names if n != "rust"]
    alone = {}
    for t in tests:
        r = res.get("rust", {}).get(t)
        if not r or r[0] != "pass":
            continue
        bad = [n for n in ours_names if t in res[n] and res[n][t][0] != "pass"]
        if bad:
            alone[t] = bad
    # TSV: a line per test and configuration
    with open(os.path.join(out, "report.tsv"), "w") as f:
        f.write("test\tconfig\tstatus\tseconds\twhy\n")
        for t in tests:
            for n in names:
                if t in res[n]:
                    st, s, why = res[n][t]
                    f.write(f"{t}\t{n}\t{st}\t{s}\t{why}\n")
    counts = {n: {st: sum(1 for v in res[n].values() if v[0] == st)
                  for st in STATUSES} for n in names}
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump({"configs": meta, "counts": counts,
                   "results": {n: {t: dict(zip(("status", "seconds", "why"), v))
                                   for t, v in res[n].items()} for n in names},
                   "ours_alone": alone}, f, indent=1)
    md = ["# fstests against the virtio-fs daemons", "",
          "Written by harness/fstests/run.py (make fstests).  Configurations:", ""]
    for n in names:
        m = meta[n]
        md.append(f"- **{n}**: {CONFIGS[n]['daemon']} daemon, options "
                  f"`{' '.join(m.get('daemon_options', []))}`, cache=auto"
                  + (f", window {m.get('window')} per share, mount "
                     f"`{m.get('mount_options')}`" if m.get("window") else
                     ", no window"))
    md += ["", "| | " + " | ".join(names) + " |",
           "| --- |" + " --- |" * len(names)]
    for st in STATUSES:
        md.append(f"| {st} | " + " | ".join(str(counts[n][st]) for n in names) + " |")
    md.append("| tests run | " + " | ".join(str(len(res[n])) for n in names) + " |")
    md.append("| wall time | " + " | ".join(
        f"{meta[n].get('wall_s', 0) / 60:.0f} min" for n in names) + " |")
    md.append("| guests booted | " + " | ".join(
        str(meta[n].get("guests", "?")) for n in names) + " |")
    for n in names:
        for pr in meta[n].get("problems", []):
            md.append(f"\n**{n}: a guest ended badly**: {pr}")
    md += ["", "## Ours alone: passed on the Rust daemon, not on ours", ""]
    if not alone:
        md.append("None." if "rust" in names else
                  "(no Rust run to compare with)")
    for t, bad in alone.items():
        k = known.get(t)
        md.append(f"- **{t}** ({', '.join(f'{n}: {res[n][t][0]}' for n in bad)})"
                  f": {k[1] if k else 'not yet explained'}")
        for n in bad:
            md.append(f"  - {n}: `{res[n][t][2][:160]}`")
    md += ["", "## Failed on every configuration that ran it", ""]
    common = [t for t in tests
              if all(res[n].get(t, ("fail",))[0] in ("fail", "timeout")
                     for n in names if t in res[n])
              and sum(1 for n in names if t in res[n]) > 1]
    for t in common:
        k = known.get(t)
        md.append(f"- **{t}**: {k[1] if k else 'not yet explained'}")
        first = next(n for n in names if t in res[n])
        md.append(f"  - `{res[first][t][2][:160]}`")
    if not common:
        md.append("None.")
    md += ["", "## Failed on the Rust daemon only", ""]
    rust_only = [t for t in tests
                 if res.get("rust", {}).get(t, ("pass",))[0] in ("fail", "timeout")
                 and any(t in res[n] for n in ours_names)
                 and all(res[n][t][0] == "pass" for n in ours_names
                         if t in res[n])]
    for t in rust_only:
        k = known.get(t)
        md.append(f"- **{t}**: {k[1] if k else 'not yet explained'}")
        md.append(f"  - rust: `{res['rust'][t][2][:160]}`")
    if not rust_only:
        md.append("None." if "rust" in names else "(no Rust run)")
    md += ["", "## Tests that failed somewhere, or whose results differ", "",
           "| test | " + " | ".join(names) + " | ours alone |",
           "| --- |" + " --- |" * (len(names) + 1)]
    for t in tests:
        sts = [res[n].get(t, ("-",))[0] for n in names]
        if all(s in ("pass", "notrun", "-") for s in sts) and \
                len(set(s for s in sts if s != "-")) <= 1:
            continue
        md.append(f"| {t} | " + " | ".join(sts) +
                  f" | {'yes' if t in alone else ''} |")
    md += ["", "Not run, by reason (first configuration that gave one):", ""]
    reasons = {}
    for t in tests:
        for n in names:
            v = res[n].get(t)
            if v and v[0] == "notrun":
                reasons.setdefault(v[2] or "?", []).append(t)
                break
    for why, ts in sorted(reasons.items(), key=lambda kv: -len(kv[1])):
        md.append(f"- {len(ts)}: {why} ({' '.join(x.split('/')[1] for x in ts[:12])}"
                  f"{' ...' if len(ts) > 12 else ''})")
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    return alone, counts, meta


def gate(names, tests, res, meta, known):
    """--gate's verdict: (lines to print, whether it failed).

    NAMES are the configurations run, TESTS the tests asked for (None:
    those that have a result somewhere), RES {config: {test: (status,
    seconds, why)}}, META {config: meta.json}, KNOWN load_known()'s.  It
    fails when a configuration passed nothing or had a guest end badly,
    when there is no Rust run to compare with, and for each test that:
    - has no result in some configuration (a run cut short, a harness
      that lost it: nothing was shown for it there);
    - passed on the Rust daemon and not on ours in some configuration;
    - failed (or timed out) on every configuration that ran it;
    - was not run (fstests' notrun) on any configuration;
    unless known.tsv explains the last three for exactly those
    configurations ("all" explains a failure everywhere, never one of
    ours alone).
    """
    lines, bad = [], False

    def fail(msg):
        nonlocal bad
        lines.append("FAIL: " + msg)
        bad = True

    def explained(t, configs, everywhere_ok):
        k = known.get(t)
        if not k:
            return None
        who = set(k[0].split(","))
        if set(configs) <= who or (everywhere_ok and "all" in who):
            return k[1]
        return None

    if "rust" not in names:
        fail("--gate needs the rust configuration to compare with")
    for n in names:
        if not any(v[0] == "pass" for v in res.get(n, {}).values()):
            fail(f"{n} passed no test")
        for pr in meta.get(n, {}).get("problems", []):
            fail(f"{n}: {pr}")
    ours = [n for n in names if n != "rust"]
    every = sorted(set(tests) if tests is not None else
                   set().union(*[set(res.get(n, {})) for n in names]))
    for t in every:
        ran = {n: res[n][t] for n in names if t in res.get(n, {})}
        missing = [n for n in names if n not in ran]
        if missing:
            fail(f"{t}: no result on {', '.join(missing)}")
        if not ran:
            continue
        sts = {n: v[0] for n, v in ran.items()}
        if sts.get("rust") == "pass":
            who = [n for n in ours if n in sts and sts[n] != "pass"]
            if not who:
                continue
            why = explained(t, who, False)
            if why:
                lines.append(f"known: {t} passed on the Rust daemon, not "
                             f"on {', '.join(who)}: {why}")
            else:
                fail(f"{t} passed on the Rust daemon, not on "
                     + ", ".join(f"{n} ({sts[n]})" for n in who))
        elif all(st in ("fail", "timeout") for st in sts.values()):
            why = explained(t, list(sts), True)
            if why:
                lines.append(f"known: {t} failed on every configuration: "
                             f"{why}")
            else:
                first = next(iter(ran.values()))
                fail(f"{t} failed on every configuration that ran it ("
                     + ", ".join(f"{n}: {st}" for n, st in sts.items())
                     + f"), and known.tsv does not explain it: "
                     f"{first[2][:160]}")
        elif all(st == "notrun" for st in sts.values()):
            why = explained(t, list(sts), True)
            if why:
                lines.append(f"known: {t} ran nowhere: {why}")
            else:
                fail(f"{t} was run on no configuration (notrun: "
                     f"{next(iter(ran.values()))[2][:160]})")
    if not bad:
        lines.append("ok: every test ran, and passed on ours where it "
                     "passed on the Rust daemon; the rest is explained")
    return lines, bad


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", action="append", choices=list(CONFIGS),
                   help="a configuration to run (repeatable; default all)")
    p.add_argument("--fstests", default=os.environ.get("FSTESTS", ""),
                   help="fstests source: a tarball or a clone (default: "
                   "mk/fstests-root.sh's)")
    p.add_argument("--tests", help="a file listing tests (generic/001 ...)")
    p.add_argument("--group", default="generic",
                   help="all tests of tests/GROUP (default generic)")
    p.add_argument("--limit", type=int, default=0, help="the first N tests only")
    p.add_argument("--budget", type=float, default=0,
                   help="seconds per configuration (default: no limit); "
                   "the tests not reached are left out of the report")
    p.add_argument("--test-timeout", type=int, default=600)
    p.add_argument("--chunk", type=int, default=40,
                   help="tests per ./check in the guest (default 40)")
    p.add_argument("--out", default=os.path.join(BUILD, "fstests"))
    p.add_argument("--mem", default="2G")
    p.add_argument("--smp", type=int, default=2)
    p.add_argument("--ours-args", default="",
                   help="more options for our daemon under test")
    p.add_argument("--parallel", action="store_true",
                   help="run the configurations at the same time")
    p.add_argument("--resume", action="store_true",
                   help="keep OUT/CONFIG's results and run only the rest")
    p.add_argument("--share-size", default="8G",
                   help="size of the test and of the scratch share's own "
                   "file system (default 8G; 0: plain directories)")
    p.add_argument("--report-only", action="store_true")
    p.add_argument("--gate", action="store_true",
                   help="exit 1 if a test that passed on the Rust daemon "
                   "did not pass on ours, failed everywhere or ran nowhere "
                   "unexplained, or has a result missing (gate())")
    args = p.parse_args()
    names = args.config or list(CONFIGS)
    if not args.report_only:
        private_mounts(args.share_size)
    signal.signal(signal.SIGTERM, end_guests)
    signal.signal(signal.SIGINT, end_guests)
    os.makedirs(args.out, exist_ok=True)
    try:
        if not args.report_only:
            # The harness's own shares are served by ours in every
            # configuration, the Rust one's included
            if not os.access(OUR_VIRTIOFSD, os.X_OK):
                raise SetupError(f"our virtiofsd is not built "
                                 f"({OUR_VIRTIOFSD}): run make qemu")
            root = fstests_root(args.fstests)
            tests = read_list(args.tests) if args.tests else \
                list_tests(root, args.group)
            if args.limit:
                tests = tests[:args.limit]
            for t in tests:
                if not os.path.exists(os.path.join(root, "fstests", "tests", t)):
                    raise SetupError(f"fstests has no test {t}")
            if args.parallel:
                # make check's subset: one guest per configuration at
                # once, so that each sees the same load (README
                # "fstests" has the times)
                with concurrent.futures.ThreadPoolExecutor(len(names)) as ex:
                    walls = dict(zip(names, ex.map(
                        lambda n: run_config(n, args, root, tests), names)))
            else:
                walls = {n: run_config(n, args, root, tests) for n in names}
            for n in names:
                log(f"{n}: {walls[n]:.0f} s")
        if args.report_only:
            for n in names:
                if os.path.isdir(os.path.join(args.out, n, "run")):
                    harvest(os.path.join(args.out, n, "run"))
        _, _, meta = report(args.out, names)
    except SetupError as e:
        print(f"fstests: error: {e}", file=sys.stderr)
        return 2
    finally:
        for n in names:
            for d in ("test", "scratch"):
                unmount_share(os.path.join(args.out, n, d))
    print(open(os.path.join(args.out, "report.md")).read().split("\n## Tests that failed")[0])
    log(f"report: {os.path.join(args.out, 'report.md')}")
    if args.gate:
        res = {n: read_results(os.path.join(args.out, n, "run", "results.tsv"))
               for n in names}
        if args.report_only:
            tests = read_list(args.tests) if args.tests else None
        lines, bad = gate(names, tests, res, meta, load_known())
        print("\n".join(lines))
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())

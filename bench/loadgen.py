#!/usr/bin/env python3
"""The server's own speed, without a guest: our virtiofsd and the Rust
virtiofsd 1.14 side by side under the vhost-user load generator
(tests/unit/virtiofsd/loadgen.c), and the floor under both.

Each round starts every daemon afresh on its own share (a directory of
/dev/shm) and runs every mix at queue depth 1 (latency) and 32
(throughput), on one request queue and on two (the Rust daemon serves
one: the generator asks it, GET_QUEUE_NUM); the daemons' order alternates
from round to round.  Each round also runs the floor: the host system
calls each mix's requests need, in a loop, and the transport: the
generator's own round trip against a back-end thread that answers at
once (and, below it, a bare eventfd ping-pong between two threads).
Each round also replays, on ours and the Rust daemon, the requests a
guest sent running bench/tree.py's tree steps, recorded by our daemon
with their replies at the start of the run (bench/replay_stream.py; with
--quick, the small committed stream instead).  Figures are medians of
the rounds with their spread; docs/benchmarks/loadgen.{md,json} get the
run, stdout the same tables.

    bench/loadgen.py [--rounds N] [--seconds S] [--quick] [--out DIR]
                     [--replay-stream STREAM] [--replay-only]
    bench/loadgen.py --report loadgen.json [--out DIR]
    bench/loadgen.py --check

--check is make check's functional run: each daemon answers a short run
of every mix (no timing), every reply checked by the generator; TAP on
stdout.  Ours on two request queues, the Rust daemon on its one; both
replay the small committed stream of the tree steps at depths 1 and 32;
and ours records a short session with VIRTIOFSD_RECORD.
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import replay_stream  # noqa: E402  (the tree steps' recorded stream)

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("BUILD", os.path.join(TOP, "build"))
LOADGEN = os.path.join(BUILD, "qemu", "tests", "unit", "virtiofsd", "loadgen")
OURS = os.path.join(BUILD, "qemu", "tools", "virtiofsd", "virtiofsd")
RUST_SH = os.path.join(TOP, "harness", "rust-virtiofsd.sh")

MIXES = ["getattr", "lookup", "unpack", "readdirplus", "read-4k", "read-128k",
         "write-4k", "write-128k", "unlink"]
# The replay of a guest's tree steps (loadgen.c's replay mix): a run of
# its own, one request queue, the whole stream at each depth
REPLAY = "replay"
ROWS = MIXES + [REPLAY]
REPLAY_DAEMONS = ["ours", "rust"]
# The metadata mixes, held to requests per daemon CPU second
METADATA = ["getattr", "lookup", "unpack", "readdirplus", "unlink", REPLAY]
# Ours polling its queues (--poll-us), off by default: measured both ways
POLL_US = 50
DAEMONS = ["ours", "rust", "ours-poll"]
LABEL = {"ours": "ours", "rust": "Rust 1.14",
         "ours-poll": f"ours --poll-us={POLL_US}"}
DEPTHS = [1, 32]
QUEUES = [1, 2]

# What --floor does for each mix (loadgen.c, floor_run())
FLOOR_CALLS = {
    "getattr": "statx on a held O_PATH fd",
    "lookup": "openat O_PATH + statx + close; a missing name: openat",
    "unpack": "per file: openat (missing), openat O_CREAT|O_EXCL + statx, "
              "pwrite 4 KiB, futimens/fchown/fchmod each + statx, close; "
              "per request: a seventh",
    "readdirplus": "per listing: open, getdents64 of 25 entries at a time, "
                   "a lookup (as above) each, close; per request: / 44",
    "read-4k": "pread 4 KiB, random offset of a 4 MiB file",
    "read-128k": "pread 128 KiB",
    "write-4k": "pwrite 4 KiB, random offset of a 4 MiB file",
    "write-128k": "pwrite 128 KiB",
    "unlink": "unlinkat",
    "eventfd": "an eventfd write waking a thread, there and back between "
               "two threads (a kick and a call alone)",
    "transport": "the generator's own GETATTR round trip, rings, kick and "
                 "call, against a back-end thread that answers ENOSYS at "
                 "once",
}
# In check mode: requests (sequences for unpack and readdirplus) per mix
CHECK_COUNT = 60
CHECK_DEPTHS = [1, 8]
REPLAY_DEPTHS = [1, 32]


def log(msg):
    print("loadgen: " + msg, file=sys.stderr, flush=True)


def hold_cpu_latency():
    """Keeps idle CPUs polling for the run: (the fd that holds it, or
    None; what the report says).

    A halted vCPU of a virtual machine takes tens of microseconds to
    wake (this project's machines: an eventfd round trip between two
    threads takes 60-75 us when the CPUs are otherwise idle, 1.7 us when
    they are busy), and that would be every depth-1 figure and much of
    the depth-32 ones, varying with whatever else the host runs.  A
    request for zero wake-up latency (PM QoS, /dev/cpu_dma_latency, as
    tuned's latency-performance profile does) keeps idle CPUs in their
    polling state for as long as the file stays open; both daemons run
    under it alike.
    """
    try:
        fd = os.open("/dev/cpu_dma_latency", os.O_WRONLY)
    except OSError as e:
        return None, (f"not held ({e.strerror} on /dev/cpu_dma_latency): "
                      "idle CPUs may halt, and a wake-up then costs the "
                      "host's idle exit")
    os.write(fd, struct.pack("i", 0))
    return fd, ("held at 0 for the run (/dev/cpu_dma_latency): idle CPUs "
                "poll rather than halt")


def rust_virtiofsd():
    r = subprocess.run([RUST_SH], stdout=subprocess.PIPE, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


def scratch_root():
    return "/dev/shm" if os.path.isdir("/dev/shm") else None


class Daemon:
    """One daemon on its own socket and share, in a session of its own"""

    def __init__(self, kind, binary, work, tag, env=None):
        self.share = os.path.join(work, f"share-{tag}")
        self.sock = os.path.join(work, f"{tag}.sock")
        self.log = os.path.join(work, f"{tag}.log")
        os.makedirs(self.share)
        if kind in ("ours", "ours-poll"):
            cmd = [binary, f"--socket-path={self.sock}",
                   f"--shared-dir={self.share}", "--cache=auto"]
            if kind == "ours-poll":
                cmd.append(f"--poll-us={POLL_US}")
        else:
            cmd = [binary, "--socket-path", self.sock, "--shared-dir",
                   self.share, "--cache", "auto"]
        self.proc = subprocess.Popen(cmd, stdout=open(self.log, "w"),
                                     stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL,
                                     start_new_session=True,
                                     env=dict(os.environ, **(env or {})))
        end = time.time() + 15
        while not os.path.exists(self.sock):
            if self.proc.poll() is not None or time.time() > end:
                self.stop()
                raise RuntimeError(f"{kind} did not listen on {self.sock}:\n"
                                   + self.tail())
            time.sleep(0.02)

    def tail(self, n=8):
        with open(self.log, errors="replace") as f:
            return "".join(f.readlines()[-n:])

    def stop(self, grace=10):
        """Its exit status once the front-end has left (None: killed)"""
        try:
            return self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            pass
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(5)
                break
            except subprocess.TimeoutExpired:
                continue
        return None


def run_once(kind, binary, queues, args, work, tag, timeout, env=None):
    """Start KIND, run the generator against it; (status, rows, stderr,
    daemon's exit status, daemon's log tail)"""
    d = Daemon(kind, binary, work, tag, env)
    try:
        r = subprocess.run([LOADGEN, f"--socket={d.sock}", f"--dir={d.share}",
                            f"--pid={d.proc.pid}", f"--queues={queues}"]
                           + args, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=timeout)
        status, out, err = r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired as e:
        status, out = None, e.stdout or ""
        err = f"the generator ran past {timeout} s"
        out = out.decode() if isinstance(out, bytes) else out
    finally:
        drc = d.stop()
    rows = [json.loads(line) for line in out.splitlines()
            if line.startswith("{")]
    shutil.rmtree(d.share, ignore_errors=True)
    return status, rows, err, drc, d.tail()


# ---- make check: replies from both daemons ----

def check():
    binaries = {"ours": OURS if os.access(OURS, os.X_OK) else None,
                "rust": rust_virtiofsd()}
    missing = {"ours": f"our virtiofsd is not built ({OURS})",
               "rust": "the Rust virtiofsd is not available "
                       f"({RUST_SH} failed)"}
    points = []
    if not os.access(LOADGEN, os.X_OK):
        print("1..1\nnot ok 1 - the load generator is not built "
              f"({LOADGEN})")
        return 1
    work = tempfile.mkdtemp(prefix="vfsdax-loadgen.", dir=scratch_root())
    try:
        mixes = [f"--count={CHECK_COUNT}", f"--unlink-files={CHECK_COUNT}",
                 "--depths=" + ",".join(map(str, CHECK_DEPTHS))]
        # The small tree steps' stream, every reply checked against the
        # recorded one
        small = replay_stream.unpacked(replay_stream.SMALL, work)
        replay = [f"--replay={small}",
                  "--depths=" + ",".join(map(str, REPLAY_DEPTHS))]
        cases = [("ours", 2, "", mixes, MIXES, CHECK_DEPTHS),
                 ("rust", 1, "", mixes, MIXES, CHECK_DEPTHS)]
        cases += [(kind, 1, ", a guest's tree steps replayed", replay,
                   [REPLAY], REPLAY_DEPTHS) for kind in REPLAY_DAEMONS]
        for kind, queues, how, args, want, depths in cases:
            what = f"{LABEL[kind]} on {queues} request queue(s){how}"
            if not binaries[kind]:
                points.append((False, f"{what}: {missing[kind]}"))
                continue
            t0 = time.time()
            status, rows, err, drc, dlog = run_once(
                kind, binaries[kind], queues, args, work,
                f"{kind}-{len(points)}", timeout=120)
            got = {(r["mix"], r["depth"]): r for r in rows}
            for mix in want:
                for depth in depths:
                    r = got.get((mix, depth))
                    ok = bool(r and r["requests"] > 0 and
                              r["queues"] == queues)
                    points.append((ok, f"{what}: {mix} at depth {depth}: "
                                   + (f"{r['requests']} replies checked"
                                      if r else "no result")))
            fails = [line for line in err.splitlines() if "FAIL" in line]
            points.append((status == 0,
                           f"{what}: the generator's exit status {status}"
                           + (f" ({fails[0]})" if fails else
                              f" ({err.strip()})" if status else "")))
            points.append((drc == 0, f"{what}: the daemon exited with status "
                           f"{drc} once the front-end left"
                           + ("" if drc == 0 else f"\n{dlog}")))
            log(f"{what}: {time.time() - t0:.1f} s")
            if status:
                sys.stderr.write(err)
        if binaries["ours"]:
            points += check_record(work)
        # The floor and the transport: every mix's calls, and the
        # generator's rings against its own null back-end (checked there)
        fdir = os.path.join(work, "floor")
        os.makedirs(fdir)
        r = subprocess.run([LOADGEN, "--floor", f"--dir={fdir}",
                            "--seconds=0.05", f"--unlink-files={CHECK_COUNT}"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=120)
        got = [json.loads(line)["mix"] for line in r.stdout.splitlines()
               if line.startswith("{")]
        want = MIXES + ["eventfd", "transport"]
        points.append((r.returncode == 0 and got == want,
                       f"the floor: status {r.returncode}, "
                       f"{len(got)} of {len(want)} figures"
                       + (f" ({r.stderr.strip()})" if r.returncode else "")))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"1..{len(points)}")
    for i, (ok, text) in enumerate(points, 1):
        lines = text.split("\n")
        print(f"{'ok' if ok else 'not ok'} {i} - {lines[0]}")
        for extra in lines[1:]:
            print(f"# {extra}")
    return 0 if all(ok for ok, _ in points) else 1


def check_record(work):
    """Our daemon with VIRTIOFSD_RECORD: every request it served and
    every reply, in a stream the replay can read"""
    what = "ours with VIRTIOFSD_RECORD"
    out = os.path.join(work, "record.rec")
    status, rows, err, drc, dlog = run_once(
        "ours", OURS, 1, ["--mixes=getattr,unpack", "--count=20",
                          "--depths=1"], work, "ours-record", timeout=120,
        env={"VIRTIOFSD_RECORD": out})
    served = sum(r["requests"] for r in rows)
    try:
        requests, replies = replay_stream.count(out)
        got = f"{requests} requests and {replies} replies recorded"
    except (OSError, ValueError) as e:
        requests = replies = 0
        got = str(e)
    return [(status == 0 and drc == 0 and served > 0 and
             requests >= served and replies >= served,
             f"{what}: {got}, the generator's {served} requests among them"
             f" (status {status}, the daemon's {drc})")]


# ---- make bench ----

def summarize(vals):
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals),
            "max": max(vals), "runs": vals}


def metrics(row):
    n = row["requests"]
    m = {"rps": row["rps"], "p50_us": row["p50_us"], "p99_us": row["p99_us"],
         "frontend_cpu_us": row["frontend_cpu_us"] / n,
         "host_busy_cpus": row["host_busy_cpus"]}
    if "inflight" in row:
        m["inflight"] = row["inflight"]
    if "cpu_us" in row:
        m["cpu_us"] = row["cpu_us"] / n
        m["csw"] = row["csw"] / n
        m["daemon_cpus"] = row["cpu_us"] / 1e6 / row["seconds"]
    return m


def bench(args):
    rust = rust_virtiofsd()
    binaries = {"ours": OURS, "rust": rust, "ours-poll": OURS}
    for what, path in (("load generator", LOADGEN), ("our virtiofsd", OURS),
                       ("Rust virtiofsd", rust)):
        if not path or not os.access(path, os.X_OK):
            sys.exit(f"loadgen: the {what} is missing ({path}): make qemu "
                     "rust-virtiofsd")
    raw = {d: {} for d in DAEMONS}          # d -> "qQ" -> mix -> "dD" -> [..]
    floor = {}
    unsupported, errors = {}, []
    work = tempfile.mkdtemp(prefix="vfsdax-loadgen.", dir=scratch_root())
    gen = [f"--seconds={args.seconds}",
           "--depths=" + ",".join(map(str, DEPTHS))]
    load0 = os.getloadavg()
    try:
        stream, stream_what = replay_source(args, work, errors)
        for rnd in range(args.rounds):
            if not args.replay_only:
                run_floor(args, rnd, work, floor, errors)
            order = DAEMONS if rnd % 2 == 0 else DAEMONS[::-1]
            for kind in order:
                for q in [] if args.replay_only else QUEUES:
                    # Polling: latency and its CPU, on one queue
                    if (kind, q) in unsupported or (kind == "ours-poll" and
                                                    q != 1):
                        continue
                    log(f"round {rnd + 1}: {LABEL[kind]}, {q} request "
                        "queue(s)")
                    status, rows, err, drc, dlog = run_once(
                        kind, binaries[kind], q, gen, work,
                        f"{kind}-{rnd}-{q}", timeout=900)
                    if status == 3:
                        offered = rows[0].get("offered") if rows else "?"
                        unsupported[(kind, q)] = offered
                        log(f"{LABEL[kind]} serves {offered} request "
                            "queue(s)")
                        continue
                    if status != 0:
                        errors.append(f"round {rnd + 1}, {kind}, {q} "
                                      f"queue(s): status {status}: "
                                      f"{err.strip()[-500:]}")
                        log(errors[-1])
                    add_rows(raw[kind], q, rows)
                if stream and kind in REPLAY_DAEMONS:
                    log(f"round {rnd + 1}: {LABEL[kind]}, the replay")
                    status, rows, err, drc, dlog = run_once(
                        kind, binaries[kind], 1,
                        [f"--replay={stream}", "--depths=" +
                         ",".join(map(str, DEPTHS))], work,
                        f"{kind}-{rnd}-replay", timeout=900)
                    if status != 0:
                        errors.append(f"round {rnd + 1}, {kind}, the replay:"
                                      f" status {status}: "
                                      f"{err.strip()[-500:]}")
                        log(errors[-1])
                    add_rows(raw[kind], 1, rows)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    res = {d: {q: {mix: {depth: {k: summarize(v) for k, v in m.items()}
                         for depth, m in depths.items()}
                   for mix, depths in qs.items()}
               for q, qs in raw[d].items()} for d in DAEMONS}
    fl = {mix: {k: summarize(v) for k, v in f.items()}
          for mix, f in floor.items()}
    ours_rev = subprocess.run(["git", "-C", TOP, "rev-parse", "--short",
                               "HEAD"], stdout=subprocess.PIPE,
                              text=True).stdout.strip()
    rust_ver = subprocess.run([rust, "--version"], stdout=subprocess.PIPE,
                              text=True).stdout.strip()
    setup = {
        "date": datetime.datetime.now(datetime.timezone.utc)
        .isoformat(timespec="seconds"),
        "host": f"{os.cpu_count()} CPUs ({cpu_model()}), "
                f"Linux {platform.release()}",
        "load": f"{load0[0]:.1f} {load0[1]:.1f} {load0[2]:.1f}",
        "share": "a directory of /dev/shm (tmpfs)",
        "rounds": args.rounds, "seconds": args.seconds,
        "ours": f"tools/virtiofsd at {ours_rev}, --cache=auto (and with "
                f"--poll-us={POLL_US})",
        "rust": f"{rust_ver}, --cache auto",
        "unsupported": {f"{k}-q{q}": v for (k, q), v in unsupported.items()},
        "replay": stream_what,
    }
    return setup, res, fl, errors


def run_floor(args, rnd, work, floor, errors):
    """A round of the floor into FLOOR (mix -> p50 and mean -> [...])"""
    log(f"round {rnd + 1} of {args.rounds}: the floor")
    fdir = os.path.join(work, "floor")
    os.makedirs(fdir, exist_ok=True)
    r = subprocess.run([LOADGEN, "--floor", f"--dir={fdir}",
                        f"--seconds={args.seconds}"],
                       stdout=subprocess.PIPE, text=True, timeout=600)
    if r.returncode:
        errors.append(f"round {rnd + 1}: the floor: status {r.returncode}")
    for line in r.stdout.splitlines():
        row = json.loads(line)
        f = floor.setdefault(row["mix"], {"p50": [], "mean": []})
        f["p50"].append(row["floor_p50_us"])
        f["mean"].append(row["floor_mean_us"])


def merge_replay(out, setup, res, errors):
    """The run in OUT/loadgen.json, its replay rows replaced by this run's
    (--replay-only)"""
    with open(os.path.join(out, "loadgen.json")) as f:
        j = json.load(f)
    for d in REPLAY_DAEMONS:
        rows = res.get(d, {}).get("q1", {}).get(REPLAY)
        if rows:
            j["results"].setdefault(d, {}).setdefault("q1", {})[REPLAY] = rows
    j["setup"]["replay"] = (
        f"{setup['replay']} (these rows: {setup['date']}, ours at "
        f"{setup['ours'].split(',')[0].split()[-1]}, "
        f"{setup['rounds']} alternating rounds, load average "
        f"{setup['load']} at their start)" if setup["replay"] else None)
    return j["setup"], j["results"], j["floor"], j["errors"] + errors


def add_rows(raw, q, rows):
    """The generator's ROWS into RAW ("qQ" -> mix -> "dD" -> metric ->
    [values])"""
    for row in rows:
        per = raw.setdefault(f"q{q}", {}).setdefault(
            row["mix"], {}).setdefault(f"d{row['depth']}", {})
        for k, v in metrics(row).items():
            per.setdefault(k, []).append(v)


def replay_source(args, work, errors):
    """The stream the replay rows replay, and what it is: --replay-stream,
    the committed small one with --quick, else the tree steps recorded
    from a guest now (None where that failed, said in ERRORS)"""
    try:
        if args.replay_stream:
            path = args.replay_stream
        elif args.quick:
            path = replay_stream.SMALL
        else:
            path = os.path.join(work, "tree.rec")
            replay_stream.record(path, log=log)
        plain = replay_stream.unpacked(path, work)
        requests, _ = replay_stream.count(plain)
    except (RuntimeError, OSError, ValueError) as e:
        errors.append(f"the replay: no stream: {e}")
        log(errors[-1])
        return None, None
    what = ("on the small tree (" + os.path.relpath(path, TOP) + ")"
            if path == replay_stream.SMALL else
            "on QEMU's hw, include and docs" if path.startswith(work) else
            "(" + path + ")")
    return plain, (f"the tree steps {what}, recorded from a guest by our "
                   f"daemon: {requests} requests")


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def get(res, daemon, q, mix, depth, key):
    s = res.get(daemon, {}).get(f"q{q}", {}).get(mix, {}).get(f"d{depth}",
                                                              {}).get(key)
    return s


def med(s):
    return s["median"] if s else None


def fmt(s, digits=1, scale=1.0):
    if not s:
        return "-"
    return (f"{s['median'] * scale:.{digits}f} "
            f"[{s['min'] * scale:.{digits}f}-{s['max'] * scale:.{digits}f}]")


def ratio(a, b, digits=2):
    return f"{a / b:.{digits}f}x" if a and b else "-"


def floor_rt(fl, mix):
    """The floor plus the transport, p50 each, µs"""
    f, t = fl.get(mix, {}).get("p50"), fl.get("transport", {}).get("p50")
    return f["median"] + t["median"] if f and t else None


def targets(res, fl):
    """(what, met, figures) for the issue's targets this run covers"""
    t = []
    for mix in METADATA:
        o = med(get(res, "ours", 1, mix, 32, "cpu_us"))
        r = med(get(res, "rust", 1, mix, 32, "cpu_us"))
        if o and r:
            t.append((f"{mix}: ours serves at least 2x the Rust daemon's "
                      "requests per daemon CPU second (depth 32)",
                      r >= 2 * o, f"{o:.2f} vs {r:.2f} CPU us a request: "
                      f"{r / o:.2f}x"))
    for mix in ROWS:
        o = med(get(res, "ours", 1, mix, 1, "p50_us"))
        r = med(get(res, "rust", 1, mix, 1, "p50_us"))
        if o and r:
            t.append((f"{mix}: depth 1 p50 of ours at most 0.6x Rust's",
                      o <= 0.6 * r, f"{o:.1f} vs {r:.1f} us: {o / r:.2f}x"))
    for mix in MIXES:
        o = med(get(res, "ours-poll", 1, mix, 1, "p50_us"))
        r = med(get(res, "rust", 1, mix, 1, "p50_us"))
        if o and r:
            t.append((f"{mix}: depth 1 p50 of ours with --poll-us={POLL_US} "
                      "at most 0.6x Rust's", o <= 0.6 * r,
                      f"{o:.1f} vs {r:.1f} us: {o / r:.2f}x"))
    for mix in MIXES:
        o = med(get(res, "ours", 1, mix, 1, "p50_us"))
        f = floor_rt(fl, mix)
        if o and f:
            t.append((f"{mix}: depth 1 p50 of ours within 2x of the floor "
                      "plus the transport", o <= 2 * f,
                      f"{o:.1f} vs {f:.1f} us: {o / f:.2f}x"))
    for mix in MIXES:
        one = med(get(res, "ours", 1, mix, 32, "rps"))
        two = med(get(res, "ours", 2, mix, 32, "rps"))
        if one and two:
            busy = med(get(res, "ours", 2, mix, 32, "host_busy_cpus"))
            dcpu = med(get(res, "ours", 2, mix, 32, "daemon_cpus"))
            fe = med(get(res, "ours", 2, mix, 32, "frontend_cpu_us"))
            t.append((f"{mix}: two request queues at least 1.6x one "
                      "(ours, depth 32)", two >= 1.6 * one,
                      f"{two / one:.2f}x; with two: the daemon "
                      f"{dcpu:.2f} CPUs, the generator "
                      f"{fe * two / 1e6:.2f}, the host {busy:.2f} of "
                      f"{os.cpu_count()} busy"))
    return t


def write_reports(out, setup, res, fl, errors):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "loadgen.json"), "w") as f:
        json.dump({"setup": setup, "results": res, "floor": fl,
                   "errors": errors}, f, indent=1)
    L = ["# The server's own speed: the vhost-user load generator", "",
         f"{setup['date']}; host: {setup['host']}, load average "
         f"{setup['load']} at the start (the machine is shared); shares: "
         f"{setup['share']}; ours: {setup['ours']}; Rust: {setup['rust']}; "
         f"{setup['rounds']} alternating rounds of {setup['seconds']} s per "
         "mix and depth; median [min-max] of the rounds; CPU wake-up "
         f"latency: {setup.get('cpu_idle', 'not recorded (an older run)')}."
         "", "",
         "`bench/loadgen.py` (make bench) drives each daemon with "
         "`tests/unit/virtiofsd/loadgen`, a vhost-user front-end without "
         "a guest: a memfd as guest memory, split rings with EVENT_IDX, "
         "eventfd kicks and calls, FUSE_INIT, then each mix kept DEPTH "
         "requests deep on each request queue, every reply checked against "
         "the host.  Latency is from the request on the ring to its reply "
         "seen; CPU and context switches are the daemon's whole process "
         "tree (/proc/PID/stat, /proc/PID/task/*/status) over the run.  "
         "How to read it, and what the committed run showed: README.md, "
         "\"The server's own speed, without a guest\".", ""]
    # The replay's rows where this run has them (--report of older runs)
    rows_of = [m for m in ROWS if m != REPLAY or get(res, "ours", 1, m, 1,
                                                         "rps")]
    if setup.get("replay"):
        inflight = ", ".join(
            f"{LABEL[d]} {fmt(get(res, d, 1, REPLAY, 32, 'inflight'), 2)}"
            for d in REPLAY_DAEMONS)
        L += ["The replay row (bench/replay_stream.py) replays "
              + setup["replay"] + ": whole, once per depth, on one request "
              "queue, against an empty directory, node ids and file handles "
              "mapped to the live ones, each reply checked against the "
              "recorded one; its requests include the stream's FORGETs, "
              "which get no reply.  At depth 32 a request may start ahead "
              "of earlier ones only when none in flight or before it "
              "touches the same node or file handle, and UNLINK, RMDIR and "
              "RENAME wait for all before them, so fewer are in flight: "
              f"on average {inflight}.", ""]

    def table(title, head, rows):
        L.extend([f"## {title}", "", "| " + " | ".join(head) + " |",
                  "|" + "---|" * len(head)])
        L.extend("| " + " | ".join(r) + " |" for r in rows)
        L.append("")

    rows = []
    for mix in rows_of:
        o = get(res, "ours", 1, mix, 1, "p50_us")
        r = get(res, "rust", 1, mix, 1, "p50_us")
        f = floor_rt(fl, mix)
        rows.append([mix, fmt(o), fmt(r), ratio(med(o), med(r)),
                     fmt(get(res, "ours", 1, mix, 1, "p99_us")),
                     fmt(get(res, "rust", 1, mix, 1, "p99_us")),
                     f"{f:.1f}" if f else "-", ratio(med(o), f)])
    table("Latency: queue depth 1, one request queue (us)",
          ["mix", "ours p50", "Rust p50", "ours/Rust", "ours p99",
           "Rust p99", "floor+transport p50", "ours/floor+transport"], rows)

    for depth in DEPTHS:
        rows = []
        for mix in rows_of:
            oc = get(res, "ours", 1, mix, depth, "cpu_us")
            rc = get(res, "rust", 1, mix, depth, "cpu_us")
            o = get(res, "ours", 1, mix, depth, "rps")
            r = get(res, "rust", 1, mix, depth, "rps")
            rows.append([mix, fmt(o, 0), fmt(r, 0), ratio(med(o), med(r)),
                         fmt(oc, 2), fmt(rc, 2), ratio(med(rc), med(oc)),
                         fmt(get(res, "ours", 1, mix, depth, "csw"), 2),
                         fmt(get(res, "rust", 1, mix, depth, "csw"), 2)])
        table(f"Queue depth {depth}, one request queue: requests/s and the "
              "daemon's cost per request",
              ["mix", "ours req/s", "Rust req/s", "ours/Rust",
               "ours CPU us", "Rust CPU us", "ours req per CPU s / Rust's",
               "ours csw", "Rust csw"], rows)

    rows = []
    for mix in MIXES:
        row = [mix]
        for depth in DEPTHS:
            one = get(res, "ours", 1, mix, depth, "rps")
            two = get(res, "ours", 2, mix, depth, "rps")
            row += [fmt(one, 0), fmt(two, 0), ratio(med(two), med(one)),
                    fmt(get(res, "ours", 2, mix, depth, "daemon_cpus"), 2),
                    fmt(get(res, "ours", 2, mix, depth, "host_busy_cpus"), 2)]
        rows.append(row)
    head = ["mix"]
    for depth in DEPTHS:
        head += [f"d{depth} 1 queue", f"d{depth} 2 queues", "2/1",
                 "daemon CPUs", "host busy CPUs"]
    uns = setup.get("unsupported", {})
    table("Two request queues, ours (requests/s)" +
          (f"; the Rust daemon serves {uns['rust-q2']} request queue"
           if "rust-q2" in uns else ""), head, rows)

    rows = []
    for mix in MIXES + ["eventfd", "transport"]:
        f = fl.get(mix, {})
        rows.append([mix, fmt(f.get("p50"), 2), fmt(f.get("mean"), 2),
                     FLOOR_CALLS[mix]])
    table("The floor: the host's calls made directly, and the transport "
          "(us per request)", ["mix", "p50", "mean", "what"], rows)

    rows = []
    for d in DAEMONS:
        for q in QUEUES:
            for depth in DEPTHS:
                for mix in rows_of:
                    g = lambda k: get(res, d, q, mix, depth, k)  # noqa: E731
                    if not g("rps"):
                        continue
                    rows.append([LABEL[d], str(q), str(depth), mix,
                                 fmt(g("rps"), 0), fmt(g("p50_us")),
                                 fmt(g("p99_us")), fmt(g("cpu_us"), 2),
                                 fmt(g("csw"), 2),
                                 fmt(g("frontend_cpu_us"), 2),
                                 fmt(g("host_busy_cpus"), 2)])
    table("Every figure", ["daemon", "queues", "depth", "mix", "req/s",
                           "p50 us", "p99 us", "daemon CPU us/req",
                           "csw/req", "generator CPU us/req",
                           "host busy CPUs"], rows)

    L += ["## Targets (issue 40)", ""]
    for what, ok, figs in targets(res, fl):
        L.append(f"- {'met' if ok else 'MISSED'}: {what} ({figs})")
    if errors:
        L += ["", "Errors:", ""] + [f"- {e}" for e in errors]
    text = "\n".join(L) + "\n"
    with open(os.path.join(out, "loadgen.md"), "w") as f:
        f.write(text)
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=1.0,
                    help="per mix and depth (unpack and unlink stop at "
                         "8,000 and 50,000 files)")
    ap.add_argument("--quick", action="store_true",
                    help="one round of 0.3 s runs")
    ap.add_argument("--out", default=os.path.join(TOP, "docs", "benchmarks"))
    ap.add_argument("--report", metavar="JSON",
                    help="write the report again from a run's JSON")
    ap.add_argument("--replay-stream", metavar="STREAM",
                    help="replay this stream (bench/replay_stream.py) "
                         "instead of recording the tree steps afresh")
    ap.add_argument("--replay-only", action="store_true",
                    help="run the replay rows alone and put them into the "
                         "run of OUT/loadgen.json, the rest kept")
    ap.add_argument("--check", action="store_true",
                    help="make check: every mix from both daemons, replies "
                         "checked, TAP")
    args = ap.parse_args()
    if args.check:
        return check()
    if args.report:
        with open(args.report) as f:
            j = json.load(f)
        print(write_reports(args.out, j["setup"], j["results"], j["floor"],
                            j["errors"]), end="")
        return 0
    if args.quick:
        args.rounds, args.seconds = 1, 0.3
    qos_fd, qos_what = hold_cpu_latency()
    log(f"CPU wake-up latency: {qos_what}")
    try:
        setup, res, fl, errors = bench(args)
    finally:
        if qos_fd is not None:
            os.close(qos_fd)
    setup["cpu_idle"] = qos_what
    if args.replay_only:
        setup, res, fl, errors = merge_replay(args.out, setup, res, errors)
    print(write_reports(args.out, setup, res, fl, errors), end="")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

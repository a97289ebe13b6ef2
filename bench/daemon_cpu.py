#!/usr/bin/env python3
"""The CPU seconds each run of a virtio-fs daemon used, sampled from
/proc, for comparing two builds of a daemon on a machine shared with
other work.

A guest's wall-clock figures on a busy two-CPU host spread by 2-4x from
one round to the next: they measure the other tenants as much as the
daemon.  The daemon's own CPU time for the same guest work moves much
less, and bounds what the daemon can add to the guest's time.  Run this
beside bench/tree.py or bench/run.py:

    bench/daemon_cpu.py --exe BINARY [--exe BINARY2 ...] > cpu.log &

Every 0.2 s it reads utime+stime of each process whose executable is one
of the BINARYs (each daemon's processes: the one vm.py starts, its
sandboxed child, a broker; vm.py gives each run a session of its own).
When a session's last process is gone it prints

    DAEMON <start> <end> <exe> <session> <cpu s> <processes>

the CPU being the sum over the session's processes of the last value
seen.  A process that ends less than 0.2 s after its last sample loses
that part; a daemon is idle then (its guest has unmounted and gone).
SIGTERM or SIGINT ends it after the sessions still running are printed.
"""

import argparse
import os
import signal
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def sample(exes):
    """{pid: (session, exe, cpu seconds)} for the processes of EXES"""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
            if exe not in exes:
                continue
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # after "(comm)": state ppid pgrp session ... utime(14) stime(15)
        fields = stat[stat.rindex(")") + 2:].split()
        out[int(pid)] = (int(fields[3]), exe,
                         (int(fields[11]) + int(fields[12])) / TICK)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--exe", action="append", required=True,
                    help="a daemon binary to follow (repeatable)")
    ap.add_argument("--interval", type=float, default=0.2)
    args = ap.parse_args()
    exes = {os.path.realpath(e) for e in args.exe}
    # session -> {"exe", "start", "cpu": {pid: seconds}}
    live = {}
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))

    def report(sid, s):
        print(f"DAEMON {s['start']} {time.strftime('%H:%M:%S', time.gmtime())}"
              f" {s['exe']} {sid} {sum(s['cpu'].values()):.2f} "
              f"{len(s['cpu'])}", flush=True)
    while not stop:
        now = sample(exes)
        for pid, (sid, exe, cpu) in now.items():
            s = live.setdefault(sid, {"exe": exe, "cpu": {}, "start":
                                      time.strftime("%H:%M:%S",
                                                    time.gmtime())})
            s["cpu"][pid] = cpu
        alive = {sid for sid, _, _ in now.values()}
        for sid in [s for s in live if s not in alive]:
            report(sid, live.pop(sid))
        time.sleep(args.interval)
    for sid, s in live.items():
        report(sid, s)
    return 0


if __name__ == "__main__":
    sys.exit(main())

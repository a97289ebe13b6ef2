#!/usr/bin/env python3
"""Show that a long build step is alive, keep its whole output in a log.

    COMMAND 2>&1 | mk/progress.py LABEL LOGFILE

Every line of standard input goes to LOGFILE.  On a terminal, one status
line is rewritten in place: the label, ninja's [n/N] as a percentage when
the output has it, and the time so far.  Elsewhere (CI, a pipe) the status
is printed as a line at each tenth of the build, or once a minute when the
step gives no count, so a log shows progress without thousands of lines.
The exit status is 0; the caller takes the command's own from PIPESTATUS
or pipefail.
"""

import os
import re
import select
import sys
import time

STEP = re.compile(rb"^\[(\d+)/(\d+)\]")


def fmt_time(s):
    s = int(s)
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def main():
    if len(sys.argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    label, logname = sys.argv[1], sys.argv[2]
    tty = sys.stderr.isatty() and os.environ.get("TERM") != "dumb"
    start = time.monotonic()
    done = total = 0
    last_tenth = -1
    last_beat = start
    last_draw = 0.0
    width = 0
    fd = sys.stdin.fileno()
    pending = b""

    def status():
        t = fmt_time(time.monotonic() - start)
        if total:
            return f"{label}: {100 * done // total}% [{done}/{total}] {t}"
        return f"{label}: {t}"

    def draw(force=False):
        nonlocal last_draw, width, last_tenth, last_beat
        now = time.monotonic()
        if tty:
            if force or now - last_draw >= 0.2:
                s = status()
                sys.stderr.write("\r" + s.ljust(width))
                sys.stderr.flush()
                width, last_draw = len(s), now
        elif total:
            tenth = 10 * done // total
            if tenth != last_tenth:
                last_tenth, last_beat = tenth, now
                sys.stderr.write(status() + "\n")
                sys.stderr.flush()
        elif now - last_beat >= 60:
            last_beat = now
            sys.stderr.write(status() + "\n")
            sys.stderr.flush()

    with open(logname, "ab") as log:
        while True:
            ready, _, _ = select.select([fd], [], [], 1.0)
            if not ready:
                draw()
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            log.write(chunk)
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                m = STEP.match(line)
                if m:
                    done, total = int(m.group(1)), int(m.group(2))
            draw()
    if tty:
        sys.stderr.write("\r" + " " * width + "\r")
        sys.stderr.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

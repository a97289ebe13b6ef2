"""A second build of our virtiofsd beside the current one, for
bench/run.py and bench/tree.py (--baseline-virtiofsd PATH).

A change to the daemon must leave the guests' figures no worse than they
were before it.  The only fair comparison is one run on one machine at one
time: the same QEMU, guest and share, the old daemon's binary in place of
the new one, alternating rounds so that a slow spell of a shared machine
lands on both.  So every chosen configuration that runs our daemon gets a
twin NAME-baseline, run right after it in each round, with vm.py's
--daemon-binary naming the older build.  Build it from the commit to
compare with, outside this repository's tree, e.g.

    git worktree add --detach ../base COMMIT && make -C ../base qemu
    bench/tree.py --baseline-virtiofsd ../base/build/qemu/tools/virtiofsd/virtiofsd

The report then gives, for each row, the current figure against the
baseline's with a verdict: no worse, worse within the runs' spread, or
worse (by how much).
"""

import os
import subprocess

SUFFIX = "-baseline"


def add_arguments(ap):
    """The two options run.py and tree.py take for a baseline build"""
    ap.add_argument("--baseline-virtiofsd", metavar="PATH",
                    default=os.environ.get("BASELINE_VIRTIOFSD"),
                    help="another build of our virtiofsd: run a NAME-baseline "
                         "twin of each chosen configuration of ours with it")
    ap.add_argument("--baseline-commit", metavar="REV",
                    help="the commit that build is from, for the report "
                         "(default: the HEAD of the git tree it lies in)")


def from_args(ap, args, confs, chosen):
    """The baseline the options name, if any, and the configurations with
    its twins added: (base or None, confs, chosen)"""
    if not args.baseline_virtiofsd:
        return None, confs, chosen
    path = os.path.abspath(args.baseline_virtiofsd)
    if not os.access(path, os.X_OK):
        ap.error(f"--baseline-virtiofsd: {path} is not an executable")
    commit = commit_of(path, args.baseline_commit)
    base = {"binary": path, "commit": commit, "label": label(path, commit)}
    confs, chosen = add_variants(confs, chosen, path, base["label"])
    return base, confs, chosen


def commit_of(binary, commit=None):
    """The commit BINARY was built from: COMMIT if given, else the HEAD of
    the git tree its build directory lies in; None if neither says."""
    if commit:
        return commit
    try:
        r = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(
            binary)), "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def label(binary, commit):
    return f"our virtiofsd at {commit}" if commit else \
        f"our virtiofsd from {binary}"


def runs_ours(vm_args):
    return "--daemon" in vm_args and \
        vm_args[vm_args.index("--daemon") + 1] == "ours"


def add_variants(confs, chosen, binary, text):
    """CONFS (name -> (vm.py arguments, mount, description)) and the CHOSEN
    names, with a NAME-baseline twin after each chosen configuration of our
    daemon: its binary is BINARY, its description says TEXT (label())."""
    out, order = dict(confs), []
    for c in chosen:
        order.append(c)
        vm_args, mount, desc = confs[c]
        if not runs_ours(vm_args) or c.endswith(SUFFIX):
            continue
        desc = desc.replace("our virtiofsd", text, 1) \
            if "our virtiofsd" in desc else f"{desc} ({text})"
        out[c + SUFFIX] = (vm_args + ["--daemon-binary", binary], mount, desc)
        order.append(c + SUFFIX)
    return out, order


def pairs(names):
    """(current, baseline) configuration names among NAMES"""
    return [(c[:-len(SUFFIX)], c) for c in names
            if c.endswith(SUFFIX) and c[:-len(SUFFIX)] in names]


def order(names):
    """NAMES with each baseline twin right after its configuration"""
    twins = {b for _, b in pairs(names)}
    out = []
    for c in names:
        if c in twins:
            continue
        out.append(c)
        if c + SUFFIX in twins:
            out.append(c + SUFFIX)
    return out


def verdict(cur, base, lower_is_better, unit=""):
    """CUR against BASE ({"median", "min", "max"} or None): (kind, text),
    kind one of "no worse", "within spread", "worse".  A worse median whose
    runs overlap the baseline's (the current best run reaches the
    baseline's worst) cannot be told from noise: "within spread"."""
    if cur is None and base is None:
        return None
    if base is None:
        return "no worse", "the baseline did not complete it"
    if cur is None:
        return "worse", "did not complete it; the baseline did"
    a, b = cur["median"], base["median"]
    worse = a > b if lower_is_better else a < b
    ratio = f"{a / b:.2f}x" if b else "-"
    fig = f"{a:.2f} vs {b:.2f}{unit}: {ratio}"
    if not worse:
        return "no worse", fig
    overlap = cur["min"] <= base["max"] if lower_is_better \
        else cur["max"] >= base["min"]
    if overlap:
        return "within spread", fig
    pct = (a / b - 1) * 100 if lower_is_better else (1 - a / b) * 100
    what = "slower" if lower_is_better else "less"
    return "worse", f"{fig}, {pct:.0f}% {what}"


def lines(rows, descs):
    """The report's section: ROWS is [(row, current name, figure or None,
    baseline figure or None, lower_is_better, unit)], DESCS name ->
    description."""
    if not rows:
        return []
    md = ["", "## Against the baseline", "",
          "Each configuration beside its NAME-baseline twin, which runs "
          "another build of our virtiofsd (--baseline-virtiofsd) with the "
          "same QEMU, guest and options.  \"within spread\": the median is "
          "worse, but the current best run reaches the baseline's worst.",
          ""]
    for cur in dict.fromkeys(r[1] for r in rows):
        twin = cur + SUFFIX
        md.append(f"- `{cur}`: {descs.get(cur, '')}; `{twin}`: "
                  f"{descs.get(twin, '')}")
    md += ["", "| row | configuration | current | baseline | verdict |",
           "|---|---|---|---|---|"]

    def cell(f):
        return "-" if f is None else \
            f"{f['median']:.2f} [{f['min']:.2f}-{f['max']:.2f}]"
    for row, cur, a, b, lower, unit in rows:
        v = verdict(a, b, lower, unit)
        if v:
            md.append(f"| {row} | {cur} | {cell(a)} | {cell(b)} | "
                      f"{v[0]}: {v[1]} |")
    return md

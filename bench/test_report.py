#!/usr/bin/env python3
"""The benchmark's verdicts, from made-up figures: which target is met,
which is missed, which miss the runs cannot tell from noise, and that a
report written again from its JSON keeps every figure and the
configurations' order.  No guest: runs in a second."""

import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import baseline  # noqa: E402
import density  # noqa: E402
import run  # noqa: E402
import tree  # noqa: E402
import loadgen  # noqa: E402
import kvm_estimate  # noqa: E402


def fig(*runs):
    return run.summarize(list(runs))


def verdicts(res):
    return {name: (ok, figures) for name, ok, figures in run.targets(res)}


class Targets(unittest.TestCase):
    def test_half_window_met_missed_and_spread(self):
        res = {
            "ours-auto": {"randread-psync": fig(10, 11, 12),
                          "seqread-psync": fig(10, 11, 12),
                          "randwrite-psync": fig(10, 11, 12)},
            "dax-auto-half": {"randread-psync": fig(11, 11, 13),   # met
                              "seqread-psync": fig(9, 10, 10.5),   # overlaps
                              "randwrite-psync": fig(5, 6, 7)},    # clear miss
        }
        v = verdicts(res)
        key = "DAX auto half window >= ours without DAX: "
        self.assertEqual(v[key + "randread-psync"], (True, "11.0 vs 11.0 MiB/s"))
        ok, text = v[key + "seqread-psync"]
        self.assertFalse(ok)
        self.assertIn("within the runs' spread", text)
        ok, text = v[key + "randwrite-psync"]
        self.assertFalse(ok)
        self.assertNotIn("spread", text)

    def test_big_window_needs_nine_tenths_of_tmpfs(self):
        res = {"tmpfs": {"randread-mmap": fig(100, 100, 100),
                         "randread-libaio": fig(100, 100, 100)},
               "dax-never-big": {"randread-mmap": fig(90, 90, 90),
                                 "randread-libaio": fig(1, 1, 1)}}
        v = verdicts(res)
        self.assertTrue(v["DAX never big window >= 0.9x tmpfs: randread-mmap"][0])
        # libaio rows are not held to the tmpfs target
        self.assertNotIn("DAX never big window >= 0.9x tmpfs: randread-libaio", v)
        res["dax-never-big"]["randread-mmap"] = fig(85, 89, 89.9)
        self.assertFalse(verdicts(res)[
            "DAX never big window >= 0.9x tmpfs: randread-mmap"][0])

    def test_cannot_do_is_zero_not_absent(self):
        # mmap without a page cache: both daemons report 0, which meets
        # "ours >= Rust" and fails nothing by division
        res = {"ours-never": {"randread-mmap": fig(0, 0, 0)},
               "rust-never": {"randread-mmap": fig(0, 0, 0)}}
        self.assertEqual(verdicts(res)[
            "ours >= Rust virtiofsd, cache=never: randread-mmap"],
            (True, "0.0 vs 0.0 MiB/s"))

    def test_negative_stat_tenfold(self):
        res = {"ours-auto": {"negstat": fig(1000, 1000, 1000)},
               "rust-auto": {"negstat": fig(100, 101, 102)}}
        self.assertFalse(verdicts(res)[
            "negative stat, cache=auto: ours >= 10x Rust"][0])
        res["rust-auto"]["negstat"] = fig(99, 100, 100)
        self.assertTrue(verdicts(res)[
            "negative stat, cache=auto: ours >= 10x Rust"][0])


# What bench/upstream_shmem.py printed on this machine (trimmed), with a
# line of another program in between, which the parser must skip.
UPSTREAM_OUT = """\
upstream: QEMU emulator version 11.1.3 (Debian 1:11.1.3+ds-1); device started, 1 memory-table regions (guest RAM), window 4096 MiB, GET_MAX_MEM_SLOTS answered 509
upstream map+unmap: 1 live: median pair 1147.1 us, 872 pairs/s; map 468.1 us, add -22.0 us, unmap 73.4 us, rem 166.9 us, back-end 25.3 us, QEMU main thread 448.5 us of CPU a pair (20 pairs)
upstream: a map is followed by a memory-table message (ADD_MEM_REG); table now 1 regions
upstream map+unmap: 256 live: median pair 58582.0 us, 17 pairs/s; map 5004.5 us, add 20199.4 us, unmap 7509.0 us, rem 22293.3 us, back-end 94.1 us, QEMU main thread 20709.2 us of CPU a pair (20 pairs)
qemu-system-x86_64: terminating on signal 15
upstream map+unmap: 384 live: median pair 150000.0 us, 7 pairs/s; map 9000.0 us, add 60000.0 us, unmap 9000.0 us, rem 60000.0 us, back-end 99.0 us, QEMU main thread 80000.0 us of CPU a pair (3 pairs)
upstream slow: 384 live: reached: median pair 150.0 ms > 100 ms
upstream fill: 448 live: last map 120.5 ms, table 448 regions
upstream limit: 511 live: failed: one more: QEMU closed the vhost-user connection; table 512 regions; QEMU exited (-6): vhost_user_add_remove_regions: Assertion `dev->mem->nregions <= VHOST_USER_MAX_RAM_SLOTS' failed.
"""
FORK_OUT = """\
fork: QEMU emulator version 10.0.13; device started, 1 memory-table regions (guest RAM), window 4096 MiB, GET_MAX_MEM_SLOTS answered 509
fork map+unmap: 1 live: median pair 226.7 us, 4411 pairs/s; map 128.8 us, add 0.0 us, unmap 97.0 us, rem 0.0 us, back-end 0.0 us, QEMU main thread 50.0 us of CPU a pair (20 pairs)
fork map+unmap: 2048 live: median pair 167.8 us, 5959 pairs/s; map 85.1 us, add 0.0 us, unmap 82.5 us, rem 0.0 us, back-end 0.0 us, QEMU main thread 40.0 us of CPU a pair (50 pairs)
fork slow: 2048 live: not reached: every count kept under 100 ms
"""


class Shmem(unittest.TestCase):
    def test_parse_upstream(self):
        up = run.parse_shmem(UPSTREAM_OUT)["upstream"]
        self.assertEqual(sorted(up["rows"]), [1, 256, 384])
        r = up["rows"][256]
        self.assertEqual(r["median_pair_us"], 58582.0)
        self.assertAlmostEqual(r["pairs_per_s"], 1e6 / 58582.0)
        self.assertEqual((r["qemu_cpu_us"], r["backend_us"], r["pairs"]),
                         (20709.2, 94.1, 20))
        # a table message may arrive before the map's own reply is read
        self.assertEqual(up["rows"][1]["add_us"], -22.0)
        self.assertEqual(up["slow"], {"live": 384, "status": "reached",
                                      "text": "median pair 150.0 ms > 100 ms"})
        self.assertEqual(up["limit"]["live"], 511)
        self.assertEqual(up["limit"]["status"], "failed")
        self.assertIn("Assertion", up["limit"]["text"])
        self.assertEqual(up["fill"], {448: 120.5})
        self.assertTrue(up["qemu"].startswith("QEMU emulator version 11.1.3"))

    def test_parse_keeps_front_ends_apart(self):
        both = run.parse_shmem(FORK_OUT + UPSTREAM_OUT)
        self.assertEqual(sorted(both["fork"]["rows"]), [1, 2048])
        self.assertEqual(both["fork"]["slow"]["status"], "not reached")
        self.assertNotIn("limit", both["fork"])
        self.assertEqual(sorted(both["upstream"]["rows"]), [1, 256, 384])

    def test_parse_rejects_other_lines(self):
        # the qtest's format, a truncated row, an unknown status
        self.assertEqual(run.parse_shmem(
            "# min perf: 1 live mapping: median pair 39.9 us, 25051 pairs/s\n"
            "upstream map+unmap: 1 live: median pair 1147.1 us, 872 pairs/s\n"
            "upstream limit: 3 live: maybe: who knows\n"), {})

    def report(self, sh):
        confs = run.configurations()
        setup = {"date": "2026-01-01T00:00:00+00:00", "runs": 1,
                 "daemons": {}, "configurations": {"tmpfs": confs["tmpfs"][2]}}
        res = {"tmpfs": {"randread-psync": fig(1, 2, 3)}}
        with tempfile.TemporaryDirectory() as d1, \
                tempfile.TemporaryDirectory() as d2:
            run.write_reports(d1, setup, res, {}, [],
                              {"tmpfs": confs["tmpfs"]}, sh=sh)
            with open(os.path.join(d1, "results.md")) as f:
                md = f.read()
            self.assertEqual(run.rewrite_reports(
                os.path.join(d1, "results.json"), d2), 0)
            with open(os.path.join(d2, "results.md")) as f:
                again = f.read()
            with open(os.path.join(d2, "results.json")) as f:
                data = json.load(f)
        return md, again, data

    def test_report_side_by_side_and_limit(self):
        sh = run.parse_shmem(FORK_OUT + UPSTREAM_OUT)
        md, again, data = self.report(sh)
        lines = md.splitlines()
        # one row per live count, either front-end's cells "-" if not run
        self.assertIn("| 1 | 226.7 | 4411 | 1147.1 | 872 | 448.5 | 25.3 |", lines)
        self.assertIn("| 256 | - | - | 58582.0 | 17 | 20709.2 | 94.1 |", lines)
        self.assertIn("| 2048 | 167.8 | 5959 | - | - | - | - |", lines)
        self.assertIn("- upstream: a pair past 100 ms: at 384 live "
                      "(median pair 150.0 ms > 100 ms)", lines)
        self.assertTrue(any(x.startswith(
            "- upstream: live-mapping limit: 511 live, the next map failed: "
            "one more: QEMU closed") for x in lines))
        self.assertIn("- fork: a pair past 100 ms: not reached up to 2048 live",
                      lines)
        self.assertIn("- upstream: one map while filling the window: "
                      "448 live 120.5 ms", lines)
        # written again from its JSON, the report is the same
        self.assertEqual(md.replace("\n", ""), again.replace("\n", ""))
        self.assertEqual(data["map_unmap_upstream"]["upstream"]["rows"]["256"]
                         ["qemu_cpu_us"], 20709.2)

    def test_report_without_measurement(self):
        md, _, data = self.report({})
        self.assertIn("## Cache window map+unmap: our fork against upstream "
                      "QEMU 11.1\n", md)
        self.assertIn("- not measured", md.splitlines())
        self.assertEqual(data["map_unmap_upstream"], {})


class Report(unittest.TestCase):
    def test_rewrite_keeps_figures_and_order(self):
        confs = run.configurations()
        names = ["tmpfs", "rust-auto", "ours-auto", "dax-auto-half"]
        res = {c: {"randread-psync": fig(1, 2, 3), "negstat": fig(4, 5, 6)}
               for c in names}
        setup = {"date": "2026-01-01T00:00:00+00:00", "runs": 3,
                 "daemons": {}, "configurations":
                     {c: confs[c][2] for c in names}}
        with tempfile.TemporaryDirectory() as d1, \
                tempfile.TemporaryDirectory() as d2:
            run.write_reports(d1, setup, res, {}, [],
                              {c: confs[c] for c in names})
            self.assertEqual(run.rewrite_reports(
                os.path.join(d1, "results.json"), d2), 0)
            with open(os.path.join(d2, "results.json")) as f:
                again = json.load(f)
            self.assertEqual(again["results"], res)
            with open(os.path.join(d2, "results.md")) as f:
                md = f.read()
        header = next(line for line in md.splitlines()
                      if line.startswith("| workload |"))
        self.assertEqual(header, "| workload | " + " | ".join(names) + " |")
        # equal figures meet ">=" on both rows; ten times Rust they are not
        self.assertIn("| DAX auto half window >= ours without DAX | 2 | 2 | 0 | 0 |",
                      md)
        self.assertIn("| negative stat, cache=auto: ours >= 10x Rust | 1 | 0 | 0 | 1 |",
                      md)


class TreeTotal(unittest.TestCase):
    """bench/tree.py: a tree step that did not run is no 0 s."""

    def steps(self, skip=()):
        return {s: 1.0 + i for i, s in enumerate(tree.STEPS) if s not in skip}

    def test_total_of_every_step(self):
        steps = self.steps()
        self.assertIsNone(tree.add_total(steps))
        self.assertEqual(steps["total"],
                         sum(1.0 + i for i in range(len(tree.STEPS))))

    def test_missing_step_no_total(self):
        steps = self.steps(skip=("grep -r",))
        why = tree.add_total(steps)
        self.assertIn("grep -r", why)
        self.assertNotIn("total", steps)
        self.assertIn("no total", tree.add_total({}))

    def res(self, conf, skip=()):
        return {conf: {"steps": {s: fig(v) for s, v in
                                 self.steps(skip).items()}}}

    def test_window_target_needs_every_step(self):
        res = dict(self.res("ours-auto"),
                   **self.res("ours-auto-dax-always", skip=("rm -rf",)))
        v = {what: (ok, f) for what, ok, f in tree.targets(res)}
        key = ("window (ours-auto-dax-always): the tree steps at most 5% "
               "slower than without it")
        # Without rm -rf the window's sum is smaller: it must not be met
        self.assertEqual(v[key], (False, "tree steps missing in "
                                         "ours-auto-dax-always"))
        res = dict(self.res("ours-auto", skip=("find",)),
                   **self.res("ours-auto-dax-always"))
        v = {what: (ok, f) for what, ok, f in tree.targets(res)}
        self.assertEqual(v[key], (False, "tree steps missing in ours-auto"))
        res = dict(self.res("ours-auto"), **self.res("ours-auto-dax-always"))
        v = {what: (ok, f) for what, ok, f in tree.targets(res)}
        self.assertEqual(v[key], (True, "1.00x"))
        # A configuration that did not run at all has no verdict
        self.assertNotIn("window (ours-auto-dax-inode): the tree steps at "
                         "most 5% slower than without it", v)
class Baseline(unittest.TestCase):
    """bench/baseline.py: another build of ours beside the current one"""

    def test_twins_only_for_ours(self):
        confs = run.configurations()
        got, order = baseline.add_variants(
            confs, ["tmpfs", "rust-auto", "dax-auto-half"], "/b/virtiofsd",
            "our virtiofsd at abc1234")
        self.assertEqual(order, ["tmpfs", "rust-auto", "dax-auto-half",
                                 "dax-auto-half-baseline"])
        vm_args, mount, desc = got["dax-auto-half-baseline"]
        self.assertEqual(vm_args, confs["dax-auto-half"][0] +
                         ["--daemon-binary", "/b/virtiofsd"])
        self.assertEqual(mount, confs["dax-auto-half"][1])
        self.assertEqual(desc, "our virtiofsd at abc1234 cache=auto + DAX, "
                               "512M window")
        # tree.py's configurations are of the same form
        got, order = baseline.add_variants(
            tree.configurations(), ["ours-auto"], "/b/v", "our virtiofsd at x")
        self.assertIn("--daemon-args=--stats",
                      got["ours-auto-baseline"][0])
        self.assertEqual(baseline.order(["b-baseline", "a", "b",
                                         "a-baseline", "c"]),
                         ["a", "a-baseline", "b", "b-baseline", "c"])

    def test_verdicts(self):
        v = baseline.verdict
        # seconds: lower is better
        self.assertEqual(v(fig(1, 2, 3), fig(2, 2, 2), True),
                         ("no worse", "2.00 vs 2.00: 1.00x"))
        self.assertEqual(v(fig(1.9, 2.2, 3), fig(1.5, 2, 2), True)[0],
                         "within spread")
        self.assertEqual(v(fig(2.1, 2.2, 3), fig(1.5, 2, 2), True),
                         ("worse", "2.20 vs 2.00: 1.10x, 10% slower"))
        # MiB/s: higher is better
        self.assertEqual(v(fig(90, 100, 110), fig(100, 100, 100), False)[0],
                         "no worse")
        self.assertEqual(v(fig(80, 90, 100), fig(100, 100, 120), False)[0],
                         "within spread")
        self.assertEqual(v(fig(70, 75, 99), fig(100, 100, 120), False,
                           " MiB/s"),
                         ("worse", "75.00 vs 100.00 MiB/s: 0.75x, 25% less"))
        # a step one side did not complete
        self.assertEqual(v(fig(1), None, True)[0], "no worse")
        self.assertEqual(v(None, fig(1), True)[0], "worse")
        self.assertIsNone(v(None, None, True))

    def test_run_report_and_rewrite(self):
        confs = run.configurations()
        confs, names = baseline.add_variants(
            confs, ["tmpfs", "dax-auto-big", "dax-auto-half"], "/b/virtiofsd",
            "our virtiofsd at abc1234")
        res = {"tmpfs": {"randread-psync": fig(200, 200, 200)},
               "dax-auto-half": {"create": fig(1)},
               "dax-auto-half-baseline": {"create": fig(1)},
               "dax-auto-big": {"randread-psync": fig(150, 160, 170),
                                "create": fig(700, 710, 720)},
               "dax-auto-big-baseline": {"randread-psync": fig(171, 180, 190),
                                         "create": fig(650, 700, 710)}}
        setup = {"date": "2026-01-01T00:00:00+00:00", "runs": 1, "rounds": 3,
                 "daemons": {}, "baseline": {"binary": "/b/virtiofsd",
                                             "commit": "abc1234",
                                             "label": "our virtiofsd at "
                                                      "abc1234"},
                 "configurations": {c: confs[c][2] for c in names}}
        with tempfile.TemporaryDirectory() as d1, \
                tempfile.TemporaryDirectory() as d2:
            run.write_reports(d1, setup, res, {}, [],
                              {c: confs[c] for c in names})
            with open(os.path.join(d1, "results.md")) as f:
                md = f.read()
            # the JSON's sorted keys come back in the twin's order
            self.assertEqual(run.rewrite_reports(
                os.path.join(d1, "results.json"), d2), 0)
            with open(os.path.join(d2, "results.md")) as f:
                again = f.read()
        lines = md.splitlines()
        self.assertIn("| workload | tmpfs | dax-auto-big | dax-auto-big-baseline"
                      " | dax-auto-half | dax-auto-half-baseline |", lines)
        self.assertIn("- baseline: our virtiofsd at abc1234 (/b/virtiofsd)",
                      lines)
        self.assertIn("3 alternating rounds of 1 run(s)", md)
        self.assertIn("| randread-psync | dax-auto-big | 160.00 [150.00-170.00]"
                      " | 180.00 [171.00-190.00] | worse: 160.00 vs 180.00 "
                      "MiB/s: 0.89x, 11% less |", lines)
        self.assertIn("| create | dax-auto-big | 710.00 [700.00-720.00] | "
                      "700.00 [650.00-710.00] | no worse: 710.00 vs 700.00 "
                      "ops/s: 1.01x |", lines)
        self.assertEqual(md, again)

    def test_tree_report(self):
        confs, names = baseline.add_variants(
            tree.configurations(), ["ours-auto"], "/b/v", "our virtiofsd at x")
        steps = {s: fig(1.0) for s in tree.STEPS + ["total"]}
        res = {"ours-auto": {"steps": dict(steps, **{
                   "walk 50k cold": fig(3.0)}), "ops": {}},
               "ours-auto-baseline": {"steps": dict(steps, **{
                   "tar x": fig(0.5, 0.6, 0.7)}), "ops": {}}}
        setup = {"date": "d", "tree": "t", "guest": "g", "host": "h",
                 "rounds": 3, "configurations": {c: confs[c][2]
                                                 for c in names},
                 "baseline": {"binary": "/b/v", "commit": "x",
                              "label": "our virtiofsd at x"}}
        with tempfile.TemporaryDirectory() as d:
            tree.write_reports(d, setup, res, [])
            with open(os.path.join(d, "tree.md")) as f:
                lines = f.read().splitlines()
        self.assertIn("Baseline: our virtiofsd at x (/b/v).", lines)
        self.assertIn("| tar x | ours-auto | 1.00 [1.00-1.00] | 0.60 "
                      "[0.50-0.70] | worse: 1.00 vs 0.60 s: 1.67x, 67% "
                      "slower |", lines)
        self.assertIn("| walk 50k cold | ours-auto | 3.00 [3.00-3.00] | - | "
                      "no worse: the baseline did not complete it |", lines)
        self.assertIn("| find | ours-auto | 1.00 [1.00-1.00] | 1.00 "
                      "[1.00-1.00] | no worse: 1.00 vs 1.00 s: 1.00x |", lines)


class Loadgen(unittest.TestCase):
    """bench/loadgen.py's verdicts (issue 40's targets)"""

    @staticmethod
    def res(ours, rust, ours2=None):
        """Figures for getattr: {daemon: {"qQ": {mix: {"dD": {...}}}}}"""
        def conf(figs):
            return {"getattr": {f"d{d}": {k: fig(*v) for k, v in m.items()}
                                for d, m in figs.items()}}
        r = {"ours": {"q1": conf(ours)}, "rust": {"q1": conf(rust)}}
        if ours2:
            r["ours"]["q2"] = conf(ours2)
        return r

    def verdicts(self, res, floor=None):
        fl = {m: {"p50": fig(*v)} for m, v in (floor or {}).items()}
        return {what.split(": ", 1)[1]: (ok, figs)
                for what, ok, figs in loadgen.targets(res, fl)}

    def test_cpu_per_request_twice_rust(self):
        v = self.verdicts(self.res({32: {"cpu_us": (1, 1, 1)}},
                                   {32: {"cpu_us": (2, 2, 2)}}))
        key = ("ours serves at least 2x the Rust daemon's requests per "
               "daemon CPU second (depth 32)")
        self.assertEqual(v[key], (True, "1.00 vs 2.00 CPU us a request: "
                                        "2.00x"))
        v = self.verdicts(self.res({32: {"cpu_us": (1, 1.1, 1.2)}},
                                   {32: {"cpu_us": (2, 2, 2)}}))
        self.assertFalse(v[key][0])

    def test_latency_against_rust_and_floor(self):
        res = self.res({1: {"p50_us": (3, 3, 9)}}, {1: {"p50_us": (5, 5, 5)}})
        v = self.verdicts(res, {"getattr": (0.5, 0.5, 0.5),
                                "transport": (1, 1, 1)})
        self.assertEqual(v["depth 1 p50 of ours at most 0.6x Rust's"],
                         (True, "3.0 vs 5.0 us: 0.60x"))
        self.assertEqual(v["depth 1 p50 of ours within 2x of the floor plus "
                           "the transport"], (True, "3.0 vs 1.5 us: 2.00x"))
        v = self.verdicts(res, {"getattr": (0.4, 0.4, 0.4),
                                "transport": (1, 1, 1)})
        self.assertFalse(v["depth 1 p50 of ours within 2x of the floor plus "
                           "the transport"][0])
        # No floor measured: no verdict, rather than one against nothing
        self.assertNotIn("depth 1 p50 of ours within 2x of the floor plus "
                         "the transport", self.verdicts(res))

    def test_two_queues(self):
        two = {"rps": (150, 161, 170), "host_busy_cpus": (2, 2, 2),
               "daemon_cpus": (1, 1, 1), "frontend_cpu_us": (1, 1, 1)}
        res = self.res({32: {"rps": (100, 100, 100)}}, {}, {32: two})
        ok, figs = self.verdicts(res)["two request queues at least 1.6x one "
                                      "(ours, depth 32)"]
        self.assertTrue(ok)
        self.assertTrue(figs.startswith("1.61x"), figs)
        two["rps"] = (150, 159, 170)
        res = self.res({32: {"rps": (100, 100, 100)}}, {}, {32: two})
        self.assertFalse(self.verdicts(res)["two request queues at least "
                                            "1.6x one (ours, depth 32)"][0])


class Density(unittest.TestCase):
    """bench/density.py: the targets from memory and time medians."""

    @staticmethod
    def n(total_mib, boot_mib, t):
        return {"mem work total": fig(total_mib * 1024),
                "mem boot total": fig(boot_mib * 1024),
                "boot+work s": t}

    def res(self, four_mib, t_dax, t_nowin):
        return {
            "dax-exec": {"1": self.n(300, 250, t_dax),
                         "4": self.n(four_mib, 1000, t_dax)},
            "nowin": {"1": self.n(330, 240, t_nowin),
                      "4": self.n(1300, 960, t_nowin)},
        }

    def verdicts(self, res):
        return {what: (ok, f) for what, ok, f in density.targets(res)}

    def test_memory_met_missed_and_figure(self):
        v = self.verdicts(self.res(390, fig(10, 10, 10), fig(10, 10, 10)))
        mem = "dax-exec: host memory, 4 guests <= 1.3 x 1 guest"
        self.assertEqual(v[mem], (True, "390 vs 300 MiB: 1.30x"))
        v = self.verdicts(self.res(1150, fig(10, 10, 10), fig(10, 10, 10)))
        self.assertEqual(v[mem], (False, "1150 vs 300 MiB: 3.83x"))
        # The work's part: 150 vs 50 MiB
        work = [k for k in v if k.startswith("dax-exec: the work's part")]
        self.assertEqual(v[work[0]], (False, "150 vs 50 MiB: 3.00x"))
        # Without the window a figure, no verdict
        self.assertEqual(v["nowin: host memory, 4 guests / 1 guest"],
                         (None, "1300 vs 330 MiB: 3.94x"))

    def test_time_met_missed_and_spread(self):
        key = ("dax-exec: boot+work with 4 guest(s) <= 1.1 x without the "
               "window")
        v = self.verdicts(self.res(400, fig(10, 11, 12), fig(10, 10.5, 11)))
        self.assertEqual(v[key], (True, "11.0 vs 10.5 s: 1.05x"))
        v = self.verdicts(self.res(400, fig(11, 12, 13), fig(10, 10.5, 11)))
        self.assertEqual(v[key], (False, "12.0 vs 10.5 s: 1.14x "
                                         "(spreads overlap)"))
        v = self.verdicts(self.res(400, fig(13, 14, 15), fig(10, 10.5, 11)))
        self.assertEqual(v[key], (False, "14.0 vs 10.5 s: 1.33x"))

    def test_report_from_json(self):
        res = self.res(390, fig(10, 10, 10), fig(12, 12, 12))
        del res["nowin"]["4"]
        data = {"setup": {"date": "d", "root": "r", "guest": "g",
                          "rounds": 1},
                "configs": {"nowin": "no window", "dax-exec": "exec"},
                "results": res, "errors": []}
        with tempfile.TemporaryDirectory() as out:
            path = os.path.join(out, "density.json")
            with open(path, "w") as f:
                json.dump(data, f)
            # The hand-written notes of an earlier report are kept
            with open(os.path.join(out, "density.md"), "w") as f:
                f.write("old figures\n" + density.NOTES_MARK + "\nmine\n")
            with open(path) as f:
                density.write_report(json.load(f), out)
            with open(os.path.join(out, "density.md")) as f:
                md = f.read()
            self.assertTrue(os.path.exists(os.path.join(out, "density.svg")))
        # Configurations in their order; a set that did not run is "-"
        self.assertIn("| | nowin | dax-exec |", md)
        self.assertNotIn("old figures", md)
        self.assertTrue(md.endswith(density.NOTES_MARK + "\nmine\n"))
        self.assertIn("| host memory after the work (MiB) | - | "
                      "390 [390-390] |", md)
        self.assertIn("- met: dax-exec: boot+work with 1 guest(s) <= 1.1 x "
                      "without the window: 10.0 vs 12.0 s: 0.83x", md)


class KvmEstimate(unittest.TestCase):
    """bench/kvm_estimate.py: the round trip under KVM on paper"""

    def test_guest_part_added_to_both_daemons(self):
        data = {"results": {
            "ours": {"q1": {"getattr": {"d1": {"p50_us": fig(3, 3, 3)},
                                        "d32": {"cpu_us": fig(1, 1, 1)}}}},
            "rust": {"q1": {"getattr": {"d1": {"p50_us": fig(5, 5, 5)},
                                        "d32": {"cpu_us": fig(3, 3, 3)}}},
                     # A mix only one daemon ran has no row
                     "lookup": {"d1": {"p50_us": fig(4, 4, 4)}}}}}
        r = kvm_estimate.rows(data, (4.0, 12.0))
        self.assertEqual([x["mix"] for x in r], ["getattr"])
        self.assertEqual(r[0]["kvm_ours"], (7.0, 15.0))
        self.assertEqual(r[0]["kvm_rust"], (9.0, 17.0))
        self.assertAlmostEqual(r[0]["ratio"][0], 7 / 9)
        self.assertEqual(r[0]["saved_us"], 2)
        self.assertEqual(r[0]["cpu_saved_s_per_m"], 2)
        md = kvm_estimate.report(data, (4.0, 12.0))
        self.assertIn("| getattr | 3.0 | 5.0 | 7.0-15.0 | 9.0-17.0 | "
                      "0.78x-0.88x | +2.0 |", md)
        self.assertIn("| getattr | 1.00 | 3.00 | 3.00x | +2.00 |", md)


if __name__ == "__main__":
    unittest.main()

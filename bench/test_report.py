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
import run  # noqa: E402


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


if __name__ == "__main__":
    unittest.main()

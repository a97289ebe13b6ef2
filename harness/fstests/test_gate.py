#!/usr/bin/env python3
"""run.py --gate's verdicts from made-up results, no guest: each way a
result can be wrong or missing fails the gate, and what known.tsv
explains does not.  The last case runs run.py itself on a made-up
results directory (--report-only --gate).  Runs in a second."""

import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run  # noqa: E402

NAMES = ["ours", "ours-dax", "rust"]
TESTS = ["generic/001", "generic/002", "generic/003"]
META = {n: {"problems": []} for n in NAMES}


def results(**override):
    """Every test passed everywhere, but for OVERRIDE: {config_test:
    status or None (no result)}, config_test as ours_001."""
    res = {n: {t: ("pass", 1.0, "") for t in TESTS} for n in NAMES}
    for key, st in override.items():
        conf, num = key.rsplit("_", 1)
        conf = conf.replace("_", "-")
        t = f"generic/{num}"
        if st is None:
            del res[conf][t]
        else:
            res[conf][t] = (st, 1.0, f"made up: {st}")
    return res


class Gate(unittest.TestCase):
    def verdict(self, res, known=None, tests=TESTS, names=NAMES,
                meta=META):
        lines, bad = run.gate(names, tests, res, meta, known or {})
        return bad, "\n".join(lines)

    def assertFails(self, res, text, **kw):
        bad, out = self.verdict(res, **kw)
        self.assertTrue(bad, out)
        self.assertIn("FAIL: " + text, out)

    def assertPasses(self, res, **kw):
        bad, out = self.verdict(res, **kw)
        self.assertFalse(bad, out)
        self.assertNotIn("FAIL", out)
        return out

    def test_all_passed(self):
        self.assertPasses(results())

    def test_rust_passed_ours_not(self):
        self.assertFails(results(ours_dax_002="fail"),
                         "generic/002 passed on the Rust daemon, not on "
                         "ours-dax (fail)")
        # explained for exactly that configuration: reported, not failed
        out = self.assertPasses(
            results(ours_dax_002="fail"),
            known={"generic/002": ("ours-dax", "a limit of DAX")})
        self.assertIn("known: generic/002", out)
        # explained for another one only: fails
        self.assertFails(results(ours_002="timeout"),
                         "generic/002 passed on the Rust daemon",
                         known={"generic/002": ("ours-dax", "DAX")})

    def test_failed_everywhere_unexplained(self):
        res = results(ours_003="fail", ours_dax_003="timeout",
                      rust_003="fail")
        self.assertFails(res, "generic/003 failed on every configuration "
                         "that ran it")
        out = self.assertPasses(
            res, known={"generic/003": ("all", "a limit of FUSE")})
        self.assertIn("known: generic/003 failed on every configuration",
                      out)
        # a reason for some of them only does not cover the rest
        self.assertFails(res, "generic/003 failed on every configuration",
                         known={"generic/003": ("ours,rust", "timeouts")})

    def test_run_nowhere(self):
        res = results(ours_001="notrun", ours_dax_001="notrun",
                      rust_001="notrun")
        self.assertFails(res, "generic/001 was run on no configuration")
        self.assertPasses(res, known={"generic/001": ("all", "needs a "
                                                      "block device")})

    def test_listed_test_with_no_result_anywhere(self):
        res = results(ours_002=None, ours_dax_002=None, rust_002=None)
        self.assertFails(res, "generic/002: no result on ours, ours-dax, "
                         "rust")

    def test_result_missing_for_ours(self):
        self.assertFails(results(ours_001=None),
                         "generic/001: no result on ours")
        self.assertFails(results(ours_dax_003=None),
                         "generic/003: no result on ours-dax")
        # without the list, a result elsewhere still shows the gap
        self.assertFails(results(ours_001=None),
                         "generic/001: no result on ours", tests=None)

    def test_configuration_passed_nothing_or_ended_badly(self):
        res = results(**{f"ours_dax_00{i}": "notrun" for i in (1, 2, 3)})
        self.assertFails(res, "ours-dax passed no test")
        meta = dict(META, ours={"problems": ["guest 1: crashed"]})
        self.assertFails(results(), "ours: guest 1: crashed", meta=meta)
        self.assertFails({n: results()[n] for n in ("ours", "ours-dax")},
                         "--gate needs the rust configuration",
                         names=["ours", "ours-dax"])

    def test_run_py_gate_exit_status(self):
        """run.py --report-only --gate reads the results and the list"""
        with tempfile.TemporaryDirectory() as d:
            lst = os.path.join(d, "tests.list")
            with open(lst, "w") as f:
                f.write("".join(t + "\n" for t in TESTS))

            def write(res):
                for n in NAMES:
                    os.makedirs(os.path.join(d, n, "run"), exist_ok=True)
                    with open(os.path.join(d, n, "run", "results.tsv"),
                              "w") as f:
                        for t, (st, s, why) in res[n].items():
                            f.write(f"{t}\t{st}\t{s}\t{why}\n")

            def gate():
                return subprocess.run(
                    [sys.executable, os.path.join(HERE, "run.py"),
                     "--report-only", "--gate", "--out", d, "--tests", lst],
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                    text=True)

            write(results())
            r = gate()
            self.assertEqual(r.returncode, 0, r.stdout)
            write(results(ours_002=None))
            r = gate()
            self.assertEqual(r.returncode, 1, r.stdout)
            self.assertIn("FAIL: generic/002: no result on ours", r.stdout)


if __name__ == "__main__":
    unittest.main()

# SPDX-License-Identifier: BSD-3-Clause
"""bench/pytorch_ddp.py runs and reports what issue 11 asks for: for each model
and N, the communication time per step and the whole step with Sigma's hook
and with gloo, their ratio (and per repetition), the verdict against the
target (ratio >= 1.0, stretch 2.0), libsigma's counters, as JSON. On the tiny
model, with one repetition: it checks the script, it measures nothing.
bench/local_push_pull.py too (issue 30): on 1 MB, the C path and the Python
one it replaced, the medians of the reps and their ratio, as JSON."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import sgtest

sgtest.need_torch()

BENCH = os.path.join(sgtest.HERE, "..", "..", "bench", "pytorch_ddp.py")
LOCAL = os.path.join(sgtest.HERE, "..", "..", "bench", "local_push_pull.py")


class Bench(unittest.TestCase):
    def test_report(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "b.json")
            r = subprocess.run([sys.executable, BENCH, "--models", "tiny", "--workers", "2",
                                "--steps", "2", "--warmup", "1", "--reps", "2", "--nodes", "1",
                                "--json", out], capture_output=True, text=True, timeout=240)
            self.assertEqual(r.returncode, 0, r.stderr[-3000:])
            with open(out) as f:
                doc = json.load(f)
        self.assertEqual((doc["bench"], doc["models"], doc["workers"]),
                         ("pytorch_ddp", ["tiny"], [2]))
        (row,) = doc["results"]
        # local ranks reach local nodes through shared memory unless told otherwise
        want = "udp" if os.environ.get("SIGMA_LOCAL_TRANSPORT") == "udp" else "shm"
        self.assertEqual((doc["transport"], row["transport"]), (want, want))
        self.assertIn(f"over {want}", r.stdout)
        for m in ("none", "gloo", "sigma"):
            self.assertEqual(len(row[m]["step_ms_all"]), 4)  # 2 steps x 2 repetitions
            self.assertEqual(len(row[m]["comm_ms_reps"]), 2)
            self.assertGreater(row[m]["step_ms"], 0)
        for m in ("gloo", "sigma"):
            self.assertGreater(row[m]["comm_ms"], 0)
            self.assertGreaterEqual(row[m]["buckets"], 1)
        self.assertAlmostEqual(row["ratio_comm"], row["gloo"]["comm_ms"] / row["sigma"]["comm_ms"])
        self.assertAlmostEqual(row["ratio_step"], row["gloo"]["step_ms"] / row["sigma"]["step_ms"])
        t = row["target"]
        self.assertEqual(t["met"], row["ratio_comm"] >= 1.0)
        self.assertEqual(t["stretch_met"], row["ratio_comm"] >= 2.0)
        self.assertEqual("missed_by" in t, not t["met"])
        self.assertEqual(doc["target"]["met"], t["met"])
        self.assertEqual(row["sigma"]["per_step"]["ops_failed"], 0)
        self.assertGreater(row["sigma"]["per_step"]["tx_packets"], 0)
        self.assertIn("target tiny N=2: comm ratio", r.stdout)
        for key in ("cpu", "loadavg", "torch", "ctypes_call_us"):
            self.assertIn(key, doc)

    def test_local_push_pull(self):
        if subprocess.run(["git", "-C", sgtest.HERE, "rev-parse"], capture_output=True).returncode:
            self.skipTest("not a git checkout: the Python path's revision is not here")
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "l.json")
            r = subprocess.run([sys.executable, LOCAL, "--mb", "1", "--reps", "5", "--json", out],
                               capture_output=True, text=True, timeout=240)
            self.assertEqual(r.returncode, 0, r.stderr[-3000:])
            with open(out) as f:
                doc = json.load(f)
        self.assertEqual((doc["bench"], doc["local_ranks"], doc["bytes"], doc["reps"]),
                         ("local_push_pull", 2, 1 << 20, 5))
        self.assertTrue(doc["before_rev"])
        for key in ("before", "after"):
            times = doc[key]["times_s"]
            self.assertEqual(len(times), 5)
            self.assertEqual(doc[key]["median_s"], sorted(times)[2])
        self.assertAlmostEqual(doc["after_over_before"],
                               doc["after"]["median_s"] / doc["before"]["median_s"])


if __name__ == "__main__":
    unittest.main(verbosity=2)

# SPDX-License-Identifier: BSD-3-Clause
"""python3 -m sigma.launch: the env:// variables, [rank] prefixes, a failing
rank stopping the others within --grace, Ctrl-C (SIGINT) stopping every rank
and the node it started with nothing left behind, --make-job, and the example
trained end to end through a node the launcher starts (what ./sigma
train-demo runs)."""

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import sgtest

ENV = dict(os.environ, PYTHONPATH=sgtest.SRC)
LAUNCH = [sys.executable, "-m", "sigma.launch"]


def procs_mentioning(text: str) -> list[int]:
    """Processes whose command line contains ``text`` (to check none is left)."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if text.encode() in f.read():
                        found.append(int(pid))
            except OSError:
                pass
    return found


def _rank_sleeps_or_fails(rank, n, sleep):
    if rank == 1 and sleep:
        raise ValueError("rank 1 fails")
    time.sleep(sleep)
    return rank


class Launch(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="sg_launch_")
        self.addCleanup(subprocess.run, ["rm", "-rf", self.tmp])
        self.script = os.path.join(self.tmp, "rank.py")
        with open(self.script, "w") as f:
            f.write(
                "import os, sys, time\n"
                "r = int(os.environ['RANK'])\n"
                "print('env', r, os.environ['WORLD_SIZE'], os.environ['LOCAL_RANK'],\n"
                "      os.environ['MASTER_ADDR'], os.environ['MASTER_PORT'],\n"
                "      os.environ.get('SIGMA_NODES', '-'), sys.argv[1:], flush=True)\n"
                "mode = sys.argv[1]\n"
                "if mode == 'fail' and r == 1:\n"
                "    sys.exit(3)\n"
                "if mode != 'ok':\n"
                "    open(os.path.join(os.path.dirname(__file__), f'up{r}'), 'w').close()\n"
                "    time.sleep(600)\n")

    def test_env_and_prefix(self):
        r = subprocess.run(LAUNCH + ["-n", "3", self.script, "ok", "x"], env=ENV,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = sorted(ln for ln in r.stdout.splitlines() if " env " in ln)
        self.assertEqual(len(lines), 3, r.stdout)
        ports = set()
        for rank, ln in enumerate(lines):
            m = re.match(rf"\[{rank}\] env {rank} 3 {rank} 127\.0\.0\.1 (\d+) - \['ok', 'x'\]",
                         ln)
            self.assertIsNotNone(m, ln)
            ports.add(m.group(1))
        self.assertEqual(len(ports), 1)

    def test_failing_rank_stops_the_others(self):
        t0 = time.monotonic()
        r = subprocess.run(LAUNCH + ["-n", "2", "--grace", "1", self.script, "fail"], env=ENV,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
        self.assertIn("rank 1 exited with status 3", r.stderr)
        self.assertLess(time.monotonic() - t0, 15)
        self.assertEqual(procs_mentioning(self.script), [])

    def test_ctrl_c_stops_ranks_and_nodes(self):
        p = subprocess.Popen(LAUNCH + ["-n", "2", "--local-nodes", "1", self.script, "hang"],
                             env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while not all(os.path.exists(os.path.join(self.tmp, f"up{r}")) for r in (0, 1)):
            self.assertLess(time.monotonic(), deadline, "the ranks did not start")
            self.assertIsNone(p.poll())
            time.sleep(0.05)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 128 + signal.SIGINT, err)
        self.assertIn("SIGINT: stopping every rank", err)
        folder = re.search(r"unix:(\S+)/local0\.sock", out).group(1)
        self.assertFalse(os.path.exists(folder), "the nodes' folder is left")
        self.assertEqual(procs_mentioning(folder), [], "a node is left")
        self.assertEqual(procs_mentioning(self.script), [], "a rank is left")

    def test_bad_usage(self):
        for args, want in ((["-n", "0", self.script], "-n must be 1..64"),
                           (["-n", "2", "--nodes", "x", "--local-nodes", "1", self.script],
                            "not both")):
            r = subprocess.run(LAUNCH + args, env=ENV, capture_output=True, text=True,
                               timeout=30)
            self.assertEqual(r.returncode, 2)
            self.assertIn(want, r.stderr)

    def test_make_job_without_torch_distributed(self):
        # the launcher makes the job; ranks open it from SIGMA_JOB/SIGMA_RANK alone
        script = os.path.join(self.tmp, "job.py")
        with open(script, "w") as f:
            f.write("import array, os, sigma\n"
                    "s = sigma.Session(os.environ['SIGMA_JOB'], int(os.environ['SIGMA_RANK']))\n"
                    "b = array.array('d', [float(s.rank + 1)] * 1000)\n"
                    "s.push_pull(b, name='x').wait(30)\n"
                    "print('sum', b[0], b[-1], s.job.workers, s.job.mode, flush=True)\n"
                    "s.close()\n")
        r = subprocess.run(LAUNCH + ["-n", "3", "--local-nodes", "2", "--make-job", "--mode",
                                     "deterministic", script], env=ENV, capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"sigma.launch: job \d+ made on 2 node\(s\)")
        self.assertEqual(r.stdout.count("sum 6.0 6.0 3 deterministic"), 3, r.stdout)
        r = subprocess.run(LAUNCH + ["-n", "2", "--make-job", script], env=ENV,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--make-job needs nodes", r.stderr)

    def test_run_forked_stops_at_any_failing_rank(self):
        # rank 1 fails while rank 0 would wait a minute (as in a collective whose
        # peer is gone): the call fails with rank 1's error at once, rank 0 killed
        from sigma.launch import RankFailed, run_forked
        self.assertEqual(run_forked(3, _rank_sleeps_or_fails, 0.0, timeout=60), [0, 1, 2])
        t0 = time.monotonic()
        with self.assertRaises(RankFailed) as cm:
            run_forked(2, _rank_sleeps_or_fails, 60.0, timeout=120)
        self.assertLess(time.monotonic() - t0, 20)
        self.assertIn("rank 1: ValueError: rank 1 fails", str(cm.exception))

    def test_example_trains_through_a_node(self):
        sgtest.need_torch()
        example = os.path.join(sgtest.HERE, "..", "..", "examples", "pytorch", "train.py")
        r = subprocess.run(LAUNCH + ["-n", "2", "--local-nodes", "1", example, "--steps", "6"],
                           env=ENV, capture_output=True, text=True, timeout=180)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        for want in (r"\[0\] sigma: job \d+ \(sync, 2 workers\) on local0 127\.0\.0\.1:\d+",
                     r"\[0\] 6 steps of 2 x 32 samples", r"\[0\] sigma: \d+ push_pulls"):
            self.assertRegex(r.stdout, want)
        loss = re.search(r"loss (\d+\.\d+) -> (\d+\.\d+)", r.stdout)
        self.assertLess(float(loss.group(2)), float(loss.group(1)), "the loss did not go down")


if __name__ == "__main__":
    unittest.main(verbosity=2)

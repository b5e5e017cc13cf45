# SPDX-License-Identifier: BSD-3-Clause
"""python3 -m sigma.launch: the env:// variables, [rank] prefixes, a failing
rank stopping the others within --grace, Ctrl-C (SIGINT) stopping every rank
and the node it started with nothing left behind, --make-job (with --auth:
each rank its own keys), and the example
trained end to end through a node the launcher starts (what ./sigma
train-demo runs)."""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import sgtest
from sigma.localnodes import start_local_nodes

ENV = dict(os.environ, PYTHONPATH=sgtest.SRC)
LAUNCH = [sys.executable, "-m", "sigma.launch"]


def _rank_sleeps_or_fails(rank, n, sleep):
    if rank == 1 and sleep:
        raise ValueError("rank 1 fails")
    time.sleep(sleep)
    return rank


def _rank_0_stuck_here(rank, n):
    if rank == 0:
        time.sleep(60)
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

    def write_script(self, name: str, text: str) -> str:
        """A rank's script in the test's folder; returns its path."""
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

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
        self.assertEqual(sgtest.procs_mentioning(self.script), [])

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
        self.assertEqual(sgtest.procs_mentioning(folder), [], "a node is left")
        self.assertEqual(sgtest.procs_mentioning(self.script), [], "a rank is left")

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
        script = self.write_script(
            "job.py",
            "import array, os, sigma\n"
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

    def test_make_job_with_auth(self):
        # --auth --make-job: each rank's SIGMA_JOB is its own descriptor, with its keys only
        script = self.write_script(
            "auth.py",
            "import array, os, sigma\n"
            "d = os.environ['SIGMA_JOB']\n"
            "s = sigma.Session(d, int(os.environ['SIGMA_RANK']))\n"
            "assert s.job.auth and s.job.rank == s.rank, s.job\n"
            "assert os.environ['SIGMA_AUTH'] == 'mac'\n"
            "b = array.array('d', [float(s.rank + 1)] * 3000)\n"
            "s.push_pull(b, name='x').wait(30)\n"
            "print('sum', b[0], b[-1], 'keys', d.split('keys=')[1][:16], flush=True)\n"
            "s.close()\n")
        r = subprocess.run(LAUNCH + ["-n", "3", "--local-nodes", "1", "--make-job", "--auth",
                                     script], env=ENV, capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stdout.count("sum 6.0 6.0"), 3, r.stdout)
        keys = re.findall(r"keys ([0-9a-f]{16})", r.stdout)
        self.assertEqual(len(set(keys)), 3, r.stdout)  # three ranks, three keys

    def test_make_job_broadcast_optimizer_state(self):
        # under --make-job (no torch.distributed), rank 0's optimizer state reaches rank 1
        sgtest.need_torch()
        script = self.write_script(
            "optstate.py",
            "import torch, sigma.torch as sgt\n"
            "torch.set_num_threads(1)\n"
            "sgt.init()\n"
            "r = sgt.rank()\n"
            "p = torch.nn.Parameter(torch.ones(4))\n"
            "opt = torch.optim.SGD([p], lr=0.1 * (r + 1), momentum=0.9)\n"
            "p.grad = torch.full((4,), float(r + 1))\n"
            "opt.step()\n"
            "sgt.broadcast_optimizer_state(opt, root_rank=0)\n"
            "print('opt', r, opt.param_groups[0]['lr'],\n"
            "      opt.state[p]['momentum_buffer'].tolist(), flush=True)\n"
            "sgt.shutdown()\n")
        r = subprocess.run(LAUNCH + ["-n", "2", "--local-nodes", "1", "--make-job", script],
                           env=ENV, capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        for rank in (0, 1):
            self.assertIn(f"[{rank}] opt {rank} 0.1 [1.0, 1.0, 1.0, 1.0]", r.stdout)

    def test_mpirun_without_torch_distributed(self):
        # a real mpirun (Open MPI) of 2 ranks on this machine, no MASTER_ADDR, no
        # init_process_group: the ranks meet through a FileStore named by mpirun's job id
        sgtest.need_torch()
        mpirun = shutil.which("mpirun")
        if mpirun is None:
            self.skipTest("no mpirun (Debian package openmpi-bin)")
        script = self.write_script(
            "mpi.py",
            "import os, torch, sigma.torch as sgt\n"
            "torch.set_num_threads(1)\n"
            "sgt.init()\n"
            "r = sgt.rank()\n"
            "y = sgt.push_pull(torch.arange(5000, dtype=torch.float64) + 1e6 * r,\n"
            "                  average=False, name='y')\n"
            "want = 2 * torch.arange(5000, dtype=torch.float64) + 1e6\n"
            "got = (r, sgt.size(), sgt.local_rank(), sgt.local_size(), torch.equal(y, want))\n"
            "sgt.shutdown()\n"
            "# a file each: mpirun interleaves the ranks' output within lines\n"
            "with open(os.path.join(os.path.dirname(__file__), f'mpi{r}'), 'w') as f:\n"
            "    f.write(' '.join(map(str, got)))\n")

        def stores():
            return {f for f in os.listdir(tempfile.gettempdir()) if f.startswith("sigma-mpirun-")}
        before = stores()
        with start_local_nodes(1) as nodes:
            env = {k: v for k, v in os.environ.items()
                   if k not in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE",
                                "LOCAL_RANK", "LOCAL_WORLD_SIZE", "SIGMA_RANK",
                                "SIGMA_WORKERS", "SIGMA_JOB")}
            env.update(PYTHONPATH=sgtest.SRC, SIGMA_NODES=nodes.env(), OMP_NUM_THREADS="1")
            r = subprocess.run([mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2",
                                sys.executable, script], env=env, capture_output=True,
                               text=True, timeout=120, stdin=subprocess.DEVNULL)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        for rank in (0, 1):
            with open(os.path.join(self.tmp, f"mpi{rank}")) as f:
                self.assertEqual(f.read(), f"{rank} 2 {rank} 2 True", r.stdout + r.stderr)
        self.assertEqual(sgtest.procs_mentioning(script), [], "a rank is left")
        self.assertEqual(stores() - before, set(), "the FileStore's file is left")

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

    def test_run_forked_late_rank_prints_its_stacks(self):
        # a rank past the timeout shows where it hangs (faulthandler, its stderr)
        # before it is killed: a hang in CI must be diagnosable from the log
        from sigma.launch import RankFailed, run_forked
        err = os.path.join(self.tmp, "stderr")
        saved = os.dup(2)
        try:
            with open(err, "w") as f:
                os.dup2(f.fileno(), 2)
            t0 = time.monotonic()
            with self.assertRaises(RankFailed) as cm:
                run_forked(2, _rank_0_stuck_here, timeout=2)
            took = time.monotonic() - t0
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        self.assertLess(took, 15)
        self.assertIn("ranks [0]: no result within 2 s", str(cm.exception))
        with open(err) as f:
            dump = f.read()
        self.assertIn("_rank_0_stuck_here", dump, dump)

    def test_example_trains_through_a_node(self):
        sgtest.need_torch()
        example = os.path.join(sgtest.HERE, "..", "..", "examples", "pytorch", "train.py")
        r = subprocess.run(LAUNCH + ["-n", "2", "--local-nodes", "1", example, "--steps", "6"],
                           env=ENV, capture_output=True, text=True, timeout=180)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        # the 2 ranks are one machine's: aggregated locally, they are 1 worker at the node
        for want in (r"\[0\] sigma: job \d+ \(sync, 1 workers\) on local0 127\.0\.0\.1:\d+",
                     r"\[0\] 6 steps of 2 x 32 samples", r"\[0\] sigma: \d+ push_pulls"):
            self.assertRegex(r.stdout, want)
        loss = re.search(r"loss (\d+\.\d+) -> (\d+\.\d+)", r.stdout)
        self.assertLess(float(loss.group(2)), float(loss.group(1)), "the loss did not go down")


if __name__ == "__main__":
    unittest.main(verbosity=2)

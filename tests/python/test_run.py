# SPDX-License-Identifier: BSD-3-Clause
"""sigmarun (python3 -m sigma.run): the plan from the command line (hosts and
slots, rank 0's address, the remote command line, -x, what is refused before
anything starts); 2 local ranks with the local node it starts by default,
summing exactly; a rank that fails ending the job with its status and a clear
message, no rank and no node left; ranks on a "remote" host through
--launcher-cmd (a stand-in for ssh that runs the command line here)."""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
import unittest

import sgtest
from sigma import run as sr
from sigma.localnodes import start_local_nodes

ENV = dict(os.environ, PYTHONPATH=sgtest.SRC)
for k in sr._FOREIGN + ("SIGMA_NODES", "SIGMA_ETCD"):
    ENV.pop(k, None)
RUN = [sys.executable, "-m", "sigma.run"]

RANK_SCRIPT = """\
import os, sys, time
if sys.argv[1:] == ["fail"]:
    if os.environ["RANK"] == "1":
        sys.exit(3)
    time.sleep(600)
import torch, sigma.torch as sgt
torch.set_num_threads(1)
sgt.init()
r, n = sgt.rank(), sgt.size()
y = sgt.allreduce(torch.arange(1000, dtype=torch.float64) + 1e6 * r, op=sgt.Sum, name="y")
want = n * torch.arange(1000, dtype=torch.float64) + 1e6 * n * (n - 1) / 2
print("sum", r, n, sgt.local_rank(), sgt.local_size(), torch.equal(y, want), flush=True)
sgt.shutdown()
"""

# ssh's form (HOST COMMAND-LINE), run here: the stand-in for a remote host
FAKE_SSH = """\
#!/bin/sh
# ssh needs this machine's HOME and PATH (keys, agent): the launcher must pass them
[ -n "$HOME" ] && [ -n "$PATH" ] || { echo "fake-ssh: started without HOME or PATH" >&2; exit 9; }
echo "fake-ssh $1" >&2
shift
exec sh -c "$*"
"""


def args(*argv: str) -> argparse.Namespace:
    return sr.parser().parse_args(list(argv))


class Plan(unittest.TestCase):
    def test_hosts(self):
        self.assertEqual(sr.parse_hosts("a:2,b,c:4"), [("a", 2), ("b", 1), ("c", 4)])
        for bad, want in (("a:0", "slots >= 1"), ("a:x", "want host or host:slots"),
                          (",a", "want host"), ("a:1,a:2", "named twice")):
            with self.assertRaises(sr.UsageError) as cm:
                sr.parse_hosts(bad)
            self.assertIn(want, str(cm.exception))

    def test_plan(self):
        a = args("-np", "3", "-H", "localhost:2,gpu7:4", "--master-addr", "10.1.0.1",
                 "-x", "A=1 2", "--launcher-cmd", "ssh -p 2222", "train.py", "--lr", "0.1")
        ranks = sr.plan(a, {"SIGMA_NODES": "n:7070", "OMPI_COMM_WORLD_RANK": "5",
                            "SIGMA_SHM": "/x.shm", "KEEP": "k"})
        self.assertEqual([(r.rank, r.host, r.local) for r in ranks],
                         [(0, "localhost", True), (1, "localhost", True), (2, "gpu7", False)])
        e0 = ranks[0].env
        self.assertEqual((e0["RANK"], e0["WORLD_SIZE"], e0["LOCAL_RANK"],
                          e0["LOCAL_WORLD_SIZE"], e0["MASTER_ADDR"], e0["A"], e0["KEEP"]),
                         ("0", "3", "0", "2", "10.1.0.1", "1 2", "k"))
        self.assertNotIn("OMPI_COMM_WORLD_RANK", e0)  # another launcher's: never two sources
        self.assertEqual(ranks[0].argv, [sys.executable, "train.py", "--lr", "0.1"])
        r2 = ranks[2]
        self.assertEqual(r2.argv[:4], ["ssh", "-p", "2222", "gpu7"])
        line = shlex.split(r2.argv[4])
        self.assertEqual(line[:5], ["cd", os.getcwd(), "&&", "exec", "env"])
        for want in ("RANK=2", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1", "WORLD_SIZE=3",
                     "MASTER_ADDR=10.1.0.1", "SIGMA_NODES=n:7070", "A=1 2"):
            self.assertIn(want, line)
        self.assertEqual(line[-4:], [sys.executable, "train.py", "--lr", "0.1"])
        self.assertFalse(any(x.startswith(("SIGMA_SHM=", "KEEP=")) for x in line))
        self.assertEqual(r2.env["MASTER_PORT"], e0["MASTER_PORT"])
        # the first host is rank 0's address when it is not this machine
        ranks = sr.plan(args("-np", "2", "-H", "a,b", "x.py"), {})
        self.assertEqual(ranks[1].env["MASTER_ADDR"], "a")
        # horovodrun's form: the interpreter as given
        self.assertEqual(sr.plan(args("-np", "1", "python3", "t.py"), {})[0].argv,
                         ["python3", "t.py"])
        self.assertEqual(sr.plan(args("-np", "1", "-m", "pkg.train", "-v"), {})[0].argv,
                         [sys.executable, "-m", "pkg.train", "-v"])

    def test_refused(self):
        for argv, want in ((["-np", "5", "-H", "a:2,b:2", "t.py"], "has 4 slots"),
                           (["-np", "0", "t.py"], "want 1..256"),
                           (["-np", "2", "-H", "localhost,b", "t.py"],
                            "which b cannot reach: give --master-addr"),
                           (["-np", "1", "-x", "1X=2", "t.py"], "want NAME or NAME=VALUE"),
                           (["-np", "1", "-x", "SIGMA_NO_SUCH_VAR", "t.py"], "is not set here")):
            with self.assertRaises(sr.UsageError) as cm:
                sr.plan(args(*argv), {})
            self.assertIn(want, str(cm.exception))
        # the command line as a whole: each refused with status 2 and the reason, nothing run
        for argv, want in ((["-np", "2", "-H", "localhost:1,b:1", "--master-addr", "h", "t.py"],
                            "cannot reach summation nodes started here"),
                           (["-np", "2", "--nodes", "x", "--local-nodes", "1", "t.py"],
                            "not both"),
                           (["-np", "2", "--local-nodes", "0", "t.py"], "want K >= 1"),
                           (["-np", "2", "/nonexistent/t.py"], "no such script")):
            r = subprocess.run(RUN + argv, env=ENV, capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(want, r.stderr)
        r = subprocess.run(RUN + ["t.py"], env=ENV, capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 2)  # no -np: never a job of some default size
        self.assertIn("-np", r.stderr)

    def test_dry_run(self):
        r = subprocess.run(RUN + ["-np", "2", "-H", "h1:1,h2:1", "--nodes", "n:1", "--dry-run",
                                  "t.py"], env=ENV, capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), 2, r.stdout)
        self.assertTrue(lines[0].startswith("rank 0 on h1: ssh -tt -o BatchMode=yes h1 "))
        self.assertIn("RANK=1", lines[1])


class Run(unittest.TestCase):
    def setUp(self):
        sgtest.need_torch()
        self.tmp = tempfile.mkdtemp(prefix="sg_run_")
        self.addCleanup(subprocess.run, ["rm", "-rf", self.tmp])
        self.script = os.path.join(self.tmp, "rank.py")
        with open(self.script, "w") as f:
            f.write(RANK_SCRIPT)

    def sums(self, out: str, n: int, local: list) -> None:
        got = sorted(ln.split("] ", 1)[1] for ln in out.splitlines() if "] sum " in ln)
        self.assertEqual(got, [f"sum {r} {n} {local[r][0]} {local[r][1]} True"
                               for r in range(n)], out)

    def test_local_ranks_and_node(self):
        r = subprocess.run(RUN + ["-np", "2", self.script], env=ENV, capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("sigmarun: 1 local node(s)", r.stdout)
        self.sums(r.stdout, 2, [(0, 2), (1, 2)])
        self.assertEqual(sgtest.procs_mentioning(self.script), [])
        self.assertEqual(sgtest.procs_mentioning(self.tmp), [])

    def test_failing_rank_ends_the_job(self):
        t0 = time.monotonic()
        p = subprocess.Popen(RUN + ["-np", "2", "--grace", "1", self.script, "fail"], env=ENV,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = p.communicate(timeout=60)
        took = time.monotonic() - t0
        self.assertEqual(p.returncode, 3, out + err)
        self.assertIn("sigmarun: rank 1 (localhost) exited with status 3; stopping the others "
                      "within 1 s", err)
        self.assertLess(took, 20, "rank 0 (asleep for 600 s) was not stopped")
        self.assertEqual(sgtest.procs_mentioning(self.script), [], "a rank is left")
        # the node it started lives in sigma-nodes-<its pid>-*: gone with it
        self.assertEqual(sgtest.procs_mentioning(f"sigma-nodes-{p.pid}-"), [], "its node is left")

    def test_remote_host_through_the_launcher_command(self):
        fake = os.path.join(self.tmp, "fake-ssh")
        with open(fake, "w") as f:
            f.write(FAKE_SSH)
        os.chmod(fake, 0o755)
        with start_local_nodes(1) as nodes:
            env = dict(ENV)
            env.pop("SIGMA_SHM", None)
            r = subprocess.run(
                RUN + ["-np", "3", "-H", "localhost:2,faraway:1", "--master-addr", "127.0.0.1",
                       "--nodes", nodes.env(), "--launcher-cmd", fake, "-x", "PYTHONPATH",
                       "-x", "SIGMA_BUILD_DIR", self.script], env=env, capture_output=True,
                text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("[2] fake-ssh faraway", r.stdout)  # rank 2 went through the command
        self.sums(r.stdout, 3, [(0, 2), (1, 2), (0, 1)])
        self.assertEqual(sgtest.procs_mentioning(self.script), [])


if __name__ == "__main__":
    unittest.main(verbosity=2)

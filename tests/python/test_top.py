# SPDX-License-Identifier: BSD-3-Clause
"""sigmactl top in a real terminal (tmux, on a server of the test's own):
three nodes watched at once, a sigma-udpd whose job has rank 3 of 4 pushing
20 ms late, a second sigma-udpd that is killed while top runs, and a fake
node that answers garbage. The screen must show the job, rank 3 as the
straggler and first of the ranks, a line for each node that fails, a new
sort key after `s`, still draw at 20x5, and end on `q`. Without a terminal,
top prints plain text; bad flags and sort keys get an error naming the valid
ones. Skips (77) without tmux."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import unittest

import sgtest
import sigma
from sigma.localnodes import start_local_nodes
from test_straggler import SLOW, N, ELEMS, SlowRanks, sigmactl


class GarbageNode:
    """A Unix socket that answers every line with bytes that are not JSON-RPC."""

    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.halt = False
        self.thread = threading.Thread(target=self._serve)
        self.thread.start()

    def _serve(self) -> None:
        while not self.halt:
            try:
                c, _ = self.sock.accept()
            except OSError:
                continue
            with c:
                c.settimeout(1)
                try:
                    while not self.halt and c.recv(65536):
                        c.sendall(b"\x00\xffnot json at all }}}\n")
                except OSError:
                    pass

    def stop(self) -> None:
        self.halt = True
        self.thread.join(10)
        self.sock.close()


class Tmux:
    """A tmux server of this test only (-L), killed on stop()."""

    def __init__(self) -> None:
        self.name = f"sg-top-{os.getpid()}"

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(["tmux", "-L", self.name, *args], capture_output=True, text=True,
                              timeout=10, check=check)

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "top").stdout

    def wait(self, pred, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            s = self.screen()
            if pred(s) or time.monotonic() > deadline:
                return s
            time.sleep(0.2)

    def alive(self) -> bool:
        return self.run("has-session", "-t", "top", check=False).returncode == 0

    def stop(self) -> None:
        self.run("kill-server", check=False)


class Top(unittest.TestCase):
    def test_terminal(self):
        if shutil.which("tmux") is None:
            sgtest.skip("no tmux (Debian package tmux; ./sigma deps installs it)")
        ctl = sigmactl()
        folder = tempfile.mkdtemp(prefix="sg-top-")
        self.addCleanup(shutil.rmtree, folder, True)
        nodes = start_local_nodes(2)
        self.addCleanup(nodes.stop)
        garbage = GarbageNode(os.path.join(folder, "garbage.sock"))
        self.addCleanup(garbage.stop)
        job = sigma.create_job(nodes.targets[:1], N, tensors=[("t", ELEMS)])
        self.addCleanup(sigma.destroy_job, nodes.targets[:1], job.id)
        ranks = SlowRanks(job)
        self.addCleanup(ranks.stop)
        tm = Tmux()
        self.addCleanup(tm.stop)
        targets = [*nodes.targets, f"unix:{folder}/garbage.sock"]
        cmd = [ctl] + [a for t in targets for a in ("--node", t)] + ["top"]
        tm.run("new-session", "-d", "-s", "top", "-x", "130", "-y", "60", " ".join(cmd))

        def named(s: str) -> bool:
            return bool(re.search(rf"straggler: rank {SLOW}, last in", s))
        s = tm.wait(named, 5)
        self.assertTrue(named(s), s)
        self.assertIn(f"node {nodes.targets[0]}", s)
        self.assertIn(f"node {nodes.targets[1]}", s)
        self.assertRegex(s, rf"(?m)^\s+{job.id}\s+{N}\s+([0-9.]+|-)\s+([0-9.]+|-)\s+\d+.* "
                         rf"rank {SLOW}$")
        # from the second frame on: rounds/s and the Gbit/s its pushes bring (> 0)
        row = rf"(?m)^\s+{job.id}\s+{N}\s+([0-9.]+)\s+([0-9.]+)\s+\d+"

        def rates(x: str) -> bool:
            m = re.search(row, x)
            return m is not None and float(m.group(1)) > 0 and float(m.group(2)) > 0
        s = tm.wait(rates, 5)
        self.assertTrue(rates(s), s)
        rows = re.findall(r"(?m)^\s{4}\s*(\d+)\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+$", s)
        self.assertEqual(rows[:1], [str(SLOW)], s)  # the slowest first
        self.assertEqual(sorted(rows), sorted(str(r) for r in range(N)), s)
        # garbage datagrams to node 0: its drops by reason, on screen
        with open(nodes.nodes[0].log) as f:
            udp = int(re.search(r"on 127\.0\.0\.1:(\d+)", f.read()).group(1))
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sk:
            for _ in range(3):
                sk.sendto(b"short", ("127.0.0.1", udp))
        s = tm.wait(lambda x: re.search(r"drops by reason: .*engine_short 3\b", x) is not None,
                    5)
        self.assertRegex(s, r"drops by reason: .*engine_short 3\b")
        # the garbage node gets a line of its own, the others go on
        g = s[s.index(f"node {targets[2]}"):]
        self.assertRegex(g.splitlines()[1], r"lcores: .*(unreadable|Protocol|protocol|connect)", s)

        # a node that dies: a line that says so, and the view goes on
        nodes.nodes[1].kill()
        s = tm.wait(lambda x: re.search(rf"node {re.escape(nodes.targets[1])}\n\s+lcores: "
                                        r"cannot connect", x) is not None, 5)
        self.assertRegex(s, rf"node {re.escape(nodes.targets[1])}\n\s+lcores: cannot connect")
        self.assertTrue(named(s), s)

        tm.run("send-keys", "-t", "top", "s")
        s = tm.wait(lambda x: "lcores by mpps" in x, 3)
        self.assertIn("lcores by mpps", s)

        tm.run("resize-window", "-t", "top", "-x", "20", "-y", "5")
        time.sleep(1.5)
        s = tm.screen()
        lines = s.rstrip("\n").split("\n")
        self.assertLessEqual(len(lines), 5, s)
        self.assertTrue(all(len(x) <= 20 for x in lines), s)
        self.assertTrue(lines[0].startswith("sigma top"), s)
        self.assertTrue(tm.alive())

        tm.run("send-keys", "-t", "top", "q")
        deadline = time.monotonic() + 3
        while tm.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertFalse(tm.alive(), "top did not end on q")
        self.assertEqual(ranks.errors, [])

    def test_etcd_cluster(self):
        """top --etcd: the cluster's live nodes, read again for each frame."""
        ctl = sigmactl()
        folder = tempfile.mkdtemp(prefix=f"sg_top_etcd_{os.getpid()}_")
        self.addCleanup(shutil.rmtree, folder, True)
        etcd = sgtest.Etcd(folder)
        self.addCleanup(etcd.stop)
        cluster = f"top{os.getpid()}"
        nodes = start_local_nodes(2, extra_args=["--etcd", etcd.url, "--cluster", cluster,
                                                 "--ttl", "2"])
        self.addCleanup(nodes.stop)
        top = [ctl, "--etcd", etcd.url, "--cluster", cluster, "top", "--count", "1"]

        def frame() -> str:
            out = subprocess.run(top, capture_output=True, text=True, timeout=30)
            self.assertEqual(out.returncode, 0, out.stderr)
            return out.stdout
        deadline = time.monotonic() + 15
        while "2 live nodes" not in (s := frame()):
            self.assertLess(time.monotonic(), deadline, s)
            time.sleep(0.2)
        self.assertIn(f"etcd {etcd.url}, cluster {cluster}: 2 live nodes", s)
        for t in nodes.targets:
            self.assertIn(f"node {t}\n", s)
        # a node that dies leaves the view once its lease ends (TTL 2 s)
        nodes.nodes[1].kill()
        deadline = time.monotonic() + 15
        while "1 live node\n" not in (s := frame()):
            self.assertLess(time.monotonic(), deadline, s)
            time.sleep(0.3)
        self.assertIn(f"node {nodes.targets[0]}\n", s)
        self.assertNotIn(f"node {nodes.targets[1]}\n", s)
        # etcd that cannot be reached: a line that says so, no node, no hang
        t0 = time.monotonic()
        out = subprocess.run([ctl, "--etcd", f"http://127.0.0.1:{sgtest.free_ports(1)}",
                              "--cluster", cluster, "top", "--count", "1"],
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertRegex(out.stdout, r"sigma top .*: 0 nodes")
        self.assertRegex(out.stdout, rf"etcd http://127.0.0.1:\d+, cluster {cluster}: .+ "
                         r"\(the nodes of the last frame\)")
        self.assertLess(time.monotonic() - t0, 10)

    def test_plain_and_bad_flags(self):
        ctl = sigmactl()
        nodes = start_local_nodes(1)
        self.addCleanup(nodes.stop)
        job = sigma.create_job(nodes.targets, 2, tensors=[("t", 10)])
        self.addCleanup(sigma.destroy_job, nodes.targets, job.id)
        out = subprocess.run([ctl, "-s", nodes.targets[0], "top", "--count", "2", "--interval",
                              "0.2"], capture_output=True, text=True, timeout=20)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.count("sigma top "), 2, out.stdout)
        self.assertEqual(out.stdout.count("  drops by reason: none\n"), 2, out.stdout)
        self.assertIn(f"job {job.id} ranks: no round completed yet", out.stdout)
        self.assertNotIn("\x1b", out.stdout)  # no terminal: no escape sequences
        for args, want in ((["--sort", "fast"], "want busy, mpps, gbps, drops or lcore"),
                           (["--bogus"], "valid options: --sort"),
                           (["--interval", "0"], "--interval wants seconds"),
                           (["extra"], "unexpected argument 'extra'")):
            out = subprocess.run([ctl, "-s", nodes.targets[0], "top", *args],
                                 capture_output=True, text=True, timeout=10)
            self.assertEqual(out.returncode, 2, (args, out.stderr))
            self.assertIn(want, out.stderr, args)


if __name__ == "__main__":
    unittest.main(verbosity=2)

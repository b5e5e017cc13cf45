# SPDX-License-Identifier: BSD-3-Clause
"""The sigma package without torch: the job service through libsigma-control
(and its refusals, each naming the fix), sessions with their progress threads
summing buffers (every element against the exact sum), several operations in
flight from skewed ranks, and bounded failures: a killed node (within the
node-silent bound), a rank paused for longer than that bound (no failure), a
rank that never pushes (within its ranks_wait), bad arguments."""

import array
import errno
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import unittest.mock

import sgtest
import sigma
from sigma.localnodes import start_local_nodes


class DictStore:
    """A store for sessions in threads of one process: add, get (which waits
    for the key) and set, as torch.distributed's stores have them."""

    def __init__(self):
        self.d = {}
        self.cv = threading.Condition()

    def add(self, key, amount):
        with self.cv:
            self.d[key] = str(int(self.d.get(key, b"0")) + amount).encode()
            self.cv.notify_all()
            return int(self.d[key])

    def get(self, key):
        with self.cv:
            if not self.cv.wait_for(lambda: key in self.d, 10):
                raise RuntimeError(f"DictStore: no {key} within 10 s")
            return self.d[key]

    def set(self, key, value):
        with self.cv:
            self.d[key] = value.encode() if isinstance(value, str) else value
            self.cv.notify_all()


def ranks_push(sessions, bufs_per_rank, names, delays=None):
    """Each rank (a thread) submits all its buffers, then waits for them;
    ``names`` is one list for every rank, or one list per rank."""
    errors = []

    def rank(r):
        try:
            hs = []
            mine = names[r] if isinstance(names[0], list) else names
            for i, (buf, name) in enumerate(zip(bufs_per_rank[r], mine)):
                if delays:
                    time.sleep(delays(r, i))
                hs.append(sessions[r].push_pull(buf, name=name))
            for h in hs:
                h.wait()
        except Exception as e:  # noqa: BLE001
            errors.append(e)
    ts = [threading.Thread(target=rank, args=(r,)) for r in range(len(sessions))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    return errors


class Sessions(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.nodes = start_local_nodes(2)

    @classmethod
    def tearDownClass(cls):
        cls.nodes.stop()

    def make(self, n, sizes, ranks_wait=60.0, **kw):
        tensors = [(f"t{i}", s) for i, s in enumerate(sizes)]
        job = sigma.create_job(self.nodes.targets, n, tensors=tensors, partition_bytes=65536,
                               **kw)
        self.addCleanup(sigma.destroy_job, self.nodes.targets, job.id)
        sess = [sigma.Session(job, r, ranks_wait=ranks_wait) for r in range(n)]
        for s in sess:
            self.addCleanup(s.close)
        return job, sess

    def test_sums_many_in_flight(self):
        n, sizes = 3, [100000, 1, 7, 40000, 65536 // 4, 3000]
        job, sess = self.make(n, sizes)
        self.assertEqual((job.workers, job.dtype, job.mode, len(job.nodes)), (3, "fp32", "sync", 2))
        rng = random.Random(1)
        for rounds in range(3):
            vals = [[[float(rng.randint(-1000, 1000)) for _ in range(s)] for s in sizes]
                    for _ in range(n)]
            bufs = [[array.array("f", v) for v in vals[r]] for r in range(n)]
            # skew: ranks start each tensor at different moments, all in flight at once
            errs = ranks_push(sess, bufs, [f"t{i}" for i in range(len(sizes))],
                              delays=lambda r, i: rng.random() * 0.02 * r)
            self.assertEqual(errs, [])
            for i in range(len(sizes)):
                want = [sum(vals[r][i][k] for r in range(n)) for k in range(sizes[i])]
                for r in range(n):
                    self.assertEqual(list(bufs[r][i]), want, f"tensor {i} rank {r}")
        st = sess[0].stats()
        self.assertEqual(st.ops_done, 3 * len(sizes))
        self.assertEqual(st.ops_failed, 0)

    def test_transport_shm_default_udp_switch(self):
        # local nodes' shared memory is the default; SIGMA_LOCAL_TRANSPORT=udp and shm=[]
        # go back to UDP; each gives the exact sum, and the nodes count what came each way
        tensors = [("x", 70000)]
        job = sigma.create_job(self.nodes.targets, 2, tensors=tensors, partition_bytes=65536)
        self.addCleanup(sigma.destroy_job, self.nodes.targets, job.id)
        self.assertEqual(set(self.nodes.shm_paths) - set(os.environ["SIGMA_SHM"].split(";")),
                         set())
        # SIGMA_SHM naming one node's socket alone: that node over shared memory, the
        # other over UDP, in one session (it was all UDP before)
        one = self.nodes.shm_paths[0]
        for env, shm, want in ((None, None, "shm"), ("udp", None, "udp"), ("shm", None, "shm"),
                               (None, [], "udp"), ("udp", self.nodes.shm_paths, "shm"),
                               ("shm", "env:" + one, "shm+udp")):
            with unittest.mock.patch.dict(os.environ):
                os.environ.pop("SIGMA_LOCAL_TRANSPORT", None)
                if env:
                    os.environ["SIGMA_LOCAL_TRANSPORT"] = env
                if isinstance(shm, str):
                    os.environ["SIGMA_SHM"], shm = shm[len("env:"):], None
                sess = [sigma.Session(job, r, shm=shm) for r in range(2)]
            try:
                self.assertEqual([s.transport for s in sess], [want, want], (env, shm))
                bufs = [array.array("f", [float(r + 1)]) * 70000 for r in range(2)]
                for h in [sess[r].push_pull(bufs[r], name="x") for r in range(2)]:
                    h.wait(30)
                self.assertEqual((bufs[0][0], bufs[1][69999]), (3.0, 3.0), (env, shm))
            finally:
                for s in sess:
                    s.close()
        with unittest.mock.patch.dict(os.environ, {"SIGMA_LOCAL_TRANSPORT": "tcp"}):
            with self.assertRaisesRegex(sigma.SigmaConfigError, "SIGMA_LOCAL_TRANSPORT"):
                sigma.Session(job, 0)
        for bad in ("/a/path", [""], [3], ["/x"] * 257):
            with self.assertRaisesRegex(sigma.SigmaConfigError, "shm"):
                sigma.Session(job, 0, shm=bad)
        # explicit sockets that are no node's: a clear error, not UDP behind the caller's back
        with self.assertRaises(sigma.SigmaConfigError):
            sigma.Session(job, 0, shm=["/nonexistent/sigma.shm"])

    def test_same_tensor_queued(self):
        # push_pulls of a tensor still in flight wait for it: one round each, in order
        job, sess = self.make(2, [5000], dtype="int32")
        bufs = [[array.array("i", [k * 100 + r + i for i in range(5000)]) for r in range(2)]
                for k in range(3)]
        hs = [sess[r].push_pull(bufs[k][r], name="x", tensor_id=0) for k in range(3)
              for r in range(2)]
        for h in hs:
            h.wait(30)
        for k in range(3):
            want = [2 * (k * 100 + i) + 1 for i in range(5000)]
            self.assertEqual(list(bufs[k][0]), want)
            self.assertEqual(list(bufs[k][1]), want)

    def test_killed_node_fails_in_bounded_time(self):
        nodes = start_local_nodes(1)
        self.addCleanup(nodes.stop)
        job = sigma.create_job(nodes.targets, 2, tensors=[("w", 300000)], partition_bytes=65536)
        sess = [sigma.Session(job, r) for r in range(2)]
        for s in sess:
            self.addCleanup(s.close)
        bufs = [array.array("f", [1.0]) * 300000 for _ in range(2)]
        for h in [sess[r].push_pull(bufs[r], name="w") for r in range(2)]:
            h.wait(30)
        nodes.nodes[0].kill()
        t0 = time.monotonic()
        hs = [sess[r].push_pull(bufs[r], name="w") for r in range(2)]
        with self.assertRaises(sigma.SigmaNodeSilentError) as cm:
            hs[0].wait()
        took = time.monotonic() - t0
        # libsigma's bound, plus the progress thread's and the wait's polls (0.2 s each)
        bound = sess[0].silent_bound + 0.4
        self.assertLess(took, bound, f"failed after {took:.2f} s, bound {bound:.2f} s")
        msg = str(cm.exception)
        for want in ("node local0", "key 0x", "round 1", "no RESULT after", "node silent"):
            self.assertIn(want, msg)
        self.assertTrue(cm.exception.node.startswith("local0 (127.0.0.1:"), cm.exception.node)
        print(f"killed node: the step failed after {took:.2f} s (retry budget "
              f"{sess[0].retry_budget:.2f} s, node-silent bound {bound:.2f} s): "
              f"{msg[:160]}...")
        # the session is closed after a failure: later calls fail at once
        t1 = time.monotonic()
        with self.assertRaises(sigma.SigmaError):
            sess[0].push_pull(bufs[0], name="w").wait()
        self.assertLess(time.monotonic() - t1, 0.5)

    def test_missing_rank_named(self):
        # rank 2 never pushes: the node answers the others' resends that it waits for
        # rank 2, so they fail at their ranks_wait (1 s), not as a silent node
        job, sess = self.make(3, [20000], ranks_wait=1.0)
        bufs = [array.array("f", [1.0]) * 20000 for _ in range(3)]
        t0 = time.monotonic()
        hs = [sess[r].push_pull(bufs[r], name="t0") for r in (0, 1)]  # rank 2 never pushes
        for h in hs:
            with self.assertRaises(sigma.SigmaRanksMissingError) as cm:
                h.wait()
        took = time.monotonic() - t0
        # at the first resend past ranks_wait (rto_max apart), then the polls
        self.assertGreaterEqual(took, 1.0)
        self.assertLess(took, 1.0 + 0.2 + 0.4 + 1.0, f"{took:.2f} s")
        self.assertIn("missing", str(cm.exception))
        self.assertIn("0x4", str(cm.exception))  # rank 2's bit
        self.assertEqual(cm.exception.missing_ranks, [2])
        self.assertIn("ranks_wait_us", str(cm.exception))
        print(f"missing rank: failed after {took:.2f} s (ranks_wait 1 s): "
              f"{str(cm.exception)[:160]}...")

    def test_paused_rank_is_not_a_dead_node(self):
        # A rank that pushes much later than the node-silent bound (a slow data loader,
        # a paused process) does not fail the others: the node answers their resends
        # with WAITING. Then the node dies: both fail within the short bound.
        nodes = start_local_nodes(1)
        self.addCleanup(nodes.stop)
        job = sigma.create_job(nodes.targets, 2, tensors=[("a", 300000), ("b", 7)],
                               partition_bytes=65536)  # the job goes with its node, killed
        sess = [sigma.Session(job, r, ranks_wait=30.0) for r in range(2)]
        for s in sess:
            self.addCleanup(s.close)
        pause = sess[0].silent_bound + 1.5
        for rnd in range(2):
            vals = [[float((i * 7 + r * 13 + rnd) % 1000) for i in range(300000)]
                    for r in range(2)]
            bufs = [[array.array("f", vals[r]), array.array("f", [r + 1.0] * 7)]
                    for r in range(2)]
            t0 = time.monotonic()
            errs = ranks_push(sess, bufs, ["a", "b"],
                              delays=lambda r, i: pause if r == 1 and i == 0 else 0)
            took = time.monotonic() - t0
            self.assertEqual(errs, [])
            self.assertGreaterEqual(took, pause)
            for r in range(2):
                self.assertEqual(list(bufs[r][0]), [vals[0][i] + vals[1][i]
                                                    for i in range(300000)])
                self.assertEqual(list(bufs[r][1]), [3.0] * 7)
        st = sess[0].stats()
        self.assertGreater(st.waits, 0)
        print(f"paused rank: rank 1 pushed {pause:.1f} s late twice (node-silent bound "
              f"{sess[0].silent_bound:.2f} s), rank 0 waited it out ({st.waits} WAITING)")
        nodes.nodes[0].kill()
        t0 = time.monotonic()
        hs = [sess[r].push_pull(bufs[r][0], name="a") for r in range(2)]
        for h in hs:
            with self.assertRaises(sigma.SigmaNodeSilentError):
                h.wait()
        took = time.monotonic() - t0
        self.assertLess(took, sess[0].silent_bound + 0.4, f"{took:.2f} s")
        print(f"paused rank: then the killed node failed both after {took:.2f} s")

    def test_open_job(self):
        # no tensors declared: dtype any, each key made by its first push in its
        # dtype; a tiny slot budget fails the push that needs more, naming the fix
        job = sigma.create_job(self.nodes.targets, 2, slots=4)
        self.addCleanup(sigma.destroy_job, self.nodes.targets, job.id)
        self.assertEqual(job.dtype, "any")
        sess = [sigma.Session(job, r) for r in range(2)]
        for s in sess:
            self.addCleanup(s.close)
        bufs = [[array.array("f", [r + 0.5 * i for i in range(3000)]),
                 array.array("d", [r * 1e9 + i for i in range(700)]),
                 array.array("i", [r - i for i in range(10)])] for r in range(2)]
        self.assertEqual(ranks_push(sess, bufs, ["f", "d", "i"]), [])
        self.assertEqual(list(bufs[0][0]), [1 + i for i in range(3000)])
        self.assertEqual(list(bufs[1][1]), [1e9 + 2 * i for i in range(700)])
        self.assertEqual(list(bufs[0][2]), [1 - 2 * i for i in range(10)])
        big = [array.array("f", [1.0] * 200000) for _ in range(2)]
        errs = ranks_push(sess, [[b] for b in big], ["big"])
        self.assertTrue(errs and "slots" in str(errs[0]), errs)
        self.assertEqual(errs[0].errno, errno.ENOSPC)
        with self.assertRaises(sigma.SigmaConfigError) as cm:
            sigma.create_job(self.nodes.targets, 2, slots=-1)
        self.assertIn("slots -1", str(cm.exception))
        with self.assertRaises(sigma.SigmaConfigError) as cm:
            sess[0].tensor_id("other", 10, "fp32", tensor_id=sess[0].tensor_id("f", 3000, "fp32"))
        self.assertIn("belongs to 'f'", str(cm.exception))

    def test_ids_by_name_through_a_store(self):
        # two ranks use the same names in opposite orders (equal sizes: only the id
        # can be wrong); n40 and n1300 hash to one slot (crc32 % 65536 = 64611)
        job = sigma.create_job(self.nodes.targets, 2)
        self.addCleanup(sigma.destroy_job, self.nodes.targets, job.id)
        store = DictStore()
        sess = [sigma.Session(job, r, store=store, store_prefix="j") for r in range(2)]
        for x in sess:
            self.addCleanup(x.close)
        names = ["n40", "n1300", "p", "q"]
        vals = {nm: [[float(k * 1000 + r * 100 + i) for i in range(2000)] for r in range(2)]
                for k, nm in enumerate(names)}
        bufs = [[array.array("d", vals[nm][r]) for nm in (names if r == 0 else names[::-1])]
                for r in range(2)]
        self.assertEqual(ranks_push(sess, bufs, [names, names[::-1]]), [])
        for r in range(2):
            for buf, nm in zip(bufs[r], names if r == 0 else names[::-1]):
                self.assertEqual(list(buf), [a + b for a, b in zip(*vals[nm])], (r, nm))
        ids = [[x.tensor_id(nm, 2000, "fp64") for nm in names] for x in sess]
        self.assertEqual(ids[0], ids[1])
        self.assertEqual(ids[0][:2], [64611, 64612])  # the second probes on
        # a name of another size on rank 1: refused there at once, and posted
        sess[0].tensor_id("z", 5, "fp64")
        with self.assertRaises(sigma.SigmaConfigError) as cm:
            sess[1].tensor_id("z", 6, "fp64")
        self.assertIn("tensor 'z' is 6 fp64 elements on rank 1, but rank 0 first pushed it "
                      "as 5 fp64", str(cm.exception))
        self.assertEqual(store.add("j/failures", 0), 1)
        self.assertIn(b"rank 1 failed", store.get("j/failed"))
        # an explicit id claims its slot: another name's is refused, a free one taken
        with self.assertRaises(sigma.SigmaConfigError) as cm:
            sess[1].tensor_id("e", 8, "fp64", tensor_id=64611)
        self.assertIn("tensor id 64611 belongs to 'n40'", str(cm.exception))
        self.assertEqual(sess[0].tensor_id("e", 8, "fp64", tensor_id=7), 7)
        self.assertEqual(sess[1].tensor_id("e", 8, "fp64", tensor_id=7), 7)
        with self.assertRaises(sigma.SigmaConfigError) as cm:  # an id on one rank alone
            sess[1].tensor_id("e2", 8, "fp64", tensor_id=9)
            sess[0].tensor_id("e2", 8, "fp64")
        self.assertIn("tensor 'e2' has id", str(cm.exception))
        self.assertIn("but rank 1 gave it id 9: give it the same tensor_id= on every rank",
                      str(cm.exception))
        # without a store, two ranks cannot agree on where to probe: a collision raises
        bare = sigma.Session(job, 0)
        self.addCleanup(bare.close)
        bare.tensor_id("n40", 4, "fp32")
        with self.assertRaises(sigma.SigmaConfigError) as cm:
            bare.tensor_id("n1300", 4, "fp32")
        self.assertIn("'n40' and 'n1300' hash to the same id (64611)", str(cm.exception))

    def test_bad_arguments(self):
        job, sess = self.make(1, [4, 8])
        s = sess[0]
        for bad in (0, 0.0001, -1, 5000, True, "1", None):
            with self.assertRaises(sigma.SigmaConfigError) as cm:
                sigma.Session(job, 0, ranks_wait=bad)
            self.assertIn("want seconds, 0.001..4294", str(cm.exception))
        for bad, want in ((b"abcd", "read-only"), (object(), "no buffer"),
                          (bytearray(), "empty"),
                          (memoryview(bytearray(32)).cast("f")[::2], "not C-contiguous")):
            with self.assertRaises(sigma.SigmaConfigError) as cm:
                s.push_pull(bad, name="t0")
            self.assertIn(want, str(cm.exception))
        with self.assertRaises(sigma.SigmaConfigError) as cm:
            s.push_pull(memoryview(bytearray(16)).cast("h"), name="t0")
        self.assertIn("give dtype=", str(cm.exception))
        with self.assertRaises(sigma.SigmaConfigError):
            s.push_pull(array.array("f", [1.0] * 4), name="t0", dtype="fp77")
        s.push_pull(array.array("f", [1.0] * 4), name="t0", tensor_id=0).wait(10)
        with self.assertRaises(sigma.SigmaConfigError) as cm:
            s.push_pull(array.array("f", [1.0] * 5), name="t0")
        self.assertIn("was first pushed as 4 fp32 elements", str(cm.exception))
        # a tensor of another dtype than the job's: refused when registered, not sent
        h = s.push_pull(array.array("d", [1.0] * 8), name="t1", tensor_id=1)
        with self.assertRaises(sigma.SigmaConfigError) as cm:
            h.wait(10)
        self.assertIn("cannot register", str(cm.exception))
        # elastic options out of range: refused before etcd is asked (none at port 1), the
        # option named; idle_ms -1 used to wrap into a uint32 without a word
        for opts, want in (({"idle_ms": -1}, "idle_ms -1: want an integer 10..600000"),
                           ({"idle_ms": 9}, "idle_ms 9"), ({"idle_ms": 600001}, "idle_ms"),
                           ({"idle_ms": 2 ** 32}, "idle_ms"), ({"idle_ms": True}, "idle_ms"),
                           ({"idle_ms": "1000"}, "idle_ms '1000'"),
                           ({"poll_ms": 5}, "poll_ms 5"), ({"margin": -2}, "margin -2"),
                           ({"propose": 2}, "propose 2"), ({"wait_ms": -1}, "wait_ms -1"),
                           ({"idle_s": 1}, "elastic option 'idle_s'")):
            with self.assertRaises(sigma.SigmaConfigError) as cm:
                sigma.Session(job, 0, elastic=("http://127.0.0.1:1", "c"), elastic_opts=opts)
            self.assertIn(want, str(cm.exception))
        for kw, want in (({"rank": 1}, "ranks 0..0"), ({"rank": 0, "window": -1}, "window"),
                         ({"rank": 0, "ranks_wait": 0}, "ranks_wait 0"),
                         ({"rank": 0, "ranks_wait": "1"}, "ranks_wait '1'")):
            with self.assertRaises(sigma.SigmaConfigError) as cm:
                sigma.Session(job, **kw)
            self.assertIn(want, str(cm.exception))


class LocalNodeLogs(unittest.TestCase):
    def test_failed_with_block_shows_the_logs(self):
        """A with block that raises writes the end of each node's log, the
        counters it printed as it stopped included, to stderr; one that ends
        well writes nothing, and both remove the folder."""
        import contextlib
        import io
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            with self.assertRaises(ZeroDivisionError):
                with start_local_nodes(2) as nodes:
                    folder = nodes.folder
                    1 / 0
        text = err.getvalue()
        for name in ("local0", "local1"):
            self.assertIn(f"sigma: node {name} (exit status 0), the end of its log:", text)
            self.assertRegex(text, rf"(?m)^  {name}\| sigma-udpd: stopped; \d+ packets")
        self.assertFalse(os.path.exists(folder))
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            with start_local_nodes(1) as nodes:
                folder = nodes.folder
        self.assertEqual(err.getvalue(), "")
        self.assertFalse(os.path.exists(folder))


class JobService(unittest.TestCase):
    def test_create_list_destroy(self):
        with start_local_nodes(2) as nodes:
            job = sigma.create_job(nodes.targets, 4, mode="deterministic", dtype="bf16",
                                   tensors=[("a", 10), ("b", 3000000)])
            self.assertEqual((job.workers, job.mode, job.dtype), (4, "deterministic", "bf16"))
            self.assertEqual(sorted(n.name for n in job.nodes), ["local0", "local1"])
            self.assertAlmostEqual(sum(n.weight for n in job.nodes), 1.0)
            again = sigma.Job.parse(job.descriptor + "\n")
            self.assertEqual(again, sigma.Job.parse(job.descriptor))
            listed = [json.loads(sigma.job.control_call(t, "job_list")) for t in nodes.targets]
            self.assertTrue(all(any(j["id"] == job.id for j in lst) for lst in listed))
            sigma.destroy_job(nodes.targets, job.id)
            listed = [json.loads(sigma.job.control_call(t, "job_list")) for t in nodes.targets]
            self.assertFalse(any(j["id"] == job.id for lst in listed for j in lst))
            with self.assertRaises(sigma.SigmaError) as cm:
                sigma.destroy_job(nodes.targets, job.id)
            self.assertIn("cannot destroy job", str(cm.exception))

    def test_refusals_name_the_fix(self):
        d = tempfile.mkdtemp()
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", d]))
        secret, wrong = os.path.join(d, "s"), os.path.join(d, "w")
        for path, text in ((secret, "0123456789abcdef0123456789abcdef"),
                           (wrong, "not-the-right-secret-at-all")):
            with open(path, "w") as f:
                f.write(text + "\n")
            os.chmod(path, 0o600)
        tcp = start_local_nodes(1, extra_args=["--listen", "127.0.0.1:0", "--secret-file",
                                               secret])
        self.addCleanup(tcp.stop)
        with open(tcp.nodes[0].log) as f:
            port = re.search(r"sigma-udpd: node .* tcp port (\d+)", f.read()).group(1)
        target = f"127.0.0.1:{port}"
        t = [("x", 10)]
        cases = [
            (dict(nodes=[]), sigma.SigmaConfigError, "no summation nodes"),
            (dict(nodes=[f"unix:{d}/none.sock"]), sigma.SigmaConfigError, "start the node"),
            (dict(nodes=["127.0.0.1:1"], secret_file=secret), sigma.SigmaConfigError,
             "nothing listens there"),
            (dict(nodes=[target]), sigma.SigmaConfigError, "needs the nodes' shared secret"),
            (dict(nodes=[target], secret_file=wrong), sigma.SigmaConfigError,
             "refused the shared secret"),
            (dict(nodes=[target], secret_file=os.path.join(d, "nofile")),
             sigma.SigmaConfigError, "secret file"),
            (dict(nodes=["unix:/x,kind=tpu"]), sigma.SigmaConfigError, "kind must be cpu or gpu"),
            (dict(nodes=[target + ",weight=-1"]), sigma.SigmaConfigError, "weight must be"),
        ]
        for kw, exc, want in cases:
            with self.subTest(kw=kw):
                t0 = time.monotonic()
                with self.assertRaises(exc) as cm:
                    sigma.create_job(workers=2, tensors=t, **kw)
                self.assertIn(want, str(cm.exception))
                self.assertLess(time.monotonic() - t0, 6.0)
        for kw, want in ((dict(workers=0), "workers 0"), (dict(workers=65), "workers 65"),
                         (dict(workers=2, mode="fast"), "mode 'fast'"),
                         (dict(workers=2, dtype="fp8"), "dtype 'fp8'")):
            with self.assertRaises(sigma.SigmaConfigError) as cm:
                sigma.create_job([target], secret_file=secret, tensors=t, **kw)
            self.assertIn(want, str(cm.exception))
        job = sigma.create_job([target], 2, secret_file=secret, tensors=t)  # the right one
        sigma.destroy_job([target], job.id, secret_file=secret)

    def test_descriptors(self):
        good = ("sigma-job=1;id=7;workers=4;token=0123456789abcdef;dtype=fp32;mode=sync;"
                "partition_bytes=4096000;chunk_bytes=1424;node=a,10.0.0.21,9300,cpu,100,0.5;"
                "node=b,10.0.0.22,9300,cpu,100,0.5")
        j = sigma.Job.parse(good)
        self.assertEqual((j.id, j.workers, j.token, j.chunk_bytes), (7, 4, 0x0123456789abcdef,
                                                                     1424))
        self.assertEqual(j.nodes[1], sigma.JobNode("b", "10.0.0.22", 9300, "cpu", 100.0, 0.5))
        for bad, want in ((good.replace("workers=4", "workers=65"), "workers"),
                          (good.replace(";id=7", ""), "id"),
                          ("", "empty"), (42, "want a str")):
            with self.assertRaises(sigma.SigmaConfigError) as cm:
                sigma.Job.parse(bad)
            self.assertIn(want, str(cm.exception))


class Loading(unittest.TestCase):
    def test_missing_library_says_where_it_looked(self):
        env = {k: v for k, v in os.environ.items() if k not in ("SIGMA_BUILD_DIR",)}
        env.update(SIGMA_LIBSIGMA="/nonexistent/libsigma.so.0", PYTHONPATH=sgtest.SRC,
                   LD_LIBRARY_PATH="")
        r = subprocess.run([sys.executable, "-c", "import sigma._lib as l; l.libsigma()"],
                           env=env, capture_output=True, text=True)
        if r.returncode == 0:
            self.skipTest("a libsigma.so.0 is installed on this machine")
        self.assertIn("/nonexistent/libsigma.so.0 (no such file)", r.stderr)
        self.assertIn("SIGMA_BUILD_DIR", r.stderr)


class LocalNodesCleanup(unittest.TestCase):
    def test_nodes_die_with_a_killed_parent(self):
        """A parent killed by SIGKILL (no atexit) leaves no node behind."""
        code = ("import os, sys\n"
                "from sigma.localnodes import start_local_nodes\n"
                "n = start_local_nodes(2)\n"
                "print(n.folder, ' '.join(str(x.proc.pid) for x in n.nodes), flush=True)\n"
                "os.kill(os.getpid(), 9)\n")
        env = dict(os.environ, PYTHONPATH=sgtest.SRC)
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=60)
        folder, *pids = r.stdout.split()
        # no atexit ran in the killed parent: its folder (the nodes' logs) is ours to remove
        self.addCleanup(shutil.rmtree, folder, True)
        self.assertTrue(folder.startswith(tempfile.gettempdir()), folder)
        pids = [int(p) for p in pids]
        self.assertEqual(len(pids), 2, r.stderr)
        deadline = time.monotonic() + 5
        alive = pids
        while alive and time.monotonic() < deadline:
            time.sleep(0.1)
            alive = [p for p in pids if os.path.exists(f"/proc/{p}")
                     and not open(f"/proc/{p}/stat").read().split(") ")[1].startswith("Z")]
        for p in alive:
            os.kill(p, 9)
        self.assertEqual(alive, [], "nodes outlived their killed parent")


if __name__ == "__main__":
    unittest.main(verbosity=2)

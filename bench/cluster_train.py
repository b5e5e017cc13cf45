#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Training jobs on the emulated cluster: samples/s against k, as in the paper.

    sudo ./sigma bench train --model resnet50 --n 4 --ks 0,2,4 --link 500mbit --runs 3 \\
        --json train.json --plot train.svg

The cluster is `sigma-bench cluster`'s (bench/cluster_net.sh,
docs/emulated-cluster.md): n GPU machines and K CPU machines, each a network
namespace with one veth into a bridge, every link shaped by tbf to --link in
both directions, and a sigma-udpd summation node on every machine. Each GPU
machine runs one real PyTorch rank (one torch thread): forward, backward and
an SGD step of a real model on synthetic data made in the process (seeded by
rank and step; nothing downloaded). The configurations, interleaved in each
run, over the same links:

- ``compute``: DDP with a hook that returns at once: the step without
  communication, measured in the same cluster;
- ``gloo``: DDP's own all-reduce over gloo (NCCL's place on CPUs);
- ``sigma``: DDP with sigma.torch's comm hook, for every k in --ks (the n GPU
  nodes and the first k CPU nodes, placed by the BytePS split);
- ``opt``: sigma.torch.DistributedOptimizer (no DDP) at the headline k (--k);
- ``ps``: the hook through the K CPU nodes alone (a plain parameter server).

Per configuration: the step time (median over the timed steps of the slowest
rank, then the median over runs) and samples/s; the communication backward
did not hide (step - compute step); the speedup over gloo that BytePS's model
predicts from the measured compute and gloo steps, compute + (gloo - compute)
* t_model(conf) / t_allreduce, against the measured one; each GPU machine's
bytes on its link per step and the link's use; the host's CPU busy, and the
share of the CPUs that the cluster's own processes (ranks and nodes) used,
which other load on the host does not change; libsigma's resends and the
kernel's drops (qdiscs, the workers' sockets). A table, then JSON (or --json
FILE), and with --plot a gnuplot of samples/s against k with the model's
line.

Correctness in the same run: every configuration trains the same model from
the same seed on the same data.
- The check proves the sums: after the timed runs, every Sigma configuration
  trains --check-steps steps (default warmup + steps) again with its job in
  deterministic mode, where a node adds the ranks' pushes in rank order. Its
  parameters must be bitwise equal to those of a reference trained by DDP
  with a hook that gathers every rank's bucket over gloo and adds them in rank
  order, ((g0 + g1) + g2) + ..., in fp32.
- The timed (sync) runs against gloo's: bitwise for DDP at 2 ranks (two fp32
  additions agree in either order); otherwise within --rtol of how far gloo's
  training moved each parameter, or, where training amplifies the last bits
  of a summation order (ResNet-50 at batch 2 does: BatchNorm over two values
  per channel), within 10 times the distance between gloo's parameters and the
  reference's after the same steps, which two correct summation orders give.
A mismatch fails the run (exit 1). (SIGMA_TRAIN_PERTURB=TAG, say sigma1, or
sigma1-check for the check's run alone, moves one parameter of that
configuration before the comparison: the tests' proof that it fails.)

DDP's start-up broadcast of the parameters from rank 0 is skipped: every
rank builds the model from the same seed, and the driver checks that their
parameters agree before the first step (it would cost M bytes over the
shaped links in every configuration, outside the timed steps).

Needs root (namespaces, tc), iproute2, torch and torchvision. Exit: 0; 1 a
failed run or a wrong parameter; 2 a bad option, or torch missing; 77 when
namespaces, veths or tbf cannot be made here. Namespaces, qdiscs and
processes go at the end, also on Ctrl-C and on failure.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Iterator, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.normpath(os.path.join(HERE, ".."))
PYDIR = os.path.join(SRC, "python")

# model: (what it is, default batch, default input size, needs torchvision)
MODELS = {
    "resnet50": ("torchvision ResNet-50, 25.6 M parameters (102 MB of fp32 gradients)", 4, 64,
                 True),
    "vgg16": ("torchvision VGG-16, 138 M parameters (528 MB)", 2, 32, True),
    "bert-base": ("a BERT-base encoder built here: 30522-token vocabulary, 512 positions, "
                  "hidden 768, 12 layers, 12 heads, 3072 intermediate, pooler; 109.5 M "
                  "parameters (438 MB)", 4, 32, False),
    "tiny": ("a 2-layer MLP of 0.27 M parameters, for a quick check of the driver", 8, 32,
             False),
}
CONFIGS = ("compute", "gloo", "sigma", "opt", "ps")
UDP_PORT = 9300
# libsigma's other loss counters, summed over the ranks into the JSON (struct sigma_stats)
TRANSPORT_STATS = ("timeouts_held", "waits", "nacks", "tx_dropped", "rx_stale", "tx_packets")


class Fail(Exception):
    """A run that failed (exit 1)."""


class Usage(Exception):
    """A bad option or a missing dependency (exit 2), said before anything is built."""


class Skip(Exception):
    """What cannot be made here (exit 77)."""


# ---- options --------------------------------------------------------------

def parse_rate(s: str) -> int:
    """'500mbit', '1gbit' or a number of Mbit/s -> Mbit/s."""
    t = s.strip().lower()
    mul = 1
    for suf, m in (("gbit", 1000), ("mbit", 1)):
        if t.endswith(suf):
            t, mul = t[:-len(suf)], m
    try:
        v = float(t) * mul
    except ValueError:
        raise Usage(f"--link {s!r}: want a rate such as 500mbit, 1gbit or a number of Mbit/s")
    if not 1 <= v <= 100000:
        raise Usage(f"--link {s!r}: want 1 Mbit/s to 100 Gbit/s")
    return int(v)


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="sigma bench train", description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="one of " + ", ".join(MODELS))
    ap.add_argument("--n", type=int, default=4, help="GPU machines (default 4)")
    ap.add_argument("--local-ranks", type=int, default=1, dest="local_ranks",
                    help="ranks per GPU machine (default 1); with more, sigma.torch sums a "
                         "machine's ranks in shared memory and the machine pushes once")
    ap.add_argument("--k", type=int, default=None,
                    help="CPU machines of the headline (opt and ps); default n")
    ap.add_argument("--ks", default=None, help="k of every sigma configuration (default 0..k)")
    ap.add_argument("--link", default="500mbit", help="every link's rate (default 500mbit)")
    ap.add_argument("--mtu", type=int, default=9000, help="the links' MTU (default 9000)")
    ap.add_argument("--steps", type=int, default=5, help="timed steps per run (default 5)")
    ap.add_argument("--warmup", type=int, default=2, help="steps before them (default 2)")
    ap.add_argument("--runs", type=int, default=3,
                    help="rounds of every configuration, interleaved (default 3)")
    ap.add_argument("--configs", default=",".join(CONFIGS),
                    help="which configurations (default all: " + ",".join(CONFIGS) + ")")
    ap.add_argument("--batch", type=int, default=None, help="samples per rank and step")
    ap.add_argument("--input", type=int, default=None,
                    help="image side (resnet50, vgg16) or sequence length (bert-base)")
    ap.add_argument("--window", type=int, default=0,
                    help="libsigma's credit window, chunks per node (default 0: its own)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--check-steps", type=int, default=None,
                    help="steps of the bitwise check in deterministic mode (default: "
                         "warmup + steps, as the timed runs; 0: no check)")
    ap.add_argument("--rtol", type=float, default=1e-3,
                    help="where bitwise is not expected, how far a parameter may be from "
                         "gloo's, relative to how far training moved it (default 1e-3)")
    ap.add_argument("--json", default=None, help="the JSON there (default: stdout)")
    ap.add_argument("--plot", default=None, help="samples/s against k (.svg or .png)")
    ap.add_argument("--prefix", default=None, help="namespace names (default sgt<pid>)")
    ap.add_argument("--timeout", type=float, default=900.0,
                    help="seconds one configuration may take (default 900)")
    ap.add_argument("--quiet", action="store_true")
    o = ap.parse_args(argv)
    if o.model not in MODELS:
        raise Usage(f"--model {o.model!r}: one of {', '.join(MODELS)}")
    if not 1 <= o.n <= 16:
        raise Usage(f"--n {o.n}: 1..16 GPU machines")
    if not 1 <= o.local_ranks <= 8:
        raise Usage(f"--local-ranks {o.local_ranks}: 1..8 ranks per GPU machine")
    o.ranks = o.n * o.local_ranks
    o.k = o.n if o.k is None else o.k
    if not 0 <= o.k <= 16:
        raise Usage(f"--k {o.k}: 0..16 CPU machines")
    try:
        o.ks = sorted({int(x) for x in o.ks.split(",")}) if o.ks else list(range(o.k + 1))
    except ValueError:
        raise Usage(f"--ks {o.ks!r}: want k values such as 0,2,4")
    o.configs = [c.strip() for c in o.configs.split(",") if c.strip()]
    bad = [c for c in o.configs if c not in CONFIGS]
    if bad or not o.configs:
        raise Usage(f"--configs: {', '.join(bad) or 'none'}: want some of {', '.join(CONFIGS)}")
    if any(not 0 <= k <= 16 for k in o.ks):
        raise Usage(f"--ks {o.ks}: each k is 0..16")
    o.cpus = max([o.k] + (o.ks if "sigma" in o.configs else []))
    if o.k == 0 and ("ps" in o.configs or "opt" in o.configs):
        raise Usage("--k 0: a parameter server (ps) and the headline's DistributedOptimizer "
                    "(opt) need at least one CPU machine; give --k, or leave ps and opt out "
                    "of --configs")
    if "gloo" not in o.configs:
        raise Usage("--configs: gloo is the baseline every other configuration is checked "
                    "and timed against; keep it")
    if o.check_steps is None:
        o.check_steps = o.warmup + o.steps
    if not 0 <= o.window <= 4096:
        raise Usage(f"--window {o.window}: 0..4096 chunks")
    for what, v, lo in (("--steps", o.steps, 1), ("--warmup", o.warmup, 0), ("--runs", o.runs, 1),
                        ("--mtu", o.mtu, 1280), ("--check-steps", o.check_steps, 0)):
        if v < lo:
            raise Usage(f"{what} {v}: at least {lo}")
    if o.mtu > 9000:
        raise Usage(f"--mtu {o.mtu}: at most 9000")
    o.mbit = parse_rate(o.link)
    _, batch, size, _ = MODELS[o.model]
    o.batch = batch if o.batch is None else o.batch
    o.input = size if o.input is None else o.input
    if o.batch < 1 or o.input < (32 if o.model in ("resnet50", "vgg16") else 1):
        raise Usage(f"--batch {o.batch} / --input {o.input}: too small for {o.model}")
    if o.model == "resnet50" and o.batch * (o.input // 32) ** 2 < 2:
        # training-mode BatchNorm needs two values per channel after the last stage (1/32)
        raise Usage(f"--batch {o.batch} --input {o.input}: ResNet-50's last BatchNorm would see "
                    "one value per channel: use a batch of 2 or an input of 64")
    if o.model == "bert-base" and o.input > 512:
        raise Usage(f"--input {o.input}: BERT-base has 512 positions")
    return o


def check_torch(model: str) -> None:
    """torch (and torchvision where the model needs it) import, or Usage."""
    need = ["torch"] + (["torchvision"] if MODELS[model][3] else [])
    for mod in need:
        r = subprocess.run([sys.executable, "-c", f"import {mod}"], capture_output=True,
                           text=True, env=rank_env({}))
        if r.returncode != 0:
            last = (r.stderr.strip().splitlines() or ["?"])[-1]
            raise Usage(f"{model} needs {mod}, which does not import here ({last}): "
                        f"apt-get install python3-{mod} (./sigma deps)")


# ---- the rank ---------------------------------------------------------------

def build_model(name: str, seed: int) -> Any:
    import torch
    import torch.nn as nn
    torch.manual_seed(seed)
    if name == "resnet50":
        import torchvision
        m = torchvision.models.resnet50()
    elif name == "vgg16":
        import torchvision
        m = torchvision.models.vgg16()
    elif name == "bert-base":
        m = _bert_class()()
    else:
        m = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32, 2048), nn.ReLU(), nn.Linear(2048, 32))
    for mod in m.modules():  # the same masks in every configuration: none
        if isinstance(mod, nn.Dropout):
            mod.p = 0.0
    return m


def _bert_class() -> Any:
    import torch
    import torch.nn as nn

    class Bert(nn.Module):
        """BERT-base's shape: embeddings, 12 encoder layers, pooler, a 2-way head."""

        def __init__(self) -> None:
            super().__init__()
            h = 768
            self.tok = nn.Embedding(30522, h)
            self.pos = nn.Embedding(512, h)
            self.typ = nn.Embedding(2, h)
            self.norm = nn.LayerNorm(h)
            layer = nn.TransformerEncoderLayer(h, 12, 3072, dropout=0.0, activation="gelu",
                                               batch_first=True)
            self.enc = nn.TransformerEncoder(layer, 12)
            self.pool = nn.Linear(h, h)
            self.head = nn.Linear(h, 2)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            pos = torch.arange(ids.shape[1]).unsqueeze(0)
            x = self.norm(self.tok(ids) + self.pos(pos) + self.typ(torch.zeros_like(ids)))
            x = self.enc(x)
            return self.head(torch.tanh(self.pool(x[:, 0])))
    return Bert


def batch_for(spec: dict, rank: int, step: int) -> tuple[Any, Any]:
    """This rank's synthetic samples and labels of a step: the same in every
    configuration."""
    import torch
    g = torch.Generator().manual_seed(spec["seed"] * 1000003 + rank * 10007 + step)
    b, s = spec["batch"], spec["input"]
    if spec["model"] == "bert-base":
        return (torch.randint(0, 30522, (b, s), generator=g),
                torch.randint(0, 2, (b,), generator=g))
    classes = 32 if spec["model"] == "tiny" else 1000
    shape = (b, 3, 32) if spec["model"] == "tiny" else (b, 3, s, s)
    return torch.randn(shape, generator=g), torch.randint(0, classes, (b,), generator=g)


def rank_order_hook(state, bucket):  # type: ignore[no-untyped-def]
    """The check's reference: every rank's bucket, divided by N as the other hooks
    do, gathered over gloo and added in rank order in fp32, ((g0 + g1) + g2) + ...:
    bit for bit what a deterministic-mode node computes. With L ranks per machine
    (state: L), each machine's L buckets first, in local-rank order, then the
    machines' sums in machine order, as sigma.torch's local path and the node do."""
    import torch
    import torch.distributed as dist
    buf = bucket.buffer()
    n = dist.get_world_size()
    buf.div_(n)
    parts = [torch.empty_like(buf) for _ in range(n)]
    # synchronous: a Python callback on gloo's thread (fut.then) deadlocks
    # ProcessGroupGloo's destructor at exit, which joins that thread holding the GIL
    dist.all_gather(parts, buf)
    per = state or 1
    # in place in the gathered copies, which are this hook's own: VGG-16's fc1
    # is one 411 MB bucket, and a copy per machine ran rank 0 out of memory
    acc = None
    for m in range(0, n, per):
        s = parts[m]
        for t in parts[m + 1:m + per]:
            s += t
        if acc is None:
            acc = s
        else:
            acc += s
    buf.copy_(acc)
    fut = torch.futures.Future()
    fut.set_result(buf)
    return fut


def rank_main(spec_path: str) -> int:
    """One rank of one configuration: writes its result JSON (and, on rank 0
    when asked, the final parameters)."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP
    import torch.nn.parallel.distributed as ddp_mod
    with open(spec_path) as f:
        spec = json.load(f)
    rank, conf = int(os.environ["RANK"]), spec["conf"]
    torch.set_num_threads(1)
    # every rank builds the model from the same seed; the driver checks that
    # their parameters agree, so DDP's start-up broadcast (M bytes over the
    # shaped links) is not needed
    ddp_mod._sync_module_states = lambda **kw: None
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=spec["timeout"]))
    model = build_model(spec["model"], spec["seed"])
    params = [p for p in model.parameters()]
    init_sum = float(sum(p.detach().double().sum() for p in params))
    if rank == 0 and spec.get("save") and spec["conf"] == "gloo":  # the updates' scale
        torch.save(torch.cat([p.detach().reshape(-1) for p in params]), spec["save"] + ".init")
    sgt = None
    if conf in ("sigma", "opt", "ps"):
        sys.path.insert(0, PYDIR)
        import sigma.torch as sgt
        sgt.init(window=spec.get("window", 0))
    if conf != "opt":
        model = DDP(model, broadcast_buffers=False)
        if conf == "compute":
            # no annotations: DDP checks them as objects, and this module's are strings
            def noop(state, bucket):  # type: ignore[no-untyped-def]
                fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
                fut.set_result(bucket.buffer())
                return fut
            model.register_comm_hook(None, noop)
        elif conf in ("sigma", "ps"):
            model.register_comm_hook(sgt.HookState(f"train.{conf}"), sgt.ddp_comm_hook)
        elif conf == "ref":
            model.register_comm_hook(spec.get("local_ranks", 1), rank_order_hook)
    opt = torch.optim.SGD(params, lr=0.01, momentum=0.9)
    if conf == "opt":
        opt = sgt.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    times, cpu0, t_all = [], 0.0, 0.0
    host0, link0 = (0, 0), (0, 0)
    for step in range(spec["warmup"] + spec["steps"]):
        x, y = batch_for(spec, rank, step)
        if step == spec["warmup"]:  # the timed steps: this process's, the host's and the link's
            cpu0, t_all = time.process_time(), time.monotonic()
            host0, link0, nodes0 = cpu_ticks(), eth0_bytes(), pids_cpu_s(spec["node_pids"])
        t0 = time.monotonic()
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        times.append(time.monotonic() - t0)
    host1, link1, nodes1 = cpu_ticks(), eth0_bytes(), pids_cpu_s(spec["node_pids"])
    res = {"rank": rank, "times": times[spec["warmup"]:], "init_sum": init_sum,
           "host_busy": (host1[0] - host0[0]) / max(1, host1[1] - host0[1]),
           "nodes_cpu_s": nodes1 - nodes0,
           "link_sent": link1[0] - link0[0], "link_received": link1[1] - link0[1],
           "grad_bytes": sum(p.numel() * p.element_size() for p in params),
           "cpu_s": time.process_time() - cpu0, "wall_s": time.monotonic() - t_all,
           "loss": float(loss)}
    if sgt is not None:
        st = sgt.session().stats()
        res["retransmits"] = int(getattr(st, "retransmits", 0))
        res["rx_dropped"] = int(getattr(st, "rx_dropped", 0))
        for key in TRANSPORT_STATS:
            res[key] = int(getattr(st, key, 0))
    if os.environ.get("SIGMA_TRAIN_PERTURB") in (spec["tag"].split("-")[0], spec["tag"]):
        with torch.no_grad():  # the tests' wrong parameter: the check must catch it
            params[0].view(-1)[0] += 1e-3
    if rank == 0 and spec.get("save"):
        torch.save(torch.cat([p.detach().reshape(-1) for p in params]), spec["save"])
    with open(spec["out"] % rank, "w") as f:
        json.dump(res, f)
    dist.barrier()
    if sgt is not None:
        sgt.shutdown()
    # Everything is written. ProcessGroupGloo's teardown (destroy_process_group
    # or the interpreter's exit) can block on its worker threads once a peer has
    # gone, so a finished rank ends here rather than risk the driver's timeout.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# ---- the cluster --------------------------------------------------------------

def rank_env(extra: dict) -> dict:
    env = dict(os.environ, PYTHONPATH=PYDIR + (":" + os.environ["PYTHONPATH"]
                                              if os.environ.get("PYTHONPATH") else ""),
               OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1", GLOO_SOCKET_IFNAME="eth0")
    env.update(extra)
    return env


def build_dir() -> str:
    return os.environ.get("SIGMA_BUILD_DIR") or os.path.join(SRC, "build")


def ns_json(args: list[str]) -> Any:
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        return []
    try:
        return json.loads(r.stdout or "[]")
    except ValueError:
        return []


class Cluster:
    def __init__(self, o: argparse.Namespace, folder: str) -> None:
        self.o, self.dir = o, folder
        self.prefix = o.prefix or f"sgt{os.getpid() % 100000}"
        self.net = os.path.join(HERE, "cluster_net.sh")
        self.machines = [f"g{i}" for i in range(o.n)] + [f"c{j}" for j in range(o.cpus)]
        self.nodes: dict[str, subprocess.Popen] = {}
        self.ranks: list[subprocess.Popen] = []
        self.ranks_rc: list[Optional[int]] = []
        self.made = False

    def ip(self, m: str) -> str:
        i = int(m[1:])
        return f"10.77.0.{1 + i}" if m[0] == "g" else f"10.77.0.{101 + i}"

    def sock(self, m: str) -> str:
        return os.path.join(self.dir, f"{m}.sock")

    def up(self) -> None:
        r = subprocess.run([self.net, "up", self.prefix, str(self.o.n), str(self.o.cpus),
                            str(self.o.mbit), str(self.o.mtu)], capture_output=True, text=True)
        if r.returncode == 77:
            raise Skip(r.stderr.strip())
        if r.returncode != 0:
            raise Fail(f"cluster_net.sh up: {r.stderr.strip()}")
        self.made = True
        udpd = os.path.join(build_dir(), "udpd", "sigma-udpd")
        if not os.access(udpd, os.X_OK):
            raise Fail(f"no sigma-udpd at {udpd}: build first (./sigma build)")
        for m in self.machines:
            log = open(os.path.join(self.dir, f"{m}.log"), "w")
            self.nodes[m] = subprocess.Popen(
                ["ip", "netns", "exec", f"{self.prefix}-{m}", udpd, "--addr", self.ip(m),
                 "--port", str(UDP_PORT), "--name", m, "--kind", "gpu" if m[0] == "g" else "cpu",
                 "--gbps", f"{self.o.mbit / 1000:g}", "--unix", self.sock(m),
                 "--max-chunk", "8920"], stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        for m in self.machines:
            path = os.path.join(self.dir, f"{m}.log")
            while "sigma-udpd: node " not in open(path).read():
                if self.nodes[m].poll() is not None or time.monotonic() > deadline:
                    raise Fail(f"the summation node of {m} did not start:\n" +
                               open(path).read())
                time.sleep(0.05)

    def link_bytes(self) -> dict[str, tuple[int, int]]:
        """Each machine's (sent, received) bytes on its link, from the bridge's side."""
        out = {}
        for m in self.machines:
            st = ns_json(["ip", "-n", f"{self.prefix}-sw", "-s", "-j", "link", "show", "dev", m])
            s = st[0].get("stats64", {}) if st else {}
            out[m] = (s.get("rx", {}).get("bytes", 0), s.get("tx", {}).get("bytes", 0))
        return out

    def qdisc_drops(self) -> int:
        total = 0
        for m in self.machines:
            for ns, dev in ((f"{self.prefix}-{m}", "eth0"), (f"{self.prefix}-sw", m)):
                for q in ns_json(["tc", "-s", "-j", "-n", ns, "qdisc", "show", "dev", dev]):
                    total += int(q.get("drops", 0))
        return total

    def run_ranks(self, spec: dict, env: dict) -> list[dict]:
        """The n ranks of one configuration, each in its machine's namespace."""
        path = os.path.join(self.dir, f"spec-{spec['conf']}.json")
        with open(path, "w") as f:
            json.dump(spec, f)
        port = random.randint(20000, 59999)
        self.ranks = []
        logs = []
        per = self.o.local_ranks
        for r in range(self.o.ranks):
            logs.append(os.path.join(self.dir, f"rank{r}-{spec['tag']}.log"))
            self.ranks.append(subprocess.Popen(
                ["ip", "netns", "exec", f"{self.prefix}-g{r // per}", sys.executable, __file__,
                 "--rank-main", path],
                env=rank_env(dict(env, RANK=str(r), WORLD_SIZE=str(self.o.ranks),
                                  LOCAL_RANK=str(r % per), LOCAL_WORLD_SIZE=str(per),
                                  MASTER_ADDR="10.77.0.1", MASTER_PORT=str(port))),
                stdout=open(logs[r], "w"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
        deadline = time.monotonic() + self.o.timeout
        failed = None
        while failed is None and any(p.poll() is None for p in self.ranks):
            for r, p in enumerate(self.ranks):
                if p.poll() not in (None, 0):
                    failed = r
            if time.monotonic() > deadline:
                failed = -1
            time.sleep(0.05)
        for r, p in enumerate(self.ranks):
            if failed is None and p.returncode != 0:
                failed = r
        self.ranks_rc = [p.poll() for p in self.ranks]  # before the others are killed
        self.kill_ranks()
        if failed is not None:
            which = f"rank {failed}" if failed >= 0 else f"a rank (past {self.o.timeout:g} s)"
            if failed >= 0 and (self.ranks_rc[failed] or 0) < 0:
                sig = -self.ranks_rc[failed]
                which += (f", killed by signal {sig}" +
                          (" (the kernel's OOM killer? see dmesg)" if sig == 9 else ""))
            r = max(failed, 0)
            raise Fail(f"{spec['tag']}: {which} failed; its log ends:\n" +
                       "".join(open(logs[r]).readlines()[-25:]))
        return [json.load(open(spec["out"] % r)) for r in range(self.o.ranks)]

    def kill_ranks(self) -> None:
        for p in self.ranks:
            if p.poll() is None:
                p.kill()
        for p in self.ranks:
            p.wait()
        self.ranks = []

    def down(self) -> None:
        self.kill_ranks()
        for p in self.nodes.values():
            if p.poll() is None:
                p.terminate()
        for m, p in self.nodes.items():
            try:
                p.wait(3)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.nodes = {}
        if self.made:
            subprocess.run([self.net, "down", self.prefix], capture_output=True)
            self.made = False

    def left(self) -> str:
        r = subprocess.run([self.net, "left", self.prefix], capture_output=True, text=True)
        return r.stdout.strip()


def eth0_bytes() -> tuple[int, int]:
    """(sent, received) bytes of this namespace's eth0, the machine's link."""
    out = []
    for what in ("tx_bytes", "rx_bytes"):
        try:
            with open(f"/sys/class/net/eth0/statistics/{what}") as f:
                out.append(int(f.read()))
        except (OSError, ValueError):
            out.append(0)
    return out[0], out[1]


def pids_cpu_s(pids: list[int]) -> float:
    """The CPU seconds (user + system) that these processes have used so far."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                v = f.read().rsplit(")", 1)[1].split()
            total += int(v[11]) + int(v[12])  # utime, stime: fields 14 and 15
        except (OSError, IndexError, ValueError):
            pass
    return total / os.sysconf("SC_CLK_TCK")


def cpu_ticks() -> tuple[int, int]:
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v) - idle, sum(v)


# ---- the run -----------------------------------------------------------------

def configurations(o: argparse.Namespace) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for c in o.configs:
        if c == "sigma":
            out += [("sigma", k) for k in o.ks]
        elif c in ("opt", "ps"):
            out.append((c, o.k))
        else:
            out.append((c, 0))
    return out


def conf_nodes(cl: Cluster, conf: str, k: int) -> list[str]:
    if conf == "ps":
        return [f"c{j}" for j in range(k)]
    return [f"g{i}" for i in range(cl.o.n)] + [f"c{j}" for j in range(k)]


def model_units(o: argparse.Namespace) -> dict:
    """BytePS's model from sigma-bench model: times in units of M/B per k."""
    bench = os.path.join(build_dir(), "bench", "sigma-bench")
    with tempfile.NamedTemporaryFile("r", suffix=".json") as f:
        subprocess.run([bench, "model", "--n", str(o.n), "--json", f.name], check=True,
                       capture_output=True)
        rows = json.load(f)["rows"]
    return {r["k"]: r for r in rows}


def tag(conf: str, k: int) -> str:
    return f"{conf}{k}" if conf in ("sigma", "opt", "ps") else conf


@contextlib.contextmanager
def sigma_job(cl: Cluster, conf: str, k: int, mode: str) -> Iterator[dict]:
    """The ranks' environment for a Sigma configuration (empty for the others).
    One rank per machine: a job made here on the configuration's nodes, with N
    = n, destroyed after. Several: the node list, so that sigma.torch.init makes
    one job of N = n machines per local rank, as a user's job would, and
    destroys them at shutdown."""
    if conf not in ("sigma", "opt", "ps"):
        yield {}
        return
    nodes = [f"unix:{cl.sock(m)}" for m in conf_nodes(cl, conf, k)]
    if cl.o.local_ranks > 1:
        yield {"SIGMA_NODES": ";".join(nodes), "SIGMA_MODE": mode}
        return
    from sigma.job import create_job, destroy_job
    job = create_job(nodes, cl.o.n, mode=mode)
    try:
        yield {"SIGMA_JOB": job.descriptor}
    finally:
        destroy_job(nodes, job.id)


def run(o: argparse.Namespace) -> dict:
    folder = tempfile.mkdtemp(prefix="sigma-train-")
    os.chmod(folder, 0o755)
    cl = Cluster(o, folder)
    say = (lambda *a: None) if o.quiet else (lambda *a: print("train:", *a, file=sys.stderr))
    confs = configurations(o)
    per: dict[str, dict] = {tag(c, k): {"conf": c, "k": k, "runs": []} for c, k in confs}
    grad_bytes = 0
    try:
        say(f"{o.model}: {o.n} GPU + {o.cpus} CPU machines, links {o.mbit} Mbit/s, "
            f"batch {o.batch}, input {o.input}; {len(confs)} configurations x {o.runs} runs")
        cl.up()
        for run_i in range(o.runs):
            for c, k in confs:
                t = tag(c, k)
                spec = {"conf": c, "model": o.model, "seed": o.seed, "batch": o.batch,
                        "input": o.input, "warmup": o.warmup, "steps": o.steps,
                        "local_ranks": o.local_ranks, "window": o.window,
                        "timeout": o.timeout, "tag": f"{t}-run{run_i}",
                        "node_pids": [cl.nodes[m].pid for m in conf_nodes(cl, c, k)
                                      if c != "compute" and c != "gloo"],
                        "out": os.path.join(folder, f"res-{t}-{run_i}-%d.json"),
                        "save": os.path.join(folder, f"params-{t}.pt") if run_i == 0 else None}
                b0, c0, q0 = cl.link_bytes(), cpu_ticks(), cl.qdisc_drops()
                with sigma_job(cl, c, k, "sync") as env:
                    res = cl.run_ranks(spec, env)
                b1, c1, q1 = cl.link_bytes(), cpu_ticks(), cl.qdisc_drops()
                sums = {round(r["init_sum"], 6) for r in res}
                if len(sums) != 1:
                    raise Fail(f"{t}: the ranks built different models (parameter sums {sums})")
                steps = [max(r["times"][s] for r in res) for s in range(o.steps)]
                grad_bytes = res[0]["grad_bytes"]
                per[t]["runs"].append({
                    "step_s": statistics.median(steps), "steps_s": steps,
                    # the timed steps only: what each GPU machine sent on its link,
                    # and the host's CPUs (rank 0 reads both at the first and last step)
                    "link_bytes_per_step": statistics.mean(r["link_sent"] for r in res) / o.steps,
                    "cpu_busy": res[0]["host_busy"],
                    # the cluster's own processes (ranks and the job's nodes), which
                    # other load on the host does not change; softirq work the kernel
                    # does outside them is not in it
                    "cluster_cpu_busy": (sum(r["cpu_s"] for r in res) + res[0]["nodes_cpu_s"])
                    / (res[0]["wall_s"] * (os.cpu_count() or 1)),
                    "cpu_busy_whole_run": (c1[0] - c0[0]) / max(1, c1[1] - c0[1]),
                    "link_bytes_whole_run": sum(b1[m][0] - b0[m][0] for m in cl.machines),
                    "retransmits": sum(r.get("retransmits", 0) for r in res),
                    "rx_dropped": sum(r.get("rx_dropped", 0) for r in res),
                    **{key: sum(r.get(key, 0) for r in res) for key in TRANSPORT_STATS},
                    "qdisc_drops": q1 - q0, "loss": res[0]["loss"]})
                say(f"run {run_i}: {t:9s} step {statistics.median(steps) * 1e3:9.1f} ms")
        checked = check_runs(o, cl, confs, folder, say)
        out = report(o, per, folder, checked, grad_bytes)
    except KeyboardInterrupt:
        raise Fail("interrupted")
    finally:
        cl.down()
        left = cl.left()
        shutil.rmtree(folder, ignore_errors=True)
        if left:
            print(f"train: left behind:\n{left}", file=sys.stderr)
    return out


def check_runs(o: argparse.Namespace, cl: Cluster, confs: list[tuple[str, int]], folder: str,
               say: Callable[..., None]) -> list[str]:
    """The bitwise check: --check-steps steps of every Sigma configuration with its
    job in deterministic mode, and of the rank-order reference and gloo, from the
    same seed. Returns the tags run; each saved its parameters as params-TAG-check.pt."""
    if o.check_steps == 0:
        return []
    todo = [("ref", 0), ("gloo", 0)] + [(c, k) for c, k in confs if c in ("sigma", "opt", "ps")]
    for c, k in todo:
        t = tag(c, k)
        spec = {"conf": c, "model": o.model, "seed": o.seed, "batch": o.batch,
                "input": o.input, "warmup": 0, "steps": o.check_steps, "timeout": o.timeout,
                "local_ranks": o.local_ranks, "window": o.window,
                "tag": f"{t}-check", "out": os.path.join(folder, f"check-{t}-%d.json"),
                "save": os.path.join(folder, f"params-{t}-check.pt"), "node_pids": []}
        with sigma_job(cl, c, k, "deterministic") as env:
            cl.run_ranks(spec, env)
        say(f"check: {t} ({o.check_steps} steps{', deterministic' if env else ''})")
    return [tag(c, k) for c, k in todo]


def compare_params(o: argparse.Namespace, per: dict, folder: str, checked: list[str]) -> None:
    """Each Sigma configuration's parameters against the references; sets
    per[tag]["params"], whose "ok" fails the run where false.

    - The check (deterministic jobs): bitwise equal to the rank-order reference.
      This is what proves the sums, whatever the training does with them.
    - The timed runs (sync jobs): at n <= 2 with DDP, bitwise equal to gloo's
      (two terms add the same in either order). Otherwise a different summation
      order moves each sum by a few ulps, which training carries on: within
      --rtol of how far gloo's training moved each parameter, or, where training
      amplifies such differences (ResNet-50's BatchNorm over two values per
      channel does), within 10 times gloo's own drift from the rank-order
      reference after the same steps."""
    import torch

    def load(name: str) -> Any:
        return torch.load(os.path.join(folder, name))
    gloo = load("params-gloo.pt")
    moved = (gloo - load("params-gloo.pt.init")).abs()
    bound = o.rtol * (moved + 1e-3 * float(moved.max()))
    drift = None
    if "ref" in checked:
        ref = load("params-ref-check.pt")
        drift = float((load("params-gloo-check.pt") - ref).abs().max())
        per["gloo"]["params"] = {"order_drift_vs_rank_order": drift,
                                 "check_steps": o.check_steps}
    for t, v in per.items():
        if v["conf"] in ("gloo", "compute"):
            continue
        got = load(f"params-{t}.pt")
        bitwise = o.ranks <= 2 and v["conf"] != "opt"
        diff = (got - gloo).abs()
        within = bool((diff <= bound).all())
        if bitwise:
            sync_ok = torch.equal(got, gloo)
        else:
            sync_ok = within or (drift is not None and o.check_steps == o.warmup + o.steps
                                 and float(diff.max()) <= 10 * drift)
        pv = {"equal_to_gloo": sync_ok, "bitwise": bitwise, "within_rtol": within,
              "max_abs_diff": float(diff.max()),
              "max_diff_over_update": float((diff / (moved + 1e-30)).max()),
              "max_update": float(moved.max()), "ok": sync_ok}
        if t in checked:
            d = (load(f"params-{t}-check.pt") - ref).abs()
            pv["deterministic_bitwise"] = bool(d.max() == 0)
            pv["deterministic_max_abs_diff"] = float(d.max())
            pv["ok"] = sync_ok and pv["deterministic_bitwise"]
        v["params"] = pv


def report(o: argparse.Namespace, per: dict, folder: str, checked: list[str],
           grad_bytes: int) -> dict:
    compare_params(o, per, folder, checked)
    units = model_units(o)
    med = {t: statistics.median(r["step_s"] for r in v["runs"]) for t, v in per.items()}
    g = med["gloo"]
    comp = med.get("compute")
    rate = o.mbit * 1e6 / 8
    for t, v in per.items():
        s = med[t]
        v["step_s"] = s
        v["samples_per_s"] = o.ranks * o.batch / s
        v["speedup_vs_gloo"] = g / s
        v["link_use"] = statistics.median(r["link_bytes_per_step"] for r in v["runs"]) / (s * rate)
        v["link_bytes_per_step"] = statistics.median(r["link_bytes_per_step"] for r in v["runs"])
        # what the model puts on a GPU machine's link per step, in M: Sigma's
        # split loads every link alike (t_model in M/B); a PS takes all M from each
        # GPU machine; gloo's ring over every rank, 2 (R - 1) / R
        lm = {"sigma": units[v["k"]]["t_sigma_MB"] if v["k"] in units else None,
              "opt": units[v["k"]]["t_sigma_MB"] if v["k"] in units else None,
              "ps": 1.0,
              "gloo": 2 * (o.ranks - 1) / o.ranks, "compute": None}[v["conf"]]
        if lm is not None and lm > 0:
            v["link_model_bytes"] = lm * grad_bytes
            v["link_vs_model"] = v["link_bytes_per_step"] / v["link_model_bytes"]
        v["cpu_busy"] = statistics.median(r["cpu_busy"] for r in v["runs"])
        v["cluster_cpu_busy"] = statistics.median(r["cluster_cpu_busy"] for r in v["runs"])
        for key in ("retransmits", "rx_dropped", "qdisc_drops") + TRANSPORT_STATS:
            v[key] = sum(r.get(key, 0) for r in v["runs"])
        if comp is not None:
            v["comm_exposed_s"] = max(0.0, s - comp)
            ar = units[0]["t_allreduce_MB"]
            ratio = {"sigma": units[v["k"]]["t_sigma_MB"] / ar if v["k"] in units else None,
                     "opt": units[v["k"]]["t_sigma_MB"] / ar if v["k"] in units else None,
                     "ps": (units[v["k"]]["t_ps_MB"] / ar if v["k"] in units
                            and units[v["k"]]["t_ps_MB"] > 0 else None),
                     "gloo": 1.0, "compute": 0.0}[v["conf"]]
            if ratio is not None:
                pred = comp + (g - comp) * ratio
                v["predicted_step_s"] = pred
                v["predicted_speedup"] = g / pred
                v["speedup_vs_predicted"] = v["speedup_vs_gloo"] / v["predicted_speedup"]
    out = {"bench": "train", "model": o.model, "about": MODELS[o.model][0], "n": o.n,
           "local_ranks": o.local_ranks, "ranks": o.ranks, "grad_bytes": grad_bytes,
           "k": o.k, "ks": o.ks, "link_mbit": o.mbit, "mtu": o.mtu, "window": o.window, "batch": o.batch,
           "input": o.input, "steps": o.steps, "warmup": o.warmup, "runs": o.runs,
           "cpu": cpu_name(), "configs": per,
           "params_ok": all(v.get("params", {}).get("ok", True) for v in per.values())}
    return out


def cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                flags = open("/proc/cpuinfo").read()
                isa = "AVX-512" if " avx512f" in flags else "AVX2" if " avx2" in flags else "SSE"
                return f"{line.split(':', 1)[1].strip()} ({os.cpu_count()} CPUs, {isa})"
    except OSError:
        pass
    return "?"


def params_word(p: Optional[dict]) -> str:
    """The table's last column: the sync run against gloo, then the check."""
    if p is None:
        return "-"
    if "order_drift_vs_rank_order" in p:
        return f"drift {p['order_drift_vs_rank_order']:.3g}"
    w = ("bitwise" if p["bitwise"] and p["equal_to_gloo"] else
         "within rtol" if p["within_rtol"] else
         f"drift {p['max_abs_diff']:.3g}" if p["equal_to_gloo"] else
         f"WRONG ({p['max_abs_diff']:.3g})")
    if "deterministic_bitwise" in p:
        w += (", det. bitwise" if p["deterministic_bitwise"] else
              f", det. WRONG ({p['deterministic_max_abs_diff']:.3g})")
    return w


def print_table(out: dict) -> None:
    print(f"{out['model']}: n = {out['n']} x {out['local_ranks']} ranks, links {out['link_mbit']} Mbit/s, batch "
          f"{out['batch']}, input {out['input']}, medians of {out['steps']} steps x "
          f"{out['runs']} runs; {out['cpu']}")
    print(f"{'config':9s} {'step ms':>9s} {'samples/s':>10s} {'exposed ms':>10s} "
          f"{'speedup':>8s} {'model':>7s} {'/model':>7s} {'link MB':>8s} {'/model':>6s} {'link%':>6s} "
          f"{'cpu%':>5s} {'ours%':>5s} {'resend':>6s} {'drops':>6s} params")
    for t, v in out["configs"].items():
        ps = params_word(v.get("params"))

        def f(key: str, fmt: str, scale: float = 1.0) -> str:
            return format(v[key] * scale, fmt) if key in v else "-"
        print(f"{t:9s} {f('step_s', '9.1f', 1e3)} {f('samples_per_s', '10.2f')} "
              f"{f('comm_exposed_s', '10.1f', 1e3)} {f('speedup_vs_gloo', '7.3f')}x "
              f"{f('predicted_speedup', '6.3f')}x {f('speedup_vs_predicted', '7.3f')} "
              f"{f('link_bytes_per_step', '8.1f', 1e-6)} {f('link_vs_model', '6.3f')} "
              f"{f('link_use', '6.1f', 100)} "
              f"{f('cpu_busy', '5.0f', 100)} {f('cluster_cpu_busy', '5.0f', 100)} "
              f"{v['retransmits']:6d} "
              f"{v['qdisc_drops'] + v['rx_dropped']:6d} {ps}")


def plot(path: str, out: dict) -> None:
    """samples/s against k: Sigma measured, the model's line, gloo and PS."""
    cf = out["configs"]
    pts = sorted((v["k"], v["samples_per_s"], v.get("predicted_step_s"))
                 for v in cf.values() if v["conf"] == "sigma")
    with tempfile.NamedTemporaryFile("w", suffix=".dat", delete=False) as f:
        for k, sps, pred in pts:
            model = out["n"] * out["batch"] / pred if pred else float("nan")
            f.write(f"{k} {sps:.6g} {model:.6g}\n")
        dat = f.name
    g = cf["gloo"]["samples_per_s"]
    lines = [f"set terminal {'pngcairo' if path.endswith('.png') else 'svg'} size 800,500",
             f"set output '{path}'", "set grid", "set key left top",
             "set xlabel 'CPU machines k'", "set ylabel 'samples/s (all ranks)'",
             "set xtics 1", "set yrange [0:*]",
             f"set title '{out['model']}: n = {out['n']} GPU machines, "
             f"{out['link_mbit']} Mbit/s links'",
             f"plot '{dat}' using 1:2 with linespoints lw 2 title 'Sigma (measured)', "
             f"'{dat}' using 1:3 with lines dt 2 title 'BytePS model (from compute + gloo)', "
             f"{g:.6g} with lines lc rgb 'black' title 'gloo all-reduce'"]
    if "ps" + str(out["k"]) in cf:
        ps = cf["ps" + str(out["k"])]
        lines[-1] += f", '+' using ({ps['k']}):({ps['samples_per_s']:.6g}) with points pt 7 " \
                     f"ps 1.5 title 'PS, k = {ps['k']}'"
    try:
        r = subprocess.run(["gnuplot"], input="\n".join(lines) + "\n", text=True,
                           capture_output=True)
        if r.returncode != 0:
            raise Fail(f"gnuplot failed: {r.stderr.strip()}")
    except FileNotFoundError:
        raise Fail("--plot needs gnuplot (apt-get install gnuplot-nox)")
    finally:
        os.unlink(dat)


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--rank-main":
        return rank_main(argv[1])
    try:
        o = parse_args(argv)
        check_torch(o.model)
        if os.geteuid() != 0:
            raise Usage("needs root: network namespaces and tc (sudo ./sigma bench train ...)")
        for tool in ("ip", "tc"):
            if shutil.which(tool) is None:
                raise Skip(f"no {tool}(8) (apt-get install iproute2)")
        sys.path.insert(0, PYDIR)
        # the tree's build, for this process's sigma.job and the ranks it starts
        if not os.environ.get("SIGMA_BUILD_DIR") and os.path.isdir(build_dir()):
            os.environ["SIGMA_BUILD_DIR"] = build_dir()
        # SIGINT too, also where it came ignored (a background job of a script)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
        out = run(o)
    except Usage as e:
        print(f"sigma bench train: {e}", file=sys.stderr)
        return 2
    except Skip as e:
        print(f"sigma bench train: cannot build the cluster here: {e}", file=sys.stderr)
        return 77
    except Fail as e:
        print(f"sigma bench train: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # noqa: BLE001 - a node refusing a job, say: its reason, exit 1
        print(f"sigma bench train: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print_table(out)
    text = json.dumps(out, indent=1)
    if o.json:
        with open(o.json, "w") as f:
            f.write(text + "\n")
    else:
        print(text)
    if o.plot:
        try:
            plot(o.plot, out)
        except Fail as e:
            print(f"sigma bench train: {e}", file=sys.stderr)
            return 1
    if not out["params_ok"]:
        print("sigma bench train: FAIL: a configuration's parameters differ from gloo's",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

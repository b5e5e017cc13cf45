#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""DDP's communication per step: Sigma's hook against gloo's all-reduce.

    ./sigma bench pytorch [--models resnet50,bert-base] [--workers 2,4] [--steps 5]
        [--reps 3] [--json out.json]
    /usr/bin/python3 bench/pytorch_ddp.py --json out.json

For each model and N, N ranks (forked here, one torch thread each) run a DDP
step of a model with that model's parameter shapes: torchvision's ResNet-50
(25.6 M parameters, 161 tensors) and a BERT-base-sized encoder (109.5 M, 199
tensors). Only the gradients' sizes matter for communication, so forward is a
weighted sum of the parameters and backward fills each gradient: the step is
communication and DDP's bucket copies, with the least compute possible, and
every bucket is ready at about the same time (no overlap to hide behind).

The same processes, in turns, time three ways to finish the step:

- ``gloo``: DDP's all-reduce hook (what DDP does without a hook) on gloo;
- ``sigma``: sigma.torch.ddp_comm_hook, through K local summation nodes
  (over shared memory, or kernel UDP with SIGMA_LOCAL_TRANSPORT=udp; the
  JSON's ``transport`` says which);
- ``none``: a hook that returns at once (the step without communication).

Per step, *comm* is from the first bucket's hook call to the last bucket's
completion (the slowest rank), *step* is forward + backward (DDP waits for
every bucket before backward returns). Medians over the timed steps of all
repetitions (and each repetition's median, to show the spread). ratio = gloo /
sigma (above 1: Sigma is faster), for comm and for the step. Each row is
judged against the issue's target, Sigma's comm time per step at most gloo's
(ratio >= 1.0; stretch >= 2.0), and a missed one says by how much. For Sigma
it also tells where the Python side's time went: the progress thread's loops,
its time inside sigma_poll() (GIL released) and outside it (Python, GIL
waits), its CPU time; the hook's own cost per call; a ctypes call; the
nodes' CPU time; libsigma's resends and the nodes' WAITING answers per step.
A table, then JSON (or --json FILE). ``--models tiny`` is a 1 M-parameter
model for a quick check of the script itself (tests), not a benchmark.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
# run from the source tree: the libraries and sigma-udpd of ./build, unless told
if not os.environ.get("SIGMA_BUILD_DIR") and os.path.isdir(os.path.join(HERE, "..", "build")):
    os.environ["SIGMA_BUILD_DIR"] = os.path.normpath(os.path.join(HERE, "..", "build"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402

import sigma.torch as sgt  # noqa: E402
from sigma import _lib  # noqa: E402
from sigma.launch import run_forked  # noqa: E402
from sigma.localnodes import start_local_nodes  # noqa: E402


def bert_base_shapes() -> list[tuple[int, ...]]:
    """BERT-base's parameter shapes: 30522-token vocabulary, 512 positions, 2
    token types, hidden 768, 12 layers, 3072 intermediate, and the pooler."""
    h, ff = 768, 3072
    shapes = [(30522, h), (512, h), (2, h), (h,), (h,)]
    for _ in range(12):
        shapes += [(h, h), (h,)] * 4 + [(h,), (h,), (ff, h), (ff,), (h, ff), (h,), (h,), (h,)]
    return shapes + [(h, h), (h,)]


def resnet50_shapes() -> list[tuple[int, ...]]:
    import torchvision
    return [tuple(p.shape) for p in torchvision.models.resnet50().parameters()]


def tiny_shapes() -> list[tuple[int, ...]]:
    """About 1 M parameters in 8 tensors: checks the script, measures nothing."""
    return [(512, 256), (512,)] * 4 + [(256, 1000), (1000,)] * 2


MODELS = {"resnet50": resnet50_shapes, "bert-base": bert_base_shapes, "tiny": tiny_shapes}
TARGET_RATIO, STRETCH_RATIO = 1.0, 2.0


class Shapes(nn.Module):
    """Parameters of the given shapes; forward is x times their weighted sum,
    so backward fills every gradient (full size, as a real model's)."""

    def __init__(self, shapes: list[tuple[int, ...]]) -> None:
        super().__init__()
        self.ps = nn.ParameterList(nn.Parameter(torch.zeros(s)) for s in shapes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sum(p.sum() for p in self.ps) * x


class Timer:
    """Wraps a hook: first call and last completion of each step's buckets."""

    def __init__(self, hook, state) -> None:
        self.hook, self.state = hook, state
        self.first = None
        self.last = 0.0
        self.calls = 0
        self.hook_s = 0.0

    def __call__(self, state, bucket):
        t = time.perf_counter()
        if self.first is None:
            self.first = t
        fut = self.hook(self.state, bucket)
        self.hook_s += time.perf_counter() - t
        self.calls += 1

        def done(f):
            self.last = max(self.last, time.perf_counter())
            return f.value()
        return fut.then(done)

    def take(self) -> float:
        span = self.last - self.first
        self.first, self.last = None, 0.0
        return span


def gloo_hook(_state, bucket):
    t = bucket.buffer().div_(dist.get_world_size())
    return dist.all_reduce(t, async_op=True).get_future().then(lambda f: f.value()[0])


def none_hook(_state, bucket):
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


def proc_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rank_main(rank: int, n: int, targets: list[str], node_pids: list[int], models: list[str],
              steps: int, warmup: int, reps: int, bucket_mb: float, max_retries: int,
              ranks_wait: float) -> dict:
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    sgt.init(targets, max_retries=max_retries, ranks_wait=ranks_wait)
    out: dict = {}
    x = torch.ones(())
    for name in models:
        model = Shapes(MODELS[name]())
        res: dict = {m: {"step": [], "comm": []} for m in ("none", "gloo", "sigma")}
        prof0 = prof1 = None
        for rep in range(reps):
            for method in ("none", "gloo", "sigma"):
                hook = {"none": none_hook, "gloo": gloo_hook, "sigma": sgt.ddp_comm_hook}[method]
                state = sgt.HookState(name=f"{name}") if method == "sigma" else None
                ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=bucket_mb)
                timer = Timer(hook, state)
                ddp.register_comm_hook(None, timer.__call__)  # DDP wants a function
                cpu0 = time.process_time()
                for step in range(warmup + steps):
                    if step == warmup:
                        timer.calls, timer.hook_s = 0, 0.0
                        cpu0 = time.process_time()
                        if method == "sigma" and prof0 is None:
                            prof0 = (sgt.session().profile(), [proc_cpu_s(p) for p in node_pids],
                                     sgt.session().stats())
                    dist.barrier()
                    t0 = time.perf_counter()
                    ddp(x).backward()
                    t1 = time.perf_counter()
                    span = timer.take()
                    if step >= warmup:
                        res[method]["step"].append(t1 - t0)
                        res[method]["comm"].append(span)
                res[method]["cpu_per_step"] = (time.process_time() - cpu0) / steps
                res[method]["hook_us"] = timer.hook_s / max(1, timer.calls) * 1e6
                res[method]["buckets"] = timer.calls // steps
                if method == "sigma":
                    prof1 = (sgt.session().profile(), [proc_cpu_s(p) for p in node_pids],
                             sgt.session().stats())
                del ddp
                model.zero_grad(set_to_none=True)
        if prof0 and prof1:
            p0, p1 = prof0[0], prof1[0]
            timed = steps * reps  # steps timed since prof0 (warm-ups of later reps too)
            res["sigma"]["progress"] = {k: (p1[k] - p0[k]) for k in p0}
            res["sigma"]["node_cpu_s"] = sum(b - a for a, b in zip(prof0[1], prof1[1]))
            res["sigma"]["libsigma"] = {k: getattr(prof1[2], k) - getattr(prof0[2], k)
                                        for k in ("tx_packets", "retransmits", "waits", "nacks",
                                                  "rx_dropped", "ops_failed")}
            res["sigma"]["progress_steps"] = timed + warmup * (reps - 1)
        res["params"] = sum(p.numel() for p in model.parameters())
        res["tensors"] = len(list(model.parameters()))
        out[name] = res
        del model
    out["ctypes_call_us"] = ctypes_call_us()
    out["transport"] = sgt.session().transport  # shm, udp or shm+udp
    sgt.shutdown()
    dist.destroy_process_group()
    return out


def ctypes_call_us() -> float:
    """One ctypes call into libsigma (sigma_test on a NULL tensor), in us."""
    f = _lib.libsigma().sigma_test
    k = 100000
    t = time.perf_counter()
    for _ in range(k):
        f(None)
    return (time.perf_counter() - t) / k * 1e6


def cpu_name() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def target(ratio: float) -> dict:
    """The issue's target for one row: Sigma's comm time at most gloo's."""
    out = {"ratio_min": TARGET_RATIO, "stretch": STRETCH_RATIO, "met": ratio >= TARGET_RATIO,
           "stretch_met": ratio >= STRETCH_RATIO}
    if not out["met"]:
        out["missed_by"] = (f"Sigma's comm time is {1 / ratio:.2f}x gloo's: the ratio is "
                            f"{ratio:.2f}, {100 * (1 - ratio):.0f}% short of {TARGET_RATIO}")
    return out


def summarise(model: str, n: int, ranks: list[dict], steps_per_rep: int) -> dict:
    """Medians over steps of the slowest rank's time per step."""
    per = [r[model] for r in ranks]
    row: dict = {"model": model, "workers": n, "params": per[0]["params"],
                 "tensors": per[0]["tensors"], "bytes": per[0]["params"] * 4}
    for m in ("none", "gloo", "sigma"):
        steps = [max(vals) for vals in zip(*(p[m]["step"] for p in per))]
        comms = [max(vals) for vals in zip(*(p[m]["comm"] for p in per))]
        reps = [comms[i:i + steps_per_rep] for i in range(0, len(comms), steps_per_rep)]
        row[m] = {"step_ms": 1e3 * statistics.median(steps),
                  "comm_ms": 1e3 * statistics.median(comms),
                  "comm_ms_reps": [round(1e3 * statistics.median(r), 2) for r in reps],
                  "step_ms_all": [round(1e3 * s, 2) for s in steps],
                  "cpu_ms_per_step": 1e3 * statistics.mean(p[m]["cpu_per_step"] for p in per),
                  "hook_us": statistics.mean(p[m]["hook_us"] for p in per),
                  "buckets": per[0][m]["buckets"]}
    row["ratio_comm"] = row["gloo"]["comm_ms"] / row["sigma"]["comm_ms"]
    row["ratio_step"] = row["gloo"]["step_ms"] / row["sigma"]["step_ms"]
    row["ratio_comm_reps"] = [round(g / s, 3) for g, s in zip(row["gloo"]["comm_ms_reps"],
                                                             row["sigma"]["comm_ms_reps"])]
    row["target"] = target(row["ratio_comm"])
    prog = [p["sigma"].get("progress") for p in per]
    if all(prog):
        k = per[0]["sigma"]["progress_steps"]
        row["sigma"]["progress_per_step_ms"] = {
            key: 1e3 * statistics.mean(p[key] for p in prog) / k
            for key in ("active_s", "poll_s", "python_s", "cpu_s")}
        row["sigma"]["progress_loops_per_step"] = statistics.mean(p["loops"] for p in prog) / k
        row["sigma"]["node_cpu_ms_per_step"] = 1e3 * per[0]["sigma"]["node_cpu_s"] / k
        row["sigma"]["per_step"] = {key: statistics.mean(p["sigma"]["libsigma"][key]
                                                         for p in per) / k
                                    for key in per[0]["sigma"]["libsigma"]}
    return row


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="resnet50,bert-base")
    p.add_argument("--workers", default="2,4")
    p.add_argument("--steps", type=int, default=5, help="timed steps per repetition [5]")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first [2]")
    p.add_argument("--reps", type=int, default=3, help="turns of none, gloo, sigma [3]")
    p.add_argument("--nodes", type=int, default=2, help="local summation nodes [2]")
    p.add_argument("--bucket-mb", type=float, default=25.0, help="DDP's bucket_cap_mb [25]")
    p.add_argument("--max-retries", type=int, default=0,
                   help="libsigma's unanswered resends before a node counts as dead [0: "
                        "sigma.torch's, 10]")
    p.add_argument("--ranks-wait", type=float, default=60.0,
                   help="seconds a push may wait for ranks behind (a loaded machine can hold "
                        "a rank back for seconds in DDP's first step) [60]")
    p.add_argument("--json", help="write the JSON here instead of after the table")
    a = p.parse_args()
    if a.steps < 1 or a.reps < 1 or a.warmup < 0 or a.nodes < 1:
        p.error("--steps, --reps and --nodes must be >= 1, --warmup >= 0")
    models = a.models.split(",")
    for m in models:
        if m not in MODELS:
            p.error(f"--models: {m}: one of {', '.join(MODELS)}")
    rows = []
    load = {"before": os.getloadavg()}
    for n in (int(w) for w in a.workers.split(",")):
        with start_local_nodes(a.nodes) as nodes:
            pids = [nd.proc.pid for nd in nodes.nodes]
            ranks = run_forked(n, rank_main, nodes.targets, pids, models, a.steps, a.warmup,
                               a.reps, a.bucket_mb, a.max_retries, a.ranks_wait, timeout=3600)
        for m in models:
            rows.append(summarise(m, n, ranks, a.steps))
            r = rows[-1]
            r["transport"] = ranks[0]["transport"]
            print(f"# {m} N={n}: comm gloo {r['gloo']['comm_ms']:.1f} ms, sigma "
                  f"{r['sigma']['comm_ms']:.1f} ms, ratio {r['ratio_comm']:.2f}; step ratio "
                  f"{r['ratio_step']:.2f}", file=sys.stderr, flush=True)
        ctypes_us = ranks[0]["ctypes_call_us"]
    load["after"] = os.getloadavg()
    doc = {"bench": "pytorch_ddp", "cpu": cpu_name(), "cpus": os.cpu_count(), "loadavg": load,
           "torch": torch.__version__, "nodes": a.nodes, "steps": a.steps, "reps": a.reps,
           "bucket_mb": a.bucket_mb, "max_retries": a.max_retries, "ranks_wait": a.ranks_wait,
           "ctypes_call_us": ctypes_us, "models": models,
           "transport": ",".join(sorted({r["transport"] for r in rows})),
           "workers": [int(w) for w in a.workers.split(",")],
           "target": {"ratio_min": TARGET_RATIO, "stretch": STRETCH_RATIO,
                      "met": all(r["target"]["met"] for r in rows),
                      "stretch_met": all(r["target"]["stretch_met"] for r in rows)},
           "results": rows}
    print(f"CPU: {doc['cpu']} ({doc['cpus']} CPUs); load average (1, 5, 15 min) "
          f"{' '.join(f'{v:.1f}' for v in load['before'])} before, "
          f"{' '.join(f'{v:.1f}' for v in load['after'])} after (a shared machine: other "
          "work there adds noise); "
          f"{a.nodes} local sigma-udpd node(s) over {doc['transport']}; medians of {a.steps * a.reps} steps (slowest "
          "rank)")
    print(f"{'model':10} {'N':>2} {'MB':>6} {'gloo comm':>10} {'sigma comm':>11} {'ratio':>6} "
          f"{'gloo step':>10} {'sigma step':>11} {'ratio':>6} {'no-comm step':>13}")
    for r in rows:
        print(f"{r['model']:10} {r['workers']:>2} {r['bytes'] / 1e6:6.1f} "
              f"{r['gloo']['comm_ms']:8.1f}ms {r['sigma']['comm_ms']:9.1f}ms "
              f"{r['ratio_comm']:6.2f} {r['gloo']['step_ms']:8.1f}ms "
              f"{r['sigma']['step_ms']:9.1f}ms {r['ratio_step']:6.2f} "
              f"{r['none']['step_ms']:11.1f}ms")
    for r in rows:
        s = r["sigma"]
        pp = s.get("progress_per_step_ms", {})
        print(f"  {r['model']} N={r['workers']}: sigma per step: {s['buckets']} buckets, hook "
              f"{s['hook_us']:.0f} us/call; progress thread {pp.get('active_s', 0):.1f} ms "
              f"active ({pp.get('poll_s', 0):.1f} in sigma_poll, {pp.get('python_s', 0):.1f} "
              f"Python/GIL), {pp.get('cpu_s', 0):.1f} ms CPU, "
              f"{s.get('progress_loops_per_step', 0):.0f} loops; rank CPU "
              f"{s['cpu_ms_per_step']:.0f} ms (gloo {r['gloo']['cpu_ms_per_step']:.0f} ms); "
              f"nodes' CPU {s.get('node_cpu_ms_per_step', 0):.0f} ms")
    print(f"  one ctypes call: {ctypes_us:.2f} us")
    for r in rows:
        t = r["target"]
        verdict = ("stretch met (>= 2.0)" if t["stretch_met"] else "met (>= 1.0)" if t["met"]
                   else f"MISSED: {t['missed_by']}")
        per = r["sigma"].get("per_step", {})
        print(f"  target {r['model']} N={r['workers']}: comm ratio {r['ratio_comm']:.2f} "
              f"(per repetition {', '.join(f'{x:.2f}' for x in r['ratio_comm_reps'])}): "
              f"{verdict}; libsigma per step: {per.get('retransmits', 0):.0f} resends, "
              f"{per.get('waits', 0):.0f} WAITING")
    text = json.dumps(doc, indent=1)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

# SPDX-License-Identifier: BSD-3-Clause
"""How late each rank of a job pushes, as its summation nodes measure it.

A node times every push from the first push of its round (``job_lateness``,
docs/control.md "Stragglers"). A job spread over several nodes has a table on
each, for the keys it holds there; :func:`job_lateness` asks every node and
merges them: pushes, rounds and last counts add up, and a rank's average is
the average of the nodes' averages weighted by the pushes each timed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Optional, Sequence

from .errors import SigmaError
from .job import NodeTarget, control_call


@dataclass
class RankLateness:
    rank: int
    pushes: int = 0
    last: int = 0          # rounds in which this rank came last
    last_share: float = 0.0  # of the job's rounds
    avg_ms: float = 0.0    # the nodes' moving averages (what the rank does now)
    mean_ms: float = 0.0   # over every push timed


@dataclass
class Lateness:
    job: int
    rounds: int = 0
    ranks: list[RankLateness] = field(default_factory=list)
    straggler: Optional[int] = None  # the rank most often last; None before a round
    nodes: int = 0                   # nodes that answered
    errors: list[str] = field(default_factory=list)  # the nodes that did not, and why

    def summary(self) -> str:
        """One line a training job can log: who is late, by how much, how often."""
        if self.straggler is None:
            return f"job {self.job}: no round completed yet"
        s = self.ranks[self.straggler]
        return (f"job {self.job}: rank {s.rank} is {s.avg_ms:.1f} ms late on "
                f"{100 * s.last_share:.0f}% of {self.rounds} rounds")

    def as_dict(self) -> dict:
        return {"job": self.job, "rounds": self.rounds, "straggler": self.straggler,
                "nodes": self.nodes, "errors": list(self.errors),
                "ranks": [vars(r).copy() for r in self.ranks], "summary": self.summary()}


def job_lateness(nodes: Sequence[NodeTarget], job_id: int, *,
                 secret: Optional[bytes] = None, timeout_ms: int = 2000) -> Lateness:
    """Ask each node of @nodes for @job_id's lateness and merge the answers.

    A node that cannot be reached, or does not hold the job, is listed in
    ``errors`` and left out; with no node answering, ``nodes`` is 0 and
    ``straggler`` None."""
    out = Lateness(job_id)
    weights: dict[int, list[float]] = {}
    for n in nodes:
        target = n.target if isinstance(n, NodeTarget) else str(n)
        try:
            ans = json.loads(control_call(target, "job_lateness", json.dumps({"id": job_id}),
                                          secret=secret, timeout_ms=timeout_ms))
        except (SigmaError, ValueError) as e:
            out.errors.append(f"{target}: {e}")
            continue
        out.nodes += 1
        out.rounds += int(ans.get("rounds", 0))
        for x in ans.get("ranks", []):
            r = int(x["rank"])
            while len(out.ranks) <= r:
                out.ranks.append(RankLateness(len(out.ranks)))
            me, p = out.ranks[r], int(x.get("pushes", 0))
            me.pushes += p
            me.last += int(x.get("last", 0))
            w = weights.setdefault(r, [0.0, 0.0, 0.0])
            w[0] += p
            w[1] += p * float(x.get("avg_us", 0.0)) / 1e3
            w[2] += p * float(x.get("mean_us", 0.0)) / 1e3
    for r, me in enumerate(out.ranks):
        w = weights.get(r, [0.0, 0.0, 0.0])
        if w[0] > 0:
            me.avg_ms, me.mean_ms = w[1] / w[0], w[2] / w[0]
        me.last_share = me.last / out.rounds if out.rounds else 0.0
    if out.rounds and out.ranks:
        # most often last; a tie goes to the later average (the nodes' own rule
        # breaks ties by rank, which a merged table cannot reproduce)
        out.straggler = max(out.ranks, key=lambda x: (x.last, x.avg_ms)).rank
    return out

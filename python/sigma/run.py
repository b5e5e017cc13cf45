# SPDX-License-Identifier: BSD-3-Clause
"""sigmarun: N ranks of a training script, in horovodrun's and mpirun's form.

    sigmarun -np 4 train.py --epochs 1                 # 4 ranks here, 1 local node
    sigmarun -np 4 python3 train.py                    # the same (horovodrun's form)
    sigmarun -np 8 -H a:4,b:4 --nodes 'a:7070;b:7070' --secret-file ctl.secret train.py
    sigmarun -np 8 -H a:4,b:4 --etcd http://10.0.0.5:2379 --launcher-cmd 'ssh -p 2222' train.py
    python3 -m sigma.run ...                           # the same as sigmarun

Ranks are numbered host by host (``-H host:slots``, in order; a host
without ``:slots`` has 1): ranks 0..3 on a, 4..7 on b. Each gets
MASTER_ADDR/MASTER_PORT (rank 0's host: the store of ``sigma.torch.init()``),
RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE, and SIGMA_NODES,
SIGMA_SECRET_FILE, SIGMA_MODE, SIGMA_ETCD, SIGMA_CLUSTER from the options;
``-x NAME`` or ``-x NAME=VALUE`` passes more. The variables of other
launchers (OMPI_*, PMI_*, DMLC_*, HOROVOD_*, SIGMA_RANK, ...) are removed,
so that a rank never takes its rank from two places.

Summation nodes: without ``--nodes``/``--etcd`` (and SIGMA_NODES, SIGMA_ETCD
unset) sigmarun starts ``--local-nodes`` (1) nodes here for the run; ranks
on other hosts cannot reach those, so ``-H`` with another host needs real
nodes. Ranks on this machine (localhost, 127.0.0.1 or its host name) are
started directly; the others through ``--launcher-cmd`` (``ssh -tt -o
BatchMode=yes`` by default) with the host and one shell command line
appended, as ssh takes them: ``cd CWD && exec env VAR=... python3 script
args``. ``--dry-run`` prints each rank's host and command and starts nothing.

When a rank fails, the others get ``--grace`` s to end by themselves, then
SIGINT, then SIGKILL (a remote rank through its ssh: ``-tt`` makes the
remote side hang up with it); the exit status is the first failing rank's.
"""

from __future__ import annotations

import argparse
import os
import shlex
import socket
import sys
from typing import Iterator, Optional

from . import __version__
from .launch import free_port, node_env, popen_rank, run_job

DEFAULT_LAUNCHER = "ssh -tt -o BatchMode=yes"
MAX_RANKS = 256
# launchers' variables a rank must not inherit (sigma.torch.init() reads them all)
_FOREIGN = ("SIGMA_RANK", "SIGMA_WORKERS", "SIGMA_JOB", "RANK", "WORLD_SIZE", "LOCAL_RANK",
            "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
_FOREIGN_PREFIXES = ("OMPI_COMM_WORLD_", "PMI_", "PMIX_", "HOROVOD_", "DMLC_", "BYTEPS_LOCAL_")


class UsageError(Exception):
    """A bad command line: the message says what to fix."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sigmarun", description="Run N ranks of a training script on this machine or on "
        "hosts (horovodrun's and mpirun's form), with Sigma's summation nodes.")
    p.add_argument("--version", action="version", version=f"sigmarun {__version__}")
    p.add_argument("-np", "-n", "--num-proc", dest="np", type=int, required=True,
                   help=f"ranks to start (1..{MAX_RANKS})")
    p.add_argument("-H", "--hosts", help="host:slots,... : where the ranks run, host by host "
                   "[this machine only]")
    p.add_argument("--nodes", help="summation nodes' control targets, ';' between them "
                   "(SIGMA_NODES)")
    p.add_argument("--etcd", help="etcd's client URLs: nodes and membership from there "
                   "(SIGMA_ETCD)")
    p.add_argument("--cluster", help="the nodes' cluster in etcd [default] (SIGMA_CLUSTER)")
    p.add_argument("--secret-file", help="shared secret of TCP control targets "
                   "(SIGMA_SECRET_FILE; the path on rank 0's host)")
    p.add_argument("--local-nodes", type=int, default=None, metavar="K",
                   help="summation nodes to start here when none are given [1]")
    p.add_argument("--node-kind", help="program of the local nodes [sigma-udpd]")
    p.add_argument("--mode", choices=["sync", "async", "deterministic"],
                   help="the job's mode (SIGMA_MODE)")
    p.add_argument("--master-addr", help="rank 0's address, where its store listens "
                   "[127.0.0.1; with other hosts, the first host]")
    p.add_argument("--master-port", type=int, default=0, help="[a free port]")
    p.add_argument("--launcher-cmd", default=DEFAULT_LAUNCHER,
                   help=f"command that runs a rank on another host, given the host and a "
                   f"shell command line [{DEFAULT_LAUNCHER}]")
    p.add_argument("--python", default=sys.executable,
                   help="interpreter of a .py script, here and on the hosts [this one]")
    p.add_argument("-x", dest="export", action="append", default=[], metavar="NAME[=VALUE]",
                   help="also pass this variable to every rank (repeatable)")
    p.add_argument("--grace", type=float, default=5.0,
                   help="seconds the other ranks get to end after one fails [5]")
    p.add_argument("--no-prefix", action="store_true", help="do not prefix output with [rank]")
    p.add_argument("--dry-run", action="store_true", help="print each rank's host and command; "
                   "start nothing")
    p.add_argument("-m", dest="module", action="store_true",
                   help="run the script argument as a module (python -m)")
    p.add_argument("command", help="the script (.py), a module with -m, or a program")
    p.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    return p


def parse_hosts(spec: str) -> list[tuple[str, int]]:
    """``a:2,b,c:4`` -> [("a", 2), ("b", 1), ("c", 4)]."""
    hosts = []
    for item in spec.split(","):
        item = item.strip()
        host, _, slots = item.rpartition(":") if ":" in item else (item, "", "1")
        if not host or not slots.isdigit() or int(slots) < 1:
            raise UsageError(f"-H {spec!r}: {item!r}: want host or host:slots (slots >= 1)")
        hosts.append((host, int(slots)))
    names = [h for h, _ in hosts]
    if len(set(names)) != len(names):
        raise UsageError(f"-H {spec!r}: a host is named twice: give it once with all its slots")
    return hosts


def is_local(host: str) -> bool:
    """Whether ``host`` is this machine (its ranks start without the launcher command)."""
    return host in ("localhost", "127.0.0.1", "::1", socket.gethostname(), socket.getfqdn())


def command(a: argparse.Namespace) -> list[str]:
    """What each rank runs: ``python script args`` for a .py script (or -m
    module), else the command as given (``python3 train.py``, a program)."""
    if a.module:
        return [a.python, "-m", a.command] + a.args
    if a.command.endswith(".py"):
        return [a.python, a.command] + a.args
    return [a.command] + a.args


class Rank:
    """One rank of the plan: where it runs, its variables, its argv here."""

    def __init__(self, rank: int, host: str, local: bool, env: dict, argv: list[str]) -> None:
        self.rank, self.host, self.local, self.env, self.argv = rank, host, local, env, argv


def own_env(base: dict) -> dict:
    """This environment less other launchers' variables."""
    return {k: v for k, v in base.items() if k not in _FOREIGN and
            not k.startswith(_FOREIGN_PREFIXES)}


def plan(a: argparse.Namespace, base: dict) -> list[Rank]:
    """Each rank's host, variables and argv, from the options; ``base`` is
    the environment the job's variables go into (the nodes' already set)."""
    if not 1 <= a.np <= MAX_RANKS:
        raise UsageError(f"-np {a.np}: want 1..{MAX_RANKS}")
    hosts = parse_hosts(a.hosts) if a.hosts else [("localhost", a.np)]
    slots = sum(n for _, n in hosts)
    if slots < a.np:
        raise UsageError(f"-np {a.np} but -H {a.hosts} has {slots} slots: add hosts or slots, "
                         "or start fewer ranks")
    where: list[str] = []
    for host, n in hosts:
        where += [host] * min(n, a.np - len(where))
    remote = sorted({h for h in where if not is_local(h)})
    master = a.master_addr
    if master is None:
        if remote and is_local(where[0]) and where[0] in ("localhost", "127.0.0.1", "::1"):
            raise UsageError(f"rank 0 runs on {where[0]}, which {remote[0]} cannot reach: give "
                             "--master-addr (this machine's address) or name this machine by "
                             "its address in -H")
        master = where[0] if remote else "127.0.0.1"
    exports = {}
    for x in a.export:
        name, eq, value = x.partition("=")
        if not name.isidentifier():
            raise UsageError(f"-x {x!r}: want NAME or NAME=VALUE")
        if not eq and name not in os.environ:
            raise UsageError(f"-x {name}: {name} is not set here: give -x {name}=VALUE")
        exports[name] = value if eq else os.environ[name]
    job = dict(MASTER_ADDR=master, MASTER_PORT=str(a.master_port or free_port()),
               WORLD_SIZE=str(a.np), PYTHONUNBUFFERED="1")
    job.update({k: v for k, v in base.items() if k.startswith("SIGMA_") and
                k not in _FOREIGN})
    job.update(exports)
    if len({where.count(h) for h in where}) > 1 and "SIGMA_LOCAL_AGGREGATION" not in job:
        # local aggregation needs the same number of ranks on every machine
        job["SIGMA_LOCAL_AGGREGATION"] = "0"
        print("sigmarun: the hosts run different numbers of ranks, so every rank pushes "
              "directly (SIGMA_LOCAL_AGGREGATION=0; give each host the same slots for "
              "local aggregation)", file=sys.stderr)
    cmd = command(a)
    mine = own_env(base)
    ranks = []
    for r, host in enumerate(where):
        on_host = where.count(host)
        lrank = where[:r].count(host)
        env = dict(job, RANK=str(r), LOCAL_RANK=str(lrank), LOCAL_WORLD_SIZE=str(on_host))
        if is_local(host):
            ranks.append(Rank(r, host, True, dict(mine, **env), cmd))
        else:
            env.pop("SIGMA_SHM", None)  # this machine's nodes' shared memory
            line = f"cd {shlex.quote(os.getcwd())} && exec env " + " ".join(
                shlex.quote(f"{k}={v}") for k, v in sorted(env.items())) + " " + shlex.join(cmd)
            ranks.append(Rank(r, host, False, env, shlex.split(a.launcher_cmd) + [host, line]))
    return ranks


def run(argv: Optional[list[str]] = None) -> int:
    """sigmarun; returns the exit status."""
    a = parser().parse_args(argv)
    env = dict(os.environ)
    env.update(node_env(a))
    given = a.nodes or a.etcd or os.environ.get("SIGMA_NODES") or os.environ.get("SIGMA_ETCD")
    try:
        if a.local_nodes is not None and (a.nodes or a.etcd):
            raise UsageError("give --nodes/--etcd or --local-nodes, not both")
        local_nodes = 0 if given else (1 if a.local_nodes is None else a.local_nodes)
        if local_nodes < 0 or (not given and local_nodes == 0):
            raise UsageError("--local-nodes: want K >= 1 (or give --nodes or --etcd)")
        # the plan once before the nodes start, so that a bad command line starts nothing
        ranks = plan(a, env)
        remote = [r.host for r in ranks if not r.local]
        if remote and local_nodes:
            raise UsageError(f"ranks on {remote[0]} cannot reach summation nodes started here "
                             "(127.0.0.1): give the nodes' control targets (--nodes) or "
                             "etcd (--etcd)")
        if all(r.local for r in ranks) and a.command.endswith(".py") and not a.module and \
                not os.path.isfile(a.command):
            raise UsageError(f"{a.command}: no such script")
    except UsageError as e:
        print(f"sigmarun: {e}", file=sys.stderr, flush=True)
        return 2
    if a.dry_run:
        for r in ranks:
            print(f"rank {r.rank} on {r.host}: " + shlex.join(r.argv), flush=True)
        return 0

    def spawn(env: dict) -> Iterator:
        for r in plan(a, env) if local_nodes else ranks:
            # a remote rank's variables travel in its command line; the launcher
            # command itself (ssh) needs this machine's: PATH, HOME, SSH_AUTH_SOCK
            yield popen_rank(r.argv, r.env if r.local else own_env(env))
    print(f"sigmarun: {a.np} rank(s): " + ", ".join(
        f"{h}:{sum(r.host == h for r in ranks)}" for h in dict.fromkeys(r.host for r in ranks)),
        flush=True)
    return run_job("sigmarun", env, spawn, local_nodes=local_nodes, node_kind=a.node_kind,
                   grace=a.grace, prefix=not a.no_prefix, where=[r.host for r in ranks])


def main() -> None:
    sys.exit(run())


if __name__ == "__main__":
    main()

# SPDX-License-Identifier: BSD-3-Clause
"""Sigma for PyTorch, in the manner of BytePS and Horovod.

    import sigma.torch as sgt
    sgt.init()                               # rank 0 makes the job on every node
                                             # (rank and N from the launcher)
    model = DDP(model)
    model.register_comm_hook(None, sgt.ddp_comm_hook)   # gradients through Sigma
    ...
    sgt.shutdown()                           # rank 0 destroys the job

or, without DDP, ``opt = sgt.DistributedOptimizer(opt, model.named_parameters())``
and ``sgt.broadcast_parameters(model.state_dict(), root_rank=0)``.

BytePS's and Horovod's PyTorch names are here too (``import sigma.torch as
bps`` / ``as hvd``): allreduce and its forms, Compression, Average and Sum,
broadcast_object, sigma.torch.parallel.DistributedDataParallel, ... (the
tables in docs/python.md, "Coming from BytePS" and "Coming from Horovod").

Tensors are pushed from and summed into their own memory (``data_ptr()``):
CPU tensors, contiguous, of fp32, fp64, fp16, bf16, int32, int64, int8 or
uint8. Nothing is copied in Python. docs/python.md has the whole contract.
"""

import atexit
import contextlib
import ctypes
import datetime
import io
import os
import pickle
import sys
import tempfile
import threading
import time
import warnings
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Sequence, Union

import torch
import torch.distributed as dist

from . import _lib, lateness as _lateness, local as _local
from .errors import (SigmaConfigError, SigmaError, SigmaNodeSilentError,  # noqa: F401
                     SigmaRanksMissingError, SigmaTimeoutError)
from .etcd import (DEFAULT_CLUSTER, EtcdStore, EtcdStoreTimeout, Watch, check_cluster,
                   read_nodes)
from .job import Job, NodeTarget, create_job, destroy_job, load_secret, parse_nodes
from .session import Handle, LockedStore, Session
from ._torch_ops import (Adasum, Average, Compression, Compressor, Max, Min,  # noqa: F401
                         Product, ReduceOp, Sum, is_compressor)

__all__ = [
    "init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size",
    "job", "session", "stats",
    "push_pull", "push_pull_", "push_pull_async", "push_pull_async_", "push_pull_inplace",
    "push_pull_async_inplace", "declare", "synchronize", "poll", "PushPullHandle",
    "GroupHandle", "ddp_comm_hook", "HookState", "DistributedOptimizer",
    "broadcast_parameters", "broadcast_optimizer_state", "broadcast_object",
    "Compression", "Compressor", "ReduceOp", "Average", "Sum", "Adasum", "Min", "Max",
    "Product", "global_process_set", "parallel",
    "SigmaError", "SigmaConfigError", "SigmaTimeoutError", "SigmaNodeSilentError",
    "SigmaRanksMissingError",
]

_DTYPES = {
    torch.float32: "fp32", torch.float64: "fp64", torch.float16: "fp16",
    torch.bfloat16: "bf16", torch.int32: "int32", torch.int64: "int64", torch.int8: "int8",
    torch.uint8: "uint8",
}
_FLOATS = ("fp32", "fp64", "fp16", "bf16")
_STORE_PREFIX = "sigma"
# libsigma's resends in a row that a node may leave unanswered before it counts
# as dead (node silent), when init() is not given max_retries: libsigma's own
# 10, a bound of 1.3 to 2.2 s. A rank that is merely behind (a loaded machine,
# a garbage collection, DDP's first step) no longer counts: the node answers
# the others' resends while it waits for it (ERROR WAITING), and only
# RANKS_WAIT bounds that wait. docs/python.md, "Errors and bounds".
MAX_RETRIES = 10
# Seconds a rank's push may wait for the other ranks' (libsigma's ranks_wait_us)
# when init() is not given ranks_wait (nor SIGMA_RANKS_WAIT).
RANKS_WAIT = 60.0


class _Context:
    def __init__(self, job: Job, sess: Session, rank: int, size: int, owner: bool,
                 nodes: list, secret: Optional[bytes], store: Any, gen: int,
                 timeout: float, etcd: Optional[tuple[str, str]]) -> None:
        self.job, self.session, self.rank, self.size = job, sess, rank, size
        self.owner, self.nodes, self.secret, self.store = owner, nodes, secret, store
        self.gen, self.timeout, self.etcd = gen, timeout, etcd
        self.unnamed: dict[tuple, set[int]] = {}
        self.local_rank, self.local_size = rank, size
        self.jobs = [job]  # the sub-jobs of local aggregation (sigma.local), else the job
        self.hosts_store = False  # this process hosts the store (rank 0's TCPStore)
        self.elastic = False  # an elastic job: nodes join and drain mid-job (etcd)
        self.lock = threading.Lock()


_ctx: Optional[_Context] = None
_gen = 0
_init_lock = threading.Lock()


def _env(*names: str) -> Optional[str]:
    for n in names:
        v = os.environ.get(n)
        if v not in (None, ""):
            return v
    return None


def _env_int(what: str, *names: str) -> Optional[int]:
    v = _env(*names)
    if v is None:
        return None
    try:
        return int(v)
    except ValueError:
        raise SigmaConfigError(f"sigma.torch.init: {names[0]}={v!r}: want an integer "
                               f"({what})") from None


def _auth_wanted(auth: Optional[bool]) -> bool:
    """auth=, else SIGMA_AUTH (mac or 1: on; none or 0: off)."""
    if auth is None:
        v = _env("SIGMA_AUTH")
        if v is None or v in ("none", "0"):
            return False
        if v in ("mac", "1"):
            return True
        raise SigmaConfigError(f"sigma.torch.init: SIGMA_AUTH={v!r}: want mac (authenticated "
                               "datagrams) or none")
    if not isinstance(auth, bool):
        raise SigmaConfigError(f"sigma.torch.init: auth={auth!r}: want True or False")
    return auth


def _dist_on() -> bool:
    return dist.is_available() and dist.is_initialized()


def init(nodes: Union[str, Sequence[str], None] = None, *,
         secret_file: Optional[str] = None, mode: Optional[str] = None,
         dtype: Optional[str] = None, rank: Optional[int] = None, size: Optional[int] = None,
         store: Any = None, descriptor: Optional[str] = None,
         tensors: Optional[Sequence[tuple[str, int]]] = None, slots: int = 0,
         partition_bytes: int = 0, chunk_bytes: int = 0, window: int = 0,
         max_retries: int = 0, rto_us: int = 0, poll_us: int = 200,
         timeout: float = 60.0, ranks_wait: Optional[float] = None,
         etcd: Optional[str] = None, cluster: Optional[str] = None,
         auth: Optional[bool] = None) -> None:
    """Join (rank > 0) or make (rank 0) a Sigma job, and open this rank's session.

    Where the job comes from, in order:

    1. ``descriptor=`` or ``SIGMA_JOB``: a job made beforehand (``sigmactl
       --node ... job create``, or ``python3 -m sigma.launch``); every rank
       opens it. ``shutdown()`` does not destroy it: its maker does.
    2. Otherwise rank 0 makes the job on every node of ``nodes=`` /
       ``SIGMA_NODES`` through their control servers (``secret_file=`` /
       ``SIGMA_SECRET_FILE`` for TCP targets), and hands the descriptor to
       the other ranks through ``store=``, else torch.distributed's store.
       ``shutdown()`` destroys it once every rank is done. It is an *open*
       job of dtype ``any``: each node makes a key on its first push, in that
       push's dtype (so DDP's buckets, known only once backward runs, need
       nothing declared); ``slots`` caps an open job's chunk slots per node
       engine (0: the nodes' default). ``tensors=[(name, elements)]`` and
       ``dtype=`` make a job of those tensors instead.
    3. With ``etcd=`` / ``SIGMA_ETCD`` (etcd's client URLs, comma-separated)
       and ``cluster=`` / ``SIGMA_CLUSTER`` (default ``default``) instead of
       a node list, rank 0 reads the live summation nodes of the cluster
       from etcd and makes the job on them; every rank then follows the
       membership (a node whose lease expires is lost, and its partitions
       move to the survivors: docs/cluster.md), with rank 0's etcd and
       cluster. Also with ``SIGMA_JOB`` or a node list, ``etcd=`` adds the
       membership. Needs an open job in sync or deterministic mode.

    The rank and the number of ranks come from ``rank=``/``size=``, else
    torch.distributed and the launchers' variables (SIGMA_RANK/SIGMA_WORKERS,
    RANK/WORLD_SIZE, OMPI_COMM_WORLD_*, PMI_*, HOROVOD_*, DMLC_* with
    BYTEPS_LOCAL_*), which must agree; nothing at all is one rank. Several
    ranks share a store: ``store=``, else torch.distributed's, else a
    TCPStore at MASTER_ADDR:MASTER_PORT (rank 0 hosts it), else a FileStore
    for an mpirun job on one machine (docs/python.md, "The store").
    ``mode`` (``SIGMA_MODE``) is sync, async or deterministic. ``timeout``
    (s) bounds the wait for rank 0's descriptor.
    ``max_retries`` (``SIGMA_MAX_RETRIES``, default MAX_RETRIES) bounds how long a node may stay
    silent, ``ranks_wait`` (``SIGMA_RANKS_WAIT``, default RANKS_WAIT s) how
    long a step waits for ranks that are behind, paused or dead
    (docs/python.md, "Errors and bounds").
    ``auth=True`` (``SIGMA_AUTH=mac``): authenticated datagrams (auth = mac,
    docs/security.md): rank 0 makes the job with auth and hands each rank its
    own descriptor, with its keys, through the store; with ``SIGMA_JOB`` each
    rank needs its own (``sigmactl job create --auth --rank-dir``). Not with
    local aggregation or etcd membership (SigmaConfigError says so).
    Bad configuration raises SigmaConfigError naming the fix, on every rank.
    """
    global _ctx, _gen
    for k, v in (("slots", slots), ("partition_bytes", partition_bytes),
                 ("chunk_bytes", chunk_bytes), ("window", window), ("max_retries", max_retries),
                 ("rto_us", rto_us), ("poll_us", poll_us)):
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= 0xFFFFFFFF:
            raise SigmaConfigError(f"sigma.torch.init: {k}={v!r}: want an integer >= 0")
    if not isinstance(timeout, (int, float)) or not timeout > 0:
        raise SigmaConfigError(f"sigma.torch.init: timeout={timeout!r}: want seconds > 0")
    if not max_retries:  # SIGMA_MAX_RETRIES: for a script that does not pass max_retries=
        max_retries = _env_int("resends a node may leave unanswered", "SIGMA_MAX_RETRIES") or 0
        if not 0 <= max_retries <= 0xFFFFFFFF:
            raise SigmaConfigError(f"sigma.torch.init: SIGMA_MAX_RETRIES={max_retries}: want "
                                   "an integer >= 0")
    if ranks_wait is None:
        env_wait = _env("SIGMA_RANKS_WAIT")
        try:
            ranks_wait = float(env_wait) if env_wait is not None else RANKS_WAIT
        except ValueError:
            raise SigmaConfigError(f"sigma.torch.init: SIGMA_RANKS_WAIT={env_wait!r}: want "
                                   "seconds") from None
    if isinstance(ranks_wait, bool) or not isinstance(ranks_wait, (int, float)) or \
            not 0.001 <= ranks_wait <= 4294:
        raise SigmaConfigError(f"sigma.torch.init: ranks_wait={ranks_wait!r}: want seconds, "
                               "0.001..4294")
    auth = _auth_wanted(auth)
    with _init_lock:
        if _ctx is not None:
            raise SigmaConfigError("sigma.torch.init: already initialised: call shutdown() "
                                   "first")
        r, n, lrank, lsize = _resolve_rank(rank, size, etcd if etcd is not None else
                                           _env("SIGMA_ETCD"))
        hosts = False
        gen = _gen
        _gen += 1
        desc = descriptor or _env("SIGMA_JOB")
        owner = False
        targets: list = []
        secret = None
        members = _membership_source(etcd, cluster)
        if members and (tensors or (mode or _env("SIGMA_MODE")) == "async"):
            raise SigmaConfigError(
                "sigma.torch.init: etcd membership moves a lost node's keys to the survivors, "
                "which make them at their first push: it needs an open job (no tensors=) in "
                "sync or deterministic mode")
        if auth and members:
            raise SigmaConfigError(
                "sigma.torch.init: auth=True with etcd membership is not supported: an elastic "
                "job's nodes cannot hand new ranks their keys; drop etcd= (SIGMA_ETCD) or auth")
        own = None  # auth = mac: this rank's own descriptor (its keys)
        if desc:
            job = Job.parse(desc)
            if auth and not job.auth:
                raise SigmaConfigError("sigma.torch.init: auth=True, but the job given "
                                       "(SIGMA_JOB) has no auth: make it with sigmactl job "
                                       "create --auth, or drop auth")
            if job.auth and job.rank != r:
                raise SigmaConfigError(
                    f"sigma.torch.init: the job given (SIGMA_JOB) has auth = mac, and its "
                    f"descriptor holds " + ("no rank's keys" if job.rank is None else
                                            f"rank {job.rank}'s keys") +
                    f": give rank {r} its own (rank-{r}.desc of sigmactl job create --auth "
                    "--rank-dir)")
            want = mode or _env("SIGMA_MODE")
            if want and want != job.mode:
                raise SigmaConfigError(f"sigma.torch.init: the job given (SIGMA_JOB) is "
                                       f"{job.mode}, not {want}: make a {want} job, or ask for "
                                       f"{job.mode}")
            if store is None and (n > 1 or _dist_on()):
                store, hosts = _job_store(r, n, timeout, members)
            store = LockedStore(store) if store is not None else None
        else:
            targets = parse_nodes(nodes if nodes is not None else _env("SIGMA_NODES"))
            secret_file = secret_file or _env("SIGMA_SECRET_FILE")
            mode = mode or _env("SIGMA_MODE") or "sync"
            if mode not in _lib.MODES:
                raise SigmaConfigError(f"sigma.torch.init: mode {mode!r}: one of "
                                       f"{', '.join(_lib.MODES)}")
            if store is None and (n > 1 or _dist_on()):
                store, hosts = _job_store(r, n, timeout, members)
            store = LockedStore(store) if store is not None else None
            try:
                plan = _local.plan(r, n, lrank, lsize, mode, bool(tensors))
                if auth and plan is not None:
                    raise SigmaConfigError(
                        "sigma.torch.init: auth=True with local aggregation is not supported "
                        "(a machine's leader pushes for its local ranks): set "
                        "SIGMA_LOCAL_AGGREGATION=0, or drop auth")
            except SigmaConfigError as e:
                if store is not None and n > 1:  # every rank fails at once, with this
                    if r == 0:
                        store.set(_key(gen, "job"), "error:" + str(e))
                    else:
                        _tell_failure(store, gen, r, e)
                raise
            if r == 0:
                try:
                    if not targets and members:
                        targets = _nodes_from_etcd(*members)
                    if not targets:
                        raise SigmaConfigError(
                            "sigma.torch.init: no summation nodes: pass nodes=[...] or set "
                            "SIGMA_NODES to their control targets (unix:PATH or HOST:PORT; "
                            "';' between nodes), give etcd= and cluster= (SIGMA_ETCD, "
                            "SIGMA_CLUSTER) of an etcd-managed cluster, or give the job "
                            "itself (SIGMA_JOB)")
                    secret = load_secret(secret_file) if secret_file else None
                    # local aggregation: one job per local rank, of one worker per machine
                    jobs = _local.create_jobs(
                        lambda: create_job(targets, plan.machines if plan else n, mode=mode,
                                           dtype=dtype, tensors=tensors, slots=slots,
                                           partition_bytes=partition_bytes,
                                           chunk_bytes=chunk_bytes, secret=secret,
                                           auth=auth),
                        plan.local_size if plan else 1,
                        lambda jid: destroy_job(targets, jid, secret=secret))
                    job = jobs[0]
                except Exception as e:  # every rank raises rank 0's reason, at once
                    if store is not None:
                        store.set(_key(gen, "job"), "error:" + str(e))
                    raise
                owner = True
                if store is not None:  # before the job: the others read it once they have it
                    store.set(_key(gen, "local_jobs"), "\n".join(
                        [str(len(jobs))] + [j.descriptor for j in jobs[1:]]))
                if auth:  # each rank's keys under its own name, before the job is told
                    own = Job.parse(job.ranks[0])
                    for k in range(1, n):
                        store.set(_key(gen, f"auth/{k}"), job.ranks[k])
                if store is not None and n > 1:
                    # declared tensors keep their ids: name i owns id i (Session.tensor_id)
                    for i, (tname, _) in enumerate(tensors or ()):
                        store.claim(f"{_key(gen, 'id')}/{i}", tname)
                if store is not None:  # with rank 0's membership source, for every rank
                    store.set(_key(gen, "job"), "ok:" + job.descriptor +
                              ("\n" + "\n".join(members) if members else ""))
            else:
                got = _store_get(store, _key(gen, "job"), timeout,
                                 "rank 0's job descriptor").split("\n")
                job = Job.parse(got[0])
                members = (got[1], got[2]) if len(got) == 3 else None
                if job.auth:
                    own = Job.parse(store.get(_key(gen, f"auth/{r}")).decode())
                jobs = [job]
                if store is not None and n > 1:
                    rest = store.get(_key(gen, "local_jobs")).decode().split("\n")
                    jobs += [Job.parse(d) for d in rest[1:]]
        if desc:
            plan, jobs = None, [job]  # a job made beforehand: every rank pushes (docs/python.md)
        sess = None
        try:
            if len(jobs) != (plan.local_size if plan else 1):
                raise SigmaConfigError(
                    f"sigma.torch.init: rank {r} has {lsize or 1} rank(s) on its machine "
                    f"({'local aggregation' if plan else 'pushing directly'}), but rank 0 made "
                    f"the job for {len(jobs)}: every rank needs the same LOCAL_WORLD_SIZE "
                    "(or the launcher's local size) and SIGMA_LOCAL_AGGREGATION")
            workers = plan.machines if plan else n
            if job.workers != workers:
                raise SigmaConfigError(f"sigma.torch.init: the job has {job.workers} workers, "
                                       f"this run {workers} " +
                                       ("machines" if plan else "ranks") +
                                       f": make the job for {workers}")
            # with etcd and no local aggregation: an elastic job (docs/cluster.md, "Elastic
            # jobs"), unless SIGMA_ELASTIC=0 (then plain failover: the job only shrinks)
            elastic = bool(members) and plan is None and _env("SIGMA_ELASTIC") != "0"
            watch = Watch(*members) if members and not elastic else None
            kw = dict(window=window, max_retries=max_retries or MAX_RETRIES, rto_us=rto_us,
                      poll_us=poll_us, ranks_wait=ranks_wait, membership=watch)
            if elastic:
                kw["elastic"] = members
            if owner and members:
                _record_job(members, job)
            together = (lambda: _start_together(store, gen, n, timeout)) \
                if store is not None and n > 1 else None
            if plan is not None:
                # the ranks meet before the local context waits for its local ranks
                sess = _local.LocalSession(plan, jobs, store, f"{_STORE_PREFIX}/{gen}", timeout,
                                           meet=together, **kw)
            else:
                sess = Session(own or job, r, store=store if n > 1 else None,
                               store_prefix=f"{_STORE_PREFIX}/{gen}", **kw)
                if together is not None:
                    together()
        except BaseException as e:
            if store is not None and n > 1:
                _tell_failure(store, gen, r, e)
            if sess is not None:
                sess.close(timeout=1.0)
            if owner:  # leave nothing behind on the nodes
                for j in jobs:
                    destroy_job(targets, j.id, secret=secret)
            raise
        _ctx = _Context(job, sess, r, n, owner, targets, secret, store, gen, timeout, members)
        _ctx.elastic = elastic
        _ctx.local_rank, _ctx.hosts_store, _ctx.jobs = lrank, hosts, jobs
        _ctx.local_size = lsize if lsize is not None else n


def _membership_source(etcd: Optional[str], cluster: Optional[str]
                       ) -> Optional[tuple[str, str]]:
    """(etcd endpoints, cluster) from the arguments or SIGMA_ETCD / SIGMA_CLUSTER, or None."""
    endpoints = etcd if etcd is not None else _env("SIGMA_ETCD")
    name = cluster if cluster is not None else _env("SIGMA_CLUSTER")
    if endpoints is None:
        if name is not None and cluster is not None:
            raise SigmaConfigError("sigma.torch.init: cluster= without etcd=: give the etcd "
                                   "endpoints too (or SIGMA_ETCD)")
        return None
    if not isinstance(endpoints, str) or not endpoints.strip() or "\n" in endpoints:
        raise SigmaConfigError(f"sigma.torch.init: etcd={endpoints!r}: want etcd's client "
                               "URLs, 'http://host:port' (comma-separated)")
    return endpoints.strip(), check_cluster(name or DEFAULT_CLUSTER)


def _etcd_conf(endpoints: str) -> tuple[Any, list]:
    keep = [endpoints.encode()]
    conf = _lib.EtcdConf()
    conf.endpoints, conf.timeout_ms = keep[0], 1000
    return conf, keep


def _record_job(members: tuple[str, str], job: Job) -> None:
    """Rank 0: the job's record in etcd (docs/cluster.md, "Jobs in etcd"), an open job's,
    so that every node and sigmactl see it; its nodes renew its lease while they hold it."""
    conf, keep = _etcd_conf(members[0])
    err = ctypes.create_string_buffer(512)
    rc = _lib.libcontrol().sg_etcd_job_record(ctypes.byref(conf), members[1].encode(),
                                              job.descriptor.encode(), None, 0, 0, err,
                                              len(err))
    del keep
    if rc < 0:
        warnings.warn(f"sigma.torch.init: job {job.id} not recorded in etcd: "
                      f"{err.value.decode(errors='replace')}")


def _unrecord_job(members: tuple[str, str], job: Job) -> None:
    conf, keep = _etcd_conf(members[0])
    err = ctypes.create_string_buffer(512)
    _lib.libcontrol().sg_etcd_job_unrecord(ctypes.byref(conf), members[1].encode(), job.id,
                                           err, len(err))
    del keep


def _nodes_from_etcd(endpoints: str, cluster: str) -> list[NodeTarget]:
    """The control targets of the live nodes of ``cluster`` (rank 0 makes the job there)."""
    found = read_nodes(endpoints, cluster)
    if not found:
        raise SigmaConfigError(f"sigma.torch.init: no summation node is registered in etcd "
                               f"({endpoints}) for cluster '{cluster}': start nodes with "
                               f"--etcd {endpoints} --cluster {cluster} (sigma-udpd) or a "
                               "[cluster] section (sigmad), or fix the cluster name")
    bare = [x.name for x in found if not x.control]
    if bare:
        raise SigmaConfigError(f"sigma.torch.init: node(s) {', '.join(bare)} of cluster "
                               f"'{cluster}' have no control endpoint in etcd, so no job can be "
                               "made on them: start them with a control socket (--unix or "
                               "--listen; [control] unix or listen)")
    return [NodeTarget(x.control) for x in found]


def _tell_failure(store: Any, gen: int, r: int, e: BaseException) -> None:
    try:
        if not isinstance(e, _PeerFailed):
            store.set(_key(gen, "open_error"), f"rank {r}: {e}")
        store.add(_key(gen, "open_failed"), 1)
    except Exception:  # the store went away: the others time out
        pass


class _PeerFailed(SigmaConfigError):
    pass


def _start_together(store: Any, gen: int, n: int, timeout: float) -> None:
    """Wait until every rank opened its session: ranks then start their first
    step together, not skewed by rank 0's job creation (a rank later than the
    retry budget counts as dead). A rank's failure fails the others at once."""
    store.add(_key(gen, "opened"), 1)
    deadline = time.monotonic() + timeout
    while True:
        if store.add(_key(gen, "open_failed"), 0):
            why = store.get(_key(gen, "open_error")).decode()
            raise _PeerFailed(f"sigma.torch.init: {why}")
        opened = store.add(_key(gen, "opened"), 0)
        if opened >= n:
            return
        if time.monotonic() > deadline:
            raise SigmaConfigError(f"sigma.torch.init: {opened} of {n} ranks opened their "
                                   f"sessions within {timeout:g} s: is every rank calling "
                                   "init()?")
        time.sleep(0.005)


# The launchers whose variables give the rank and the number of ranks: (name,
# rank, size, local rank, local size). BytePS's are read apart (_byteps_source):
# its DMLC_* count machines.
_LAUNCHERS = (
    ("Sigma", "SIGMA_RANK", "SIGMA_WORKERS", None, None),
    ("torch", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"),
    ("mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ("PMI", "PMI_RANK", "PMI_SIZE", None, None),
    ("Horovod", "HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE"),
)
_ALL_VARS = ("RANK/WORLD_SIZE, SIGMA_RANK/SIGMA_WORKERS, DMLC_WORKER_ID/DMLC_NUM_WORKER with "
             "BYTEPS_LOCAL_RANK/BYTEPS_LOCAL_SIZE, OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/"
             "PMI_SIZE, HOROVOD_RANK/HOROVOD_SIZE")
_said_alone = False


class _Source:
    """What one launcher (or torch.distributed) says: rank, size, local rank and
    size (None where it does not say), and how, for messages."""

    def __init__(self, name: str, rank: int, size: int, local_rank: Optional[int],
                 local_size: Optional[int], how: str) -> None:
        self.name, self.rank, self.size = name, rank, size
        self.local_rank, self.local_size, self.how = local_rank, local_size, how


def _pair(rank_var: str, size_var: str, what: str) -> Optional[tuple[int, int]]:
    """(rank, size) from two variables, None if neither is set; one alone raises."""
    r = _env_int(f"{what}'s rank", rank_var)
    n = _env_int(f"{what}'s number of ranks", size_var)
    if r is None and n is None:
        return None
    if r is None or n is None:
        have, lack = (size_var, rank_var) if r is None else (rank_var, size_var)
        raise SigmaConfigError(
            f"sigma.torch.init: {have}={os.environ[have]} but no {lack} ({what}): a job "
            f"needs both the rank and the number of ranks: set {lack} too, or pass rank= "
            "and size=")
    return r, n


def _byteps_source() -> Optional[_Source]:
    """BytePS's launcher: DMLC_NUM_WORKER machines of BYTEPS_LOCAL_SIZE workers;
    this one is worker BYTEPS_LOCAL_RANK of machine DMLC_WORKER_ID."""
    machines = _pair("DMLC_WORKER_ID", "DMLC_NUM_WORKER", "BytePS")
    local = _pair("BYTEPS_LOCAL_RANK", "BYTEPS_LOCAL_SIZE", "BytePS")
    if machines is None and local is None:
        return None
    if machines is None:
        raise SigmaConfigError("sigma.torch.init: BYTEPS_LOCAL_RANK/BYTEPS_LOCAL_SIZE but no "
                               "DMLC_WORKER_ID/DMLC_NUM_WORKER (BytePS): set both (the "
                               "machine's index and the number of worker machines)")
    lr, ls = local if local is not None else (0, 1)
    if not 0 <= machines[0] < machines[1] or not 0 <= lr < ls:
        raise SigmaConfigError(f"sigma.torch.init: DMLC_WORKER_ID={machines[0]}, "
                               f"DMLC_NUM_WORKER={machines[1]}, BYTEPS_LOCAL_RANK={lr}, "
                               f"BYTEPS_LOCAL_SIZE={ls} (BytePS): want 0 <= id < number")
    how = (f"DMLC_WORKER_ID={machines[0]}, DMLC_NUM_WORKER={machines[1]}, "
           f"BYTEPS_LOCAL_RANK={lr}, BYTEPS_LOCAL_SIZE={ls}")
    return _Source("BytePS", machines[0] * ls + lr, machines[1] * ls, lr, ls, how)


def _launcher_sources() -> list[_Source]:
    """Every source of the rank that is set: torch.distributed and each launcher."""
    found = []
    if _dist_on():
        found.append(_Source("torch.distributed", dist.get_rank(), dist.get_world_size(),
                             None, None, f"rank {dist.get_rank()} of "
                             f"{dist.get_world_size()}"))
    for name, rv, sv, lrv, lsv in _LAUNCHERS:
        got = _pair(rv, sv, name)
        if got is None:
            continue
        lr = _env_int(f"{name}'s local rank", lrv) if lrv else None
        ls = _env_int(f"{name}'s local size", lsv) if lsv else None
        found.append(_Source(name, got[0], got[1], lr, ls,
                             f"{rv}={got[0]}, {sv}={got[1]}"))
    bps = _byteps_source()
    if bps is not None:
        found.append(bps)
    return found


def _resolve_rank(rank: Optional[int], size: Optional[int], etcd: Optional[str] = None
                  ) -> tuple[int, int, int, Optional[int]]:
    """(rank, size, local rank, local size or None) from rank=/size=, torch.distributed
    and every launcher's variables; two sources that disagree raise, naming
    both. Nothing at all: one rank alone (said once on stderr), except with
    ``etcd`` (ranks that meet through etcd): there it raises, since each of
    several processes started so would silently be a job of its own."""
    global _said_alone
    sources = _launcher_sources()
    for a in sources[1:]:
        b = sources[0]
        if (a.rank, a.size) != (b.rank, b.size):
            raise SigmaConfigError(
                f"sigma.torch.init: {b.how} ({b.name}) and {a.how} ({a.name}) disagree on "
                "this rank or the number of ranks: unset the variables of the launcher "
                "that did not start this process, or pass rank= and size=")
    first = sources[0] if sources else None
    r = rank if rank is not None else first.rank if first else None
    n = size if size is not None else first.size if first else None
    if r is None and n is None and etcd:
        raise SigmaConfigError(
            "sigma.torch.init: etcd is given (SIGMA_ETCD or etcd=) but nothing says this "
            "process's rank and the number of ranks, so it would run as a 1-rank job of its "
            "own: start it with a launcher's variables (" + _ALL_VARS + "), or pass rank= "
            "and size= (rank=0, size=1 for one rank alone)")
    if r is None and n is None:
        r, n = 0, 1
        if not _said_alone:
            _said_alone = True
            print("sigma.torch.init: no launcher variables (" + _ALL_VARS + ") and no "
                  "torch.distributed: running as a 1-rank job", file=sys.stderr, flush=True)
    if r is None or n is None:
        raise SigmaConfigError("sigma.torch.init: give both the rank and the number of "
                               "ranks (rank= and size=, or a launcher's variables: " +
                               _ALL_VARS + ")")
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= _lib.SG_MAX_WORKERS:
        raise SigmaConfigError(f"sigma.torch.init: {n!r} ranks: a job has 1.."
                               f"{_lib.SG_MAX_WORKERS} workers")
    if isinstance(r, bool) or not isinstance(r, int) or not 0 <= r < n:
        raise SigmaConfigError(f"sigma.torch.init: rank {r!r}: want 0..{n - 1}")
    local = next((s for s in sources if s.local_rank is not None), None)
    lr = local.local_rank if local is not None else r
    ls = local.local_size if local is not None else None  # None: the launcher did not say
    return r, n, lr, ls


_made_store: Optional[tuple[tuple, Any, bool]] = None  # (how, store, hosted here)
_etcd_lease = 0  # the lease of this process's last rendezvous in etcd (not met again)


def _run_id() -> str:
    """The name of the run whose ranks meet in etcd: SIGMA_RUN_ID, else the
    launcher's job id (torchrun, mpirun), else "default"."""
    return _env("SIGMA_RUN_ID", "TORCHELASTIC_RUN_ID", "PMIX_NAMESPACE",
                "OMPI_MCA_ess_base_jobid") or "default"


def _job_store(r: int, n: int, timeout: float, members: Optional[tuple[str, str]] = None
               ) -> tuple[Any, bool]:
    """The store the ranks of a job share when init() was given none: torch.
    distributed's, else one made here (kept for later init() calls): a
    TCPStore at MASTER_ADDR:MASTER_PORT that rank 0 hosts, or, for an mpirun
    job whose ranks are all on this machine, a FileStore named by mpirun's
    job id, else, with etcd (``members``), keys in etcd (EtcdStore).
    Returns (store, whether this process hosts it)."""
    global _made_store, _etcd_lease
    if _dist_on():
        from torch.distributed import distributed_c10d
        return distributed_c10d._get_default_store(), False
    addr, port = _env("MASTER_ADDR"), _env_int("the rendezvous port", "MASTER_PORT")
    if not (addr and port) and _env("DMLC_PS_ROOT_URI") and _env("DMLC_PS_ROOT_PORT"):
        # bpslaunch's scheduler address: Sigma runs no scheduler, so rank 0 hosts the store there
        addr = _env("DMLC_PS_ROOT_URI")
        port = _env_int("BytePS's scheduler port", "DMLC_PS_ROOT_PORT")
    mpi_job = _env("PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid")
    on_one = _env("OMPI_COMM_WORLD_SIZE") is not None and \
        _env("OMPI_COMM_WORLD_SIZE") == _env("OMPI_COMM_WORLD_LOCAL_SIZE")
    if addr and port:
        how: tuple = ("tcp", addr, port, r, n)
    elif on_one and mpi_job:
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in mpi_job)
        how = ("file", os.path.join(tempfile.gettempdir(),
                                    f"sigma-mpirun-{os.getuid()}-{safe}.store"), n)
    elif members:
        how = ("etcd", members[0], members[1], _run_id(), r, n)
    else:
        raise SigmaConfigError(
            f"sigma.torch.init: {n} ranks but no store to meet through (rank 0 hands the job "
            "to the others there, and every rank agrees on the tensors' ids): set "
            "MASTER_ADDR and MASTER_PORT (rank 0 hosts a store there; sigmarun, python3 -m "
            "sigma.launch and torchrun set them; or BytePS's DMLC_PS_ROOT_URI and "
            "DMLC_PS_ROOT_PORT), give SIGMA_ETCD (the ranks meet in etcd), run every rank "
            "under one mpirun on this machine, call torch.distributed.init_process_group() "
            "first, or pass store=")
    if _made_store is not None and _made_store[0] == how:
        return _made_store[1], _made_store[2]
    try:
        if how[0] == "tcp":
            store = dist.TCPStore(addr, port, n, r == 0, datetime.timedelta(seconds=timeout),
                                  wait_for_workers=False)
        elif how[0] == "etcd":
            store = EtcdStore(how[1], how[2], how[3], r == 0, timeout, not_lease=_etcd_lease)
            _etcd_lease = store.lease
        else:
            store = dist.FileStore(how[1], n)
    except SigmaError as e:  # EtcdStore: etcd unreachable, or no rank 0 in time
        raise SigmaConfigError(f"sigma.torch.init: rank {r}: {e}") from None
    except EtcdStoreTimeout as e:
        raise SigmaConfigError(f"sigma.torch.init: rank {r} waited for {e}") from None
    except (RuntimeError, OSError) as e:
        where = f"{addr}:{port}" if how[0] == "tcp" else how[1]
        verb = "host" if r == 0 and how[0] == "tcp" else "reach"
        raise SigmaConfigError(
            f"sigma.torch.init: rank {r} cannot {verb} the job's store at {where} ({e}): " +
            ("is the port free on rank 0's machine, and is rank 0 running?" if how[0] == "tcp"
             else "is the temporary folder writable?")) from None
    # rank 0 keeps its store until every rank closed (shutdown); it removes the file at exit
    _made_store = (how, store, r == 0)
    return store, r == 0


def _key(gen: int, what: str) -> str:
    return f"{_STORE_PREFIX}/{gen}/{what}"


def _store_get(store: Any, key: str, timeout: float, what: str) -> str:
    try:
        store.wait([key], datetime.timedelta(seconds=timeout))
    except SigmaError:  # the store itself (etcd) says why
        raise
    except RuntimeError as e:
        raise SigmaConfigError(f"sigma.torch.init: {what} did not come within {timeout:g} s "
                               f"({e}): is rank 0 running, and did it call init()?") from None
    val = store.get(key).decode()
    if val.startswith("error:"):
        raise SigmaConfigError(f"sigma.torch.init: rank 0 could not make the job: {val[6:]}")
    return val[3:]


def shutdown(timeout: Optional[float] = None) -> None:
    """Finish what is in flight (failing it after ``timeout`` s), close this
    rank's session, and (on the rank that made the job) destroy the job once
    every rank has closed, or after ``timeout`` s more (default: init's).
    Idempotent."""
    global _ctx
    with _init_lock:
        c, _ctx = _ctx, None
    if c is None:
        return
    bound = c.timeout if timeout is None else timeout
    c.session.close(timeout=bound)  # what is in flight ends within its own bounds, or this
    if c.store is not None and c.size > 1:
        try:
            c.store.add(_key(c.gen, "closed"), 1)
        except Exception:  # the store went away with rank 0: nothing to tell
            pass
    if not c.owner and not c.hosts_store:
        _drop_etcd_store(c)
        return
    if c.store is not None and c.size > 1:  # the others still use the store, or the job
        deadline = time.monotonic() + bound
        try:
            while c.store.add(_key(c.gen, "closed"), 0) < c.size:
                if time.monotonic() > deadline:
                    warnings.warn(f"sigma.torch.shutdown: not every rank closed within "
                                  f"{bound:g} s; " + (f"destroying job {c.job.id} anyway"
                                                      if c.owner else "going on"))
                    break
                time.sleep(0.02)
        except Exception:
            pass
    _drop_etcd_store(c)
    if not c.owner:
        return
    if c.etcd:
        _unrecord_job(c.etcd, c.job)
    if c.elastic:
        # every node that may have taken the job: the registered ones (joined mid-job too)
        try:
            targets = _nodes_from_etcd(*c.etcd)
        except SigmaError:
            targets = c.nodes
        for t in targets:
            for j in c.jobs:
                try:
                    destroy_job([t], j.id, secret=c.secret)
                except SigmaError:  # a node that never took it, or is gone
                    pass
        return
    targets = c.nodes
    if c.etcd:
        # a node lost during the job (its lease expired) took the job with it
        try:
            live = {x.control for x in read_nodes(*c.etcd)}
            targets = [t for t in targets if t.target in live]
        except SigmaError:  # etcd is away: try them all
            pass
    if targets:
        for j in c.jobs:
            destroy_job(targets, j.id, secret=c.secret)


def _drop_etcd_store(c: _Context) -> None:
    """Close the rendezvous in etcd once this rank is done with it (rank 0: every
    rank closed): rank 0 revokes its lease, and every key of the run goes. The
    next init() meets again, under a new lease."""
    global _made_store
    if _made_store is not None and _made_store[0][0] == "etcd" and c.store is not None and \
            c.store.store is _made_store[1]:
        _made_store[1].close()
        _made_store = None


@atexit.register
def _at_exit() -> None:
    if _ctx is not None:
        try:
            shutdown(timeout=10.0)
        except Exception as e:  # at exit, say it and go
            print(f"sigma.torch: shutdown at exit: {e}", file=sys.stderr)
    if _made_store is not None and _made_store[0][0] == "etcd":
        _made_store[1].close()  # rank 0 revokes its lease: the run's keys go
    if _made_store is not None and _made_store[0][0] == "file" and _made_store[2]:
        try:  # rank 0's shutdown waited for every rank to close: nobody uses it now
            os.unlink(_made_store[0][1])
        except OSError:
            pass


def _c() -> _Context:
    if _ctx is None:
        raise SigmaConfigError("sigma.torch: not initialised: call sigma.torch.init() first")
    return _ctx


def is_initialized() -> bool:
    """Whether init() ran (and shutdown() did not)."""
    return _ctx is not None


def rank() -> int:
    """This rank, 0..size()-1."""
    return _c().rank


def size() -> int:
    """The number of ranks (the job's N)."""
    return _c().size


def local_rank() -> int:
    """This rank on this machine: from the launcher's variables (LOCAL_RANK,
    OMPI_COMM_WORLD_LOCAL_RANK, BYTEPS_LOCAL_RANK, HOROVOD_LOCAL_RANK), else
    the rank."""
    return _c().local_rank


def local_size() -> int:
    """The number of ranks on this machine: from the launcher's variables
    (LOCAL_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_SIZE, BYTEPS_LOCAL_SIZE,
    HOROVOD_LOCAL_SIZE), else the number of ranks."""
    return _c().local_size


def job() -> Job:
    """The job this rank pushes to."""
    return _c().job


def session() -> Session:
    """This rank's session (its counters: ``session().stats()``)."""
    return _c().session


def stats(lateness: bool = True) -> dict:
    """This rank's counters (``session().stats()``, as a dict) under ``"session"``,
    and, with @lateness, the job's lateness as its nodes measure it under
    ``"lateness"``: each rank's pushes, rounds last, share and average (ms), the
    straggler, and a ``summary`` line ("job 1: rank 3 is 20.1 ms late on 97% of
    40 rounds"). The nodes are asked through their control targets (init's
    ``nodes=`` or SIGMA_NODES); a job given as SIGMA_JOB has none, and gets
    ``"lateness": None``. With local aggregation the job's workers, and so its
    ranks here, are the machines. See sigma.lateness.job_lateness()."""
    c = _c()
    st = c.session.stats()
    fields = getattr(type(st), "_fields_", ())
    out: dict = {"rank": c.rank, "job": c.job.id,
                 "session": {n: int(getattr(st, n)) for n, _ in fields}}
    if lateness:
        out["lateness"] = (_lateness.job_lateness(c.nodes, c.job.id,
                                                  secret=c.secret).as_dict()
                           if c.nodes else None)
    return out


# ---- push_pull ------------------------------------------------------------

def _dtype(t: Any, what: str) -> str:
    if not isinstance(t, torch.Tensor):
        raise SigmaConfigError(f"sigma: {what}: want a torch.Tensor, got {type(t).__name__}")
    if t.layout != torch.strided:
        raise SigmaConfigError(f"sigma: {what}: a {t.layout} tensor: only dense tensors "
                               "(call .to_dense())")
    if t.device.type != "cpu":
        raise SigmaConfigError(f"sigma: {what}: the tensor is on {t.device}: Sigma pushes host "
                               "memory (move it with .cpu())")
    dt = _DTYPES.get(t.dtype)
    if dt is None:
        raise SigmaConfigError(f"sigma: {what}: dtype {t.dtype} is not summed by Sigma "
                               f"(one of {', '.join(str(d) for d in _DTYPES)})")
    if not t.is_contiguous():
        raise SigmaConfigError(f"sigma: {what}: the tensor is not contiguous: pass "
                               "t.contiguous() (a copy) and use the result")
    if t.numel() == 0:
        raise SigmaConfigError(f"sigma: {what}: the tensor is empty")
    return dt


class PushPullHandle:
    """A push_pull in flight: ``synchronize(h)`` waits and returns the output."""

    __slots__ = ("handle", "output", "finish", "_release", "__weakref__")

    def __init__(self, handle: Handle, output: torch.Tensor,
                 finish: Optional[Callable[[], torch.Tensor]],
                 release: Optional[Callable[[], None]]) -> None:
        self.handle, self.output, self.finish, self._release = handle, output, finish, release

    def _free(self) -> None:
        if self._release is not None:
            self._release()
            self._release = None

    def __del__(self) -> None:
        self._free()


class GroupHandle:
    """Several push_pulls in flight (grouped_allreduce_async): ``synchronize(h)``
    waits for all and returns their outputs, in order."""

    __slots__ = ("handles",)

    def __init__(self, handles: list[PushPullHandle]) -> None:
        self.handles = handles


def _unnamed(c: _Context, dt: str, numel: int, kind: str = "push_pull"
             ) -> tuple[str, Callable[[], None]]:
    """A name for an unnamed tensor: its kind of operation, dtype, size and the
    lowest index no unsynchronised handle of that shape holds (program order,
    so every rank picks the same)."""
    key = (kind, dt, numel)
    with c.lock:
        held = c.unnamed.setdefault(key, set())
        k = 0
        while k in held:
            k += 1
        held.add(k)

    def release() -> None:
        with c.lock:
            held.discard(k)
    return f"{kind}.{dt}.{numel}.{k}", release


def _flag(value: Any, what: str, arg: str) -> bool:
    if not isinstance(value, bool):
        raise SigmaConfigError(f"sigma: {what}: {arg}={value!r}: want True or False")
    return value


def _factor(value: Any, what: str, arg: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not float("-inf") < value < float("inf"):
        raise SigmaConfigError(f"sigma: {what}: {arg}={value!r}: want a finite number")
    return float(value)


def _compressor(compression: Any, what: str) -> Any:
    if compression is None:
        return Compression.none
    if not is_compressor(compression):
        raise SigmaConfigError(f"sigma: {what}: compression={compression!r}: want "
                               "sigma.torch.Compression.none, .fp16 or .bf16 (or a class with "
                               "compress() and decompress())")
    return compression


def _byteps_args(what: str, version: Any, priority: Any) -> None:
    """BytePS's version= and priority=: checked, and otherwise unused (Sigma
    starts operations in submission order, and keeps no versions)."""
    for arg, v in (("version", version), ("priority", priority)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise SigmaConfigError(f"sigma: {what}: {arg}={v!r}: want an int")


def _name(name: Any, what: str) -> Optional[str]:
    if name is not None and (not isinstance(name, str) or not name):
        raise SigmaConfigError(f"sigma: {what}: name must be a non-empty str, got {name!r}")
    return name


def _reduce(what: str, tensor: torch.Tensor, *, inplace: bool, average: bool,
            name: Optional[str] = None, compression: Any = None, prescale: Any = 1.0,
            postscale: Any = 1.0) -> PushPullHandle:
    """Start summing ``tensor`` (times ``prescale``) over the ranks; the handle's
    result is that sum times ``postscale``, divided by N if ``average``, in
    ``tensor`` (``inplace``) or a new tensor. With a compression, what goes on
    the wire (and is summed by the nodes) is the compressed tensor. ``what``
    is the function the user called, for messages."""
    c = _c()
    dt = _dtype(tensor, what)
    comp = _compressor(compression, what)
    pre, post = _factor(prescale, what, "prescale_factor"), _factor(postscale, what,
                                                                      "postscale_factor")
    name = _name(name, what)
    if average and dt not in _FLOATS:
        raise SigmaConfigError(f"sigma: {what}: average=True (op=Average) needs a "
                               f"floating-point tensor; pass average=False (op=Sum) to sum "
                               f"{dt}")
    if (pre != 1 or post != 1) and dt not in _FLOATS:
        raise SigmaConfigError(f"sigma: {what}: prescale_factor and postscale_factor need a "
                               f"floating-point tensor, not {dt}")
    if c.job.mode == "async" and (average or pre != 1 or post != 1):
        raise SigmaConfigError(f"sigma: {what}: the job is async (the node keeps a running "
                               "store): sum without averaging or scaling (average=False)")
    after = post / c.size if average else post
    plain = comp is Compression.none or comp is Compressor
    # the data, out of autograd (a parameter's in-place sum is no differentiable op)
    user, tensor = tensor, tensor.detach()
    if plain:
        if pre != 1:
            wire = tensor.mul_(pre) if inplace else tensor.mul(pre)
            out = wire
        else:
            wire, out = tensor, tensor if inplace else torch.empty_like(tensor)
        ctx = None
    else:
        wire, ctx = comp.compress(tensor.mul(pre) if pre != 1 else tensor)
        if isinstance(wire, torch.Tensor):
            wire = wire.contiguous()
        _dtype(wire, f"{what} (the compressed tensor)")
        if wire.data_ptr() == tensor.data_ptr() and not inplace:
            wire = wire.clone()  # the compression kept the input: sum into a copy
        out = wire

    def finish() -> torch.Tensor:
        res = out if plain else comp.decompress(wire, ctx)
        if inplace and res.data_ptr() != tensor.data_ptr():
            tensor.copy_(res)
            res = tensor
        if after != 1:
            res.mul_(after)
        return user if inplace else res

    wdt = _DTYPES[wire.dtype]
    release = None
    if name is None:
        name, release = _unnamed(c, wdt, wire.numel())
    h = c.session.submit(name, wdt, wire.numel(), wire.data_ptr(), out.data_ptr(),
                         (user, wire, out))
    return PushPullHandle(h, user if inplace else out, finish, release)


def push_pull_async(tensor: torch.Tensor, average: bool = True, name: Optional[str] = None,
                    version: int = 0, priority: int = 0) -> PushPullHandle:
    """Start summing ``tensor`` over the ranks into a new tensor; returns a
    handle at once (``synchronize(handle)`` gives the result). The input must
    stay unchanged until then. Give ``name`` to anything pushed repeatedly:
    a name is one key on the nodes, with the same size and dtype on every
    rank; unnamed tensors are keyed by dtype, size and call order.
    ``version`` and ``priority`` (BytePS's) are checked and otherwise unused."""
    _byteps_args("push_pull_async", version, priority)
    return _reduce("push_pull_async", tensor, inplace=False, name=name,
                   average=_flag(average, "push_pull_async", "average"))


def push_pull_async_(tensor: torch.Tensor, average: bool = True, name: Optional[str] = None,
                     version: int = 0, priority: int = 0) -> PushPullHandle:
    """As push_pull_async, summed in place (the tensor holds the result once synchronised)."""
    _byteps_args("push_pull_async_", version, priority)
    return _reduce("push_pull_async_", tensor, inplace=True, name=name,
                   average=_flag(average, "push_pull_async_", "average"))


def push_pull_async_inplace(tensor: torch.Tensor, average: bool = True,
                            name: Optional[str] = None, version: int = 0, priority: int = 0
                            ) -> PushPullHandle:
    """BytePS's name of push_pull_async_."""
    _byteps_args("push_pull_async_inplace", version, priority)
    return _reduce("push_pull_async_inplace", tensor, inplace=True, name=name,
                   average=_flag(average, "push_pull_async_inplace", "average"))


def synchronize(handle: Union[PushPullHandle, GroupHandle], timeout: Optional[float] = None
                ) -> Any:
    """Wait for a push_pull or allreduce (bounded: see docs/python.md), and
    return its output (averaged and scaled as asked; a list for a grouped
    one). Raises the operation's SigmaError."""
    if isinstance(handle, GroupHandle):
        first: Optional[BaseException] = None
        outs = []
        for h in handle.handles:
            try:
                outs.append(synchronize(h, timeout))
            except SigmaError as e:
                first = first or e
        if first is not None:
            raise first
        return outs
    if not isinstance(handle, PushPullHandle):
        raise SigmaConfigError(f"sigma: synchronize: want a handle from push_pull_async or "
                               f"allreduce_async, got {type(handle).__name__}")
    try:
        handle.handle.wait(timeout)
    finally:
        handle._free()
    if handle.finish is not None:
        handle.output, handle.finish = handle.finish(), None
    return handle.output


def poll(handle: Union[PushPullHandle, GroupHandle]) -> bool:
    """True once the push_pull is done (synchronize() then returns at once)."""
    if isinstance(handle, GroupHandle):
        return all(poll(h) for h in handle.handles)
    if not isinstance(handle, PushPullHandle):
        raise SigmaConfigError(f"sigma: poll: want a handle from push_pull_async or "
                               f"allreduce_async, got {type(handle).__name__}")
    return handle.handle.done()


def push_pull(tensor: torch.Tensor, average: bool = True, name: Optional[str] = None,
              version: int = 0, priority: int = 0, compression: Any = Compression.none
              ) -> torch.Tensor:
    """Sum (or average) ``tensor`` over the ranks; returns a new tensor.
    ``compression`` (Compression.fp16, .bf16) sets what goes on the wire."""
    return _push_pull_now("push_pull", tensor, False, average, name, version, priority,
                          compression)


def _push_pull_now(fn: str, tensor: torch.Tensor, inplace: bool, average: bool,
                   name: Optional[str], version: int, priority: int, compression: Any
                   ) -> torch.Tensor:
    """push_pull and its in-place names: the sum now; messages name ``fn``."""
    _byteps_args(fn, version, priority)
    return synchronize(_reduce(fn, tensor, inplace=inplace, name=name,
                               average=_flag(average, fn, "average"),
                               compression=compression))


def push_pull_(tensor: torch.Tensor, average: bool = True, name: Optional[str] = None,
               version: int = 0, priority: int = 0, compression: Any = Compression.none
               ) -> torch.Tensor:
    """Sum (or average) ``tensor`` over the ranks in place; returns it."""
    return _push_pull_now("push_pull_", tensor, True, average, name, version, priority,
                          compression)


def push_pull_inplace(tensor: torch.Tensor, average: bool = True, name: Optional[str] = None,
                      version: int = 0, priority: int = 0, compression: Any = Compression.none
                      ) -> torch.Tensor:
    """BytePS's name of push_pull_."""
    return _push_pull_now("push_pull_inplace", tensor, True, average, name, version, priority,
                          compression)


def declare(name: str) -> None:
    """BytePS's declare(): Sigma needs no declaration (names are matched
    through the job's store at their first push); the name is checked."""
    if not isinstance(name, str) or not name:
        raise SigmaConfigError(f"sigma: declare: name must be a non-empty str, got {name!r}")

# ---- DDP communication hook ----------------------------------------------

class HookState:
    """State of :func:`ddp_comm_hook` for one DDP model.

    A bucket is named by its index, size and dtype, and a name has one tensor
    id on every rank (through the job's store, whatever the order buckets
    come in); when DDP rebuilds its buckets after the first step, a bucket
    with a new index or size gets a new key, and one that kept both keeps
    its key.

    Args:
        name: prefix of the buckets' names (give each DDP model its own).
        average: divide the gradients by the number of ranks (as DDP does).
    """

    def __init__(self, name: str = "ddp", average: bool = True) -> None:
        self.name = name
        self.average = average
        self.buckets = 0

    def bucket_name(self, index: int, numel: int, dt: str) -> str:
        """The name (hence the key) of a bucket."""
        return f"{self.name}.bucket{index}.{numel}.{dt}"


_default_hook_state = HookState()


def _unwrap(fut: torch.futures.Future) -> torch.Tensor:
    return fut.wait()  # re-raises a failure, so DDP sees an error rather than a value


def ddp_comm_hook(state: Optional[HookState], bucket: dist.GradBucket
                  ) -> torch.futures.Future[torch.Tensor]:
    """DistributedDataParallel's communication hook: sums each gradient bucket
    through Sigma (``model.register_comm_hook(None, sigma.torch.ddp_comm_hook)``).

    The bucket is summed in place, divided by the number of ranks first as
    DDP's own all-reduce does; a failure makes ``backward()`` raise with
    Sigma's message."""
    c = _c()
    st = state if state is not None else _default_hook_state
    if not isinstance(st, HookState):
        raise SigmaConfigError("sigma: ddp_comm_hook: the state must be a sigma.torch.HookState "
                               f"or None, got {type(st).__name__}")
    if c.job.mode == "async":
        raise SigmaConfigError("sigma: ddp_comm_hook: the job is async, where a node keeps a "
                               "running sum of everything pushed: use DistributedOptimizer "
                               "(it pushes parameter deltas) or a sync job")
    buf = bucket.buffer()
    dt = _dtype(buf, f"DDP bucket {bucket.index()}")
    if st.average and c.size > 1:
        buf.div_(c.size)
    st.buckets += 1
    h = c.session.submit(st.bucket_name(bucket.index(), buf.numel(), dt), dt, buf.numel(),
                         buf.data_ptr(), buf.data_ptr(), buf)
    fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()

    def done(hd: Handle) -> None:
        err = hd.exception()
        if err is not None:
            fut.set_exception(err)
        else:
            fut.set_result(buf)
    h.add_done_callback(done)
    return fut.then(_unwrap)


# ---- DistributedOptimizer -----------------------------------------------

def _average_of(what: str, average: Any, op: Any, default: bool = True) -> bool:
    """Horovod's op= (Average, Sum) or the older average=: whether to average.
    The operations Sigma's nodes cannot do raise NotImplementedError."""
    if op is not None and average is not None:
        raise SigmaConfigError(f"sigma: {what}: give op= or average=, not both")
    if op is None:
        return default if average is None else _flag(average, what, "average")
    if op is ReduceOp.Adasum or (isinstance(op, int) and op == ReduceOp.Adasum):
        raise NotImplementedError(f"sigma: {what}: op=Adasum: Sigma's summation nodes add, and "
                                  "Adasum is no sum: use op=sigma.torch.Average (and scale the "
                                  "learning rate by size() as for Average)")
    if isinstance(op, int) and not isinstance(op, bool) and op in (ReduceOp.Min, ReduceOp.Max,
                                                                   ReduceOp.Product):
        raise NotImplementedError(f"sigma: {what}: op={ReduceOp(op).name}: Sigma's summation "
                                  "nodes only add: use op=sigma.torch.Sum or Average")
    if isinstance(op, int) and not isinstance(op, bool) and op in (ReduceOp.Average,
                                                                   ReduceOp.Sum):
        return op == ReduceOp.Average
    raise SigmaConfigError(f"sigma: {what}: op={op!r}: want sigma.torch.Average or "
                           "sigma.torch.Sum")


def check_process_set(what: str, process_set: Any) -> None:
    """Horovod's process_set=: only the global one (every rank of the job)."""
    if process_set is not None and process_set is not global_process_set:
        raise NotImplementedError(f"sigma: {what}: process sets: a Sigma job is every rank: "
                                  "give no process_set=, or run one job per set of ranks")


class _GlobalProcessSet:
    def __repr__(self) -> str:
        return "sigma.torch.global_process_set"


global_process_set = _GlobalProcessSet()


class _GradPush:
    """Pushes parameters' gradients through Sigma (in place, compressed and
    scaled as asked) and waits for them: DistributedOptimizer's and
    parallel.DistributedDataParallel's. The gradient of a parameter becomes
    ``post * sum_r(pre * g_r)``, ``pre = 1 / predivide`` and ``post =
    predivide / N`` when averaging (Horovod's gradient_predivide_factor)."""

    def __init__(self, c: _Context, named: list[tuple[str, torch.nn.Parameter]], what: str,
                 average: bool, compression: Any, predivide: Any, sparse_as_dense: bool
                 ) -> None:
        self.what = what
        self.comp = _compressor(compression, what)
        f = _factor(predivide, what, "gradient_predivide_factor")
        if f != 1 and not average:
            raise SigmaConfigError(f"sigma: {what}: gradient_predivide_factor={predivide!r} "
                                   "needs op=Average")
        if f <= 0:
            raise SigmaConfigError(f"sigma: {what}: gradient_predivide_factor={predivide!r}: "
                                   "want a number > 0")
        self.pre = 1.0 / f
        self.post = f / c.size if average else 1.0
        self.sparse_as_dense = _flag(sparse_as_dense, what, "sparse_as_dense")
        self.handles: dict[int, tuple[str, Handle, Callable[[], None]]] = {}
        builtin = self.comp in (Compression.none, Compressor) or \
            (isinstance(self.comp, type) and issubclass(self.comp, (Compression.fp16,
                                                                    Compression.bf16)))
        for n, p in named:
            _dtype(p, f"{what}: parameter {n}")
            if builtin:  # claimed now, not in backward
                wire = self.comp.compress(torch.zeros(1, dtype=p.dtype))[0]
                c.session.tensor_id(n, p.numel(), _DTYPES[wire.dtype])

    def push(self, name: str, p: torch.nn.Parameter) -> None:
        c = _c()
        if id(p) in self.handles:
            raise SigmaError(f"sigma: {self.what}: the gradient of {name} was pushed twice "
                             "before step(): call step() (or synchronize()) after each "
                             "backward, or set backward_passes_per_step")
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        if p.grad.layout != torch.strided and self.sparse_as_dense:
            p.grad = p.grad.to_dense()
        g = p.grad
        if g.layout != torch.strided:
            raise SigmaConfigError(f"sigma: {self.what}: the gradient of {name} is "
                                   f"{g.layout}: Sigma sums dense tensors: pass "
                                   "sparse_as_dense=True (or use dense embeddings)")
        _dtype(g, f"{self.what}: gradient of {name}")
        if self.pre != 1:
            g.mul_(self.pre)
        wire, ctx = self.comp.compress(g)
        if isinstance(wire, torch.Tensor):
            wire = wire.contiguous()
        wdt = _dtype(wire, f"{self.what}: compressed gradient of {name}")
        post, comp = self.post, self.comp

        def finish() -> None:
            res = comp.decompress(wire, ctx)
            if res.data_ptr() != g.data_ptr():
                g.copy_(res)
            if post != 1:
                g.mul_(post)
        self.handles[id(p)] = (name, c.session.submit(name, wdt, wire.numel(), wire.data_ptr(),
                                                      wire.data_ptr(), (g, wire)), finish)

    def wait(self) -> None:
        """Wait for every gradient pushed; each becomes its sum (scaled). The
        first failure is raised once all ended."""
        handles, self.handles = self.handles, {}
        first: Optional[BaseException] = None
        for _, h, finish in handles.values():
            try:
                h.wait()
                finish()
            except SigmaError as e:
                first = first or e
        if first is not None:
            raise first


def _check_groups(what: str, num_groups: Any, groups: Any) -> None:
    """Horovod's num_groups= and groups= (how it fuses allreduces): checked;
    Sigma keeps every gradient in flight at once, so they change nothing."""
    if isinstance(num_groups, bool) or not isinstance(num_groups, int) or num_groups < 0:
        raise SigmaConfigError(f"sigma: {what}: num_groups={num_groups!r}: want an int >= 0")
    if groups is not None and not (isinstance(groups, int) and not isinstance(groups, bool)
                                   and groups >= 0) and not isinstance(groups, (list, tuple)):
        raise SigmaConfigError(f"sigma: {what}: groups={groups!r}: want None, an int or a list "
                               "of lists of parameters")


class DistributedOptimizer(torch.optim.Optimizer):
    """Wraps an optimizer so that ``step()`` uses gradients summed through Sigma.

    Each gradient is pushed as soon as backward has accumulated it (a hook on
    the parameter's gradient accumulator), so communication overlaps the rest
    of backward, in the order backward produces them (last layer first).
    ``step()`` waits for all of them, then runs the wrapped optimizer.

    In an async job (BytePS's asynchronous mode) nothing is pushed during
    backward: ``step()`` runs the optimizer locally and pushes the change of
    each parameter; the node adds it to its store and answers with the
    store, which becomes the parameter.

    The arguments are BytePS's and Horovod's, in their order:

    Args:
        optimizer: the optimizer to wrap (its param_groups and state are shared).
        named_parameters: ``model.named_parameters()``; names key the tensors
            and must be the same on every rank (default: ``param.<i>``).
        compression: what goes on the wire (Compression.none, .fp16, .bf16).
        backward_passes_per_step: backward passes whose gradients accumulate
            locally before one push (gradient accumulation).
        op: sigma.torch.Average (default) or Sum; Adasum raises.
        gradient_predivide_factor: divide gradients by this before the sum,
            and by N / this after it (op=Average).
        num_groups, groups: Horovod's fusion groups: checked, no effect.
        sparse_as_dense: push sparse gradients as dense tensors.
        process_set: only the global one.
        average: the older form of op (not with op).
        name: prefix of the tensors' names (one per optimizer).
    """

    def __init__(self, optimizer: torch.optim.Optimizer,
                 named_parameters: Optional[Iterable[tuple[str, torch.nn.Parameter]]] = None,
                 compression: Any = Compression.none, backward_passes_per_step: int = 1,
                 op: Any = None, gradient_predivide_factor: float = 1.0, num_groups: int = 0,
                 groups: Any = None, sparse_as_dense: bool = False, process_set: Any = None,
                 *, average: Optional[bool] = None, name: str = "opt") -> None:
        what = "DistributedOptimizer"
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise SigmaConfigError("sigma: DistributedOptimizer wraps a torch.optim.Optimizer, "
                                   f"got {type(optimizer).__name__}")
        if isinstance(backward_passes_per_step, bool) or \
                not isinstance(backward_passes_per_step, int) or backward_passes_per_step < 1:
            raise SigmaConfigError("sigma: DistributedOptimizer: backward_passes_per_step must "
                                   f"be an int >= 1, got {backward_passes_per_step!r}")
        do_average = _average_of(what, average, op)
        _check_groups(what, num_groups, groups)
        check_process_set(what, process_set)
        if not isinstance(name, str) or not name:
            raise SigmaConfigError(f"sigma: DistributedOptimizer: name={name!r}: want a "
                                   "non-empty str")
        c = _c()
        self._opt = optimizer
        # share the wrapped optimizer's groups and state (LR schedulers edit them)
        self.param_groups = optimizer.param_groups
        self.state = optimizer.state
        self.defaults = optimizer.defaults
        self._passes = backward_passes_per_step
        params = [p for g in optimizer.param_groups for p in g["params"]]
        if named_parameters is None:
            named = [(f"param.{i}", p) for i, p in enumerate(params)]
        else:
            named = list(named_parameters)
            if any(not (isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], str) and
                        isinstance(x[1], torch.Tensor)) for x in named):
                raise SigmaConfigError("sigma: DistributedOptimizer: named_parameters must be "
                                       "(name, tensor) pairs, as model.named_parameters() gives")
            ids = {id(p) for _, p in named}
            missing = [i for i, p in enumerate(params) if id(p) not in ids]
            if missing:
                raise SigmaConfigError(f"sigma: DistributedOptimizer: {len(missing)} of the "
                                       "optimizer's parameters are not in named_parameters")
            names = [n for n, _ in named]
            if len(set(names)) != len(names):
                raise SigmaConfigError("sigma: DistributedOptimizer: parameter names repeat")
        in_opt = {id(p) for p in params}
        self._named = [(f"{name}.{n}", p) for n, p in named if id(p) in in_opt
                       and p.requires_grad]
        self._async = c.job.mode == "async"
        if self._async and (compression not in (Compression.none, Compressor, None) or
                            gradient_predivide_factor != 1):
            raise SigmaConfigError("sigma: DistributedOptimizer: in an async job the nodes keep "
                                   "the parameters: no compression, no "
                                   "gradient_predivide_factor")
        self._grads = _GradPush(c, self._named, what, do_average,
                                Compression.none if self._async else compression,
                                gradient_predivide_factor, sparse_as_dense)
        self._counts: dict[int, int] = {}
        self._hooks: list = []
        self._synced = False  # synchronize() ran since the last push
        self._skip = False
        if self._async:
            self._async_init(c)
        else:
            for n, p in self._named:
                acc = p.expand_as(p).grad_fn.next_functions[0][0]  # p's AccumulateGrad
                acc.register_hook(self._make_hook(n, p))
                self._hooks.append(acc)

    @property
    def _handles(self) -> dict:
        return self._grads.handles

    def _make_hook(self, name: str, p: torch.nn.Parameter) -> Callable[..., None]:
        def hook(*_: Any) -> None:
            k = id(p)
            self._counts[k] = self._counts.get(k, 0) + 1
            if self._counts[k] == self._passes:
                self._synced = False
                self._grads.push(name, p)
        return hook

    def synchronize(self) -> None:
        """Push the gradients backward did not produce (zeros: every rank must
        push every tensor each step), and wait for all of them. Once done, a
        second synchronize() or the next step() pushes nothing more until
        the next backward (the gradients are sums already)."""
        if self._async or (self._synced and not self._grads.handles):
            return
        for n, p in self._named:
            if id(p) not in self._grads.handles:
                self._grads.push(n, p)
        self._counts = {}
        self._grads.wait()
        self._synced = True

    def set_backward_passes_per_step(self, passes: int) -> None:
        """BytePS's: change backward_passes_per_step (between steps)."""
        if isinstance(passes, bool) or not isinstance(passes, int) or passes < 1:
            raise SigmaConfigError("sigma: DistributedOptimizer.set_backward_passes_per_step: "
                                   f"want an int >= 1, got {passes!r}")
        if self._grads.handles or self._counts:
            raise SigmaConfigError("sigma: DistributedOptimizer.set_backward_passes_per_step: "
                                   "gradients are being accumulated: call it after step()")
        self._passes = passes

    @contextlib.contextmanager
    def skip_synchronize(self) -> Iterator[None]:
        """Within it, ``step()`` does not synchronize (Horovod's): for a
        ``synchronize()``, gradient clipping, then ``step()``."""
        self._skip = True
        try:
            yield
        finally:
            self._skip = False

    def step(self, closure: Optional[Callable[[], float]] = None) -> Any:
        """Wait for the summed gradients, then step the wrapped optimizer."""
        if self._async:
            return self._async_step(closure)
        if not self._skip:
            self.synchronize()
        self._synced = False
        return self._opt.step(closure)

    def zero_grad(self, set_to_none: bool = False) -> None:
        """The wrapped optimizer's zero_grad; refused while gradients are in flight."""
        if self._grads.handles:
            raise SigmaConfigError("sigma: zero_grad() while gradients are still being summed: "
                                   "call step() or synchronize() first")
        self._opt.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict:
        return self._opt.state_dict()

    def load_state_dict(self, state_dict: dict) -> None:
        self._opt.load_state_dict(state_dict)

    def add_param_group(self, param_group: dict) -> None:
        raise SigmaConfigError("sigma: DistributedOptimizer: add parameter groups to the "
                               "optimizer before wrapping it")

    def __repr__(self) -> str:
        return f"DistributedOptimizer({self._opt!r})"

    # async jobs: parameter deltas into the node's store
    def _async_init(self, c: _Context) -> None:
        # the first push of a chunk initialises the node's store; later ranks' first
        # pushes are added: rank 0 gives the parameters, the others zeros
        handles = []
        for n, p in self._named:
            src = p.detach().clone() if c.rank == 0 else torch.zeros_like(p)
            handles.append(c.session.submit(n, _DTYPES[p.dtype], p.numel(), src.data_ptr(),
                                            src.data_ptr(), src))
        for h in handles:
            h.wait()

    def _async_step(self, closure: Optional[Callable[[], float]]) -> Any:
        c = _c()
        before = [p.detach().clone() for _, p in self._named]
        loss = self._opt.step(closure)
        handles = []
        for (n, p), old in zip(self._named, before):
            delta = old.neg_().add_(p.detach())  # p - old, in the copy's memory
            handles.append((p, delta, c.session.submit(n, _DTYPES[p.dtype], p.numel(),
                                                       delta.data_ptr(), delta.data_ptr(),
                                                       delta)))
        for p, store, h in handles:
            h.wait()
            with torch.no_grad():
                p.copy_(store)
        return loss


# ---- broadcasts --------------------------------------------------------

def _named_tensors(params: Any) -> list[tuple[str, torch.Tensor]]:
    if isinstance(params, Mapping):
        items = list(params.items())
    else:
        items = list(params)
        if items and isinstance(items[0], torch.Tensor):
            items = [(f"t{i}", t) for i, t in enumerate(items)]
    for n, t in items:
        if not isinstance(n, str) or not isinstance(t, torch.Tensor):
            raise SigmaConfigError("sigma: broadcast_parameters: want a state_dict, "
                                   "named_parameters() or a list of tensors")
    return items


def _bcast_submit(c: _Context, what: str, d: torch.Tensor, root_rank: int, name: str
                  ) -> Handle:
    """Broadcast ``d`` in place: the other ranks push zeros, so the sum is the
    root's values (bitwise, but -0.0 arrives as 0.0)."""
    dt = _dtype(d, what)
    if c.rank != root_rank:
        d.zero_()
    return c.session.submit(name, dt, d.numel(), d.data_ptr(), d.data_ptr(), d)


def broadcast_parameters(params: Any, root_rank: int = 0, name: str = "bcast") -> None:
    """Make every rank's tensors equal to ``root_rank``'s, in place: the other
    ranks push zeros, so the sum is the root's values. ``params`` is a
    state_dict, ``named_parameters()`` or a list of tensors. In an async job
    it uses torch.distributed's broadcast (the node's store would keep the sum)."""
    c = _c()
    _root("broadcast_parameters", root_rank, c)
    items = _named_tensors(params)
    if c.job.mode == "async":
        if not _dist_on():
            raise SigmaConfigError("sigma: broadcast_parameters in an async job needs "
                                   "torch.distributed (init_process_group)")
        for _, t in items:
            dist.broadcast(t.data, root_rank)
        return
    with torch.no_grad():
        handles = [_bcast_submit(c, f"broadcast_parameters ({n})", t.data, root_rank,
                                 f"{name}.{n}") for n, t in items]
    for h in handles:
        h.wait()


def _root(what: str, root_rank: Any, c: _Context) -> int:
    if isinstance(root_rank, bool) or not isinstance(root_rank, int) or \
            not 0 <= root_rank < c.size:
        raise SigmaConfigError(f"sigma: {what}: root_rank {root_rank!r}: want 0..{c.size - 1}")
    return root_rank


def _store_broadcast(c: _Context, what: str, root_rank: int, data: Optional[bytes]) -> bytes:
    """``data`` of the root (None elsewhere) to every rank, through the job's
    store (every rank calls these in the same order: a counter keys them)."""
    c.gen_bcast = getattr(c, "gen_bcast", 0) + 1
    key = _key(c.gen, f"optstate{c.gen_bcast}")
    if c.rank == root_rank:
        assert data is not None
        c.store.set(key, data)
        return data
    try:
        c.store.wait([key], datetime.timedelta(seconds=c.timeout))
    except RuntimeError as e:
        raise SigmaTimeoutError(f"sigma: {what}: nothing from root rank {root_rank} within "
                                f"{c.timeout:g} s ({e}): does every rank call {what}() "
                                "in the same order?") from None
    return c.store.get(key)


def broadcast_optimizer_state(optimizer: torch.optim.Optimizer, root_rank: int = 0,
                              model: Any = None) -> None:
    """Give every rank ``root_rank``'s optimizer state (its state_dict, sent
    through the job's store: small states, once at start). With one rank,
    nothing to do. ``model`` (Horovod's) is not needed."""
    c = _c()
    _root("broadcast_optimizer_state", root_rank, c)
    if c.size == 1:
        return
    opt = optimizer._opt if isinstance(optimizer, DistributedOptimizer) else optimizer
    if not isinstance(opt, torch.optim.Optimizer):
        raise SigmaConfigError("sigma: broadcast_optimizer_state: want an optimizer, got "
                               f"{type(optimizer).__name__}")
    buf = io.BytesIO()
    if c.rank == root_rank:
        torch.save(opt.state_dict(), buf)
    got = _store_broadcast(c, "broadcast_optimizer_state", root_rank,
                           buf.getvalue() if c.rank == root_rank else None)
    if c.rank != root_rank:
        opt.load_state_dict(torch.load(io.BytesIO(got)))


def broadcast_object(obj: Any, root_rank: int = 0, name: Optional[str] = None,
                     process_set: Any = None) -> Any:
    """``root_rank``'s ``obj`` on every rank (pickled, through the job's
    store); returns it. Every rank must call it, in the same order."""
    c = _c()
    _root("broadcast_object", root_rank, c)
    _name(name, "broadcast_object")
    check_process_set("broadcast_object", process_set)
    if c.size == 1:
        return obj
    data = None
    if c.rank == root_rank:
        try:
            data = pickle.dumps(obj)
        except (pickle.PicklingError, TypeError, AttributeError) as e:
            raise SigmaConfigError(f"sigma: broadcast_object: the object cannot be pickled: "
                                   f"{e}") from None
    got = _store_broadcast(c, "broadcast_object", root_rank, data)
    return obj if c.rank == root_rank else pickle.loads(got)


# ---- BytePS's and Horovod's other names ---------------------------------
# (after everything above: these modules use it; sigma.torch.parallel is a
# module of its own, registered as a submodule as os.path is)
from . import _torch_parallel as parallel  # noqa: E402
from ._torch_peers import *  # noqa: E402,F401,F403
from ._torch_peers import __all__ as _peers_all  # noqa: E402

sys.modules[__name__ + ".parallel"] = parallel
__all__ += _peers_all

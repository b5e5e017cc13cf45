# SPDX-License-Identifier: BSD-3-Clause
"""A libsigma session driven by a progress thread.

libsigma's sessions belong to one thread at a time and make progress only
inside ``sigma_poll()`` (client/sigma.h, "Thread safety"). A :class:`Session`
therefore owns one background thread, the only one that ever calls into the
C session. Other threads hand it operations through a queue and get a
:class:`Handle` back; the thread starts them, polls (the GIL is released
while it waits in ``sigma_poll()``), and completes each handle from
libsigma's completion callback. Many operations are in flight at once, in the
order they were submitted (the same order on every rank keeps a node's slots
from filling with chunks some rank cannot send yet: docs/client.md).

Every wait is bounded (docs/python.md, "Errors and bounds"): libsigma fails an
operation whose node answers none of ``max_retries`` resends in a row (node
silent: about 1.3 to 2.2 s with the defaults), or whose node keeps answering
that it waits for other ranks for longer than ``ranks_wait`` (60 s by
default), and a watchdog in the thread fails everything if no operation moved
for longer than both. The first failure closes the session: operations in
flight and queued fail with the first error's message, since a rank whose
rounds fell out of step with the others cannot go on.
"""

from __future__ import annotations

import collections
import copy
import ctypes
import errno
import os
import threading
import time
import zlib
from typing import Any, Callable, Deque, Optional

from . import _lib, localnodes
from .errors import SigmaConfigError, SigmaError, SigmaTimeoutError, status_error
from .job import Job

# how often a progress thread with operations in flight looks in the store for a
# failure another rank posted (Session.post_failure)
FAILED_CHECK_S = 0.5
# libsigma's failover_wait_us default: a silent node the membership still lists
_FAILOVER_WAIT_S = 10.0
# elastic_opts: each option's range (sigma_elastic.h; 0 is every option's default)
_ELASTIC_OPTS = {"poll_ms": (10, 10000), "margin": (1, 1000), "confirm_ms": (1, 0xFFFFFFFF),
                 "wait_ms": (1, 0xFFFFFFFF), "propose": (-1, 1), "idle_ms": (10, 600000)}
_FORMATS = {"f": "fp32", "d": "fp64", "e": "fp16", "b": "int8", "B": "uint8"}
_INT_FORMATS = {4: "int32", 8: "int64"}


def retry_budget_s(rto_us: int = 0, rto_max_us: int = 0, max_retries: int = 0) -> float:
    """How long libsigma keeps resending a chunk that its node never answered
    before failing it: the sum of the doubling retransmit timeouts from its
    first send (docs/client.md)."""
    rto = rto_us or 5000
    top = max(rto_max_us or 200000, rto)
    total = 0
    for _ in range((max_retries or 10) + 1):
        total += min(rto, top)
        rto *= 2
    return total / 1e6


def silent_bound_s(rto_us: int = 0, rto_max_us: int = 0, max_retries: int = 0) -> float:
    """The node-silent bound: how long after its node's last answer (or its
    first send) a chunk's operation fails when the node answers nothing more,
    at most (docs/client.md, "Two bounds"): the retry budget, or (max_retries
    + 1) x rto_max once the node has answered, whichever is longer, plus
    libsigma's timer scan (rto_us / 4)."""
    rto = rto_us or 5000
    top = max(rto_max_us or 200000, rto)
    answered = ((max_retries or 10) + 1) * top / 1e6
    return max(retry_budget_s(rto_us, rto_max_us, max_retries), answered) + rto / 4e6


class LockedStore:
    """A key-value store shared by every rank (torch.distributed's TCPStore,
    FileStore, PrefixStore...: ``set``, ``get``, ``add`` and ``wait``), used
    by one thread of this process at a time: torch 1.13's TCPStore client
    mixes up the answers of two threads' calls. The session's progress thread
    only tries it (:meth:`try_add`), so it never waits for a store call of
    another thread. It never calls the store's ``compare_set``: torch 1.13's
    makes its answer without the GIL, and crashes the process (SIGSEGV in
    PyBytes_FromStringAndSize) when another thread runs Python meanwhile;
    :meth:`claim` does the same with ``add``, ``set`` and ``get``."""

    def __init__(self, store: Any) -> None:
        self.store = store.store if isinstance(store, LockedStore) else store
        self._lock = store._lock if isinstance(store, LockedStore) else threading.Lock()

    def set(self, key: str, value: Any) -> None:
        with self._lock:
            self.store.set(key, value)

    def get(self, key: str) -> bytes:
        with self._lock:
            return self.store.get(key)

    def add(self, key: str, amount: int) -> int:
        with self._lock:
            return self.store.add(key, amount)

    def claim(self, key: str, value: str) -> str:
        """Set ``key`` to ``value`` unless some rank claimed it first; return
        the value that stays (the first claimer's). The first to add 1 to
        ``key/claims`` sets it; the others read it (get() waits for the set,
        within the store's timeout)."""
        with self._lock:
            if self.store.add(f"{key}/claims", 1) == 1:
                self.store.set(key, value)
                return value
            return _text(self.store.get(key))

    def wait(self, keys: list[str], timeout: Any) -> None:
        with self._lock:
            self.store.wait(keys, timeout)

    def try_add(self, key: str, amount: int) -> Optional[int]:
        """add(), or None at once if another thread is using the store."""
        if not self._lock.acquire(blocking=False):
            return None
        try:
            return self.store.add(key, amount)
        finally:
            self._lock.release()


class Handle:
    """One push_pull in flight. Wait with :meth:`wait` (or ``sigma.torch.synchronize``)."""

    __slots__ = ("name", "tensor_id", "_ev", "_error", "_cbs", "_keep", "_session", "t_submit",
                 "t_done")

    def __init__(self, session: "Session", name: str, tensor_id: int, keep: Any) -> None:
        self.name = name
        self.tensor_id = tensor_id
        self._session = session
        self._ev = threading.Event()
        self._error: Optional[BaseException] = None
        self._cbs: list[Callable[["Handle"], None]] = []
        self._keep = keep
        self.t_submit = time.perf_counter()
        self.t_done = 0.0

    def done(self) -> bool:
        """True once the operation completed or failed (never blocks)."""
        return self._ev.is_set()

    def exception(self) -> Optional[BaseException]:
        """The failure, or None (also None while still in flight)."""
        return self._error

    def wait(self, timeout: Optional[float] = None) -> None:
        """Block until done; raise the failure. ``timeout`` (s) bounds the wait
        (SigmaTimeoutError); without one, the session's own bounds apply (the
        retries, the watchdog), and a dead progress thread is noticed within
        0.2 s."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._ev.wait(0.2 if deadline is None else
                                max(0.0, min(0.2, deadline - time.monotonic()))):
            self._session._check_alive()
            if deadline is not None and time.monotonic() >= deadline:
                raise SigmaTimeoutError(
                    f"sigma: push_pull of '{self.name}' not done after {timeout:g} s "
                    "(the wait's own timeout)", errno.ETIMEDOUT)
        if self._error is not None:
            raise self._error

    def add_done_callback(self, fn: Callable[["Handle"], None]) -> None:
        """Call ``fn(handle)`` once done: on the progress thread, or at once if
        already done. Keep it short, and do not wait on other handles in it."""
        with self._session._cv:
            if not self._ev.is_set():
                self._cbs.append(fn)
                return
        fn(self)

    def _complete(self, error: Optional[BaseException]) -> None:
        with self._session._cv:
            if self._ev.is_set():
                return
            self._error = error
            self.t_done = time.perf_counter()
            self._keep = None
            self._ev.set()
            cbs, self._cbs = self._cbs, []
        for fn in cbs:
            try:
                fn(self)
            except Exception as e:  # a callback's bug must not kill the progress thread
                self._session._callback_errors.append(e)


class _Op:
    __slots__ = ("handle", "tid", "name", "dtype", "nelem", "src", "dst")

    def __init__(self, handle: Handle, tid: int, name: str, dtype: str, nelem: int, src: int,
                 dst: int) -> None:
        self.handle, self.tid, self.name = handle, tid, name
        self.dtype, self.nelem, self.src, self.dst = dtype, nelem, src, dst


class Session:
    """Rank ``rank``'s session of a job, with its progress thread.

    Args:
        job: the job (a :class:`~sigma.job.Job` or its descriptor).
        rank: this worker, 0..N-1.
        window, rto_us, rto_max_us, max_retries, first_round, chunk_bytes:
            libsigma's settings (0: its defaults; docs/client.md). Every rank
            of a job must use the same window. ``max_retries`` sets the node-
            silent bound (:attr:`silent_bound`).
        ranks_wait: seconds a chunk may wait for other ranks while its node
            says it holds this rank's push (libsigma's ranks_wait_us; default
            60): how long a dead, stuck or paused rank holds the others up
            before their operation fails with SigmaRanksMissingError.
        membership: a :class:`sigma.etcd.Watch` (libsigma's membership
            source): a node whose record leaves etcd is lost, and its
            partitions move to the survivors (failover; the job must be open,
            in sync or deterministic mode). The session owns the watch from
            then on, and stops it when it closes.
        local_addr: address to bind the UDP socket to (default any).
        poll_us: longest wait inside one sigma_poll(): a new submission waits
            at most this long for the thread to pick it up while others are
            in flight.
        shm: the shared-memory sockets of nodes on this machine (sigma-udpd
            --shm): the session uses SIGMA_TRANSPORT_SHM, and every node of
            the job must be among them. None (the default): SIGMA_SHM's
            (set by :func:`sigma.localnodes.start_local_nodes`), unless
            SIGMA_LOCAL_TRANSPORT=udp; a job with a node none of them
            belongs to then reaches that node over UDP and the others
            still over shared memory. ``[]``: kernel UDP.
            :attr:`transport` says which the session uses: "shm", "udp",
            or "shm+udp" for both.
        store: a key-value store every rank of the job shares, with
            ``set``, ``get``, ``add`` and ``wait`` (torch.distributed's c10d
            stores: TCPStore, FileStore, PrefixStore): names get the same id
            on every rank whatever the order they are first used in, and a
            name's size and dtype are checked across ranks at registration
            (:meth:`tensor_id`); a rank's failure posted there
            (:meth:`post_failure`) fails the operations in flight on every
            rank within FAILED_CHECK_S. Its keys start with
            ``store_prefix/``: give each job its own prefix. The session
            uses it through a :class:`LockedStore`. None: names are hashed to ids with no
            agreement between ranks (docs/python.md, "Tensors and keys").
        elastic: (etcd endpoints, cluster): an elastic job (docs/cluster.md,
            "Elastic jobs", libsigma-elastic): nodes that register into the
            cluster mid-job, come back after a crash, or are drained
            (``sigmactl --etcd ... drain NODE``) join or leave the job at a
            round every rank agrees on in etcd; a lost node fails over as
            with ``membership``. Kernel UDP only (``shm`` is ignored), and
            not with ``membership``. ``elastic_opts``: the C configuration's
            ``poll_ms``, ``margin``, ``confirm_ms``, ``wait_ms``, ``propose``, ``idle_ms``.
    """

    def __init__(self, job: "Job | str", rank: int, *, window: int = 0, rto_us: int = 0,
                 rto_max_us: int = 0, max_retries: int = 0, first_round: int = 0,
                 local_addr: Optional[str] = None, poll_us: int = 200,
                 ranks_wait: float = 60.0, membership: Any = None,
                 shm: Optional[list[str]] = None, store: Any = None,
                 store_prefix: str = "sigma", elastic: Optional[tuple[str, str]] = None,
                 elastic_opts: Optional[dict] = None) -> None:
        if isinstance(job, str):
            job = Job.parse(job)
        if not isinstance(rank, int) or not 0 <= rank < job.workers:
            raise SigmaConfigError(f"rank {rank!r}: the job has {job.workers} workers "
                                   f"(ranks 0..{job.workers - 1})")
        for k, v in (("window", window), ("rto_us", rto_us), ("rto_max_us", rto_max_us),
                     ("max_retries", max_retries), ("first_round", first_round),
                     ("poll_us", poll_us)):
            if not isinstance(v, int) or v < 0 or v > 0xFFFFFFFF:
                raise SigmaConfigError(f"{k} {v!r}: want an integer >= 0")
        if isinstance(ranks_wait, bool) or not isinstance(ranks_wait, (int, float)) or \
                not 0.001 <= ranks_wait <= 4294:
            raise SigmaConfigError(f"ranks_wait {ranks_wait!r}: want seconds, 0.001..4294")
        self.job = job
        self.rank = rank
        # the node-silent bounds (docs/client.md, "Two bounds"), and the ranks-missing one
        self.retry_budget = retry_budget_s(rto_us, rto_max_us, max_retries)
        self.silent_bound = silent_bound_s(rto_us, rto_max_us, max_retries)
        self.ranks_wait = float(ranks_wait)
        if membership is not None:
            # a node still listed is resent to for failover_wait_us (10 s) past its budget
            self.silent_bound += _FAILOVER_WAIT_S
        # the watchdog: no RESULT moves while ranks are missing, for up to ranks_wait
        self.stall_bound = self.ranks_wait + 2 * self.silent_bound + 1.0
        self._poll_us = max(1, poll_us)
        self._lib = _lib.libsigma()
        base = _lib.SigmaConfPadded()
        c = base.conf
        c.window, c.rto_us, c.rto_max_us = window, rto_us, rto_max_us
        c.max_retries, c.first_round = max_retries, first_round
        c.ranks_wait_us = int(self.ranks_wait * 1e6)
        self._watch = membership
        if membership is not None:
            c.membership = membership.callback()
            c.membership_arg = membership.handle
        self._local = local_addr.encode() if local_addr else None
        c.local_addr = self._local
        self._el = None
        if elastic is not None:
            if membership is not None:
                raise SigmaConfigError("sigma: elastic= follows the membership itself: give "
                                       "no membership=")
            self.silent_bound += _FAILOVER_WAIT_S
            self.stall_bound = self.ranks_wait + 2 * self.silent_bound + 1.0
            shm = []
            self._el = _lib.libelastic()
            ec = _lib.ElasticConf()
            self._el_keep = [elastic[0].encode(), elastic[1].encode(),
                             job.descriptor.encode(), base]
            ec.etcd.endpoints, ec.etcd.timeout_ms = self._el_keep[0], 1000
            ec.cluster, ec.descriptor, ec.rank = self._el_keep[1], self._el_keep[2], rank
            ec.base = ctypes.cast(ctypes.byref(base), ctypes.c_void_p)
            for k, v in (elastic_opts or {}).items():
                if k not in _ELASTIC_OPTS:
                    raise SigmaConfigError(f"sigma: elastic option {k!r}: one of poll_ms, "
                                           "margin, confirm_ms, wait_ms, propose, idle_ms")
                lo, hi = _ELASTIC_OPTS[k]
                # checked here: ctypes would wrap -1 into a uint32 without a word
                if isinstance(v, bool) or not isinstance(v, int) or \
                        not (lo <= v <= hi or v == 0):
                    raise SigmaConfigError(f"sigma: elastic option {k} {v!r}: want an "
                                           f"integer {lo}..{hi} (0: the default)")
                setattr(ec, k, v)
        from_env = shm is None
        if from_env:
            try:
                shm = localnodes.shm_paths()
            except ValueError as e:
                raise SigmaConfigError(str(e)) from None
        if not isinstance(shm, (list, tuple)) or \
                not all(isinstance(p, str) and p for p in shm) or len(shm) > 256:
            raise SigmaConfigError(f"shm {shm!r}: want a list of up to 256 socket paths")
        err = ctypes.create_string_buffer(_lib.SIGMA_ERR_LEN)
        s = None
        mixed = False
        if self._el is not None:
            s = self._el.sigma_elastic_open(ctypes.byref(ec), err, len(err))
        elif shm:
            paths = (ctypes.c_char_p * len(shm))(*(p.encode() for p in shm))
            c.transport, c.shm_paths, c.n_shm_paths = _lib.TRANSPORT_SHM, paths, len(shm)
            s = self._lib.sigma_open_job(job.descriptor.encode(), rank, ctypes.byref(base), err,
                                         len(err))
            # local nodes' sockets from the environment, and a node not among them: that
            # node over UDP, the nodes of those sockets still over shared memory
            if not s and from_env and ctypes.get_errno() == errno.ENOENT:
                mixed = hasattr(self._lib, "sigma_node_transport")
                if not mixed:
                    shm = []
        if self._el is None and (not shm or mixed):
            c.transport = _lib.TRANSPORT_UDP
            if not mixed:
                c.shm_paths, c.n_shm_paths = None, 0
            s = self._lib.sigma_open_job(job.descriptor.encode(), rank, ctypes.byref(base), err,
                                         len(err))
        self.transport = "shm" if shm and not mixed else "udp"
        if s and mixed:
            kinds = {self._lib.sigma_node_transport(s, i) for i in range(len(job.nodes))}
            self.transport = "shm+udp" if len(kinds) > 1 else \
                "shm" if kinds == {_lib.TRANSPORT_SHM} else "udp"
        if not s and membership is not None:
            membership.stop()
        if not s:
            e = ctypes.get_errno()
            raise SigmaConfigError(f"sigma: cannot open rank {rank}'s session of job {job.id}: "
                                   f"{err.value.decode(errors='replace') or os.strerror(e)}", e)
        self._s = ctypes.c_void_p(s)
        self._cb = _lib.DONE_CB(self._on_done)  # kept alive as long as the session
        self._cv = threading.Condition()
        self._queue: list[_Op] = []
        self._tensors: dict[int, ctypes.c_void_p] = {}
        self._inflight: dict[int, _Op] = {}
        self._waiting: dict[int, Deque[_Op]] = {}
        self._completed: list[tuple[int, int, str, Optional[dict]]] = []
        self._names: dict[str, tuple[int, int, str]] = {}
        self._owners: dict[int, str] = {}  # ids known to be taken, and by which name
        self._id_lock = threading.Lock()
        self._store = LockedStore(store) if store is not None else None
        self._prefix = store_prefix
        self._failures_key = f"{store_prefix}/failures"
        self._closing = False
        self._failed: Optional[SigmaError] = None
        self._thread_error: Optional[BaseException] = None
        self._callback_errors: list[BaseException] = []
        self.loops = 0       # progress-thread iterations with operations in flight
        self.poll_s = 0.0    # of their wall time: inside sigma_poll() (GIL released)
        self.active_s = 0.0  # their whole wall time (the rest: Python, GIL waits)
        self.cpu_s = 0.0     # the progress thread's CPU time
        self._thread = threading.Thread(target=self._run, name=f"sigma-progress-r{rank}",
                                        daemon=True)
        self._thread.start()

    # ---- tensor ids ---------------------------------------------------------

    def tensor_id(self, name: str, nelem: int, dtype: str, tensor_id: Optional[int] = None) -> int:
        """The wire id of tensor ``name``, the same on every rank whatever the
        order in which ranks first use names (docs/python.md, "Tensors and
        keys"). With a store, a name claims the first free slot from
        ``crc32(name) % SG_MAX_TENSORS`` on (from 0 in a job of one dtype,
        whose tensors are declared), ``tensor_id=`` exactly its slot; slots
        never change owner, so every rank walks to the same id. The name's
        element count and dtype are recorded at its first claim: another
        size or dtype on any rank raises SigmaConfigError there. The store is
        asked once per name."""
        with self._id_lock:
            known = self._names.get(name)
            if known is not None:
                tid, n, dt = known
                if (n, dt) != (nelem, dtype) or (tensor_id is not None and tensor_id != tid):
                    raise SigmaConfigError(
                        f"sigma: tensor '{name}' was first pushed as {n} {dt} elements "
                        f"(id {tid}), now as {nelem} {dtype}" +
                        (f" (id {tensor_id})" if tensor_id is not None else "") +
                        ": give each differently shaped tensor its own name")
                return tid
            if tensor_id is not None and (isinstance(tensor_id, bool) or
                                          not isinstance(tensor_id, int) or
                                          not 0 <= tensor_id < _lib.SG_MAX_TENSORS):
                raise SigmaConfigError(f"sigma: tensor id {tensor_id!r}: must be 0.."
                                       f"{_lib.SG_MAX_TENSORS - 1}")
            if self._store is not None:
                tid = self._claim(name, tensor_id)
                self._record(name, tid, nelem, dtype)
            else:
                tid = self._local_id(name, tensor_id)
            self._names[name] = (tid, nelem, dtype)
            self._owners[tid] = name
            return tid

    def _first_slot(self, name: str) -> int:
        # an open job (dtype any) takes any id: spread names by their hash; a job of
        # one dtype was made with declared tensors, ids 0..k-1: from 0
        if self.job.dtype != "any":
            return 0
        return zlib.crc32(name.encode()) % _lib.SG_MAX_TENSORS

    def _taken(self, tid: int, name: str) -> SigmaConfigError:
        return SigmaConfigError(f"sigma: tensor id {tid} belongs to '{self._owners[tid]}': "
                                f"give '{name}' another id (or none: names get ids of their "
                                "own)")

    def _local_id(self, name: str, tensor_id: Optional[int]) -> int:
        """An id without a store: one rank alone probes freely; several ranks
        take the name's hash slot (a collision raises: without a store, ranks
        could not agree on where to probe), or, in a job of declared tensors,
        the next id in the order names are first used."""
        if tensor_id is not None:
            if tensor_id in self._owners:
                raise self._taken(tensor_id, name)
            return tensor_id
        first = self._first_slot(name)
        if self.job.workers == 1 or self.job.dtype != "any":
            for i in range(_lib.SG_MAX_TENSORS):
                tid = (first + i) % _lib.SG_MAX_TENSORS
                if tid not in self._owners:
                    return tid
            raise SigmaConfigError(f"sigma: tensor '{name}': all {_lib.SG_MAX_TENSORS} tensor "
                                   "ids are taken")
        if first in self._owners:
            raise SigmaConfigError(
                f"sigma: tensors '{self._owners[first]}' and '{name}' hash to the same id "
                f"({first}), and this {self.job.workers}-rank session has no store to agree "
                "on another through: give one of them tensor_id=, rename it, or pass store= "
                "(sigma.torch.init() passes its own)")
        return first

    def _claim(self, name: str, tensor_id: Optional[int]) -> int:
        """Claim the name's slot in the store: the first slot of its probe
        sequence that is free or already the name's (LockedStore.claim)."""
        first = self._first_slot(name) if tensor_id is None else tensor_id
        for i in range(_lib.SG_MAX_TENSORS):
            tid = (first + i) % _lib.SG_MAX_TENSORS
            known = self._owners.get(tid)  # the owner seen by an earlier probe here
            if known == name:
                return tid
            if known is not None:  # another name's: no need to ask
                if tensor_id is not None:
                    raise self._taken(tid, name)
                continue
            owner = self._store.claim(f"{self._prefix}/id/{tid}", name)
            if owner == name:
                return tid
            self._owners[tid] = owner
            if tensor_id is not None:
                raise self._taken(tid, name)
        raise SigmaConfigError(f"sigma: tensor '{name}': all {_lib.SG_MAX_TENSORS} tensor ids "
                               "are taken")

    def _record(self, name: str, tid: int, nelem: int, dtype: str) -> None:
        """Record the name's id, size and dtype at its first claim, or check
        them against the first rank's record."""
        mine = f"{tid} {nelem} {dtype} {self.rank}"
        rec = self._store.claim(f"{self._prefix}/name/{name}", mine)
        if rec == mine:
            return
        first_tid, first_n, first_dt, first_rank = rec.split(" ")
        if (first_n, first_dt) != (str(nelem), dtype):
            err = SigmaConfigError(
                f"sigma: tensor '{name}' is {nelem} {dtype} elements on rank {self.rank}, but "
                f"rank {first_rank} first pushed it as {first_n} {first_dt}: a name must "
                "have the same size and dtype on every rank (give each differently shaped "
                "tensor its own name)")
            self.post_failure(f"rank {self.rank} failed: {err}")
            raise err
        if first_tid != str(tid):
            err = SigmaConfigError(
                f"sigma: tensor '{name}' has id {tid} on rank {self.rank}, but rank "
                f"{first_rank} gave it id {first_tid}: give it the same tensor_id= on every "
                "rank, or none on any")
            self.post_failure(f"rank {self.rank} failed: {err}")
            raise err

    def post_failure(self, reason: str) -> None:
        """Tell every rank's session, through the store, why this rank cannot
        go on (the first reason posted stays): their progress threads look
        every FAILED_CHECK_S while operations are in flight, and fail them
        with it."""
        if self._store is None:
            return
        try:
            self._store.claim(f"{self._prefix}/failed", reason)
            self._store.add(self._failures_key, 1)
        except Exception:  # noqa: BLE001 - the store went away: the others time out
            pass

    def _posted_failure(self) -> Optional[str]:
        """The reason a rank posted, or None (also when another thread holds
        the store: the next look sees it)."""
        try:
            if not self._store.try_add(self._failures_key, 0):
                return None
            return _text(self._store.get(f"{self._prefix}/failed"))
        except Exception:  # noqa: BLE001 - the store went away: the bounds still apply
            return None

    # ---- submitting ---------------------------------------------------------

    def submit(self, name: str, dtype: str, nelem: int, src: int, dst: int, keep: Any,
               tensor_id: Optional[int] = None) -> Handle:
        """Start summing ``nelem`` elements of ``dtype`` at address ``src`` over
        the N ranks into ``dst`` (src == dst is fine). ``keep`` is held until
        done (the objects that own the memory). Returns at once."""
        if dtype not in _lib.DTYPES:
            raise SigmaConfigError(f"sigma: dtype {dtype!r}: one of {', '.join(_lib.DTYPES)}")
        if not isinstance(nelem, int) or nelem <= 0:
            raise SigmaConfigError(f"sigma: '{name}': {nelem!r} elements: want at least one")
        if not src or not dst:
            raise SigmaConfigError(f"sigma: '{name}': NULL buffer")
        tid = self.tensor_id(name, nelem, dtype, tensor_id)
        h = Handle(self, name, tid, keep)
        op = _Op(h, tid, name, dtype, nelem, src, dst)
        with self._cv:
            if self._failed is not None:
                err = self._failed
            elif self._closing:
                err = SigmaError(f"sigma: push_pull of '{name}': the session is closed")
            else:
                self._queue.append(op)
                self._cv.notify()
                return h
        h._complete(err)
        return h

    def push_pull(self, buf: Any, out: Any = None, *, name: str,
                  dtype: Optional[str] = None, tensor_id: Optional[int] = None) -> Handle:
        """Sum a writable, C-contiguous buffer (``array.array``, ``bytearray``,
        a numpy array...) over the ranks into ``out`` (default: in place).
        ``dtype`` overrides the buffer's format (e.g. ``bf16`` over ``'H'``)."""
        src, nbytes, fmt_dtype, keep_in = _buffer(buf, "buf")
        dst, out_bytes, _, keep_out = (src, nbytes, fmt_dtype, keep_in) if out is None else \
            _buffer(out, "out")
        dt = dtype or fmt_dtype
        if dt is None:
            raise SigmaConfigError("sigma: cannot tell the buffer's element type: give dtype=")
        size = _lib.DTYPE_SIZES.get(dt)
        if size is None:
            raise SigmaConfigError(f"sigma: dtype {dt!r}: one of {', '.join(_lib.DTYPES)}")
        if nbytes % size or out_bytes != nbytes:
            raise SigmaConfigError(f"sigma: '{name}': {nbytes} bytes in, {out_bytes} out, "
                                   f"{dt} elements of {size} bytes")
        return self.submit(name, dt, nbytes // size, src, dst, (buf, out, keep_in, keep_out),
                           tensor_id)

    # ---- the progress thread ----------------------------------------------

    def _on_done(self, arg: Optional[int], t: Optional[int], status: int) -> None:
        # Runs inside sigma_poll() on the progress thread: record only.
        msg = ""
        failure = None
        if status < 0:
            raw = self._last_error()
            msg = raw.decode(errors="replace") if raw else ""
            failure = self._failure()
        self._completed.append(((arg or 1) - 1, status, msg, failure))

    def _failure(self) -> Optional[dict]:
        """sigma_last_failure() as a dict (kind, node, key, chunk, round, missing_ranks)."""
        f = _lib.SigmaFailure()
        if self._el is not None:
            return None  # the elastic instance's message names the node and the epoch
        if self._lib.sigma_last_failure(self._s, ctypes.byref(f)) < 0:
            return None
        nodes = self.job.nodes
        node = None
        if 0 <= f.node < len(nodes):
            n = nodes[f.node]
            node = f"{n.name} ({n.addr}:{n.port})"
        return {"kind": f.kind, "node": node, "key": f.key, "chunk": f.chunk,
                "round": f.round, "waited_s": f.waited_us / 1e6,
                "missing_ranks": [r for r in range(64) if f.missing >> r & 1]}

    def _last_error(self) -> bytes:
        if self._el is not None:
            return self._el.sigma_elastic_last_error(self._s)
        return self._lib.sigma_last_error(self._s)

    def _register(self, op: _Op) -> Any:
        """The C tensor of op's id (elastic: its id), or None with errno set."""
        if self._el is not None:
            rc = self._el.sigma_elastic_tensor(self._s, op.name.encode()[:63], op.tid,
                                               _lib.DTYPES[op.dtype], op.nelem, 0)
            if rc < 0:
                ctypes.set_errno(-rc)
            return op.tid if rc == 0 else None
        return self._lib.sigma_tensor_register(self._s, op.name.encode()[:127], op.tid,
                                               _lib.DTYPES[op.dtype], op.nelem, 0)

    def _start(self, op: _Op) -> None:
        t = self._tensors.get(op.tid)
        if t is None:
            ptr = self._register(op)
            if ptr is None or ptr is False or (self._el is None and not ptr):
                e = ctypes.get_errno()
                why = {errno.EINVAL: "the job does not take it (another dtype, or a size the "
                                     "partition or chunk size cannot cut; libsigma says why on "
                                     "stderr)",
                       errno.E2BIG: "too many partitions (more than 65536)",
                       errno.EEXIST: "the id is in use"}.get(e, os.strerror(e))
                op.handle._complete(SigmaConfigError(
                    f"sigma: cannot register tensor '{op.name}' ({op.nelem} {op.dtype}, id "
                    f"{op.tid}) in job {self.job.id}: {why}", e))
                return
            t = ctypes.c_void_p(ptr) if self._el is None else ptr
            self._tensors[op.tid] = t
        if self._el is not None:
            rc = self._el.sigma_elastic_push_pull(self._s, op.tid, op.src, op.dst)
        else:
            rc = self._lib.sigma_push_pull(t, op.src, op.dst, self._cb, op.tid + 1)
        if rc < 0:
            msg = self._last_error().decode(errors="replace") if self._el is not None else ""
            op.handle._complete(status_error(rc, msg, f"sigma: push_pull of '{op.name}'"))
            return
        self._inflight[op.tid] = op

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as e:  # noqa: BLE001 - surfaced to every waiter
            self._thread_error = e
            self._fail_all(SigmaError(f"sigma: the progress thread died: {e!r}"))
        finally:
            self._close_c()
            self._fail_all(SigmaError("sigma: the session is closed"))  # anything left

    def _loop(self) -> None:
        lib, s = self._lib, self._s
        last_move = time.monotonic()
        last_check = last_store = last_move
        mark = -1
        cpu0 = time.thread_time()
        while True:
            with self._cv:
                while not self._queue and not self._inflight and not self._closing:
                    self._cv.wait()
                    last_move = time.monotonic()
                if self._closing and (self._failed is not None or
                                      (not self._inflight and not self._queue)):
                    return
                batch, self._queue = self._queue, []
            t_start = time.perf_counter()
            for op in batch:
                if op.tid in self._inflight:
                    self._waiting.setdefault(op.tid, collections.deque()).append(op)
                else:
                    self._start(op)
            if not self._inflight:
                continue
            t_poll = time.perf_counter()
            rc = lib.sigma_poll(s, self._poll_us) if self._el is None else self._el_poll()
            self.poll_s += time.perf_counter() - t_poll
            self.loops += 1
            if rc < 0:
                self._poison(status_error(rc, "", "sigma: the session's transport failed"))
                return
            if self._completed:
                last_move = time.monotonic()
                done, self._completed = self._completed, []
                first_error = None
                for tid, status, msg, failure in done:
                    op = self._inflight.pop(tid, None)
                    if op is None:
                        continue
                    if status < 0:
                        err = status_error(status, msg, f"sigma: push_pull of '{op.name}' "
                                                        f"(rank {self.rank}, job {self.job.id})",
                                           failure)
                        op.handle._complete(err)
                        first_error = first_error or err
                    else:
                        op.handle._complete(None)
                    nxt = self._waiting.get(tid)
                    if nxt and first_error is None:
                        self._start(nxt.popleft())
                if first_error is not None:
                    self._poison(first_error)
                    return
            self.active_s += time.perf_counter() - t_start
            self.cpu_s = time.thread_time() - cpu0
            now = time.monotonic()
            if self._store is not None and now - last_store > FAILED_CHECK_S:
                last_store = now
                why = self._posted_failure()
                if why is not None:
                    names = ", ".join(sorted(op.name for op in self._inflight.values())[:8])
                    self._poison(SigmaError(f"sigma: push_pull of {names} (rank {self.rank}, "
                                            f"job {self.job.id}): {why}"))
                    return
            if now - last_check > 0.1:
                last_check = now
                st = self.stats()
                moved = st.rx_results + st.ops_done + st.ops_failed
                if moved != mark:
                    mark, last_move = moved, now
                elif now - last_move > self.stall_bound:
                    names = ", ".join(sorted(op.name for op in self._inflight.values())[:8])
                    self._poison(SigmaTimeoutError(
                        f"sigma: no operation moved for {now - last_move:.1f} s (watchdog: "
                        f"ranks_wait {self.ranks_wait:g} s plus twice the "
                        f"{self.silent_bound:.2f} s node-silent bound) with {names} in "
                        f"flight (rank {self.rank}, job {self.job.id})", errno.ETIMEDOUT))
                    return

    def _el_poll(self) -> int:
        """An elastic instance's progress: its sessions polled, finished ops recorded."""
        rc = self._el.sigma_elastic_poll(self._s, self._poll_us)
        for tid in list(self._inflight):
            st = self._el.sigma_elastic_test(self._s, tid)
            if st != -errno.EINPROGRESS:
                msg = self._last_error().decode(errors="replace") if st < 0 else ""
                self._completed.append((tid, st, msg, None))
        return rc

    def elastic_status(self) -> Optional[dict]:
        """An elastic session's state (epoch, nodes, sessions, proposals, confirms,
        aborts, switches, waits, last_abort); None for a plain one."""
        if self._el is None or not self._s:
            return None
        st = _lib.ElasticStatus()
        self._el.sigma_elastic_status(self._s, ctypes.byref(st))
        out = {n: getattr(st, n) for n, _ in st._fields_ if n != "last_abort"}
        out["last_abort"] = st.last_abort.decode(errors="replace")
        return out

    def _poison(self, err: SigmaError) -> None:
        """The first failure ends the session: fail everything after it."""
        with self._cv:
            if self._failed is None:
                self._failed = copy.copy(err)  # its class and parts (node, missing ranks)
                self._failed.args = (f"{err} [this rank's session is closed after this "
                                     "failure: call shutdown() and init() again]",)
        self._fail_all(self._failed)

    def _fail_all(self, err: SigmaError) -> None:
        with self._cv:
            if self._failed is None:
                self._failed = err
            ops = list(self._inflight.values()) + self._queue
            for q in self._waiting.values():
                ops.extend(q)
            self._inflight, self._queue, self._waiting = {}, [], {}
            self._closing = True
        for op in ops:
            op.handle._complete(err)

    def _close_c(self) -> None:
        with self._cv:
            s, self._s = self._s, None
        if s and self._el is not None:
            self._el.sigma_elastic_close(s)
        elif s:
            self._lib.sigma_close(s)  # abandons what is in flight: no more writes
        if self._watch is not None:
            self._watch.stop()  # after the session: it asked the watch until now

    def _check_alive(self) -> None:
        if not self._thread.is_alive() and self._thread_error is not None:
            raise SigmaError(f"sigma: the progress thread died: {self._thread_error!r}")

    # ---- the rest -----------------------------------------------------------

    @property
    def failed(self) -> Optional[SigmaError]:
        """The failure that closed the session, or None."""
        return self._failed

    def profile(self) -> dict:
        """Where the progress thread's time went (for benchmarks): iterations
        with operations in flight, their wall time, the part inside
        sigma_poll(), and the thread's CPU time, in seconds."""
        return {"loops": self.loops, "active_s": self.active_s, "poll_s": self.poll_s,
                "python_s": self.active_s - self.poll_s, "cpu_s": self.cpu_s}

    def stats(self) -> _lib.SigmaStats:
        """libsigma's counters (a snapshot; call from any thread)."""
        st = _lib.SigmaStats()
        s = self._s
        if s and self._el is not None:
            self._el.sigma_elastic_get_stats(s, ctypes.byref(st))
        elif s:
            self._lib.sigma_get_stats(s, ctypes.byref(st))
        return st

    def close(self, timeout: Optional[float] = None) -> None:
        """Let what is in flight finish (within its bounds, or ``timeout`` s),
        then stop the thread and close the C session. Idempotent."""
        with self._cv:
            self._closing = True
            self._cv.notify()
        bound = self.stall_bound + 1.0 if timeout is None else timeout
        self._thread.join(bound)
        if self._thread.is_alive():
            self._fail_all(SigmaTimeoutError(
                f"sigma: close: operations still in flight after {bound:g} s", errno.ETIMEDOUT))
            self._thread.join(1.0)

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _text(value: Any) -> str:
    """A store's value as text (c10d stores return bytes)."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _buffer(obj: Any, what: str) -> tuple[int, int, Optional[str], Any]:
    """(address, bytes, dtype from the format or None, the ctypes view to keep)."""
    try:
        mv = memoryview(obj)
    except TypeError:
        raise SigmaConfigError(f"sigma: {what}: {type(obj).__name__} has no buffer "
                               "(give a writable contiguous buffer, or a torch tensor to "
                               "sigma.torch)") from None
    if mv.readonly:
        raise SigmaConfigError(f"sigma: {what}: the buffer is read-only (the sum is written "
                               "into it)")
    if not mv.c_contiguous:
        raise SigmaConfigError(f"sigma: {what}: the buffer is not C-contiguous")
    if mv.nbytes == 0:
        raise SigmaConfigError(f"sigma: {what}: the buffer is empty")
    fmt = mv.format.lstrip("@=<")
    dt = _FORMATS.get(fmt)
    if dt is None and fmt in ("i", "l", "q", "h", "H", "I", "L", "Q"):
        dt = _INT_FORMATS.get(mv.itemsize) if fmt in ("i", "l", "q") else None
    view = (ctypes.c_char * mv.nbytes).from_buffer(mv.cast("B"))
    return ctypes.addressof(view), mv.nbytes, dt, view

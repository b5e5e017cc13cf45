# SPDX-License-Identifier: BSD-3-Clause
"""Local aggregation: the ranks of one machine sum among themselves, and each
machine pushes once (the communication service of BytePS), through
libsigma's ``sigma_local.h`` (client/sigma_local.c): one implementation for
C and Python clients.

A machine of L ranks gets one shared-memory segment (POSIX shm, under
/dev/shm) per job. For each tensor, every local rank copies its input into
its own slot of the segment; local rank j then sums share j of the tensor
(elements [j n / L, (j + 1) n / L)) over the L slots, in local-rank order, so
the machine's sum is bitwise the same run after run; it pushes that share as
rank m (the machine's index) of *sub-job j*, a job on the nodes whose N is
the number of machines, and the node's sum lands back in the segment. Once
every share is summed, each local rank copies the whole result out.

L sub-jobs rather than one: a node sends a round's RESULT to the address its
rank last pushed from (docs/protocol.md, "Reply addresses"). L processes
pushing as one rank of one job would get each other's results; as rank m of
sub-job j each has its own.

Here: :func:`plan` decides whether a rank aggregates locally, and
:class:`LocalSession` opens this local rank's session of its sub-job
(a :class:`~sigma.session.Session`, whose progress thread then stays idle),
hands it to ``sigma_local_open()``, and keeps the push_pulls submitted in
flight on a thread of its own (``sigma_local_start()``, then
``sigma_local_poll()`` with the GIL released, ``sigma_local_test()``), in any
order on each local rank, one at a time per tensor. The C context makes
and finds the segment, waits on a futex in it with a bound on every wait,
tells a local rank that died (-EPIPE, within 0.2 s) from one that is stuck
(-ETIMEDOUT after ``ranks_wait``), and leaves nothing in /dev/shm however the
processes end. docs/python.md, "Local aggregation"; docs/client.md, "Several
ranks on one machine".
"""

from __future__ import annotations

import collections
import ctypes
import errno
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Deque, Optional

from . import _lib
from .errors import SigmaConfigError, SigmaError, SigmaTimeoutError, status_error
from .job import Job
from .session import FAILED_CHECK_S, Handle, Session

SHM_DIR = "/dev/shm"


@dataclass(frozen=True)
class Plan:
    """This rank's place: local rank ``local_rank`` of ``local_size`` on
    machine ``machine`` of ``machines``."""
    machines: int
    machine: int
    local_rank: int
    local_size: int


def plan(rank: int, size: int, local_rank: Optional[int], local_size: Optional[int],
         mode: str, declared: bool) -> Optional[Plan]:
    """Whether and how this rank aggregates locally (None: it pushes directly).

    On when the launcher says there are more than one rank on this machine,
    unless SIGMA_LOCAL_AGGREGATION=0, the job is async (its ranks are not in step) or its
    tensors are declared (init(tensors=)). Bad local variables raise."""
    if local_size is None or local_size <= 1:
        return None
    how = os.environ.get("SIGMA_LOCAL_AGGREGATION", "")
    if how not in ("", "0", "1"):
        raise SigmaConfigError(f"sigma.torch.init: SIGMA_LOCAL_AGGREGATION={how!r}: want 0 "
                               "(every rank pushes) or 1 (local aggregation, the default)")
    if how == "0" or mode == "async" or declared:
        return None
    if local_size > _lib.SIGMA_LOCAL_MAX:
        raise SigmaConfigError(f"sigma.torch.init: {local_size} ranks on one machine: local "
                               "aggregation takes at most 64 (or set SIGMA_LOCAL_AGGREGATION=0)")
    if local_rank is None or not 0 <= local_rank < local_size:
        raise SigmaConfigError(f"sigma.torch.init: local rank {local_rank!r} of {local_size}: "
                               f"want 0..{local_size - 1} (LOCAL_RANK and LOCAL_WORLD_SIZE, "
                               "or the launcher's)")
    if size % local_size or rank % local_size != local_rank:
        raise SigmaConfigError(
            f"sigma.torch.init: rank {rank} of {size} is local rank {local_rank} of "
            f"{local_size}: local aggregation wants every machine to have {local_size} "
            f"ranks, machine m's being ranks m x {local_size} + local rank (as torchrun "
            "numbers them); fix the launcher's variables, or set SIGMA_LOCAL_AGGREGATION=0")
    return Plan(size // local_size, rank // local_size, local_rank, local_size)


def create_jobs(create: Callable[[], Job], count: int,
                destroy: Callable[[int], None]) -> list[Job]:
    """``count`` jobs made by ``create()``; if one fails, those made are destroyed."""
    jobs: list[Job] = []
    try:
        for _ in range(count):
            jobs.append(create())
    except BaseException:
        for j in jobs:
            try:
                destroy(j.id)
            except SigmaError:
                pass
        raise
    return jobs


class _LocalOp:
    __slots__ = ("handle", "name", "tid", "dtype", "nelem", "src", "dst")

    def __init__(self, handle: Handle, name: str, tid: int, dtype: str, nelem: int, src: int,
                 dst: int) -> None:
        self.handle, self.name, self.tid, self.dtype = handle, name, tid, dtype
        self.nelem, self.src, self.dst = nelem, src, dst


class LocalSession:
    """A rank's session when its machine aggregates locally: the same
    ``submit``/``tensor_id``/``stats``/``close`` as :class:`~sigma.session.
    Session`, over libsigma's local context (``sigma_local_open()``) and this
    local rank's session of its sub-job (``inner``)."""

    def __init__(self, p: Plan, jobs: list[Job], store: Any, prefix: str, timeout: float,
                 meet: Optional[Callable[[], None]] = None, **session_kw: Any) -> None:
        """``meet``: called once the inner session is open, before the local
        context waits for the other local ranks (sigma.torch: every rank of the
        job opened, or one's failure raised at once, rather than after the
        context's open timeout)."""
        self.plan = p
        self.jobs = jobs
        self.job = jobs[p.local_rank]
        self.rank = p.machine * p.local_size + p.local_rank
        self._lib = _lib.libsigma()
        # the sub-job's session; only its C session is used (the local context drives it)
        self.inner = Session(self.job, p.machine, store=store, store_prefix=prefix,
                             **session_kw)
        self.ranks_wait = self.inner.ranks_wait
        self.silent_bound = self.inner.silent_bound
        # a local rank pushing waits for its sub-job, within the inner session's bounds
        self.stall_bound = self.inner.stall_bound + 2.0
        self.transport = self.inner.transport
        if meet is not None:
            try:
                meet()
            except BaseException:
                self.inner.close(timeout=1.0)
                raise
        conf = _lib.SigmaLocalConfPadded()
        c = conf.conf
        c.job, c.key = jobs[0].id, jobs[0].token  # sub-job 0's: the same on every local rank
        c.machine, c.local_rank, c.local_size = p.machine, p.local_rank, p.local_size
        c.open_timeout_ms = max(1, min(int(timeout * 1000), 0xFFFFFFFF))
        c.wait_us = max(1, min(int(self.ranks_wait * 1e6), 0xFFFFFFFF))
        c.share_wait_us = max(1, min(int(self.stall_bound * 1e6), 0xFFFFFFFF))
        err = ctypes.create_string_buffer(_lib.SIGMA_ERR_LEN)
        lc = self._lib.sigma_local_open(ctypes.byref(conf), self.inner._s, err, len(err))
        if not lc:
            e = ctypes.get_errno()
            self.inner.close(timeout=1.0)
            raise _open_error(e, err.value.decode(errors="replace"), p)
        self._l: Optional[ctypes.c_void_p] = ctypes.c_void_p(lc)
        self._tensors: dict[int, ctypes.c_void_p] = {}  # id -> struct sigma_local_tensor
        self._poll_us = max(1, int(session_kw.get("poll_us", 200)))
        self._cv = threading.Condition()
        self._queue: Deque[_LocalOp] = collections.deque()
        # the thread's: ops in the C context by id, and the next ones of a busy id
        self._inflight: dict[int, tuple[_LocalOp, ctypes.c_void_p]] = {}
        self._waiting: dict[int, Deque[_LocalOp]] = {}
        self._closing = False
        self._failed: Optional[SigmaError] = None
        self._thread_error: Optional[BaseException] = None
        self._callback_errors: list[BaseException] = []
        self.ops = 0        # push_pulls done
        self.loops = 0      # sigma_local_poll() calls
        self.c_s = 0.0      # wall time inside sigma_local_poll() (GIL released)
        self.cpu_s = 0.0    # the thread's CPU time
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"sigma-local-m{p.machine}l{p.local_rank}")
        self._thread.start()

    # ---- tensors ------------------------------------------------------------

    def tensor_id(self, name: str, nelem: int, dtype: str,
                  tensor_id: Optional[int] = None) -> int:
        """The tensor's id: the same on every rank of the job (the store's
        agreement, :meth:`sigma.session.Session.tensor_id`), in the machine's
        segment and, for this local rank's share, in its sub-job."""
        return self.inner.tensor_id(name, nelem, dtype, tensor_id)

    def submit(self, name: str, dtype: str, nelem: int, src: int, dst: int, keep: Any,
               tensor_id: Optional[int] = None) -> Handle:
        """Start summing ``nelem`` elements at ``src`` over every rank of the
        job into ``dst``; returns a Handle at once (sigma.session.Session.submit)."""
        if dtype not in _lib.DTYPES:
            raise SigmaConfigError(f"sigma: dtype {dtype!r}: one of {', '.join(_lib.DTYPES)}")
        if not isinstance(nelem, int) or nelem <= 0:
            raise SigmaConfigError(f"sigma: '{name}': {nelem!r} elements: want at least one")
        if not src or not dst:
            raise SigmaConfigError(f"sigma: '{name}': NULL buffer")
        tid = self.tensor_id(name, nelem, dtype, tensor_id)
        h = Handle(self, name, tid, keep)  # type: ignore[arg-type]
        with self._cv:
            err = self._failed
            if err is None and self._closing:
                err = SigmaError(f"sigma: push_pull of '{name}': the session is closed")
            if err is None:
                self._queue.append(_LocalOp(h, name, tid, dtype, nelem, src, dst))
                self._cv.notify()
                return h
        h._complete(err)
        return h

    # ---- the local thread: the C context's only caller ----------------------

    def _run(self) -> None:
        cpu0 = time.thread_time()
        try:
            self._loop(cpu0)
        except BaseException as e:  # noqa: BLE001 - surfaced to every waiter
            self._thread_error = e
            self._fail(SigmaError(f"sigma: the local aggregation thread died: {e!r}"))

    def _loop(self, cpu0: float) -> None:
        lib = self._lib
        last_store = time.monotonic()
        while True:
            with self._cv:
                while not self._queue and not self._inflight and not self._closing:
                    self._cv.wait()
                if self._failed is not None or \
                        (self._closing and not self._queue and not self._inflight):
                    return
                batch = list(self._queue)
                self._queue.clear()
            for op in batch:
                if op.tid in self._inflight:
                    with self._cv:
                        self._waiting.setdefault(op.tid, collections.deque()).append(op)
                elif not self._begin(op):
                    return
            if not self._inflight:
                continue
            t0 = time.perf_counter()
            rc = lib.sigma_local_poll(self._l, self._poll_us)
            self.c_s += time.perf_counter() - t0
            self.loops += 1
            self.cpu_s = time.thread_time() - cpu0
            if rc < 0:
                self._fail(self._error(rc, next(iter(self._inflight.values()))[0]))
                return
            now = time.monotonic()
            if self.inner._store is not None and now - last_store > FAILED_CHECK_S:
                # a rank of another machine that failed posted why (Session.post_failure)
                last_store = now
                why = self.inner._posted_failure()
                if why is not None:
                    names = ", ".join(sorted(o.name for o, _ in self._inflight.values())[:8])
                    self._fail(SigmaError(f"sigma: push_pull of {names} (rank {self.rank}, "
                                          f"job {self.job.id}): {why}"))
                    return
            if rc == 0:
                continue
            for tid, (op, t) in list(self._inflight.items()):
                st = lib.sigma_local_test(t)
                if st == -errno.EINPROGRESS:
                    continue
                if st < 0:
                    self._fail(self._error(st, op))
                    return
                with self._cv:
                    self._inflight.pop(tid, None)
                    nxt = self._waiting.get(tid)
                    following = nxt.popleft() if nxt else None
                self.ops += 1
                op.handle._complete(None)
                if following is not None and not self._begin(following):
                    return

    def _begin(self, op: _LocalOp) -> bool:
        """Start the op in the C context; False once the session failed."""
        t = self._tensor(op)
        if t is None:
            return False
        rc = self._lib.sigma_local_start(t, op.src, op.dst)
        if rc < 0:
            self._fail(self._error(rc, op), op)
            return False
        with self._cv:
            self._inflight[op.tid] = (op, t)
        return True

    def _tensor(self, op: _LocalOp) -> Optional[ctypes.c_void_p]:
        """The op's tensor in the local context, registered at its first push_pull
        (here: the session belongs to this thread); None once failed."""
        t = self._tensors.get(op.tid)
        if t is not None:
            return t
        ptr = self._lib.sigma_local_tensor_register(self._l, op.name.encode()[:63], op.tid,
                                                    _lib.DTYPES[op.dtype], op.nelem, 0)
        if not ptr:
            e = ctypes.get_errno()
            why = self._last_error() or os.strerror(e)
            p = self.plan
            cls = SigmaConfigError if e in (errno.EINVAL, errno.ENOSPC, errno.EEXIST) \
                else SigmaError
            self._fail(cls(f"sigma: cannot register tensor '{op.name}' ({op.nelem} {op.dtype}, "
                           f"id {op.tid}) for local aggregation on local rank {p.local_rank} "
                           f"of machine {p.machine}: {why}" +
                           (f" (make {SHM_DIR} larger, or set SIGMA_LOCAL_AGGREGATION=0)"
                            if e == errno.ENOSPC else ""), e), op)
            return None
        t = ctypes.c_void_p(ptr)
        self._tensors[op.tid] = t
        return t

    def _last_error(self) -> str:
        raw = self._lib.sigma_local_last_error(self._l) if self._l else b""
        return raw.decode(errors="replace") if raw else ""

    def _error(self, rc: int, op: _LocalOp) -> SigmaError:
        """sigma_local_poll()'s or _test()'s status as sigma's exception: -EPIPE (a local
        rank died, closed or failed) a SigmaError, -ETIMEDOUT a SigmaTimeoutError
        (of the session's kind when this rank's share timed out at the nodes)."""
        msg = self._last_error()
        failure = None
        if rc == -errno.ETIMEDOUT and "share " in msg:
            failure = self.inner._failure()  # this thread drives the session: ours to ask
            if failure is not None and failure["kind"] == _lib.FAIL_NONE:
                failure = None
        return status_error(rc, msg or f"push_pull of '{op.name}'",
                            f"sigma (rank {self.rank}, job {self.job.id})", failure)

    def _fail(self, err: SigmaError, op: Optional[_LocalOp] = None) -> None:
        """The first failure ends the session on this rank; it is posted where
        the job's other ranks see it (the store), and the C context wrote it
        into the segment for the other local ranks."""
        with self._cv:
            if self._failed is not None:
                return
            self._failed = err
            ops = ([op] if op is not None else []) + [o for o, _ in self._inflight.values()]
            for q in self._waiting.values():
                ops.extend(q)
            ops.extend(self._queue)
            self._queue.clear()
            self._inflight, self._waiting = {}, {}
            self._closing = True
            self._cv.notify_all()
        p = self.plan
        why = str(err)
        if f"machine {p.machine}" not in why:
            why = f"{why} [local rank {p.local_rank} of machine {p.machine}]"
        self.inner.post_failure(why)
        for o in ops:
            o.handle._complete(err)

    def _check_alive(self) -> None:
        if not self._thread.is_alive() and self._thread_error is not None:
            raise SigmaError(f"sigma: the local aggregation thread died: "
                             f"{self._thread_error!r}")

    # ---- the rest ---------------------------------------------------------

    @property
    def failed(self) -> Optional[SigmaError]:
        return self._failed

    def post_failure(self, reason: str) -> None:
        self.inner.post_failure(reason)

    def stats(self) -> Any:
        """The inner session's libsigma counters (this local rank's share)."""
        return self.inner.stats()

    def profile(self) -> dict:
        """Where the local thread's time went: its sigma_local_poll() calls, their
        wall time (the GIL released), the thread's CPU time, push_pulls done."""
        return {"loops": self.loops, "active_s": self.c_s, "poll_s": self.c_s,
                "python_s": 0.0, "cpu_s": self.cpu_s, "ops": self.ops}

    def elastic_status(self) -> Optional[dict]:
        return None  # local aggregation takes no elastic job

    def close(self, timeout: Optional[float] = None) -> None:
        """Let what is queued finish (within its bounds, or ``timeout`` s), then
        close the local context (the other local ranks still waiting for this
        one fail with -EPIPE) and the inner session. Idempotent."""
        with self._cv:
            self._closing = True
            self._cv.notify_all()
        bound = self.stall_bound + 1.0 if timeout is None else timeout
        self._thread.join(bound)
        if self._thread.is_alive():
            self._fail(SigmaTimeoutError(f"sigma: close: operations still in flight after "
                                         f"{bound:g} s", errno.ETIMEDOUT))
            self._thread.join(1.0)
        if self._thread.is_alive():
            # still inside sigma_local_poll() (its own bounds end it): the context
            # and the session it drives are left to the process's exit, never freed
            # under it
            return
        lc, self._l = self._l, None
        if lc:
            self._lib.sigma_local_close(lc)
            self.inner.close(timeout=timeout)


def _open_error(e: int, msg: str, p: Plan) -> SigmaError:
    """sigma_local_open()'s failure as sigma's exception, with the fix."""
    where = f"local rank {p.local_rank} of machine {p.machine}"
    msg = msg or os.strerror(e)
    if e == errno.EINVAL and "local size" in msg:
        return SigmaConfigError(f"sigma.torch.init: {msg}: every rank of a machine needs the "
                                "same LOCAL_WORLD_SIZE (or the launcher's local size)", e)
    if e == errno.ETIMEDOUT:
        return SigmaTimeoutError(f"sigma.torch.init: {where}: {msg} (are the ranks that the "
                                 "launcher's variables put on one machine really on one "
                                 "machine, one /dev/shm?)", e)
    if e == errno.EPIPE:
        return SigmaError(f"sigma.torch.init: {where}: {msg}", e)
    return SigmaConfigError(f"sigma.torch.init: {where}: local aggregation: {msg} (is "
                            f"{SHM_DIR} mounted, a writable tmpfs? SIGMA_LOCAL_AGGREGATION=0: "
                            "every rank pushes)", e)

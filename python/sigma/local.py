# SPDX-License-Identifier: BSD-3-Clause
"""Local aggregation: the ranks of one machine sum among themselves, and each
machine pushes once (the communication service of BytePS).

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

Synchronisation goes through counters in the segment, one writer each: local
rank j's ``arrived``, ``done`` and ``copied`` step of each tensor. Readers
poll them from one thread per process, sleeping 50 us to 1 ms between looks
(never spinning), and every wait has a bound: a local rank that died (its
pid is gone) fails the others at their next look (0.2 s), one that is stuck
after ``ranks_wait``; a rank that fails writes its reason into the segment
and the job's store, so every rank of the job fails with it.

The segment is made by local rank 0, with its pid in its name, mapped by the
others, and unlinked by the last one to map it: once the job runs, nothing is
left in /dev/shm whatever happens to the processes. A segment whose maker
died before every rank mapped it is removed by the next start on the machine.

The ordering of the counters relies on x86-64's stores being seen in program
order (TSO); on other machines, sigma.torch pushes every rank directly.
docs/python.md, "Local aggregation".
"""

from __future__ import annotations

import collections
import ctypes
import datetime
import errno
import mmap
import os
import platform
import re
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Deque, Optional

import torch

from .errors import SigmaConfigError, SigmaError, SigmaTimeoutError
from .job import Job
from .session import Handle, LockedStore, Session

SHM_DIR = "/dev/shm"
# Virtual size of a segment: sparse, its pages taken (posix_fallocate) as tensors
# claim regions, so a full /dev/shm is an error at the claim, never a SIGBUS.
CAPACITY = 256 << 30
_MAGIC = 0x314C434F4C475353  # "SSGLOCL1"
_LINE = 64                      # a counter per cache line: one writer each
_SLOTS = 8192                   # after the per-rank header slots: pid, attached, failed
_MSG = 512                      # per-rank failure message
_DATA = 1 << 16                 # the first region
_DEAD_CHECK_S = 0.2
_SLEEP_MIN, _SLEEP_MAX = 50e-6, 1e-3
_said_off = False
_TORCH_DTYPES = {"fp32": torch.float32, "fp64": torch.float64, "fp16": torch.float16,
                 "bf16": torch.bfloat16, "int32": torch.int32, "int64": torch.int64,
                 "int8": torch.int8, "uint8": torch.uint8}


def _name_prefix() -> str:
    return f"sigma-local-{os.getuid()}-"


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
    global _said_off
    if local_size is None or local_size <= 1:
        return None
    how = os.environ.get("SIGMA_LOCAL_AGGREGATION", "")
    if how not in ("", "0", "1"):
        raise SigmaConfigError(f"sigma.torch.init: SIGMA_LOCAL_AGGREGATION={how!r}: want 0 "
                               "(every rank pushes) or 1 (local aggregation, the default)")
    if how == "0" or mode == "async" or declared:
        return None
    if platform.machine() not in ("x86_64", "AMD64"):
        if not _said_off:
            _said_off = True
            print(f"sigma.torch.init: local aggregation needs x86-64's store order; on "
                  f"{platform.machine()} every rank pushes", flush=True)
        return None
    if local_size > 64:
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


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is dead too (its parent has not reaped it yet)
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def clean_stale() -> list[str]:
    """Remove this user's segments whose maker is dead (a run killed before
    every local rank mapped its segment); returns their names."""
    gone = []
    pre = _name_prefix()
    try:
        names = os.listdir(SHM_DIR)
    except OSError:
        return gone
    for n in names:
        m = re.fullmatch(re.escape(pre) + r"j\d+-m\d+-p(\d+)", n)
        if m and not _pid_alive(int(m.group(1))):
            try:
                os.unlink(os.path.join(SHM_DIR, n))
                gone.append(n)
            except OSError:
                pass
    return gone


class Segment:
    """The machine's segment of one job, mapped here."""

    def __init__(self, path: str, fd: int, local_size: int) -> None:
        self.path, self.fd, self.local_size = path, fd, local_size
        self.mm = mmap.mmap(fd, CAPACITY)
        self.bytes = torch.frombuffer(self.mm, dtype=torch.uint8)
        self.addr = self.bytes.data_ptr()
        self.q = (ctypes.c_uint64 * (CAPACITY // 8)).from_address(self.addr)

    @classmethod
    def create(cls, job_id: int, machine: int, local_size: int) -> "Segment":
        clean_stale()
        path = os.path.join(SHM_DIR, f"{_name_prefix()}j{job_id}-m{machine}-p{os.getpid()}")
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as e:
            raise SigmaConfigError(f"sigma.torch.init: cannot make the shared-memory segment "
                                   f"{path}: {e.strerror}: is {SHM_DIR} mounted (tmpfs) "
                                   "and writable? (SIGMA_LOCAL_AGGREGATION=0: every rank "
                                   "pushes)",
                                   e.errno) from None
        try:
            os.ftruncate(fd, CAPACITY)
            os.posix_fallocate(fd, 0, _DATA)
            seg = cls(path, fd, local_size)
        except BaseException as e:
            os.close(fd)
            os.unlink(path)
            if isinstance(e, OSError):
                raise SigmaConfigError(f"sigma.torch.init: shared-memory segment {path}: "
                                       f"{e.strerror}", e.errno) from None
            raise
        seg.q[1] = local_size
        seg.q[2] = machine
        seg.q[0] = _MAGIC
        return seg

    @classmethod
    def attach(cls, path: str, machine: int, local_size: int, lrank: int) -> "Segment":
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError as e:
            raise SigmaConfigError(
                f"sigma.torch.init: local rank {lrank} of machine {machine} cannot open the "
                f"segment {path} its local rank 0 made: {e.strerror}: are the ranks that "
                "the launcher's variables put on one machine really on one machine (one "
                "/dev/shm)?", e.errno) from None
        try:
            seg = cls(path, fd, local_size)
        except BaseException:
            os.close(fd)
            raise
        if seg.q[0] != _MAGIC or seg.q[1] != local_size or seg.q[2] != machine:
            got = (seg.q[1], seg.q[2])
            seg.close()
            raise SigmaConfigError(
                f"sigma.torch.init: local rank {lrank} of machine {machine} says {local_size} "
                f"local ranks, but the segment local rank 0 made says {got[0]} (machine "
                f"{got[1]}): every rank of a machine needs the same LOCAL_WORLD_SIZE")
        return seg

    # the header: slot j at _LINE * (1 + j): pid, attached, failed; message at _SLOTS + _MSG j
    def _slot(self, j: int) -> int:
        return _LINE // 8 * (1 + j)

    def set_pid(self, j: int) -> None:
        self.q[self._slot(j)] = os.getpid()
        self.q[self._slot(j) + 1] = 1

    def pid(self, j: int) -> int:
        return self.q[self._slot(j)]

    def fail(self, j: int, msg: str) -> None:
        if self.q[self._slot(j) + 2]:
            return
        raw = msg.encode()[:_MSG - 1]
        ctypes.memmove(self.addr + _SLOTS + _MSG * j, raw + b"\0", len(raw) + 1)
        self.q[self._slot(j) + 2] = 1  # after the message (x86-64: stores in order)

    def failure(self) -> Optional[tuple[int, str]]:
        for j in range(self.local_size):
            if self.q[self._slot(j) + 2]:
                return j, ctypes.string_at(self.addr + _SLOTS + _MSG * j).decode(
                    errors="replace")
        return None

    def unlink(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def close(self) -> None:
        self.q = None  # type: ignore[assignment]
        self.bytes = None  # type: ignore[assignment]
        try:
            self.mm.close()
        except BufferError:  # a tensor over it is still referenced: unmapped when freed
            pass
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


@dataclass
class _Region:
    """A tensor's part of the segment: counters, then one slot per local rank
    (slot 0 holds the sum)."""
    off: int
    nelem: int
    dtype: str
    esize: int

    def counter(self, what: int, j: int) -> int:  # index into Segment.q
        return (self.off + _LINE * (what * 64 + j)) // 8

    def slot(self, j: int) -> int:  # byte offset
        return self.off + 3 * 64 * _LINE + j * _round(self.nelem * self.esize)


def _round(n: int) -> int:
    return (n + _LINE - 1) // _LINE * _LINE


_ARRIVED, _DONE, _COPIED = 0, 1, 2


class _LocalOp:
    __slots__ = ("handle", "name", "region", "seq", "src", "dst", "state", "inner", "since",
                 "lo", "hi")

    def __init__(self, handle: Handle, name: str, region: _Region, seq: int, src: int,
                 dst: int, lo: int, hi: int) -> None:
        self.handle, self.name, self.region, self.seq = handle, name, region, seq
        self.src, self.dst, self.lo, self.hi = src, dst, lo, hi
        self.state = 0
        self.inner: Optional[Handle] = None
        self.since = time.monotonic()


class LocalSession:
    """A rank's session when its machine aggregates locally: the same
    ``submit``/``tensor_id``/``stats``/``close`` as :class:`~sigma.session.
    Session`, over the machine's segment and this local rank's session of
    its sub-job (``inner``)."""

    def __init__(self, p: Plan, jobs: list[Job], store: Any, prefix: str, timeout: float,
                 **session_kw: Any) -> None:
        self.plan = p
        self.jobs = jobs
        self.job = jobs[p.local_rank]
        self.rank = p.machine * p.local_size + p.local_rank
        self._store = LockedStore(store)
        self._prefix = f"{prefix}/local/m{p.machine}"
        self._timeout = timeout
        self.seg = self._open_segment(jobs[0].id)
        self.inner: Optional[Session] = None
        try:
            self.inner = Session(self.job, p.machine, store=store, store_prefix=prefix,
                                 **session_kw)
        except BaseException:
            self.seg.unlink()
            self.seg.close()
            raise
        self.ranks_wait = self.inner.ranks_wait
        self.silent_bound = self.inner.silent_bound
        # a local rank pushing waits for its sub-job, within the inner session's bounds
        self.stall_bound = self.inner.stall_bound + 2.0
        self.transport = self.inner.transport
        self._regions: dict[str, _Region] = {}
        self._id_lock = threading.Lock()
        self._seq: dict[str, int] = {}
        self._queues: dict[str, Deque[_LocalOp]] = {}
        self._cv = threading.Condition()
        self._new: list[_LocalOp] = []
        self._closing = False
        self._failed: Optional[SigmaError] = None
        self._thread_error: Optional[BaseException] = None
        self._callback_errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"sigma-local-m{p.machine}l{p.local_rank}")
        self._thread.start()

    # ---- the segment --------------------------------------------------------

    def _open_segment(self, job_id: int) -> Segment:
        p = self.plan
        key = f"{self._prefix}/segment"
        if p.local_rank == 0:
            seg = Segment.create(job_id, p.machine, p.local_size)
            self._store.set(key, seg.path)
        else:
            try:
                self._store.wait([key], datetime.timedelta(seconds=self._timeout))
            except RuntimeError as e:
                raise SigmaConfigError(f"sigma.torch.init: local rank {p.local_rank} of "
                                       f"machine {p.machine}: its local rank 0 made no "
                                       f"segment within {self._timeout:g} s ({e})") from None
            path = self._store.get(key)
            seg = Segment.attach(path.decode() if isinstance(path, bytes) else path,
                                 p.machine, p.local_size, p.local_rank)
        seg.set_pid(p.local_rank)
        # the last to map it unlinks it: from now on the mappings alone hold it
        if self._store.add(f"{self._prefix}/mapped", 1) == p.local_size:
            seg.unlink()
        return seg

    # ---- tensors ------------------------------------------------------------

    def _share(self, nelem: int, j: int) -> tuple[int, int]:
        L = self.plan.local_size
        return j * nelem // L, (j + 1) * nelem // L

    def tensor_id(self, name: str, nelem: int, dtype: str,
                  tensor_id: Optional[int] = None) -> int:
        """Claim the tensor's region in the segment and this local rank's
        share's id in its sub-job (once per name); returns that id (-1 for
        an empty share)."""
        from . import _lib
        if tensor_id is not None:
            raise SigmaConfigError(f"sigma: tensor '{name}': tensor_id= is not taken with "
                                   "local aggregation (each local rank pushes a share under "
                                   "a name of its own); set SIGMA_LOCAL_AGGREGATION=0")
        with self._id_lock:  # DDP's hooks may come from autograd's threads
            reg = self._regions.get(name)
            if reg is None:
                reg = self._claim(name, nelem, dtype, _lib.DTYPE_SIZES[dtype])
                self._regions[name] = reg
        if (reg.nelem, reg.dtype) != (nelem, dtype):
            raise SigmaConfigError(
                f"sigma: tensor '{name}' was first pushed as {reg.nelem} {reg.dtype} elements, "
                f"now as {nelem} {dtype}: give each differently shaped tensor its own name")
        lo, hi = self._share(nelem, self.plan.local_rank)
        if hi == lo:
            return -1
        assert self.inner is not None
        return self.inner.tensor_id(self._inner_name(name), hi - lo, dtype)

    def _inner_name(self, name: str) -> str:
        return f"{name}.local{self.plan.local_rank}of{self.plan.local_size}"

    def _claim(self, name: str, nelem: int, dtype: str, esize: int) -> _Region:
        """The region of ``name`` on this machine: the first local rank to use
        the name takes it from the segment, the others read where."""
        key = f"{self._prefix}/region/{name}"
        size = 3 * 64 * _LINE + self.plan.local_size * _round(nelem * esize)
        if self._store.add(f"{key}/claims", 1) == 1:
            end = self._store.add(f"{self._prefix}/top", size) + _DATA
            off = end - size
            try:
                if end > CAPACITY:
                    raise OSError(errno.ENOSPC, f"past the segment's {CAPACITY >> 30} GiB")
                os.posix_fallocate(self.seg.fd, off, size)
            except OSError as e:
                why = (f"cannot take {size} bytes of shared memory for tensor '{name}' "
                       f"({nelem} {dtype} x {self.plan.local_size} local ranks): "
                       f"{e.strerror or e}: make {SHM_DIR} larger, or set "
                       "SIGMA_LOCAL_AGGREGATION=0")
                self._store.set(key, "error:" + why)
                raise SigmaConfigError("sigma: " + why, e.errno) from None
            self._store.set(key, f"{off} {nelem} {dtype} {self.plan.local_rank}")
            return _Region(off, nelem, dtype, esize)
        try:
            self._store.wait([key], datetime.timedelta(seconds=self._timeout))
        except RuntimeError as e:
            raise SigmaError(f"sigma: tensor '{name}': the local rank that claimed its shared "
                             f"memory gave no place within {self._timeout:g} s ({e})") from None
        rec = self._store.get(key)
        rec = rec.decode() if isinstance(rec, bytes) else rec
        if rec.startswith("error:"):
            raise SigmaConfigError("sigma: " + rec[6:])
        off, n, dt, who = rec.split(" ")
        if (int(n), dt) != (nelem, dtype):
            err = SigmaConfigError(
                f"sigma: tensor '{name}' is {nelem} {dtype} elements on local rank "
                f"{self.plan.local_rank} of machine {self.plan.machine}, but local rank {who} "
                f"first pushed it as {n} {dt}: a name must have the same size and dtype on "
                "every rank")
            self._fail(err)
            raise err
        return _Region(int(off), nelem, dtype, esize)

    def submit(self, name: str, dtype: str, nelem: int, src: int, dst: int, keep: Any,
               tensor_id: Optional[int] = None) -> Handle:
        """Start summing ``nelem`` elements at ``src`` over every rank of the
        job into ``dst``; returns a Handle at once (sigma.session.Session.submit)."""
        from . import _lib
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
                seq = self._seq.get(name, 0) + 1
                self._seq[name] = seq
                lo, hi = self._share(nelem, self.plan.local_rank)
                self._new.append(_LocalOp(h, name, self._regions[name], seq, src, dst, lo, hi))
                self._cv.notify()
                return h
        h._complete(err)
        return h

    # ---- the local thread -------------------------------------------------

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as e:  # noqa: BLE001 - surfaced to every waiter
            self._thread_error = e
            self._fail(SigmaError(f"sigma: the local aggregation thread died: {e!r}"))

    def _loop(self) -> None:
        sleep = _SLEEP_MIN
        last_dead = time.monotonic()
        while True:
            with self._cv:
                while not self._new and not self._queues and not self._closing:
                    self._cv.wait()
                if self._closing and (self._failed is not None or
                                      (not self._new and not self._queues)):
                    return
                for op in self._new:
                    self._queues.setdefault(op.name, collections.deque()).append(op)
                self._new = []
            moved = False
            for name in list(self._queues):
                q = self._queues[name]
                while q and self._advance(q[0]):
                    moved = True
                    if q[0].state == 4:
                        q.popleft()
                if not q:
                    del self._queues[name]
            if self._failed is not None:
                return
            now = time.monotonic()
            got = self.seg.failure()
            if got is not None and got[0] != self.plan.local_rank:
                self._fail(SigmaError(got[1]))
                return
            if now - last_dead > _DEAD_CHECK_S:
                last_dead = now
                if self._check_peers(now):
                    return
            if moved:
                sleep = _SLEEP_MIN
                continue
            with self._cv:
                if not self._new:
                    self._cv.wait(sleep)
            sleep = min(sleep * 2, _SLEEP_MAX)

    def _behind(self, op: _LocalOp, what: int, want: int) -> list[int]:
        q = self.seg.q
        return [k for k in range(self.plan.local_size)
                if q[op.region.counter(what, k)] < want]

    def _advance(self, op: _LocalOp) -> bool:
        """One step of the op if it can take it now; True if it did."""
        r, j, q, seg = op.region, self.plan.local_rank, self.seg.q, self.seg
        nbytes = r.nelem * r.esize
        if op.state == 0:  # our slot is free (slot 0: everyone copied the last sum out)
            if j == 0 and self._behind(op, _COPIED, op.seq - 1):
                return False
            ctypes.memmove(seg.addr + r.slot(j), op.src, nbytes)
            q[r.counter(_ARRIVED, j)] = op.seq
            self._next(op, 1)
            return True
        if op.state == 1:  # every input is there: sum our share, push it
            if self._behind(op, _ARRIVED, op.seq):
                return False
            if op.hi > op.lo:
                self._reduce(op)
                a = seg.addr + r.slot(0) + op.lo * r.esize
                assert self.inner is not None
                op.inner = self.inner.submit(self._inner_name(op.name), r.dtype, op.hi - op.lo,
                                             a, a, self)
                op.inner.add_done_callback(self._wake)
                self._next(op, 2)
            else:
                q[r.counter(_DONE, j)] = op.seq
                self._next(op, 3)
            return True
        if op.state == 2:  # our share's global sum
            assert op.inner is not None
            if not op.inner.done():
                return False
            err = op.inner.exception()
            if err is not None:
                self._fail(err if isinstance(err, SigmaError) else SigmaError(str(err)))
                return False
            q[r.counter(_DONE, j)] = op.seq
            self._next(op, 3)
            return True
        if op.state == 3:  # every share summed: the result out
            if self._behind(op, _DONE, op.seq):
                return False
            ctypes.memmove(op.dst, seg.addr + r.slot(0), nbytes)
            q[r.counter(_COPIED, j)] = op.seq
            op.state = 4
            op.handle._complete(None)
            return True
        return False

    def _next(self, op: _LocalOp, state: int) -> None:
        op.state, op.since = state, time.monotonic()

    def _reduce(self, op: _LocalOp) -> None:
        """Slot 0's share += every other slot's, in local-rank order (16-bit
        types summed in fp32 and rounded once)."""
        r = op.region
        tdt = _TORCH_DTYPES[r.dtype]
        b = self.seg.bytes
        lo, hi = op.lo * r.esize, op.hi * r.esize

        def view(k: int) -> Any:
            return b[r.slot(k) + lo:r.slot(k) + hi].view(tdt)
        out = view(0)
        if r.dtype in ("fp16", "bf16"):
            acc = out.float()
            for k in range(1, self.plan.local_size):
                acc.add_(view(k).float())
            out.copy_(acc)
        else:
            for k in range(1, self.plan.local_size):
                out.add_(view(k))

    def _wake(self, _h: Handle) -> None:
        with self._cv:
            self._cv.notify()

    def _check_peers(self, now: float) -> bool:
        """Fail if a local rank that an op waits for died, or kept it waiting
        past its bound; True if so."""
        p = self.plan
        for q in self._queues.values():
            op = q[0]
            what = {0: _COPIED, 1: _ARRIVED, 3: _DONE}.get(op.state)
            if what is None:
                continue
            want = op.seq - 1 if what == _COPIED else op.seq
            behind = self._behind(op, what, want)
            for k in behind:
                pid = self.seg.pid(k)
                if not _pid_alive(pid):
                    self._fail(SigmaError(
                        f"sigma: push_pull of '{op.name}' (step {op.seq}): local rank {k} "
                        f"(rank {p.machine * p.local_size + k}, pid {pid}) of machine "
                        f"{p.machine} died"))
                    return True
            bound = self.ranks_wait if what == _ARRIVED else self.stall_bound
            if behind and now - op.since > bound:
                ranks = ", ".join(f"{k} (rank {p.machine * p.local_size + k}, pid "
                                  f"{self.seg.pid(k)})" for k in behind)
                self._fail(SigmaTimeoutError(
                    f"sigma: push_pull of '{op.name}' (step {op.seq}): local "
                    f"rank{'s' if len(behind) > 1 else ''} {ranks} "
                    f"of machine {p.machine} did not "
                    f"{'finish their share' if what == _DONE else 'come'} within {bound:g} s "
                    f"(stuck or paused)", errno.ETIMEDOUT))
                return True
        return False

    def _fail(self, err: SigmaError) -> None:
        """The first failure ends the session on this rank, and is written
        where the other local ranks and the job's other ranks see it."""
        with self._cv:
            if self._failed is not None:
                return
            self._failed = err
            ops = [op for q in self._queues.values() for op in q] + self._new
            self._queues, self._new = {}, []
            self._closing = True
            self._cv.notify()
        p = self.plan
        why = str(err)
        if f"machine {p.machine}" not in why:
            why = f"{why} [local rank {p.local_rank} of machine {p.machine}]"
        self.seg.fail(p.local_rank, why)
        if self.inner is not None:
            self.inner.post_failure(why)
        for op in ops:
            op.handle._complete(err)

    def _check_alive(self) -> None:
        if not self._thread.is_alive() and self._thread_error is not None:
            raise SigmaError(f"sigma: the local aggregation thread died: "
                             f"{self._thread_error!r}")

    # ---- the rest ---------------------------------------------------------

    @property
    def failed(self) -> Optional[SigmaError]:
        return self._failed

    def post_failure(self, reason: str) -> None:
        assert self.inner is not None
        self.inner.post_failure(reason)

    def stats(self) -> Any:
        """The inner session's libsigma counters (this local rank's share)."""
        assert self.inner is not None
        return self.inner.stats()

    def profile(self) -> dict:
        assert self.inner is not None
        return self.inner.profile()

    def close(self, timeout: Optional[float] = None) -> None:
        """Let what is in flight finish (within its bounds, or ``timeout`` s),
        then close the inner session and unmap the segment. Idempotent."""
        with self._cv:
            self._closing = True
            self._cv.notify()
        bound = self.stall_bound + 1.0 if timeout is None else timeout
        self._thread.join(bound)
        if self._thread.is_alive():
            self._fail(SigmaTimeoutError(f"sigma: close: operations still in flight after "
                                         f"{bound:g} s", errno.ETIMEDOUT))
            self._thread.join(1.0)
        if self.inner is not None:
            self.inner.close(timeout=timeout)  # no more writes into the segment after this
        if self.seg.fd >= 0:
            self.seg.unlink()  # a local rank that never mapped it left it here
            self.seg.close()

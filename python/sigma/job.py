# SPDX-License-Identifier: BSD-3-Clause
"""Jobs: the job descriptor, and the job service that makes a job on every
summation node (docs/control.md, "Jobs across nodes").

The job service is libsigma-control's ``sg_ctl_job_service_create()``: it
speaks JSON-RPC to each node's control server (a Unix socket, or TCP with the
HMAC challenge and the shared secret), picks one id, token and chunk size, and
returns the one-line descriptor that every rank opens its session with.
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import os
from dataclasses import dataclass, field
from typing import Iterable, Optional, Sequence, Union

from . import _lib
from .errors import SigmaConfigError, SigmaError


@dataclass(frozen=True)
class JobNode:
    """A summation node as a job descriptor names it."""
    name: str
    addr: str
    port: int
    kind: str
    gbps: float
    weight: float


@dataclass(frozen=True)
class Job:
    """A job, read from its descriptor with libsigma's strict parser."""
    descriptor: str
    id: int
    workers: int
    token: int
    dtype: str
    mode: str
    partition_bytes: int
    chunk_bytes: int
    nodes: tuple[JobNode, ...] = field(default_factory=tuple)
    #: auth = mac: authenticated datagrams (docs/security.md)
    auth: bool = False
    #: whose keys this descriptor holds (a rank's own, with auth), else None
    rank: Optional[int] = None
    #: made by create_job(auth=True): each rank's own descriptor, rank r's at r
    #: (secrets: hand rank r only its own)
    ranks: tuple[str, ...] = field(default=(), repr=False)

    @classmethod
    def parse(cls, descriptor: str) -> "Job":
        """Read a descriptor; SigmaConfigError names the field that is wrong."""
        if not isinstance(descriptor, str):
            raise SigmaConfigError(f"job descriptor: want a str, got {type(descriptor).__name__}")
        lib = _lib.libsigma()
        job = _lib.SigmaJobPadded()
        err = ctypes.create_string_buffer(512)
        text = descriptor.strip()
        rc = lib.sigma_job_parse(text.encode(), ctypes.byref(job), err, len(err))
        if rc < 0:
            raise SigmaConfigError(err.value.decode(errors="replace") or
                                   f"job descriptor: {os.strerror(-rc)}", -rc)
        j = job.job
        nodes = tuple(JobNode(j.names[i].value.decode(), j.addrs[i].value.decode(),
                              j.nodes[i].port, _lib.KIND_NAMES.get(j.nodes[i].kind, "cpu"),
                              j.nodes[i].gbps, j.weights[i])
                      for i in range(j.conf.nnodes))
        job = cls(text, j.conf.job, j.conf.nworkers, j.conf.token,
                  _lib.DTYPE_NAMES.get(j.dtype, "any"), _lib.MODE_NAMES.get(j.mode, "sync"),
                  j.conf.partition_bytes, j.conf.chunk_bytes, nodes, bool(j.auth),
                  j.rank if j.has_keys else None)
        ctypes.memset(ctypes.addressof(j), 0, ctypes.sizeof(j))  # a rank's keys
        return job


@dataclass(frozen=True)
class NodeTarget:
    """How the job service reaches one node: its control target, and optional
    overrides of what the node's node_info tells (sigmactl's --node form)."""
    target: str
    addr: Optional[str] = None
    port: int = 0
    kind: Optional[str] = None
    gbps: float = 0.0
    weight: Optional[float] = None

    @classmethod
    def parse(cls, text: str) -> "NodeTarget":
        """``TARGET[,addr=IP][,port=N][,kind=cpu|gpu][,gbps=G][,weight=W]``."""
        parts = text.strip().split(",")
        if not parts[0]:
            raise SigmaConfigError(f"node '{text}': no control target (unix:PATH or HOST:PORT)")
        kw: dict = {}
        for p in parts[1:]:
            key, eq, val = p.partition("=")
            try:
                if not eq:
                    raise ValueError("want key=value")
                if key == "addr":
                    kw["addr"] = val
                elif key == "port":
                    kw["port"] = int(val)
                    if not 0 < kw["port"] < 65536:
                        raise ValueError("port must be 1..65535")
                elif key == "kind":
                    if val not in _lib.KINDS:
                        raise ValueError("kind must be cpu or gpu")
                    kw["kind"] = val
                elif key == "gbps":
                    kw["gbps"] = float(val)
                    if not kw["gbps"] > 0:
                        raise ValueError("gbps must be > 0")
                elif key == "weight":
                    kw["weight"] = float(val)
                    if not kw["weight"] >= 0:
                        raise ValueError("weight must be >= 0")
                else:
                    raise ValueError("unknown option (addr, port, kind, gbps, weight)")
            except ValueError as e:
                raise SigmaConfigError(f"node '{text}': '{p}': {e}") from None
        return cls(parts[0], **kw)


NodeLike = Union[str, NodeTarget]


def parse_nodes(nodes: Union[str, Iterable[NodeLike], None]) -> list[NodeTarget]:
    """A node list from a list, or from text separated by ';' or white space
    (the form of SIGMA_NODES)."""
    if nodes is None:
        return []
    if isinstance(nodes, str):
        items: list[NodeLike] = [t for t in nodes.replace(";", " ").split() if t]
    else:
        try:
            items = list(nodes)
        except TypeError:
            raise SigmaConfigError(f"nodes {nodes!r}: want a list of control targets, or "
                                   "text with ';' between them (unix:PATH or HOST:PORT)") from None
    out = []
    for n in items:
        if isinstance(n, NodeTarget):
            out.append(n)
        elif isinstance(n, str):
            out.append(NodeTarget.parse(n))
        else:
            raise SigmaConfigError(f"node {n!r}: want a str (unix:PATH or HOST:PORT) or a "
                                   "NodeTarget")
    return out


def load_secret(path: str) -> bytes:
    """Read the shared secret as sigmactl does (trailing newline dropped, at
    most 256 bytes; a longer file is refused rather than cut)."""
    lib = _lib.libcontrol()
    buf = (ctypes.c_uint8 * _lib.SG_CTL_SECRET_MAX)()
    n = ctypes.c_size_t()
    err = ctypes.create_string_buffer(512)
    rc = lib.sg_ctl_secret_load(os.fsencode(path), False, buf, ctypes.byref(n), err, len(err))
    if rc < 0:
        raise SigmaConfigError(f"secret file {path}: {err.value.decode(errors='replace')}; "
                               "give the file the nodes' control servers use "
                               "(--secret-file / [control] secret_file)", -rc)
    return bytes(buf[:n.value])


_HINTS = {
    errno.EACCES: "the node refused the shared secret: give the secret file its control server "
                  "uses (secret_file= or SIGMA_SECRET_FILE)",
    errno.ECONNREFUSED: "nothing listens there: start the node, or fix the target "
                        "(nodes= or SIGMA_NODES: unix:PATH or HOST:PORT of its control server)",
    errno.ENOENT: "no such control socket: start the node, or fix the path (nodes= or "
                  "SIGMA_NODES)",
    errno.ETIMEDOUT: "the control server did not answer in time: check the target and that "
                     "the node is up (and reachable on the management network)",
    errno.EHOSTUNREACH: "the host is unreachable: check the target (nodes= or SIGMA_NODES)",
}


class _Service:
    """The C job service's view of a node list (keeps the ctypes memory alive)."""

    def __init__(self, nodes: Sequence[NodeTarget], secret: Optional[bytes],
                 timeout_ms: int) -> None:
        lib = _lib.libcontrol()
        if not nodes:
            raise SigmaConfigError("no summation nodes: pass nodes=[...] or set SIGMA_NODES to "
                                   "the nodes' control targets (unix:PATH or HOST:PORT)")
        if len(nodes) > _lib.SG_MAX_NODES:
            raise SigmaConfigError(f"{len(nodes)} nodes: a job has at most {_lib.SG_MAX_NODES}")
        self._keep: list = []
        arr = (_lib.CtlJobsvcNode * len(nodes))()
        for i, n in enumerate(nodes):
            if lib.sg_ctl_target_is_tcp(n.target.encode()) and not secret:
                raise SigmaConfigError(f"node {n.target} is reached over TCP and needs the "
                                       "nodes' shared secret: pass secret_file= or set "
                                       "SIGMA_SECRET_FILE (or use its unix: socket)")
            arr[i].target = self._str(n.target)
            arr[i].addr = self._str(n.addr)
            arr[i].udp_port = n.port
            arr[i].kind = self._str(n.kind)
            arr[i].gbps = n.gbps
            arr[i].has_weight = n.weight is not None
            arr[i].weight = n.weight or 0.0
        self.svc = _lib.CtlJobsvc()
        self.svc.nodes = arr
        self.svc.n_nodes = len(nodes)
        if secret:
            sec = (ctypes.c_uint8 * len(secret)).from_buffer_copy(secret)
            self._keep.append(sec)
            self.svc.secret = sec
            self.svc.secret_len = len(secret)
        self.svc.timeout_ms = timeout_ms
        self._keep.append(arr)

    def _str(self, s: Optional[str]) -> Optional[bytes]:
        if s is None:
            return None
        b = s.encode()
        self._keep.append(b)
        return b


def _fail(what: str, rc: int, msg: str) -> SigmaError:
    hint = _HINTS.get(-rc)
    text = f"{what}: {msg}" + (f" ({hint})" if hint and hint not in msg else "")
    if -rc in (errno.EINVAL, errno.EACCES, errno.ECONNREFUSED, errno.ENOENT,
               errno.EHOSTUNREACH):
        return SigmaConfigError(text, -rc, msg)
    return SigmaError(text, -rc, msg)


def create_job(nodes: Union[str, Iterable[NodeLike]], workers: int, *,
               dtype: Optional[str] = None, mode: str = "sync",
               tensors: Optional[Sequence[tuple[str, int]]] = None, slots: int = 0,
               partition_bytes: int = 0, chunk_bytes: int = 0, job_id: int = 0,
               secret: Optional[bytes] = None, secret_file: Optional[str] = None,
               timeout_ms: int = 5000, auth: bool = False) -> Job:
    """Create one job on every node; returns it (with its descriptor).

    Args:
        nodes: control targets (``unix:PATH``, ``HOST:PORT``), or NodeTarget.
        workers: N, 1..64.
        dtype: the job's element type; ``any`` (the default without tensors)
            lets each key take the dtype of its first push.
        mode: sync, async or deterministic.
        tensors: ``[(name, elements), ...]``: tensor i is id i. None: an *open*
            job, whose keys each node creates on their first push.
        slots: an open job's chunk slots per node engine (0: the nodes'
            default); a full budget makes the push that needs one more fail
            with the node's reason.
        partition_bytes, chunk_bytes, job_id: 0 for the service's choice.
        secret / secret_file: the nodes' shared secret, for TCP targets.
        timeout_ms: bounds every exchange with a node.
        auth: authenticated datagrams (auth = mac, docs/security.md): the
            job's ``ranks`` then holds each rank's own descriptor, with its
            keys; the job's own descriptor opens no session.
    Raises:
        SigmaConfigError: a bad argument, an unreachable node, a wrong secret;
            the message names the node and the fix.
        SigmaError: a node refused the job (its reason).
    """
    targets = parse_nodes(nodes)
    if secret is None and secret_file:
        secret = load_secret(secret_file)
    if not isinstance(workers, int) or not 1 <= workers <= _lib.SG_MAX_WORKERS:
        raise SigmaConfigError(f"workers {workers!r}: must be 1..{_lib.SG_MAX_WORKERS}")
    if dtype is None:
        dtype = "fp32" if tensors else "any"
    if dtype not in _lib.JOB_DTYPES:
        raise SigmaConfigError(f"dtype {dtype!r}: one of {', '.join(_lib.JOB_DTYPES)}")
    if not isinstance(slots, int) or slots < 0:
        raise SigmaConfigError(f"slots {slots!r}: want an integer >= 0")
    if mode not in _lib.MODES:
        raise SigmaConfigError(f"mode {mode!r}: one of {', '.join(_lib.MODES)}")
    if not isinstance(auth, bool):
        raise SigmaConfigError(f"auth {auth!r}: want True (auth = mac) or False")
    svc = _Service(targets, secret, timeout_ms)
    spec = _lib.CtlJobSpecPadded()
    s = spec.spec
    s.id, s.workers = job_id, workers
    s.dtype, s.mode = _lib.JOB_DTYPES[dtype], _lib.MODES[mode]
    s.slots = slots
    s.partition_bytes, s.chunk_bytes = partition_bytes, chunk_bytes
    if tensors:
        arr = (_lib.CtlTensor * len(tensors))()
        for i, (name, elems) in enumerate(tensors):
            arr[i].name = name.encode()[:_lib.SG_NAME_MAX - 1]
            arr[i].elems = elems
        s.tensors, s.n_tensors = arr, len(tensors)
    desc = ctypes.create_string_buffer(_lib.SIGMA_JOB_DESC_MAX)
    bufs = [ctypes.create_string_buffer(_lib.SIGMA_JOB_DESC_MAX) for _ in range(workers)] \
        if auth else []
    if auth:
        s.auth = True
        s.rank_descs = (ctypes.c_char_p * workers)(*[ctypes.cast(b, ctypes.c_char_p) for b in bufs])
    err = ctypes.create_string_buffer(1024)
    lib = _lib.libcontrol()
    rc = lib.sg_ctl_job_service_create(ctypes.byref(svc.svc), ctypes.byref(spec), desc,
                                       len(desc), err, len(err))
    if rc < 0:
        raise _fail("cannot create the job", int(rc), err.value.decode(errors="replace"))
    ranks = tuple(b.value.decode() for b in bufs)
    for b in bufs:
        ctypes.memset(b, 0, len(b))
    return dataclasses.replace(Job.parse(desc.value.decode()), ranks=ranks)


def destroy_job(nodes: Union[str, Iterable[NodeLike]], job_id: int, *,
                secret: Optional[bytes] = None, secret_file: Optional[str] = None,
                timeout_ms: int = 5000) -> None:
    """Destroy job @job_id on every node (going on past a node that fails)."""
    targets = parse_nodes(nodes)
    if secret is None and secret_file:
        secret = load_secret(secret_file)
    svc = _Service(targets, secret, timeout_ms)
    err = ctypes.create_string_buffer(2048)
    lib = _lib.libcontrol()
    rc = lib.sg_ctl_job_service_destroy(ctypes.byref(svc.svc), job_id, err, len(err))
    if rc < 0:
        raise _fail(f"cannot destroy job {job_id}", rc, err.value.decode(errors="replace"))


def control_call(target: str, method: str, params: Optional[str] = None, *,
                 secret: Optional[bytes] = None, timeout_ms: int = 5000) -> str:
    """One JSON-RPC call to a node's control server; returns the result as JSON text."""
    lib = _lib.libcontrol()
    sec = (ctypes.c_uint8 * len(secret)).from_buffer_copy(secret) if secret else None
    cli = lib.sg_ctl_client_connect(target.encode(), sec, len(secret or b""), timeout_ms)
    if not cli:
        e = ctypes.get_errno() or errno.ECONNREFUSED
        raise _fail(f"cannot reach {target}", -e, os.strerror(e))
    try:
        res, msg = ctypes.c_void_p(), ctypes.c_void_p()
        rc = lib.sg_ctl_client_call(cli, method.encode(), params.encode() if params else None,
                                    ctypes.byref(res), ctypes.byref(msg))
        if rc < 0:
            text = ctypes.string_at(msg.value).decode() if msg.value else os.strerror(-rc)
            if msg.value:
                _lib.libc_free(msg.value)
            raise SigmaError(f"{target}: {method}: {text}", -rc, text)
        out = ctypes.string_at(res.value).decode()
        _lib.libc_free(res.value)
        return out
    finally:
        lib.sg_ctl_client_close(cli)

# SPDX-License-Identifier: BSD-3-Clause
"""Cluster membership from etcd (docs/cluster.md), through libsigma-control's
``sg_etcd`` (control/sg_etcd.h).

Summation nodes started with ``--etcd URLS --cluster NAME`` (sigma-udpd) or a
``[cluster]`` section (sigmad) keep a record under ``/sigma/NAME/nodes/``
while their lease lives. From that:

- :func:`read_nodes` reads the live nodes (name, address, control endpoint):
  a job is made on them without a node list (``sigma.torch.init(etcd=...)``);
- :class:`Watch` is a worker's view of the membership: a C thread that reads
  it every ``poll_ms``, and that libsigma asks at its timer scans through
  ``sigma_conf.membership`` (``sg_etcd_watch_alive``, called from C: no Python
  runs on that path). A node whose record goes (its lease expired: it died)
  is lost for the session: libsigma moves its partitions to the survivors and
  pushes the interrupted rounds again (docs/client.md, "When a node is lost").
"""

from __future__ import annotations

import ctypes
import errno
import re
import threading
import time
from dataclasses import dataclass
from typing import Any, Optional

from . import _lib
from .errors import SigmaConfigError

DEFAULT_CLUSTER = "default"
_CLUSTER_RE = re.compile(r"^[A-Za-z0-9._-]{1,63}$")


@dataclass(frozen=True)
class EtcdNode:
    """A summation node's record in etcd."""
    name: str
    kind: str
    gbps: float
    addr: str
    port: int
    control: str  # its control endpoint ("unix:/path" or "host:port"), or ""


def _conf(endpoints: str, timeout_ms: int) -> tuple[_lib.EtcdConf, list]:
    if not isinstance(endpoints, str) or not endpoints.strip():
        raise SigmaConfigError(f"etcd endpoints {endpoints!r}: want 'http://host:port' "
                               "(several: comma-separated)")
    keep = [endpoints.strip().encode()]
    c = _lib.EtcdConf()
    c.endpoints = keep[0]
    c.timeout_ms = timeout_ms
    return c, keep


def check_cluster(cluster: str) -> str:
    """The cluster name, checked (1..63 of [A-Za-z0-9._-])."""
    if not isinstance(cluster, str) or not _CLUSTER_RE.match(cluster):
        raise SigmaConfigError(f"cluster {cluster!r}: want 1..63 of [A-Za-z0-9._-] (the name "
                               "the nodes were started with: --cluster, [cluster] cluster)")
    return cluster


def read_nodes(endpoints: str, cluster: str = DEFAULT_CLUSTER, *,
               timeout_ms: int = 1000) -> list[EtcdNode]:
    """The live nodes of ``cluster`` in etcd at ``endpoints``, by name.

    Raises SigmaConfigError when etcd does not answer (naming each endpoint
    and why), or the endpoints or cluster name are malformed. Records that do
    not parse are ignored (libsigma-control logs each once on stderr)."""
    check_cluster(cluster)
    lib = _lib.libcontrol()
    conf, keep = _conf(endpoints, timeout_ms)
    e = lib.sg_etcd_create(ctypes.byref(conf))
    if not e:
        raise SigmaConfigError(f"etcd endpoints {endpoints!r}: not a list of http://host:port "
                               "or https://host:port (comma-separated, at most 16; the reason "
                               "is on stderr)", ctypes.get_errno() or errno.EINVAL)
    try:
        cap = _lib.SG_MAX_NODES
        while True:
            out = (_lib.EtcdNode * cap)()
            n = lib.sg_etcd_nodes_get(e, cluster.encode(), out, cap, None)
            if n < 0:
                why = (lib.sg_etcd_last_error(e) or b"").decode(errors="replace")
                raise SigmaConfigError(f"cannot read the nodes of cluster '{cluster}' from etcd "
                                       f"({endpoints}): {why or errno.errorcode.get(-n, n)}: "
                                       "start etcd, or fix the endpoints (etcd= or "
                                       "SIGMA_ETCD)", -n)
            if n <= cap:
                break
            cap = n
        nodes = [EtcdNode(out[i].name.decode(), _lib.KIND_NAMES.get(out[i].kind, "cpu"),
                          out[i].gbps, out[i].addr.decode(), out[i].port,
                          out[i].control.decode()) for i in range(n)]
    finally:
        lib.sg_etcd_destroy(e)
        del keep
    return sorted(nodes, key=lambda x: x.name)


class Watch:
    """A worker's membership watch of ``cluster`` (``sg_etcd_watch_start``):
    a C thread reads the live nodes every ``poll_ms`` (10..10000). Give it to
    one :class:`~sigma.session.Session` (``membership=``): the session asks it
    from C, and stops it when it closes. When etcd is unreachable the watch
    keeps the last set it read (and says so once on stderr)."""

    def __init__(self, endpoints: str, cluster: str = DEFAULT_CLUSTER, *,
                 poll_ms: int = 100, timeout_ms: int = 1000) -> None:
        check_cluster(cluster)
        if not isinstance(poll_ms, int) or not 10 <= poll_ms <= 10000:
            raise SigmaConfigError(f"etcd poll_ms {poll_ms!r}: want 10..10000")
        self.endpoints, self.cluster, self.poll_ms = endpoints, cluster, poll_ms
        self._lib = _lib.libcontrol()
        conf, keep = _conf(endpoints, timeout_ms)
        w = self._lib.sg_etcd_watch_start(ctypes.byref(conf), cluster.encode(), poll_ms)
        del keep  # the watch copies its configuration
        if not w:
            e = ctypes.get_errno() or errno.EINVAL
            raise SigmaConfigError(f"cannot watch cluster '{cluster}' in etcd ({endpoints}): "
                                   f"{errno.errorcode.get(e, e)} (malformed endpoints? the "
                                   "reason is on stderr)", e)
        self._w: Optional[int] = w

    @property
    def handle(self) -> int:
        """The C watch (``sigma_conf.membership_arg``)."""
        if not self._w:
            raise SigmaConfigError("the etcd watch is stopped")
        return self._w

    @staticmethod
    def callback() -> int:
        """The address of ``sg_etcd_watch_alive`` (``sigma_conf.membership``)."""
        return ctypes.cast(_lib.libcontrol().sg_etcd_watch_alive, ctypes.c_void_p).value

    def stats(self) -> dict:
        """The watch's counters: polls, failures, changes, generation, nodes,
        reachable, last_error."""
        st = _lib.EtcdWatchStats()
        if self._w:
            self._lib.sg_etcd_watch_stats(self._w, ctypes.byref(st))
        return {"polls": st.polls, "failures": st.failures, "changes": st.changes,
                "generation": st.generation, "nodes": st.nodes, "reachable": st.reachable,
                "last_error": st.last_error.decode(errors="replace")}

    def stop(self) -> None:
        """Stop the thread and free the watch (idempotent). Close the session
        that uses it first."""
        w, self._w = self._w, None
        if w:
            self._lib.sg_etcd_watch_stop(w)

    def __del__(self) -> None:
        try:
            self.stop()
        except Exception:  # interpreter shutdown: the process ends anyway
            pass


# The lease of a rendezvous in etcd (EtcdStore): its keys go this long after the
# process that made it died without revoking it; renewed every third of it.
STORE_TTL_S = 10
_RUN_RE = re.compile(r"[^A-Za-z0-9._-]")


def _read_prefix(lib: Any, e: int, prefix: str, check: Any) -> list[tuple[str, bytes]]:
    kvs = ctypes.POINTER(_lib.EtcdKv)()
    n = ctypes.c_size_t()
    check(lib.sg_etcd_get_prefix(e, prefix.encode(), ctypes.byref(kvs), ctypes.byref(n), None),
          f"read {prefix}")
    try:
        return [(kvs[i].key.decode(), ctypes.string_at(kvs[i].value, kvs[i].len))
                for i in range(n.value)]
    finally:
        lib.sg_etcd_kvs_free(kvs, n)


def read_keys(endpoints: str, prefix: str, *, timeout_ms: int = 1000) -> list[str]:
    """The keys in etcd at ``endpoints`` that start with ``prefix``, sorted (to
    see what a rendezvous left: nothing, once its rank 0 closed it)."""
    lib = _lib.libcontrol()
    conf, keep = _conf(endpoints, timeout_ms)
    e = lib.sg_etcd_create(ctypes.byref(conf))
    if not e:
        raise SigmaConfigError(f"etcd endpoints {endpoints!r}: malformed (the reason is on "
                               "stderr)", ctypes.get_errno() or errno.EINVAL)

    def check(rc: int, what: str) -> int:
        if rc < 0:
            why = (lib.sg_etcd_last_error(e) or b"").decode(errors="replace")
            raise SigmaConfigError(f"etcd ({endpoints}): cannot {what}: {why}", -rc)
        return rc
    try:
        return [k for k, _ in _read_prefix(lib, e, prefix, check)]
    finally:
        lib.sg_etcd_destroy(e)
        del keep


class EtcdStoreTimeout(RuntimeError):
    """A key did not come within the store's timeout (c10d stores raise RuntimeError too)."""


class EtcdStore:
    """A key-value store in etcd with what sigma.torch needs of torch's stores
    (``set``, ``get``, ``add``, ``wait``), for ranks that meet through etcd alone
    (docs/python.md, "The store").

    Its keys live under ``/sigma/CLUSTER/rendezvous/RUN/LEASE/``. The rank that
    ``hosts`` it (rank 0) grants a lease of STORE_TTL_S seconds, renewed by a
    thread of its own, and claims ``.../RUN/owner`` with the lease's id: a
    second host of a live run with the same name is refused, and the keys of a
    host that died go with its lease. The others wait for ``owner`` and use its
    lease (other than ``not_lease``: that of a run they met before). A counter
    is one key per ``add`` (``KEY/#0000000001``...), each claimed in an etcd
    transaction that only puts an absent key, so two ranks adding at once get
    two slots; its value is the sum of its slots up to the one claimed. Calls
    come from one thread at a time (LockedStore).

    Every request is bounded (``timeout_ms`` per endpoint); etcd unreachable or
    refusing raises SigmaConfigError naming the endpoints and the cause."""

    def __init__(self, endpoints: str, cluster: str, run: str, hosts: bool,
                 timeout: float, *, timeout_ms: int = 1000, not_lease: int = 0) -> None:
        check_cluster(cluster)
        self.endpoints, self.cluster, self.timeout = endpoints, cluster, float(timeout)
        self.run = _RUN_RE.sub("_", run)[:63] or "default"
        self._lib = _lib.libcontrol()
        conf, keep = _conf(endpoints, timeout_ms)
        self._conf_keep = (conf, keep)  # the renewal thread makes its own client from it
        self._e = self._lib.sg_etcd_create(ctypes.byref(conf))
        if not self._e:
            raise SigmaConfigError(f"etcd endpoints {endpoints!r}: not a list of "
                                   "http://host:port or https://host:port (comma-separated, "
                                   "at most 16; the reason is on stderr)",
                                   ctypes.get_errno() or errno.EINVAL)
        self._stop = threading.Event()
        self._renewer: Optional[threading.Thread] = None
        self.lease = 0
        run_key = f"/sigma/{cluster}/rendezvous/{self.run}"
        owner = f"{run_key}/owner"
        if hosts:
            lease = ctypes.c_int64()
            self._check(self._lib.sg_etcd_lease_grant(self._e, STORE_TTL_S, ctypes.byref(lease)),
                        "grant the rendezvous' lease")
            self.lease = lease.value
            mine = str(self.lease).encode()
            won = self._check(self._lib.sg_etcd_put_if_absent(self._e, owner.encode(), mine,
                                                              len(mine), self.lease, None, 0),
                              "claim the rendezvous")
            if won != 1:
                self._lib.sg_etcd_lease_revoke(self._e, self.lease)
                self.close()
                raise SigmaConfigError(
                    f"a job named '{self.run}' is already meeting in etcd ({endpoints}, "
                    f"cluster '{cluster}', {owner}): give each job its own SIGMA_RUN_ID, or "
                    f"wait {STORE_TTL_S} s after a crashed one")
            self._renewer = threading.Thread(target=self._renew, name="sigma-etcd-store",
                                             daemon=True)
            self._renewer.start()
        else:
            self.lease = int(self._wait_value(
                owner, self.timeout, f"rank 0's rendezvous ({owner}): is rank 0 running with "
                "the same SIGMA_ETCD, SIGMA_CLUSTER and SIGMA_RUN_ID?",
                not_value=str(not_lease).encode()))
        self._base = f"{run_key}/{self.lease}/"

    def _check(self, rc: int, what: str) -> int:
        if rc >= 0:
            return rc
        why = (self._lib.sg_etcd_last_error(self._e) or b"").decode(errors="replace")
        raise SigmaConfigError(f"the rendezvous through etcd ({self.endpoints}) could not "
                               f"{what}: {why or errno.errorcode.get(-rc, rc)}: is etcd "
                               "running, and are SIGMA_ETCD's endpoints right?", -rc)

    def _renew(self) -> None:
        conf, _ = self._conf_keep
        e = self._lib.sg_etcd_create(ctypes.byref(conf))
        try:
            while not self._stop.wait(STORE_TTL_S / 3):
                self._lib.sg_etcd_lease_keepalive(e, self.lease, None)  # a miss: the next
        finally:
            self._lib.sg_etcd_destroy(e)

    def _read(self, prefix: str) -> list[tuple[str, bytes]]:
        return _read_prefix(self._lib, self._e, prefix, self._check)

    def _value(self, key: str) -> Optional[bytes]:
        return next((v for k, v in self._read(key) if k == key), None)

    def _wait_value(self, key: str, timeout: float, what: str,
                    not_value: Optional[bytes] = None) -> bytes:
        deadline = time.monotonic() + timeout
        pause = 0.002
        while True:
            v = self._value(key)
            if v is not None and v != not_value:
                return v
            if time.monotonic() > deadline:
                raise EtcdStoreTimeout(f"{what}: not in etcd within {timeout:g} s")
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    def set(self, key: str, value: Any) -> None:
        data = value.encode() if isinstance(value, str) else bytes(value)
        self._check(self._lib.sg_etcd_put(self._e, (self._base + key).encode(), data,
                                          len(data), self.lease), f"set {key}")

    def get(self, key: str) -> bytes:
        """The value of ``key``, waiting for it within the store's timeout (as c10d's)."""
        return self._wait_value(self._base + key, self.timeout, f"key {key}")

    def wait(self, keys: list, timeout: Any = None) -> None:
        secs = timeout.total_seconds() if hasattr(timeout, "total_seconds") else \
            self.timeout if timeout is None else float(timeout)
        deadline = time.monotonic() + secs
        for k in keys:
            self._wait_value(self._base + k, max(0.0, deadline - time.monotonic()), f"key {k}")

    def add(self, key: str, amount: int) -> int:
        prefix = f"{self._base}{key}/#"
        slots = self._read(prefix)
        if amount == 0:
            return sum(int(v) for _, v in slots)
        data = str(int(amount)).encode()
        i = len(slots)
        while True:  # slots are claimed in order: every slot below ours exists
            i += 1
            mine = f"{prefix}{i:010d}"
            if self._check(self._lib.sg_etcd_put_if_absent(self._e, mine.encode(), data,
                                                           len(data), self.lease, None, 0),
                           f"add to {key}") == 1:
                break
        return sum(int(v) for k, v in self._read(prefix) if k <= mine)

    def close(self) -> None:
        """Stop renewing; the host revokes the lease (every key goes). Idempotent."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
            self._renewer = None
            self._lib.sg_etcd_lease_revoke(self._e, self.lease)
        e, self._e = self._e, None
        if e:
            self._lib.sg_etcd_destroy(e)

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
from dataclasses import dataclass
from typing import Optional

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

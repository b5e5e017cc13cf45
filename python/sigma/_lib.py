# SPDX-License-Identifier: BSD-3-Clause
"""ctypes bindings of libsigma (client/sigma.h, client/sigma_local.h) and
libsigma-control (control/sg_ctl_client.h).

Both libraries are found, in this order:

1. ``SIGMA_LIBSIGMA`` and ``SIGMA_LIBSIGMA_CONTROL``: the files themselves;
2. ``SIGMA_LIB_DIR``: a folder holding both (a build tree has them in
   ``build/client`` and ``build/control``: ``SIGMA_BUILD_DIR=build`` works too);
3. the folder that ``meson install`` put them in, recorded next to this
   package in ``_config.py`` relative to the package (so an install into a
   DESTDIR works as well as one into the prefix);
4. the dynamic loader by soname (``libsigma.so.0``: LD_LIBRARY_PATH,
   ld.so.cache).

The structures below mirror the C headers field for field. Structures that a
C function reads whole (``struct sigma_conf``, ``struct sg_ctl_job_spec``)
carry a zeroed tail, so that fields a newer library appends read as their
documented zero defaults; ``tests/python/test_abi.py`` checks every offset
against the compiler's.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from typing import Optional

SONAME_MAJOR = 0
LIBSIGMA = f"libsigma.so.{SONAME_MAJOR}"
LIBSIGMA_CONTROL = f"libsigma-control.so.{SONAME_MAJOR}"
LIBSIGMA_ELASTIC = f"libsigma-elastic.so.{SONAME_MAJOR}"

# sg_types.h
SG_MAX_WORKERS = 64
SG_MAX_NODES = 64
SG_NAME_MAX = 64
SG_MAX_TENSORS = 65536
SG_MAX_CHUNK_BYTES = 8920
SIGMA_ERR_LEN = 512
# enum sigma_transport
TRANSPORT_UDP = 0
TRANSPORT_SHM = 2
SIGMA_JOB_DESC_MAX = 16384
SG_CTL_SECRET_MAX = 256
# sg_etcd.h
SG_ETCD_ERR_LEN = 256
SG_ETCD_CONTROL_MAX = 128

DTYPES = {"fp32": 0, "fp64": 1, "fp16": 2, "bf16": 3, "int32": 4, "int64": 5, "int8": 6,
          "uint8": 7}
# A job's dtype may also be SG_DTYPE_ANY: an open job whose keys each take the
# dtype of their first push.
SG_DTYPE_ANY = 0xFF
JOB_DTYPES = dict(DTYPES, any=SG_DTYPE_ANY)
DTYPE_NAMES = {v: k for k, v in JOB_DTYPES.items()}
DTYPE_SIZES = {"fp32": 4, "fp64": 8, "fp16": 2, "bf16": 2, "int32": 4, "int64": 8, "int8": 1,
               "uint8": 1}
MODES = {"sync": 0, "async": 1, "deterministic": 2}
MODE_NAMES = {v: k for k, v in MODES.items()}
KINDS = {"cpu": 0, "gpu": 1}
KIND_NAMES = {v: k for k, v in KINDS.items()}

# Bytes of zeroes after a structure that the library copies whole: room for
# fields a later minor version appends (their zero value is their default).
_TAIL = 256


class SigmaNode(ctypes.Structure):
    """struct sigma_node."""
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("addr", ctypes.c_char_p),
        ("port", ctypes.c_uint16),
        ("kind", ctypes.c_int),
        ("gbps", ctypes.c_double),
    ]


class SigmaConf(ctypes.Structure):
    """struct sigma_conf."""
    _fields_ = [
        ("job", ctypes.c_uint32),
        ("rank", ctypes.c_uint16),
        ("nworkers", ctypes.c_uint16),
        ("token", ctypes.c_uint64),
        ("nodes", ctypes.POINTER(SigmaNode)),
        ("nnodes", ctypes.c_uint),
        ("weights", ctypes.POINTER(ctypes.c_double)),
        ("partition_bytes", ctypes.c_uint32),
        ("chunk_bytes", ctypes.c_uint32),
        ("window", ctypes.c_uint32),
        ("rto_us", ctypes.c_uint32),
        ("rto_max_us", ctypes.c_uint32),
        ("max_retries", ctypes.c_uint32),
        ("first_round", ctypes.c_uint32),
        ("transport", ctypes.c_int),
        ("local_addr", ctypes.c_char_p),
        ("local_port", ctypes.c_uint16),
        ("dpdk_port", ctypes.c_uint16),
        ("dpdk_rx_queues", ctypes.c_uint16),
        ("steer_reducers", ctypes.c_uint16),
        ("udp_gso", ctypes.c_uint8),  # enum sigma_udp_gso: 0 the default (on)
        ("failover", ctypes.c_bool),
        ("membership", ctypes.c_void_p),  # a C function pointer; Python sets none
        ("membership_arg", ctypes.c_void_p),
        ("failover_wait_us", ctypes.c_uint32),
        ("spin_us", ctypes.c_int32),
        ("ranks_wait_us", ctypes.c_uint32),
        ("shm_paths", ctypes.POINTER(ctypes.c_char_p)),
        ("n_shm_paths", ctypes.c_uint),
        ("auth_keys", ctypes.c_void_p),
        ("auth_key_id", ctypes.c_uint32),
    ]


class SigmaConfPadded(ctypes.Structure):
    """A sigma_conf followed by zeroes (see _TAIL)."""
    _fields_ = [("conf", SigmaConf), ("_tail", ctypes.c_uint8 * _TAIL)]


class SigmaStats(ctypes.Structure):
    """struct sigma_stats."""
    _fields_ = [(n, ctypes.c_uint64) for n in (
        "tx_packets", "rx_packets", "rx_results", "rx_stale", "rx_bad", "retransmits",
        "nacks", "errors", "ops_done", "ops_failed", "nodes_lost", "keys_moved",
        "recovery_pushes", "membership_changes", "timeouts_held", "spins", "waits",
        "tx_dropped", "rx_dropped")]


# sigma_local.h
SIGMA_LOCAL_MAX = 64


class SigmaLocalConf(ctypes.Structure):
    """struct sigma_local_conf (sigma_local.h)."""
    _fields_ = [
        ("job", ctypes.c_uint32),
        ("key", ctypes.c_uint64),
        ("machine", ctypes.c_uint16),
        ("local_rank", ctypes.c_uint16),
        ("local_size", ctypes.c_uint16),
        ("open_timeout_ms", ctypes.c_uint32),
        ("wait_us", ctypes.c_uint32),
        ("share_wait_us", ctypes.c_uint32),
    ]


class SigmaLocalConfPadded(ctypes.Structure):
    """A sigma_local_conf followed by zeroes (see _TAIL)."""
    _fields_ = [("conf", SigmaLocalConf), ("_tail", ctypes.c_uint8 * _TAIL)]


# enum sigma_fail_kind
FAIL_NONE, FAIL_NODE_SILENT, FAIL_RANKS_MISSING, FAIL_REFUSED, FAIL_NO_NODE = range(5)


class SigmaFailure(ctypes.Structure):
    """struct sigma_failure (sigma_last_failure())."""
    _fields_ = [
        ("status", ctypes.c_int),
        ("kind", ctypes.c_int),
        ("node", ctypes.c_int),
        ("key", ctypes.c_uint32),
        ("chunk", ctypes.c_uint32),
        ("round", ctypes.c_uint32),
        ("missing", ctypes.c_uint64),
        ("waited_us", ctypes.c_uint64),
    ]


class SigmaJob(ctypes.Structure):
    """struct sigma_job (filled by sigma_job_parse())."""
    _fields_ = [
        ("conf", SigmaConf),
        ("dtype", ctypes.c_int),
        ("mode", ctypes.c_int),
        ("nodes", SigmaNode * SG_MAX_NODES),
        ("weights", ctypes.c_double * SG_MAX_NODES),
        ("names", (ctypes.c_char * SG_NAME_MAX) * SG_MAX_NODES),
        ("addrs", (ctypes.c_char * 16) * SG_MAX_NODES),
        ("auth", ctypes.c_bool),
        ("has_keys", ctypes.c_bool),
        ("rank", ctypes.c_uint16),
        ("auth_keys", ctypes.c_uint8 * 64),
    ]


class SigmaJobPadded(ctypes.Structure):
    """A sigma_job with room after it, in case a later version grows it."""
    _fields_ = [("job", SigmaJob), ("_tail", ctypes.c_uint8 * _TAIL)]


class CtlTensor(ctypes.Structure):
    """struct sg_ctl_tensor."""
    _fields_ = [("name", ctypes.c_char * SG_NAME_MAX), ("elems", ctypes.c_uint64)]


class CtlJobsvcNode(ctypes.Structure):
    """struct sg_ctl_jobsvc_node."""
    _fields_ = [
        ("target", ctypes.c_char_p),
        ("addr", ctypes.c_char_p),
        ("udp_port", ctypes.c_uint16),
        ("kind", ctypes.c_char_p),
        ("gbps", ctypes.c_double),
        ("has_weight", ctypes.c_bool),
        ("weight", ctypes.c_double),
    ]


class CtlJobsvc(ctypes.Structure):
    """struct sg_ctl_jobsvc."""
    _fields_ = [
        ("nodes", ctypes.POINTER(CtlJobsvcNode)),
        ("n_nodes", ctypes.c_uint),
        ("secret", ctypes.POINTER(ctypes.c_uint8)),
        ("secret_len", ctypes.c_size_t),
        ("timeout_ms", ctypes.c_uint32),
    ]


class CtlJobSpec(ctypes.Structure):
    """struct sg_ctl_job_spec."""
    _fields_ = [
        ("id", ctypes.c_uint32),
        ("workers", ctypes.c_uint32),
        ("dtype", ctypes.c_int),
        ("mode", ctypes.c_int),
        ("partition_bytes", ctypes.c_uint32),
        ("chunk_bytes", ctypes.c_uint32),
        ("tensors", ctypes.POINTER(CtlTensor)),
        ("n_tensors", ctypes.c_uint32),
        ("slots", ctypes.c_uint32),
        ("auth", ctypes.c_bool),
        ("rank_descs", ctypes.POINTER(ctypes.c_char_p)),
        ("token_out", ctypes.c_char_p),
    ]


class CtlJobSpecPadded(ctypes.Structure):
    """A sg_ctl_job_spec followed by zeroes (see _TAIL)."""
    _fields_ = [("spec", CtlJobSpec), ("_tail", ctypes.c_uint8 * _TAIL)]


class EtcdConf(ctypes.Structure):
    """struct sg_etcd_conf."""
    _fields_ = [
        ("endpoints", ctypes.c_char_p),
        ("timeout_ms", ctypes.c_uint32),
        ("user", ctypes.c_char_p),
        ("password", ctypes.c_char_p),
        ("ca_file", ctypes.c_char_p),
        ("cert_file", ctypes.c_char_p),
        ("key_file", ctypes.c_char_p),
    ]


class EtcdKv(ctypes.Structure):
    """struct sg_etcd_kv (one pair sg_etcd_get_prefix read)."""
    _fields_ = [
        ("key", ctypes.c_char_p),
        ("value", ctypes.c_void_p),
        ("len", ctypes.c_size_t),
        ("mod_revision", ctypes.c_int64),
        ("lease", ctypes.c_int64),
    ]


class ElasticConf(ctypes.Structure):
    """struct sigma_elastic_conf (client/sigma_elastic.h)."""
    _fields_ = [
        ("etcd", EtcdConf),
        ("cluster", ctypes.c_char_p),
        ("descriptor", ctypes.c_char_p),
        ("rank", ctypes.c_uint16),
        ("base", ctypes.c_void_p),
        ("poll_ms", ctypes.c_uint32),
        ("margin", ctypes.c_uint32),
        ("confirm_ms", ctypes.c_uint32),
        ("wait_ms", ctypes.c_uint32),
        ("propose", ctypes.c_int),
        ("secret", ctypes.POINTER(ctypes.c_uint8)),
        ("secret_len", ctypes.c_size_t),
        ("idle_ms", ctypes.c_uint32),
        ("job_token", ctypes.c_char_p),
    ]


class ElasticStatus(ctypes.Structure):
    """struct sigma_elastic_status."""
    _fields_ = [("epoch", ctypes.c_uint32), ("nodes", ctypes.c_uint),
                ("sessions", ctypes.c_uint)] + [
        (n, ctypes.c_uint64) for n in ("proposals", "races_lost", "confirms", "aborts",
                                       "switches", "waits", "etcd_failures")] + [
        ("last_abort", ctypes.c_char * 256)]


class EtcdNode(ctypes.Structure):
    """struct sg_etcd_node (a node's record in etcd)."""
    _fields_ = [
        ("name", ctypes.c_char * SG_NAME_MAX),
        ("kind", ctypes.c_int),
        ("gbps", ctypes.c_double),
        ("addr", ctypes.c_char * 16),
        ("port", ctypes.c_uint16),
        ("control", ctypes.c_char * SG_ETCD_CONTROL_MAX),
        ("lease", ctypes.c_int64),
    ]


class EtcdGarbage(ctypes.Structure):
    """struct sg_etcd_garbage."""
    _fields_ = [(n, ctypes.c_uint64) for n in ("not_json", "bad_field", "bad_kind",
                                               "name_mismatch")]


class EtcdWatchStats(ctypes.Structure):
    """struct sg_etcd_watch_stats."""
    _fields_ = [
        ("polls", ctypes.c_uint64),
        ("failures", ctypes.c_uint64),
        ("changes", ctypes.c_uint64),
        ("generation", ctypes.c_uint64),
        ("nodes", ctypes.c_uint),
        ("reachable", ctypes.c_bool),
        ("garbage", EtcdGarbage),
        ("last_error", ctypes.c_char * SG_ETCD_ERR_LEN),
        ("streams", ctypes.c_uint64),
        ("reconnects", ctypes.c_uint64),
        ("events", ctypes.c_uint64),
        ("streaming", ctypes.c_bool),
        ("polling", ctypes.c_bool),
        ("jobs", ctypes.c_uint),
        ("job_changes", ctypes.c_uint64),
        ("job_garbage", EtcdGarbage),
        ("keepalives", ctypes.c_uint64),
        ("keep_failures", ctypes.c_uint64),
    ]


# void (*sigma_done_cb)(void *arg, struct sigma_tensor *t, int status)
DONE_CB = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)


class LibraryNotFound(OSError):
    """libsigma or libsigma-control could not be loaded; the message lists where we looked."""


def _package_config() -> Optional[str]:
    """The library folder meson recorded at install, resolved next to this package."""
    try:
        from . import _config  # written by meson install
    except ImportError:
        return None
    rel = getattr(_config, "LIBDIR_FROM_PACKAGE", None)
    if not rel:
        return None
    return os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), rel))


def _candidates(soname: str, file_env: str, build_sub: str) -> list[str]:
    paths = []
    if os.environ.get(file_env):
        paths.append(os.environ[file_env])
    if os.environ.get("SIGMA_LIB_DIR"):
        paths.append(os.path.join(os.environ["SIGMA_LIB_DIR"], soname))
    if os.environ.get("SIGMA_BUILD_DIR"):
        paths.append(os.path.join(os.environ["SIGMA_BUILD_DIR"], build_sub, soname))
    installed = _package_config()
    if installed:
        paths.append(os.path.join(installed, soname))
    paths.append(soname)  # the dynamic loader's own search
    found = ctypes.util.find_library(soname.split(".so")[0][3:])
    if found:
        paths.append(found)
    return paths


def _load(soname: str, file_env: str, build_sub: str) -> ctypes.CDLL:
    tried = []
    for path in _candidates(soname, file_env, build_sub):
        if os.sep in path and not os.path.exists(path):
            tried.append(f"{path} (no such file)")
            continue
        try:
            return ctypes.CDLL(path, use_errno=True)
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise LibraryNotFound(
        f"sigma: cannot load {soname}; tried: {'; '.join(tried)}. Install Sigma (meson "
        f"install), or point SIGMA_BUILD_DIR at a build tree, SIGMA_LIB_DIR at the folder "
        f"that holds {soname}, or {file_env} at the file")


_sigma: Optional[ctypes.CDLL] = None
_control: Optional[ctypes.CDLL] = None
_elastic: Optional[ctypes.CDLL] = None


def _proto(lib: ctypes.CDLL, name: str, restype, *argtypes) -> None:
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)


def libsigma() -> ctypes.CDLL:
    """The worker library, loaded once, with its prototypes declared."""
    global _sigma
    if _sigma is None:
        lib = _load(LIBSIGMA, "SIGMA_LIBSIGMA", "client")
        vp, cp, i = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
        _proto(lib, "sigma_open", vp, ctypes.POINTER(SigmaConfPadded))
        _proto(lib, "sigma_open_job", vp, cp, ctypes.c_uint16,
               ctypes.POINTER(SigmaConfPadded), ctypes.c_char_p, ctypes.c_size_t)
        _proto(lib, "sigma_job_parse", i, cp, ctypes.POINTER(SigmaJobPadded), cp,
               ctypes.c_size_t)
        _proto(lib, "sigma_close", None, vp)
        if hasattr(lib, "sigma_version"):  # since 0.1.0's versions
            _proto(lib, "sigma_version", cp)
        _proto(lib, "sigma_tensor_register", vp, vp, cp, ctypes.c_uint32, i, ctypes.c_uint64, i)
        _proto(lib, "sigma_push_pull", i, vp, vp, vp, DONE_CB, vp)
        _proto(lib, "sigma_poll", i, vp, i)
        _proto(lib, "sigma_test", i, vp)
        _proto(lib, "sigma_wait", i, vp)
        _proto(lib, "sigma_last_error", cp, vp)
        _proto(lib, "sigma_last_failure", i, vp, ctypes.POINTER(SigmaFailure))
        _proto(lib, "sigma_get_stats", None, vp, ctypes.POINTER(SigmaStats))
        _proto(lib, "sigma_tensor_nparts", ctypes.c_uint32, vp)
        _proto(lib, "sigma_tensor_part_node", i, vp, ctypes.c_uint32)
        if hasattr(lib, "sigma_node_transport"):  # sessions over shared memory and UDP at once
            _proto(lib, "sigma_node_transport", i, vp, ctypes.c_uint)
        _proto(lib, "sigma_tensor_part_latency", ctypes.c_uint64, vp, ctypes.c_uint32)
        # local aggregation (sigma_local.h; sigma.local)
        _proto(lib, "sigma_local_open", vp, ctypes.POINTER(SigmaLocalConfPadded), vp, cp,
               ctypes.c_size_t)
        _proto(lib, "sigma_local_tensor_register", vp, vp, cp, ctypes.c_uint32, i,
               ctypes.c_uint64, i)
        _proto(lib, "sigma_local_push_pull", i, vp, vp, vp)
        _proto(lib, "sigma_local_start", i, vp, vp, vp)
        _proto(lib, "sigma_local_poll", i, vp, i)
        _proto(lib, "sigma_local_test", i, vp)
        _proto(lib, "sigma_local_last_error", cp, vp)
        _proto(lib, "sigma_local_session", vp, vp)
        _proto(lib, "sigma_local_close", None, vp)
        _sigma = lib
    return _sigma


def libcontrol() -> ctypes.CDLL:
    """The control client and job service, loaded once, with prototypes declared."""
    global _control
    if _control is None:
        libsigma()  # libsigma-control needs libsigma's vocabulary (sigma-control.pc)
        lib = _load(LIBSIGMA_CONTROL, "SIGMA_LIBSIGMA_CONTROL", "control")
        vp, cp, i = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
        _proto(lib, "sg_ctl_secret_load", i, cp, ctypes.c_bool,
               ctypes.POINTER(ctypes.c_uint8), ctypes.POINTER(ctypes.c_size_t), cp,
               ctypes.c_size_t)
        _proto(lib, "sg_ctl_target_is_tcp", ctypes.c_bool, cp)
        _proto(lib, "sg_ctl_client_connect", vp, cp, ctypes.POINTER(ctypes.c_uint8),
               ctypes.c_size_t, ctypes.c_uint32)
        _proto(lib, "sg_ctl_client_close", None, vp)
        _proto(lib, "sg_ctl_client_call", i, vp, cp, cp, ctypes.POINTER(ctypes.c_void_p),
               ctypes.POINTER(ctypes.c_void_p))
        _proto(lib, "sg_ctl_job_service_create", ctypes.c_int64, ctypes.POINTER(CtlJobsvc),
               ctypes.POINTER(CtlJobSpecPadded), cp, ctypes.c_size_t, cp, ctypes.c_size_t)
        _proto(lib, "sg_ctl_job_service_destroy", i, ctypes.POINTER(CtlJobsvc), ctypes.c_uint32,
               cp, ctypes.c_size_t)
        _proto(lib, "sg_etcd_create", vp, ctypes.POINTER(EtcdConf))
        _proto(lib, "sg_etcd_destroy", None, vp)
        _proto(lib, "sg_etcd_last_error", cp, vp)
        _proto(lib, "sg_etcd_nodes_get", i, vp, cp, ctypes.POINTER(EtcdNode), ctypes.c_uint,
               ctypes.POINTER(EtcdGarbage))
        _proto(lib, "sg_etcd_prefix", i, cp, cp, ctypes.c_size_t)
        _proto(lib, "sg_etcd_put", i, vp, cp, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int64)
        _proto(lib, "sg_etcd_put_if_absent", i, vp, cp, ctypes.c_char_p, ctypes.c_size_t,
               ctypes.c_int64, ctypes.POINTER(ctypes.c_char_p), ctypes.c_uint)
        _proto(lib, "sg_etcd_delete", i, vp, cp, ctypes.c_bool)
        _proto(lib, "sg_etcd_get_prefix", i, vp, cp, ctypes.POINTER(ctypes.POINTER(EtcdKv)),
               ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_int64))
        _proto(lib, "sg_etcd_kvs_free", None, ctypes.POINTER(EtcdKv), ctypes.c_size_t)
        _proto(lib, "sg_etcd_lease_grant", i, vp, ctypes.c_uint32,
               ctypes.POINTER(ctypes.c_int64))
        _proto(lib, "sg_etcd_lease_keepalive", i, vp, ctypes.c_int64,
               ctypes.POINTER(ctypes.c_int64))
        _proto(lib, "sg_etcd_lease_revoke", i, vp, ctypes.c_int64)
        _proto(lib, "sg_etcd_job_record", ctypes.c_int64, ctypes.POINTER(EtcdConf), cp, cp,
               ctypes.POINTER(ctypes.c_uint64), ctypes.c_uint32, ctypes.c_uint32, cp,
               ctypes.c_size_t)
        _proto(lib, "sg_etcd_job_unrecord", i, ctypes.POINTER(EtcdConf), cp, ctypes.c_uint32,
               cp, ctypes.c_size_t)
        _proto(lib, "sg_etcd_watch_start", vp, ctypes.POINTER(EtcdConf), cp, ctypes.c_uint32)
        _proto(lib, "sg_etcd_watch_stats", None, vp, ctypes.POINTER(EtcdWatchStats))
        _proto(lib, "sg_etcd_watch_stop", None, vp)
        _control = lib
    return _control


def libc_free(ptr: int) -> None:
    """free() a string the control client allocated."""
    libc = ctypes.CDLL(None)
    libc.free.argtypes = [ctypes.c_void_p]
    libc.free(ptr)


def libelastic() -> ctypes.CDLL:
    """Elastic jobs (client/sigma_elastic.h), loaded once, with prototypes declared."""
    global _elastic
    if _elastic is None:
        libsigma()
        lib = _load(LIBSIGMA_ELASTIC, "SIGMA_LIBSIGMA_ELASTIC", "client")
        vp, cp, i, u32 = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint32
        _proto(lib, "sigma_elastic_open", vp, ctypes.POINTER(ElasticConf), cp, ctypes.c_size_t)
        _proto(lib, "sigma_elastic_close", None, vp)
        _proto(lib, "sigma_elastic_tensor", i, vp, cp, u32, i, ctypes.c_uint64, i)
        _proto(lib, "sigma_elastic_push_pull", i, vp, u32, vp, vp)
        _proto(lib, "sigma_elastic_poll", i, vp, i)
        _proto(lib, "sigma_elastic_test", i, vp, u32)
        _proto(lib, "sigma_elastic_get_stats", None, vp, ctypes.POINTER(SigmaStats))
        _proto(lib, "sigma_elastic_part_node", i, vp, u32, u32, cp)
        _proto(lib, "sigma_elastic_status", None, vp, ctypes.POINTER(ElasticStatus))
        _proto(lib, "sigma_elastic_last_error", cp, vp)
        _elastic = lib
    return _elastic

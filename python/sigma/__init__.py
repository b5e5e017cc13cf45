# SPDX-License-Identifier: BSD-3-Clause
"""Sigma for Python: push_pull through Sigma summation nodes.

The package binds the installed C libraries with ctypes: ``libsigma.so.0``
(the worker library, client/sigma.h) and ``libsigma-control.so.0`` (the job
service, control/sg_ctl_client.h). It needs nothing but the standard library;
:mod:`sigma.torch` adds PyTorch (Debian's python3-torch).

- :func:`create_job` / :func:`destroy_job`: make or remove one job on every
  summation node, through their control servers (docs/control.md).
- :class:`Job`: a job as its one-line descriptor gives it.
- :class:`Session`: one rank's session of a job, with a progress thread;
  ``push_pull()`` returns a :class:`Handle`.
- :mod:`sigma.torch`: ``init()``, ``push_pull()``, the DDP communication hook,
  ``DistributedOptimizer``, ``broadcast_parameters()``.
- ``python3 -m sigma.launch``: runs N ranks of a training script here.

docs/python.md describes the design, the threading, the errors and their bounds.
"""

from .errors import (SigmaConfigError, SigmaError, SigmaNodeSilentError, SigmaRanksMissingError,
                     SigmaTimeoutError)
from .job import Job, JobNode, NodeTarget, create_job, destroy_job, load_secret, parse_nodes
from .session import Handle, Session, retry_budget_s, silent_bound_s

# The release: the top meson.build's project version (meson refuses to configure
# when they differ). library_version() is the loaded libsigma's.
__version__ = "0.1.0"


def library_version() -> str:
    """The release of the libsigma this package loaded (``sigma_version()``)."""
    from . import _lib

    lib = _lib.libsigma()
    if not hasattr(lib, "sigma_version"):
        return "older than 0.1.0"
    return lib.sigma_version().decode()


__all__ = [
    "SigmaError", "SigmaTimeoutError", "SigmaNodeSilentError", "SigmaRanksMissingError",
    "SigmaConfigError", "Job", "JobNode", "NodeTarget", "create_job", "destroy_job",
    "load_secret", "parse_nodes", "Session", "Handle", "retry_budget_s", "silent_bound_s",
    "__version__", "library_version",
]

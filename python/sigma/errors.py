# SPDX-License-Identifier: BSD-3-Clause
"""Sigma's Python exceptions.

Every failure of libsigma or of the job service becomes one of these, with
the library's own message (node, tensor, key, chunk, round, missing ranks).
"""

from __future__ import annotations

import errno
import os
from typing import Optional


class SigmaError(RuntimeError):
    """A Sigma operation failed.

    Attributes:
        errno: the negated libsigma status (``errno.ETIMEDOUT``...), or None.
        detail: libsigma's or the job service's own message.
    """

    def __init__(self, message: str, err: Optional[int] = None, detail: str = "") -> None:
        super().__init__(message)
        self.errno = err
        self.detail = detail


class SigmaTimeoutError(SigmaError):
    """An operation did not complete in bounded time: a summation node stopped
    answering (:class:`SigmaNodeSilentError`), ranks did not push within the
    wait for them (:class:`SigmaRanksMissingError`), a session's watchdog
    fired, or a wait's own timeout ran out. The message names the node, key,
    round and, when the node reported them, the missing ranks.

    Attributes (None when not known):
        node: the node's label as libsigma names it (``name (addr:port)``).
        key, chunk, round: the wire key, chunk and round of the chunk that failed.
        missing_ranks: the ranks the node reported missing (a list).
    """

    def __init__(self, message: str, err: Optional[int] = None, detail: str = "",
                 failure: Optional[dict] = None) -> None:
        super().__init__(message, err, detail)
        f = failure or {}
        self.node: Optional[str] = f.get("node")
        self.key: Optional[int] = f.get("key")
        self.chunk: Optional[int] = f.get("chunk")
        self.round: Optional[int] = f.get("round")
        self.missing_ranks: Optional[list[int]] = f.get("missing_ranks")


class SigmaNodeSilentError(SigmaTimeoutError):
    """A summation node answered none of ``max_retries`` resends in a row: it
    is dead, or unreachable from this rank (the short bound,
    ``Session.silent_bound``)."""


class SigmaRanksMissingError(SigmaTimeoutError):
    """The node is alive and holds this rank's push, but the ranks in
    ``missing_ranks`` did not push within the wait for them (the long bound,
    ``ranks_wait``): they are dead, stuck or paused longer."""


class SigmaConfigError(SigmaError, ValueError):
    """Bad configuration, refused before anything runs; the message names the fix."""


# enum sigma_fail_kind (client/sigma.h)
_KIND_CLASS = {1: SigmaNodeSilentError, 2: SigmaRanksMissingError}


def status_error(status: int, detail: str, what: str,
                 failure: Optional[dict] = None) -> SigmaError:
    """The exception for a libsigma status (a negative errno), its message, and
    its parts (``failure``: kind, node, key, chunk, round, missing_ranks, from
    ``sigma_last_failure()``)."""
    code = -status
    name = errno.errorcode.get(code, str(code))
    text = f"{what}: {detail}" if detail else f"{what}: {os.strerror(code)} ({name})"
    if code != errno.ETIMEDOUT:
        return SigmaError(text, code, detail)
    cls = _KIND_CLASS.get((failure or {}).get("kind"), SigmaTimeoutError)
    return cls(text, code, detail, failure)

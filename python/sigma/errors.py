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
    """An operation got no answer within its retries: a summation node or a
    rank is gone (the message names the node, key, round and, when the node
    reported them, the missing ranks), or a wait's own timeout ran out."""


class SigmaConfigError(SigmaError, ValueError):
    """Bad configuration, refused before anything runs; the message names the fix."""


def status_error(status: int, detail: str, what: str) -> SigmaError:
    """The exception for a libsigma status (a negative errno) and its message."""
    code = -status
    name = errno.errorcode.get(code, str(code))
    text = f"{what}: {detail}" if detail else f"{what}: {os.strerror(code)} ({name})"
    cls = SigmaTimeoutError if code == errno.ETIMEDOUT else SigmaError
    return cls(text, code, detail)

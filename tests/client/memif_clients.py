#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Misbehaving memif clients, for tests/client/test_client_memif_guard.sh.

Usage: memif_clients.py SOCKET ACTION [ACTION...]; each action runs in turn:
  burst:N      N connections at once (non-blocking), all closed at once; run it
               while the server is stopped, so that none is accepted before it
               is closed
  garbage      wait for the server's HELLO, send a message of an unknown type
  short        wait for HELLO, send 3 bytes (not a memif message)
  init-close:I wait for HELLO, ask for interface id I (INIT), close at once
  silent       connect and close without a word, after HELLO
  wake-bad     malformed or unwarranted requests for sigmad's wake-up channel
               (docs/sigmad.md), each on its own connection: each must be
               refused with the expected errno in sigmad's ACK (exit 1 if not)
Exit 0 once every action ran; a server that refuses a connection is fine, one
that never says HELLO (or vanishes) is an error (exit 1).
"""
import array
import errno
import os
import socket
import struct
import sys

MSG_LEN = 128  # every memif control message
MSG_HELLO = 2
MSG_INIT = 3
VERSION = 2 << 8  # memif protocol 2.0


def connect(path: str) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(20)
    s.connect(path)
    return s


def hello(s: socket.socket) -> None:
    msg = s.recv(MSG_LEN)
    if len(msg) != MSG_LEN or struct.unpack_from("=H", msg)[0] != MSG_HELLO:
        raise RuntimeError(f"no HELLO from the server (got {len(msg)} bytes)")


def burst(path: str, n: int) -> None:
    socks = []
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.setblocking(False)
        try:
            s.connect(path)
        except BlockingIOError:  # the listen backlog is full: fine
            s.close()
            continue
        socks.append(s)
    for s in socks:
        s.close()
    print(f"burst: {len(socks)} of {n} connected and closed")


def init_msg(iface: int) -> bytes:
    # type, version, interface id, mode (ethernet), secret[24], name[32]
    return struct.pack("=HHIB24s32s", MSG_INIT, VERSION, iface, 0, b"", b"memif_clients")


WAKE = 0x5357  # sigmad's wake-up channel messages (not a memif type)
WAKE_VERSION = 1
WAKE_RXQ, WAKE_DONE, WAKE_ACK = 1, 2, 4


def wake_msg(op: int, queue: int = 0, count: int = 0, iface: int = 0,
             version: int = WAKE_VERSION) -> bytes:
    # type, version, interface id, op, queue, count
    return struct.pack("=HHIHHH", WAKE, version, iface, op, queue, count).ljust(MSG_LEN, b"\0")


def send_fds(s: socket.socket, msg: bytes, fds: list[int]) -> None:
    anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    s.sendmsg([msg], anc)


def wake_case(path: str, label: str, want: int, steps: list[tuple[bytes, list[int]]]) -> None:
    """Send @steps after HELLO; sigmad must answer with an ACK of status @want and close."""
    s = connect(path)
    try:
        hello(s)
        for msg, fds in steps:
            send_fds(s, msg, fds)
        reply = s.recv(MSG_LEN)
        if len(reply) != MSG_LEN:
            raise RuntimeError(f"wake-bad {label}: no ACK (got {len(reply)} bytes)")
        t, _, _, op = struct.unpack_from("=HHIH", reply)
        (status,) = struct.unpack_from("=I", reply, 16)
        if t != WAKE or op != WAKE_ACK or status != want:
            raise RuntimeError(f"wake-bad {label}: type {t:#x} op {op} status {status}, "
                               f"expected an ACK of {errno.errorcode.get(want, want)}")
        if s.recv(MSG_LEN) != b"":
            raise RuntimeError(f"wake-bad {label}: the connection stayed open")
    finally:
        s.close()
    print(f"wake-bad {label}: refused with {errno.errorcode[want]}")


def wake_bad(path: str) -> None:
    efd = [os.eventfd(0) for _ in range(3)]
    rd, wr = os.pipe()
    try:
        good = (wake_msg(WAKE_RXQ, 0), [efd[0]])
        wake_case(path, "done-without-queues", errno.EINVAL, [(wake_msg(WAKE_DONE), [])])
        wake_case(path, "rxq-without-fd", errno.EBADF, [(wake_msg(WAKE_RXQ), [])])
        wake_case(path, "rxq-pipe", errno.EBADF, [(wake_msg(WAKE_RXQ), [rd])])
        wake_case(path, "rxq-out-of-order", errno.EINVAL, [(wake_msg(WAKE_RXQ, 3), [efd[0]])])
        wake_case(path, "two-fds", errno.EPROTO, [good, (wake_msg(WAKE_RXQ, 1), efd[1:3])])
        wake_case(path, "version", errno.EPROTO, [(wake_msg(WAKE_RXQ, version=9), [efd[0]])])
        wake_case(path, "unknown-op", errno.EPROTO, [(wake_msg(77), [])])
        wake_case(path, "done-with-fd", errno.EPROTO, [good, (wake_msg(WAKE_DONE, count=1),
                                                              [efd[1]])])
        wake_case(path, "count-mismatch", errno.EINVAL, [good, (wake_msg(WAKE_DONE, count=2), [])])
        wake_case(path, "unknown-id", errno.ENODEV,
                  [good, (wake_msg(WAKE_DONE, count=1, iface=99), [])])
        # id 0 exists, but this process holds no memif session on it
        wake_case(path, "no-session", errno.ENOTCONN, [good, (wake_msg(WAKE_DONE, count=1), [])])
    finally:
        for fd in efd + [rd, wr]:
            os.close(fd)


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    path = argv[1]
    for action in argv[2:]:
        name, _, arg = action.partition(":")
        if name == "burst":
            burst(path, int(arg))
            continue
        if name == "wake-bad":
            wake_bad(path)
            continue
        s = connect(path)
        try:
            hello(s)
            if name == "garbage":
                s.send(b"\xff" * MSG_LEN)
            elif name == "short":
                s.send(b"\x01\x02\x03")
            elif name == "init-close":
                s.send(init_msg(int(arg)).ljust(MSG_LEN, b"\0"))
            elif name != "silent":
                raise ValueError(f"unknown action {action!r}")
        finally:
            s.close()
        print(f"{action}: done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

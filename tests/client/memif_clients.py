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
Exit 0 once every action ran; a server that refuses a connection is fine, one
that never says HELLO (or vanishes) is an error (exit 1).
"""
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

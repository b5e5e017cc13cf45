#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""free_ports.py N: print a base port with N free consecutive TCP ports on
127.0.0.1 after it (probed: other tests and runs may use ports at the same
time). The etcd of the failover test and benchmark (etcd_lib.sh) and of the
Python tests (tests/python/sgtest.py) take their ports from here."""

import os
import random
import socket
import sys


def free_ports(n: int) -> int:
    """A base port with n free consecutive TCP ports on 127.0.0.1 after it."""
    rnd = random.Random(os.getpid())
    for _ in range(500):
        base = rnd.randrange(20000, 60000 - n)
        socks = []
        try:
            for p in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free ports")


if __name__ == "__main__":
    print(free_ports(int(sys.argv[1])))

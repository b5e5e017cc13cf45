#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""N Sigma workers over ordinary kernel UDP sockets (docs/protocol.md).

Each worker pushes every chunk of every key for a number of rounds, waits for
its RESULT, retransmits after a timeout, and checks every element against the
sum computed here. Exit 0 when every result was right, 1 otherwise.
Usage: dp_kernel_workers.py NODE_IP NODE_PORT MY_IP WORKERS KEYS PART_BYTES
       CHUNK_BYTES ROUNDS TOKEN [STEER_PORTS]
With STEER_PORTS = R, each push goes to NODE_PORT + k, k cycling over 0..R by
worker and chunk: the node's port and each of its R reducers' ports
(docs/sigmad.md, "Steering"), owner or not; every port must sum alike.
Environment: SIGMA_JOB (job id, 1), SIGMA_PORT_BASE (worker w sends from
UDP port SIGMA_PORT_BASE + w, 41000) and SIGMA_RANKS=FIRST:COUNT (this process
runs ranks FIRST..FIRST+COUNT-1 of the WORKERS, whose sum it checks; default
all of them), so that a job's workers can come from several addresses.
"""
import os
import select
import socket
import struct
import sys
import time

HDR = struct.Struct(">IBBBBIHHQIIIIII")
MAGIC, VERSION, PUSH, RESULT, FP32 = 0x53474D41, 1, 1, 2, 0


def value(rank, key, chunk, rnd, i):
    return float((rank + 1) * (i + 3 * key + 5 * chunk + 7 * rnd + 1) % 97)


def main():
    node_ip, node_port, my_ip = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    workers, keys, part, chunk_bytes, rounds = map(int, sys.argv[4:9])
    token, job = int(sys.argv[9], 0), int(os.environ.get("SIGMA_JOB", "1"))
    base = int(os.environ.get("SIGMA_PORT_BASE", "41000"))
    steer = int(sys.argv[10]) if len(sys.argv) > 10 else 0
    first, count = map(int, os.environ.get("SIGMA_RANKS", "0:%d" % workers).split(":"))
    mine = range(first, first + count)
    used = set()
    nchunks = (part + chunk_bytes - 1) // chunk_bytes
    socks = {}
    for r in mine:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind((my_ip, base + r))
        socks[r] = s
    ok = bad = retrans = 0
    deadline = time.monotonic() + 60
    for rnd in range(rounds):
        for key in range(keys):
            for chunk in range(nchunks):
                off = chunk * chunk_bytes
                n = min(chunk_bytes, part - off) // 4
                want = [sum(value(w, key, chunk, rnd, i) for w in range(workers))
                        for i in range(n)]
                pending = set(mine)
                while pending:
                    if time.monotonic() > deadline:
                        print("timed out: key %d chunk %d round %d waiting for %s"
                              % (key, chunk, rnd, sorted(pending)))
                        return 1
                    for w in pending:
                        hdr = HDR.pack(MAGIC, VERSION, PUSH, 0, FP32, job, w, 0, token, key,
                                       chunk, nchunks, rnd, n, off)
                        pl = struct.pack("<%df" % n,
                                         *(value(w, key, chunk, rnd, i) for i in range(n)))
                        port = node_port + (w + chunk + key) % (steer + 1)
                        used.add(port)
                        socks[w].sendto(hdr + pl, (node_ip, port))
                    t_end = time.monotonic() + 0.3
                    while pending and time.monotonic() < t_end:
                        rd, _, _ = select.select([socks[w] for w in pending], [], [], 0.05)
                        for s in rd:
                            data, src = s.recvfrom(65536)
                            f = HDR.unpack_from(data)
                            if f[0] != MAGIC or f[2] != RESULT or src[0] != node_ip:
                                continue
                            w = f[6]
                            if (f[9], f[10], f[12]) != (key, chunk, rnd) or w not in pending:
                                continue
                            got = struct.unpack_from("<%df" % f[13], data, HDR.size)
                            if list(got) == want:
                                ok += 1
                            else:
                                bad += 1
                                print("wrong sum: key %d chunk %d round %d rank %d"
                                      % (key, chunk, rnd, w))
                            pending.discard(w)
                    if pending:
                        retrans += len(pending)
    print("kernel workers: %d results ok, %d wrong, %d retransmits, UDP ports %s"
          % (ok, bad, retrans, sorted(used)))
    if len(used) != steer + 1:
        print("not every steering port was used")
        return 1
    return 0 if bad == 0 and ok == count * keys * nchunks * rounds else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Garbage for a Sigma node from many source addresses (docs/sigmad.md,
"Reply addresses"): COUNT datagrams, each from a UDP source port of its own
(FIRST_PORT, FIRST_PORT + 1, ...), in turn 60 zero bytes, a PUSH of job JOB
with a wrong token, and a PUSH of job 99. None of them may cost a worker its
place in the node's table of reply addresses.
Usage: dp_flood.py NODE_IP NODE_PORT MY_IP COUNT FIRST_PORT JOB TOKEN
"""
import socket
import struct
import sys
import time

HDR = struct.Struct(">IBBBBIHHQIIIIII")
MAGIC, VERSION, PUSH, FP32 = 0x53474D41, 1, 1, 0


def main():
    node = (sys.argv[1], int(sys.argv[2]))
    my_ip = sys.argv[3]
    count, first, job = map(int, sys.argv[4:7])
    token = int(sys.argv[7], 0)
    chunk = 1424
    for i in range(count):
        kind = i % 3
        if kind == 0:
            msg = bytes(60)
        else:
            hdr = HDR.pack(MAGIC, VERSION, PUSH, 0, FP32, job if kind == 1 else 99, 0, 0,
                           token ^ 0xFFFF if kind == 1 else token, 0, 0, 1, 0, chunk // 4, 0)
            msg = hdr + bytes(chunk)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind((my_ip, first + i))
            s.sendto(msg, node)
        if i % 100 == 99:
            time.sleep(0.005)  # within what the node's af_packet rings take
    print("flood: %d datagrams from ports %d..%d" % (count, first, first + count - 1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Probes for sigmad's kernel socket transport (tests/client/test_client_socket.sh).

sock_probe.py garbage HOST PORT JOB [PORT...]
    From one kernel UDP socket, send each port: a 10-byte datagram (short), a
    PUSH of job JOB with a wrong token, 200 random bytes, 100 bytes without
    Sigma's magic, and a 9500-byte datagram with Sigma's magic (longer than
    any Sigma datagram). Then wait 0.5 s: any answer is a failure (exit 1).
    Prints how many of each kind went out, as "sent KIND N".
sock_probe.py version HOST PORT JOB
    A worker of wire protocol version 2 (whose header is a guess: version 1's
    with another version byte): a PUSH, a PULL and a RESULT of job JOB. A node
    of version 1 answers the PUSH and the PULL, and only those, with ERROR
    VERSION as docs/protocol.md ("Versions") gives it byte for byte. Prints
    "version answers: N right, N wrong"; exit 0 when 2 are right, none wrong.
sock_probe.py gso HOST PORT JOB TOKEN N ELEMS PARTITION CHUNK ROUNDS
    N fp32 workers of job JOB (tensor 0 of ELEMS elements, keys of PARTITION
    bytes, chunks of CHUNK bytes), each sending all chunks of a key in
    UDP_SEGMENT (GSO) messages of up to 7 datagrams: with UDP_GRO, sigmad
    receives each such message whole and splits it. Every element of every
    RESULT is checked against the exact sum; missing results are asked for
    again (one datagram per message) every 200 ms. Exit 0 when all are right.
sock_probe.py waiting HOST PORT JOB TOKEN N CHUNK_BYTES
    Rank 0 of job JOB (N >= 2 workers, fp32, tensor 0 of at least one full
    chunk of CHUNK_BYTES) pushes chunk 0 of key 0, round 0, then resends it 4
    times 40 ms apart while no other rank pushes: each resend must be answered
    with ERROR WAITING (code 9) naming ranks 1..N-1 (a live node that holds
    the push and waits for the others), and nothing else may come. Then ranks
    1..N-1 push, and every rank must get the RESULT. Exit 0 when all held.
sock_probe.py straggler HOST PORT JOB TOKEN N CHUNK_BYTES SLOW DELAY_MS ROUNDS
    N fp32 ranks of job JOB (tensor 0 of one full chunk) sum ROUNDS rounds of
    chunk 0 of key 0; in each, rank SLOW pushes DELAY_MS after the others.
    Every rank's RESULT is checked against the exact sum (a push whose RESULT
    is late is resent). Prints "straggler: N wrong"; exit 0 when none is.
sock_probe.py telemetry SOCKET COMMAND [KEY...]
    Print sigmad's answer to a telemetry command (dpdk_telemetry.v2 socket) as
    JSON; with KEYs, print only "KEY VALUE" lines (a missing key prints -1).
"""
import array
import json
import os
import time
import select
import socket
import struct
import sys

HDR = struct.Struct(">IBBBBIHHQIIIIII")
MAGIC, VERSION, PUSH, FP32 = 0x53474D41, 1, 1, 0


def garbage(host: str, ports: list[int], job: int) -> int:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((host, 0))
    kinds = {
        "short": b"\x53\x47\x4d\x41\x01" + b"\x00" * 5,
        "wrong_token": HDR.pack(MAGIC, VERSION, PUSH, 0, FP32, job, 0, 0, 0xBAD70C3,
                                0, 0, 1, 0, 2, 0) + b"\x00" * 8,
        "random": os.urandom(200),
        "not_sigma": b"\x00\x01" * 50,
        "too_long": struct.pack(">IB", MAGIC, VERSION) + b"\x00" * 9495,
    }
    # os.urandom may start with the magic by chance only with odds of 2^-40
    for port in ports:
        for data in kinds.values():
            s.sendto(data, (host, port))
    for name in kinds:
        print("sent %s %d" % (name, len(ports)))
    replies = 0
    while select.select([s], [], [], 0.5)[0]:
        s.recv(65536)
        replies += 1
    print("replies %d" % replies)
    return 1 if replies else 0


def version(host: str, port: int, job: int) -> int:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((host, 0))
    sent = {}
    for typ, rank in ((PUSH, 1), (3, 2), (RESULT, 3)):
        nelem = 2 if typ != 3 else 0
        pkt = HDR.pack(MAGIC, 2, typ, 0, FP32, job, rank, 0, 0x1234 + rank, 7, 0, 1, 5, nelem,
                       0) + b"\x00" * (4 * nelem)
        sent[rank] = pkt
        s.sendto(pkt, (host, port))
    right = wrong = 0
    while select.select([s], [], [], 0.5)[0]:
        d = s.recv(65536)
        rank = struct.unpack_from(">H", d, 12)[0] if len(d) >= 14 else 0
        p = sent.get(rank, b"")
        want = (struct.pack(">IBBBB", MAGIC, VERSION, 5, 0, 0) + p[8:14] + b"\x00\x08" +
                p[16:48] + struct.pack(">II", VERSION, VERSION))
        if rank in (1, 2) and d == want:
            right += 1
        else:
            wrong += 1
            print("wrong answer: %s" % d.hex())
    print("version answers: %d right, %d wrong" % (right, wrong))
    return 0 if right == 2 and wrong == 0 else 1


UDP_SEGMENT = 103
RESULT = 2


def gso_workers(host: str, port: int, job: int, token: int, n: int, elems: int, part: int,
                chunk: int, rounds: int) -> int:
    pelems, celems = part // 4, chunk // 4
    socks = []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        s.bind((host, 0))
        socks.append(s)
    keys = (elems + pelems - 1) // pelems
    bad = gso_msgs = 0
    for rnd in range(rounds):
        # every datagram of the round, per worker: (key, chunk) -> bytes
        dgrams = [{} for _ in range(n)]
        want = {}
        for key in range(keys):
            kel = min(pelems, elems - key * pelems)
            nch = (kel + celems - 1) // celems
            for c in range(nch):
                off = c * celems
                cnt = min(celems, kel - off)
                base = key * pelems + off
                want[(key, c)] = array.array(
                    "f", [sum((w + 1) * ((base + i + rnd) % 50) for w in range(n))
                          for i in range(cnt)])
                for w in range(n):
                    pl = array.array("f", [(w + 1) * ((base + i + rnd) % 50)
                                           for i in range(cnt)])
                    if sys.byteorder != "little":
                        pl.byteswap()
                    dgrams[w][(key, c)] = HDR.pack(MAGIC, VERSION, PUSH, 0, FP32, job, w, 0,
                                                   token, key, c, nch, rnd, cnt,
                                                   off * 4) + pl.tobytes()
        # each worker: the chunks of a key in GSO messages of equal datagrams
        for w in range(n):
            items = sorted(dgrams[w].items())
            i = 0
            while i < len(items):
                size = len(items[i][1])
                j = i
                while j < len(items) and j - i < 7 and len(items[j][1]) == size and \
                        items[j][0][0] == items[i][0][0]:
                    j += 1
                data = b"".join(d for _, d in items[i:j])
                anc = [(socket.SOL_UDP, UDP_SEGMENT, struct.pack("=H", size))] if j - i > 1 else []
                socks[w].sendmsg([data], anc, 0, (host, port))
                gso_msgs += j - i > 1
                i = j
        pending = [set(want) for _ in range(n)]
        deadline = time.monotonic() + 20
        last = time.monotonic()
        while any(pending) and time.monotonic() < deadline:
            ready = select.select(socks, [], [], 0.2)[0]
            for s in ready:
                w = socks.index(s)
                while True:
                    try:
                        d = s.recv(65536, socket.MSG_DONTWAIT)
                    except BlockingIOError:
                        break
                    f = HDR.unpack_from(d)
                    if f[2] != RESULT or f[12] != rnd or (f[9], f[10]) not in pending[w]:
                        continue
                    got = array.array("f", d[48:])
                    if sys.byteorder != "little":
                        got.byteswap()
                    if got != want[(f[9], f[10])]:
                        bad += 1
                    pending[w].discard((f[9], f[10]))
            if time.monotonic() - last > 0.2:
                last = time.monotonic()
                for w in range(n):
                    for kc in pending[w]:
                        socks[w].sendto(dgrams[w][kc], (host, port))
        if any(pending):
            print("round %d: %d results missing" % (rnd, sum(len(p) for p in pending)))
            return 1
    print("gso: %d rounds, %d GSO messages sent, %d wrong results" % (rounds, gso_msgs, bad))
    return 1 if bad else 0


ERROR, WAITING = 5, 9


def waiting(host: str, port: int, job: int, token: int, n: int, chunk: int) -> int:
    """A resend of a held push is answered WAITING (docs/protocol.md)."""
    elems = chunk // 4
    socks = []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind((host, 0))
        socks.append(s)

    def push(rank: int, flags: int) -> None:
        payload = array.array("f", [float(rank + 1)] * elems).tobytes()
        socks[rank].sendto(HDR.pack(MAGIC, VERSION, PUSH, flags, FP32, job, rank, 0, token,
                                    0, 0, 1, 0, elems, 0) + payload, (host, port))

    def answers(rank: int, wait: float) -> list:
        out = []
        while select.select([socks[rank]], [], [], wait)[0]:
            data = socks[rank].recv(65536)
            out.append((HDR.unpack_from(data), data[HDR.size:]))
            wait = 0.05
        return out

    bad = 0
    push(0, 0)
    first = answers(0, 0.2)
    bad += len(first) != 0  # the node waits: a first push is not answered
    missing = ((1 << n) - 1) & ~1
    got = 0
    for _ in range(4):
        time.sleep(0.04)
        push(0, 1)  # RETRANS
        for h, body in answers(0, 0.3):
            ok = (h[2] == ERROR and h[6] == 0 and h[7] == WAITING and h[5] == job and
                  h[8] == token and h[9] == 0 and h[10] == 0 and h[12] == 0 and
                  len(body) == 8 and struct.unpack(">Q", body)[0] == missing)
            if ok:
                got += 1
            else:
                print("unexpected answer: %r %r" % (h, body))
                bad += 1
    print("waiting: %d of 4 resends answered WAITING (missing ranks 0x%x)" % (got, missing))
    bad += got != 4
    for r in range(1, n):
        push(r, 0)
    want = float(n * (n + 1) // 2)
    for r in range(n):
        res = [a for a in answers(r, 1.0) if a[0][2] == RESULT]
        vals = array.array("f", res[0][1]) if res else []
        if len(res) != 1 or len(vals) != elems or any(v != want for v in vals):
            print("rank %d: result %r" % (r, (len(res), vals[:3] if vals else None)))
            bad += 1
    print("waiting: %d wrong" % bad)
    return 1 if bad else 0


def straggler(host: str, port: int, job: int, token: int, n: int, chunk: int, slow: int,
              delay_ms: float, rounds: int) -> int:
    """One rank late by DELAY_MS in every round: the node names it (docs/control.md)."""
    elems = chunk // 4
    socks = []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind((host, 0))
        socks.append(s)

    def push(rank: int, rnd: int, flags: int) -> None:
        payload = array.array("f", [float(rank + 1 + rnd)] * elems).tobytes()
        socks[rank].sendto(HDR.pack(MAGIC, VERSION, PUSH, flags, FP32, job, rank, 0, token,
                                    0, 0, 1, rnd, elems, 0) + payload, (host, port))

    bad = 0
    for rnd in range(rounds):
        for r in range(n):
            if r != slow:
                push(r, rnd, 0)
        time.sleep(delay_ms / 1e3)
        push(slow, rnd, 0)
        want = float(sum(r + 1 + rnd for r in range(n)))
        for r in range(n):
            got = None
            for tries in range(4):
                while got is None and select.select([socks[r]], [], [], 0.5)[0]:
                    data = socks[r].recv(65536)
                    h = HDR.unpack_from(data)
                    if h[2] == RESULT and h[12] == rnd:
                        got = array.array("f", data[HDR.size:])
                if got is not None:
                    break
                push(r, rnd, 1)  # RETRANS: its RESULT was lost
            if got is None or len(got) != elems or any(v != want for v in got):
                print("rank %d round %d: result %r" % (r, rnd, got[:3] if got else None))
                bad += 1
    print("straggler: %d wrong" % bad)
    return 1 if bad else 0


def telemetry(path: str, cmd: str, keys: list[str]) -> int:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(path)
    s.recv(1 << 16)  # the greeting
    s.send(cmd.encode())
    # the answer is keyed by the command without its parameters (",ID")
    ans = json.loads(s.recv(1 << 20).decode())[cmd.split(",")[0]]
    if not keys:
        print(json.dumps(ans, indent=1, sort_keys=True))
        return 0
    for k in keys:
        v = ans
        for part in k.split("."):
            v = v.get(part, -1) if isinstance(v, dict) else -1
        print("%s %s" % (k, v))
    return 0


def main() -> int:
    if len(sys.argv) >= 5 and sys.argv[1] == "garbage":
        host, job = sys.argv[2], int(sys.argv[4])
        ports = [int(sys.argv[3])] + [int(p) for p in sys.argv[5:]]
        return garbage(host, ports, job)
    if len(sys.argv) == 5 and sys.argv[1] == "version":
        return version(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    if len(sys.argv) == 11 and sys.argv[1] == "gso":
        a = sys.argv
        return gso_workers(a[2], int(a[3]), int(a[4]), int(a[5], 16), int(a[6]), int(a[7]),
                           int(a[8]), int(a[9]), int(a[10]))
    if len(sys.argv) == 8 and sys.argv[1] == "waiting":
        a = sys.argv
        return waiting(a[2], int(a[3]), int(a[4]), int(a[5], 16), int(a[6]), int(a[7]))
    if len(sys.argv) == 11 and sys.argv[1] == "straggler":
        a = sys.argv
        return straggler(a[2], int(a[3]), int(a[4]), int(a[5], 16), int(a[6]), int(a[7]),
                         int(a[8]), float(a[9]), int(a[10]))
    if len(sys.argv) >= 4 and sys.argv[1] == "telemetry":
        return telemetry(sys.argv[2], sys.argv[3], sys.argv[4:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())

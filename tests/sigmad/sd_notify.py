#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Play systemd's side of Type=notify for sigmad (tests/sigmad/test_sigmad_service.sh).

sd_notify.py DIR CTL_SOCKET -- COMMAND...

Binds a Unix datagram socket DIR/notify, runs COMMAND with NOTIFY_SOCKET
pointing at it, and prints each notification as "notify: KEY=VALUE" lines.
The moment READY=1 arrives it checks what readiness promises
(docs/deploy.md, "systemd"), first try, no retry: the control server on
CTL_SOCKET answers `version`, and `lcores_get` shows every lcore with loop
cycles counted (each has polled). It prints "at-ready: version ok",
"at-ready: N of N lcores polled". Then SIGHUP: RELOADING=1 (with
MONOTONIC_USEC) and READY=1 again; then SIGTERM: STOPPING=1, and the exit
status ("exit: N"). If COMMAND exits before READY=1, it prints "exit: N"
and what came. Everything within 60 s.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import time


def rpc(path: str, method: str):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(path)
        s.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method}).encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    return json.loads(buf)


def main() -> int:
    d, ctl = sys.argv[1], sys.argv[2]
    cmd = sys.argv[sys.argv.index("--") + 1:]
    path = os.path.join(d, "notify")
    if os.path.exists(path):
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(0.2)
    proc = subprocess.Popen(cmd, env=dict(os.environ, NOTIFY_SOCKET=path))
    deadline = time.monotonic() + 60
    readies = 0
    step = "start"
    while time.monotonic() < deadline:
        try:
            msg = sock.recv(4096).decode()
        except socket.timeout:
            if proc.poll() is not None:
                break
            continue
        for line in msg.split("\n"):
            if line:
                print("notify: " + line, flush=True)
        if "READY=1" in msg.split("\n"):
            readies += 1
            if readies == 1:
                try:
                    v = rpc(ctl, "version")
                    print("at-ready: version %s" % ("ok" if "result" in v else v), flush=True)
                    lc = rpc(ctl, "lcores_get")["result"]
                    polled = sum(1 for x in lc if x["busy_cycles"] + x["idle_cycles"] > 0)
                    print("at-ready: %d of %d lcores polled" % (polled, len(lc)), flush=True)
                except (OSError, ValueError, KeyError) as e:
                    print("at-ready: the control server does not answer: %s" % e, flush=True)
                step = "reload"
                proc.send_signal(signal.SIGHUP)
            elif step == "reload":
                step = "stop"
                proc.send_signal(signal.SIGTERM)
        if "STOPPING=1" in msg.split("\n"):
            break
    try:
        rc = proc.wait(timeout=max(1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = proc.wait()
        print("timeout: killed", flush=True)
    print("exit: %d" % rc, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

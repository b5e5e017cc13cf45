#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""A fake summation node's control server, for tests of the version checks.

fake_node.py SOCKET LOG API PROTOCOL

Serves JSON-RPC 2.0, one object per line (docs/control.md, "Framing"), on the
Unix socket SOCKET. `version` answers release "9.9.9", control API API and
wire protocol PROTOCOL; with API "none" it is an unknown method (-32601), as
on a node older than the `version` method. node_info and job_list answer as a
node would; every other method is refused. Each method called is appended to
LOG, one per line, so that a test can check what a client went on to call.
Runs until killed.
"""
import json
import os
import socket
import sys


def answer(req: dict, api: str, proto: int) -> dict:
    method = req.get("method")
    out = {"jsonrpc": "2.0", "id": req.get("id")}
    if method == "version" and api != "none":
        out["result"] = {"release": "9.9.9", "api": int(api), "protocol": proto,
                         "soversion": 0}
    elif method == "node_info":
        out["result"] = {"name": "fake", "cores": 1, "numa_nodes": 1, "ports": [],
                         "reducer_lcores": [], "draining": False, "addr": "127.0.0.1",
                         "udp_port": 9, "kind": "cpu", "gbps": 1.0,
                         "max_chunk_bytes": 8920}
    elif method == "job_list":
        out["result"] = []
    elif method == "version":
        out["error"] = {"code": -32601, "message": "method not found: version"}
    else:
        out["error"] = {"code": -32003, "message": "fake node refuses %s" % method}
    return out


def main() -> int:
    path, log, api, proto = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    if os.path.exists(path):
        os.unlink(path)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(8)
    while True:
        conn, _ = srv.accept()
        with conn, conn.makefile("rwb") as f:
            for line in f:
                if not line.strip():
                    continue
                req = json.loads(line)
                with open(log, "a") as lf:
                    lf.write("%s\n" % req.get("method"))
                f.write(json.dumps(answer(req, api, proto)).encode() + b"\n")
                f.flush()


if __name__ == "__main__":
    sys.exit(main())

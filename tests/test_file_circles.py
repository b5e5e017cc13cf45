#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
""".ci/file-circles against small trees built here: a circle of calls, a
circle of includes, and the same trees without them (and the allowed pair).

usage: test_file_circles.py SOURCE_ROOT
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

FAILS = 0


def check(ok: bool, what: str) -> None:
    global FAILS
    if not ok:
        FAILS += 1
        print(f"FAIL: {what}")


def tree(root: str, files: dict[str, str]) -> None:
    """Write @files under root/src, compile each .c, and write compile_commands.json."""
    src, build = os.path.join(root, "src"), os.path.join(root, "build")
    shutil.rmtree(root, ignore_errors=True)
    cmds = []
    for rel, text in files.items():
        path = os.path.join(src, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    for rel in files:
        if not rel.endswith(".c"):
            continue
        out = rel.replace("/", "_") + ".o"
        os.makedirs(build, exist_ok=True)
        subprocess.run(["cc", "-c", "-o", os.path.join(build, out), os.path.join(src, rel)],
                       check=True)
        cmds.append({"directory": build, "file": os.path.join(src, rel), "output": out})
    with open(os.path.join(build, "compile_commands.json"), "w", encoding="utf-8") as f:
        json.dump(cmds, f)


def run(tool: str, root: str, *folders: str) -> tuple[int, str]:
    p = subprocess.run([tool, "-C", os.path.join(root, "build"), "-S", os.path.join(root, "src"),
                        *folders], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def main() -> int:
    tool = os.path.join(sys.argv[1], ".ci", "file-circles")
    if shutil.which("cc") is None or shutil.which("nm") is None:
        print("SKIP: needs cc and nm")
        return 77
    root = tempfile.mkdtemp(prefix="sg_file_circles_")
    try:
        calls = {"a/x.c": "int y(void);\nint x(void) { return y(); }\n",
                 "a/y.c": "int x(void);\nint y(void) { return 1; }\nint z(void) { return x(); }\n",
                 "a/w.c": "int y(void);\nint w(void) { return y(); }\n",
                 "b/v.c": "int x(void);\nint v(void) { return x(); }\n"}
        tree(root, calls)
        rc, out = run(tool, root, "a")
        check(rc == 1 and "a: circle of calls: x.c <-> y.c" in out, f"call circle: {rc} {out}")
        check("w.c" not in out, f"w.c only calls into the circle: {out}")
        rc, out = run(tool, root, "b")
        check(rc == 0, f"b calls a, no circle inside b: {rc} {out}")
        calls["a/y.c"] = "int y(void) { return 1; }\n"
        tree(root, calls)
        rc, out = run(tool, root)
        check(rc == 0 and "no circle in 2 folder(s)" in out, f"no circle: {rc} {out}")
        # headers that include each other, with include guards
        calls["a/p.h"] = '#ifndef P_H\n#define P_H\n#include "q.h"\n#endif\n'
        calls["a/q.h"] = '#ifndef Q_H\n#define Q_H\n#include "p.h"\n#endif\n'
        tree(root, calls)
        rc, out = run(tool, root, "a")
        check(rc == 1 and "circle of includes: p.h <-> q.h" in out, f"include circle: {out}")
        # private headers (a subfolder without objects, on the include path):
        # one way is no circle, a planted circle is found, and so is one
        # through a header of the folder itself
        del calls["a/q.h"]
        calls["a/p.h"] = '#ifndef P_H\n#define P_H\n#include "private/r.h"\n#endif\n'
        calls["a/private/r.h"] = '#ifndef R_H\n#define R_H\n#include "s.h"\n#endif\n'
        calls["a/private/s.h"] = '#ifndef S_H\n#define S_H\n#endif\n'
        tree(root, calls)
        rc, out = run(tool, root, "a")
        check(rc == 0, f"private headers one way: {rc} {out}")
        calls["a/private/s.h"] = '#ifndef S_H\n#define S_H\n#include "r.h"\n#endif\n'
        tree(root, calls)
        rc, out = run(tool, root, "a")
        check(rc == 1 and "a: circle of includes: private/r.h <-> private/s.h" in out,
              f"private include circle: {rc} {out}")
        rc, out = run(tool, root, "a/private")
        check(rc == 1 and "circle of includes: r.h <-> s.h" in out,
              f"the private folder named alone: {rc} {out}")
        calls["a/private/s.h"] = '#ifndef S_H\n#define S_H\n#include "p.h"\n#endif\n'
        tree(root, calls)
        rc, out = run(tool, root, "a")
        check(rc == 1 and "circle of includes: p.h <-> private/r.h <-> private/s.h" in out,
              f"a circle through the folder's own header: {rc} {out}")
        # a subfolder with objects of its own is its own folder, not a's headers
        calls["a/private/s.h"] = '#ifndef S_H\n#define S_H\n#endif\n'
        calls["a/sub/t.h"] = '#ifndef T_H\n#define T_H\n#include "../p.h"\n#endif\n'
        calls["a/sub/t.c"] = '#include "t.h"\nint t(void) { return 0; }\n'
        calls["a/private/s.h"] = '#ifndef S_H\n#define S_H\n#include "../sub/t.h"\n#endif\n'
        tree(root, calls)
        rc, out = run(tool, root, "a")
        check(rc == 0, f"a/sub has objects: no circle of a's: {rc} {out}")
        # the one allowed pair: a driver and its helper
        tree(root, {"dataplane/pipeline/sg_dp_eth.c": "int m(void);\nint e(void) { return m(); }\n",
                    "dataplane/pipeline/sg_dp_memif.c":
                    "int e(void);\nint m(void) { return 0; }\nint n(void) { return e(); }\n"})
        rc, out = run(tool, root, "dataplane/pipeline")
        check(rc == 0, f"eth <-> memif is allowed: {rc} {out}")
        rc, out = run(tool, root, "nowhere")
        check(rc == 2, f"a folder without objects: {rc} {out}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("file_circles self-test:", "ok" if FAILS == 0 else f"{FAILS} failure(s)")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())

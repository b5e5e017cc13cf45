#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The docs, --help and the man pages agree on every program's options.

test_doc_options.py SRCDIR MANDIR NAME=PATH...

1. Every option that README.md or docs/*.md gives a program in a command
   (a code block line or an inline code span that names the program) is in
   that program's --help: for sigmad, the options after "--" (before it they
   are EAL's); for sigma-bench, its subcommand's --help; for ./sigma bench
   pytorch and ./sigma bench train, bench/pytorch_ddp.py's and
   bench/cluster_train.py's.
2. Every option of a program's --help is in its man page (MANDIR, made by
   help2man from that --help), unless MANDIR is "none" (no help2man).
"""
import glob
import os
import re
import subprocess
import sys

PROG = re.compile(r"(?<![\w/.-])(?:[\w./-]*/)?(sigmad|sigmactl|sigma-udpd|sigma-plan|sigma-bench)"
                  r"(?![\w.-])|\./sigma bench")
OPT = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
SEP = re.compile(r"(?:^|\s)--(?:\s|$)")
# ./sigma bench subcommands that are Python scripts in bench/, not sigma-bench's
SCRIPTS = {"pytorch": "pytorch_ddp", "train": "cluster_train"}


def code_spans(text: str):
    """(line number, text) of every code block line and inline code span."""
    block = False
    for n, line in enumerate(text.split("\n"), 1):
        if line.strip().startswith("```"):
            block = not block
        elif block:
            yield n, line
        else:
            for m in re.finditer(r"`([^`]+)`", line):
                yield n, m.group(1)


def doc_options(src: str):
    """(file, line, program, subcommand or None, option) for each option in a command."""
    for path in [os.path.join(src, "README.md")] + sorted(glob.glob(os.path.join(src, "docs",
                                                                                 "*.md"))):
        # a shell line continued with a backslash is one command
        text = open(path, encoding="utf-8").read().replace("\\\n", "  ")
        for n, span in code_spans(text):
            for seg in re.split(r"\||;|&&|\$\(", span):
                hits = list(PROG.finditer(seg))
                for i, m in enumerate(hits):
                    prog = m.group(1) or "sigma-bench"
                    rest = seg[m.end():hits[i + 1].start() if i + 1 < len(hits) else len(seg)]
                    if prog == "sigmad" and SEP.search(rest):
                        rest = SEP.split(rest, 1)[1]
                    sub = None
                    if prog == "sigma-bench":
                        words = rest.split()
                        sub = words[0] if words and not words[0].startswith("-") else None
                    if m.group(1) is None and sub in SCRIPTS:
                        # ./sigma bench pytorch runs bench/pytorch_ddp.py, and so on
                        prog, sub = SCRIPTS[sub], None
                    for opt in OPT.findall(rest):
                        yield os.path.relpath(path, src), n, prog, sub, opt


def has(text: str, opt: str) -> bool:
    return re.search(r"(?<![\w-])" + re.escape(opt) + r"(?![\w-])", text) is not None


def main() -> int:
    src, mandir = sys.argv[1], sys.argv[2]
    progs = dict(a.split("=", 1) for a in sys.argv[3:])
    for script in SCRIPTS.values():
        progs[script] = os.path.join(src, "bench", script + ".py")
    helps: dict = {}

    def help_of(prog: str, sub) -> str:
        if (prog, sub) not in helps:
            argv = [progs[prog]] + ([sub] if sub else []) + ["--help"]
            if argv[0].endswith(".py"):
                # Debian's interpreter: python3-torch is installed for it
                argv.insert(0, "/usr/bin/python3" if os.path.exists("/usr/bin/python3")
                            else sys.executable)
            r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
            helps[(prog, sub)] = r.stdout + r.stderr
        return helps[(prog, sub)]

    checks = fails = 0
    for path, line, prog, sub, opt in doc_options(src):
        checks += 1
        if not has(help_of(prog, sub), opt):
            fails += 1
            print(f"FAIL: {path}:{line}: {prog}{' ' + sub if sub else ''} {opt}: not in its "
                  f"--help")
    if mandir != "none":
        for prog in progs:
            if prog in SCRIPTS.values():
                continue  # a benchmark script: no man page
            pages = glob.glob(os.path.join(mandir, prog + ".[18]"))
            if not pages:
                checks += 1
                fails += 1
                print(f"FAIL: no man page of {prog} in {mandir}")
                continue
            # roff writes "\-\-opt" (and "\fB...\fR" around it)
            page = re.sub(r"\\f[BIRP]", "", open(pages[0], encoding="utf-8").read())
            page = page.replace("\\-", "-")
            for opt in sorted(set(OPT.findall(help_of(prog, None)))):
                checks += 1
                if not has(page, opt):
                    fails += 1
                    print(f"FAIL: {prog} --help has {opt}, its man page {pages[0]} does not")
    print(f"doc_options: {checks} checks, {fails} failed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())

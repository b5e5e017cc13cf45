#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Sigma's logging macros and their call sites keep one newline rule.

test_log_lines.py SRCDIR

Every library has one logging macro, and each macro ends the line itself
(docs/architecture.md, "Logging"). So:

1. every macro that the C sources define as a logging macro (a #define
   whose body calls rte_log() or fprintf(stderr, ...) with the format) is one
   of the known ones below, and its body appends "\\n" after the format;
2. no call of one of them has a format whose last string literal ends with
   "\\n" (the line would end twice: an empty log line);
3. each logtype name is registered once (RTE_LOG_REGISTER): rte_log makes two
   registrations of one name a single logtype.
"""
import glob
import os
import re
import sys

MACROS = {"SG_SUM_LOG", "SG_DP_ENG_LOG", "SG_DP_LOG", "SG_AGENT_LOG", "SG_DP_VERBS_LOG",
          "SG_CTL_LOG", "SG_CLI_LOG", "SG_GPU_LOG", "SG_ETCD_LOG"}
FOLDERS = ("common", "summation", "dataplane", "sigmad", "control", "gpu", "client", "udpd", "bench",
           "app")
DEFINE = re.compile(r"^#define\s+(\w+)\(([^)]*)\)((?:.*\\\n)*.*)$", re.M)
REGISTER = re.compile(r"RTE_LOG_REGISTER\(\s*\w+\s*,\s*([\w.]+)\s*,")


def literal_end(text: str, start: int):
    """The format after a macro's '(' at @start: (last token is a literal, its text)."""
    i, depth = start, 0
    # the first argument, the level, when the macro takes one
    while True:
        c = text[i]
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "," and depth == 0:
            break
        elif c == '"':
            return None  # SG_ETCD_LOG: the format comes first
        i += 1
    return i + 1


def format_tokens(text: str, i: int):
    """The tokens of the argument starting at @i, up to a top-level ',' or ')'."""
    toks, depth = [], 0
    while True:
        c = text[i]
        if c == '"':
            j = i + 1
            while text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            toks.append(text[i:j + 1])
            i = j + 1
            continue
        if c.isspace():
            i += 1
            continue
        if c in "([":
            depth += 1
        elif c in ")]":
            if depth == 0:
                return toks
            depth -= 1
        elif c == "," and depth == 0:
            return toks
        m = re.match(r"\w+", text[i:])
        toks.append(m.group(0) if m else c)
        i += len(m.group(0)) if m else 1


def main() -> int:
    src = sys.argv[1]
    files = sorted(f for d in FOLDERS for f in glob.glob(os.path.join(src, d, "**", "*.[ch]"),
                                                         recursive=True))
    bad, calls, names = [], 0, {}
    call = re.compile(r"\b(" + "|".join(sorted(MACROS)) + r")\(")
    for path in files:
        text = open(path, encoding="utf-8").read()
        rel = os.path.relpath(path, src)
        for m in DEFINE.finditer(text):
            body = m.group(3)
            if "rte_log(" not in body and "fprintf(stderr" not in body:
                continue
            if m.group(1) not in MACROS:
                bad.append(f"{rel}: logging macro {m.group(1)} is not one of the known ones")
            elif not re.search(r'\bfmt\s+"\\n"', body):
                bad.append(f"{rel}: {m.group(1)} does not append \"\\n\" after fmt")
        for m in REGISTER.finditer(text):
            names.setdefault(m.group(1), []).append(rel)
        for m in call.finditer(text):
            line = text.rfind("\n", 0, m.start()) + 1
            if text[line:m.start()].lstrip().startswith("#define"):
                continue
            at = literal_end(text, m.end())
            toks = format_tokens(text, at if at is not None else m.end())
            calls += 1
            where = f"{rel}:{text.count(chr(10), 0, m.start()) + 1}"
            if not toks or not (toks[-1].startswith('"') or re.match(r"PRI\w+$", toks[-1])):
                bad.append(f"{where}: {m.group(1)}'s format does not end in a string literal "
                           "or a PRI macro")
            elif toks[-1].endswith('\\n"'):
                bad.append(f"{where}: {m.group(1)}'s format ends with \\n (the macro adds it)")
    for name, where in sorted(names.items()):
        if len(where) > 1:
            bad.append(f"logtype {name} registered {len(where)} times: {', '.join(where)}")
    for b in bad:
        print("FAIL:", b)
    print(f"log_lines: {calls} calls of {len(MACROS)} macros, {len(names)} logtypes, "
          f"{len(bad)} problems")
    return 1 if bad or calls == 0 or not names else 0


if __name__ == "__main__":
    sys.exit(main())

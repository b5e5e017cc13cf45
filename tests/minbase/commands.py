#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""List the programs that Sigma's scripts, tests and benchmarks run.

Reads the shell scripts (every word in a command's place: at a line's start,
after | ; && || ( $( ` and after the wrappers that run a command, such as
timeout, setsid or ip netns exec), meson's find_program() calls, and the
program names that Python and C sources hand to subprocess, exec*() or
system(). What the scripts define themselves (functions), shell builtins and
keywords, variables and the tree's own programs are left out. Prints one name
a line, sorted; ./sigma minbase checks that each is found on a minimal Debian
root once the package lists are installed.

usage: commands.py SRCDIR [--where]   (--where: each name with a file that runs it)
"""

import os
import re
import subprocess
import sys
from pathlib import Path

SHELL_GLOBS = ("sigma", ".ci/run", "tests/**/*.sh", "bench/*.sh", "deploy/*.sh")
PY_GLOBS = ("tests/**/*.py", "bench/*.py", "python/sigma/*.py", "examples/**/*.py")
C_GLOBS = ("tests/**/*.c", "bench/*.c", "udpd/*.c", "client/*.c", "control/*.c")
# words after which the next word is again a command
WRAPPERS = {"timeout", "setsid", "exec", "command", "nohup", "env", "sudo", "time", "then",
            "do", "else", "elif", "if", "while", "until", "!", "xargs", "nice", "chroot",
            "unshare", "nsenter", "taskset", "stdbuf", "flock", "ionice"}
# wrappers' own options that take a value (the value is not the command)
OPT_VALUE = {"timeout": {"-s", "-k", "--signal", "--kill-after"}, "xargs": {"-I", "-n", "-P"},
             "nsenter": {"-t", "--target", "-n"}, "taskset": {"-c"}, "flock": {"-w"},
             "nice": {"-n"}, "env": {"-u"}}
NOT_COMMANDS = {"in", "fi", "done", "esac", "then", "do", "{", "}", "[[", "]]", "((", "))",
                "function", "select", "case", "for", "coproc", ";;", "&"}
WORD = re.compile(r"^[A-Za-z_][\w.+-]*$|^/[A-Za-z][\w./+-]*$")
SH_C = re.compile(r"\b(?:ba)?sh\s+(?:-\w+\s+)*-c\s+$")
# run only where they exist, behind a check: not needed on a minimal root
OPTIONAL = {"sudo",                 # ./sigma as a user that is not root
            "deb-systemd-helper",   # ./sigma disables Debian's etcd service where it can
            "update-rc.d", "systemctl",
            "git",                  # test_deb.sh copies the tree without it
            "debootstrap"}          # ./sigma minbase installs it on the host


def builtins() -> set[str]:
    out = subprocess.run(["bash", "-c", "compgen -b; compgen -k"], capture_output=True,
                         text=True, check=True).stdout
    return set(out.split())


def files(src: Path, globs: tuple[str, ...]) -> list[Path]:
    found: set[Path] = set()
    for g in globs:
        found.update(p for p in src.glob(g) if p.is_file() and "build" not in p.parts[0])
    return sorted(found)


def _close(text: str, i: int, opening: str, closing: str) -> int:
    """The index past the bracket that closes the one before i."""
    depth = 1
    while i < len(text) and depth:
        depth += {opening: 1, closing: -1}.get(text[i], 0)
        i += 1
    return i


def scrub(text: str, subs: list[str]) -> str:
    """Shell text without comments and data: quoted strings, ${...} and
    arithmetic go; the commands of $(...) inside double quotes, which do run,
    are added to subs."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            out.append(" ")
            i += 2
        elif c == "'":
            j = text.find("'", i + 1)
            j = n if j < 0 else j
            if SH_C.search("".join(out[-8:])):   # sh -c '...': a script of its own
                subs.extend(strip_shell(text[i + 1:j]))
            out.append("''")
            i = j + 1
        elif text.startswith("${", i):
            out.append("x")
            i = _close(text, i + 2, "{", "}")
        elif text.startswith("((", i) or text.startswith("$((", i):
            out.append("x")
            i = _close(text, i + (3 if c == "$" else 2), "(", ")") + 1
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                if text[i] == "\\":
                    i += 2
                elif text.startswith("$(", i) and not text.startswith("$((", i):
                    j = _close(text, i + 2, "(", ")")
                    subs.append(scrub(text[i + 2:j - 1], subs))
                    i = j
                else:
                    i += 1
            out.append('""')
            i += 1
        elif c == "#" and (i == 0 or text[i - 1] in " \t\n;"):
            j = text.find("\n", i)
            i = n if j < 0 else j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip_shell(text: str) -> list[str]:
    """The lines of a script as commands: heredoc bodies, comments, data,
    arrays and case patterns removed, continuations joined."""
    lines, heredoc = [], None
    for line in text.splitlines():
        if heredoc is not None:
            if line.strip() == heredoc:
                heredoc = None
            continue
        m = re.search(r"(?<!<)<<-?\s*['\"]?([A-Za-z_]\w*)['\"]?(?!<)", line)
        if m and "#" not in line[:m.start()]:
            heredoc = m.group(1)
        lines.append(line)
    subs: list[str] = []
    text = scrub(re.sub(r"\\\n", " ", "\n".join(lines)), subs)
    text = re.sub(r"\b\w+\+?=\([^()]*\)", " ", text)         # arrays
    text = re.sub(r"\bcase\s+\S+\s+in\b", " ", text)
    text = re.sub(r"(?m)(^|;;)(\s*)\(?[^()\s;]+(\s*\|\s*[^()\s;]+)*\)", r"\1\2", text)
    return text.splitlines() + subs


def shell_commands(text: str) -> tuple[set[str], set[str]]:
    """(commands, functions defined) of a shell script."""
    cmds: set[str] = set()
    funcs = set(re.findall(r"^\s*(?:function\s+)?([\w-]+)\s*\(\)", text, re.M))
    for line in strip_shell(text):
        for seg in re.split(r"\|\||&&|[|;&()`]|\$\(", line):
            words = seg.split()
            i = 0
            while i < len(words):
                w = words[i]
                if w in ("for", "case", "select"):
                    break
                if re.match(r"^\w+=", w) or w in NOT_COMMANDS or w.startswith(("<", ">", "2>", "1>", "&>")):
                    i += 1
                    continue
                if w in WRAPPERS or w in ("ip",) and words[i + 1:i + 3] == ["netns", "exec"]:
                    if w == "ip":
                        cmds.add("ip")
                        i += 4   # ip netns exec NS cmd
                        continue
                    if w not in ("then", "do", "else", "elif", "if", "while", "until", "!", "time"):
                        cmds.add(w)
                    i += 1
                    while i < len(words) and words[i].startswith("-"):
                        i += 2 if words[i] in OPT_VALUE.get(w, ()) else 1
                    if w == "timeout" and i < len(words) and re.match(r"^[\d.]+[smhd]?$", words[i]):
                        i += 1
                    if w in ("chroot", "nsenter") and i < len(words):
                        i += 1   # the root or the target
                    continue
                if WORD.match(w):
                    cmds.add(w)
                break
    return cmds, funcs


def py_commands(text: str) -> set[str]:
    pat = (r"(?:Popen|run|check_call|check_output|call)\(\s*\[\s*[\"']([\w./+-]+)[\"']",
           r"shutil\.which\(\s*[\"']([\w.+-]+)[\"']", r"os\.exec\w+\(\s*[\"']([\w./+-]+)[\"']")
    return {m for p in pat for m in re.findall(p, text)}


def c_commands(text: str) -> set[str]:
    pat = (r"\bexecl?v?p?e?\(\s*\"([\w./+-]+)\"", r"\bpopen\(\s*\"([\w./+-]+)",
           r"\bsystem\(\s*\"([\w./+-]+)")
    return {m for p in pat for m in re.findall(p, text)}


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    src = Path(sys.argv[1])
    where: dict[str, str] = {}
    funcs: set[str] = set()

    def add(names: set[str], path: Path) -> None:
        for n in names:
            where.setdefault(n, str(path.relative_to(src)))

    for p in files(src, SHELL_GLOBS):
        c, f = shell_commands(p.read_text(errors="replace"))
        add(c, p)
        funcs |= f
    for p in src.glob("deploy/*.service*"):   # what systemd-analyze verify checks
        add(set(re.findall(r"(?m)^Exec\w*=[-@+!:]*(/[\w./+-]+)", p.read_text())), p)
    for p in src.glob("**/meson.build"):
        if p.parts[len(src.parts)].startswith("build"):
            continue
        add({n for n in re.findall(r"find_program\(\s*'([^']+)'", p.read_text())
             if not n.endswith((".sh", ".py"))}, p)
    for p in files(src, PY_GLOBS):
        add(py_commands(p.read_text(errors="replace")), p)
    for p in files(src, C_GLOBS):
        add(c_commands(p.read_text(errors="replace")), p)
    own = {p.name for p in src.rglob("*") if p.is_file() and os.access(p, os.X_OK)
           and not p.parts[len(src.parts)].startswith(("build", ".git"))}
    own |= {"sigmad", "sigmactl", "sigma-udpd", "sigma-bench", "sigma-plan", "sigma-demo",
            "sg-reaper"}
    skip = builtins() | funcs | own | NOT_COMMANDS | OPTIONAL
    names = sorted(n for n in where if n not in skip and not n.startswith(("sg_", "sigma_")))
    for n in names:
        print(f"{n}\t{where[n]}" if "--where" in sys.argv else n)
    return 0


if __name__ == "__main__":
    sys.exit(main())

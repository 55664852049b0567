#!/usr/bin/env python3
"""Checks every #include of gyre's sources against the table in LAYERS.

  check_layers.py [REPO]        check the tree (default: this file's repository)
  check_layers.py --self-test   check that the checker finds violations

Prints one line per forbidden include (file:line: what it includes, which
part that is, and what its own part may include) and exits 1 if there is
any; exits 0 when the tree follows the table.
"""
import os
import re
import sys
import tempfile

SOURCE_DIRS = ["include", "src", "bench", "tools", "python"]
SOURCE_EXTS = (".h", ".hpp", ".cc", ".cpp", ".c", ".cu", ".cuh")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def read_rules(path):
    """{part: set(allowed parts)} from LAYERS; a part is a path prefix."""
    rules = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            if ":" not in line:
                raise SystemExit(f"{path}:{n}: expected '<part>: <parts>'")
            part, allowed = line.split(":", 1)
            rules[part.strip().rstrip("/")] = set(a.rstrip("/") for a in allowed.split())
    return rules


def part_of(relpath, parts):
    """The longest part that contains relpath (a folder prefix or the file itself)."""
    best = None
    for p in parts:
        if relpath == p or relpath.startswith(p + "/"):
            if best is None or len(p) > len(best):
                best = p
    return best


def resolve(repo, including_file, name):
    """The repository path an include names: beside the including file, from
    the repository root, or from include/ (the public headers' folder)."""
    for base in (os.path.dirname(including_file), "", "include"):
        candidate = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(os.path.join(repo, candidate)):
            return candidate
    return None  # a system or toolkit header written with quotes


def allowed(target, allowed_parts):
    return any(target == a or target.startswith(a + "/") for a in allowed_parts)


def check(repo):
    rules = read_rules(os.path.join(repo, "LAYERS"))
    problems = []
    for top in SOURCE_DIRS:
        for root, dirs, files in os.walk(os.path.join(repo, top)):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "build")
            for name in sorted(files):
                if not name.endswith(SOURCE_EXTS):
                    continue
                rel = os.path.relpath(os.path.join(root, name), repo)
                own = part_of(rel, rules)
                if own is None:
                    problems.append(f"{rel}: belongs to no part of LAYERS; add its folder to the table")
                    continue
                with open(os.path.join(repo, rel), errors="replace") as f:
                    for n, line in enumerate(f, 1):
                        m = INCLUDE_RE.match(line)
                        if not m:
                            continue
                        target = resolve(repo, rel, m.group(1))
                        if target is None or part_of(target, rules) == own:
                            continue
                        if not allowed(target, rules[own]):
                            problems.append(
                                f"{rel}:{n}: includes {target} (part {part_of(target, rules) or 'none'}), but "
                                f"{own} may include only: {' '.join(sorted(rules[own])) or 'nothing'} (LAYERS)")
    return problems


def self_test():
    """A small tree with one allowed and two forbidden includes."""
    with tempfile.TemporaryDirectory() as repo:
        def write(path, text):
            os.makedirs(os.path.dirname(os.path.join(repo, path)), exist_ok=True)
            with open(os.path.join(repo, path), "w") as f:
                f.write(text)
        write("LAYERS", "include:\nsrc/plan: include\nsrc/comm: include src/plan\n")
        write("include/gyre.h", "")
        write("src/plan/planner.h", '#include "include/gyre.h"\n#include "src/comm/comm.h"\n')
        write("src/comm/comm.h", '#include "src/plan/planner.h"\n#include "gyre.h"\n')
        write("src/host/lane.h", "")
        problems = check(repo)
        expect = ["src/host/lane.h: belongs to no part", "src/plan/planner.h:2: includes src/comm/comm.h"]
        for e in expect:
            if not any(p.startswith(e) for p in problems):
                print(f"self-test: the checker missed: {e}\n  found: {problems}")
                return 1
        if len(problems) != len(expect):
            print(f"self-test: unexpected findings: {problems}")
            return 1
    print("self-test: the checker finds a forbidden include and an unlisted folder, and nothing else")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    repo = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    problems = check(repo)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} include(s) cross a line of LAYERS")
        return 1
    print("every include follows LAYERS")
    return 0


if __name__ == "__main__":
    sys.exit(main())

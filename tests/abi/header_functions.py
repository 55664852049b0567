#!/usr/bin/env python3
"""Prints the functions an nccl.h declares (nccl*, pnccl*, gyre*), one per
line, sorted: the names that tests/abi compares with what libnccl.so.2
exports and turns into tables of function addresses.

usage: header_functions.py HEADER [--no-profiling]
  --no-profiling  leave out the pnccl* names (gyre.h declares none: the
                  aliases exist only in the libraries)
"""
import re
import sys

DECLARATION = re.compile(r"^\s*(?:ncclResult_t|const\s+char\s*\*|void|int|struct\s+ncclTeam)\s*\b(p?nccl\w+|gyre\w+)\s*\(", re.M)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 1:
        sys.exit(__doc__)
    with open(args[0], encoding="utf-8") as f:
        text = f.read()
    names = sorted(set(DECLARATION.findall(text)))
    if "--no-profiling" in sys.argv:
        names = [n for n in names if not n.startswith("pnccl")]
    if not names:
        sys.exit(f"no function declarations found in {args[0]}")
    print("\n".join(names))


if __name__ == "__main__":
    main()

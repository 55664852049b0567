#!/usr/bin/env python3
"""The compile-only CUDA glue would link: every torch_gyre function it calls is defined.

    glue_symbols.py ARCHIVE DEFINER...

ARCHIVE is the glue compiled without linking (torch_gyre_cuda_compile_check:
there is no libc10_cuda here to link against); each DEFINER is a binary
built from the extension's other sources (the CPU-only extension, the
device-path test). Fails naming each torch_gyre symbol the glue uses that
none of them defines — a declaration left without its definition, which
otherwise shows only when the extension is linked against a CUDA torch.
"""
import subprocess
import sys


def symbols(path):
    out = subprocess.run(["nm", "-C", path], check=True, stdout=subprocess.PIPE, text=True).stdout
    undefined, defined = set(), set()
    for line in out.splitlines():
        parts = line.split(None, 2) if not line.startswith(" ") else ["", *line.split(None, 1)]
        if len(parts) < 3:
            continue
        kind, name = parts[1], parts[2]
        if kind == "U":
            undefined.add(name)
        elif kind in "TtWwVvRrDdBb":
            defined.add(name)
    return undefined, defined


def main():
    archive, definers = sys.argv[1], sys.argv[2:]
    used, defined = symbols(archive)
    for d in definers:
        defined |= symbols(d)[1]
    missing = sorted(s for s in used - defined if s.startswith(("torch_gyre::", "vtable for torch_gyre::")))
    for s in missing:
        print("undefined: %s" % s)
    print("%d torch_gyre symbols used by the glue, %d undefined" %
          (len([s for s in used if "torch_gyre::" in s]), len(missing)))
    sys.exit(1 if missing else 0)


if __name__ == "__main__":
    main()

"""Prints the interpreter torch_gyre builds against by default: the first
`python3` on PATH that has torch, else /usr/bin/python3 (Debian's, where
python3-torch installs).

Looks torch up without importing it (an import takes seconds); the build's
own probe (find_torch.py) imports it and reports what fails.
"""
import os
import subprocess

FALLBACK = "/usr/bin/python3"
CHECK = "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"


def has_torch(python):
    try:
        return subprocess.run([python, "-c", CHECK], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def main():
    seen = set()
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        candidate = os.path.join(folder or ".", "python3")
        if not os.access(candidate, os.X_OK):
            continue
        # Not realpath: a venv's python3 links to the system interpreter
        # but sees other packages.
        path = os.path.abspath(candidate)
        if path in seen:
            continue
        seen.add(path)
        if has_torch(path):
            print(path)
            return
    print(FALLBACK)


main()

#!/usr/bin/env python3
"""torch_gyre installed with pip into a venv trains DDP like one process.

The way a user installs it: a venv that sees the system's packages (torch,
meson-python, ninja), then `pip install --no-build-isolation --no-index
--no-deps ./python`, which compiles the extension against that torch and links the
gyre library of this build (found through pkg-config, the build tree's
meson-uninstalled folder). Then 2 processes of that venv's interpreter,
which must import torch_gyre from the venv (not the build tree), train the
DDP model of ddp.py on backend "gyre"; the weights must equal one process's
on the same global batches.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

import harness

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_SRC = os.path.join(HERE, "..", "..", "python")
INSTALL_TIMEOUT = 400  # compiling the extension (one unity translation unit): 35 s on a busy 2-core VM
TRAIN_TIMEOUT = 120


def run(cmd, env, timeout, what):
    start = time.monotonic()
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout)
        rc, out = p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        rc, out = None, (e.stdout or b"").decode(errors="replace") + "\n[killed after %d s]" % timeout
    print("---- %s: exit %s, %.1f s" % (what, rc, time.monotonic() - start), flush=True)
    if rc != 0:
        print(out[-6000:])
    return rc == 0, out


def ddp_worker(out, venv):
    import torch_gyre
    where = os.path.realpath(torch_gyre.__file__)
    assert where.startswith(os.path.realpath(venv)), "torch_gyre imported from %s, not the venv %s" % (where, venv)
    with open(os.path.join(PACKAGE_SRC, "VERSION")) as f:
        version = f.read().strip()
    assert torch_gyre.__version__ == version, (torch_gyre.__version__, version)
    import ddp
    ddp.worker(out, False, "cpu")


def driver():
    harness.require_torch_gyre()
    try:
        import mesonpy  # noqa: F401
    except ImportError:
        print("FAIL: meson-python is not installed for %s (scripts/install-deps: python3-mesonpy)" % sys.executable)
        sys.exit(1)
    build_root = os.environ.get("GYRE_BUILD_ROOT")
    if not build_root:
        print("FAIL: GYRE_BUILD_ROOT is not set (meson test sets it to the build folder)")
        sys.exit(1)
    import torch
    import ddp

    tmp = tempfile.mkdtemp(prefix="torch_gyre_pip_")
    try:
        venv = os.path.join(tmp, "venv")
        vpython = os.path.join(venv, "bin", "python")
        # Neither the build tree's torch_gyre nor a user's site settings may leak in.
        # LD_LIBRARY_PATH too (meson test points it at the build tree): the
        # installed extension must find libgyre and torch through its rpath.
        dropped = ("PYTHONPATH", "PYTHONHOME", "PIP_INDEX_URL", "LD_LIBRARY_PATH")
        for name in dropped:
            os.environ.pop(name, None)  # run_ranks starts from os.environ
        env = dict(os.environ)
        env.update(PKG_CONFIG_PATH=os.path.join(build_root, "meson-uninstalled"), PIP_NO_INPUT="1",
                   PIP_DISABLE_PIP_VERSION_CHECK="1", NCCL_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
        ok, _ = run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv], env, 120, "venv")
        if not ok:
            sys.exit(1)
        # (--without-pip: the system's pip, seen through the system site
        # packages, installs into the venv all the same, and making the
        # venv skips ensurepip's copy.)
        # A copy, so the build leaves nothing in the source tree.
        src = os.path.join(tmp, "src")
        shutil.copytree(PACKAGE_SRC, src, ignore=shutil.ignore_patterns(".mesonpy-*", "__pycache__"))
        # --no-deps: torch is there already, and Debian 13's torch 2.6 pins
        # a sympy Debian does not ship, which pip's resolver would refuse.
        ok, _ = run([vpython, "-m", "pip", "install", "--no-build-isolation", "--no-index", "--no-deps", src], env,
                    INSTALL_TIMEOUT, "pip install --no-build-isolation --no-index --no-deps ./python")
        if not ok:
            sys.exit(1)
        ok, out = run([vpython, "-c", "import torch_gyre, sys; print(torch_gyre.__version__, torch_gyre.__file__)"],
                      env, 120, "import torch_gyre from the venv")
        print(out.strip())
        if not ok:
            sys.exit(1)

        world = 2
        weights = os.path.join(tmp, "ddp.pt")
        results = harness.run_ranks([vpython, os.path.abspath(__file__), "--ddp-worker", weights, venv], world,
                                    TRAIN_TIMEOUT)
        if not harness.report("DDP on %d ranks from the venv" % world, results):
            sys.exit(1)
        ref = ddp.reference(world)
        got = torch.load(weights)
        diff = max((got[k] - ref[k]).abs().max().item() for k in ref)
        same = all(torch.allclose(got[k], ref[k], rtol=1e-4, atol=1e-5) for k in ref)
        print("max |DDP from the venv - single process| over all weights = %.3g -> %s" %
              (diff, "equal" if same else "DIFFERENT"))
        sys.exit(0 if same else 1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    if "--ddp-worker" in sys.argv:
        i = sys.argv.index("--ddp-worker")
        ddp_worker(sys.argv[i + 1], sys.argv[i + 2])
    else:
        driver()

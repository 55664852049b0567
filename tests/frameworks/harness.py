"""Starts the ranks of a framework test and bounds every wait.

A test script calls `main(worker, world_sizes)`: without arguments it is the
driver, which starts `world` copies of itself per world size with the
torchrun-style environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and
checks that all exit 0 within the time limit; with `--worker` it is one rank
and runs `worker(rank, world)` (one that raises prints its traceback and
exits 2 at once).

Exit status 77 (meson's "skipped") only when torch is absent or the build
was told not to make the extension (-Dtorch=disabled); torch present and the
extension missing (say, pybind11's headers were not installed) fails.
"""
import os
import socket
import subprocess
import sys
import time
import traceback

SKIP = 77


def require_torch_gyre():
    try:
        import torch  # noqa: F401
    except ImportError as e:
        print("SKIP: torch is not installed (%s)" % e)
        sys.exit(SKIP)
    if os.environ.get("TORCH_GYRE_BUILT", "1") == "0":
        missing = os.environ.get("TORCH_GYRE_MISSING", "")
        if missing:
            print("FAIL: torch is installed but %s" % missing)
            sys.exit(1)
        print("SKIP: torch_gyre is disabled (meson option torch)")
        sys.exit(SKIP)
    import torch_gyre  # noqa: F401  (a failure here is a real failure)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(rank, world, port, extra=None):
    env = dict(os.environ)
    env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(port), NCCL_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    env.update(extra or {})
    return env


def run_ranks(argv, world, timeout, extra_env=None, per_rank_env=None):
    """Runs `argv` as `world` processes; returns [(returncode, output)].

    Every process is killed at `timeout` seconds (its return code is then
    None), so a hang fails the test instead of stalling the suite."""
    port = free_port()
    procs = []
    for r in range(world):
        env = rank_env(r, world, port, extra_env)
        if per_rank_env:
            env.update(per_rank_env(r))
        procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    deadline = time.monotonic() + timeout
    results = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
            results.append((p.returncode, out))
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            results.append((None, out + "\n[killed after %.0f s]" % timeout))
    return results


def report(name, results, expect=None):
    """Prints each rank's output; True when every rank exited as expected."""
    ok = True
    for r, (rc, out) in enumerate(results):
        want = 0 if expect is None else expect[r]
        good = rc == want if want is not None else True
        ok = ok and good
        print("---- %s rank %d: exit %s (%s)" % (name, r, rc, "ok" if good else "expected %s" % want))
        print(out.rstrip())
    return ok


def main(worker, world_sizes, timeout):
    if "--worker" in sys.argv:
        # A worker that raises prints where and leaves at once (exit 2): its
        # process group may be unusable, and destroying it would wait for peers.
        try:
            worker(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
        except Exception:
            traceback.print_exc()
            sys.stdout.flush()
            os._exit(2)
        return
    require_torch_gyre()
    ok = True
    for world in world_sizes:
        start = time.monotonic()
        results = run_ranks([sys.executable, os.path.abspath(sys.argv[0]), "--worker"], world, timeout)
        ok = report("world %d" % world, results) and ok
        print("world %d took %.1f s" % (world, time.monotonic() - start))
    sys.exit(0 if ok else 1)

#!/usr/bin/env python3
"""A killed rank surfaces on the others, which go on without it.

Three ranks all-reduce on backend "gyre"; rank 2 kills itself (SIGKILL).
Ranks 0 and 1 must get a RuntimeError from gyre naming rank 2 within the
group's timeout, abort that group, make a new group of the two of them
(new_group with local synchronization: the dead rank is not asked) and
all-reduce on it exactly; then destroy_process_group returns promptly.
torch 2.x only.
"""
import datetime
import os
import signal
import sys
import time

import harness

TIMEOUT_S = 10
VICTIM = 2


def worker(rank, world):
    import torch
    import torch.distributed as dist

    import torch_gyre  # noqa: F401

    dist.init_process_group("gyre", timeout=datetime.timedelta(seconds=TIMEOUT_S))
    t = torch.ones(8)
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((8,), float(world))), t
    if rank == VICTIM:
        dist.barrier()
        os.kill(os.getpid(), signal.SIGKILL)
    dist.barrier()
    time.sleep(0.5)  # the victim is gone
    start = time.monotonic()
    try:
        for _ in range(20):
            dist.all_reduce(torch.ones(1024))
        print("rank %d: the group kept working without rank %d" % (rank, VICTIM), flush=True)
        os._exit(1)
    except RuntimeError as e:
        waited = time.monotonic() - start
        print("rank %d: raised after %.2f s: %s" % (rank, waited, e), flush=True)
        if "gyre" not in str(e) or "rank %d" % VICTIM not in str(e) or waited > TIMEOUT_S + 15:
            print("rank %d: the error does not name rank %d, or came too late" % (rank, VICTIM), flush=True)
            os._exit(1)
    world_pg = dist.group.WORLD
    world_pg._get_backend(torch.device("cpu"))._gyre_abort()

    survivors = [r for r in range(world) if r != VICTIM]
    start = time.monotonic()
    group = dist.new_group(survivors, use_local_synchronization=True,
                           timeout=datetime.timedelta(seconds=TIMEOUT_S))
    t = torch.arange(5, dtype=torch.float32) * (rank + 1)
    dist.all_reduce(t, group=group)
    want = torch.arange(5, dtype=torch.float32) * sum(r + 1 for r in survivors)
    ok = torch.equal(t, want)
    print("rank %d: new group of %s made and reduced in %.2f s -> %s" %
          (rank, survivors, time.monotonic() - start, "exact" if ok else "WRONG %s" % t), flush=True)
    start = time.monotonic()
    dist.destroy_process_group()
    took = time.monotonic() - start
    print("rank %d: destroy_process_group took %.2f s" % (rank, took), flush=True)
    os._exit(0 if ok and took < 5 else 1)


def driver():
    harness.require_torch_gyre()
    start = time.monotonic()
    results = harness.run_ranks([sys.executable, os.path.abspath(__file__), "--worker"], 3, timeout=90)
    ok = harness.report("rank %d killed" % VICTIM, results, [0, 0, -signal.SIGKILL])
    print("took %.1f s" % (time.monotonic() - start))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    if "--worker" in sys.argv:
        worker(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
    else:
        driver()

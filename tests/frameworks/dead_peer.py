#!/usr/bin/env python3
"""A rank killed or stalled mid-training: the others raise, with gyre's
message, within the process group's timeout instead of hanging.

Three ranks train a DDP model with a 10 s group timeout. `kill`: rank 2
kills itself (SIGKILL, no cleanup) at step 5; ranks 0 and 1 must get a
RuntimeError from gyre within the timeout (plus slack for this loaded
2-core machine) of their last completed step. `stall`: rank 2 stops calling
collectives at step 5 but stays alive with its connections open, so only
the timeout can end the wait: the others must raise after about 10 s (the
group's timeout, which became gyre's GYRE_TIMEOUT), not 300 s (gyre's
default) and not never.
"""
import datetime
import os
import signal
import sys
import time

import harness

TIMEOUT_S = 10
VICTIM, KILL_AT = 2, 5
MODE = os.environ.get("DEAD_PEER_MODE", "kill")


def worker(rank, world):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    import torch_gyre  # noqa: F401

    dist.init_process_group("gyre", timeout=datetime.timedelta(seconds=TIMEOUT_S))
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    last = time.monotonic()
    for step in range(100000):
        if rank == VICTIM and step == KILL_AT:
            if MODE == "kill":
                print("rank %d: killing itself at step %d" % (rank, step), flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
            print("rank %d: stalling at step %d" % (rank, step), flush=True)
            time.sleep(TIMEOUT_S + 5)  # outlives the others' timeout, then leaves
            os._exit(0)
        try:
            opt.zero_grad()
            model(torch.randn(16, 32)).sum().backward()
            opt.step()
        except RuntimeError as e:
            waited = time.monotonic() - last
            print("rank %d: step %d raised after %.2f s: %s" % (rank, step, waited, e), flush=True)
            low = TIMEOUT_S - 1 if MODE == "stall" else 0
            ok = "gyre" in str(e) and low <= waited < TIMEOUT_S + 15
            os._exit(0 if ok else 1)
        last = time.monotonic()
    print("rank %d: never raised" % rank, flush=True)
    os._exit(1)


def driver():
    harness.require_torch_gyre()
    ok = True
    for mode in sys.argv[1:] or ["kill", "stall"]:
        start = time.monotonic()
        results = harness.run_ranks([sys.executable, os.path.abspath(__file__), "--worker"], 3, timeout=60,
                                    extra_env={"DEAD_PEER_MODE": mode})
        expect = [0, 0, -signal.SIGKILL if mode == "kill" else 0]
        ok = harness.report("peer %s" % mode, results, expect) and ok
        print("%s took %.1f s" % (mode, time.monotonic() - start))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    if "--worker" in sys.argv:
        worker(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
    else:
        driver()

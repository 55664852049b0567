#!/usr/bin/env python3
"""Each process group fails at its own timeout.

Two ranks make two gyre groups in one job: the default group with a 5 s
timeout and a second one (new_group) with 2 s. Both all-reduce once, then
rank 1 stalls: alive, connections open, calling nothing. Rank 0 all-reduces
on the 2 s group, then on the 5 s group; each must raise RuntimeError from
gyre after about its own group's timeout. (Before timeouts were set per
communicator, the first group's timeout held for every group, so the 2 s
group waited 5 s.)
"""
import datetime
import os
import sys
import time

import harness

SHORT_S, LONG_S = 2, 5
SLACK_S = 4  # this 2-core machine runs other builds meanwhile


def worker(rank, world):
    import torch
    import torch.distributed as dist

    import torch_gyre  # noqa: F401

    dist.init_process_group("gyre", timeout=datetime.timedelta(seconds=LONG_S))
    short = dist.new_group(backend="gyre", timeout=datetime.timedelta(seconds=SHORT_S))
    for group in (None, short):
        t = torch.full((4,), float(rank + 1))
        dist.all_reduce(t, group=group)
        assert t.tolist() == [3.0] * 4, t
    if rank == 1:
        print("rank 1: stalling", flush=True)
        time.sleep(SHORT_S + LONG_S + 2 * SLACK_S)  # outlives both of rank 0's waits
        os._exit(0)
    ok = True
    for name, group, timeout in (("short", short, SHORT_S), ("default", None, LONG_S)):
        start = time.monotonic()
        try:
            dist.all_reduce(torch.ones(4), group=group)
            print("rank 0: the %s group's all_reduce returned with its peer stalled" % name, flush=True)
            ok = False
        except RuntimeError as e:
            waited = time.monotonic() - start
            good = "gyre" in str(e) and timeout - 0.5 <= waited < timeout + SLACK_S
            print("rank 0: %s group (%d s) raised after %.2f s (%s): %s" %
                  (name, timeout, waited, "ok" if good else "FAIL", str(e).splitlines()[0]), flush=True)
            ok = ok and good
    os._exit(0 if ok else 1)


def driver():
    harness.require_torch_gyre()
    results = harness.run_ranks([sys.executable, os.path.abspath(__file__), "--worker"], 2, timeout=60)
    sys.exit(0 if harness.report("two groups", results) else 1)


if __name__ == "__main__":
    if "--worker" in sys.argv:
        worker(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
    else:
        driver()

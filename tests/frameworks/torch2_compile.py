#!/usr/bin/env python3
"""Functional collectives under torch.compile on backend "gyre".

On 2 CPU ranks, a function mixing local arithmetic with
torch.distributed._functional_collectives (all_reduce, all_gather_tensor)
is compiled by torch.compile (Inductor, which compiles C++ for the CPU with
the system's g++) and run twice; its results must equal the same function
run eagerly, exactly (integer-valued floats). torch 2.x only.
"""
import datetime
import sys

import harness


def worker(rank, world):
    import torch
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    import torch_gyre  # noqa: F401

    dist.init_process_group("gyre", timeout=datetime.timedelta(seconds=120))
    group = dist.group.WORLD

    def step(x):
        y = funcol.all_reduce(x * 2 + 1, "sum", group)
        z = funcol.all_gather_tensor(y - x, 0, group)
        return z.sum(0) + y

    failures = 0
    compiled = torch.compile(step, fullgraph=True)
    for i in range(2):
        x = torch.arange(16, dtype=torch.float32).reshape(4, 4) * (rank + 1) + i
        want = step(x)
        got = compiled(x)
        same = torch.equal(got, want)
        print("rank %d: call %d compiled %s eager" % (rank, i, "==" if same else "!="), flush=True)
        failures += not same
    dist.destroy_process_group()
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    harness.main(worker, [2], timeout=400)

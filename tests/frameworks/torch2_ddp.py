#!/usr/bin/env python3
"""DDP's torch 2.x options on backend "gyre" train like one process.

On 2 and 4 CPU ranks, the MLP of ddp.py trains with static_graph,
gradient_as_bucket_view, torch's allreduce comm hook, and no_sync gradient
accumulation (every other micro-batch without a reduction); each rank's
final weights must equal those of one process that trains on the same
global batches (accumulating the same pairs of micro-batches). DDP's
logging data must name the backend "gyre". torch 2.x only.
"""
import datetime
import sys

import harness

STEPS, BATCH, SEED = 12, 8, 1234


def batches(torch, world, steps):
    """The global batch of each step: rows [world * BATCH]."""
    g = torch.Generator().manual_seed(SEED)
    x = torch.randn(steps, world * BATCH, 16, generator=g)
    y = torch.sin(x[..., :4]) + 0.1 * torch.randn(steps, world * BATCH, 4, generator=g)
    return x, y


def make_model(torch):
    torch.manual_seed(SEED)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 32), torch.nn.Tanh(),
                               torch.nn.Linear(32, 4))


def train(torch, model, x, y, rows, accumulate, no_sync=None):
    """SGD over the steps, taking `rows` of each global batch; with
    `accumulate`, one optimizer step per two micro-batches, the first
    under `no_sync` (when given)."""
    import contextlib
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for s in range(x.shape[0]):
        first = accumulate and s % 2 == 0
        if not accumulate or first:
            opt.zero_grad()
        ctx = no_sync() if (first and no_sync is not None) else contextlib.nullcontext()
        with ctx:
            torch.nn.functional.mse_loss(model(x[s, rows]), y[s, rows]).backward()
        if not first:
            opt.step()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def worker(rank, world):
    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP

    import torch_gyre  # noqa: F401

    dist.init_process_group("gyre", timeout=datetime.timedelta(seconds=60))
    x, y = batches(torch, world, STEPS)
    mine = slice(rank * BATCH, (rank + 1) * BATCH)
    everything = slice(0, world * BATCH)
    failures = 0
    cases = [("static_graph", dict(static_graph=True), None, False),
             ("gradient_as_bucket_view", dict(gradient_as_bucket_view=True), None, False),
             ("allreduce_hook", {}, default_hooks.allreduce_hook, False),
             ("no_sync", {}, None, True)]
    for name, kwargs, hook, accumulate in cases:
        ref = train(torch, make_model(torch), x, y, everything, accumulate)
        model = DDP(make_model(torch), bucket_cap_mb=0.001, **kwargs)  # several buckets
        if hook is not None:
            model.register_comm_hook(dist.group.WORLD, hook)
        got = train(torch, model, x, y, mine, accumulate, model.no_sync if accumulate else None)
        got = {k.removeprefix("module."): v for k, v in got.items()}
        diff = max((got[k] - ref[k]).abs().max().item() for k in ref)
        same = all(torch.allclose(got[k], ref[k], rtol=1e-4, atol=1e-6) for k in ref)
        logged = model._get_ddp_logging_data().get("backend_name")
        print("rank %d: DDP %s on %d ranks: max |DDP - one process| = %.3g -> %s; logged backend %r" %
              (rank, name, world, diff, "equal" if same else "DIFFERENT", logged), flush=True)
        failures += (not same) + (logged != "gyre")
    dist.destroy_process_group()
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    harness.main(worker, [2, 4], timeout=150)

#!/usr/bin/env python3
"""torch.distributed on backend "gyre" with CUDA tensors, 2 processes.

The ranks share the visible GPUs round-robin, so on a machine with one GPU
both processes drive the same device (which torch's nccl backend refuses).
Each rank makes every rank's inputs from a seed and compares results with
a reference computed on the CPU in float64 or exact integers; counts
include 0, 1 and primes. Besides the results it checks the stream
semantics (an operation runs after the work already on the caller's
stream, wait() orders the caller's stream after it, async work completes),
new_group by splitting a group bound with device_id, and bad input.

Skipped (exit 77) where torch has no CUDA or torch_gyre was built without
it: it needs a GPU machine.
"""
import datetime
import os
import sys
import zlib

import harness
from collectives import Checker

COUNTS = [0, 1, 13, 1031, 65537]


def worker(rank, world):
    import torch
    import torch.distributed as dist

    import torch_gyre

    dev = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    kwargs = {}
    if "device_id" in dist.init_process_group.__code__.co_varnames:
        kwargs["device_id"] = dev  # torch 2.x: the device communicator is made now (eagerConnectSingleDevice)
    dist.init_process_group("gyre", timeout=datetime.timedelta(seconds=60), **kwargs)
    check = Checker(rank)
    assert torch_gyre.CUDA

    def gen(r, shape, dtype, key):
        g = torch.Generator().manual_seed(zlib.crc32(repr((key, r)).encode()))
        return torch.randint(-4, 5, shape, generator=g).to(dtype)

    def same(got, ref, what):
        got = got.cpu()
        ok = got.shape == ref.shape and got.dtype == ref.dtype and (got.numel() == 0 or bool((got == ref).all()))
        check(ok, "%s: got %s, expected %s" % (what, got.flatten()[:8].tolist(), ref.flatten()[:8].tolist()))

    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64):
        for count in COUNTS:
            key = ("ar", str(dtype), count)
            inputs = [gen(r, (count,), dtype, key) for r in range(world)]
            t = inputs[rank].to(dev)
            dist.all_reduce(t)
            same(t, sum(x.long() for x in inputs).to(dtype) if count else inputs[0],
                 "all_reduce %s count %d" % (dtype, count))

    for count in COUNTS[1:]:
        key = ("coll", count)
        inputs = [gen(r, (count,), torch.float32, key) for r in range(world)]
        total = sum(inputs)
        t = inputs[rank].to(dev)
        dist.broadcast(t, src=world - 1)
        same(t, inputs[world - 1], "broadcast %d" % count)
        t = inputs[rank].to(dev)
        dist.reduce(t, dst=0)
        if rank == 0:
            same(t, total, "reduce %d" % count)
        outs = [torch.empty(count, device=dev) for _ in range(world)]
        dist.all_gather(outs, inputs[rank].to(dev))
        for r in range(world):
            same(outs[r], inputs[r], "all_gather %d from rank %d" % (count, r))
        flat = torch.empty(count * world, device=dev)
        dist.all_gather_into_tensor(flat, inputs[rank].to(dev))
        same(flat, torch.cat(inputs), "all_gather_into_tensor %d" % count)
        big = [gen(r, (count * world,), torch.float32, ("rs", count)) for r in range(world)]
        out = torch.empty(count, device=dev)
        dist.reduce_scatter_tensor(out, big[rank].to(dev))
        same(out, sum(big).narrow(0, rank * count, count), "reduce_scatter_tensor %d" % count)
        out = torch.empty(count, device=dev)
        dist.reduce_scatter(out, [x.to(dev) for x in big[rank].chunk(world)])
        same(out, sum(big).narrow(0, rank * count, count), "reduce_scatter (list) %d" % count)
        out = torch.empty(count * world, device=dev)
        dist.all_to_all_single(out, big[rank].to(dev))
        same(out, torch.cat([big[r].narrow(0, rank * count, count) for r in range(world)]),
             "all_to_all_single %d" % count)
        gathered = [torch.empty(count, device=dev) for _ in range(world)] if rank == 0 else None
        dist.gather(inputs[rank].to(dev), gathered, dst=0)
        if rank == 0:
            for r in range(world):
                same(gathered[r], inputs[r], "gather %d from rank %d" % (count, r))
        out = torch.empty(count, device=dev)
        dist.scatter(out, [x.to(dev) for x in inputs] if rank == 0 else None, src=0)
        same(out, inputs[rank], "scatter %d" % count)

    # Uneven all_to_all_single: rank r sends r + p + 1 rows to peer p.
    send_rows = [rank + p + 1 for p in range(world)]
    recv_rows = [p + rank + 1 for p in range(world)]
    data = [gen(r, (sum(r + p + 1 for p in range(world)), 3), torch.float32, "a2av") for r in range(world)]
    out = torch.empty(sum(recv_rows), 3, device=dev)
    dist.all_to_all_single(out, data[rank].to(dev), recv_rows, send_rows)
    want = torch.cat([data[p].narrow(0, sum(p + q + 1 for q in range(rank)), p + rank + 1) for p in range(world)])
    same(out, want, "all_to_all_single uneven")

    # Point to point, and a batch of isend/irecv in a ring (one gyre group).
    peer = (rank + 1) % world
    prev = (rank - 1) % world
    x = gen(rank, (1031,), torch.float32, "p2p")
    got = torch.empty(1031, device=dev)
    if rank == 0:
        dist.send(x.to(dev), dst=peer)
        dist.recv(got, src=prev)
    else:
        dist.recv(got, src=prev)
        dist.send(x.to(dev), dst=peer)
    same(got, gen(prev, (1031,), torch.float32, "p2p"), "send/recv")
    got = torch.empty(1031, device=dev)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, x.to(dev), peer), dist.P2POp(dist.irecv, got, prev)])
    for req in reqs:
        req.wait()
    same(got, gen(prev, (1031,), torch.float32, "p2p"), "batch_isend_irecv")

    # Stream order: the all-reduce reads what the caller's stream writes
    # after a long kernel, and a side stream that waits on the work sees
    # the result.
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        t = torch.zeros(1 << 20, device=dev)
        torch.cuda._sleep(50_000_000)  # ~tens of ms on the side stream
        t.fill_(rank + 1)
        work = dist.all_reduce(t, async_op=True)
        work.wait()  # the side stream waits; the host does not
        result = t.clone()
    side.synchronize()
    check(work.is_completed(), "async all_reduce is completed after its stream synchronized")
    check(bool((result == sum(range(1, world + 1))).all()), "all_reduce after a long kernel on the caller's stream")
    fut = dist.all_reduce(torch.ones(5, device=dev), async_op=True).get_future()
    check(bool((fut.wait()[0].cpu() == world).all()), "get_future() of a CUDA all_reduce")
    dist.barrier()

    # new_group: on torch 2.x with a bound device, by splitting this group.
    sub = dist.new_group(list(range(world)))
    t = torch.full((7,), float(rank), device=dev)
    dist.all_reduce(t, group=sub)
    same(t, torch.full((7,), float(sum(range(world)))), "all_reduce on a new_group")

    # Bad input: a RuntimeError naming the problem.
    check.raises(lambda: dist.all_reduce(torch.ones(8, device=dev)[::2]), ["gyre", "non-contiguous"],
                 "a non-contiguous CUDA tensor")
    check.raises(lambda: dist.all_reduce(torch.ones(3, dtype=torch.bool, device=dev)), ["gyre", "Bool"],
                 "bool dtype")
    check.raises(lambda: dist.all_reduce(torch.ones(3, dtype=torch.int32, device=dev), op=dist.ReduceOp.BAND),
                 ["gyre", "BAND"], "BAND")
    try:
        dist.all_gather([torch.empty(3) for _ in range(world)], torch.ones(3, device=dev))
        check(False, "all_gather of CPU outputs and a CUDA input raised nothing")
    except RuntimeError as e:
        print("rank %d: mixed devices raised: %s" % (rank, e), flush=True)
        check(True, "mixed devices")
    if torch.cuda.device_count() > 1:
        other = torch.device("cuda", (dev.index + 1) % torch.cuda.device_count())
        check.raises(lambda: dist.all_reduce(torch.ones(3, device=other)), ["gyre", str(other), str(dev)],
                     "a tensor on another device than the group's")
    doomed = dist.new_group(list(range(world)))
    dist.all_reduce(torch.ones(3, device=dev), group=doomed)
    backend = doomed if hasattr(doomed, "_gyre_abort") else doomed._get_backend(dev)
    backend._gyre_abort()
    check.raises(lambda: dist.all_reduce(torch.ones(3, device=dev), group=doomed), ["gyre", "abort"],
                 "all_reduce after abort")

    torch.cuda.synchronize()
    dist.barrier()
    print("rank %d: %d checks passed, %d failed" % (rank, check.passed, len(check.failures)), flush=True)
    sys.stdout.flush()
    os._exit(0 if not check.failures else 1)


if __name__ == "__main__":
    if "--worker" not in sys.argv:
        harness.require_torch_gyre()
        import torch
        import torch_gyre
        if not torch.cuda.is_available() or not torch_gyre.CUDA:
            print("SKIP: needs a GPU and torch_gyre built against a CUDA torch (torch %s, cuda %s, torch_gyre.CUDA %s)"
                  % (torch.__version__, torch.version.cuda, torch_gyre.CUDA))
            sys.exit(harness.SKIP)
    harness.main(worker, [2], timeout=150)

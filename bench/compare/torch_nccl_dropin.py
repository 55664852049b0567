#!/usr/bin/env python3
"""PyTorch's NCCL backend on gyre's libnccl.so.2.

    LD_PRELOAD=build-gpu/libnccl.so.2 python3 bench/compare/torch_nccl_dropin.py -p 2

Forks -p ranks, all on GPU 0 (NCCL itself refuses two ranks on one GPU;
gyre runs them), each with torch.distributed's "nccl" backend. Every rank
prints which libnccl its process mapped (from /proc/self/maps), runs every
collective torch exposes on CUDA tensors against values computed on the
host, then 50 DDP steps of a small float64 model; rank 0 compares the
weights with the same 50 steps run in one process on the whole batch.
Exit status 0 only when every check passed.
"""
import argparse
import os
import socket
import sys

import torch
import torch.distributed as dist


def mapped_nccl():
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "libnccl" in line}
    return ", ".join(sorted(paths)) or "none"


def serving_nccl():
    """The file whose ncclAllReduce a global lookup finds: the one torch's
    calls bind to (torch may map NVIDIA's library too, unused)."""
    import ctypes

    class DlInfo(ctypes.Structure):
        _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p), ("sname", ctypes.c_char_p),
                    ("saddr", ctypes.c_void_p)]

    libc = ctypes.CDLL(None)
    info = DlInfo()
    addr = ctypes.cast(libc.ncclAllReduce, ctypes.c_void_p)
    return info.fname.decode() if libc.dladdr(addr, ctypes.byref(info)) else "unknown"


def check(name, got, want, failures):
    if not torch.allclose(got.double().cpu(), want.double().cpu(), rtol=1e-6, atol=1e-6):
        failures.append(name)
        print("WRONG %s: got %s want %s" % (name, got.flatten()[:4].tolist(), want.flatten()[:4].tolist()))


def collectives(rank, world, dev, failures):
    for count in (1, 13, 1 << 20):
        base = torch.arange(count, dtype=torch.float32)
        x = (base + rank).to(dev)
        dist.all_reduce(x)
        check("all_reduce %d" % count, x, base * world + sum(range(world)), failures)
        x = (base + rank).to(dev)
        dist.broadcast(x, src=world - 1)
        check("broadcast %d" % count, x, base + world - 1, failures)
        x = (base + rank).to(dev)
        dist.reduce(x, dst=0, op=dist.ReduceOp.MAX)
        if rank == 0:
            check("reduce max %d" % count, x, base + world - 1, failures)
        out = torch.empty(count * world, device=dev)
        dist.all_gather_into_tensor(out, (base + rank).to(dev))
        check("all_gather %d" % count, out, torch.cat([base + r for r in range(world)]), failures)
        full = torch.arange(count * world, dtype=torch.float32)
        out = torch.empty(count, device=dev)
        dist.reduce_scatter_tensor(out, (full + rank).to(dev))
        want = full[rank * count:(rank + 1) * count] * world + sum(range(world))
        check("reduce_scatter %d" % count, out, want, failures)
        out = torch.empty(count * world, device=dev)
        dist.all_to_all_single(out, (full + 1000 * rank).to(dev))
        want = torch.cat([full[rank * count:(rank + 1) * count] + 1000 * r for r in range(world)])
        check("all_to_all %d" % count, out, want, failures)
    if world > 1:
        t = torch.full((5,), float(rank), device=dev)
        if rank == 0:
            dist.send(t + 7, dst=1)
        elif rank == 1:
            dist.recv(t, src=0)
            check("send/recv", t, torch.full((5,), 7.0), failures)
        # A ring of batched sends and receives (one NCCL group), as pipeline
        # stages exchange activations.
        src = torch.arange(1001, dtype=torch.float32, device=dev) + 10000 * rank
        got = torch.empty(1001, device=dev)
        ops = [dist.P2POp(dist.isend, src, (rank + 1) % world), dist.P2POp(dist.irecv, got, (rank - 1) % world)]
        for req in dist.batch_isend_irecv(ops):
            req.wait()
        want = torch.arange(1001, dtype=torch.float32) + 10000 * ((rank - 1) % world)
        check("batch_isend_irecv", got, want, failures)
    dist.barrier()


def model_and_batches(seed=0, steps=50, rows=8):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4)).double()
    batches = [(torch.randn(rows, 16, dtype=torch.float64), torch.randn(rows, 4, dtype=torch.float64))
               for _ in range(steps)]
    return model, batches


def train(model, batches, dev, rank=0, world=1):
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for x, y in batches:
        share = x.shape[0] // world
        x, y = x[rank * share:(rank + 1) * share].to(dev), y[rank * share:(rank + 1) * share].to(dev)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return [p.detach().cpu() for p in model.parameters()]


def ddp(rank, world, dev, failures):
    model, batches = model_and_batches()
    wrapped = torch.nn.parallel.DistributedDataParallel(model.to(dev), device_ids=[dev.index])
    got = train(wrapped, batches, dev, rank, world)
    if rank == 0:
        reference, _ = model_and_batches()
        want = train(reference.to(dev), batches, dev)
        worst = max((g - w).abs().max().item() for g, w in zip(got, want))
        print("ddp: 50 steps, largest weight difference from one process: %.3g" % worst)
        if worst > 1e-9:
            failures.append("ddp")


def rank_main(rank, world, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    failures = []
    collectives(rank, world, dev, failures)
    ddp(rank, world, dev, failures)
    print("rank %d of %d: libnccl mapped: %s; ncclAllReduce from %s; %s" % (
        rank, world, mapped_nccl(), serving_nccl(), "FAILED " + ", ".join(failures) if failures else "all passed"))
    dist.destroy_process_group()
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-p", type=int, default=1)
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    opts = ap.parse_args()
    if opts.rank is not None:
        sys.exit(rank_main(opts.rank, opts.p, opts.port))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    import subprocess
    procs = [subprocess.Popen([sys.executable, __file__, "-p", str(opts.p), "--rank", str(r), "--port", str(port)])
             for r in range(opts.p)]
    rcs = [p.wait(timeout=240) for p in procs]
    sys.exit(max(rcs))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""DDP training step time of a ~100 M-parameter model, backend gyre vs gloo.

    PYTHONPATH=build/python /usr/bin/python3 bench/torch/ddp_step.py [-p 2 4] [--csv out.csv]

The model is a stack of --layers Linear(--width, --width) layers (6 x 4096^2
+ biases = 100.7 M float32 parameters, 403 MB of gradients per step) fed a
batch of --batch rows per rank, small on purpose: the step is then mostly
DDP's gradient all-reduce, the part a backend decides. Each rank runs
OMP_NUM_THREADS=1.

For every rank count, one job makes a gyre group and a gloo group over the
same ranks, wraps a copy of the model in DDP on each, and steps the two in
alternation (--iters timed steps each, after --warmup), so other load on the
machine falls on both alike. Two kinds of step:
  step      zero_grad, forward, backward (DDP all-reduces the gradient
            buckets, overlapped with the backward), optimizer step;
  no-sync   the same step inside model.no_sync(), which skips the
            all-reduce: the compute the backend cannot change.
step - no-sync is what communication adds to a step. Reported: the median
over iterations of the slowest rank.
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import time


def worker(opts):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    import torch_gyre  # noqa: F401

    # Both backends in the same processes: a gyre group and a gloo group over
    # the same ranks, each with its own copy of the model, stepped in
    # alternation, so the machine's other load (these cores are shared) falls
    # on both alike and each gyre step is compared with the gloo step beside it.
    dist.init_process_group("gyre")
    groups = {"gyre": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    rank, world = dist.get_rank(), dist.get_world_size()
    x = torch.randn(opts.batch, opts.width)
    models, opts_, params = {}, {}, 0
    for backend, group in groups.items():
        torch.manual_seed(0)
        layers = []
        for _ in range(opts.layers):
            layers += [torch.nn.Linear(opts.width, opts.width), torch.nn.ReLU()]
        module = torch.nn.Sequential(*layers)
        params = sum(p.numel() for p in module.parameters())
        # Gradients as views into DDP's buckets: one copy of 403 MB fewer per
        # model, so two models fit for 4 ranks.
        models[backend] = DDP(module, process_group=group, gradient_as_bucket_view=True)
        opts_[backend] = torch.optim.SGD(module.parameters(), lr=1e-6)

    def step(backend, sync):
        model, opt = models[backend], opts_[backend]
        dist.barrier(group=groups[backend])
        start = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        if sync:
            model(x).sum().backward()
        else:
            with model.no_sync():
                model(x).sum().backward()
        opt.step()
        return time.perf_counter() - start

    times = {(b, sync): [] for b in groups for sync in (True, False)}
    for sync in (True, False):
        for i in range(opts.warmup + opts.iters):
            for backend in groups:
                t = step(backend, sync)
                if i >= opts.warmup:
                    times[(backend, sync)].append(t)

    for backend in groups:
        meds = torch.tensor([statistics.median(times[(backend, True)]), statistics.median(times[(backend, False)])],
                            dtype=torch.float64)
        dist.all_reduce(meds, op=dist.ReduceOp.MAX)  # the slowest rank sets the pace
        if rank == 0:
            print("RESULT %s %d %d %.6f %.6f" % (backend, world, params, meds[0].item(), meds[1].item()), flush=True)
    dist.destroy_process_group()


def run(opts, world):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for r in range(world):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   LOCAL_RANK=str(r), NCCL_SOCKET_IFNAME="lo", GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
        args = [sys.executable, os.path.abspath(__file__), "--worker"] + opts.passthrough
        procs.append(subprocess.Popen(args, env=env, stdout=subprocess.PIPE, text=True))
    try:
        out = procs[0].communicate(timeout=opts.timeout)[0]
        for p in procs[1:]:
            p.wait(timeout=60)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    res = {}
    for line in out.splitlines():
        if line.startswith("RESULT "):
            _, b, w, params, synced, no_sync = line.split()
            res[b] = (int(params), float(synced), float(no_sync))
    if len(res) != 2:
        raise RuntimeError("%d ranks printed no result (exit codes %s)" % (world, [p.returncode for p in procs]))
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-p", "--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--width", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("-n", "--iters", type=int, default=8, help="timed steps per backend and kind")
    ap.add_argument("-w", "--warmup", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=1800, help="seconds one rank count's run may take")
    ap.add_argument("--csv", help="also write the rows to this CSV file")
    ap.add_argument("--worker", action="store_true")
    opts = ap.parse_args()
    if opts.worker:
        worker(opts)
        return
    opts.passthrough = ["--layers", str(opts.layers), "--width", str(opts.width), "--batch", str(opts.batch),
                        "-n", str(opts.iters), "-w", str(opts.warmup)]
    cores = os.cpu_count() or 1
    rows = []
    for world in opts.ranks:
        res = run(opts, world)
        rows += [(world, b) + res[b] for b in ("gyre", "gloo")]
    params = rows[0][2]
    print("# DDP step, %.1f M float32 parameters (%d x Linear(%d, %d)), batch %d per rank, SGD; median of %d "
          "alternating steps, slowest rank; %d cores%s" %
          (params / 1e6, opts.layers, opts.width, opts.width, opts.batch, opts.iters, cores,
           "" if max(opts.ranks) <= cores else " (runs with more ranks than cores are oversubscribed)"))
    print("| ranks | backend | step ms | no-sync step ms | communication ms (step - no-sync) | gloo step / step |")
    print("|---|---|---|---|---|---|")
    for world in opts.ranks:
        gloo = [r for r in rows if r[0] == world and r[1] == "gloo"][0][3]
        for r in rows:
            if r[0] == world:
                print("| %d%s | %s | %.0f | %.0f | %.0f | %.2f |" %
                      (world, "*" if world > cores else "", r[1], r[3] * 1e3, r[4] * 1e3, (r[3] - r[4]) * 1e3,
                       gloo / r[3]))
    if opts.csv:
        with open(opts.csv, "w") as f:
            f.write("ranks,backend,params,step_s,no_sync_step_s\n")
            for r in rows:
                f.write("%d,%s,%d,%.6f,%.6f\n" % r)


if __name__ == "__main__":
    main()

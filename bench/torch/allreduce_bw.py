#!/usr/bin/env python3
"""torch.distributed all_reduce busbw, backend gyre beside torch's own.

    PYTHONPATH=build/python /usr/bin/python3 bench/torch/allreduce_bw.py [-p 2 4] [-b 8] [-e 256M] [-f 4] [--csv out.csv]
    PYTHONPATH=build/python python3 bench/torch/allreduce_bw.py --device cuda -p 1 2 -b 1M -e 256M

For each rank count of -p, forks that many ranks per backend (env:// on
127.0.0.1, loopback) and prints, per size, the median time of -n iterations
after -w warm-ups and the busbw (algbw * 2(n-1)/n, as nccl-tests; for one
rank, algbw), both backends in one run so the ratio is measured under the
same machine load.

The other backend: gloo on CPU tensors; with --device cuda, nccl at one
rank and gloo beyond (the ranks share the visible GPUs round-robin, and
nccl refuses two processes on one GPU, which gyre serves). On CUDA tensors
each iteration is timed to the end of the work on the GPU
(torch.cuda.synchronize()).
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import time


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


def sizes(opts):
    s = opts.begin
    while s <= opts.end:
        yield s
        s *= opts.factor


def worker(opts):
    import torch
    import torch.distributed as dist
    if opts.backend == "gyre":
        import torch_gyre  # noqa: F401
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    device = torch.device("cpu")
    sync = lambda: None  # noqa: E731
    if opts.device == "cuda":
        device = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
        sync = torch.cuda.synchronize
    dist.init_process_group(opts.backend)
    for size in sizes(opts):
        t = torch.ones(max(1, size // 4), device=device)
        times = []
        for i in range(opts.warmup + opts.iters):
            dist.barrier()
            sync()
            start = time.perf_counter()
            dist.all_reduce(t)
            sync()
            if i >= opts.warmup:
                times.append(time.perf_counter() - start)
        # Every rank's median, the slowest counts.
        med = torch.tensor([statistics.median(times)], dtype=torch.float64, device=device)
        dist.all_reduce(med, op=dist.ReduceOp.MAX)
        if rank == 0:
            us = med.item() * 1e6
            factor = 2 * (world - 1) / world if world > 1 else 1
            busbw = t.numel() * 4 / med.item() / 1e9 * factor
            print("%s %d %.1f %.3f" % (opts.backend, t.numel() * 4, us, busbw), flush=True)
    dist.destroy_process_group()


def run_backend(opts, backend, world):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for r in range(world):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), NCCL_SOCKET_IFNAME="lo", GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
        args = [sys.executable, __file__, "--worker", "--backend", backend] + opts.passthrough
        procs.append(subprocess.Popen(args, env=env, stdout=subprocess.PIPE, text=True))
    out = procs[0].communicate(timeout=1200)[0]
    for p in procs[1:]:
        p.wait(timeout=60)
    rows = {}
    for line in out.splitlines():
        b, size, us, bw = line.split()
        rows[int(size)] = (float(us), float(bw))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-p", "--ranks", type=int, nargs="+", default=[2])
    ap.add_argument("-b", "--begin", type=parse_size, default=8)
    ap.add_argument("-e", "--end", type=parse_size, default=parse_size("64M"))
    ap.add_argument("-f", "--factor", type=int, default=4)
    ap.add_argument("-n", "--iters", type=int, default=20)
    ap.add_argument("-w", "--warmup", type=int, default=3)
    ap.add_argument("--csv", help="also write the rows to this CSV file")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where the tensors are")
    ap.add_argument("--backend", default=None)
    ap.add_argument("--worker", action="store_true")
    opts = ap.parse_args()
    if opts.worker:
        worker(opts)
        return
    opts.passthrough = ["-b", str(opts.begin), "-e", str(opts.end), "-f", str(opts.factor), "-n", str(opts.iters),
                       "-w", str(opts.warmup), "--device", opts.device]
    csv = []
    for world in opts.ranks:
        other = "nccl" if opts.device == "cuda" and world == 1 else "gloo"
        res = {b: run_backend(opts, b, world) for b in ("gyre", other)}
        where = "CPU tensors" if opts.device == "cpu" else "CUDA tensors"
        print("# torch.distributed all_reduce, float32 sum, %d ranks, %s; median of %d, slowest rank%s" %
              (world, where, opts.iters,
               "; more ranks than cores: oversubscribed" if opts.device == "cpu" and world > (os.cpu_count() or 1)
               else ""))
        print("| size (B) | gyre µs | gyre busbw GB/s | %s µs | %s busbw GB/s | gyre/%s busbw |" % (other, other, other))
        print("|---|---|---|---|---|---|")
        for size in sorted(res["gyre"]):
            g, o = res["gyre"][size], res[other].get(size, (float("nan"), float("nan")))
            print("| %d | %.1f | %.3f | %.1f | %.3f | %.2f |" % (size, g[0], g[1], o[0], o[1], o[0] / g[0]))
            csv.append("%s,%s,%d,%d,%.1f,%.4f,%.1f,%.4f" % (opts.device, other, world, size, g[0], g[1], o[0], o[1]))
        print()
    if opts.csv:
        with open(opts.csv, "w") as f:
            f.write("device,other,ranks,bytes,gyre_us,gyre_busbw_gbs,other_us,other_busbw_gbs\n")
            f.write("\n".join(csv) + "\n")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""torch.distributed all_reduce busbw on CPU tensors, backend gyre vs gloo.

    PYTHONPATH=build/python /usr/bin/python3 bench/torch/allreduce_bw.py [-p 2 4] [-b 8] [-e 256M] [-f 4] [--csv out.csv]

For each rank count of -p, forks that many ranks per backend (env:// on
127.0.0.1, loopback) and prints, per size, the median time of -n iterations after -w warm-ups and the busbw
(algbw * 2(n-1)/n, as nccl-tests), both backends in one run so the ratio is
measured under the same machine load.
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
    dist.init_process_group(opts.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    for size in sizes(opts):
        t = torch.ones(max(1, size // 4))
        times = []
        for i in range(opts.warmup + opts.iters):
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(t)
            if i >= opts.warmup:
                times.append(time.perf_counter() - start)
        # Every rank's median, the slowest counts.
        med = torch.tensor([statistics.median(times)], dtype=torch.float64)
        dist.all_reduce(med, op=dist.ReduceOp.MAX)
        if rank == 0:
            us = med.item() * 1e6
            busbw = t.numel() * 4 / med.item() / 1e9 * 2 * (world - 1) / world
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
    ap.add_argument("--backend", default=None)
    ap.add_argument("--worker", action="store_true")
    opts = ap.parse_args()
    if opts.worker:
        worker(opts)
        return
    opts.passthrough = ["-b", str(opts.begin), "-e", str(opts.end), "-f", str(opts.factor), "-n", str(opts.iters),
                       "-w", str(opts.warmup)]
    csv = []
    for world in opts.ranks:
        res = {b: run_backend(opts, b, world) for b in ("gyre", "gloo")}
        print("# torch.distributed all_reduce, float32 sum, %d ranks, CPU tensors; median of %d, slowest rank%s" %
              (world, opts.iters, "; more ranks than cores: oversubscribed" if world > (os.cpu_count() or 1) else ""))
        print("| size (B) | gyre µs | gyre busbw GB/s | gloo µs | gloo busbw GB/s | gyre/gloo busbw |")
        print("|---|---|---|---|---|---|")
        for size in sorted(res["gyre"]):
            g, o = res["gyre"][size], res["gloo"].get(size, (float("nan"), float("nan")))
            print("| %d | %.1f | %.3f | %.1f | %.3f | %.2f |" % (size, g[0], g[1], o[0], o[1], o[0] / g[0]))
            csv.append("%d,%d,%.1f,%.4f,%.1f,%.4f" % (world, size, g[0], g[1], o[0], o[1]))
        print()
    if opts.csv:
        with open(opts.csv, "w") as f:
            f.write("ranks,bytes,gyre_us,gyre_busbw_gbs,gloo_us,gloo_busbw_gbs\n")
            f.write("\n".join(csv) + "\n")


if __name__ == "__main__":
    main()

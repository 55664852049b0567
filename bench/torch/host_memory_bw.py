#!/usr/bin/env python3
"""torch.distributed all_reduce and all_gather on CPU tensors: gyre with its
CPU allocator (tensors in memory the peers map), gyre on heap tensors
(GYRE_TORCH_ALLOCATOR=0) and Gloo, against the single-copy bound.

    PYTHONPATH=build/python /usr/bin/python3 bench/torch/host_memory_bw.py [-p 2 4] [-b 1M] [-e 256M] [-f 4]
        [--memcpy path_costs.txt] [--csv out.csv]

For each rank count of -p and each backend, forks the ranks (env:// on
127.0.0.1) and times, per size (the bytes of each rank's input), the median
of -n calls after -w warm-ups, the slowest rank counting; busbw as
nccl-tests defines it (AllReduce algbw x 2(n-1)/n, AllGather of the whole
output x (n-1)/n). The buffers are allocated once per size, as DDP's
buckets are, so the allocator's work is not timed. gyre's all_gather is
all_gather_into_tensor (one output tensor, as FSDP calls it); Gloo's, which
torch 1.13 has only as a list of outputs, all_gather.

The single-copy bound: each rank must copy every byte it does not own once
(AllGather) or read it once and write its share (AllReduce as ReduceScatter
plus AllGather), so busbw can reach at most the rate of one memcpy of the
same size: bench/compare/path_costs's memcpy column (--memcpy names its
output; the row of the nearest size at or below, the last row beyond).
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

VARIANTS = {  # name -> (backend, environment)
    "gyre-arena": ("gyre", {}),
    "gyre-heap": ("gyre", {"GYRE_TORCH_ALLOCATOR": "0"}),
    "gloo": ("gloo", {}),
}
COLLS = ("all_reduce", "all_gather")


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
        import torch_gyre
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group(opts.backend)
    for size in sizes(opts):
        t = torch.ones(size // 4)
        # gyre gathers into one tensor (all_gather_into_tensor, as FSDP
        # does); Gloo of torch 1.13 has no such call, so into a list there.
        out = torch.empty(world * (size // 4))
        outs = [torch.empty(size // 4) for _ in range(world)] if opts.backend == "gloo" else None
        arena = opts.backend == "gyre" and torch_gyre.in_host_arena(t) and torch_gyre.in_host_arena(out)
        for coll in COLLS:
            times = []
            for i in range(opts.warmup + opts.iters):
                dist.barrier()
                start = time.perf_counter()
                if coll == "all_reduce":
                    dist.all_reduce(t)
                elif outs is not None:
                    dist.all_gather(outs, t)
                else:
                    dist.all_gather_into_tensor(out, t)
                if i >= opts.warmup:
                    times.append(time.perf_counter() - start)
            med = torch.tensor([statistics.median(times)], dtype=torch.float64)
            dist.all_reduce(med, op=dist.ReduceOp.MAX)
            if rank == 0:
                print("%s %d %.1f %d" % (coll, size, med.item() * 1e6, arena), flush=True)
        del t, out, outs
    dist.destroy_process_group()


def run_variant(opts, variant, world):
    backend, extra = VARIANTS[variant]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for r in range(world):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   NCCL_SOCKET_IFNAME="lo", GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", **extra)
        args = [sys.executable, __file__, "--worker", "--backend", backend] + opts.passthrough
        procs.append(subprocess.Popen(args, env=env, stdout=subprocess.PIPE, text=True))
    out = procs[0].communicate(timeout=3600)[0]
    for p in procs[1:]:
        p.wait(timeout=60)
    rows = {}
    for line in out.splitlines():
        coll, size, us, arena = line.split()
        rows[(coll, int(size))] = (float(us), arena == "1")
    return rows


def busbw(coll, world, size, us):
    if coll == "all_reduce":
        return size / us / 1e3 * 2 * (world - 1) / world
    return size * world / us / 1e3 * (world - 1) / world


def memcpy_rates(path):
    """path_costs' memcpy column: [(bytes, GB/s)] by size."""
    rates = []
    if not path:
        return rates
    units = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    with open(path) as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) > 2 and cells[0].split(" ")[-1] in units:
                number, unit = cells[0].split(" ")
                rates.append((int(number) * units[unit], float(cells[1])))
    return sorted(rates)


def bound_for(rates, size):
    below = [r for s, r in rates if s <= size]
    return below[-1] if below else (rates[0][1] if rates else float("nan"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-p", "--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("-b", "--begin", type=parse_size, default=parse_size("1M"))
    ap.add_argument("-e", "--end", type=parse_size, default=parse_size("256M"))
    ap.add_argument("-f", "--factor", type=int, default=4)
    ap.add_argument("-n", "--iters", type=int, default=10)
    ap.add_argument("-w", "--warmup", type=int, default=2)
    ap.add_argument("--memcpy", help="bench/compare/path_costs output (its memcpy column is the bound)")
    ap.add_argument("--csv", help="also write the rows to this CSV file")
    ap.add_argument("--backend", default=None)
    ap.add_argument("--worker", action="store_true")
    opts = ap.parse_args()
    if opts.worker:
        worker(opts)
        return
    opts.passthrough = ["-b", str(opts.begin), "-e", str(opts.end), "-f", str(opts.factor), "-n", str(opts.iters),
                        "-w", str(opts.warmup)]
    rates = memcpy_rates(opts.memcpy)
    csv = ["collective,ranks,bytes,arena_us,heap_us,gloo_us,memcpy_gbs,in_arena"]
    for world in opts.ranks:
        res = {v: run_variant(opts, v, world) for v in VARIANTS}
        for coll in COLLS:
            print("# %s, float32, %d ranks, CPU tensors; median of %d, slowest rank%s" %
                  (coll, world, opts.iters, "; oversubscribed" if world > (os.cpu_count() or 1) else ""))
            print("| size | arena busbw GB/s | heap busbw | Gloo busbw | memcpy GB/s | arena % of bound |")
            print("|---|---:|---:|---:|---:|---:|")
            for size in sizes(opts):
                a, h, g = (res[v][(coll, size)] for v in VARIANTS)
                bound = bound_for(rates, size)
                bw = busbw(coll, world, size, a[0])
                print("| %d | %.2f | %.2f | %.2f | %.2f | %.0f %% |" % (
                    size, bw, busbw(coll, world, size, h[0]), busbw(coll, world, size, g[0]), bound,
                    100 * bw / bound))
                csv.append("%s,%d,%d,%.1f,%.1f,%.1f,%.2f,%d" % (coll, world, size, a[0], h[0], g[0], bound, a[1]))
            print()
    if opts.csv:
        with open(opts.csv, "w") as f:
            f.write("\n".join(csv) + "\n")


if __name__ == "__main__":
    main()

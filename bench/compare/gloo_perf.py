#!/usr/bin/python3
"""gloo_perf: torch.distributed's gloo backend on CPU tensors, timed like
gyre's *_perf binaries: the same size flags, the same size semantics per
collective and the same table columns, so bench/compare/run can put gyre and
Gloo side by side.

  gloo_perf.py -C allreduce -p 2 -b 8 -e 64M -f 4          (forks 2 ranks)
  torchrun --nproc_per_node 2 gloo_perf.py -C allgather    (ranks from env)

-C allreduce       dist.all_reduce                  busbw 2(n-1)/n
   allgather       dist.all_gather into one buffer  (n-1)/n, size = whole output
   broadcast       dist.broadcast                   1
   reduce_scatter  dist.reduce_scatter              (n-1)/n, size = whole input
   reduce          dist.reduce                      1
   alltoall        dist.all_to_all_single           (n-1)/n, size = whole buffer
Other flags as the *_perf binaries: -b -e -i -f -n -w -c -a -r -d -o -p.
--bands "b:e:f:n:w[:c],..." runs several size ranges, each with its own
iteration counts (and check), in one process group (torch is slow to
import). -m one times only the form bench/compare/run reports (out-of-place
where the call has one); the other columns are then N/A.

all_reduce, broadcast and reduce have only an in-place form in
torch.distributed: their out-of-place columns are N/A. An operation that
gloo does not implement (reduce_scatter in torch 1.13) prints a
"# skipped" line and no rows, and exits 0.

Ranks meet through a FileStore (with -p) or torchrun's env:// variables
(MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE). GLOO_SOCKET_IFNAME defaults
to lo when every rank runs on this host.
"""
import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time

COLLS = ["allreduce", "allgather", "broadcast", "reduce_scatter", "reduce", "alltoall"]
IN_PLACE_ONLY = {"allreduce", "broadcast", "reduce"}
TYPES = {  # name -> (torch dtype name, bytes)
    "float": ("float32", 4), "float32": ("float32", 4),
    "double": ("float64", 8), "float64": ("float64", 8),
    "half": ("float16", 2), "float16": ("float16", 2),
    "bfloat16": ("bfloat16", 2),
    "int8": ("int8", 1), "uint8": ("uint8", 1),
    "int32": ("int32", 4), "int64": ("int64", 8),
}


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip()
    if text and text[-1].upper() in units:
        return int(text[:-1]) * units[text[-1].upper()]
    return int(text)


def sizes(b, e, f, step):
    out, s = [], b
    while s <= e:
        out.append(s)
        s = (s * f if s else 1) if f > 1 else s + step
    return out


def counts(coll, count, elt, n):
    """(send, recv, param) element counts, as nccl-tests derives them."""
    if coll == "allgather":
        p = count // n
        return p, p * n, p
    if coll == "reduce_scatter":
        p = count // n
        return p * n, p, p
    if coll == "alltoall":
        align = 16 // elt if elt < 16 else 1
        p = count // n // align * align
        return p * n, p * n, p
    return count, count, count


def bus_factor(coll, n):
    if coll == "allreduce":
        return 2.0 * (n - 1) / n
    if coll in ("broadcast", "reduce"):
        return 1.0
    return (n - 1) / n


def fmt_time(us):
    if us >= 10000:
        return "%.0f" % us
    if us >= 100:
        return "%.1f" % us
    return "%.2f" % us


class Bench:
    def __init__(self, args, rank, n):
        import numpy
        import torch
        import torch.distributed as dist
        self.np, self.torch, self.dist = numpy, torch, dist
        self.args, self.rank, self.n = args, rank, n
        self.dtype = getattr(torch, TYPES[args.d][0])
        self.elt = TYPES[args.d][1]
        self.op = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX,
                   "min": dist.ReduceOp.MIN, "prod": dist.ReduceOp.PRODUCT}[args.o]
        self.bus_sum, self.rows, self.total_wrong = 0.0, 0, 0
        # --cuda: tensors on GPU localRank % count (all on GPU 0 with one GPU).
        self.device = "cpu"
        if args.cuda:
            self.device = "cuda:%d" % (int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
            torch.cuda.set_device(self.device)

    def zeros(self, count):
        return self.torch.zeros(count, dtype=self.dtype, device=self.device)

    def sync(self):
        if self.device != "cpu":
            self.torch.cuda.synchronize()

    # Small non-negative integers (as mpi_coll_perf): sums, maxima and minima
    # are exact in every type. input(rank, i) has period 50 in i, so every
    # expected vector is tiled from one period with numpy (this torch build's
    # element-wise CPU ops take seconds on large tensors).
    PERIOD = 50

    def period(self, rank):
        return (self.np.arange(self.PERIOD, dtype=self.np.int64) * 7 + rank * 13 + 1) % self.PERIOD

    def tiled(self, one_period, start, count):
        s = start % self.PERIOD
        return self.np.tile(one_period, (s + count) // self.PERIOD + 1)[s:s + count]

    def input(self, rank, start, count):
        return self.tiled(self.period(rank), start, count)

    def reduced(self, start, count):
        np = self.np
        acc = self.period(0)
        for r in range(1, self.n):
            v = self.period(r)
            acc = {"sum": lambda: acc + v, "max": lambda: np.maximum(acc, v),
                   "min": lambda: np.minimum(acc, v), "prod": lambda: acc * v}[self.args.o]()
        return self.tiled(acc, start, count)

    def expected(self, c):
        send, recv, p = c
        np, coll, rank = self.np, self.args.C, self.rank
        if coll in ("allreduce", "reduce"):
            return self.reduced(0, recv)
        if coll == "broadcast":
            return self.input(self.args.r, 0, recv)
        if coll == "allgather":
            return np.concatenate([self.input(r, 0, p) for r in range(self.n)])
        if coll == "reduce_scatter":
            return self.reduced(rank * p, p)
        return np.concatenate([self.input(b, rank * p, p) for b in range(self.n)])

    def fill(self, tensor, values):
        """tensor[:] = values (int64 numpy), converted to the tensor's type."""
        if self.dtype == self.torch.bfloat16 or self.device != "cpu":  # numpy has no bfloat16
            tensor.copy_(self.torch.from_numpy(values.astype(self.np.float64)).to(self.dtype))
        else:
            self.np.copyto(tensor.numpy(), values, casting="unsafe")

    def poison(self, tensor):
        """Values no check expects: NaN, or the type's largest integer."""
        if self.device != "cpu":
            tensor.fill_(float("nan") if self.dtype.is_floating_point else self.torch.iinfo(self.dtype).max)
            return
        if self.dtype == self.torch.bfloat16:
            tensor.fill_(float("nan"))
            return
        a = tensor.numpy()
        a.fill(self.np.nan if self.dtype.is_floating_point else self.np.iinfo(a.dtype).max)

    def as_float64(self, tensor):
        tensor = tensor.cpu()
        if self.dtype == self.torch.bfloat16:
            return tensor.float().numpy().astype(self.np.float64)
        return tensor.numpy().astype(self.np.float64)

    def buffers(self, c, in_place):
        """Returns (call, output tensor, input tensor to fill)."""
        t, dist, coll, rank, n = self.torch, self.dist, self.args.C, self.rank, self.n
        send, recv, p = c
        out = self.zeros(max(send, recv))
        if p == 0:  # nothing to move (NCCL returns at once); gloo crashes on empty tensors
            return (lambda: None), out, out
        if coll == "allreduce":
            return (lambda: dist.all_reduce(out, op=self.op)), out, out
        if coll == "broadcast":
            return (lambda: dist.broadcast(out, src=self.args.r)), out, out
        if coll == "reduce":
            return (lambda: dist.reduce(out, dst=self.args.r, op=self.op)), out, out
        if coll == "allgather":
            parts = list(out[:recv].chunk(n)) if p else [out[:0] for _ in range(n)]
            inp = parts[rank] if in_place else self.zeros(p)
            return (lambda: dist.all_gather(parts, inp)), out[:recv], inp
        if coll == "reduce_scatter":
            inp = self.zeros(send)
            parts = list(inp.chunk(n)) if p else [inp[:0] for _ in range(n)]
            res = parts[rank] if in_place else out[:recv]
            return (lambda: dist.reduce_scatter(res, parts, op=self.op)), res, inp
        inp = out if in_place else self.zeros(send)
        return (lambda: dist.all_to_all_single(out, inp)), out, inp

    def combine(self, us):
        t = self.torch
        v = t.tensor([us], dtype=t.float64, device=self.device)
        a = self.args.a
        if a == 0:
            self.dist.broadcast(v, src=0)
        elif a == 2:
            self.dist.all_reduce(v, op=self.dist.ReduceOp.MIN)
        elif a == 3:
            self.dist.all_reduce(v, op=self.dist.ReduceOp.MAX)
        else:
            self.dist.all_reduce(v)
            v /= self.n
        return float(v[0])

    def run_mode(self, c, in_place, iters, warmup, check):
        """Returns (us or None, wrong or -1)."""
        if not in_place and self.args.C in IN_PLACE_ONLY:
            return None, -1
        if in_place and self.args.m == "one" and self.args.C not in IN_PLACE_ONLY:
            return None, -1
        call, out, inp = self.buffers(c, in_place)
        self.fill(inp, self.input(self.rank, 0, inp.numel()))
        for _ in range(warmup):
            call()
        self.sync()
        self.dist.barrier()
        start = time.perf_counter()
        for _ in range(iters):
            call()
        self.sync()
        us = (time.perf_counter() - start) * 1e6 / iters
        wrong = -1
        # As nccl-tests, in-place AlltoAll is timed but not checked.
        if check and not (in_place and self.args.C == "alltoall"):
            self.poison(out)
            self.fill(inp, self.input(self.rank, 0, inp.numel()))
            call()
            if self.args.C == "reduce" and self.rank != self.args.r:
                wrong = 0
            else:
                # Compared in float64: every expected value is an exact small integer.
                got = self.as_float64(out[:c[1]])
                want = self.expected(c)
                if not self.dtype.is_floating_point:  # integer results wrap like the type
                    want = want.astype(self.torch.zeros(0, dtype=self.dtype).numpy().dtype)
                wrong = int(self.np.count_nonzero(got != want.astype(self.np.float64)))
        return self.combine(us), wrong

    def row(self, size, iters, warmup, check):
        count = size // self.elt
        c = counts(self.args.C, count, self.elt, self.n)
        results = [self.run_mode(c, ip, iters, warmup, check) for ip in (0, 1)]
        wrong = self.torch.tensor([max(w, 0) for _, w in results], dtype=self.torch.int64, device=self.device)
        self.dist.all_reduce(wrong)
        nbytes = max(c[0], c[1]) * self.elt
        if self.rank != 0:
            return
        uses_op = self.args.C in ("allreduce", "reduce", "reduce_scatter")
        uses_root = self.args.C in ("broadcast", "reduce")
        line = "%12d  %12d  %8s  %6s  %6d" % (nbytes, c[2], self.args.d,
                                            self.args.o if uses_op else "none",
                                            self.args.r if uses_root else -1)
        for m, (us, w) in enumerate(results):
            if us is None:
                line += "  %7s  %6s  %6s  %6s" % ("N/A", "N/A", "N/A", "N/A")
                continue
            alg = nbytes / (us * 1e-6) / 1e9 if us > 0 else 0.0
            bus = alg * bus_factor(self.args.C, self.n)
            wtext = "N/A" if w < 0 else str(int(wrong[m]))
            if w >= 0:
                self.total_wrong += int(wrong[m])
            line += "  %7s  %6.2f  %6.2f  %6s" % (fmt_time(us), alg, bus, wtext)
            self.bus_sum += bus
            self.rows += 1
        print(line, flush=True)

    def supported(self):
        """False (after saying why) when gloo lacks the operation."""
        try:
            call, _, _ = self.buffers(counts(self.args.C, 16 * self.n, self.elt, self.n), True)
            call()
            return True
        except RuntimeError as e:
            if self.rank == 0:
                print("# skipped: gloo (torch %s) %s: %s" % (self.torch.__version__, self.args.C,
                                                             str(e).splitlines()[0]), flush=True)
            return False

    def header(self, bands):
        t = self.torch
        print("# Collective test starting: gloo_perf -C %s" % self.args.C)
        print("# torch %s, backend gloo, CPU tensors" % t.__version__)
        print("# nRanks %d bands %s validation: %d average: %d" %
              (self.n, ",".join(":".join(str(x) for x in b) for b in bands), self.args.c, self.args.a))
        print("#\n# %10s  %12s  %8s  %6s  %6s  %-10s%-12s%11s  %-12s%-8s%13s" %
              ("", "", "", "", "", "", "out-of-place", "", "", "in-place", ""))
        print("# %10s  %12s  %8s  %6s  %6s" % ("size", "count", "type", "redop", "root") +
              "  %7s  %6s  %6s  %6s" % ("time", "algbw", "busbw", "#wrong") * 2)
        print("# %10s  %12s  %8s  %6s  %6s" % ("(B)", "(elements)", "", "", "") +
              "  %7s  %6s  %6s  %6s" % ("(us)", "(GB/s)", "(GB/s)", "") * 2, flush=True)


def run_rank(args, rank, n, store_path):
    import torch.distributed as dist
    if store_path:
        store = dist.FileStore(store_path, n)
        dist.init_process_group(args.backend, store=store, rank=rank, world_size=n)
    else:
        dist.init_process_group(args.backend, init_method="env://", rank=rank, world_size=n)
    bench = Bench(args, rank, n)
    bands = args.band_list
    if rank == 0:
        bench.header(bands)
    ok = bench.supported()
    if ok:
        last = None
        for b, e, f, iters, warmup, check in bands:
            for s in sizes(b, e, f, args.i):
                # Sizes that round to the same element count repeat a row.
                if s // bench.elt != last:
                    last = s // bench.elt
                    bench.row(s, iters, warmup, check)
        if rank == 0:
            if args.c:
                print("# Wrong elements       : %d %s" % (bench.total_wrong,
                                                         "FAILED" if bench.total_wrong else "OK"))
            print("# Avg bus bandwidth    : %g \n#" % (bench.bus_sum / bench.rows if bench.rows else 0),
                  flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 1 if bench.total_wrong else 0


def die_with_parent():
    """In a forked rank: SIGKILL when the launcher dies (a rank left alone
    would wait for its peers forever)."""
    import ctypes
    import signal
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def parse_bands(text, check):
    bands = []
    for part in text.split(","):
        f = part.split(":")
        c = int(f[5]) if len(f) > 5 else check
        bands.append((parse_size(f[0]), parse_size(f[1]), int(f[2]), int(f[3]), int(f[4]), c))
    return bands


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-C", choices=COLLS, default="allreduce")
    ap.add_argument("-b", type=parse_size, default=32 << 20)
    ap.add_argument("-e", type=parse_size, default=32 << 20)
    ap.add_argument("-i", type=parse_size, default=1 << 20)
    ap.add_argument("-f", type=int, default=1)
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("-w", type=int, default=5)
    ap.add_argument("-c", type=int, default=1)
    ap.add_argument("-a", type=int, default=1, choices=range(4))
    ap.add_argument("-r", type=int, default=0)
    ap.add_argument("-d", choices=sorted(TYPES), default="float")
    ap.add_argument("-o", choices=["sum", "max", "min", "prod"], default="sum")
    ap.add_argument("-p", type=int, default=0, help="fork this many ranks on this host")
    ap.add_argument("-m", choices=["both", "one"], default="both")
    ap.add_argument("--bands", help="b:e:f:n:w,... instead of -b -e -f -n -w")
    ap.add_argument("--backend", choices=["gloo", "nccl"], default="gloo",
                    help="torch.distributed backend (nccl needs --cuda)")
    ap.add_argument("--cuda", action="store_true", help="CUDA tensors (GPU localRank %% count)")
    ap.add_argument("--store", help=argparse.SUPPRESS)   # set for forked ranks
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.band_list = (parse_bands(args.bands, args.c) if args.bands else
                      [(args.b, args.e, args.f, args.n, args.w, args.c)])

    if args.rank is not None:  # a rank forked by -p below
        return run_rank(args, args.rank, args.p, args.store)
    if args.p:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        with tempfile.TemporaryDirectory(prefix="gloo_perf.") as tmp:
            store = os.path.join(tmp, "store")
            procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__)] + sys.argv[1:] +
                                      ["--store", store, "--rank", str(r)],
                                      preexec_fn=die_with_parent) for r in range(args.p)]
            codes = [p.wait() for p in procs]
        bad = [c for c in codes if c]
        return bad[0] if bad else 0
    rank, n = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    if n > 1 and os.environ.get("LOCAL_WORLD_SIZE") == str(n):
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    if n == 1:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            os.environ.setdefault("MASTER_PORT", str(s.getsockname()[1]))
    return run_rank(args, rank, n, None)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""torch_gyre's CPU allocator: large tensors in memory the peers map.

Runs of 2 ranks, each checking against references the ranks compute alone
(exact integer sums in float32/float64, known per-rank fills):

- `arena`: a tensor from GYRE_TORCH_ALLOCATOR_MIN_BYTES lands in gyre's
  memory and a smaller one does not; all_reduce, all_gather and broadcast on
  such tensors are exact; a tensor freed while its collective is in flight
  stays valid until the collective ends; a full descriptor table makes the
  allocator fall back to torch's; the bound on live allocations holds; a
  freed allocation is reused for the same size, within the bound on kept
  bytes; a
  forked child gets a private copy of what it inherited (its writes do not
  reach the parent) and allocates from torch's allocator; after the tensors
  are freed and the group destroyed no gyre memory stays mapped or open but
  what the allocator keeps for reuse.
- `ddp`: DDP on a model with a 2 MiB weight (in gyre's memory) trains to the
  same parameters as one process on the whole batch. (No check after
  destroy: torch 2.6's DDP keeps its group alive past it.)
- `mixed`: rank 1 opts out (GYRE_TORCH_ALLOCATOR=0): its tensors stay on the
  heap, the collectives between an arena rank and a heap rank are exact;
  rank 0 keeps nothing (GYRE_TORCH_ALLOCATOR_KEEP_BYTES=0), so after destroy
  it holds no gyre memory at all.
- `peer_killed`: rank 1 SIGKILLs itself while rank 0 gathers from its arena
  tensor: rank 0 gets gyre's error or the result, never a crash or a hang;
  nothing is left in /dev/shm by either.
"""
import datetime
import os
import resource
import signal
import sys
import threading
import time

import harness

MIN_BYTES = 1 << 20
MODE = os.environ.get("ALLOCATOR_TEST_MODE", "arena")


def gyre_memory_held():
    """Mappings and descriptors of gyre's host memory in this process."""
    with open("/proc/self/maps") as f:
        maps = sum(1 for line in f if "gyre-host-mem" in line)
    fds = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds += "gyre-host-mem" in os.readlink("/proc/self/fd/" + fd)
        except OSError:
            pass
    return maps, fds


class Checker:
    def __init__(self, rank):
        self.rank, self.failures, self.passed = rank, [], 0

    def __call__(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failures.append(what)
            print("FAIL rank %d: %s" % (self.rank, what), flush=True)


def check_collectives(check, rank, world, opted_out):
    import torch
    import torch.distributed as dist
    import torch_gyre

    n = 3 * MIN_BYTES // 4 + 5  # float32: 3 MiB + 20 B, not a whole number of pages
    t = torch.full((n,), float(rank + 1))
    check(torch_gyre.in_host_arena(t) != opted_out, "a %d-byte tensor in gyre's memory: %s" %
          (t.numel() * 4, torch_gyre.in_host_arena(t)))
    small = torch.ones(MIN_BYTES // 4 - 1)
    check(not torch_gyre.in_host_arena(small), "a tensor below the threshold is in gyre's memory")
    t += torch.arange(n, dtype=torch.float32) % 1000
    dist.all_reduce(t)
    want = world * (world + 1) / 2 + world * (torch.arange(n, dtype=torch.float32) % 1000)
    check(torch.equal(t, want), "all_reduce of %d floats differs from the exact sum" % n)

    # all_gather into arena outputs, and broadcast from each root in turn.
    src = torch.arange(n, dtype=torch.float64) * (rank + 1)
    outs = [torch.empty(n, dtype=torch.float64) for _ in range(world)]
    dist.all_gather(outs, src)
    for r in range(world):
        check(torch.equal(outs[r], torch.arange(n, dtype=torch.float64) * (r + 1)),
              "all_gather: rank %d's part differs" % r)
    for root in range(world):
        b = torch.full((n,), float(rank)) if rank != root else torch.arange(n, dtype=torch.float32)
        dist.broadcast(b, root)
        check(torch.equal(b, torch.arange(n, dtype=torch.float32)), "broadcast from %d differs" % root)

    # Freed by the caller while the collective is in flight: the work keeps
    # the tensor alive until it completes.
    x = torch.full((n,), float(rank + 1))
    live_before = torch_gyre.host_allocator_stats()["live_allocations"]  # x's included
    work = dist.all_reduce(x, async_op=True)
    del x
    work.wait()
    check(torch.equal(work.result()[0], torch.full((n,), float(world * (world + 1) / 2))),
          "all_reduce on a tensor dropped before wait() differs")
    del work
    deadline = time.monotonic() + 10  # the backend's queue may drop its reference a moment later
    while torch_gyre.host_allocator_stats()["live_allocations"] >= live_before and time.monotonic() < deadline:
        time.sleep(0.01)
    after = torch_gyre.host_allocator_stats()["live_allocations"]
    check(after < live_before or opted_out, "the dropped tensor's memory was not released (%d live, %d before)" %
          (after, live_before))


def check_fallbacks(check, rank, world):
    import torch
    import torch.distributed as dist
    import torch_gyre

    # No descriptor left for a memfd: torch's own allocator serves it.
    before = torch_gyre.host_allocator_stats()["fallbacks"]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    highest = max(int(fd) for fd in os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 1, hard))
    fillers = []
    try:
        while True:  # the free numbers below the limit
            fillers.append(os.open("/dev/null", os.O_RDONLY))
    except OSError:
        pass
    try:
        t = torch.full((MIN_BYTES,), float(rank + 1))
    finally:
        for fd in fillers:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    check(not torch_gyre.in_host_arena(t), "with no descriptor left the tensor is still in gyre's memory")
    check(torch_gyre.host_allocator_stats()["fallbacks"] == before + 1, "the fallback was not counted")
    dist.all_reduce(t)
    check(torch.equal(t, torch.full((MIN_BYTES,), float(world * (world + 1) / 2))), "all_reduce after a fallback")

    # The bound on live allocations (GYRE_TORCH_ALLOCATOR_MAX_ALLOCATIONS=4
    # in this run): the fifth live one comes from torch.
    stats = torch_gyre.host_allocator_stats()
    room = stats["max_allocations"] - stats["live_allocations"]
    held = [torch.empty(MIN_BYTES // 4) for _ in range(room + 1)]
    check(sum(torch_gyre.in_host_arena(h) for h in held) == room and not torch_gyre.in_host_arena(held[-1]),
          "%d tensors with room for %d: %d in gyre's memory" % (len(held), room,
                                                                sum(torch_gyre.in_host_arena(h) for h in held)))
    del held


def check_reuse(check):
    import torch
    import torch_gyre

    # A freed allocation is handed out again for the same size, within the
    # bound on kept bytes (GYRE_TORCH_ALLOCATOR_KEEP_BYTES=24M in this run).
    first = torch.empty(5 * MIN_BYTES // 4)
    where = first.data_ptr()
    before = torch_gyre.host_allocator_stats()["reused"]
    del first
    again = torch.empty(5 * MIN_BYTES // 4)
    stats = torch_gyre.host_allocator_stats()
    check(again.data_ptr() == where and stats["reused"] == before + 1, "a freed 5 MiB allocation was not reused")
    big = [torch.empty(4 * MIN_BYTES // 4) for _ in range(4)]  # 4 x 4 MiB
    del big
    stats = torch_gyre.host_allocator_stats()
    check(stats["kept_bytes"] <= stats["keep_bytes"], "kept %d bytes, more than %d" %
          (stats["kept_bytes"], stats["keep_bytes"]))
    huge = torch.empty(32 * MIN_BYTES // 4)  # beyond the bound: freed, not kept
    kept = torch_gyre.host_allocator_stats()["kept_bytes"]
    del huge
    check(torch_gyre.host_allocator_stats()["kept_bytes"] == kept, "an allocation larger than the bound was kept")


def check_fork(check):
    import torch
    import torch_gyre

    t = torch.full((MIN_BYTES,), 7.0)
    check(torch_gyre.in_host_arena(t), "the tensor for the fork is not in gyre's memory")
    pid = os.fork()
    if pid == 0:  # the child: only os._exit leaves it
        code = 0
        try:
            if not torch.equal(t, torch.full((MIN_BYTES,), 7.0)):
                code |= 1  # did not inherit the contents
            t.fill_(-1.0)  # must stay the child's
            fresh = torch.empty(MIN_BYTES)
            if torch_gyre.in_host_arena(fresh):
                code |= 2  # a child of a process with live communicators must not allocate from gyre
            kept = torch_gyre.host_allocator_stats()["kept_bytes"]
            del t, fresh
            if torch_gyre.host_allocator_stats()["kept_bytes"] != kept:
                code |= 8  # an inherited (now private) allocation must not be kept for reuse
        except Exception:
            code |= 4
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    check(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0,
          "the forked child failed (status %#x: 1 contents, 2 allocator, 4 exception, 8 kept)" % status)
    check(torch.equal(t, torch.full((MIN_BYTES,), 7.0)), "the child's write reached the parent's tensor")


def check_ddp(check, rank, world):
    import torch
    import torch.distributed as dist
    import torch_gyre
    from torch.nn.parallel import DistributedDataParallel as DDP

    def model():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(64, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1)).double()

    ddp = DDP(model())
    check(torch_gyre.in_host_arena(ddp.module[0].weight), "the 2 MiB weight is not in gyre's memory")
    ref = model()  # one process on every rank's batch
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.01)
    for step in range(4):
        gen = torch.Generator().manual_seed(step)
        batch = torch.randn(world * 8, 64, generator=gen, dtype=torch.float64)
        opt.zero_grad()
        ddp(batch[rank * 8:(rank + 1) * 8]).pow(2).mean().backward()
        opt.step()
        ref_opt.zero_grad()
        # DDP averages the ranks' gradients: the mean of the per-rank means.
        (sum(ref(batch[r * 8:(r + 1) * 8]).pow(2).mean() for r in range(world)) / world).backward()
        ref_opt.step()
    for p, q in zip(ddp.parameters(), ref.parameters()):
        check(torch.allclose(p, q, rtol=1e-9, atol=1e-12), "DDP's parameters differ from one process's")
    digest = torch.tensor([float(sum(p.sum() for p in ddp.parameters()))], dtype=torch.float64)
    every = [torch.zeros(1, dtype=torch.float64) for _ in range(world)]
    dist.all_gather(every, digest)
    check(all(torch.equal(e, digest) for e in every), "the ranks' parameters differ")


def worker(rank, world):
    import torch
    import torch.distributed as dist
    import torch_gyre

    check = Checker(rank)
    opted_out = os.environ.get("GYRE_TORCH_ALLOCATOR") == "0"
    stats = torch_gyre.host_allocator_stats()
    check(stats["installed"] != opted_out, "installed %s with GYRE_TORCH_ALLOCATOR=%s" %
          (stats["installed"], os.environ.get("GYRE_TORCH_ALLOCATOR")))
    dist.init_process_group("gyre", timeout=datetime.timedelta(seconds=60))
    if MODE == "peer_killed":
        t = torch.full((16 * MIN_BYTES,), float(rank))
        outs = [torch.empty_like(t) for _ in range(world)]
        dist.barrier()
        if rank == 1:
            threading.Timer(0.002, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
        start = time.monotonic()
        try:
            for _ in range(50):
                dist.all_gather(outs, t)
            print("rank %d: gathers finished before the peer died" % rank, flush=True)
        except RuntimeError as e:
            print("rank %d: raised after %.1f s: %s" % (rank, time.monotonic() - start, e), flush=True)
            check("gyre" in str(e), "the error does not come from gyre")
        # Abort releases the group, the dead peer's mapped tensors with it:
        # what stays is this rank's own memory.
        group = dist.group.WORLD
        backend = group._get_backend(torch.device("cpu")) if hasattr(group, "_get_backend") else group
        backend._gyre_abort()
        del t, outs
        stats = torch_gyre.host_allocator_stats()
        held = stats["live_allocations"] + stats["kept_allocations"]
        maps, fds = gyre_memory_held()
        print("LEFT|%d" % (maps - held + fds - held), flush=True)
        check(maps == held and fds == held, "after abort: %d mappings and %d descriptors of gyre memory for %d "
              "of its own" % (maps, fds, held))
        os._exit(1 if check.failures else 0)
    check_collectives(check, rank, world, opted_out)
    print("rank %d: %s done" % (rank, "check_collectives"), flush=True)
    if MODE == "arena":
        check_fallbacks(check, rank, world)
        print("rank %d: %s done" % (rank, "check_fallbacks"), flush=True)
        check_reuse(check)
        print("rank %d: %s done" % (rank, "check_reuse"), flush=True)
        check_fork(check)
        print("rank %d: %s done" % (rank, "check_fork"), flush=True)
    if MODE == "ddp":
        check_ddp(check, rank, world)
        print("rank %d: %s done" % (rank, "check_ddp"), flush=True)
    dist.barrier()
    dist.destroy_process_group()
    # torch 2.x lets go of the group's backend (and with it the peers'
    # mapped tensors) once the last reference is collected: a few seconds.
    import gc
    deadline = time.monotonic() + 10
    while True:
        gc.collect()
        maps, fds = gyre_memory_held()
        stats = torch_gyre.host_allocator_stats()
        held = stats["live_allocations"] + stats["kept_allocations"]
        if (maps == held and fds == held) or time.monotonic() > deadline or MODE == "ddp":
            break
        time.sleep(0.1)
    # torch 2.6's DDP keeps its group (and so the peers' mapped tensors)
    # alive past destroy_process_group, while the process lives: the ddp run
    # checks its results only.
    if MODE != "ddp":
        check(maps == held and fds == held, "after destroy: %d mappings and %d descriptors of gyre memory for %d "
              "live and kept allocations" % (maps, fds, held))
    print("rank %d: %d checks passed, %d failed; %s" % (rank, check.passed, len(check.failures),
                                                        torch_gyre.host_allocator_stats()), flush=True)
    if check.failures:
        raise AssertionError("%d checks failed" % len(check.failures))


def shm_entries():
    return {n for n in os.listdir("/dev/shm") if "gyre" in n or "nccl" in n}


def driver():
    harness.require_torch_gyre()
    argv = [sys.executable, os.path.abspath(__file__), "--worker"]
    ok = True
    runs = [
        ("arena", {"GYRE_TORCH_ALLOCATOR_MAX_ALLOCATIONS": "8", "GYRE_TORCH_ALLOCATOR_KEEP_BYTES": "24M"}, None,
         [0, 0]),
        ("ddp", {}, None, [0, 0]),
        ("mixed", {"GYRE_TORCH_ALLOCATOR_KEEP_BYTES": "0"}, lambda r: {"GYRE_TORCH_ALLOCATOR": "0"} if r == 1 else {}, [0, 0]),
        ("peer_killed", {"GYRE_TIMEOUT": "10"}, None, [0, -signal.SIGKILL]),
    ]
    for mode, env, per_rank, expect in runs:
        before = shm_entries()
        start = time.monotonic()
        results = harness.run_ranks(argv, 2, timeout=90, extra_env=dict(env, ALLOCATOR_TEST_MODE=mode),
                                    per_rank_env=per_rank)
        passed = harness.report(mode, results, expect)
        left = shm_entries() - before
        if left:
            print("FAIL %s: left in /dev/shm: %s" % (mode, sorted(left)))
            passed = False
        took = time.monotonic() - start
        print("%s took %.1f s" % (mode, took))
        matrix_row(mode, results, left, took, passed)
        ok = ok and passed
    sys.exit(0 if ok else 1)


def matrix_row(mode, results, left, took, passed):
    """The case's row of scripts/fault-matrix ("MATRIX|case|saw|time|left")."""
    out = results[0][1] or ""
    verdict = "pass" if passed else "FAIL"
    shm = "; /dev/shm: %s" % (" ".join(sorted(left)) if left else "none")
    if mode == "peer_killed":
        saw = next((line.split(": ", 1)[1] for line in out.splitlines() if "raised after" in line),
                   "the gathers finished before the peer died")
        when = next((line.split("raised after ")[1].split(":")[0] for line in out.splitlines()
                     if "raised after" in line), "-")
        extra = next((line.split("|")[1] for line in out.splitlines() if line.startswith("LEFT|")), "?")
        print("MATRIX|torch CPU allocator: rank 1 SIGKILLed while rank 0 all_gathers from its tensors (2 ranks)|"
              "r0: %s; after abort r0 holds %s gyre mappings or descriptors beyond its own tensors|%s|"
              "none beyond the survivor's own tensors%s|%s" % (saw[:160], extra, when, shm, verdict))
    elif mode == "arena":
        print("MATRIX|torch CPU allocator: no descriptor for a memfd, the live bound, fork, a tensor freed in "
              "flight (2 ranks)|fallback to torch's allocator, exact results, the child's writes stay its own|"
              "- (no error expected; run %.1f s)|after destroy only the allocator's own memory%s|%s" %
              (took, shm, verdict))


if __name__ == "__main__":
    if "--worker" in sys.argv:
        harness.main(worker, [2], 90)
    else:
        driver()

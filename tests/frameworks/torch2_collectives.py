#!/usr/bin/env python3
"""torch 2.x's collective API on backend "gyre", CPU tensors, 2 and 4 ranks.

What torch 2.x added over 1.13, each result compared with a reference every
rank computes alone from the same seeds: all_gather_into_tensor (concatenated
and stacked), reduce_scatter_tensor, all_to_all_single with uneven splits,
batch_isend_irecv around a ring, _coalescing_manager (its all_reduce,
all_gather_into_tensor and reduce_scatter_tensor fast paths, one gyre group
each), Work.wait(timeout) on an operation that cannot finish, sequence
numbers, the backend's name and its registration for cpu and cuda,
new_group, a sparse and an int16 tensor refused naming gyre,
monitored_barrier refused by torch for any backend but Gloo; and the
backend strings "cpu:gyre" and "cpu:gyre,cuda:gloo" (gyre serving the CPU
beside another backend), and "cpu:gyre,cuda:nccl",
which a torch without NCCL refuses naming NCCL. torch 2.x only (registered
in meson for it).
"""
import datetime
import gc
import os
import sys
import time

import harness


class Checker:
    def __init__(self, rank):
        self.rank = rank
        self.failures = 0

    def __call__(self, ok, what):
        if not ok:
            self.failures += 1
            print("FAIL rank %d: %s" % (self.rank, what), flush=True)


def inputs(torch, r, n, key):
    """Rank r's input of n elements: small integers, exact in any order."""
    g = torch.Generator().manual_seed(1000 * key + r)
    return torch.randint(-50, 50, (n,), generator=g).to(torch.float32)


def thread_names():
    names = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open("/proc/self/task/%s/comm" % tid) as f:
                names.append(f.read().strip())
        except OSError:
            pass  # ended while listed
    return sorted(names)


def gyre_mappings():
    """gyre's mappings but the CPU allocator's own (its live tensors and the
    allocations it keeps for reuse, one mapping each, all "gyre-host-mem"
    like the peers' tensors a group maps)."""
    import torch_gyre
    with open("/proc/self/maps") as f:
        names = [line.split(None, 5)[-1].strip() for line in f if "gyre-" in line]
    stats = torch_gyre.host_allocator_stats()
    own = stats["live_allocations"] + stats["kept_allocations"]
    host = [n for n in names if "gyre-host-mem" in n]
    return [n for n in names if "gyre-host-mem" not in n] + host[own:]


def worker(rank, world):
    import torch
    import torch.distributed as dist

    import torch_gyre

    threads_before = thread_names()
    dist.init_process_group("gyre", timeout=datetime.timedelta(seconds=60))
    check = Checker(rank)
    pg = dist.group.WORLD

    # The name torch reports (DDP's logging, error messages) and the
    # registration for both devices.
    backend = pg._get_backend(torch.device("cpu"))
    check(isinstance(backend, torch_gyre.ProcessGroupGyre), "cpu backend is %r" % type(backend))
    check(backend.name() == "gyre", "Backend.name() is %r" % backend.name())
    check(dist.get_backend() == "gyre", "get_backend() is %r" % dist.get_backend())
    check(dist.Backend.backend_capability.get("gyre") == ["cpu", "cuda"],
          "registered for %r" % dist.Backend.backend_capability.get("gyre"))
    check(pg._get_backend(torch.device("cuda")) is backend, "cuda is not served by the same gyre backend")
    check(pg.name() == "gyre", "the group is named %r" % pg.name())

    # all_gather_into_tensor: concatenated and stacked outputs.
    for n in (0, 1, 7, 1031):
        mine = inputs(torch, rank, n, 1)
        want = torch.cat([inputs(torch, r, n, 1) for r in range(world)])
        out = torch.empty(world * n)
        dist.all_gather_into_tensor(out, mine)
        check(torch.equal(out, want), "all_gather_into_tensor n=%d" % n)
        out2 = torch.empty(world, n)
        dist.all_gather_into_tensor(out2, mine)
        check(torch.equal(out2, want.view(world, n)), "all_gather_into_tensor stacked n=%d" % n)

    # reduce_scatter_tensor: SUM and MAX.
    for n in (1, 13, 1031):
        full = [inputs(torch, r, world * n, 2) for r in range(world)]
        for op, ref in ((dist.ReduceOp.SUM, torch.stack(full).sum(0)), (dist.ReduceOp.MAX, torch.stack(full).amax(0))):
            out = torch.empty(n)
            dist.reduce_scatter_tensor(out, full[rank].clone(), op=op)
            check(torch.equal(out, ref[rank * n:(rank + 1) * n]), "reduce_scatter_tensor %s n=%d" % (op, n))

    # all_to_all_single with uneven splits: rank i sends (i + 2 * j) % 5
    # elements (some none) to rank j.
    def count(i, j):
        return (i + 2 * j) % 5
    send_splits = [count(rank, j) for j in range(world)]
    recv_splits = [count(i, rank) for i in range(world)]
    src = inputs(torch, rank, sum(send_splits), 3)
    out = torch.full((sum(recv_splits),), -1.0)
    dist.all_to_all_single(out, src, output_split_sizes=recv_splits, input_split_sizes=send_splits)
    want = []
    for i in range(world):
        theirs = inputs(torch, i, sum(count(i, j) for j in range(world)), 3)
        start = sum(count(i, j) for j in range(rank))
        want.append(theirs[start:start + count(i, rank)])
    check(torch.equal(out, torch.cat(want)), "all_to_all_single uneven splits %s" % send_splits)

    # batch_isend_irecv: a ring each way.
    right, left = (rank + 1) % world, (rank - 1) % world
    to_right, to_left = inputs(torch, rank, 33, 4), inputs(torch, rank, 5, 5)
    from_left, from_right = torch.empty(33), torch.empty(5)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, to_right, right), dist.P2POp(dist.irecv, from_left, left),
                                   dist.P2POp(dist.isend, to_left, left), dist.P2POp(dist.irecv, from_right, right)])
    for r in reqs:
        r.wait()
    check(torch.equal(from_left, inputs(torch, left, 33, 4)), "batch_isend_irecv from the left")
    check(torch.equal(from_right, inputs(torch, right, 5, 5)), "batch_isend_irecv from the right")

    # _coalescing_manager: every fast path torch has, synchronous and async.
    from torch.distributed.distributed_c10d import _coalescing_manager
    device = torch.device("cpu")
    for async_ops in (False, True):
        ts = [inputs(torch, rank, n, 6 + n) for n in (3, 0, 17)]
        with _coalescing_manager(device=device, async_ops=async_ops) as cm:
            for t in ts:
                dist.all_reduce(t)
        if async_ops:
            cm.wait()
        for t, n in zip(ts, (3, 0, 17)):
            want = sum(inputs(torch, r, n, 6 + n) for r in range(world))
            check(torch.equal(t, want), "coalesced all_reduce n=%d async=%s" % (n, async_ops))
        mines = [inputs(torch, rank, n, 30 + n) for n in (4, 9)]
        outs = [torch.empty(world * n) for n in (4, 9)]
        with _coalescing_manager(device=device, async_ops=async_ops) as cm:
            for o, m in zip(outs, mines):
                dist.all_gather_into_tensor(o, m)
        if async_ops:
            cm.wait()
        for o, n in zip(outs, (4, 9)):
            want = torch.cat([inputs(torch, r, n, 30 + n) for r in range(world)])
            check(torch.equal(o, want), "coalesced all_gather_into_tensor n=%d async=%s" % (n, async_ops))
        fulls = [inputs(torch, rank, world * n, 50 + n) for n in (2, 11)]
        outs = [torch.empty(n) for n in (2, 11)]
        with _coalescing_manager(device=device, async_ops=async_ops) as cm:
            for o, f in zip(outs, fulls):
                dist.reduce_scatter_tensor(o, f)
        if async_ops:
            cm.wait()
        for o, n in zip(outs, (2, 11)):
            ref = sum(inputs(torch, r, world * n, 50 + n) for r in range(world))
            check(torch.equal(o, ref[rank * n:(rank + 1) * n]), "coalesced reduce_scatter_tensor n=%d" % n)

    # Sequence numbers: the same on every rank, and counting collectives.
    before = backend._get_sequence_number_for_group()
    dist.all_reduce(torch.ones(1))
    dist.barrier()
    after = backend._get_sequence_number_for_group()
    check(after == before + 2, "sequence number %d -> %d over two collectives" % (before, after))
    seqs = [None] * world
    dist.all_gather_object(seqs, backend._get_sequence_number_for_group())
    check(len(set(seqs)) == 1, "sequence numbers differ across ranks: %s" % seqs)

    # new_group: the members reduce over themselves only.
    evens = list(range(0, world, 2))
    sub = dist.new_group(evens)
    if rank in evens:
        t = torch.tensor([float(rank + 1)])
        dist.all_reduce(t, group=sub)
        check(t.item() == sum(r + 1 for r in evens), "new_group all_reduce %s" % t.item())
        check(dist.get_backend(sub) == "gyre" and sub.name() == "gyre",
              "new_group backend %r named %r" % (dist.get_backend(sub), sub.name()))
    # Bad input: a sparse tensor (torch 2.x routes it to allreduce_sparse,
    # which gyre does not implement) and a tensor of a dtype gyre lacks are
    # refused at the call, naming gyre; the group works on afterwards.
    for bad, what in ((torch.ones(4).to_sparse(), "sparse"), (torch.ones(4, dtype=torch.int16), "int16")):
        try:
            dist.all_reduce(bad)
            check(False, "all_reduce of a %s tensor was accepted" % what)
        except RuntimeError as e:
            check("gyre" in str(e), "all_reduce of a %s tensor: message %r does not name gyre" % (what, str(e)))
    t = torch.ones(3)
    dist.all_reduce(t)
    check(torch.equal(t, torch.full((3,), float(world))), "all_reduce after refused calls")

    # What torch 2.6 refuses before asking any backend but its own
    # (docs/TORCH-2X.md): monitored_barrier beyond Gloo.
    try:
        dist.monitored_barrier(timeout=datetime.timedelta(seconds=5))
        print("rank %d: monitored_barrier ran on gyre" % rank, flush=True)
    except ValueError as e:
        check("GLOO" in str(e), "monitored_barrier refused with %r" % str(e))

    # Work.wait(timeout): a receive nobody sends to gives up after its
    # timeout with torch's error, not at the group's timeout; the group is
    # then aborted (its operation is still queued on the communicator).
    lone = dist.new_group(list(range(world)), timeout=datetime.timedelta(seconds=30))
    if rank == 0:
        work = dist.irecv(torch.empty(4), src=1, group=lone)
        start = time.monotonic()
        try:
            work.wait(timeout=datetime.timedelta(seconds=1))
            check(False, "Work.wait(timeout) returned without the message")
        except RuntimeError as e:
            waited = time.monotonic() - start
            check(0.9 <= waited < 10, "Work.wait(1 s) gave up after %.2f s: %s" % (waited, e))
    dist.barrier()
    lone.abort() if hasattr(lone, "abort") else lone._get_backend(torch.device("cpu"))._gyre_abort()

    dist.barrier()
    del backend, pg, sub, lone
    dist.destroy_process_group()
    # Nothing of gyre's outlives the groups: no shared-memory mapping, and no
    # thread that was not there before init (torch's own store threads end
    # with the default group too; a few seconds for threads to be joined).
    gc.collect()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (len(thread_names()) > len(threads_before) or gyre_mappings()):
        time.sleep(0.1)
    check(not gyre_mappings(), "after destroy_process_group, still mapped: %s" % gyre_mappings())
    extra = len(thread_names()) - len(threads_before)
    check(extra <= 0, "after destroy_process_group, %d thread(s) more than before init: %s (before: %s)" %
          (extra, thread_names(), threads_before))
    print("rank %d: %s" % (rank, "all checks passed" if check.failures == 0 else "%d failed" % check.failures))
    sys.exit(0 if check.failures == 0 else 1)


def strings_worker(rank, world):
    """One backend string: the group runs on gyre for CPU tensors."""
    import torch
    import torch.distributed as dist

    import torch_gyre

    string = os.environ["BACKEND_STRING"]
    if "nccl" in string and not dist.is_nccl_available():
        try:
            dist.init_process_group(string, timeout=datetime.timedelta(seconds=30))
        except RuntimeError as e:
            print("rank %d: %r refused: %s" % (rank, string, e), flush=True)
            sys.exit(0 if "NCCL" in str(e) else 1)
        print("rank %d: %r accepted by a torch without NCCL" % (rank, string), flush=True)
        sys.exit(1)
    dist.init_process_group(string, timeout=datetime.timedelta(seconds=30))
    pg = dist.group.WORLD
    ok = isinstance(pg._get_backend(torch.device("cpu")), torch_gyre.ProcessGroupGyre)
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    ok = ok and t.item() == world * (world + 1) / 2
    # Only a group that is gyre's alone is gyre's object, named "gyre"
    # (torch_gyre/__init__.py); beside another backend it stays torch's.
    alone = set(p.split(":")[-1] for p in string.split(",")) == {"gyre"}
    ok = ok and isinstance(pg, torch_gyre._C.NamedProcessGroup) == alone and (pg.name() == "gyre") == alone
    print("rank %d: %r: get_backend %r, named %r, all_reduce %s -> %s" %
          (rank, string, dist.get_backend(), pg.name(), t.item(), "ok" if ok else "WRONG"), flush=True)
    dist.destroy_process_group()
    sys.exit(0 if ok else 1)


def driver():
    harness.require_torch_gyre()
    ok = True
    me = [sys.executable, os.path.abspath(__file__)]
    for world in (2, 4):
        start = time.monotonic()
        ok = harness.report("world %d" % world, harness.run_ranks(me + ["--worker"], world, 120)) and ok
        print("world %d took %.1f s" % (world, time.monotonic() - start))
    for string in ("cpu:gyre", "cpu:gyre,cuda:gloo", "cpu:gyre,cuda:nccl"):
        results = harness.run_ranks(me + ["--strings-worker"], 2, 60, extra_env={"BACKEND_STRING": string})
        ok = harness.report("backend %r" % string, results) and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    if "--worker" in sys.argv:
        harness.main(worker, [], timeout=0)
    elif "--strings-worker" in sys.argv:
        strings_worker(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
    else:
        driver()

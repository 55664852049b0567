#!/usr/bin/env python3
"""Every torch.distributed operation on backend "gyre", on 2 and 3 ranks.

Each rank makes every rank's inputs from a seed (so it can compute the
expected result without communicating), runs the operation, and compares
with a reference computed in float64 or exact integers. Counts include 0,
1 and primes; all_reduce runs every dtype x op. Ranks join by env://
(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), as under torchrun.
"""
import datetime
import os
import sys
import time
import zlib

import harness

FLOATS = ["float32", "float64", "float16", "bfloat16"]
INTS = ["int8", "uint8", "int32", "int64"]
OPS = ["SUM", "PRODUCT", "MIN", "MAX", "AVG", "PREMUL_SUM"]
COUNTS = [0, 1, 13, 1031]


def gyre_of(group):
    """The group's gyre backend object: the group itself on torch 1.x, the
    Backend it holds for the CPU on 2.x."""
    import torch
    return group._get_backend(torch.device("cpu")) if hasattr(group, "_get_backend") else group


class Checker:
    def __init__(self, rank):
        self.rank = rank
        self.failures = []
        self.passed = 0

    def __call__(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failures.append(what)
            print("FAIL rank %d: %s" % (self.rank, what), flush=True)

    def raises(self, fn, words, what):
        try:
            fn()
        except (RuntimeError, ValueError) as e:
            msg = str(e)
            self(all(w in msg for w in words), "%s: message %r lacks %s" % (what, msg, words))
            return
        self(False, "%s: no exception" % what)


def worker(rank, world):
    import torch
    import torch.distributed as dist

    import torch_gyre

    dist.init_process_group("gyre", timeout=datetime.timedelta(seconds=60))
    assert dist.get_backend() == "gyre", dist.get_backend()
    check = Checker(rank)

    def gen(r, shape, dtype, key):
        """Rank r's input: small integers, so sums and products of every
        dtype are exact, then float noise where asked."""
        g = torch.Generator().manual_seed(zlib.crc32(repr((key, r)).encode()))  # the same on every rank
        lo = 0 if dtype == torch.uint8 else -4
        return torch.randint(lo, 5, shape, generator=g).to(dtype)

    def same(got, ref, what, atol=0.0):
        ok = got.shape == ref.shape and got.dtype == ref.dtype
        if ok and got.numel():
            diff = (got.double() - ref.double()).abs().max().item()
            ok = diff <= atol
        check(ok, "%s: got %s, expected %s" % (what, got.flatten()[:8].tolist(), ref.flatten()[:8].tolist()))

    def reference(inputs, op, dtype):
        n = len(inputs)
        if dtype.is_floating_point:
            x = torch.stack([t.double() for t in inputs])
            r = {"SUM": lambda: x.sum(0), "PRODUCT": lambda: x.prod(0), "MIN": lambda: x.min(0).values,
                 "MAX": lambda: x.max(0).values, "AVG": lambda: x.sum(0) / n, "PREMUL_SUM": lambda: 2 * x.sum(0)}[op]()
            return r.to(dtype)
        x = torch.stack([t.long() for t in inputs])
        r = {"SUM": lambda: x.sum(0), "PRODUCT": lambda: x.prod(0), "MIN": lambda: x.min(0).values,
             "MAX": lambda: x.max(0).values, "AVG": lambda: torch.div(x.sum(0), n, rounding_mode="trunc"),
             "PREMUL_SUM": lambda: 2 * x.sum(0)}[op]()
        return r.to(dtype)

    def op_of(name):
        if name == "PREMUL_SUM":
            return dist._make_nccl_premul_sum(2.0)
        return getattr(dist.ReduceOp, name)

    tol = {torch.float32: 1e-5, torch.float64: 1e-12, torch.float16: 1e-2, torch.bfloat16: 4e-2}

    # all_reduce: every dtype x op x count.
    for dname in FLOATS + INTS:
        dtype = getattr(torch, dname)
        for op in OPS:
            for count in COUNTS:
                key = ("ar", dname, op, count)
                inputs = [gen(r, (count,), dtype, key) for r in range(world)]
                t = inputs[rank].clone()
                dist.all_reduce(t, op=op_of(op))
                atol = tol.get(dtype, 0.0) if op == "AVG" else 0.0
                same(t, reference(inputs, op, dtype), "all_reduce %s %s count %d" % (dname, op, count), atol)

    # Real-valued float noise over a large prime count, against float64.
    for dtype, rtol in ((torch.float32, 1e-5), (torch.float64, 1e-12)):
        g = [torch.Generator().manual_seed(100 + r) for r in range(world)]
        inputs = [torch.randn(65537, generator=g[r], dtype=dtype) for r in range(world)]
        t = inputs[rank].clone()
        dist.all_reduce(t)
        ref = torch.stack([x.double() for x in inputs]).sum(0)
        check(torch.allclose(t.double(), ref, rtol=rtol, atol=rtol), "all_reduce randn %s 65537" % dtype)
    # PREMUL_SUM with a non-power-of-two factor, and with a tensor factor.
    inputs = [gen(r, (101,), torch.float64, "pm") for r in range(world)]
    # (a tensor factor: a list of one in torch 1.13, the tensor itself in 2.x)
    tensor_factor = torch.tensor([0.3], dtype=torch.float64)
    for factor in (0.3, [tensor_factor] if torch.__version__.startswith("1.") else tensor_factor):
        t = inputs[rank].clone()
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(factor))
        ref = sum(0.3 * x for x in inputs)
        check(torch.allclose(t, ref, rtol=1e-12), "all_reduce PREMUL_SUM factor %r" % (factor,))

    # Non-contiguous tensors: a transposed matrix and a strided slice.
    inputs = [gen(r, (7, 5), torch.float32, "nc") for r in range(world)]
    t = inputs[rank].clone().t()
    dist.all_reduce(t)
    same(t, sum(inputs).t(), "all_reduce of a transposed tensor")
    base = torch.zeros(40)
    view = base[::3]  # 14 elements, stride 3
    view.copy_(gen(rank, (14,), torch.float32, "slice"))
    dist.all_reduce(view, op=dist.ReduceOp.MAX)
    ref = torch.stack([gen(r, (14,), torch.float32, "slice") for r in range(world)]).max(0).values
    same(view, ref, "all_reduce MAX of a strided slice")
    check(base[1::3].abs().sum().item() == 0, "all_reduce of a slice left the elements between alone")

    for count in (0, 1, 13):
        for root in range(world):
            # broadcast
            src = gen(root, (count, 3), torch.int64, ("bc", count, root))
            t = src.clone() if rank == root else torch.full((count, 3), -7, dtype=torch.int64)
            dist.broadcast(t, root)
            same(t, src, "broadcast count %d root %d" % (count, root))
            # reduce
            inputs = [gen(r, (count,), torch.float32, ("rd", count, root)) for r in range(world)]
            t = inputs[rank].clone()
            dist.reduce(t, root, op=dist.ReduceOp.SUM)
            if rank == root:
                same(t, sum(inputs), "reduce count %d root %d" % (count, root))
            # gather
            inputs = [gen(r, (count,), torch.int32, ("ga", count, root)) for r in range(world)]
            outs = [torch.empty(count, dtype=torch.int32) for _ in range(world)] if rank == root else None
            dist.gather(inputs[rank], outs, dst=root)
            if rank == root:
                for r in range(world):
                    same(outs[r], inputs[r], "gather count %d root %d block %d" % (count, root, r))
            # scatter
            parts = [gen(root, (count,), torch.float64, ("sc", count, root, r)) for r in range(world)]
            out = torch.empty(count, dtype=torch.float64)
            dist.scatter(out, parts if rank == root else None, src=root)
            same(out, parts[rank], "scatter count %d root %d" % (count, root))

        # all_gather (list) and all_gather_into_tensor
        inputs = [gen(r, (count,), torch.bfloat16, ("ag", count)) for r in range(world)]
        outs = [torch.empty(count, dtype=torch.bfloat16) for _ in range(world)]
        dist.all_gather(outs, inputs[rank])
        for r in range(world):
            same(outs[r], inputs[r], "all_gather count %d block %d" % (count, r))
        big = torch.empty(world * count, dtype=torch.bfloat16)
        dist.all_gather_into_tensor(big, inputs[rank])
        same(big, torch.cat(inputs), "all_gather_into_tensor count %d" % count)

        # reduce_scatter (list) and reduce_scatter_tensor
        inputs = [[gen(r, (count,), torch.int32, ("rs", count, b)) for b in range(world)] for r in range(world)]
        out = torch.empty(count, dtype=torch.int32)
        dist.reduce_scatter(out, inputs[rank], op=dist.ReduceOp.SUM)
        same(out, sum(inputs[r][rank] for r in range(world)), "reduce_scatter count %d" % count)
        flat = torch.cat(inputs[rank])
        out = torch.empty(count, dtype=torch.int32)
        dist.reduce_scatter_tensor(out, flat, op=dist.ReduceOp.MAX)
        ref = torch.stack([inputs[r][rank] for r in range(world)]).max(0).values
        same(out, ref, "reduce_scatter_tensor MAX count %d" % count)

    # all_to_all_single: even, then uneven splits (rows of 5; some empty).
    def rows(src, dst, n):
        return (torch.arange(n * 5, dtype=torch.float32).reshape(n, 5) + 1000 * src + 100 * dst)

    def split(src, dst):
        return (src + 2 * dst) % 3 + (1 if src == dst else 0)

    inp = torch.cat([rows(rank, p, 2) for p in range(world)])
    out = torch.empty(2 * world, 5)
    dist.all_to_all_single(out, inp)
    same(out, torch.cat([rows(p, rank, 2) for p in range(world)]), "all_to_all_single even")
    in_splits = [split(rank, p) for p in range(world)]
    out_splits = [split(p, rank) for p in range(world)]
    inp = torch.cat([rows(rank, p, split(rank, p)) for p in range(world)])
    out = torch.empty(sum(out_splits), 5)
    dist.all_to_all_single(out, inp, out_splits, in_splits)
    same(out, torch.cat([rows(p, rank, split(p, rank)) for p in range(world)]), "all_to_all_single uneven")
    # all_to_all (lists of uneven tensors)
    ins = [rows(rank, p, split(rank, p)) for p in range(world)]
    outs = [torch.empty(split(p, rank), 5) for p in range(world)]
    dist.all_to_all(outs, ins)
    for p in range(world):
        same(outs[p], rows(p, rank, split(p, rank)), "all_to_all block from %d" % p)

    # send/recv around the ring, in rank order so nothing waits forever.
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    msg = lambda r: gen(r, (1009,), torch.float32, "ring")  # noqa: E731
    got = torch.empty(1009)
    if rank == 0:
        dist.send(msg(0), nxt)
        dist.recv(got, prv)
    else:
        dist.recv(got, prv)
        dist.send(msg(rank), nxt)
    same(got, msg(prv), "send/recv ring")
    # isend/irecv both ways at once, larger than a connection's buffer:
    # each rank sends first, which only works if sends and receives start
    # together.
    n = 3 * 1024 * 1024
    send_t = torch.full((n,), float(rank))
    recv_t = torch.empty(n)
    reqs = [dist.isend(send_t, nxt), dist.irecv(recv_t, prv)]
    for q in reqs:
        q.wait()
    check(bool((recv_t == prv).all()), "isend/irecv exchange of %d floats" % n)
    # batch_isend_irecv both directions around the ring, into a strided view.
    to_next, to_prev = torch.full((17,), rank + 0.5), torch.full((17,), rank + 0.25)
    from_prev = torch.empty(17)
    from_next_base = torch.zeros(34)
    from_next = from_next_base[1::2]
    ops = [dist.P2POp(dist.isend, to_next, nxt), dist.P2POp(dist.irecv, from_prev, prv),
           dist.P2POp(dist.isend, to_prev, prv), dist.P2POp(dist.irecv, from_next, nxt)]
    for q in dist.batch_isend_irecv(ops):
        q.wait()
    check(bool((from_prev == prv + 0.5).all()), "batch_isend_irecv from previous rank")
    check(bool((from_next == nxt + 0.25).all()) and from_next_base[0::2].abs().sum().item() == 0,
          "batch_isend_irecv into a strided view from next rank")

    # isend/irecv that nobody waits for still run (polling is_completed()).
    t = torch.full((8,), float(rank)) if rank == 0 else torch.empty(8)
    if rank in (0, 1):
        w = dist.isend(t, 1) if rank == 0 else dist.irecv(t, 0)
        deadline = time.monotonic() + 10
        while not w.is_completed() and time.monotonic() < deadline:
            time.sleep(0.001)
        check(w.is_completed() and bool((t == 0).all()), "polled isend/irecv completes without wait()")

    # all_reduce_coalesced
    ts = [gen(rank, (c,), torch.float32, ("co", c)) for c in (3, 0, 11)]
    refs = [sum(gen(r, (c,), torch.float32, ("co", c)) for r in range(world)) for c in (3, 0, 11)]
    dist.all_reduce_coalesced(ts)
    for t, ref in zip(ts, refs):
        same(t, ref, "all_reduce_coalesced count %d" % t.numel())

    # all_gather_coalesced: torch passes one output list per rank, each with
    # one tensor per input (outs[rank][input]). Sizes differ per input, so the
    # transposed layout would not even fit.
    sizes = (5, 0, 2)
    ins = [gen(rank, (c,), torch.float64, ("agc", c)) for c in sizes]
    outs = [[torch.full_like(t, -1.0) for t in ins] for _ in range(world)]
    dist.all_gather_coalesced(outs, ins)
    for r in range(world):
        for i, c in enumerate(sizes):
            same(outs[r][i], gen(r, (c,), torch.float64, ("agc", c)),
                 "all_gather_coalesced input %d (count %d) from rank %d" % (i, c, r))
    check.raises(lambda: dist.all_gather_coalesced([[torch.empty(5)]] * world, [torch.ones(5), torch.ones(2)]),
                 ["gyre", "all_gather_coalesced", "expected one per input"], "all_gather_coalesced with short lists")

    # recv without src: rank 0 takes one message from rank 1 by name first,
    # then every other message from whoever sent it; each message carries its
    # sender's data and number, so the reported source can be checked
    # against it. Rank 1 sends three, the others one each; which sender a
    # receive from any source gets depends on timing (rank 1 may have sent
    # its third before another rank its first), but each sender's messages
    # arrive in order and every message exactly once.
    payload = lambda r, k: gen(r, (13,), torch.float32, ("any", k))  # noqa: E731
    if rank == 0:
        got = torch.empty(13)
        dist.recv(got, 1)
        same(got, payload(1, 0), "recv(src=1) before receives from any source")
        taken = {r: 0 for r in range(1, world)}
        taken[1] = 1
        seen = []
        for i in range(world):
            t = torch.empty(13)
            if i < world - 1:
                src = dist.recv(t)
            else:
                w = dist.irecv(t)
                w.wait()
                src = w._source_rank()
            seen.append(src)
            if src not in taken:
                check(False, "receive %d without src reported sender %s" % (i, src))
                continue
            same(t, payload(src, taken[src]), "receive %d without src: message %d of the reported sender %s"
                 % (i, taken[src], src))
            taken[src] += 1
        expected = {r: (3 if r == 1 else 1) for r in range(1, world)}
        check(taken == expected, "receives without src took %s messages per sender (senders in order: %s), "
              "expected %s" % (taken, seen, expected))
    else:
        if rank == 1:
            dist.send(payload(1, 0), 0)
        dist.send(payload(rank, 1 if rank == 1 else 0), 0)
        if rank == 1:
            dist.isend(payload(1, 2), 0).wait()
    dist.barrier()

    # async_op: several in flight, then wait; get_future with a callback.
    ts = [torch.full((1000,), float(rank + i)) for i in range(4)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    for i, w in enumerate(works):
        w.wait()
        check(bool((ts[i] == sum(r + i for r in range(world))).all()), "async all_reduce %d" % i)
        check(w.is_completed() and w.is_success(), "async work %d is completed and successful" % i)
    t = torch.ones(10) * (rank + 1)
    fut = dist.all_reduce(t, async_op=True).get_future().then(lambda f: f.value()[0] / world)
    avg = fut.wait()
    check(bool((avg == sum(range(1, world + 1)) / world).all()), "get_future().then() gives the all-reduced tensor")

    dist.barrier()

    # A wait() on the next operation may run it on the waiting thread instead
    # of the worker: results stay right when waits come out of issue order,
    # behind operations in flight, behind point-to-point ones and inside
    # coalesced batches, and the order of every rank's calls is kept.
    default_pg = dist.distributed_c10d._get_default_group()
    run_by_waiters = gyre_of(default_pg)._gyre_ops_run_by_waiters()
    for i in range(30):
        t = torch.full((257,), float(rank * 3 + i))
        dist.all_reduce(t)
        check(bool((t == sum(r * 3 + i for r in range(world))).all()), "sync all_reduce %d" % i)
    stolen = gyre_of(default_pg)._gyre_ops_run_by_waiters() - run_by_waiters
    ts = [torch.full((31,), float(rank + i)) for i in range(3)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    mid = torch.full((7,), float(rank))
    dist.all_reduce(mid)  # issued behind three in flight
    for i in reversed(range(3)):  # waited last first
        works[i].wait()
        check(bool((ts[i] == sum(r + i for r in range(world))).all()), "async all_reduce %d waited out of order" % i)
    check(bool((mid == sum(range(world))).all()), "sync all_reduce behind async ones")
    peer_out, peer_in = (rank + 1) % world, (rank - 1) % world
    got = torch.zeros(5)
    ops = [dist.P2POp(dist.isend, torch.full((5,), float(rank)), peer_out),
           dist.P2POp(dist.irecv, got, peer_in)]
    p2p = dist.batch_isend_irecv(ops)
    after = torch.full((3,), 1.0)
    after_work = dist.all_reduce(after, async_op=True)  # queued behind the held send and receive
    after_work.wait()
    for w in p2p:
        w.wait()
    check(bool((got == float(peer_in)).all()), "receive queued before a waited all_reduce")
    check(bool((after == float(world)).all()), "all_reduce waited behind a send and receive")
    # Which thread wins the race for each call depends on scheduling (one
    # run on 2 busy cores had a rank with none of 30), so it is reported,
    # not asserted.
    print("rank %d: %d of 30 sync all_reduces ran on the waiting thread" % (rank, stolen), flush=True)
    dist.barrier()

    # Bad input: each a Python exception naming what was wrong.
    check.raises(lambda: dist.all_reduce(torch.ones(3, dtype=torch.bool)), ["gyre", "Bool"], "bool dtype")
    check.raises(lambda: dist.all_reduce(torch.ones(3, dtype=torch.int16)), ["gyre", "Short"], "int16 dtype")
    check.raises(lambda: dist.all_reduce(torch.ones(3, dtype=torch.int32), op=dist.ReduceOp.BAND),
                 ["gyre", "BAND"], "BAND")
    # torch's dispatcher refuses a device it has no c10d kernel for before the
    # backend sees it; CUDA tensors (none here: CPU-only torch) reach
    # tensors.cc's check, which names the device.
    check.raises(lambda: dist.all_reduce(torch.ones(3, device="meta")), ["Meta"], "a meta tensor")
    check.raises(lambda: dist.all_gather([torch.ones(3)] * world, torch.ones(4)), ["gyre", "elements"],
                 "all_gather with wrong output sizes")

    # A subgroup of ranks 0 and 1 with its own gyre communicator.
    sub = dist.new_group([0, 1], backend="gyre")
    if rank < 2:
        t = torch.tensor([float(rank + 1)])
        dist.all_reduce(t, group=sub)
        same(t, torch.tensor([3.0]), "all_reduce on the subgroup of ranks 0 and 1")
    dist.barrier()

    # A group split from the default one: what torch 2.x's split() runs for
    # new_group/split_group (under gyre's name here, where 1.13 has no
    # split()). Every rank calls it; the members get a group whose gyre
    # communicator is split from the parent's, rank 0 (not a member) None.
    default_pg = dist.distributed_c10d._get_default_group()
    members = list(range(1, world))
    split_store = dist.PrefixStore("gyre_split/", dist.distributed_c10d._get_default_store())
    child = gyre_of(default_pg)._gyre_split(split_store, members, datetime.timedelta(seconds=30))
    if rank in members:
        check(child is not None and child.rank() == members.index(rank) and child.size() == len(members),
              "split group: rank %s of %s" % (child and child.rank(), child and child.size()))
        for count in (1, 7, 1009):
            gen = torch.Generator().manual_seed(count)
            inputs = [torch.randint(-1000, 1000, (count,), generator=gen).double() for _ in range(world)]
            t = inputs[rank].clone()
            child.allreduce([t]).wait()
            same(t, sum(inputs[r] for r in members), "all_reduce of %d on the split group of ranks %s" % (count, members))
    else:
        check(child is None, "split: rank 0 is not a member and gets no group")
    if not torch_gyre.CUDA:
        check.raises(lambda: gyre_of(default_pg)._gyre_bind_device(0), ["gyre", "device_id", "without CUDA"],
                     "device_id in a build without CUDA")
    dist.barrier()

    # A receive from any source that nobody sends to fails after its group's
    # timeout, naming why; abort() (torch 2.x's, here under gyre's name)
    # fails an operation a peer never joins at once, and later ones too.
    quick = dist.new_group([0, 1], backend="gyre", timeout=datetime.timedelta(seconds=2))
    stuck = dist.new_group([0, 1], backend="gyre", timeout=datetime.timedelta(seconds=60))
    if rank == 0:
        start = time.monotonic()
        check.raises(lambda: dist.recv(torch.empty(3), group=quick), ["gyre", "no rank", "2000 ms"],
                     "recv() without src and no sender")
        check(time.monotonic() - start < 20, "recv() without src gave up after %.1f s" % (time.monotonic() - start))
        w = dist.all_reduce(torch.ones(4), group=stuck, async_op=True)
        time.sleep(0.2)
        start = time.monotonic()
        gyre_of(stuck)._gyre_abort()
        check.raises(w.wait, ["gyre"], "wait() on an all_reduce after abort")
        check(time.monotonic() - start < 20, "abort took %.1f s" % (time.monotonic() - start))
        check.raises(lambda: dist.all_reduce(torch.ones(4), group=stuck), ["gyre", "closed by abort"],
                     "all_reduce after abort")
    dist.barrier()

    # Mismatched sizes across ranks: every rank raises gyre's error (the rank
    # that sees the mismatch names the counts; the others, that a peer gave
    # up on them).
    try:
        dist.all_reduce(torch.ones(5 + rank))
        check(False, "all_reduce with different counts on different ranks raised nothing")
    except RuntimeError as e:
        print("rank %d: mismatched counts raised: %s" % (rank, e), flush=True)
        check("gyre: ncclAllReduce failed" in str(e), "mismatched counts: message %r" % str(e))

    print("rank %d: %d checks passed, %d failed" % (rank, check.passed, len(check.failures)), flush=True)
    sys.stdout.flush()
    # The group is unusable after the mismatch; leave without destroy's wait.
    os._exit(0 if not check.failures else 1)


if __name__ == "__main__":
    harness.main(worker, [int(a) for a in sys.argv[1:] if a.isdigit()] or [2, 3], timeout=150)

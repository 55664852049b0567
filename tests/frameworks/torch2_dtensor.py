#!/usr/bin/env python3
"""DeviceMesh, DTensor, FSDP2 and functional collectives on backend "gyre".

On 2 and 4 CPU ranks, gyre the default group's backend:
- a 1-D DeviceMesh over the CPU (and a 2x2 one at 4 ranks) runs on gyre;
- DTensor redistribute Shard(0) -> Replicate, Replicate -> Shard(1),
  Shard(0) -> Shard(1) and Partial -> Replicate give exactly the tensor
  every rank can build alone;
- functional collectives (torch.distributed._functional_collectives:
  all_reduce, all_gather_tensor, reduce_scatter_tensor, all_to_all_single)
  eager, exact;
- FSDP2 (fully_shard) trains an MLP for a few SGD steps, each rank on its
  share of every global batch; the full parameters afterwards equal one
  process's training on the global batches. Where torch cannot run FSDP2
  on CPU tensors at all (2.6: below), the test says so and leaves it out.
torch 2.x only.
"""
import datetime
import sys

import harness

SEED, STEPS, BATCH = 7, 4, 4


def mlp(torch):
    torch.manual_seed(SEED)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 16), torch.nn.Tanh(),
                               torch.nn.Linear(16, 2))


def worker(rank, world):
    import torch
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

    import torch_gyre

    dist.init_process_group("gyre", timeout=datetime.timedelta(seconds=60))
    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)
            print("FAIL rank %d: %s" % (rank, what), flush=True)

    mesh = init_device_mesh("cpu", (world,))
    check(isinstance(mesh.get_group()._get_backend(torch.device("cpu")), torch_gyre.ProcessGroupGyre),
          "the mesh's group is not gyre's")

    full = torch.arange(world * 4 * world * 3, dtype=torch.float32).reshape(world * 4, world * 3)
    d = distribute_tensor(full, mesh, [Shard(0)])
    check(torch.equal(d.to_local(), full.chunk(world, 0)[rank]), "distribute_tensor Shard(0) local shard")
    r = d.redistribute(mesh, [Replicate()])
    check(torch.equal(r.to_local(), full), "Shard(0) -> Replicate")
    s1 = r.redistribute(mesh, [Shard(1)])
    check(torch.equal(s1.to_local(), full.chunk(world, 1)[rank]), "Replicate -> Shard(1)")
    s01 = d.redistribute(mesh, [Shard(1)])
    check(torch.equal(s01.to_local(), full.chunk(world, 1)[rank]), "Shard(0) -> Shard(1)")
    mine = torch.full((3, 5), float(rank + 1))
    p = DTensor.from_local(mine, mesh, [Partial()]).redistribute(mesh, [Replicate()])
    check(torch.equal(p.to_local(), torch.full((3, 5), float(world * (world + 1) // 2))), "Partial -> Replicate")

    if world == 4:
        mesh2 = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
        d2 = distribute_tensor(full, mesh2, [Shard(0), Shard(1)])
        row, col = divmod(rank, 2)
        check(torch.equal(d2.to_local(), full.chunk(2, 0)[row].chunk(2, 1)[col]), "2x2 mesh Shard(0), Shard(1)")
        check(torch.equal(d2.redistribute(mesh2, [Replicate(), Replicate()]).to_local(), full),
              "2x2 mesh -> Replicate, Replicate")
        check(torch.equal(d2.full_tensor(), full), "2x2 mesh full_tensor")

    # Functional collectives, eager.
    group = dist.group.WORLD
    x = torch.arange(6, dtype=torch.float32) + 10 * rank
    want = sum(torch.arange(6, dtype=torch.float32) + 10 * r for r in range(world))
    check(torch.equal(funcol.all_reduce(x, "sum", group), want), "funcol.all_reduce")
    gathered = funcol.all_gather_tensor(x, 0, group)
    check(torch.equal(gathered, torch.cat([torch.arange(6, dtype=torch.float32) + 10 * r for r in range(world)])),
          "funcol.all_gather_tensor")
    big = torch.arange(world * 3, dtype=torch.float32) * (rank + 1)
    rs = funcol.reduce_scatter_tensor(big, "sum", 0, group)
    total = torch.arange(world * 3, dtype=torch.float32) * sum(r + 1 for r in range(world))
    check(torch.equal(rs, total[rank * 3:(rank + 1) * 3]), "funcol.reduce_scatter_tensor")
    splits = [1 + (rank + j) % 2 for j in range(world)]  # uneven
    src = torch.arange(sum(splits), dtype=torch.float32) + 100 * rank
    recv = [1 + (i + rank) % 2 for i in range(world)]
    got = funcol.all_to_all_single(src, recv, splits, group)
    want_a2a = []
    for i in range(world):
        theirs = [1 + (i + j) % 2 for j in range(world)]
        start = sum(theirs[:rank])
        want_a2a.append((torch.arange(sum(theirs), dtype=torch.float32) + 100 * i)[start:start + theirs[rank]])
    check(torch.equal(got, torch.cat(want_a2a)), "funcol.all_to_all_single uneven")

    # FSDP2 on CPU: each rank trains on its rows of every global batch.
    # torch 2.6 accepts a CPU mesh in fully_shard, but its first forward
    # records an event on the all-gather stream (_fsdp_collectives.py,
    # foreach_all_gather: all_gather_stream.record_event()), and torch.cpu's
    # Stream there has no record_event: FSDP2 cannot run on CPU tensors with
    # any backend. Run where torch's CPU stream has it.
    if not hasattr(torch.cpu.Stream, "record_event"):
        print("rank %d: FSDP2 not run: torch %s's torch.cpu.Stream has no record_event, which FSDP2's "
              "all-gather calls" % (rank, torch.__version__), flush=True)
    else:
        fsdp2(torch, mesh, rank, world, check)

    dist.destroy_process_group()
    print("rank %d: %s" % (rank, "all checks passed" if not failures else "%d failed" % len(failures)), flush=True)
    sys.exit(1 if failures else 0)


def fsdp2(torch, mesh, rank, world, check):
    from torch.distributed.fsdp import fully_shard
    g = torch.Generator().manual_seed(SEED)
    xs = torch.randn(STEPS, world * BATCH, 8, generator=g)
    ys = torch.randn(STEPS, world * BATCH, 2, generator=g)
    ref = mlp(torch)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for s in range(STEPS):
        ref_opt.zero_grad()
        torch.nn.functional.mse_loss(ref(xs[s]), ys[s]).backward()
        ref_opt.step()
    model = mlp(torch)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    rows = slice(rank * BATCH, (rank + 1) * BATCH)
    for s in range(STEPS):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(xs[s, rows]), ys[s, rows]).backward()
        opt.step()
    got = {k: v.full_tensor() for k, v in model.state_dict().items()}
    want = ref.state_dict()
    diff = max((got[k] - want[k]).abs().max().item() for k in want)
    check(all(torch.allclose(got[k], want[k], rtol=1e-5, atol=1e-6) for k in want),
          "FSDP2 weights differ from one process's by %.3g" % diff)
    print("rank %d: FSDP2 %d steps on %d ranks: max |FSDP2 - one process| = %.3g" % (rank, STEPS, world, diff),
          flush=True)


if __name__ == "__main__":
    harness.main(worker, [2, 4], timeout=150)

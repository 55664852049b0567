#!/usr/bin/env python3
"""DDP on backend "gyre", launched by torchrun, equals one process.

An MLP trains 50 SGD steps on 2 and on 4 CPU processes started by
`/usr/bin/python3 -m torch.distributed.run` (env:// init), each rank
reading its share of every global batch through DistributedSampler. The
final weights must equal those of one process that trains on the same
global batches, both with DDP's built-in all-reduce and with a comm hook
that averages through all_reduce(...).get_future().

With `--device cuda` the ranks train on CUDA tensors, sharing the visible
GPUs round-robin (2 and 4 processes on one GPU, which torch's nccl backend
refuses); skipped (77) without a GPU or without a CUDA build of torch_gyre.
"""
import os
import subprocess
import sys
import tempfile
import time

import harness

STEPS, BATCH, SEED = 50, 8, 1234


def make_data(world):
    import torch
    g = torch.Generator().manual_seed(SEED)
    n = STEPS * BATCH * world  # one epoch is exactly STEPS steps
    x = torch.randn(n, 16, generator=g)
    y = torch.sin(x[:, :4]) + 0.1 * torch.randn(n, 4, generator=g)
    return torch.utils.data.TensorDataset(x, y)


def make_model():
    import torch
    torch.manual_seed(SEED)
    return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64), torch.nn.Tanh(),
                               torch.nn.Linear(64, 4))


def sampler(ds, world, rank):
    import torch.utils.data as tud
    return tud.distributed.DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True, seed=SEED)


def averaging_hook(state, bucket):
    """DDP comm hook: all-reduce the bucket divided by the world size, and
    hand DDP the future's value (the reduced tensor)."""
    import torch.distributed as dist
    t = bucket.buffer().div_(dist.get_world_size())
    return dist.all_reduce(t, async_op=True).get_future().then(lambda f: f.value()[0])


def worker(out, hook, device):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    import torch_gyre  # noqa: F401

    dev = torch.device("cpu")
    if device == "cuda":
        dev = torch.device("cuda", int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count())
        torch.cuda.set_device(dev)
    import torchrun
    torchrun.honour_use_libuv()  # a torch without libuv (Debian 13's)
    dist.init_process_group("gyre")  # env:// from torchrun
    rank, world = dist.get_rank(), dist.get_world_size()
    ds = make_data(world)
    loader = torch.utils.data.DataLoader(ds, batch_size=BATCH, sampler=sampler(ds, world, rank))
    model = DDP(make_model().to(dev), device_ids=[dev] if device == "cuda" else None)
    if hook:
        model.register_comm_hook(None, averaging_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    start = time.monotonic()
    steps = 0
    for x, y in loader:
        x, y = x.to(dev), y.to(dev)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        steps += 1
    assert steps == STEPS, steps
    if rank == 0:
        torch.save({k: v.cpu() for k, v in model.module.state_dict().items()}, out)
        print("rank 0: %d DDP steps on %d ranks in %.2f s" % (steps, world, time.monotonic() - start))
    dist.destroy_process_group()


def reference(world):
    """One process, the same global batches: at step s, every rank's batch s."""
    import torch
    ds = make_data(world)
    per_rank = [list(sampler(ds, world, r)) for r in range(world)]
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for s in range(STEPS):
        idx = [i for r in range(world) for i in per_rank[r][s * BATCH:(s + 1) * BATCH]]
        x, y = ds[idx]
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return model.state_dict()


def driver(device):
    harness.require_torch_gyre()
    import torch
    if device == "cuda":
        import torch_gyre
        if not torch.cuda.is_available() or not torch_gyre.CUDA:
            print("SKIP: needs a GPU and torch_gyre built against a CUDA torch")
            sys.exit(harness.SKIP)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for world in (2, 4):
            ref = reference(world)
            for hook in (False, True):
                out = os.path.join(tmp, "w%d_%d.pt" % (world, hook))
                # --redirects/--tee: torch 1.13's torchrun on Python 3.11 cannot
                # parse their default "0" (enum.Flag iteration skips the zero
                # member) and fails before starting workers; "1" (stdout,
                # shown on the console too) parses.
                # torchrun.py: torchrun itself, made to honour USE_LIBUV=0
                # (which a torch without libuv, Debian 13's, needs).
                cmd = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "torchrun.py"),
                       "--nproc_per_node", str(world),
                       "--redirects", "1", "--tee", "1", "--log_dir", os.path.join(tmp, "logs%d%d" % (world, hook)),
                       "--master_addr", "127.0.0.1", "--master_port", str(harness.free_port()),
                       os.path.abspath(__file__), "--worker", out, "--device", device] + (["--hook"] if hook else [])
                env = dict(os.environ, NCCL_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
                start = time.monotonic()
                try:
                    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                       timeout=120)
                    rc, text = p.returncode, p.stdout
                except subprocess.TimeoutExpired as e:
                    rc, text = None, (e.stdout or b"").decode(errors="replace") + "\n[killed after 120 s]"
                name = "torchrun %d ranks on %s%s" % (world, device, " with a get_future comm hook" if hook else "")
                print("---- %s: exit %s, %.1f s" % (name, rc, time.monotonic() - start))
                print("\n".join(line for line in text.splitlines() if "Warning" not in line))
                if rc != 0:
                    ok = False
                    continue
                got = torch.load(out)
                diff = max((got[k] - ref[k]).abs().max().item() for k in ref)
                same = all(torch.allclose(got[k], ref[k], rtol=1e-4, atol=1e-5) for k in ref)
                print("%s: max |DDP - single process| over all weights = %.3g -> %s" %
                      (name, diff, "equal" if same else "DIFFERENT"))
                ok = ok and same
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    device = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else "cpu"
    if "--worker" in sys.argv:
        worker(sys.argv[sys.argv.index("--worker") + 1], "--hook" in sys.argv, device)
    else:
        driver(device)

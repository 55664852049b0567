#!/usr/bin/env python3
"""Bad set-up raises a Python exception that says what was wrong.

- init_process_group("gyre") without `import torch_gyre`: torch's own
  ValueError, naming the backend.
- a store in which rank 0 never publishes gyre's unique id: RuntimeError
  from the backend after the store's timeout, naming the key and rank 0.
- a world of one: every operation works without peers (and the group's
  timeout becomes gyre's without complaint).
(Wrong dtypes, ops, devices and mismatched sizes across ranks are checked in
collectives.py, inside a running group.)
"""
import datetime
import os
import subprocess
import sys
import time

import harness


def main():
    harness.require_torch_gyre()
    ok = True

    def expect(cond, what):
        nonlocal ok
        print("%s: %s" % ("ok" if cond else "FAIL", what))
        ok = ok and cond

    env = dict(os.environ, NCCL_SOCKET_IFNAME="lo")
    code = ("import torch.distributed as dist\n"
            "dist.init_process_group('gyre', init_method='tcp://127.0.0.1:%d', rank=0, world_size=1)\n"
            % harness.free_port())
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    last = (p.stderr.strip().splitlines() or [""])[-1]
    expect(p.returncode != 0 and "gyre" in last, "without import torch_gyre: %s" % last)

    import torch
    import torch.distributed as dist

    import torch_gyre

    store = dist.HashStore()
    store.set_timeout(datetime.timedelta(seconds=1))
    start = time.monotonic()
    try:
        torch_gyre._C.create_process_group(store, 1, 2, datetime.timedelta(seconds=5))
        expect(False, "a store without rank 0's id raised nothing")
    except RuntimeError as e:
        msg = str(e)
        expect("unique id" in msg and "rank 0" in msg and time.monotonic() - start < 10,
               "store timeout after %.1f s: %s" % (time.monotonic() - start, msg.splitlines()[0]))

    code = ("import torch, torch.distributed as dist, torch_gyre\n"
            "dist.init_process_group('gyre', init_method='tcp://127.0.0.1:%d', rank=0, world_size=1)\n"
            "t = torch.arange(5.); dist.all_reduce(t); assert t.tolist() == [0, 1, 2, 3, 4]\n"
            "o = [torch.empty(5)]; dist.all_gather(o, t); assert torch.equal(o[0], t)\n"
            "dist.broadcast(t, 0); dist.barrier(); print('world of one: ok')\n" % harness.free_port())
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    expect(p.returncode == 0 and "world of one: ok" in p.stdout, "world of one: %s" % (p.stdout + p.stderr)[-300:])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

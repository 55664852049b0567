#!/usr/bin/env python3
"""torchrun (python -m torch.distributed.run) that honours USE_LIBUV=0.

torch 2.4+ makes TCPStore on libuv by default. init_process_group's env://
and tcp:// rendezvous read USE_LIBUV to choose, but torchrun's rendezvous,
and the store client its workers' env:// makes (torchrun's agent store),
are made with the default: on a torch built without libuv (Debian 13's
2.6) torchrun fails before any worker runs, whatever the backend ("use_libuv
was requested but PyTorch was build without libuv support"). With
USE_LIBUV=0, honour_use_libuv() makes those stores without libuv; this file
runs torchrun so, and ddp.py's workers call it before init_process_group.
"""
import os
import sys


def honour_use_libuv():
    if os.environ.get("USE_LIBUV") != "0":
        return
    import torch.distributed as dist
    if not hasattr(dist, "TCPStore"):
        return
    import torch.distributed.elastic.rendezvous.static_tcp_rendezvous  # noqa: F401
    import torch.distributed.rendezvous  # noqa: F401
    # (from sys.modules: torch.distributed's attribute `rendezvous` is a function)
    rdzv = sys.modules["torch.distributed.rendezvous"]
    static_rdzv = sys.modules["torch.distributed.elastic.rendezvous.static_tcp_rendezvous"]

    class TCPStoreWithoutLibuv(dist.TCPStore):
        def __init__(self, *args, **kwargs):
            kwargs.setdefault("use_libuv", False)
            super().__init__(*args, **kwargs)

    for module in (dist, rdzv, static_rdzv):
        module.TCPStore = TCPStoreWithoutLibuv


if __name__ == "__main__":
    honour_use_libuv()
    from torch.distributed.run import main
    sys.argv[0] = "torchrun"
    main()

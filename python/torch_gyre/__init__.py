"""gyre as a torch.distributed backend.

``import torch_gyre`` registers the backend ``"gyre"``, after which
``torch.distributed.init_process_group("gyre")`` (or ``torchrun``) runs the
group's collectives on CPU tensors through gyre's host-memory communicators
and, where torch_gyre was built against a CUDA torch, on CUDA tensors
through gyre's device communicators, on torch's current stream (as the
``nccl`` backend does: ``wait()`` makes the current stream wait; several
processes may share one GPU)::

    import torch.distributed as dist
    import torch_gyre  # noqa: F401  (registers "gyre")
    dist.init_process_group("gyre")        # env:// (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)
    dist.all_reduce(tensor)

Each process group's timeout becomes the timeout of its own gyre
communicator (gyreCommSetTimeout; it replaces GYRE_TIMEOUT for that group),
so a peer that dies or stalls makes the others' operations on that group
raise RuntimeError with gyre's message after that group's timeout.
"""
import inspect

import torch  # noqa: F401  (loads libtorch before the extension needs it)
import torch.distributed as _dist

from . import _C
from ._version import __version__

__all__ = ["ProcessGroupGyre", "BACKEND_NAME", "CUDA", "__version__"]

BACKEND_NAME = "gyre"
ProcessGroupGyre = _C.ProcessGroupGyre
# Whether this build runs CUDA tensors (built against a torch with CUDA).
CUDA = bool(_C.cuda)


def _create(store, rank, size, timeout):
    return _C.create_process_group(store, rank, size, timeout)


def _register():
    if BACKEND_NAME.upper() in getattr(_dist.Backend, "_plugins", {}):
        return  # a second import (or reload) must not register twice
    params = inspect.signature(_dist.Backend.register_backend).parameters
    if "devices" in params:
        # torch 2.x: a plugin names the devices it serves (a list: a plain
        # string would be read letter by letter). One process group object
        # serves both; a build without CUDA refuses CUDA tensors, saying why.
        _dist.Backend.register_backend(BACKEND_NAME, _create, devices=["cpu", "cuda"])
    else:
        _dist.Backend.register_backend(BACKEND_NAME, _create)


_register()

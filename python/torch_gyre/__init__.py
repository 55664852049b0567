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

On import it also replaces torch's CPU allocator: tensors of at least
GYRE_TORCH_ALLOCATOR_MIN_BYTES (1 MiB) then live in memory that the other
ranks of the host map, so the host collectives read and write them in place
(one copy instead of two). Smaller tensors, and any that gyre cannot serve,
come from torch's allocator as before. ``GYRE_TORCH_ALLOCATOR=0`` in the
environment before the import leaves torch's allocator alone;
``host_allocator_stats()`` says what it did and ``in_host_arena(t)`` whether
a tensor's memory is gyre's.

Each process group's timeout becomes the timeout of its own gyre
communicator (gyreCommSetTimeout; it replaces GYRE_TIMEOUT for that group),
so a peer that dies or stalls makes the others' operations on that group
raise RuntimeError with gyre's message after that group's timeout.
"""
import inspect
import sys

import torch  # noqa: F401  (loads libtorch before the extension needs it)
import torch.distributed as _dist

from . import _C
from ._version import __version__

__all__ = ["ProcessGroupGyre", "BACKEND_NAME", "CUDA", "__version__", "host_allocator_stats", "in_host_arena"]

BACKEND_NAME = "gyre"
ProcessGroupGyre = _C.ProcessGroupGyre
# Whether this build runs CUDA tensors (built against a torch with CUDA).
CUDA = bool(_C.cuda)
# The CPU allocator's counters (a dict) and whether a tensor's memory is its.
host_allocator_stats = _C.host_allocator_stats
in_host_arena = _C.in_host_arena


def _create(store, rank, size, timeout):
    backend = _C.create_process_group(store, rank, size, timeout)
    named = _named_group(backend, rank, size)
    return backend if named is None else named


def _named_group(backend, rank, size):
    """torch 2.x: the group object itself under gyre's name, or None.

    torch 2.x makes a ProcessGroup per group and registers each device's
    Backend in it; the group's name (DDP's logging data, torch's messages)
    is that object's, "custom" for every plugin. A creator that returns a
    ProcessGroup is taken as the group itself, and torch then registers no
    other device's backend: so only where the group's backend string gives
    every device to gyre ("gyre", "cpu:gyre", "cpu:gyre,cuda:gyre") is the
    group gyre's own object, with gyre registered for those devices. Under
    "cpu:gyre,cuda:nccl" torch's object stays, so that the other backend is
    made (and the group is named "custom"). What the string says is read
    from torch's caller (_new_process_group_helper: its backend_config and
    the store and bound device of the group it was making); where that is
    missing (another torch), torch's object stays too.
    """
    if not hasattr(_C, "NamedProcessGroup"):
        return None  # torch 1.x: the backend is the group, named "gyre" already
    caller = sys._getframe(2).f_locals
    config, store, made = caller.get("backend_config"), caller.get("prefix_store"), caller.get("pg")
    try:
        devices = config.get_device_backend_map()
    except AttributeError:
        return None
    if store is None or not devices or set(devices.values()) != {BACKEND_NAME}:
        return None
    group = _C.NamedProcessGroup(store, rank, size, backend, sorted(devices))
    bound = getattr(made, "bound_device_id", None)
    if bound is not None:
        group.bound_device_id = bound
    return group


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
_C._install_host_allocator()

"""lockstep as a torch.distributed backend.

Importing this package registers the backend "lockstep":

    import lockstep
    import torch.distributed as dist
    dist.init_process_group("lockstep")        # under `lockstep run`, torchrun, or env:// variables
    dist.init_process_group("cpu:lockstep,cuda:nccl")   # a GPU job: torch's NCCL for CUDA tensors

Every torch.distributed call then runs on lockstep: shared memory between the ranks of one host,
TCP between hosts, and lockstep's diagnostics (errors that name the ranks and sizes, timeouts that
name the ranks that never arrived, flight-recorder dumps, LOCKSTEP_DEBUG). See docs/python.md.
"""

import torch.distributed as _dist

from ._lockstep import ProcessGroupLockstep, has_nccl

__all__ = ["ProcessGroupLockstep", "BACKEND", "DEVICES", "register"]

BACKEND = "lockstep"
# The devices the backend serves: the CPU, and CUDA tensors through lockstep's nccl backend in
# builds that have it (with "lockstep" alone, one lockstep group serves both).
DEVICES = ["cpu", "cuda"] if has_nccl else ["cpu"]


def _create(options, pg_options=None):
    """torch's creator function (extended API): one lockstep group per torch group."""
    del pg_options  # lockstep's settings come from LOCKSTEP_* variables
    return ProcessGroupLockstep(
        options.store,
        options.group_rank,
        options.group_size,
        int(options.timeout.total_seconds() * 1000),
        str(options.group_id),
        [int(r) for r in options.global_ranks_in_group],
    )


def register():
    """Registers the backend "lockstep" with torch.distributed (done on import; also torch 2.15's
    entry point "torch.distributed.backends", so that init_process_group("lockstep") needs no
    import where the package is installed with pip)."""
    if BACKEND.upper() not in _dist.Backend._plugins:
        _dist.Backend.register_backend(BACKEND, _create, extended_api=True, devices=DEVICES)


register()

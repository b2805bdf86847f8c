"""torch.distributed.checkpoint (DCP) over the "lockstep" backend, resharded: `save` at one world
size writes an FSDP2 model's and its AdamW optimizer's sharded state after a few steps (and rank 0
the same state gathered whole, as a reference); `load` at another world size reads it into a fresh
FSDP2 model and optimizer, sharded differently, and every tensor gathered whole must be
bit-equal to the reference. Prints "DCP_SAVED rank=R" or "DCP_LOADED rank=R tensors=N".
   dcp_job.py save DIR      (e.g. 4 ranks)
   dcp_job.py load DIR      (e.g. 2 ranks)
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn as nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.tensor import DTensor

import lockstep  # noqa: F401

try:
    from torch.distributed.fsdp import fully_shard
except ImportError:
    from torch.distributed._composable.fsdp import fully_shard


def build():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 20), nn.ReLU(), nn.Linear(20, 6))
    for layer in (model[0], model[2]):
        fully_shard(layer)
    fully_shard(model)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2)


def whole(state):
    """Every tensor of a (nested) state dict gathered whole, keyed by its path."""
    out = {}

    def walk(prefix, value):
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}/{k}", v)
        elif isinstance(value, DTensor):
            out[prefix] = value.full_tensor()
        elif isinstance(value, torch.Tensor):
            out[prefix] = value
    walk("", state)
    return out


def main():
    mode, where = sys.argv[1], sys.argv[2]
    torch.set_num_threads(1)
    dist.init_process_group("lockstep")
    r = dist.get_rank()
    model, opt = build()
    if mode == "save":
        g = torch.Generator().manual_seed(3)
        for _ in range(3):
            x = torch.randn(8, 12, generator=g)
            model(x).square().mean().backward()
            opt.step()
            opt.zero_grad()
        model_sd, opt_sd = get_state_dict(model, opt)
        dcp.save({"model": model_sd, "optim": opt_sd}, checkpoint_id=where)
        reference = whole({"model": model_sd, "optim": opt_sd})
        if r == 0:
            torch.save(reference, os.path.join(where, "reference.pt"))
        print(f"DCP_SAVED rank={r}", flush=True)
    else:
        model_sd, opt_sd = get_state_dict(model, opt)
        state = {"model": model_sd, "optim": opt_sd}
        dcp.load(state, checkpoint_id=where)
        set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
        loaded = whole(dict(zip(("model", "optim"), get_state_dict(model, opt))))
        reference = torch.load(os.path.join(where, "reference.pt"))
        assert sorted(loaded) == sorted(reference), (sorted(loaded), sorted(reference))
        for key, want in reference.items():
            got = loaded[key]
            assert got.dtype == want.dtype and got.shape == want.shape, key
            assert torch.equal(got, want), f"{key} differs after resharding"
        print(f"DCP_LOADED rank={r} tensors={len(reference)}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

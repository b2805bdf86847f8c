"""CUDA tensors over the "lockstep" backend go to lockstep's nccl backend: each rank on its own
device (LOCAL_RANK), an all_reduce and a broadcast checked against their closed forms. Needs a
build with NCCL, a CUDA-enabled torch and one GPU per rank; test_backend.py skips it otherwise.
"""
import os

import torch
import torch.distributed as dist

import lockstep  # noqa: F401

dist.init_process_group("lockstep")
r, w = dist.get_rank(), dist.get_world_size()
device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
torch.cuda.set_device(device)
x = torch.arange(1, 1001, dtype=torch.float32, device=device) * (r + 1)
dist.all_reduce(x)
assert torch.equal(x.cpu(), torch.arange(1, 1001, dtype=torch.float32) * (w * (w + 1) // 2))
y = torch.full((1000,), float(r), device=device)
dist.broadcast(y, src=w - 1)
assert torch.equal(y.cpu(), torch.full((1000,), float(w - 1)))
print(f"CUDA_OK rank={r}", flush=True)
dist.destroy_process_group()

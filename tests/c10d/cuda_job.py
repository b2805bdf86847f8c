"""CUDA tensors over the "lockstep" backend: each rank on its own device (LOCAL_RANK), an
all_reduce and a broadcast checked against their closed forms, and a CPU all_reduce beside them.
LOCKSTEP_CUDA_JOB_INIT chooses the init string: "lockstep" (the default: CUDA tensors go to
lockstep's nccl backend) or "cpu:lockstep,cuda:nccl" (torch's NCCL for CUDA, lockstep for the
CPU). Needs a build with NCCL, a CUDA-enabled torch and one GPU per rank; test_backend.py skips it
otherwise, and scripts/gpu_check.sh runs it on the GPU machine.
"""
import os

import torch
import torch.distributed as dist

import lockstep  # noqa: F401

init = os.environ.get("LOCKSTEP_CUDA_JOB_INIT", "lockstep")
dist.init_process_group(init)
r, w = dist.get_rank(), dist.get_world_size()
device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
torch.cuda.set_device(device)
x = torch.arange(1, 1001, dtype=torch.float32, device=device) * (r + 1)
dist.all_reduce(x)
assert torch.equal(x.cpu(), torch.arange(1, 1001, dtype=torch.float32) * (w * (w + 1) // 2))
y = torch.full((1000,), float(r), device=device)
dist.broadcast(y, src=w - 1)
assert torch.equal(y.cpu(), torch.full((1000,), float(w - 1)))
z = torch.ones(64) * (r + 1)
dist.all_reduce(z)  # the CPU tensor: lockstep in both init strings
assert torch.equal(z, torch.ones(64) * (w * (w + 1) // 2))
print(f"CUDA_OK rank={r} init={init}", flush=True)
dist.destroy_process_group()

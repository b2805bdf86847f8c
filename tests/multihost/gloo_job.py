"""An unmodified-style PyTorch gloo job for the multi-host test: every rank all_reduces
[rank, 1] and checks the closed form [n(n-1)/2, n]; rank 0 prints the result."""
import os
import socket

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank), 1.0])
dist.all_reduce(t)
expected = [world * (world - 1) / 2, float(world)]
assert t.tolist() == expected, (t.tolist(), expected)
hosts = [None] * world
dist.all_gather_object(hosts, socket.gethostname())
if rank == 0:
    print(f"gloo: ok on {world} ranks over {len(set(hosts))} hosts ({os.environ['LOCAL_WORLD_SIZE']} per host)")
dist.destroy_process_group()

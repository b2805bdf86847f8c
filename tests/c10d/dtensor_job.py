"""DTensor on a 2 x 2 DeviceMesh of the CPU over the "lockstep" backend (4 ranks): data parallel
over "dp", tensor parallel over "tp" (an MLP split column-wise then row-wise by
parallelize_module). After a few SGD steps every rank's weights, gathered whole, must equal those
of the same MLP trained in one process on the whole batch, within float rounding (1e-5).
Prints "DTENSOR_OK rank=R max_diff=D" or raises.
"""
import copy

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

import lockstep  # noqa: F401


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def main():
    torch.set_num_threads(1)
    dist.init_process_group("lockstep")
    r, w = dist.get_rank(), dist.get_world_size()
    assert w == 4, "run with 4 ranks"
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    dp_rank = mesh["dp"].get_local_rank()

    torch.manual_seed(0)
    reference = MLP()
    model = parallelize_module(copy.deepcopy(reference), mesh["tp"],
                               {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(7)
    dp_group = mesh.get_group("dp")
    for _ in range(4):
        x, y = torch.randn(8, 8, generator=g), torch.randn(8, 4, generator=g)
        mine = slice(dp_rank * 4, dp_rank * 4 + 4)  # each dp rank: half the batch
        nn.functional.mse_loss(model(x[mine]), y[mine]).backward()
        for p in model.parameters():  # data parallel: average the gradients over "dp"
            dist.all_reduce(p.grad.to_local(), op=dist.ReduceOp.AVG, group=dp_group)
        opt.step()
        opt.zero_grad()
        nn.functional.mse_loss(reference(x), y).backward()
        ref_opt.step()
        ref_opt.zero_grad()
    worst = 0.0
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        full = p.full_tensor()
        diff = (full - q).abs().max().item()
        assert diff <= 1e-5, f"{name} differs from one-process training by {diff}"
        worst = max(worst, diff)
    print(f"DTENSOR_OK rank={r} max_diff={worst:.2e}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

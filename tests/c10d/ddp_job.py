"""torch's own DistributedDataParallel trains a small CNN on real Fashion-MNIST images over the
backend given (--backend gloo or lockstep), optionally with ZeroRedundancyOptimizer (--zero).
Rank 0 saves the final weights to --out, so that a test can compare two backends' runs.

Deterministic: one thread, a fixed seed, a fixed slice of the training set per rank and step.
"""
import argparse
import gzip
import struct

import torch
import torch.distributed as dist
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel

import lockstep  # noqa: F401

DATA = "/usr/share/datasets/fashion-mnist"


def load(count):
    with gzip.open(f"{DATA}/train-images-idx3-ubyte.gz") as f:
        _, n, rows, cols = struct.unpack(">IIII", f.read(16))
        images = torch.frombuffer(bytearray(f.read(count * rows * cols)), dtype=torch.uint8)
    with gzip.open(f"{DATA}/train-labels-idx1-ubyte.gz") as f:
        f.read(8)
        labels = torch.frombuffer(bytearray(f.read(count)), dtype=torch.uint8)
    images = images.reshape(count, 1, rows, cols).float() / 255.0
    return (images - 0.2860) / 0.3530, labels.long()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--zero", action="store_true")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--batch", type=int, default=16)
    args = parser.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group(args.backend)
    r, w = dist.get_rank(), dist.get_world_size()
    images, labels = load(args.steps * w * args.batch)

    torch.manual_seed(1234)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 8, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(8 * 13 * 13, 32), torch.nn.ReLU(),
        torch.nn.Linear(32, 10))
    ddp = DistributedDataParallel(model)
    if args.zero:
        optimizer = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.SGD,
                                            lr=0.05, momentum=0.9)
    else:
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    for step in range(args.steps):
        at = (step * w + r) * args.batch
        x, y = images[at:at + args.batch], labels[at:at + args.batch]
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        loss.backward()
        optimizer.step()
    # Every rank must hold the same weights (DDP and ZeRO keep them in sync).
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    copies = [torch.zeros_like(flat) for _ in range(w)]
    dist.all_gather(copies, flat)
    assert all(torch.equal(c, flat) for c in copies), "ranks disagree on the weights"
    if r == 0:
        torch.save(model.state_dict(), args.out)
    print(f"DDP_DONE rank={r} backend={args.backend} zero={args.zero} loss={loss.item():.6f}",
          flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

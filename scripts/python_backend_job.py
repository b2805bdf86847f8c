"""One rank of scripts/compare_python_backend.py, started by `lockstep run` (its model and
training loop also serve scripts/compare_torch_ddp.py).

  allreduce BACKEND SIZES...   f32 all_reduce of each size (bytes) from Python, timed per call
                               after warm-up; rank 0 prints "ALLREDUCE size median_us" lines.
  layers BACKEND SIZE          where one f32 all_reduce's time goes: through dist.all_reduce (torch's
                               Python), ProcessGroup.allreduce (torch's dispatcher) and the
                               backend object's own allreduce; rank 0 prints "LAYER name us".
  ddp BACKEND STEPS BATCH      torch's DistributedDataParallel on the main job's CNN over
                               Fashion-MNIST, 1 thread; rank 0 prints "DDP samples_per_s".
"""
import gzip
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

DATA = "/usr/share/datasets/fashion-mnist"


def allreduce(sizes):
    for size in sizes:
        x = torch.ones(size // 4)
        iters = max(10, min(2000, (64 << 20) * 4 // max(size, 1) // 16))
        iters = min(iters, 400) if size >= (1 << 20) else iters
        for _ in range(5):
            dist.all_reduce(x)
        times = []
        for _ in range(iters):
            start = time.perf_counter()
            dist.all_reduce(x)
            times.append(time.perf_counter() - start)
        if dist.get_rank() == 0:
            print(f"ALLREDUCE {size} {statistics.median(times) * 1e6:.1f}", flush=True)


def median_us(call, iters=2000):
    for _ in range(20):
        call()
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def layers(size):
    x = torch.ones(size // 4)
    pg = dist.distributed_c10d._get_default_group()
    backend = pg._get_backend(torch.device("cpu"))
    opts = dist.AllreduceOptions()
    rows = [("dist.all_reduce", lambda: dist.all_reduce(x)),
            ("ProcessGroup.allreduce", lambda: pg.allreduce([x], opts).wait()),
            ("Backend.allreduce", lambda: backend.allreduce([x], opts).wait())]
    for name, call in rows:
        us = median_us(call)
        if dist.get_rank() == 0:
            print(f"LAYER {name} {us:.2f}", flush=True)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 32, 3), nn.Conv2d(32, 64, 3)
        self.fc1, self.fc2 = nn.Linear(1600, 128), nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def load():
    """The Fashion-MNIST training set: images (N, 1, 28, 28) in [0, 1], labels (N)."""
    with gzip.open(f"{DATA}/train-images-idx3-ubyte.gz") as f:
        f.read(16)
        x = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8)
    with gzip.open(f"{DATA}/train-labels-idx1-ubyte.gz") as f:
        f.read(8)
        y = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8).long()
    return x.reshape(-1, 1, 28, 28).float().div_(255), y


def ddp(steps, batch):
    """Trains with DDP over the initialized default group; returns samples/s (rank 0 prints)."""
    x, y = load()
    r, w = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(Net())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    start = None
    for step in range(steps + 5):
        if step == 5:
            dist.barrier()
            start = time.perf_counter()
        i = ((step * w + r) * batch) % (x.shape[0] - batch)
        optimizer.zero_grad()
        F.cross_entropy(model(x[i:i + batch]), y[i:i + batch]).backward()
        optimizer.step()
    dist.barrier()
    rate = steps * batch * w / (time.perf_counter() - start)
    if r == 0:
        print(f"DDP {rate:.1f}", flush=True)
    return rate


if __name__ == "__main__":
    torch.set_num_threads(1)
    mode, backend = sys.argv[1], sys.argv[2]
    if backend == "lockstep":
        import lockstep  # noqa: F401  (registers the backend)
    dist.init_process_group(backend)
    if mode == "allreduce":
        allreduce([int(s) for s in sys.argv[3:]])
    elif mode == "layers":
        layers(int(sys.argv[3]))
    else:
        ddp(int(sys.argv[3]), int(sys.argv[4]))
    dist.destroy_process_group()

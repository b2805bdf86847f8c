"""lockstep.rpc's side of bench/rpc_compare.py: the same calls as torch's anchor
(../shared/anchors/torch_rpc_bench.py), 2 workers under `lockstep run`, worker 0 calling.
Prints one line: lockstep rpc p50_us=... p99_us=... pipelined_calls_per_s=... big_MBps=..."""
import os
import statistics
import time

import torch
from lockstep import rpc


@rpc.register("add")
def add(a, b):
    return a + b


@rpc.register("size")
def size(t):
    return t.numel()


def main():
    rank = int(os.environ["RANK"])
    rpc.init_rpc(f"worker{rank}")
    if rank == 0:
        for _ in range(200):
            rpc.rpc_sync("worker1", add, args=(1, 2))
        t = []
        for _ in range(2000):
            s = time.perf_counter()
            rpc.rpc_sync("worker1", add, args=(1, 2))
            t.append(time.perf_counter() - s)
        t.sort()
        n = 20000
        s = time.perf_counter()
        futs = [rpc.rpc_async("worker1", add, args=(i, 1)) for i in range(n)]
        for f in futs:
            f.wait()
        rate = n / (time.perf_counter() - s)
        big = torch.ones(16 << 20)  # 64 MiB
        rpc.rpc_sync("worker1", size, args=(big,))
        reps = 5
        s = time.perf_counter()
        for _ in range(reps):
            assert rpc.rpc_sync("worker1", size, args=(big,)) == big.numel()
        mbps = reps * big.numel() * 4 / (time.perf_counter() - s) / 1e6
        print(f"lockstep rpc p50_us={statistics.median(t)*1e6:.1f} p99_us={t[int(0.99*len(t))]*1e6:.1f} "
              f"pipelined_calls_per_s={rate:.0f} big_MBps={mbps:.0f}", flush=True)
    rpc.shutdown()


if __name__ == "__main__":
    main()

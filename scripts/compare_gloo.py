#!/usr/bin/env python3
"""Side-by-side all_reduce benchmark: `lockstep bench` against torch.distributed's Gloo backend.

Runs `lockstep bench --nranks N --op all_reduce --backend tcp` first, then the same sizes over Gloo (N local
processes on 127.0.0.1), timed the way lockstep bench times them: a barrier before every
iteration, the slowest rank's time per iteration (all_reduce max), the median over iterations,
and the same iteration counts. Prints both tables and a comparison of bus bandwidth (nccl-tests:
busbw = size / time * 2(n-1)/n).

Usage: scripts/compare_gloo.py LOCKSTEP_BINARY [--backend tcp|shm|auto] [--nranks N]
                               [--min-bytes B] [--max-bytes B]
Needs torch (scripts/compare_gloo.sh runs it with the project's .venv).
"""

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

KIB_PER_ROW = 256 * 1024  # lockstep bench moves about 256 MiB per row, 5 to 200 iterations


def iterations_for(size):
    return max(5, min(200, (KIB_PER_ROW * 1024) // max(size, 1)))


def sizes_between(min_bytes, max_bytes, factor=2):
    sizes, s = [], min_bytes
    while s <= max_bytes:
        sizes.append(s)
        s *= factor
    return sizes


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gloo_rank(rank, world_size, port, sizes, results):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    for size in sizes:
        count = max(size // 4, 1)
        data = torch.zeros(count, dtype=torch.float32)  # zeros stay zeros: no overflow to inf
        iters = iterations_for(count * 4)
        for _ in range(max(1, iters // 10)):
            dist.all_reduce(data)
        times = []
        for _ in range(iters):
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(data)
            times.append((time.perf_counter() - start) * 1e6)
        slowest = torch.tensor(times, dtype=torch.float64)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        if rank == 0:
            results[count * 4] = (iters, statistics.median(slowest.tolist()))
    dist.destroy_process_group()


def run_gloo(world_size, sizes):
    import torch.multiprocessing as mp

    manager = mp.Manager()
    results = manager.dict()
    mp.spawn(gloo_rank, args=(world_size, free_port(), sizes, results), nprocs=world_size)
    return dict(results)


def run_lockstep(binary, backend, world_size, min_bytes, max_bytes):
    command = [binary, "bench", "--nranks", str(world_size), "--op", "all_reduce",
               "--backend", backend, "--min-bytes", str(min_bytes), "--max-bytes", str(max_bytes)]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    rows, memcpy = {}, None
    for line in out.splitlines():
        fields = line.split()
        if line.startswith("# memcpy:"):
            memcpy = float(fields[2])
        elif len(fields) == 9 and fields[0].isdigit():
            rows[int(fields[0])] = (int(fields[3]), float(fields[4]), fields[8])
    return out, rows, memcpy


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("lockstep", help="path of the lockstep executable")
    parser.add_argument("--nranks", type=int, default=2)
    parser.add_argument("--backend", default="tcp", help="lockstep backend (default tcp)")
    parser.add_argument("--min-bytes", type=int, default=4)
    parser.add_argument("--max-bytes", type=int, default=64 << 20)
    args = parser.parse_args()
    n = args.nranks
    factor = 2 * (n - 1) / n

    table, ours, memcpy = run_lockstep(args.lockstep, args.backend, n, args.min_bytes,
                                       args.max_bytes)
    print(table, end="")
    gloo = run_gloo(n, sizes_between(args.min_bytes, args.max_bytes))

    print(f"#\n# all_reduce f32 over {n} local ranks: lockstep ({args.backend}) vs "
          f"torch.distributed gloo, same run, same method")
    print(f"#{'size(B)':>13} {'lockstep(us)':>13} {'gloo(us)':>11} {'lockstep busbw':>15} "
          f"{'gloo busbw':>11} {'ratio':>7}")
    for size in sorted(set(ours) & set(gloo)):
        t_ours, t_gloo = ours[size][1], gloo[size][1]
        bus_ours = size / t_ours / 1e3 * factor
        bus_gloo = size / t_gloo / 1e3 * factor
        print(f"{size:>14} {t_ours:>13.1f} {t_gloo:>11.1f} {bus_ours:>15.3f} {bus_gloo:>11.3f} "
              f"{t_gloo / t_ours:>6.2f}x")
    if memcpy:
        print(f"# busbw in GB/s; ratio = gloo time / lockstep time; memcpy {memcpy:.2f} GB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

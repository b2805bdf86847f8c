"""The main job's training throughput, lockstep against PyTorch DDP (gloo), side by side.

Usage: compare_torch_ddp.py BUILD_DIR [--steps N] [--rounds N] [--batch N]

Both train the main job's CNN (conv 32, conv 64, fc 128, fc 10) with SGD with momentum, batch N per
rank and one intra-op thread per rank, at world 1 and world 2, alternating the two systems round by
round so that machine noise hits both alike. lockstep runs build/train_fashion_mnist under
`lockstep run` (its own data loader, timed over every step); PyTorch runs the same model with
DistributedDataParallel over gloo on slices of the training tensor (timed after 5 warm-up steps).
Prints samples/s per run, the best of the rounds, lockstep / PyTorch, and world-2 / world-1 scaling.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile


def torch_worker(rank, world, steps, batch, port, queue):
    import torch
    import torch.distributed as dist

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from python_backend_job import ddp  # the same model and loop as the backend comparison

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    rate = ddp(steps, batch)
    if rank == 0:
        queue.put(rate)
    dist.destroy_process_group()


def run_torch(world, steps, batch):
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    port = 20000 + (os.getpid() * 7 + world) % 20000
    procs = [ctx.Process(target=torch_worker, args=(r, world, steps, batch, port, queue))
             for r in range(world)]
    for p in procs:
        p.start()
    rate = queue.get()
    for p in procs:
        p.join()
    return rate


def run_lockstep(build, world, steps, batch):
    with tempfile.TemporaryDirectory() as checkpoints:
        out = subprocess.run(
            [f"{build}/lockstep", "run", "--standalone", "--nproc-per-node", str(world), "--",
             f"{build}/train_fashion_mnist", "--epochs", "1", "--max-steps", str(steps),
             "--batch-size", str(batch), "--threads", "1", "--checkpoint-dir", checkpoints],
            check=True, capture_output=True, text=True).stdout
    match = re.search(r"epoch 1/1: train loss .*?, ([0-9.]+) samples/s", out)
    if not match:
        sys.exit("no epoch summary in lockstep's output:\n" + out)
    return float(match.group(1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    best = {}
    for round_ in range(args.rounds):
        for world in (1, 2):
            for name, run in (("lockstep", run_lockstep), ("pytorch", None)):
                rate = (run_lockstep(args.build, world, args.steps, args.batch) if run
                        else run_torch(world, args.steps, args.batch))
                print(f"round {round_ + 1}: {name:8} world {world}: {rate:7.0f} samples/s",
                      flush=True)
                best[name, world] = max(best.get((name, world), 0), rate)
    print(f"\nbest of {args.rounds} rounds, batch {args.batch} per rank, {args.steps} steps, "
          "1 thread per rank")
    print("| world | lockstep samples/s | PyTorch DDP (gloo) samples/s | lockstep / PyTorch |")
    print("|---|---|---|---|")
    for world in (1, 2):
        l, t = best["lockstep", world], best["pytorch", world]
        print(f"| {world} | {l:.0f} | {t:.0f} | {l / t:.2f}x |")
    print(f"| scaling 2/1 | {best['lockstep', 2] / best['lockstep', 1]:.2f}x | "
          f"{best['pytorch', 2] / best['pytorch', 1]:.2f}x | |")


if __name__ == "__main__":
    main()

"""An unmodified-style PyTorch script, as a user would start it under torchrun: gloo over env://,
an all_reduce checked against its closed form, and a barrier. The launcher tests start it under
`lockstep run` (as a script, with -m, and on two nodes); the flags make it fail in the ways the
tests need.

Each rank r contributes (r + 1) * [1, 2, ..., 1000]; the sum over W ranks is
W (W + 1) / 2 * [1, 2, ..., 1000].
"""
import argparse
import os
import subprocess
import sys

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fail-rank", type=int, default=-1,
                        help="this rank raises RuntimeError after the all_reduce")
    parser.add_argument("--fail-on-attempt", type=int, default=-1,
                        help="with --fail-rank: fail only when TORCHELASTIC_RESTART_COUNT is this")
    parser.add_argument("--record", action="store_true",
                        help="run main under torchrun's @record, which writes the error file")
    parser.add_argument("--then", nargs=argparse.REMAINDER, default=[],
                        help="afterwards, run this command (e.g. a lockstep program) and require "
                             "it to succeed")
    return parser.parse_args()


def explode(rank):
    raise RuntimeError(f"rank {rank} exploded on purpose")


def main():
    args = parse_args()
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    assert rank == int(os.environ["RANK"]), "RANK disagrees with the process group"
    assert world == int(os.environ["WORLD_SIZE"]), "WORLD_SIZE disagrees with the process group"
    x = torch.arange(1, 1001, dtype=torch.float32) * (rank + 1)
    dist.all_reduce(x)
    expected = torch.arange(1, 1001, dtype=torch.float32) * (world * (world + 1) // 2)
    if not torch.equal(x, expected):
        raise RuntimeError(f"rank {rank}: wrong all_reduce result, x[0] = {x[0].item()}")
    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    if rank == args.fail_rank and args.fail_on_attempt in (-1, attempt):
        explode(rank)
    dist.barrier()
    print(f"TORCH_ALLREDUCE_OK rank={rank} world={world} first={x[0].item():g} "
          f"last={x[-1].item():g} attempt={attempt} local_rank={os.environ['LOCAL_RANK']} "
          f"module={__spec__ is not None}", flush=True)
    if args.then:
        subprocess.run(args.then, check=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    if "--record" in sys.argv:
        record(main)()
    else:
        main()

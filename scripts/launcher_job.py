"""The job of scripts/compare_torchrun.py, the same under `lockstep run` and torchrun: gloo over
env://, then one of
  first      time the first all_reduce: prints "FIRST_COLLECTIVE <unix time>" on rank 0
  exception  rank 1 raises a RuntimeError before the first collective
  kill       rank 1 SIGKILLs itself before the first collective
  hang       rank 1 sleeps; the others wait in an all_reduce (gloo's timeout: 10 s)
"""
import os
import signal
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

mode = sys.argv[1]
dist.init_process_group("gloo", timeout=timedelta(seconds=10))
rank = dist.get_rank()
if rank == 1 and mode == "exception":
    raise RuntimeError("rank 1 failed on purpose")
if rank == 1 and mode == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
if rank == 1 and mode == "hang":
    time.sleep(60)
x = torch.ones(4)
dist.all_reduce(x)
if rank == 0 and mode == "first":
    print(f"FIRST_COLLECTIVE {time.time():.6f}", flush=True)
dist.destroy_process_group()

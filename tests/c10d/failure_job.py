"""Failures over the "lockstep" backend, each rank checking what it sees. Modes (argv[1]):

  mismatch   rank 0 all_reduces 1000 floats, rank 1 1024: both must raise RuntimeError within 1 s,
             naming the other rank and both sizes, and neither process may abort.
  unused     DDP with find_unused_parameters=False and a parameter that gets no gradient: torch's
             own error on the next iteration, no hang.
  killed     (run without the launcher) rank 1 is SIGKILLed after init; rank 0's all_reduce must
             raise within 2 s, naming rank 1.
  stall      rank 1 sleeps before the second all_reduce: with a short LOCKSTEP_TIMEOUT, rank 0
             times out naming rank 1 (and warns first with a short LOCKSTEP_STALL_WARNING_S).

Prints "<MODE>_OK rank=R ..." on success; exits 1 with the reason otherwise.
"""
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

import lockstep  # noqa: F401


def fail(message):
    print(f"FAILED rank={dist.get_rank()}: {message}", flush=True)
    sys.exit(1)


def mismatch():
    r = dist.get_rank()
    x = torch.ones(1000 if r == 0 else 1024)
    start = time.monotonic()
    try:
        dist.all_reduce(x)
        fail("all_reduce of different sizes succeeded")
    except RuntimeError as e:
        elapsed = time.monotonic() - start
        text = str(e)
        other = 1 - r
        want = [f"rank {other}", "1000", "1024"]
        missing = [w for w in want if w not in text]
        if missing or elapsed > 1.0:
            fail(f"after {elapsed:.2f} s, message lacks {missing}: {text}")
        print(f"MISMATCH_OK rank={r} seconds={elapsed:.3f} message={text}", flush=True)


def unused():
    r = dist.get_rank()

    class TwoHeads(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.used = torch.nn.Linear(4, 2)
            self.unused = torch.nn.Linear(4, 2)

        def forward(self, x):
            return self.used(x)

    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(TwoHeads(), find_unused_parameters=False)
    start = time.monotonic()
    try:
        for _ in range(3):
            model(torch.randn(8, 4)).sum().backward()
        fail("no error for a parameter without a gradient")
    except RuntimeError as e:
        if "Expected to have finished reduction" not in str(e):
            fail(f"another error: {e}")
        print(f"UNUSED_OK rank={r} seconds={time.monotonic() - start:.3f}", flush=True)


def killed():
    r = dist.get_rank()
    x = torch.ones(1000)
    dist.all_reduce(x)  # both ranks are connected
    if r == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.5)  # rank 1 is gone by now
    start = time.monotonic()
    try:
        dist.all_reduce(x)
        fail("all_reduce with a dead peer succeeded")
    except RuntimeError as e:
        elapsed = time.monotonic() - start
        if "rank 1" not in str(e) or elapsed > 2.0:
            fail(f"after {elapsed:.2f} s: {e}")
        print(f"KILLED_OK rank={r} seconds={elapsed:.3f} message={e}", flush=True)


def stall():
    r = dist.get_rank()
    x = torch.ones(10)
    dist.all_reduce(x)
    if r == 1:
        print("STALLING rank=1", flush=True)
        time.sleep(60)
    try:
        dist.all_reduce(x)
        fail("all_reduce with a stalled peer succeeded")
    except RuntimeError as e:
        if "ranks [1] never entered it" not in str(e):
            fail(f"the timeout does not name rank 1: {e}")
        print(f"STALL_OK rank={r}", flush=True)
        sys.exit(1)  # as a real job would


if __name__ == "__main__":
    dist.init_process_group("lockstep")
    {"mismatch": mismatch, "unused": unused, "killed": killed, "stall": stall}[sys.argv[1]]()
    os._exit(0)  # the group may be broken: do not wait for it at exit

"""Failures over the "lockstep" backend, each rank checking what it sees. Modes (argv[1]):

  mismatch   rank 0 all_reduces 1000 floats, rank 1 1024: both must raise RuntimeError within 1 s,
             naming the other rank and both sizes, and neither process may abort.
  unused     DDP with find_unused_parameters=False and a parameter that gets no gradient: torch's
             own error on the next iteration, no hang.
  killed     (run without the launcher) rank 1 is SIGKILLed after init; rank 0's all_reduce must
             raise within 2 s, naming rank 1.
  stall      rank 1 sleeps before the second all_reduce: with a short LOCKSTEP_TIMEOUT, rank 0
             times out naming rank 1 (and warns first with a short LOCKSTEP_STALL_WARNING_S).
  destroyed  rank 1 calls destroy_process_group while rank 0 waits in a barrier: rank 0 must hear,
             within 2 s, that rank 1 shut its group down (not that its process died); an op on
             the destroyed group must raise on rank 1.

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
    print(f"FAILED rank={os.environ['RANK']}: {message}", flush=True)
    sys.exit(1)


def expect_error(mode, action, needles, within=None):
    """Runs action, which must raise RuntimeError naming every needle (within `within` seconds);
    prints "<MODE>_OK rank=R ...", else fails."""
    start = time.monotonic()
    try:
        action()
    except RuntimeError as e:
        elapsed = time.monotonic() - start
        missing = [n for n in needles if n not in str(e)]
        if missing or (within is not None and elapsed > within):
            fail(f"after {elapsed:.2f} s, the message lacks {missing}: {e}")
        print(f"{mode}_OK rank={os.environ['RANK']} seconds={elapsed:.3f} message={e}", flush=True)
        return
    fail(f"{mode.lower()}: no error")


def mismatch():
    r = dist.get_rank()
    x = torch.ones(1000 if r == 0 else 1024)
    expect_error("MISMATCH", lambda: dist.all_reduce(x), [f"rank {1 - r}", "1000", "1024"],
                 within=1.0)


def unused():
    class TwoHeads(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.used = torch.nn.Linear(4, 2)
            self.unused = torch.nn.Linear(4, 2)

        def forward(self, x):
            return self.used(x)

    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(TwoHeads(), find_unused_parameters=False)

    def train():
        for _ in range(3):
            model(torch.randn(8, 4)).sum().backward()

    expect_error("UNUSED", train, ["Expected to have finished reduction"])


def killed():
    x = torch.ones(1000)
    dist.all_reduce(x)  # both ranks are connected
    if dist.get_rank() == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.5)  # rank 1 is gone by now
    expect_error("KILLED", lambda: dist.all_reduce(x), ["rank 1"], within=2.0)


def stall():
    x = torch.ones(10)
    dist.all_reduce(x)
    if dist.get_rank() == 1:
        print("STALLING rank=1", flush=True)
        time.sleep(60)
    expect_error("STALL", lambda: dist.all_reduce(x), ["ranks [1] never entered it"])
    sys.exit(1)  # as a real job would


def destroyed():
    x = torch.ones(10)
    dist.all_reduce(x)  # both ranks are connected
    if dist.get_rank() == 1:
        pg = dist.group.WORLD
        backend = pg._get_backend(torch.device("cpu"))
        dist.destroy_process_group()
        expect_error("DESTROYED", lambda: backend.allreduce([x]).wait(), ["was shut down"])
        time.sleep(3)  # alive, so that rank 0 cannot take the shutdown for a death
        return
    expect_error("DESTROYED", lambda: dist.barrier(),
                 ["rank 1", "shut down its process group"], within=2.0)


if __name__ == "__main__":
    dist.init_process_group("lockstep")
    {"mismatch": mismatch, "unused": unused, "killed": killed, "stall": stall,
     "destroyed": destroyed}[sys.argv[1]]()
    os._exit(0)  # the group may be broken: do not wait for it at exit

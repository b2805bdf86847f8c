"""The checks of one rank of a test job (ops_job.py, torch2_job.py): each check compares a
result with its closed form; report() prints every failure and "<TAG>_OK rank=R checks=N
failed=0" (or _FAILED), which the pytest files look for, and returns the exit code.
"""
import torch

failures = []
count = 0


def check(name, got, want):
    """Records one check: tensors must match in dtype, shape and every element; anything else
    must be equal."""
    global count
    count += 1
    if isinstance(want, torch.Tensor):
        ok = got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want)
        shown = lambda t: f"{t.tolist()} ({t.dtype})"  # noqa: E731
    else:
        ok, shown = got == want, repr
    if not ok:
        failures.append(f"{name}: got {shown(got)}, want {shown(want)}")


def fail(message):
    """Records one check that failed for a reason of its own."""
    global count
    count += 1
    failures.append(message)


def report(tag, rank):
    for f in failures:
        print(f"FAILED rank={rank}: {f}", flush=True)
    print(f"{tag}_{'OK' if not failures else 'FAILED'} rank={rank} checks={count} "
          f"failed={len(failures)}", flush=True)
    return 0 if not failures else 1

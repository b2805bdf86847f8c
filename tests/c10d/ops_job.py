"""Every torch.distributed op over the "lockstep" backend, against its closed form.

Run under `lockstep run --nproc-per-node W` (W = 2 or 3) with the package on PYTHONPATH. Rank r
contributes values built from r, so every expected result is a formula in r and W. Each check
runs for every dtype it allows; bfloat16 and float16 values stay small enough to be exact. Prints
"OPS_OK rank=R checks=N" and exits 0 when every check passed, else names each failure and exits 1.
"""
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

import lockstep  # noqa: F401  (registers the backend)
from job_checks import check, fail, report

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int8, torch.uint8, torch.int32, torch.int64]
ALL = FLOATS + INTS
N = 6  # elements per rank: values stay exact in every dtype

def base(dtype, n=N):
    return torch.arange(1, n + 1).to(dtype)


def main():
    dist.init_process_group("lockstep")
    assert dist.get_backend() == "lockstep"
    r, w = dist.get_rank(), dist.get_world_size()
    tri = w * (w + 1) // 2

    for dt in ALL:
        tag = str(dt).replace("torch.", "")
        # all_reduce: sum, in place.
        x = base(dt) * (r + 1)
        dist.all_reduce(x)
        check(f"all_reduce sum {tag}", x, base(dt) * tri)
        # min / max / product.
        for op, want in [(dist.ReduceOp.MIN, 1), (dist.ReduceOp.MAX, w),
                         (dist.ReduceOp.PRODUCT, 6 if w == 3 else 2)]:
            x = torch.full((N,), r + 1).to(dt)
            dist.all_reduce(x, op=op)
            check(f"all_reduce {op} {tag}", x, torch.full((N,), want).to(dt))
        # broadcast from the last rank.
        x = torch.full((N,), r).to(dt)
        dist.broadcast(x, src=w - 1)
        check(f"broadcast {tag}", x, torch.full((N,), w - 1).to(dt))
        # reduce to rank 1: only the root's result is defined.
        x = base(dt) * (r + 1)
        dist.reduce(x, dst=1)
        if r == 1:
            check(f"reduce {tag}", x, base(dt) * tri)
        # all_gather (a list of outputs) and _all_gather_base (one flat output).
        outs = [torch.zeros(N, dtype=dt) for _ in range(w)]
        dist.all_gather(outs, base(dt) + r)
        for j in range(w):
            check(f"all_gather[{j}] {tag}", outs[j], base(dt) + j)
        flat = torch.zeros(w * N, dtype=dt)
        dist._all_gather_base(flat, base(dt) + r)
        check(f"_all_gather_base {tag}", flat, torch.cat([base(dt) + j for j in range(w)]))
        # gather to rank 0, scatter from rank 0.
        outs = [torch.zeros(N, dtype=dt) for _ in range(w)] if r == 0 else None
        dist.gather(base(dt) * (r + 1), gather_list=outs, dst=0)
        if r == 0:
            for j in range(w):
                check(f"gather[{j}] {tag}", outs[j], base(dt) * (j + 1))
        out = torch.zeros(N, dtype=dt)
        ins = [base(dt) + j for j in range(w)] if r == 0 else None
        dist.scatter(out, scatter_list=ins, src=0)
        check(f"scatter {tag}", out, base(dt) + r)
        # reduce_scatter (list input) and _reduce_scatter_base (flat input).
        out = torch.zeros(N, dtype=dt)
        dist.reduce_scatter(out, [base(dt) * (j + 1) for j in range(w)])
        check(f"reduce_scatter {tag}", out, base(dt) * (r + 1) * w)
        out = torch.zeros(N, dtype=dt)
        dist._reduce_scatter_base(out, torch.cat([base(dt) * (j + 1) for j in range(w)]))
        check(f"_reduce_scatter_base {tag}", out, base(dt) * (r + 1) * w)
        # all_to_all: slot j of rank i goes to slot i of rank j.
        outs = [torch.zeros(N, dtype=dt) for _ in range(w)]
        dist.all_to_all(outs, [torch.full((N,), 10 * r + j).to(dt) for j in range(w)])
        for i in range(w):
            check(f"all_to_all[{i}] {tag}", outs[i], torch.full((N,), 10 * i + r).to(dt))
        # all_to_all_single, even and with split sizes: rank i sends j + 1 rows to rank j.
        out = torch.zeros(w * 2, dtype=dt)
        dist.all_to_all_single(out, torch.cat([torch.full((2,), 10 * r + j).to(dt) for j in range(w)]))
        check(f"all_to_all_single {tag}", out,
              torch.cat([torch.full((2,), 10 * i + r).to(dt) for i in range(w)]))
        out = torch.zeros(w * (r + 1), dtype=dt)
        dist.all_to_all_single(out, torch.cat([torch.full((j + 1,), 10 * r + j).to(dt) for j in range(w)]),
                               output_split_sizes=[r + 1] * w, input_split_sizes=[j + 1 for j in range(w)])
        check(f"all_to_all_single uneven {tag}", out,
              torch.cat([torch.full((r + 1,), 10 * i + r).to(dt) for i in range(w)]))
        # send / recv around the ring (even ranks send first, odd ranks receive first).
        got = torch.zeros(N, dtype=dt)
        if r % 2 == 0:
            dist.send(base(dt) + r, dst=(r + 1) % w, tag=7)
            dist.recv(got, src=(r - 1) % w, tag=7)
        else:
            dist.recv(got, src=(r - 1) % w, tag=7)
            dist.send(base(dt) + r, dst=(r + 1) % w, tag=7)
        check(f"send/recv {tag}", got, base(dt) + (r - 1) % w)
        # irecv posted before isend on every rank (a halo exchange): independent progress.
        got = torch.zeros(N, dtype=dt)
        reqs = [dist.irecv(got, src=(r - 1) % w, tag=8), dist.isend(base(dt) + r, dst=(r + 1) % w, tag=8)]
        for q in reqs:
            q.wait()
        check(f"irecv then isend {tag}", got, base(dt) + (r - 1) % w)
        # batch_isend_irecv, as pipeline schedules use it.
        got = torch.zeros(N, dtype=dt)
        ops = [dist.P2POp(dist.irecv, got, (r - 1) % w, tag=9),
               dist.P2POp(dist.isend, base(dt) + r, (r + 1) % w, tag=9)]
        for q in dist.batch_isend_irecv(ops):
            q.wait()
        check(f"batch_isend_irecv {tag}", got, base(dt) + (r - 1) % w)

    # Floating point only: average.
    for dt in FLOATS:
        x = base(dt) * (2 * r + 2)
        dist.all_reduce(x, op=dist.ReduceOp.AVG)
        check(f"all_reduce avg {dt}", x, base(dt) * (w + 1))
    # Integers only: bitwise ops on one bit per rank.
    for dt in [torch.uint8, torch.int32, torch.int64]:
        for op, want in [(dist.ReduceOp.BOR, (1 << w) - 1), (dist.ReduceOp.BAND, 0),
                         (dist.ReduceOp.BXOR, (1 << w) - 1)]:
            x = torch.full((N,), 1 << r).to(dt)
            dist.all_reduce(x, op=op)
            check(f"all_reduce {op} {dt}", x, torch.full((N,), want).to(dt))
    # bool: broadcast and the gather family.
    flags = torch.tensor([r % 2 == 0, True, False])
    dist.broadcast(flags, src=1)
    check("broadcast bool", flags, torch.tensor([False, True, False]))
    outs = [torch.zeros(2, dtype=torch.bool) for _ in range(w)]
    dist.all_gather(outs, torch.tensor([r == 0, r != 0]))
    for j in range(w):
        check(f"all_gather[{j}] bool", outs[j], torch.tensor([j == 0, j != 0]))

    # Coalesced forms: several tensors, one op.
    xs = [base(torch.float32, 3) * (r + 1), base(torch.float32, 5) * (r + 1)]
    dist.all_reduce_coalesced(xs)
    check("all_reduce_coalesced[0]", xs[0], base(torch.float32, 3) * tri)
    check("all_reduce_coalesced[1]", xs[1], base(torch.float32, 5) * tri)
    outs = [[torch.zeros(2), torch.zeros(3)] for _ in range(w)]
    dist.all_gather_coalesced(outs, [torch.full((2,), float(r)), torch.full((3,), float(r + 10))])
    for j in range(w):
        check(f"all_gather_coalesced[{j}][0]", outs[j][0], torch.full((2,), float(j)))
        check(f"all_gather_coalesced[{j}][1]", outs[j][1], torch.full((3,), float(j + 10)))

    # Non-contiguous tensors go through a copy and are written back.
    m = (torch.arange(12.).reshape(3, 4) * (r + 1)).t()  # 4 x 3, not contiguous
    assert not m.is_contiguous()
    dist.all_reduce(m)
    check("all_reduce non-contiguous", m, (torch.arange(12.).reshape(3, 4) * tri).t())
    outs = [torch.zeros(3, 2).t() for _ in range(w)]
    dist.all_gather(outs, (torch.arange(6.).reshape(3, 2) + r).t())
    for j in range(w):
        check(f"all_gather non-contiguous [{j}]", outs[j], (torch.arange(6.).reshape(3, 2) + j).t())

    # Work objects: wait with a timeout, completion, result and future.
    x = base(torch.float32) * (r + 1)
    work = dist.all_reduce(x, async_op=True)
    assert work.wait(timeout=timedelta(seconds=30))
    # (torch 1.13's own binding of Work.exception() cannot convert its result for any backend.)
    assert work.is_completed() and work.is_success()
    check("work.result", work.result()[0], base(torch.float32) * tri)
    fut = dist.all_reduce(base(torch.float32) * (r + 1), async_op=True).get_future()
    check("future value", fut.wait()[0], base(torch.float32) * tri)
    chained = dist.all_reduce(torch.ones(N) * (r + 1), async_op=True).get_future().then(
        lambda f: f.value()[0] * 2)
    check("future then", chained.wait(), torch.ones(N) * tri * 2)
    dist.barrier()

    # Subgroups: a group of the first and last ranks, and a group of everyone in reverse.
    pair = dist.new_group([0, w - 1], backend="lockstep")
    everyone = dist.new_group(list(range(w)))
    if r in (0, w - 1):
        x = torch.full((N,), float(r + 1))
        dist.all_reduce(x, group=pair)
        check("subgroup all_reduce", x, torch.full((N,), float(1 + w)))
        y = torch.full((N,), float(r))
        dist.broadcast(y, src=w - 1, group=pair)
        check("subgroup broadcast (global src)", y, torch.full((N,), float(w - 1)))
    x = torch.full((N,), float(r + 1))
    dist.all_reduce(x, group=everyone)
    check("second group all_reduce", x, torch.full((N,), float(tri)))

    # recv without src: from whichever rank sends first; dist.recv returns the sender.
    if r == 0:
        senders = []
        for _ in range(w - 1):
            got = torch.zeros(N)
            src = dist.recv(got, tag=11)
            senders.append(src)
            check(f"recv from any source ({src})", got, torch.full((N,), float(src)))
        if sorted(senders) != list(range(1, w)):
            fail(f"recv from any source: senders {senders}")
    else:
        dist.send(torch.full((N,), float(r)), dst=0, tag=11)
    x = torch.ones(N)
    dist.all_reduce(x)
    check("all_reduce after recv from any source", x, torch.full((N,), float(w)))

    # Large ops complete on lockstep's progress thread, which may then hold the last reference to
    # a Python-owned tensor: destroying the group right after must not deadlock on the GIL.
    for _ in range(3):
        big = torch.ones(16 << 20)
        dist.all_reduce(big)
        check("large all_reduce", big[:4], torch.full((4,), float(w)))
        del big
    dist.destroy_process_group()
    return report("OPS", r)


if __name__ == "__main__":
    sys.exit(main())

"""The torch 2.x surface of the "lockstep" backend, against closed forms: the tensor forms
(all_gather_into_tensor, reduce_scatter_tensor), the coalescing manager and the *_coalesced forms
it issues, sparse all_reduce (COO, as DDP's sparse gradients), the object collectives, sequence
numbers, Work.exception(), new_subgroups and a DeviceMesh on the CPU.

Run under `lockstep run --nproc-per-node W` (W = 2, 3 or 4). Prints "TORCH2_OK rank=R checks=N"
and exits 0 when every check passed, else names each failure and exits 1.
"""
import sys

import torch
import torch.distributed as dist
from torch.distributed.distributed_c10d import _coalescing_manager, _get_default_group

import lockstep  # noqa: F401  (registers the backend)
from job_checks import check, fail, report

def tensor_forms(r, w):
    out = torch.zeros(w * 3)
    dist.all_gather_into_tensor(out, torch.full((3,), float(r)))
    check("all_gather_into_tensor", out, torch.arange(w).repeat_interleave(3).float())
    out = torch.zeros(w, 3)  # the 2-D form: one row per rank
    dist.all_gather_into_tensor(out, torch.full((1, 3), float(r)))
    check("all_gather_into_tensor 2-D", out, torch.arange(w).float().unsqueeze(1).expand(w, 3))
    out = torch.zeros(2)
    dist.reduce_scatter_tensor(out, torch.arange(2 * w).float() * (r + 1))
    tri = w * (w + 1) // 2
    check("reduce_scatter_tensor", out, torch.arange(2 * r, 2 * r + 2).float() * tri)


def coalesced_forms(r, w):
    tri = w * (w + 1) // 2
    # all_reduce under the coalescing manager: one allreduce_coalesced.
    xs = [torch.ones(3) * (r + 1), torch.ones(5) * (r + 1)]
    with _coalescing_manager(async_ops=True) as cm:
        for x in xs:
            dist.all_reduce(x)
    cm.wait()
    check("coalesced all_reduce[0]", xs[0], torch.ones(3) * tri)
    check("coalesced all_reduce[1]", xs[1], torch.ones(5) * tri)
    # all_gather_into_tensor and reduce_scatter_tensor coalesced (what FSDP2 issues).
    outs = [torch.zeros(2 * w), torch.zeros(3 * w)]
    with _coalescing_manager(async_ops=True) as cm:
        dist.all_gather_into_tensor(outs[0], torch.full((2,), float(r)))
        dist.all_gather_into_tensor(outs[1], torch.full((3,), float(r + 10)))
    cm.wait()
    check("coalesced all_gather_into_tensor[0]", outs[0], torch.arange(w).repeat_interleave(2).float())
    check("coalesced all_gather_into_tensor[1]", outs[1],
          torch.arange(10, 10 + w).repeat_interleave(3).float())
    outs = [torch.zeros(2), torch.zeros(1)]
    with _coalescing_manager(async_ops=True) as cm:
        dist.reduce_scatter_tensor(outs[0], torch.arange(2 * w).float() * (r + 1))
        dist.reduce_scatter_tensor(outs[1], torch.arange(w).float() + r)
    cm.wait()
    check("coalesced reduce_scatter_tensor[0]", outs[0], torch.arange(2 * r, 2 * r + 2).float() * tri)
    check("coalesced reduce_scatter_tensor[1]", outs[1], torch.tensor([float(r * w + w * (w - 1) // 2)]))


def bad_sizes_fail_cleanly(r, w):
    # A wrong output size in a coalesced all_gather: an error naming it on every rank, before
    # anything is sent, and the group goes on.
    try:
        with _coalescing_manager():
            dist.all_gather_into_tensor(torch.zeros(2 * w + 1), torch.zeros(2))
        fail("coalesced all_gather_into_tensor with a wrong output size did not raise")
    except (RuntimeError, ValueError) as e:
        check("the size error names the op and the sizes",
              "allgather_into_tensor_coalesced: output[0] has" in str(e) and f"needs {w} x 2" in str(e), True)
    x = torch.ones(3)
    dist.all_reduce(x)
    check("all_reduce after a refused op", x, torch.ones(3) * w)


def sparse_all_reduce(r, w):
    # Rank r holds rows {r, r + 1} of a 4 x 2 matrix, valued r + 1: row j's sum is the sum of
    # (k + 1) over the ranks k with j in {k, k + 1}.
    rows = torch.tensor([[r % 4, (r + 1) % 4]])
    values = torch.full((2, 2), float(r + 1))
    x = torch.sparse_coo_tensor(rows, values, (4, 2))
    work = dist.all_reduce(x, async_op=True)
    work.wait()
    want = torch.zeros(4, 2)
    for k in range(w):
        want[k % 4] += k + 1
        want[(k + 1) % 4] += k + 1
    check("sparse all_reduce", x.to_dense(), want)
    check("sparse all_reduce result()", work.result()[0].to_dense(), want)
    check("sparse all_reduce is coalesced", x.is_coalesced(), True)


def object_collectives(r, w):
    got = [None] * w
    dist.all_gather_object(got, {"rank": r, "name": f"r{r}" * (r + 1)})
    check("all_gather_object", got, [{"rank": j, "name": f"r{j}" * (j + 1)} for j in range(w)])
    objs = [f"from {w - 1}", [1, 2, 3]] if r == w - 1 else [None, None]
    dist.broadcast_object_list(objs, src=w - 1)
    check("broadcast_object_list", objs, [f"from {w - 1}", [1, 2, 3]])
    gathered = [None] * w if r == 0 else None
    dist.gather_object(("g", r), gathered, dst=0)
    if r == 0:
        check("gather_object", gathered, [("g", j) for j in range(w)])
    out = [None]
    dist.scatter_object_list(out, [{"to": j} for j in range(w)] if r == 0 else None, src=0)
    check("scatter_object_list", out[0], {"to": r})


def sequence_numbers_and_work(r, w):
    pg = _get_default_group()
    before = pg._get_sequence_number_for_group()
    dist.all_reduce(torch.ones(1))
    dist.barrier()
    check("sequence number advances by one per collective",
          pg._get_sequence_number_for_group() - before, 2)
    work = dist.all_reduce(torch.ones(2), async_op=True)
    work.wait()
    check("Work.exception() of a successful op", work.exception(), None)


def subgroups_and_mesh(r, w):
    sub, _ = dist.new_subgroups(group_size=1 if w % 2 else 2)
    size = dist.get_world_size(sub)
    x = torch.ones(2) * (r + 1)
    dist.all_reduce(x, group=sub)
    first = r - r % size
    check("new_subgroups all_reduce", x, torch.ones(2) * sum(j + 1 for j in range(first, first + size)))
    from torch.distributed.device_mesh import init_device_mesh
    if w % 2 == 0:
        mesh = init_device_mesh("cpu", (2, w // 2), mesh_dim_names=("dp", "tp"))
        tp = mesh.get_group("tp")
        dp = mesh.get_group("dp")
        check("mesh tp group backend", dist.get_backend(tp), "lockstep")
        x = torch.ones(1) * r
        dist.all_reduce(x, group=tp)
        row = r // (w // 2)
        check("mesh tp all_reduce", x, torch.ones(1) * sum(range(row * (w // 2), (row + 1) * (w // 2))))
        x = torch.ones(1) * r
        dist.all_reduce(x, group=dp)
        col = r % (w // 2)
        check("mesh dp all_reduce", x, torch.ones(1) * (col + col + w // 2))
    else:
        mesh = init_device_mesh("cpu", (w,), mesh_dim_names=("dp",))
        x = torch.ones(1) * r
        dist.all_reduce(x, group=mesh.get_group("dp"))
        check("mesh 1-D all_reduce", x, torch.ones(1) * (w * (w - 1) // 2))


def main():
    dist.init_process_group("lockstep")
    r, w = dist.get_rank(), dist.get_world_size()
    check("get_backend", dist.get_backend(), "lockstep")
    tensor_forms(r, w)
    coalesced_forms(r, w)
    bad_sizes_fail_cleanly(r, w)
    sparse_all_reduce(r, w)
    object_collectives(r, w)
    sequence_numbers_and_work(r, w)
    subgroups_and_mesh(r, w)
    dist.destroy_process_group()
    return report("TORCH2", r)


if __name__ == "__main__":
    sys.exit(main())

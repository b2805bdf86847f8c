"""A synchronous parameter server over lockstep.rpc: rank 0 holds an MLP's parameters, ranks
1..W train it on Fashion-MNIST, and the result equals, bit for bit, one process doing the same.

    lockstep run --standalone --nproc-per-node 3 python parameter_server.py [--steps 30]

Rank 0 ("worker0", the server) serves three things:
  get_params()                  the parameters of the current step, as a list of tensors;
  push_grads(k, loss, grads)    the calling worker's gradients for step k (rpc.caller() says
                                which worker it is: worker w is rank w + 1). It returns a torch.futures.Future
                                at once, which completes only when all W workers' gradients of step
                                k are in: then the server sums them in rank order, divides by W,
                                applies one plain SGD step and completes every waiter with the
                                step's loss. The RPC thread is never blocked while it waits;
  the object "optimizer"        (rpc.serve): the server's SGD, whose step() says how many updates
                                it has applied. Workers start at that step, and the first worker
                                checks at the end that it is `--steps`.
Worker w (rank w + 1) loops: get_params, forward and backward on its shard of batch k (rows
w::W), push_grads. When every worker has shut down, the server saves its weights (--out),
replays the run in this one process (the same initial weights, batches, shards, rank-order sum
and SGD step) and checks that every parameter is torch.equal to what the workers trained.
It exits 1 when one differs.
"""

import argparse
import gzip
import os
import sys
import threading

import torch
from torch import nn

from lockstep import rpc

DATA_DIR = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530  # of Fashion-MNIST's training images (lockstep::torch::FashionMnist's)


def read_idx(path, count):
    """The first `count` items of a gzip IDX file of unsigned bytes, as a uint8 tensor."""
    with gzip.open(path, "rb") as f:
        head = f.read(4)
        if len(head) != 4 or head[:3] != b"\0\0\x08":
            raise ValueError(f"{path}: not an IDX file of unsigned bytes")
        ndim = head[3]
        dims = [int.from_bytes(f.read(4), "big") for _ in range(ndim)]
        if dims[0] < count:
            raise ValueError(f"{path}: {dims[0]} items, fewer than the {count} asked for")
        dims[0] = count
        size = 1
        for d in dims:
            size *= d
        data = f.read(size)  # only what is used: the rest of the file stays compressed
        if len(data) != size:
            raise ValueError(f"{path}: ends after {len(data)} of {size} data bytes")
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).reshape(dims)


def load_data(data_dir, count):
    """Images [count, 784] float32, normalized as the C++ FashionMnist dataset does, and labels
    [count] int64."""
    images = read_idx(os.path.join(data_dir, "train-images-idx3-ubyte.gz"), count)
    labels = read_idx(os.path.join(data_dir, "train-labels-idx1-ubyte.gz"), count)
    x = (images.reshape(count, 784).float() / 255.0 - MEAN) / STD
    return x, labels.long()


def make_model():
    """The 784-64-10 MLP, with the same initial weights in every process."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(784, 64), nn.ReLU(), nn.Linear(64, 10))


def shard(x, y, step, batch, w, workers):
    """Worker w's rows of batch `step` (the batches cycle through the data): every W-th row from
    row w, so shards differ by at most one row, and are equal when W divides the batch."""
    start = step % (x.shape[0] // batch) * batch
    return x[start:start + batch][w::workers], y[start:start + batch][w::workers]


def shard_gradient(model, params, x, y):
    """(loss, gradients) of `model` with weights `params` on one shard. The workers and the
    single-process replay both compute their gradients here, so that the two run the same ops."""
    with torch.no_grad():
        for p, value in zip(model.parameters(), params):
            p.copy_(value)
    model.zero_grad(set_to_none=True)
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    return loss.item(), [p.grad.detach().clone() for p in model.parameters()]


def average_in_rank_order(grads_by_worker):
    """The mean of each parameter's gradients, summed in worker order (floating-point addition
    is not associative: any other order could change the last bits)."""
    total = [g.clone() for g in grads_by_worker[0]]
    for grads in grads_by_worker[1:]:
        for t, g in zip(total, grads):
            t.add_(g)
    return [t / len(grads_by_worker) for t in total]


def sgd_update(params, grads, lr):
    """One plain SGD step, out of place: a get_params reply still on its way keeps its tensors."""
    return [p - lr * g for p, g in zip(params, grads)]


class ServerOptimizer:
    """The server's SGD over the parameters it holds. push_grads applies each step through
    apply(); other workers see step() through rpc.handle("worker0", "optimizer")."""

    def __init__(self, params, lr):
        self.params, self.lr, self.steps = params, lr, 0

    def apply(self, grads):
        self.params = sgd_update(self.params, grads, self.lr)
        self.steps += 1

    def step(self):
        """The number of SGD steps applied so far (torch.optim's per-parameter "step")."""
        return self.steps


class ParameterServer:
    """The state behind get_params and push_grads: the optimizer, and the step being gathered."""

    def __init__(self, params, lr, workers, steps):
        self.optimizer = ServerOptimizer(params, lr)
        self.workers, self.total_steps = workers, steps
        self.lock = threading.Lock()  # the agent runs handlers on several threads
        self.grads = {}  # worker index -> its gradients for the step being gathered
        self.losses = {}
        self.waiters = []  # the futures of that step's pushes
        self.loss_history = []  # the mean loss of each step, as the workers measured it

    def get_params(self):
        with self.lock:
            return list(self.optimizer.params)

    def push_grads(self, step, loss, grads):
        w = rpc.caller().id - 1  # worker w is rank w + 1
        done = torch.futures.Future()
        with self.lock:
            if step != self.optimizer.steps:
                raise ValueError(f"worker {w} pushed step {step}, the server is at step "
                                 f"{self.optimizer.steps}")
            if not 0 <= w < self.workers:
                raise ValueError(f"push_grads: worker index {w}, and there are {self.workers}")
            if w in self.grads:
                raise ValueError(f"push_grads: worker {w} pushed step {step} twice")
            self.grads[w], self.losses[w] = grads, loss
            self.waiters.append(done)
            if len(self.grads) < self.workers:
                return done  # answered once the last worker's gradients are in
            order = range(self.workers)
            self.optimizer.apply(average_in_rank_order([self.grads[i] for i in order]))
            mean_loss = sum(self.losses[i] for i in order) / self.workers
            self.loss_history.append(mean_loss)
            waiters, self.waiters, self.grads, self.losses = self.waiters, [], {}, {}
        if step % 5 == 0 or step + 1 == self.total_steps:
            print(f"server: step {step:2d}  loss {mean_loss:.4f}", flush=True)
        for f in waiters:  # outside the lock: completing one sends its answer
            f.set_result(mean_loss)
        return done


def run_server(args, workers, x, y):
    model = make_model()
    initial = [p.detach().clone() for p in model.parameters()]
    server = ParameterServer([p.clone() for p in initial], args.lr, workers, args.steps)
    rpc.register("get_params", server.get_params)
    rpc.register("push_grads", server.push_grads)
    served = rpc.serve("optimizer", server.optimizer, methods=["step"])
    rpc.init_rpc("worker0")
    # Graceful: serves until every worker has shut down too.
    report = rpc.shutdown(timeout=args.timeout)
    served.close()
    final = server.optimizer.params
    names = [name for name, _ in model.named_parameters()]
    torch.save(dict(zip(names, final)), args.out)

    # The same training in this one process: each worker's shard gradient computed in turn,
    # then the same rank-order mean and the same SGD step.
    params = [p.clone() for p in initial]
    for k in range(args.steps):
        grads = [shard_gradient(model, params, *shard(x, y, k, args.batch, w, workers))[1]
                 for w in range(workers)]
        params = sgd_update(params, average_in_rank_order(grads), args.lr)

    problems = []
    if not report.clean:
        problems.append(f"shutdown was not clean: {report}")
    if server.optimizer.steps != args.steps:
        problems.append(f"the server applied {server.optimizer.steps} steps, not {args.steps}")
    identical = all(torch.equal(a, b) for a, b in zip(final, params))
    max_diff = max((a - b).abs().max().item() for a, b in zip(final, params))
    if not identical:
        problems.append(f"weights differ from the single-process run (max |diff| {max_diff:g})")
    if problems:
        for p in problems:
            print(f"parameter server: FAILED: {p}", flush=True)
        return 1
    history = server.loss_history
    print(f"parameter server: {args.steps} steps, {workers} workers, weights identical to the "
          f"single-process run (max |diff| {max_diff}), loss {history[0]:.4f} -> "
          f"{history[-1]:.4f}; weights in {args.out}", flush=True)
    return 0


def run_worker(args, rank, workers, x, y):
    w = rank - 1
    model = make_model()  # for its structure: its weights come from the server
    rpc.init_rpc(f"worker{rank}")
    opt = rpc.handle("worker0", "optimizer")
    fut = rpc.rpc_async("worker0", opt.step, args=())
    first = fut.wait()  # 0 on a fresh server
    for k in range(first, args.steps):
        params = rpc.rpc_sync("worker0", "get_params")
        loss, grads = shard_gradient(model, params, *shard(x, y, k, args.batch, w, workers))
        rpc.rpc_sync("worker0", "push_grads", args=(k, loss, grads))
    if w == 0:
        applied = rpc.rpc_async("worker0", opt.step, args=()).wait()
        print(f"worker{rank}: the server applied {applied} SGD steps", flush=True)
        if applied != args.steps:
            raise RuntimeError(f"the server applied {applied} steps, not {args.steps}")
    rpc.shutdown(timeout=args.timeout)
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=120, help="samples per step, over all workers")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--subset", type=int, default=4096, help="images used (the first ones)")
    p.add_argument("--data", default=DATA_DIR)
    p.add_argument("--out", default="parameter_server_weights.pt")
    # The server's shutdown spans the whole training: it serves until every worker is done.
    p.add_argument("--timeout", type=float, default=120.0, help="seconds rpc.shutdown may wait")
    args = p.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if world < 2:
        sys.exit("parameter_server: needs at least 2 processes (a server and a worker)")
    # One intra-op thread everywhere: a GEMM's blocking, hence its sums' order and last bits,
    # can depend on the thread count, and the replay on the server must compute what the workers
    # computed.
    torch.set_num_threads(1)
    x, y = load_data(args.data, args.subset)
    workers = world - 1
    if rank == 0:
        return run_server(args, workers, x, y)
    return run_worker(args, rank, workers, x, y)


if __name__ == "__main__":
    sys.exit(main())

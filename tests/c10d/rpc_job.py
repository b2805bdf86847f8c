"""A job for test_rpc.py: lockstep.rpc between real processes. Modes:
  forms   every call form against closed forms, errors, served objects, shutdown
  killed  worker 1 dies (SIGKILL) inside a call: the caller's futures fail at once with PeerDied,
          and every survivor's shutdown counts it dead and returns
Each rank prints "<MODE>_OK rank=<r>" when all its checks passed."""
import argparse
import os
import signal
import socket
import time

import torch
from lockstep import rpc


@rpc.register
def add(a, b):
    return a + b


@rpc.register("echo")
def echo(x):
    return x


@rpc.register("describe")
def describe(*args, **kwargs):
    return {"args": len(args), "keys": sorted(kwargs)}


@rpc.register("who")
def who():
    return rpc.caller().name


@rpc.register("fail")
def fail(n):
    raise ValueError(f"bad input {n}")


@rpc.register("caller_sum")
def caller_sum(t):
    return t.sum().item(), t * 2


@rpc.register("later")
def later(a, b):
    fut = torch.futures.Future()
    def complete():
        time.sleep(0.01)
        fut.set_result(a * b)
    import threading
    threading.Thread(target=complete).start()
    return fut


@rpc.register("sleep")
def sleep(seconds):
    time.sleep(seconds)
    return seconds


@rpc.register("die")
def die():
    time.sleep(0.2)
    os.kill(os.getpid(), signal.SIGKILL)


class Counter:
    def __init__(self):
        self.total = 0

    def add(self, n=1):
        self.total += n
        return self.total

    def get(self):
        return self.total


def expect_raises(cls, fn, *parts):
    try:
        fn()
    except cls as e:
        text = str(e)
        for p in parts:
            assert p in text, f"{p!r} not in {text!r}"
        return e
    raise AssertionError(f"no {cls.__name__}")


def forms(rank, world):
    peer = (rank + 1) % world
    to = f"worker{peer}"
    counter = Counter()
    served = rpc.serve("counter", counter, methods=["add", "get"])
    rpc.init_rpc(f"worker{rank}")
    assert rpc.rpc_sync(to, add, args=(rank, 100)) == rank + 100
    assert rpc.rpc_sync(peer, "describe", args=(1, 2), kwargs={"b": 1, "a": 2}) == {"args": 2, "keys": ["a", "b"]}
    assert rpc.rpc_sync(rpc.get_worker_info(to), add, args=("a", "b")) == "ab"
    futs = [rpc.rpc_async(to, add, args=(i, rank)) for i in range(300)]
    assert torch.futures.wait_all(futs) == [i + rank for i in range(300)]
    assert isinstance(futs[0], torch.futures.Future)
    chained = rpc.rpc_async(to, add, args=(2, 3)).then(lambda f: f.value() * 10)
    assert chained.wait() == 50
    value = [None, True, False, -2**63, 2**63 - 1, 1.5, "ünï", b"\x00\xff", bytearray(b"ab"),
             (1, (2, [3])), {1: "one", "t": (None,), (1, 2): [b""]}, [], {}, ()]
    back = rpc.rpc_sync(to, "echo", args=(value,))
    expected = list(value)
    expected[8] = b"ab"  # bytearray arrives as bytes
    assert back == expected, back
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8,
                  torch.uint8, torch.int16, torch.int32, torch.int64, torch.bool, torch.complex64,
                  torch.complex128):
        t = (torch.arange(24).reshape(2, 3, 4) % 3).to(dtype)
        r = rpc.rpc_sync(to, "echo", args=(t,))
        assert r.dtype == dtype and r.shape == t.shape and torch.equal(r, t), dtype
    assert rpc.rpc_sync(to, "who") == f"worker{rank}" and rpc.caller() is None
    z = torch.tensor([1 + 2j, 3 - 4j])
    assert torch.equal(rpc.rpc_sync(to, "echo", args=(z.conj(),)), torch.tensor([1 - 2j, 3 + 4j]))
    assert torch.equal(rpc.rpc_sync(to, "echo", args=(torch.tensor([1.0, 2.0])._neg_view(),)),
                       torch.tensor([-1.0, -2.0]))
    strided = torch.arange(20.0).reshape(4, 5).t()  # not contiguous: sent in order
    assert torch.equal(rpc.rpc_sync(to, "echo", args=(strided,)), strided)
    big = torch.randn(1 << 22)
    s, doubled = rpc.rpc_sync(to, "caller_sum", args=(big,))
    assert torch.equal(doubled, big * 2) and abs(s - big.sum().item()) < 1e-3
    assert rpc.rpc_sync(to, "later", args=(6, 7)) == 42
    assert rpc.rpc_sync(rank, add, args=(1, 1)) == 2  # to itself

    e = expect_raises(rpc.RemoteError, lambda: rpc.rpc_sync(to, fail, args=(7,)),
                      f"rpc_sync('{to}', 'fail')", "ValueError", "bad input 7",
                      f"{to} (rank {peer} on host {socket.gethostname()}", "in fail")
    assert e.remote_type == "ValueError" and e.remote_message == "bad input 7" and e.worker == to
    assert "raise ValueError" in e.remote_traceback
    assert isinstance(e, rpc.RpcError)
    fut = rpc.rpc_async(to, fail, args=(8,))
    expect_raises(rpc.RemoteError, fut.wait, "bad input 8")
    for func, name in ((eval, "builtins.eval"), (os.system, "posix.system"),
                       (lambda: 1, "__main__.forms.<locals>.<lambda>"), ("nope", "nope")):
        e = expect_raises(rpc.UnknownFunction, lambda: rpc.rpc_sync(to, func, args=("1",)),
                          f"has no function '{name}'", "__main__.add", "caller_sum", "counter.add")
        assert e.function == name and "echo" in e.registered
    expect_raises(TypeError, lambda: rpc.rpc_sync(to, add, args=({1, 2}, 3)),
                  "args[0] is a set", "never pickles")
    expect_raises(TypeError, lambda: rpc.rpc_sync(to, "echo", args=({"lr": object()},)),
                  "args[0]['lr'] is an object")
    expect_raises(rpc.RpcTimeout, lambda: rpc.rpc_sync(to, "sleep", args=(1.0,), timeout=0.3),
                  f"rpc_sync('{to}', 'sleep'): no answer from {to}", "within 0.30 s")
    time.sleep(1.0)  # its late answer arrives and is dropped
    assert rpc.rpc_sync(to, add, args=(1, 2)) == 3

    h = rpc.handle(to, "counter")
    assert h.add(5) == 5
    assert h.rpc_async().add(n=6).wait() == 11
    assert rpc.rpc_async(to, h.get).wait() == 11  # the seed's pattern: rpc_async(worker, obj.method)
    expect_raises(rpc.UnknownFunction, lambda: h.reset(), "serves 'counter' without a method 'reset'")
    info = rpc.get_worker_info(to)
    assert (info.name, info.id) == (to, peer) and rpc.get_worker_info().name == f"worker{rank}"
    # Every worker's counter has been used once; each closes its own, then sees its peer's closed.
    barrier("used", rank, world)
    served.close()
    barrier("closed", rank, world)
    expect_raises(rpc.UnknownFunction, h.get, "closed its object 'counter'")
    report = rpc.shutdown()
    assert report.clean, report
    expect_raises(rpc.RpcError, lambda: rpc.rpc_sync(to, add, args=(1, 2)), "init_rpc")
    print(f"FORMS_OK rank={rank}", flush=True)


_arrived = {}


@rpc.register("arrive")
def arrive(tag, rank):
    _arrived.setdefault(tag, set()).add(rank)
    return len(_arrived[tag])


def barrier(tag, rank, world):
    """Every worker meets at worker0, through rpc itself."""
    rpc.rpc_sync("worker0", arrive, args=(tag, rank))
    while rpc.rpc_sync("worker0", "count", args=(tag,)) < world:
        time.sleep(0.01)


@rpc.register("count")
def count(tag):
    return len(_arrived.get(tag, ()))


def killed(rank, world):
    rpc.init_rpc(f"worker{rank}")
    if rank == 0:
        # From three threads: calls of one thread run one after another on the callee, so these
        # run side by side (all in the function when worker1 dies).
        import concurrent.futures
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            futs = list(pool.map(lambda _: rpc.rpc_async("worker1", "sleep", args=(60,)), range(3)))
        dying = rpc.rpc_async("worker1", "die")
        started = time.monotonic()
        for f in futs + [dying]:
            expect_raises(rpc.PeerDied, f.wait,
                          f"worker1 (rank 1 on host {socket.gethostname()}", "died before answering")
        took = time.monotonic() - started
        assert took < 2.5, took
        expect_raises(rpc.PeerDied, lambda: rpc.rpc_sync("worker1", add, args=(1, 2)), "is dead")
        print(f"PEER_DIED in {took:.2f} s", flush=True)
    if rank == 1:
        time.sleep(120)  # killed by its own `die`
    started = time.monotonic()
    report = rpc.shutdown(timeout=20)
    took = time.monotonic() - started
    assert [w.name for w in report.dead] == ["worker1"] and not report.unfinished, report
    assert took < 10, took
    print(f"KILLED_OK rank={rank} shutdown {took:.2f} s", flush=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["forms", "killed"])
    a = p.parse_args()
    r, w = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    {"forms": forms, "killed": killed}[a.mode](r, w)

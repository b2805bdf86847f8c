"""lockstep.rpc: remote calls between the processes of a job, safe by construction.

A worker runs only the functions it registered by name, and arguments travel as data (None,
bool, int, float, str, bytes, list, tuple, dict and CPU tensors), never as pickles. Every
connection proves the job's secret; every failure is an exception that names the call, the worker
and why; nothing waits past its timeout.

    from lockstep import rpc

    @rpc.register
    def add(a, b):
        return a + b

    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world_size)   # env:// or lockstep run
    three = rpc.rpc_sync("worker1", add, args=(1, 2))
    fut = rpc.rpc_async("worker1", add, args=(1, 2))                  # a torch.futures.Future
    rpc.shutdown()

Objects stay with their owner: rpc.serve("opt", optimizer, methods=["step"]) there, and
rpc.handle("worker1", "opt").step() anywhere. docs/rpc.md has the rest, and a table for moving
from torch.distributed.rpc.
"""

import atexit
import datetime

from . import _lockstep as _native

__all__ = [
    "init_rpc", "shutdown", "register", "unregister", "registered", "async_execution",
    "rpc_sync", "rpc_async", "serve", "handle", "get_worker_info", "get_worker_infos", "caller",
    "WorkerInfo", "ShutdownReport", "Served", "Handle", "RpcError", "UnknownFunction",
    "RemoteError", "RpcTimeout", "PeerDied", "NotAuthorized", "ShutdownInProgress", "CodecError",
]

DEFAULT_RPC_TIMEOUT_SEC = 60.0
UNSET_RPC_TIMEOUT = -1.0  # torch's: "the default"


class RpcError(RuntimeError):
    """Base of every lockstep RPC failure. `worker`: the worker the call was for (or None)."""

    worker = None


class UnknownFunction(RpcError):
    """The worker has no function (or served method) of that name. `function` is the name,
    `registered` what the worker has."""

    function = None
    registered = ()


class RemoteError(RpcError):
    """The function raised on the worker: `remote_type` ("ValueError"), `remote_message`, and the
    worker's traceback text in `remote_traceback` (also in the message)."""

    remote_type = remote_message = remote_traceback = None


class RpcTimeout(RpcError, TimeoutError):
    """No answer within the call's timeout."""


class PeerDied(RpcError):
    """The worker's process ended, or its host stopped answering, before it answered."""


class NotAuthorized(RpcError):
    """The worker and this process do not share the job's secret."""


class ShutdownInProgress(RpcError):
    """This process or the worker is shutting down RPC."""


class CodecError(RpcError):
    """A message that could not be read."""


_native._rpc_set_errors(RpcError, UnknownFunction, RemoteError, RpcTimeout, PeerDied,
                        NotAuthorized, ShutdownInProgress, CodecError)


class WorkerInfo:
    """A worker: its name and rank (`id`, as torch's), with its host and pid."""

    __slots__ = ("name", "id", "host", "pid")

    def __init__(self, name, id, host="", pid=0):  # noqa: A002 (torch's field name)
        self.name, self.id, self.host, self.pid = name, id, host, pid

    def __eq__(self, other):
        return isinstance(other, WorkerInfo) and (self.name, self.id) == (other.name, other.id)

    def __hash__(self):
        return hash((self.name, self.id))

    def __repr__(self):
        return f"WorkerInfo(name={self.name!r}, id={self.id}, host={self.host!r}, pid={self.pid})"


def _info(t):
    return WorkerInfo(*t)


class ShutdownReport:
    """What shutdown() saw: `dead` workers (counted as done) and `unfinished` ones (alive, not done
    in time). `clean` when both are empty."""

    def __init__(self, dead, unfinished):
        self.dead = [_info(w) for w in dead]
        self.unfinished = [_info(w) for w in unfinished]

    @property
    def clean(self):
        return not self.dead and not self.unfinished

    def __repr__(self):
        return f"ShutdownReport(dead={self.dead}, unfinished={self.unfinished})"


def _seconds(value, default):
    if value is None:
        return default
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    return float(value)


def init_rpc(name, backend=None, rank=-1, world_size=None, rpc_backend_options=None, *,
             init_method=None, timeout=None, init_timeout=None, threads=2, max_threads=None):
    """Joins the job as worker `name` and returns once every worker has. As torch's init_rpc:
    rank and world_size default to RANK and WORLD_SIZE (or `lockstep run`'s); the rendezvous is
    env:// unless init_method says otherwise. `timeout` (seconds): the default of every call,
    60 s as torch's rpc_timeout. A torch RpcBackendOptions passed as rpc_backend_options gives its
    rpc_timeout and init_method, and its num_worker_threads bounds the pool (max_threads, default
    64: threads are added while functions block). `backend` is accepted for torch's signature and
    ignored."""
    del backend
    opts = rpc_backend_options
    if opts is not None:
        timeout = timeout if timeout is not None else getattr(opts, "rpc_timeout", None)
        init_method = init_method or getattr(opts, "init_method", None)
        max_threads = max_threads or getattr(opts, "num_worker_threads", None)
    max_threads = int(max_threads or 64)
    _native._rpc_init(name, -1 if rank is None else int(rank),
                      -1 if world_size is None else int(world_size), init_method or "env://",
                      _seconds(timeout, DEFAULT_RPC_TIMEOUT_SEC),
                      None if init_timeout is None else _seconds(init_timeout, None),
                      min(int(threads), max_threads), max_threads)


def shutdown(graceful=True, timeout=30.0):
    """Graceful (the default): stops new calls from this process, waits for its calls in flight,
    then serves the other workers until each is done or dead, at most `timeout` seconds in all.
    Never hangs. Returns a ShutdownReport (and logs a warning naming dead or unfinished workers).
    graceful=False closes at once."""
    dead, unfinished = _native._rpc_shutdown(_seconds(timeout, 30.0) if graceful else 0.0)
    return ShutdownReport(dead, unfinished)


def _default_name(fn):
    module = getattr(fn, "__module__", None) or "builtins"
    qualname = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    return f"{module}.{qualname}"


def register(name_or_fn=None, fn=None):
    """Makes a function callable by other workers, by name. Three forms:

        @rpc.register                 # named "<module>.<qualname>"
        @rpc.register("add")          # named "add"
        rpc.register("add", fn)

    Registering works before or after init_rpc. Only registered functions ever run."""
    if fn is not None:
        return _register(str(name_or_fn), fn)
    if callable(name_or_fn):
        return _register(_default_name(name_or_fn), name_or_fn)

    def decorate(f):
        return _register(name_or_fn if name_or_fn is not None else _default_name(f), f)

    return decorate


def _register(name, fn):
    if not callable(fn):
        raise TypeError(f"rpc.register({name!r}): {fn!r} is not callable")
    _native._rpc_register(name, fn)
    try:
        fn.__lockstep_rpc_name__ = name
    except (AttributeError, TypeError):  # a builtin or a bound method: name it explicitly
        pass
    return fn


def unregister(name_or_fn):
    """Stops serving a function (by name or by the registered function)."""
    _native._rpc_unregister(name_or_fn if isinstance(name_or_fn, str) else _name_of(name_or_fn))


def registered():
    """The names of the functions this process serves."""
    return _native._rpc_registered()


def async_execution(fn):
    """torch's decorator, for migrating code: a registered function that returns a
    torch.futures.Future answers when that future completes, with or without it."""
    fn._lockstep_async = True
    return fn


def _name_of(func):
    if isinstance(func, str):
        return func
    name = getattr(func, "__lockstep_rpc_name__", None)
    return name if name is not None else _default_name(func)


def _target(to, func):
    """(target, object, shown) of a call."""
    if isinstance(func, _RemoteMethod):
        func._check_worker(to)
        return func._method, func._handle._object, f"{func._handle._object}.{func._method}"
    name = _name_of(func)
    return name, None, name


def _timeout(timeout):
    if timeout is None or timeout == UNSET_RPC_TIMEOUT:
        return None  # the default
    seconds = _seconds(timeout, None)
    if seconds < 0:
        raise ValueError(f"rpc: timeout is seconds (0: none, -1: init_rpc's default), not {timeout}")
    return seconds


def rpc_sync(to, func, args=None, kwargs=None, timeout=UNSET_RPC_TIMEOUT):
    """Calls `func` (a registered function, its name, or a handle's method) on worker `to` (a name,
    a rank or a WorkerInfo) and returns its result. timeout: seconds (0: none; default: init_rpc's).
    Raises UnknownFunction, RemoteError, RpcTimeout, PeerDied, NotAuthorized or ShutdownInProgress,
    each naming the call and the worker; TypeError for an argument the codec does not carry."""
    target, obj, shown = _target(to, func)
    return _native._rpc_call(to, target, obj, tuple(args or ()), kwargs, _timeout(timeout), True,
                             shown)


def rpc_async(to, func, args=None, kwargs=None, timeout=UNSET_RPC_TIMEOUT):
    """As rpc_sync, but returns at once a torch.futures.Future of the result (its wait() raises
    the call's error)."""
    target, obj, shown = _target(to, func)
    return _native._rpc_call(to, target, obj, tuple(args or ()), kwargs, _timeout(timeout), False,
                             shown)


class Served:
    """An object this process serves (serve()). close() stops serving it: later calls fail with
    UnknownFunction saying it was closed. Also a context manager."""

    def __init__(self, name, obj):
        self.name, self.object, self._open = name, obj, True

    def close(self):
        if self._open:
            self._open = False
            _native._rpc_close(self.name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def serve(name, obj, methods):
    """Serves `obj`'s `methods` (a list of names) under `name`: other workers call them through
    handle(this worker, name). The object stays here; nothing counts references to it (docs/rpc.md
    says why): it is served until close()."""
    if isinstance(methods, str) or not methods:
        raise ValueError(f"rpc.serve({name!r}): methods is a non-empty list of method names")
    bound = {}
    for m in methods:
        fn = getattr(obj, m, None)
        if not callable(fn):
            raise ValueError(f"rpc.serve({name!r}): {type(obj).__name__} has no method {m!r}")
        bound[m] = fn
    _native._rpc_serve(name, bound)
    return Served(name, obj)


class _RemoteMethod:
    def __init__(self, handle, method, mode):
        self._handle, self._method, self._mode = handle, method, mode

    def _check_worker(self, to):
        mine = self._handle._worker
        to_name = to if isinstance(to, str) else getattr(to, "name", to)
        if isinstance(to_name, int):
            to_name = _native._rpc_worker(to_name)[0]
        if to_name != mine:
            raise ValueError(f"{self._handle!r}.{self._method} lives on {mine!r}, not {to_name!r}")

    def __call__(self, *args, **kwargs):
        h = self._handle
        call = rpc_async if self._mode == "async" else rpc_sync
        return call(h._worker, self, args=args, kwargs=kwargs, timeout=h._timeout)

    def __repr__(self):
        return f"<remote method {self._method!r} of {self._handle!r}>"


class Handle:
    """Another worker's served object. h.step(...) calls its method step and returns the result;
    h.rpc_async().step(...) returns a future; h.rpc_sync().step(...) is h.step(...).
    h.step itself can be passed to rpc_async(h.worker, h.step, ...)."""

    def __init__(self, worker, name, timeout=UNSET_RPC_TIMEOUT, mode="sync"):
        self._worker = worker if isinstance(worker, str) else _info(_native._rpc_worker(worker)).name
        self._object, self._timeout, self._mode = name, timeout, mode

    @property
    def worker(self):
        return self._worker

    @property
    def name(self):
        return self._object

    def rpc_sync(self, timeout=UNSET_RPC_TIMEOUT):
        return Handle(self._worker, self._object, timeout, "sync")

    def rpc_async(self, timeout=UNSET_RPC_TIMEOUT):
        return Handle(self._worker, self._object, timeout, "async")

    def __getattr__(self, method):
        if method.startswith("__"):
            raise AttributeError(method)
        return _RemoteMethod(self, method, self._mode)

    def __repr__(self):
        return f"rpc.handle({self._worker!r}, {self._object!r})"


def handle(to, name):
    """The object worker `to` serves under `name` (serve())."""
    return Handle(to, name)


def get_worker_info(worker_name=None):
    """A worker's WorkerInfo by name (or rank); this process's without one."""
    return _info(_native._rpc_worker(worker_name))


def caller():
    """The WorkerInfo of the worker whose call this thread is running, inside a registered
    function (None elsewhere)."""
    t = _native._rpc_caller()
    return None if t is None else _info(t)


def get_worker_infos():
    return [_info(t) for t in _native._rpc_workers()]


@atexit.register
def _close_at_exit():
    # A program that ends without shutdown(): close at once rather than leave threads that
    # would need the interpreter.
    if _native._rpc_running():
        _native._rpc_shutdown(0.0)

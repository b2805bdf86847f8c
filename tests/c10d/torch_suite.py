"""torch's own DistributedTest suite (torch/testing/_internal/distributed/distributed_test.py,
the one behind torch's test_distributed_spawn) as conformance for the "lockstep" backend.

    torch_suite.py --world 2 [--as gloo|lockstep|plugin] [unittest arguments, e.g. -k allreduce]

--as gloo (the default) runs the suite as BACKEND=gloo, so that the many tests gated on gloo by
name run, while every group the suite creates for the CPU is a lockstep group: the creator of
torch's "gloo" plugin is lockstep's. Each process checks that at start (LOCKSTEP_SUITE_CHECK).
--as plugin runs it as BACKEND=lockstep, torch's pathway for third-party backends
(DistTestCases.backend_feature["plugin"]); --as real-gloo runs torch's own gloo, for the baseline.
Prints unittest's summary; scripts/torch_suite.sh runs the whole suite and tabulates it.
"""
import argparse
import atexit
import os
import shutil
import sys
import tempfile

parser = argparse.ArgumentParser(add_help=False)
parser.add_argument("--world", type=int, default=int(os.environ.get("WORLD_SIZE", "2")))
parser.add_argument("--cpu-only", action="store_true",
                    help="leave out the tests of CUDA, NCCL and GPUs (they skip here anyway, after "
                         "spawning their ranks: several seconds each)")
parser.add_argument("--as", dest="mode", default=os.environ.get("LOCKSTEP_SUITE_AS", "gloo"),
                    choices=["gloo", "plugin", "real-gloo"])
known, rest = parser.parse_known_args()
# torch's run_tests writes XML reports through xmlrunner (not installed) when CI is set.
os.environ.pop("CI", None)
# The spawned ranks import this file again (multiprocessing's spawn): they read the environment.
os.environ["WORLD_SIZE"] = str(known.world)
os.environ["LOCKSTEP_SUITE_AS"] = known.mode
os.environ["BACKEND"] = "lockstep" if known.mode == "plugin" else "gloo"
if "TEMP_DIR" not in os.environ:  # the parent makes it (and removes it); the ranks inherit it
    os.environ["TEMP_DIR"] = tempfile.mkdtemp(prefix="lockstep-suite-")
    atexit.register(shutil.rmtree, os.environ["TEMP_DIR"], ignore_errors=True)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.distributed import distributed_c10d as c10d  # noqa: E402
from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

import lockstep  # noqa: E402

if known.mode == "plugin":
    DistTestCases.backend_feature["plugin"].add("lockstep")
elif known.mode == "gloo":
    if hasattr(c10d.Backend, "_ensure_backend_registered"):  # torch 2.15: built-ins are lazy
        c10d.Backend._ensure_backend_registered("gloo")
    plugin = c10d.Backend._plugins["GLOO"]
    c10d.Backend._plugins["GLOO"] = plugin._replace(creator_fn=lockstep._create)
    # torch's C++ (DDP's logger) takes a group whose type is GLOO for a ProcessGroupGloo and casts
    # it: the groups are CUSTOM, as a plugin's are, while Python still calls them "gloo".
    c10d.Backend.backend_type_map["gloo"] = c10d.ProcessGroup.BackendType.CUSTOM

from torch.testing._internal.common_utils import run_tests  # noqa: E402
from torch.testing._internal.distributed import distributed_test  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest, TestDistBackend)

if known.mode == "gloo":
    # The suite looks for the profiler events of "gloo:<op>"; lockstep records "lockstep:<op>".
    real_events = distributed_test.get_profiling_event

    def lockstep_events(event_name, profiler, **kwargs):
        return real_events(event_name.replace("gloo:", "lockstep:", 1), profiler, **kwargs)
    distributed_test.get_profiling_event = lockstep_events


if known.cpu_only:
    for _name in list(vars(DistributedTest._DistTestBase)):
        if _name.startswith("test_") and any(k in _name.lower() for k in ("cuda", "nccl", "gpu")):
            delattr(DistributedTest._DistTestBase, _name)


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()

    @classmethod
    def _run(cls, rank, test_name, file_name, pipe, **kwargs):
        if known.mode != "real-gloo":
            real_init = dist.init_process_group

            def init_and_check(*args, **kw):
                real_init(*args, **kw)
                backend = c10d._get_default_group()._get_backend(torch.device("cpu"))
                assert isinstance(backend, lockstep.ProcessGroupLockstep), type(backend)
            dist.init_process_group = init_and_check
        super()._run(rank, test_name, file_name, pipe, **kwargs)


if __name__ == "__main__":
    sys.argv = [sys.argv[0]] + rest
    run_tests()

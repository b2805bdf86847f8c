"""lockstep as a torch.distributed backend, tested with real processes: torch 2.x (the project's
.venv), the package from the build tree (PYTHONPATH), and `lockstep run` (LOCKSTEP_CLI) as the
launcher.
CTest runs this file with pytest (tests/CMakeLists.txt).
"""
import os
import re
import subprocess
import sys
import tempfile
import time

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.environ.get("LOCKSTEP_CLI", "lockstep")


def job_env(extra=None):
    env = dict(os.environ)
    env.update({"OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"})
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCKSTEP_STORE_ADDR",
                 "LOCKSTEP_STORE_PORT", "LOCKSTEP_TIMEOUT", "LOCKSTEP_DEBUG"):
        env.pop(name, None)
    env.update(extra or {})
    return env


def launch(nproc, script, *args, env=None, timeout=240):
    """`lockstep run` with nproc ranks of script; returns (exit code, output)."""
    cmd = [CLI, "run", "--standalone", "--nproc-per-node", str(nproc), "--python", sys.executable,
           os.path.join(HERE, script), *args]
    done = subprocess.run(cmd, env=job_env(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=timeout)
    return done.returncode, done.stdout


@pytest.mark.parametrize("world", [2, 3])
def test_every_op_matches_its_closed_form(world):
    code, out = launch(world, "ops_job.py")
    assert code == 0, out
    for r in range(world):
        assert re.search(rf"\[rank{r}\]: OPS_OK rank={r} checks=\d+ failed=0", out), out


@pytest.mark.parametrize("zero", [False, True], ids=["ddp", "zero_redundancy_optimizer"])
def test_ddp_over_lockstep_trains_to_glooss_weights(zero):
    with tempfile.TemporaryDirectory() as tmp:
        weights = {}
        for backend in ("gloo", "lockstep"):
            path = os.path.join(tmp, f"{backend}.pt")
            args = ["--backend", backend, "--out", path] + (["--zero"] if zero else [])
            code, out = launch(2, "ddp_job.py", *args)
            assert code == 0, out
            weights[backend] = torch.load(path)
        for name, value in weights["gloo"].items():
            diff = (value - weights["lockstep"][name]).abs().max().item()
            assert diff <= 1e-6, f"{name} differs by {diff}"


def test_different_shapes_raise_on_both_ranks_naming_the_other():
    code, out = launch(2, "failure_job.py", "mismatch")
    assert code == 0, out
    assert "MISMATCH_OK rank=0" in out and "MISMATCH_OK rank=1" in out, out
    assert "SIGABRT" not in out and "terminate called" not in out, out


def test_unused_parameter_gives_torchs_error_not_a_hang():
    start = time.monotonic()
    code, out = launch(2, "failure_job.py", "unused", env={"LOCKSTEP_TIMEOUT": "20"})
    assert code == 0, out
    assert "UNUSED_OK rank=0" in out and "UNUSED_OK rank=1" in out, out
    assert time.monotonic() - start < 60


def test_a_destroyed_group_is_named_as_shut_down_not_dead():
    code, out = launch(2, "failure_job.py", "destroyed", env={"LOCKSTEP_TIMEOUT": "30"})
    assert code == 0, out
    assert "DESTROYED_OK rank=0" in out and "DESTROYED_OK rank=1" in out, out


def test_a_sigkilled_rank_is_named_by_the_survivor_within_2_s():
    # Without the launcher, which would stop the survivor itself: plain env:// variables.
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in range(2):
        env = job_env({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
                       "WORLD_SIZE": "2", "LOCKSTEP_TIMEOUT": "60"})
        procs.append(subprocess.Popen(
            [sys.executable, os.path.join(HERE, "failure_job.py"), "killed"], env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert procs[1].returncode == -9, outs[1]
    assert procs[0].returncode == 0, outs[0]
    assert "KILLED_OK rank=0" in outs[0], outs[0]


def test_diagnostics_carry_over():
    with tempfile.TemporaryDirectory() as trace:
        code, out = launch(2, "failure_job.py", "stall",
                           env={"LOCKSTEP_TIMEOUT": "4", "LOCKSTEP_STALL_WARNING_S": "1",
                                "LOCKSTEP_DEBUG": "INFO", "LOCKSTEP_TRACE_DIR": trace})
        assert code != 0, out
        assert "STALL_OK rank=0" in out, out
        assert re.search(r"\[lockstep info rank 0\] init.*backend", out) or \
            "[lockstep info rank 0]" in out, "LOCKSTEP_DEBUG=INFO logs"
        assert re.search(r"all_reduce #1 waiting [0-9.]+ s for ranks \[1\]", out), \
            "a stall warning names the absent rank\n" + out
        assert "root cause (named by the ranks' own diagnoses): rank 1 never entered all_reduce #1" \
            in out, out
        dumps = sorted(f for f in os.listdir(trace) if f.endswith(".json"))
        assert len(dumps) == 2, dumps  # rank 1's on the launcher's SIGTERM
        merged = subprocess.run([CLI, "trace", trace], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, timeout=60)
        assert "2 dumps merged" in merged.stdout, merged.stdout
        assert "ranks [1] never did" in merged.stdout, merged.stdout


def test_detail_fingerprints_check_every_op():
    code, out = launch(2, "ops_job.py", env={"LOCKSTEP_DEBUG": "DETAIL"})
    assert code == 0, out
    assert "collective fingerprints checked (LOCKSTEP_DEBUG=DETAIL)" in out, out


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2,
                    reason="needs 2 GPUs (scripts/gpu_check.sh runs the job on the GPU machine)")
def test_cuda_tensors_go_to_the_nccl_backend():
    code, out = launch(2, "cuda_job.py")
    assert code == 0, out
    assert "CUDA_OK rank=0" in out and "CUDA_OK rank=1" in out, out

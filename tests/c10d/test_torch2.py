"""The torch 2.x surface of the "lockstep" backend with real processes under `lockstep run`:
its newer ops against closed forms, FSDP2 against gloo, DTensor on a 2 x 2 DeviceMesh against
one-process training, and a DCP checkpoint resharded from 4 ranks to 2. CTest runs this file with
pytest (tests/CMakeLists.txt); test_backend.py has the helpers.
"""
import os
import re
import tempfile

import pytest
import torch

from test_backend import launch


@pytest.mark.parametrize("world", [2, 3, 4])
def test_torch2_ops_match_their_closed_forms(world):
    code, out = launch(world, "torch2_job.py")
    assert code == 0, out
    for r in range(world):
        assert re.search(rf"\[rank{r}\]: TORCH2_OK rank={r} checks=\d+ failed=0", out), out


def test_fsdp2_over_lockstep_trains_to_gloos_weights():
    with tempfile.TemporaryDirectory() as tmp:
        weights = {}
        for backend in ("gloo", "lockstep"):
            path = os.path.join(tmp, f"{backend}.pt")
            code, out = launch(2, "fsdp_job.py", "--backend", backend, "--out", path)
            assert code == 0, out
            weights[backend] = torch.load(path)
        assert sorted(weights["gloo"]) == sorted(weights["lockstep"])
        for name, value in weights["gloo"].items():
            diff = (value - weights["lockstep"][name]).abs().max().item()
            assert diff <= 1e-6, f"{name} differs by {diff}"


def test_dtensor_on_a_2x2_mesh_equals_one_process_training():
    code, out = launch(4, "dtensor_job.py")
    assert code == 0, out
    for r in range(4):
        assert f"DTENSOR_OK rank={r}" in out, out


def test_dcp_saved_at_world_4_loads_bit_equal_at_world_2():
    with tempfile.TemporaryDirectory() as where:
        code, out = launch(4, "dcp_job.py", "save", where)
        assert code == 0, out
        assert out.count("DCP_SAVED") == 4, out
        code, out = launch(2, "dcp_job.py", "load", where)
        assert code == 0, out
        assert re.search(r"DCP_LOADED rank=0 tensors=\d+", out), out
        assert "DCP_LOADED rank=1" in out, out

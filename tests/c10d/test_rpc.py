"""lockstep.rpc from Python, tested with real processes: torch 2.x (the project's .venv), the
package from the build tree (PYTHONPATH), `lockstep run` (LOCKSTEP_CLI) for the call forms, and
plain env:// processes for a worker killed mid-call (the launcher would end the job when a rank
dies). CTest runs this file with pytest (tests/CMakeLists.txt)."""
import os
import re
import signal
import socket
import subprocess
import sys

import pytest

from test_backend import HERE, job_env, launch


@pytest.mark.parametrize("world", [2, 4])
def test_rpc_every_call_form_matches_its_closed_form(world):
    code, out = launch(world, "rpc_job.py", "forms")
    assert code == 0, out
    for r in range(world):
        assert re.search(rf"\[rank{r}\]: FORMS_OK rank={r}", out), out


def test_rpc_worker_killed_mid_call_fails_its_futures_and_shutdown_counts_it_dead():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for r in range(3):
        env = job_env({"RANK": str(r), "WORLD_SIZE": "3", "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": str(port), "LOCKSTEP_SECRET": "a test secret"})
        procs.append(subprocess.Popen([sys.executable, os.path.join(HERE, "rpc_job.py"), "killed"],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert procs[1].returncode == -signal.SIGKILL, outs[1]
    assert "PEER_DIED in" in outs[0], outs[0]
    for r in (0, 2):
        assert procs[r].returncode == 0, outs[r]
        assert f"KILLED_OK rank={r}" in outs[r], outs[r]

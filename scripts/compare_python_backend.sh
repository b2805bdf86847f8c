#!/usr/bin/env bash
# Optional: torch.distributed from Python over "lockstep" against "gloo", side by side in one run
# (scripts/compare_python_backend.py): all_reduce at 4 KiB / 1 MiB / 64 MiB and torch DDP on the
# main job's CNN. Extra arguments go to compare_python_backend.py (e.g. --rounds 5).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
lockstep_setup lockstep_cli lockstep_python
# The project's Python environment (scripts/setup.sh), with its pinned torch.
exec "$LOCKSTEP_VENV/bin/python" "$LOCKSTEP_ROOT/scripts/compare_python_backend.py" "$LOCKSTEP_BUILD_DIR" "$@"

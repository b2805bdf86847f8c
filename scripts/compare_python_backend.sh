#!/usr/bin/env bash
# Optional: torch.distributed from Python over "lockstep" against "gloo", side by side in one run
# (scripts/compare_python_backend.py): all_reduce at 4 KiB / 1 MiB / 64 MiB and torch DDP on the
# main job's CNN. Extra arguments go to compare_python_backend.py (e.g. --rounds 5).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
lockstep_setup lockstep_cli lockstep_python
# Debian's interpreter: python3-torch installs for it, not for any other python3 on PATH.
exec /usr/bin/python3 "$LOCKSTEP_ROOT/scripts/compare_python_backend.py" "$LOCKSTEP_BUILD_DIR" "$@"

#!/usr/bin/env bash
# Optional: all_reduce over 2 local ranks, lockstep against torch.distributed's Gloo, side by side
# in one run (scripts/compare_gloo.py), with the project's pinned torch (scripts/requirements.txt,
# in .venv). Extra arguments go to compare_gloo.py (e.g. --max-bytes 1048576).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
lockstep_setup lockstep_cli
# The project's Python environment (scripts/setup.sh), with its pinned torch.
exec "$LOCKSTEP_VENV/bin/python" "$LOCKSTEP_ROOT/scripts/compare_gloo.py" "$LOCKSTEP_BUILD_DIR/lockstep" "$@"

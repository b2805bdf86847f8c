#!/usr/bin/env bash
# Optional: the main job's training throughput, lockstep against PyTorch DDP over gloo, at world 1
# and 2, side by side in one run (scripts/compare_torch_ddp.py), with the project's pinned torch
# (scripts/requirements.txt, in .venv). Extra arguments go to compare_torch_ddp.py (e.g. --steps
# 500 --rounds 3).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
lockstep_setup lockstep_cli train_fashion_mnist
# The project's Python environment (scripts/setup.sh), with its pinned torch.
exec "$LOCKSTEP_VENV/bin/python" "$LOCKSTEP_ROOT/scripts/compare_torch_ddp.py" "$LOCKSTEP_BUILD_DIR" "$@"

#!/usr/bin/env bash
# Optional: the main job's training throughput, lockstep against PyTorch DDP over gloo, at world 1
# and 2, side by side in one run (scripts/compare_torch_ddp.py). Installs Debian's python3-torch
# when missing. Extra arguments go to compare_torch_ddp.py (e.g. --steps 500 --rounds 3).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
LOCKSTEP_APT_PACKAGES+=(python3 python3-torch python3-numpy)
lockstep_setup lockstep_cli train_fashion_mnist
# Debian's interpreter: python3-torch installs for it, not for any other python3 on PATH.
exec /usr/bin/python3 "$LOCKSTEP_ROOT/scripts/compare_torch_ddp.py" "$LOCKSTEP_BUILD_DIR" "$@"

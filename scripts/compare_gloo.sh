#!/usr/bin/env bash
# Optional: all_reduce over 2 local ranks, lockstep against torch.distributed's Gloo, side by side
# in one run (scripts/compare_gloo.py). Installs Debian's python3-torch when missing. Extra
# arguments go to compare_gloo.py (e.g. --max-bytes 1048576).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
LOCKSTEP_APT_PACKAGES+=(python3 python3-torch)
lockstep_setup lockstep_cli
# Debian's interpreter: python3-torch installs for it, not for any other python3 on PATH.
exec /usr/bin/python3 "$LOCKSTEP_ROOT/scripts/compare_gloo.py" "$LOCKSTEP_BUILD_DIR/lockstep" "$@"

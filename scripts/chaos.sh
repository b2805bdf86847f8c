#!/usr/bin/env bash
# The chaos run of the main job (scripts/chaos.py): trains train_fashion_mnist under `lockstep run
# --max-restarts` while SIGKILLing its ranks at random moments, in the middle of a checkpoint and
# inside a collective, for plain DDP, ZeRO-1, ZeRO-2 and uneven shares (Join), and checks that the
# final weights equal an uninterrupted run's bit for bit. Builds what it needs first (installing
# missing Debian packages). Arguments go to chaos.py (e.g. --kills 10 --modes ddp --work DIR).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
lockstep_setup lockstep_cli train_fashion_mnist
exec "$LOCKSTEP_BASE_PYTHON" "$LOCKSTEP_ROOT/scripts/chaos.py" --build "$LOCKSTEP_BUILD_DIR" "$@"

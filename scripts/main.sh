#!/usr/bin/env bash
# The main job: builds lockstep (installing missing Debian packages first) and runs the
# all_reduce benchmark over 2 local ranks, 4 B to 64 MiB, float32. Extra arguments go to
# `lockstep bench` (e.g. scripts/main.sh --op all).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
lockstep_setup lockstep_cli
exec "$LOCKSTEP_BUILD_DIR/lockstep" bench --nranks 2 --op all_reduce "$@"

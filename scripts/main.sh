#!/usr/bin/env bash
# The main job: builds lockstep (installing missing Debian packages first) and trains a small CNN on
# Fashion-MNIST with DistributedDataParallel over 2 local ranks (the shared-memory backend), 3
# epochs, printing the train loss, test accuracy and throughput after each epoch. Checkpoints go to
# the build folder. Extra arguments go to train_fashion_mnist (e.g. scripts/main.sh --epochs 5
# --resume); see its --help.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
lockstep_setup lockstep_cli train_fashion_mnist
exec "$LOCKSTEP_BUILD_DIR/lockstep" run --standalone --nproc-per-node 2 -- \
  "$LOCKSTEP_BUILD_DIR/train_fashion_mnist" --checkpoint-dir "$LOCKSTEP_BUILD_DIR/checkpoints" "$@"

#!/usr/bin/env bash
# `pip install .`, `pip wheel .` and the sdist, each in a fresh virtual environment that has the
# project's torch, then a 2-rank DDP job under the installed `lockstep run`
# (tests/install/pip_install.sh --sdist: CTest's pip_install without the sdist's second build).
# Work folder: <build>/pip_check.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
lockstep_install_packages
lockstep_install_python
exec bash "$LOCKSTEP_ROOT/tests/install/pip_install.sh" "$LOCKSTEP_ROOT" "$LOCKSTEP_BUILD_DIR/pip_check" \
  "$LOCKSTEP_VENV/bin/python" --sdist

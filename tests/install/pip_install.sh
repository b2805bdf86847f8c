#!/bin/bash
# `pip install .` as a PyTorch user does it, in a fresh virtual environment that already has
# torch: the extension builds against that torch (under pip's build isolation), `import lockstep`
# registers the backend, the `lockstep` command is on the environment's PATH, and a 2-rank DDP
# script trains under it. Then `pip wheel .` (the same build folder, so no second compile) and an
# sdist: the wheel holds the module and the command; the sdist holds every file the build reads,
# checked by configuring it. scripts/pip_check.sh also builds and installs the sdist itself.
#   tests/install/pip_install.sh SOURCE_DIR WORK_DIR PYTHON
# PYTHON is the interpreter whose torch the fresh environment sees (the project's .venv): a .pth
# file adds its site-packages, as if the user had installed torch there (no second 3 GiB download).
set -euo pipefail
src=$1 work=$2 torch_python=$3
[ -x "$torch_python" ] || { echo "pip_install: no interpreter '$torch_python'"; exit 77; }
"$torch_python" -c "import torch" 2>/dev/null || { echo "pip_install: no torch for $torch_python"; exit 77; }

rm -rf "$work/venv" "$work/dist" "$work/sdist"
mkdir -p "$work"
base=$("$torch_python" -c "import sys; print(sys._base_executable)")
"$base" -m venv "$work/venv"
py=$work/venv/bin/python
site=$("$py" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
"$torch_python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" > "$site/torch-from-user.pth"
"$py" -c "import torch; print('fresh environment sees torch', torch.__version__)"
! "$py" -c "import lockstep" 2>/dev/null || { echo "FAIL: lockstep importable before pip install"; exit 1; }

step() { echo; echo "== $*"; }
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
# One persistent build folder: `pip wheel .` after `pip install .` recompiles nothing.
build_dir=$work/skbuild
step "pip install $src (build isolation: scikit-build-core from the registry, torch the user's)"
"$py" -m pip install -v -C build-dir="$build_dir" "$src" > "$work/pip_install.log" 2>&1 \
  || { tail -50 "$work/pip_install.log"; echo "FAIL: pip install"; exit 1; }
grep -E "lockstep: LibTorch .* from" "$work/pip_install.log" | sed 's/^ *//'
grep -q "lockstep: LibTorch $("$torch_python" -c 'import torch; print(torch.__version__)') from $py" \
  "$work/pip_install.log" || { echo "FAIL: the build did not use the environment's torch"; exit 1; }

step "import lockstep, and the lockstep command on the environment's PATH"
"$py" -c "
import lockstep, torch.distributed as d
assert lockstep.__file__.startswith('$site'), lockstep.__file__
assert 'LOCKSTEP' in d.Backend._plugins
print('import lockstep: ok from', lockstep.__file__)"
[ -x "$work/venv/bin/lockstep" ] || { echo "FAIL: no lockstep in $work/venv/bin"; exit 1; }
PATH="$work/venv/bin:$PATH" lockstep --version

step "a 2-rank DDP job under the installed lockstep run"
out=$work/ddp_weights.pt
env -u PYTHONPATH -u RANK -u WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT \
  PATH="$work/venv/bin:$PATH" OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1 LOCKSTEP_TIMEOUT=60 \
  lockstep run --standalone --nproc-per-node 2 --python "$py" \
  "$src/tests/c10d/ddp_job.py" --backend lockstep --out "$out" --steps 4
[ -s "$out" ] || { echo "FAIL: the DDP job saved no weights"; exit 1; }
echo "ddp: ok, weights saved"

step "pip wheel $src (the same build folder)"
"$py" -m pip wheel --no-deps -C build-dir="$build_dir" -w "$work/dist" "$src" > "$work/pip_wheel.log" 2>&1 \
  || { tail -50 "$work/pip_wheel.log"; echo "FAIL: pip wheel"; exit 1; }
wheel=$(ls "$work"/dist/lockstep-*.whl)
"$py" - "$wheel" <<'EOF'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
need = ["lockstep/__init__.py", "lockstep/_lockstep.", ".data/scripts/lockstep",
        ".data/data/share/lockstep/explain_signatures.txt"]
missing = [n for n in need if not any(n in x for x in names)]
assert not missing, f"the wheel lacks {missing}: {names}"
print("wheel: ok,", sys.argv[1].rsplit("/", 1)[-1], "holds", len(names), "files")
EOF

step "sdist: every file the build reads"
"$py" - "$src" "$work/sdist" <<'EOF'
import os, sys
os.chdir(sys.argv[1])
from scikit_build_core.build import build_sdist
print("sdist:", build_sdist(sys.argv[2]))
EOF
tar -xzf "$work"/sdist/lockstep-*.tar.gz -C "$work/sdist"
unpacked=$(ls -d "$work"/sdist/lockstep-*/)
cmake -S "$unpacked" -B "$work/sdist/configure" -G Ninja -DLOCKSTEP_PYTHON_EXECUTABLE="$py" \
  -DLOCKSTEP_BUILD_TESTS=OFF > "$work/sdist_configure.log" 2>&1 \
  || { tail -30 "$work/sdist_configure.log"; echo "FAIL: the sdist does not configure"; exit 1; }
grep -q "lockstep: Python package for" "$work/sdist_configure.log" \
  || { echo "FAIL: the sdist's configure found no torch"; exit 1; }
echo "sdist: ok, configures with the Python package"
echo
echo "pip_install: ok"

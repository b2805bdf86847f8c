#!/bin/bash
# `pip install .` as a PyTorch user does it, in a fresh virtual environment that already has
# torch: the extension builds against that torch (under pip's build isolation), `import lockstep`
# registers the backend, the `lockstep` command is on the environment's PATH, and a 2-rank DDP
# script trains under it. Then `pip wheel .` (the same build folder, so no second compile) and an
# sdist: the wheel holds the module and the command; the sdist holds every file the build reads,
# checked by configuring it. With --sdist (scripts/pip_check.sh) it also installs the sdist into a
# second fresh environment, a whole second build, and trains there too.
#   tests/install/pip_install.sh SOURCE_DIR WORK_DIR PYTHON [--sdist]
# PYTHON is the interpreter whose torch the fresh environment sees (the project's .venv): a .pth
# file adds its site-packages, as if the user had installed torch there (no second 3 GiB download).
set -euo pipefail
src=$1 work=$2 torch_python=$3 from_sdist=${4:-}
[ -x "$torch_python" ] || { echo "pip_install: no interpreter '$torch_python'"; exit 77; }
"$torch_python" -c "import torch" 2>/dev/null || { echo "pip_install: no torch for $torch_python"; exit 77; }

rm -rf "$work/venv" "$work/venv-sdist" "$work/dist" "$work/sdist"
mkdir -p "$work"
base=$("$torch_python" -c "import sys; print(sys._base_executable)")
# fresh_env DIR: a new virtual environment that sees the user's torch and has no lockstep.
fresh_env() {
  "$base" -m venv "$1"
  local site
  site=$("$1/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  "$torch_python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" > "$site/torch-from-user.pth"
  "$1/bin/python" -c "import torch; print('fresh environment sees torch', torch.__version__)"
  ! "$1/bin/python" -c "import lockstep" 2>/dev/null || { echo "FAIL: lockstep importable before pip install"; exit 1; }
}
# ddp_job ENV: 2 ranks of torch DDP under ENV's own lockstep run, over the lockstep backend.
ddp_job() {
  local out=$work/ddp_weights.pt
  rm -f "$out"
  env -u PYTHONPATH -u RANK -u WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT \
    PATH="$1/bin:$PATH" OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1 LOCKSTEP_TIMEOUT=60 \
    lockstep run --standalone --nproc-per-node 2 --python "$1/bin/python" \
    "$src/tests/c10d/ddp_job.py" --backend lockstep --out "$out" --steps 4
  [ -s "$out" ] || { echo "FAIL: the DDP job saved no weights"; exit 1; }
  echo "ddp: ok, weights saved"
}
fresh_env "$work/venv"
py=$work/venv/bin/python
site=$("$py" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")

step() { echo; echo "== $*"; }
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
# One persistent build folder: `pip wheel .` after `pip install .` recompiles nothing.
build_dir=$work/skbuild
step "pip install $src (build isolation: scikit-build-core from the registry, torch the user's)"
"$py" -m pip install -v --config-settings=build-dir="$build_dir" "$src" > "$work/pip_install.log" 2>&1 \
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
ddp_job "$work/venv"

step "pip wheel $src (the same build folder)"
"$py" -m pip wheel --no-deps --config-settings=build-dir="$build_dir" -w "$work/dist" "$src" > "$work/pip_wheel.log" 2>&1 \
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
if [ "$from_sdist" = --sdist ]; then
  step "pip install the sdist into another fresh environment (a second build)"
  fresh_env "$work/venv-sdist"
  "$work/venv-sdist/bin/python" -m pip install "$work"/sdist/lockstep-*.tar.gz \
    > "$work/pip_sdist.log" 2>&1 || { tail -50 "$work/pip_sdist.log"; echo "FAIL: pip install sdist"; exit 1; }
  ddp_job "$work/venv-sdist"
fi
echo
echo "pip_install: ok"

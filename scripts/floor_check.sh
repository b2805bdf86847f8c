#!/usr/bin/env bash
# Checks that every torch-facing translation unit (src/c10d, src/torch, the LibTorch examples)
# still compiles against the oldest supported torch (LOCKSTEP_TORCH_FLOOR in
# cmake/LockstepTorch.cmake; by default its newest patch release, 2.4.1): downloads that wheel
# (about 800 MB, once, into <build>/torch_floor) without installing it, and compiles against its
# headers with -fsyntax-only (no link: LibTorch's libraries are the tested torch's job).
#   scripts/floor_check.sh [TORCH_VERSION]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
version=${1:-2.4.1}
lockstep_setup lockstep_python lockstep_torch  # the generated layer include folders
dir=$LOCKSTEP_BUILD_DIR/torch_floor/$version
py=$LOCKSTEP_VENV/bin/python
tag=$("$py" -c "import sys; print(f'{sys.version_info.major}.{sys.version_info.minor}')")
if [[ ! -d "$dir/torch/include" ]]; then
  mkdir -p "$dir"
  "$py" -m pip download -q "torch==$version" --no-deps --python-version "$tag" \
    --only-binary=:all: -d "$dir"
  (cd "$dir" && "$py" -m zipfile -e torch-"$version"-*.whl . >/dev/null)
  rm -f "$dir"/torch-"$version"-*.whl
fi
inc=$dir/torch/include
pyinc=$("$py" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
cuda_inc=()  # torch_stream.h reads the current stream through c10/cuda, with CUDA's headers
[[ -d "${CUDA_HOME:-/usr/local/cuda}/include" ]] && cuda_inc=(-DLOCKSTEP_TORCH_CUDA -isystem "${CUDA_HOME:-/usr/local/cuda}/include")
failed=0 count=0
for f in "$LOCKSTEP_ROOT"/src/c10d/*.cc "$LOCKSTEP_ROOT"/src/torch/*.cc \
         "$LOCKSTEP_ROOT"/examples/train_fashion_mnist/*.cc; do
  count=$((count + 1))
  if ! g++ -std=c++20 -fsyntax-only -DLOCKSTEP_C10D_HAS_NCCL "${cuda_inc[@]}" \
       -I"$LOCKSTEP_ROOT/include" \
       -I"$LOCKSTEP_ROOT/src" -I"$LOCKSTEP_BUILD_DIR/layers/c10d" -I"$LOCKSTEP_BUILD_DIR/layers/torch" \
       -isystem "$pyinc" -isystem "$inc" -isystem "$inc/torch/csrc/api/include" "$f" \
       > "$dir/$(basename "$f").log" 2>&1; then
    echo "floor_check: ${f#$LOCKSTEP_ROOT/} does not compile against torch $version:"
    grep -m5 "error" "$dir/$(basename "$f").log" | sed 's/^/  /'
    failed=$((failed + 1))
  fi
done
echo "floor_check: $((count - failed)) of $count torch-facing files compile against torch $version"
((failed == 0))

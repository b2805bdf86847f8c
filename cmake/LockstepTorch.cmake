# Finds PyTorch the way its users install it: from a Python interpreter's `torch` package (the
# registry's wheel), whose LibTorch CMake files are at torch.utils.cmake_prefix_path. Sets:
#   LOCKSTEP_PYTHON_EXECUTABLE  the interpreter (cache; default: the one scikit-build-core runs,
#                               else <source>/.venv/bin/python, else python3 from PATH)
#   LOCKSTEP_TORCH_VERSION      torch.__version__ of that interpreter ("" when it has no torch)
#   LOCKSTEP_TORCH_NCCL_DIR     the NCCL that torch's CUDA wheel loads (nvidia-nccl's folder, or
#                               ""): lockstep's nccl backend must link the same one, for one
#                               process cannot load two libnccl.so.2 (CMakeLists.txt looks there first)
#   LOCKSTEP_TORCH_CMAKE_DIR    that torch's TorchConfig.cmake folder (a consumer's Torch_DIR)
#   Torch_FOUND, TORCH_LIBRARIES, TORCH_INCLUDE_DIRS, TORCH_INSTALL_PREFIX  (find_package(Torch))
# An explicit -DTorch_DIR or CMAKE_PREFIX_PATH still wins: the interpreter's path is appended.
#
# Supported: torch 2.4 and newer (docs/python.md). The floor is checked here, so that an old torch
# fails at configure time with its version, not with a compile error in src/c10d.
set(LOCKSTEP_TORCH_FLOOR 2.4)

if(DEFINED Python_EXECUTABLE AND NOT DEFINED CACHE{LOCKSTEP_PYTHON_EXECUTABLE})
  set(_lockstep_python_default ${Python_EXECUTABLE})  # pip install . (scikit-build-core)
elseif(EXISTS ${PROJECT_SOURCE_DIR}/.venv/bin/python)
  set(_lockstep_python_default ${PROJECT_SOURCE_DIR}/.venv/bin/python)  # scripts/setup.sh's
else()
  find_program(_lockstep_python_default NAMES python3 python)
endif()
set(LOCKSTEP_PYTHON_EXECUTABLE ${_lockstep_python_default} CACHE FILEPATH
  "The Python interpreter whose torch lockstep builds against (LibTorch and the Python package)")

# Under pip's build isolation the interpreter is the target environment's, but PYTHONPATH hides
# that environment's packages behind the isolated ones: then ask again without it, so that the
# extension is built against the torch the user has, not a second one downloaded for the build.
set(LOCKSTEP_TORCH_VERSION "")
set(LOCKSTEP_TORCH_NCCL_DIR "")
set(_lockstep_torch_query [=[
import torch, torch.utils
print(torch.__version__)
print(torch.utils.cmake_prefix_path)
try:
    import nvidia.nccl
    print(list(nvidia.nccl.__path__)[0])
except ImportError:
    print("")
]=])
if(LOCKSTEP_PYTHON_EXECUTABLE)
  execute_process(COMMAND ${LOCKSTEP_PYTHON_EXECUTABLE} -c "${_lockstep_torch_query}"
    RESULT_VARIABLE _lockstep_torch_rc OUTPUT_VARIABLE _lockstep_torch_out ERROR_QUIET
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _lockstep_torch_rc EQUAL 0 AND DEFINED ENV{PYTHONPATH})
    execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=PYTHONPATH --unset=PYTHONNOUSERSITE
              ${LOCKSTEP_PYTHON_EXECUTABLE} -c "${_lockstep_torch_query}"
      RESULT_VARIABLE _lockstep_torch_rc OUTPUT_VARIABLE _lockstep_torch_out ERROR_QUIET
      OUTPUT_STRIP_TRAILING_WHITESPACE)
  endif()
  if(_lockstep_torch_rc EQUAL 0)
    string(REPLACE "\n" ";" _lockstep_torch_out "${_lockstep_torch_out}")
    list(GET _lockstep_torch_out 0 LOCKSTEP_TORCH_VERSION)
    list(GET _lockstep_torch_out 1 _lockstep_torch_prefix)
    list(APPEND CMAKE_PREFIX_PATH ${_lockstep_torch_prefix})
    set(LOCKSTEP_TORCH_CMAKE_DIR ${_lockstep_torch_prefix}/Torch)  # for consumers' Torch_DIR
    list(LENGTH _lockstep_torch_out _lockstep_torch_lines)
    if(_lockstep_torch_lines GREATER 2)
      list(GET _lockstep_torch_out 2 LOCKSTEP_TORCH_NCCL_DIR)
    endif()
  endif()
endif()

if(LOCKSTEP_TORCH_VERSION AND LOCKSTEP_TORCH_VERSION VERSION_LESS LOCKSTEP_TORCH_FLOOR)
  message(FATAL_ERROR "lockstep: ${LOCKSTEP_PYTHON_EXECUTABLE} has torch ${LOCKSTEP_TORCH_VERSION}; "
                      "lockstep needs torch ${LOCKSTEP_TORCH_FLOOR} or newer (scripts/setup.sh "
                      "installs the tested one into .venv), or -DLOCKSTEP_WITH_TORCH=OFF")
endif()

# find_package(Torch), after the CUDA and NCCL checks of CMakeLists.txt.
macro(lockstep_find_torch)
  # The registry's wheel is a CUDA build: its Caffe2 config looks for the CUDA toolkit, and asks
  # a GPU for the architectures to compile for. Without a GPU, name one so that it need not (only
  # host code of lockstep includes CUDA headers). lockstepConfig.cmake does the same.
  if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST}
     AND NOT EXISTS /dev/nvidia0)
    set(ENV{TORCH_CUDA_ARCH_LIST} "9.0")
  endif()
  find_package(Torch QUIET)
  if(Torch_FOUND)
    message(STATUS "lockstep: LibTorch ${LOCKSTEP_TORCH_VERSION} from ${LOCKSTEP_PYTHON_EXECUTABLE}")
  else()
    message(STATUS "lockstep: no torch for ${LOCKSTEP_PYTHON_EXECUTABLE}; lockstep_torch and the "
                   "Python package are not built (scripts/setup.sh installs torch into .venv)")
  endif()
endmacro()

# A target that includes src/torch/torch_stream.h: with a CUDA build of torch, it reads torch's
# current CUDA stream through c10/cuda (LOCKSTEP_TORCH_CUDA), which needs CUDA's runtime headers.
function(lockstep_torch_cuda target)
  if(TORCH_CUDA_LIBRARIES)
    target_compile_definitions(${target} PRIVATE LOCKSTEP_TORCH_CUDA)
    if(CUDAToolkit_INCLUDE_DIRS)
      target_include_directories(${target} SYSTEM PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
    endif()
  endif()
endfunction()

# Installs lockstep into a scratch prefix and builds a separate consumer project against it with
# find_package(lockstep) and lockstep::lockstep, then runs the consumer. Fails loudly at the first
# step that goes wrong, with that step's output.
#
#   cmake -DSOURCE_DIR=<repo> -DWORK_DIR=<scratch> -DGENERATOR=<generator>
#         [-DBUILD_DIR=<configured lockstep build tree>] [-DPYTHON=<interpreter with torch>]
#         [-DTORCH_DIR=<its TorchConfig.cmake folder>] -P check_install.cmake
#
# With BUILD_DIR (as CTest passes it) the existing build tree is brought up to date and installed,
# which takes seconds; without it lockstep is configured and built from scratch, tests off.

cmake_minimum_required(VERSION 3.25)

foreach(var SOURCE_DIR WORK_DIR GENERATOR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "check_install.cmake: pass -D${var}=...")
  endif()
endforeach()

set(prefix "${WORK_DIR}/prefix")
set(consumer_build "${WORK_DIR}/consumer-build")
file(REMOVE_RECURSE "${prefix}" "${consumer_build}")

# run_step(<what> <command...>): runs the command; on failure prints what, the exit code and the
# command's output, and stops.
function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " command "${ARGN}")
    message(FATAL_ERROR "install check: ${what} failed (exit ${rc})\n  command: ${command}\n${out}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

# run_consumer(<what> <program> <success line>): runs the program, which must print the line.
function(run_consumer what program success)
  run_step("running ${what}" "${program}")
  if(NOT step_output MATCHES "${success}")
    message(FATAL_ERROR "install check: ${what} ran but did not report success:\n${step_output}")
  endif()
  message(STATUS "install check: ${step_output}")
endfunction()

if(DEFINED BUILD_DIR AND EXISTS "${BUILD_DIR}/CMakeCache.txt")
  set(lockstep_build "${BUILD_DIR}")
  # Everything `cmake --install` installs: the core, the CLI and the components this build has.
  file(READ "${BUILD_DIR}/lockstep_components.txt" components)
  string(STRIP "${components}" components)
  set(targets lockstep lockstep_cli)
  foreach(component IN LISTS components)
    if(component STREQUAL "torch")
      list(APPEND targets lockstep_torch)
    else()
      list(APPEND targets lockstep_${component}_backend)
    endif()
  endforeach()
  if(EXISTS "${lockstep_build}/python")  # the Python package is part of this build
    list(APPEND targets lockstep_python)
  endif()
  run_step("building lockstep in ${lockstep_build}"
    ${CMAKE_COMMAND} --build "${lockstep_build}" --target ${targets})
else()
  set(lockstep_build "${WORK_DIR}/lockstep-build")
  run_step("configuring lockstep"
    ${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${lockstep_build}" -G "${GENERATOR}"
      -DCMAKE_BUILD_TYPE=Release -DLOCKSTEP_BUILD_TESTS=OFF)
  run_step("building lockstep" ${CMAKE_COMMAND} --build "${lockstep_build}")
endif()
run_step("installing lockstep into ${prefix}"
  ${CMAKE_COMMAND} --install "${lockstep_build}" --prefix "${prefix}")

run_step("configuring the consumer project"
  ${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/install/consumer" -B "${consumer_build}"
    -G "${GENERATOR}" -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=${prefix}"
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)

# The package must come from the scratch prefix, not from a system-wide install.
file(STRINGS "${consumer_build}/CMakeCache.txt" found_dir REGEX "^lockstep_DIR:")
string(REGEX REPLACE "^lockstep_DIR:[A-Z]+=" "" found_dir "${found_dir}")
string(FIND "${found_dir}" "${prefix}/" at)
if(NOT at EQUAL 0)
  message(FATAL_ERROR "install check: find_package(lockstep) used '${found_dir}', "
                      "not the package installed under ${prefix}")
endif()

run_step("building the consumer project" ${CMAKE_COMMAND} --build "${consumer_build}")
run_consumer("the consumer" "${consumer_build}/lockstep_consumer" "lockstep consumer: ok")

# The core alone links no MPI, CUDA, NCCL or LibTorch library: those come with the components.
run_step("listing the consumer's shared libraries" ldd "${consumer_build}/lockstep_consumer")
string(REGEX MATCHALL "lib(mpi|open-pal|open-rte|nccl|cudart|cuda|torch|c10)[^ ]*" heavy
  "${step_output}")
if(heavy)
  message(FATAL_ERROR "install check: a program that links only lockstep::lockstep links "
                      "${heavy}:\n${step_output}")
endif()

# The torch component: a LibTorch program with lockstep::torch's DDP, built against the package.
if("torch" IN_LIST components)
  set(torch_build "${WORK_DIR}/torch-consumer-build")
  file(REMOVE_RECURSE "${torch_build}")
  run_step("configuring the LibTorch consumer project"
    ${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/install/torch_consumer" -B "${torch_build}"
      -G "${GENERATOR}" -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=${prefix}"
      "-DTorch_DIR=${TORCH_DIR}" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
  run_step("building the LibTorch consumer project" ${CMAKE_COMMAND} --build "${torch_build}")
  run_consumer("the LibTorch consumer" "${torch_build}/lockstep_torch_consumer"
    "lockstep torch consumer: ok")
  file(REMOVE_RECURSE "${torch_build}")
endif()

# The Python package, where built: installed under lib/python3.X/dist-packages (where Debian's
# python3 looks under /usr/local), and importable from there, registering the backend.
file(GLOB python_packages "${prefix}/lib/python3*/dist-packages/lockstep/__init__.py")
if(EXISTS "${lockstep_build}/python")
  if(NOT python_packages)
    message(FATAL_ERROR "install check: the Python package is built but was not installed under "
                        "${prefix}/lib/python3.X/dist-packages")
  endif()
  list(GET python_packages 0 init)
  get_filename_component(package_dir "${init}" DIRECTORY)
  get_filename_component(site_dir "${package_dir}" DIRECTORY)
  # (Python statements on separate lines: a ';' would split the CMake argument.)
  # PYTHON_PRELOAD: the sanitizer runtimes a sanitized build's extension needs loaded first.
  set(python ${PYTHON})
  if(PYTHON_PRELOAD)
    set(python ${CMAKE_COMMAND} -E env LD_PRELOAD=${PYTHON_PRELOAD} ${PYTHON})
  endif()
  run_step("importing the installed Python package" ${python} -c
    "import sys\nsys.path.insert(0, '${site_dir}')\nimport lockstep, torch.distributed as d\nassert lockstep.__file__.startswith('${site_dir}')\nassert 'LOCKSTEP' in d.Backend._plugins\nprint('python package: ok, backend lockstep registered from', lockstep.__file__)")
  message(STATUS "install check: ${step_output}")
endif()
file(REMOVE_RECURSE "${prefix}" "${consumer_build}")

# Layers: each source folder of src/ is one layer, built as its own target that sees only its own
# headers and those of the layers it links (docs/architecture.md has the picture).
#
# lockstep_layer(<name> DIRS <folders of src/> [PUBLIC <folders of include/lockstep/>]
#                [DEPS <layers>] (SOURCES <files> [COMPONENT] | VIEW_FOR <target>))
#
# makes the include view <build>/layers/<name>: symbolic links to the layer's own folders and to
# those of every layer below it (DEPS, transitively), and nothing else. The layer's target
# compiles with that view as its only project include directory, so an #include of a layer that
# is not below it fails to compile. With SOURCES the target is the OBJECT library
# lockstep_<name>, whose link list is DEPS (the objects end up in the lockstep archive, or with
# COMPONENT in an archive of their own, the optional component lockstep::<name>). With
# VIEW_FOR it is an existing target above the library (lockstep_torch, the CLI, the Python
# module), which links the lockstep archive itself.
function(lockstep_layer name)
  cmake_parse_arguments(L "COMPONENT" "VIEW_FOR" "DIRS;PUBLIC;DEPS;SOURCES" ${ARGN})
  set(src_dirs ${L_DIRS})
  set(pub_dirs ${L_PUBLIC})
  foreach(dep IN LISTS L_DEPS)
    get_property(dep_src GLOBAL PROPERTY LOCKSTEP_LAYER_${dep}_SRC)
    get_property(dep_pub GLOBAL PROPERTY LOCKSTEP_LAYER_${dep}_PUB)
    get_property(known GLOBAL PROPERTY LOCKSTEP_LAYER_${dep}_DEFINED)
    if(NOT known)
      message(FATAL_ERROR "layer ${name}: unknown layer ${dep} (define the layers below it first)")
    endif()
    list(APPEND src_dirs ${dep_src})
    list(APPEND pub_dirs ${dep_pub})
  endforeach()
  list(REMOVE_DUPLICATES src_dirs)
  list(REMOVE_DUPLICATES pub_dirs)
  set_property(GLOBAL PROPERTY LOCKSTEP_LAYER_${name}_SRC ${src_dirs})
  set_property(GLOBAL PROPERTY LOCKSTEP_LAYER_${name}_PUB ${pub_dirs})
  set_property(GLOBAL PROPERTY LOCKSTEP_LAYER_${name}_DEFINED TRUE)

  set(view ${PROJECT_BINARY_DIR}/layers/${name})
  file(REMOVE_RECURSE ${view})
  foreach(dir IN LISTS src_dirs)
    get_filename_component(parent ${view}/${dir} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${dir} ${view}/${dir} SYMBOLIC)
  endforeach()
  foreach(dir IN LISTS pub_dirs)
    file(MAKE_DIRECTORY ${view}/lockstep)
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/include/lockstep/${dir} ${view}/lockstep/${dir} SYMBOLIC)
  endforeach()

  if(L_VIEW_FOR)
    target_include_directories(${L_VIEW_FOR} PRIVATE ${view})
    target_compile_features(${L_VIEW_FOR} PUBLIC cxx_std_20)
    return()
  endif()
  set(target lockstep_${name})
  add_library(${target} OBJECT ${L_SOURCES})
  target_include_directories(${target} PRIVATE ${view})
  target_compile_options(${target} PRIVATE ${LOCKSTEP_WARNINGS})
  target_compile_features(${target} PUBLIC cxx_std_20)
  if(LOCKSTEP_NATIVE)
    target_compile_options(${target} PRIVATE -march=native)
  endif()
  target_link_libraries(${target} PUBLIC Threads::Threads)
  foreach(dep IN LISTS L_DEPS)
    target_link_libraries(${target} PUBLIC lockstep_${dep})
  endforeach()
  if(L_COMPONENT)
    set_property(GLOBAL APPEND PROPERTY LOCKSTEP_COMPONENT_LAYERS ${name})
  else()
    set_property(GLOBAL APPEND PROPERTY LOCKSTEP_LAYERS ${name})
  endif()
endfunction()

# The layers' sources, in the folder's CMakeLists.txt: lockstep_sources(VAR a.cc b.cc ...) sets
# VAR to the files with the folder's path.
macro(lockstep_sources var)
  set(${var})
  foreach(file ${ARGN})
    list(APPEND ${var} ${CMAKE_CURRENT_SOURCE_DIR}/${file})
  endforeach()
endmacro()

# The peers `hpu-bench allreduce-proc` measures in the same run are programs
# of their own. hpu-bench finds them relative to itself: beside it in the
# build tree, in <libdir>/hpu where they are installed with it.
target_compile_definitions(hpu-bench PRIVATE HPU_BENCH_PEERS_FROM_BIN="${_hpu_bin_to_lib}/hpu")

# Open MPI (Debian libopenmpi-dev), when present: the first peer, under mpirun.
find_package(MPI COMPONENTS C QUIET)
if(MPI_C_FOUND)
  add_executable(hpu-bench-mpi ${PROJECT_SOURCE_DIR}/bench/mpi/allreduce_mpi.c)
  target_link_libraries(hpu-bench-mpi PRIVATE MPI::MPI_C)
  add_dependencies(hpu-bench hpu-bench-mpi)
  target_compile_definitions(hpu-bench PRIVATE HPU_BENCH_MPI="$<TARGET_FILE_NAME:hpu-bench-mpi>")
  install(TARGETS hpu-bench-mpi RUNTIME DESTINATION ${CMAKE_INSTALL_LIBDIR}/hpu)
endif()

# Gloo (Debian libgloo-dev), when present: the second peer, its ring
# allreduce over tcp.
find_package(Gloo CONFIG QUIET)
if(Gloo_FOUND AND TARGET gloo)
  add_executable(hpu-bench-gloo ${PROJECT_SOURCE_DIR}/bench/gloo/allreduce_gloo.cpp)
  target_link_libraries(hpu-bench-gloo PRIVATE gloo Threads::Threads)
  add_dependencies(hpu-bench hpu-bench-gloo)
  target_compile_definitions(hpu-bench PRIVATE HPU_BENCH_GLOO="$<TARGET_FILE_NAME:hpu-bench-gloo>")
  install(TARGETS hpu-bench-gloo RUNTIME DESTINATION ${CMAKE_INSTALL_LIBDIR}/hpu)
endif()

# OpenBLAS: the plain cblas_sgemm that `hpu-bench gemm` compares with.
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
target_link_libraries(hpu-bench PRIVATE PkgConfig::OPENBLAS)

# libhpu-trainer: `hpu-bench train` runs the Trainer's step.
target_link_libraries(hpu-bench PRIVATE hpu-trainer)
target_compile_options(hpu-bench PRIVATE -Wno-missing-field-initializers)

# libhpu with the profiler's hooks compiled out (HPU_NO_PROFILER), built into
# bench-noprof/ under the same soname: `hpu-bench train --profile` runs fits on
# it (through LD_LIBRARY_PATH) to measure what the hooks cost when the profiler
# is off. Only the files that call a hook are compiled again; the rest are
# libhpu's own objects. A file that calls a hook and is missing here makes
# this link fail (src/core/profiler.hpp).
set(HPU_PROFILER_HOOKS src/core/profiler src/api/memory_api src/device/stream src/device/device
    src/comm/communicator src/ops/op src/ops/matmul)
list(TRANSFORM HPU_PROFILER_HOOKS APPEND .cpp OUTPUT_VARIABLE hpu_hook_sources)
list(TRANSFORM hpu_hook_sources PREPEND ${PROJECT_SOURCE_DIR}/)
list(JOIN HPU_PROFILER_HOOKS "|/" hpu_hook_objects)
add_library(hpu-noprof SHARED ${hpu_hook_sources}
  "$<FILTER:$<TARGET_OBJECTS:hpu-objects>,EXCLUDE,(/${hpu_hook_objects})\\.cpp\\.o>")
foreach(property IN ITEMS INCLUDE_DIRECTORIES COMPILE_DEFINITIONS)
  set_property(TARGET hpu-noprof PROPERTY ${property} "$<TARGET_PROPERTY:hpu-objects,${property}>")
endforeach()
set_property(TARGET hpu-noprof PROPERTY LINK_LIBRARIES "$<TARGET_PROPERTY:hpu-objects,INTERFACE_LINK_LIBRARIES>")
foreach(property IN ITEMS LINK_OPTIONS LINK_DEPENDS)
  set_property(TARGET hpu-noprof PROPERTY ${property} "$<TARGET_PROPERTY:hpu,${property}>")
endforeach()
target_compile_definitions(hpu-noprof PRIVATE HPU_NO_PROFILER)
set_target_properties(hpu-noprof PROPERTIES OUTPUT_NAME hpu VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
  CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bench-noprof)
add_dependencies(hpu-bench hpu-noprof)
# hpu-bench finds it relative to itself: bench-noprof/ in the build tree, and
# <libdir>/hpu/bench-noprof where it is installed with hpu-bench.
install(TARGETS hpu-noprof LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/hpu/bench-noprof NAMELINK_SKIP)
target_compile_definitions(hpu-bench PRIVATE HPU_BENCH_NOPROF_FROM_BIN="${_hpu_bin_to_lib}/hpu/bench-noprof"
  HPU_BENCH_NOPROF_SONAME="$<TARGET_SONAME_FILE_NAME:hpu-noprof>")

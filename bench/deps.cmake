# Open MPI (Debian libopenmpi-dev), when present: the peer that
# `hpu-bench allreduce-proc` measures in the same run.
find_package(MPI COMPONENTS C QUIET)
if(MPI_C_FOUND)
  add_executable(hpu-bench-mpi ${PROJECT_SOURCE_DIR}/bench/mpi/allreduce_mpi.c)
  target_link_libraries(hpu-bench-mpi PRIVATE MPI::MPI_C)
  add_dependencies(hpu-bench hpu-bench-mpi)
  target_compile_definitions(hpu-bench PRIVATE HPU_BENCH_MPI="$<TARGET_FILE:hpu-bench-mpi>")
endif()

# Gloo (Debian libgloo-dev), when present: the second peer of
# `hpu-bench allreduce-proc`, its ring allreduce over tcp.
find_package(Gloo CONFIG QUIET)
if(Gloo_FOUND AND TARGET gloo)
  add_executable(hpu-bench-gloo ${PROJECT_SOURCE_DIR}/bench/gloo/allreduce_gloo.cpp)
  target_link_libraries(hpu-bench-gloo PRIVATE gloo Threads::Threads)
  add_dependencies(hpu-bench hpu-bench-gloo)
  target_compile_definitions(hpu-bench PRIVATE HPU_BENCH_GLOO="$<TARGET_FILE:hpu-bench-gloo>")
endif()

# OpenBLAS: the plain cblas_sgemm that `hpu-bench gemm` compares with.
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
target_link_libraries(hpu-bench PRIVATE PkgConfig::OPENBLAS)

# libhpu-trainer: `hpu-bench train` runs the Trainer's step.
target_link_libraries(hpu-bench PRIVATE hpu-trainer)
target_compile_options(hpu-bench PRIVATE -Wno-missing-field-initializers)

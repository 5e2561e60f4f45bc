# Kernel tests call libhpu's internal C++ functions, which the shared library
# does not export: compile the kernels (and the little they use) into the test.
# Included by <test>.cmake with `name` set to the test's name.
target_sources(test_${name} PRIVATE
  ${PROJECT_SOURCE_DIR}/src/kernels/cpu.cpp
  ${PROJECT_SOURCE_DIR}/src/kernels/convert_vec.cpp
  ${PROJECT_SOURCE_DIR}/src/kernels/cast.cpp
  ${PROJECT_SOURCE_DIR}/src/kernels/elementwise.cpp
  ${PROJECT_SOURCE_DIR}/src/kernels/elementwise_vec.cpp
  ${PROJECT_SOURCE_DIR}/src/kernels/optim.cpp
  ${PROJECT_SOURCE_DIR}/src/kernels/optim_vec.cpp
  ${PROJECT_SOURCE_DIR}/src/kernels/reduce.cpp
  ${PROJECT_SOURCE_DIR}/src/kernels/gemm.cpp
  ${PROJECT_SOURCE_DIR}/src/kernels/gemm_bf16.cpp
  ${PROJECT_SOURCE_DIR}/src/kernels/gemm_bf16_amx.cpp
  ${PROJECT_SOURCE_DIR}/src/kernels/gemm_f32.cpp
  ${PROJECT_SOURCE_DIR}/src/kernels/random.cpp
  ${PROJECT_SOURCE_DIR}/src/kernels/parallel.cpp
  ${PROJECT_SOURCE_DIR}/src/device/compute_budget.cpp
  ${PROJECT_SOURCE_DIR}/src/core/runtime.cpp
  ${PROJECT_SOURCE_DIR}/src/core/config.cpp
  ${PROJECT_SOURCE_DIR}/src/core/log.cpp
  ${PROJECT_SOURCE_DIR}/src/core/error.cpp)
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
target_link_libraries(test_${name} PRIVATE PkgConfig::OPENBLAS PkgConfig::JANSSON)
set_source_files_properties(${HPU_EXACT_FP_SOURCES} PROPERTIES COMPILE_OPTIONS -ffp-contract=off)
set_source_files_properties(${HPU_AMX_SOURCES} PROPERTIES COMPILE_OPTIONS "-mamx-tile;-mamx-bf16")

# GEMM runs on OpenBLAS (Debian's libopenblas-dev).
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
target_link_libraries(hpu-objects PUBLIC PkgConfig::OPENBLAS)

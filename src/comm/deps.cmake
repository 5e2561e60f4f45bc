# The tcp transport runs on libuv (Debian libuv1-dev).
pkg_check_modules(LIBUV REQUIRED IMPORTED_TARGET libuv)
target_link_libraries(hpu-objects PUBLIC PkgConfig::LIBUV)

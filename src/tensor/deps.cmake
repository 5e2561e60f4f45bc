# DLPack's header (Debian's libdlpack-dev, header only): the tensor layer's
# exports and imports (tensor/dlpack.hpp).
find_path(DLPACK_INCLUDE_DIR dlpack/dlpack.h)
if(NOT DLPACK_INCLUDE_DIR)
  message(FATAL_ERROR "dlpack/dlpack.h not found: install libdlpack-dev (scripts/deps)")
endif()
target_include_directories(hpu-objects PRIVATE ${DLPACK_INCLUDE_DIR})

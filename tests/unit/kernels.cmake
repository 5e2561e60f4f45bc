include(${CMAKE_CURRENT_SOURCE_DIR}/unit/kernel_sources.cmake)

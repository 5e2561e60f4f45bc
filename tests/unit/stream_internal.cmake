# Sticky errors, blocked streams and the compute budget need queued operations
# that fail or wait on the test's command; only libhpu's internal Stream API can
# queue those, and the shared library does not export it. So this test compiles
# the foundation (core, devices and their C API) into itself and uses that copy,
# with the kernels' thread pool (memory_api.cpp's row gathers run on it).
file(GLOB foundation_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/core/*.cpp ${PROJECT_SOURCE_DIR}/src/device/*.cpp)
target_sources(test_${name} PRIVATE ${foundation_sources} ${PROJECT_SOURCE_DIR}/src/api/api.cpp
               ${PROJECT_SOURCE_DIR}/src/api/device_api.cpp ${PROJECT_SOURCE_DIR}/src/api/memory_api.cpp
               ${PROJECT_SOURCE_DIR}/src/kernels/parallel.cpp)
target_link_libraries(test_${name} PRIVATE PkgConfig::JANSSON ${CMAKE_DL_LIBS})

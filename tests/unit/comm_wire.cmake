# White-box: the test compiles the sources of the process transports, the verbs
# transport with its test adapter, the collective algorithms (and the core they
# use) into itself to reach their internal classes. comm_verbs.cmake includes
# this file.
file(GLOB comm_algorithm_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/comm/algorithms/*.cpp)
target_sources(test_${name} PRIVATE ${comm_algorithm_sources}
  ${PROJECT_SOURCE_DIR}/src/comm/algorithm.cpp
  ${PROJECT_SOURCE_DIR}/src/comm/reduce.cpp
  ${PROJECT_SOURCE_DIR}/src/core/error.cpp
  ${PROJECT_SOURCE_DIR}/src/core/fault.cpp
  ${PROJECT_SOURCE_DIR}/src/core/log.cpp
  ${PROJECT_SOURCE_DIR}/src/core/config.cpp
  ${PROJECT_SOURCE_DIR}/src/core/runtime.cpp
  ${PROJECT_SOURCE_DIR}/src/device/compute_budget.cpp
  ${PROJECT_SOURCE_DIR}/src/comm/socket.cpp
  ${PROJECT_SOURCE_DIR}/src/comm/bootstrap.cpp
  ${PROJECT_SOURCE_DIR}/src/comm/bootstrap_socket.cpp
  ${PROJECT_SOURCE_DIR}/src/comm/transport.cpp
  ${PROJECT_SOURCE_DIR}/src/comm/transports/net_transport.cpp
  ${PROJECT_SOURCE_DIR}/src/comm/transports/fault_engine.cpp
  ${PROJECT_SOURCE_DIR}/src/comm/transports/tcp_link.cpp
  ${PROJECT_SOURCE_DIR}/src/comm/transports/shm_link.cpp
  ${PROJECT_SOURCE_DIR}/src/comm/transports/verbs_api.cpp
  ${PROJECT_SOURCE_DIR}/src/comm/transports/verbs_link.cpp
  ${PROJECT_SOURCE_DIR}/src/comm/transports/verbs_reg_cache.cpp
  ${PROJECT_SOURCE_DIR}/src/comm/transports/verbs_test_adapter.cpp)
target_link_libraries(test_${name} PRIVATE PkgConfig::LIBUV PkgConfig::JANSSON ${CMAKE_DL_LIBS})

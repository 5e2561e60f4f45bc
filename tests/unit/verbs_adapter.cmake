# White-box: the verbs function tables (the real one through dlopen, and the
# in-memory TEST ADAPTER) compiled into the test, with the core they use.
target_sources(test_verbs_adapter PRIVATE
  ${PROJECT_SOURCE_DIR}/src/core/error.cpp
  ${PROJECT_SOURCE_DIR}/src/core/log.cpp
  ${PROJECT_SOURCE_DIR}/src/core/config.cpp
  ${PROJECT_SOURCE_DIR}/src/core/runtime.cpp
  ${PROJECT_SOURCE_DIR}/src/comm/transports/verbs_api.cpp
  ${PROJECT_SOURCE_DIR}/src/comm/transports/verbs_test_adapter.cpp)
target_link_libraries(test_verbs_adapter PRIVATE PkgConfig::JANSSON ${CMAKE_DL_LIBS})

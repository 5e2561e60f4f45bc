# The stranger of misuse_rendezvous runs the handshake itself: the test compiles
# the socket code (and the core it uses) into itself.
target_sources(test_${name} PRIVATE
  ${PROJECT_SOURCE_DIR}/src/comm/socket.cpp
  ${PROJECT_SOURCE_DIR}/src/core/error.cpp
  ${PROJECT_SOURCE_DIR}/src/core/fault.cpp
  ${PROJECT_SOURCE_DIR}/src/core/log.cpp
  ${PROJECT_SOURCE_DIR}/src/core/config.cpp
  ${PROJECT_SOURCE_DIR}/src/core/runtime.cpp)
target_link_libraries(test_${name} PRIVATE PkgConfig::JANSSON)

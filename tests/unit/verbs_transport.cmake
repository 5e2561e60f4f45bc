# White-box like comm_wire: the process transports, the verbs transport and
# its test adapter, compiled into the test.
include(${CMAKE_CURRENT_LIST_DIR}/comm_wire.cmake)

# White-box like comm_wire: the process transports and the verbs transport
# with its test adapter.
include(${CMAKE_CURRENT_LIST_DIR}/comm_wire.cmake)

# White-box like comm_wire, run over the verbs transport.
include(${CMAKE_CURRENT_LIST_DIR}/comm_wire.cmake)

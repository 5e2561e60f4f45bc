# White-box like comm_wire (its sources, the collective algorithms included),
# run over the verbs transport.
include(${CMAKE_CURRENT_LIST_DIR}/comm_wire.cmake)

# White-box like comm_wire (the harness), with the verbs transport over the
# fake libibverbs as one of the layouts.
include(${CMAKE_CURRENT_LIST_DIR}/comm_wire.cmake)
include(${PROJECT_SOURCE_DIR}/tests/support/fake_ibverbs/use.cmake)

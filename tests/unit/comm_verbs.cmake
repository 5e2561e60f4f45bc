# White-box like comm_wire, run over the verbs transport and the fake libibverbs.
include(${CMAKE_CURRENT_LIST_DIR}/comm_wire.cmake)
include(${PROJECT_SOURCE_DIR}/tests/support/fake_ibverbs/use.cmake)

# White-box like comm_wire (its sources), plus the collective algorithms, run
# over the verbs transport.
include(${CMAKE_CURRENT_LIST_DIR}/comm_wire.cmake)
file(GLOB comm_algorithm_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/comm/algorithms/*.cpp)
target_sources(test_comm_verbs PRIVATE ${comm_algorithm_sources}
  ${PROJECT_SOURCE_DIR}/src/comm/algorithm.cpp
  ${PROJECT_SOURCE_DIR}/src/comm/reduce.cpp)

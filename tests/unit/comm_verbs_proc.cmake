# Collectives over the verbs transport and the fake libibverbs.
include(${PROJECT_SOURCE_DIR}/tests/support/fake_ibverbs/use.cmake)

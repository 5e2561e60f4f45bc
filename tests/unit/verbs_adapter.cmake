# White-box: the verbs function table, loaded through dlopen from the real
# libibverbs and from the fake one.
set(white_box ON)
include(${PROJECT_SOURCE_DIR}/tests/support/fake_ibverbs/use.cmake)

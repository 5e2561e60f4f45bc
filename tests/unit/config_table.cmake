# White-box: reads the table of settings (core/config.cpp) and checks hpu(7)
# against it.
set(white_box ON)
target_compile_definitions(test_${name} PRIVATE HPU_MAN7="${PROJECT_SOURCE_DIR}/man/man7/hpu.7")

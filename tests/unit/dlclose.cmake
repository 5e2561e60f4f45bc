# The test dlopens libhpu by path, so it must not load libhpu itself: link with
# --as-needed (it references no libhpu symbol) and pass the library's path.
target_link_options(test_${name} PRIVATE -Wl,--as-needed)
target_compile_definitions(test_${name} PRIVATE HPU_LIBRARY_PATH="$<TARGET_FILE:hpu>")
target_link_libraries(test_${name} PRIVATE ${CMAKE_DL_LIBS})

target_compile_definitions(test_smi PRIVATE HPU_SMI_PATH="$<TARGET_FILE:hpu-smi>")
target_link_libraries(test_smi PRIVATE PkgConfig::JANSSON)
add_dependencies(test_smi hpu-smi)

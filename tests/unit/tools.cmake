# The installed programs, run by their paths in the build tree.
target_compile_definitions(test_tools PRIVATE HPU_SMI_PATH="$<TARGET_FILE:hpu-smi>"
  HPU_DEMO_PATH="$<TARGET_FILE:hpu-demo>" HPU_TRAIN_PATH="$<TARGET_FILE:hpu-train>")
add_dependencies(test_tools hpu-smi hpu-demo hpu-train)
if(TARGET hpu-bench)
  target_compile_definitions(test_tools PRIVATE HPU_BENCH_PATH="$<TARGET_FILE:hpu-bench>")
  add_dependencies(test_tools hpu-bench)
endif()

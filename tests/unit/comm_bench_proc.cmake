# hpu-bench, run by its path in the build tree (when the bench is built).
if(TARGET hpu-bench)
  target_compile_definitions(test_comm_bench_proc PRIVATE HPU_BENCH_PATH="$<TARGET_FILE:hpu-bench>")
  add_dependencies(test_comm_bench_proc hpu-bench)
endif()

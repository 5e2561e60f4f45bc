# hpu-bench peaks and the %peak columns, run by the path of hpu-bench in the
# build tree (when it is built).
if(TARGET hpu-bench)
  target_compile_definitions(test_bench_peaks PRIVATE HPU_BENCH_PATH="$<TARGET_FILE:hpu-bench>")
  add_dependencies(test_bench_peaks hpu-bench)
endif()

target_link_libraries(test_profiler PRIVATE PkgConfig::JANSSON)

# Profiler.StartSaysWhenTheProfilerIsCompiledOut again, on the copy of libhpu
# without the profiler that hpu-bench builds (bench/deps.cmake).
if(TARGET hpu-noprof)
  add_dependencies(test_profiler hpu-noprof)
  add_test(NAME Profiler.StartSaysWhenTheProfilerIsCompiledOut.OnTheCompiledOutCopy
           COMMAND ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=$<TARGET_FILE_DIR:hpu-noprof>
                   HPU_TEST_NOPROF_DIR=$<TARGET_FILE_DIR:hpu-noprof> $<TARGET_FILE:test_profiler>
                   --gtest_filter=Profiler.StartSaysWhenTheProfilerIsCompiledOut)
  set_tests_properties(Profiler.StartSaysWhenTheProfilerIsCompiledOut.OnTheCompiledOutCopy PROPERTIES TIMEOUT 60
                       LABELS unit)
endif()

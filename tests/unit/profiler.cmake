target_link_libraries(test_profiler PRIVATE PkgConfig::JANSSON)

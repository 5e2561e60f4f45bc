# The registry test uses the internal Registry class (header-only), whose
# errors come from core/error.cpp, which the shared library does not export.
target_sources(test_${name} PRIVATE ${PROJECT_SOURCE_DIR}/src/core/error.cpp)

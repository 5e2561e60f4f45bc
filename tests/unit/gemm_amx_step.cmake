set(white_box ON)
# The same tests on the vdpbf16ps kernel where the default is AMX.
gtest_discover_tests(test_${name} DISCOVERY_MODE PRE_TEST TEST_PREFIX GemmAvx512.
  PROPERTIES TIMEOUT 300 LABELS unit ENVIRONMENT HPU_KERNEL_ISA=avx512)

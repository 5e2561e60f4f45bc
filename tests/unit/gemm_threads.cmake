set(white_box ON)
# The rule of the other paths: the AVX-512 kernels where the default is AMX,
# and the AVX2 kernel, as on CPUs without AVX-512.
gtest_discover_tests(test_${name} DISCOVERY_MODE PRE_TEST TEST_PREFIX GemmThreadsAvx512.
  PROPERTIES TIMEOUT 300 LABELS unit ENVIRONMENT HPU_KERNEL_ISA=avx512)
gtest_discover_tests(test_${name} DISCOVERY_MODE PRE_TEST TEST_PREFIX GemmThreadsAvx2.
  PROPERTIES TIMEOUT 300 LABELS unit ENVIRONMENT HPU_KERNEL_ISA=avx2)

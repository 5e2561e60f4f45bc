set(white_box ON)
# The same tests on the vdpbf16ps kernel where the default is AMX.
gtest_discover_tests(test_${name} DISCOVERY_MODE PRE_TEST TEST_PREFIX GemmAvx512.
  PROPERTIES TIMEOUT 300 LABELS unit ENVIRONMENT HPU_KERNEL_ISA=avx512)
# The same tests on the widen-and-sgemm path that CPUs without AVX-512 BF16 take.
gtest_discover_tests(test_${name} DISCOVERY_MODE PRE_TEST TEST_PREFIX GemmFallback.
  PROPERTIES TIMEOUT 300 LABELS unit ENVIRONMENT HPU_KERNEL_ISA=avx2)
# The thread-count test also on the scalar level (products through OpenBLAS,
# as at avx2, with scalar conversions and epilogues).
gtest_discover_tests(test_${name} DISCOVERY_MODE PRE_TEST TEST_PREFIX GemmScalar. TEST_FILTER Gemm.SameBits*
  PROPERTIES TIMEOUT 300 LABELS unit ENVIRONMENT HPU_KERNEL_ISA=scalar)

# The same tests with bf16 products on vdpbf16ps where the default is AMX
# (the fused epilogues' bits against the separate ops on both kernels).
gtest_discover_tests(test_${name} DISCOVERY_MODE PRE_TEST TEST_PREFIX MatmulAvx512.
  PROPERTIES TIMEOUT 300 LABELS unit ENVIRONMENT HPU_KERNEL_ISA=avx512)

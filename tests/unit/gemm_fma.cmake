set(white_box ON)
# The tests run at HPU_KERNEL_ISA=avx2 unless the environment names another
# level: here also at avx512 (the 512-bit kernel, which takes bf16 on CPUs
# without AVX-512 BF16, and f16 on every AVX-512 CPU).
gtest_discover_tests(test_${name} DISCOVERY_MODE PRE_TEST TEST_PREFIX Avx512.
  PROPERTIES TIMEOUT 300 LABELS unit ENVIRONMENT HPU_KERNEL_ISA=avx512)

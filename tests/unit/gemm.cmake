set(white_box ON)
# The same tests on the vdpbf16ps kernel where the default is AMX.
gtest_discover_tests(test_${name} DISCOVERY_MODE PRE_TEST TEST_PREFIX GemmAvx512.
  PROPERTIES TIMEOUT 300 LABELS unit ENVIRONMENT HPU_KERNEL_ISA=avx512)
# The same tests on the 256-bit f32 kernel that CPUs without AVX-512 take
# (bf16 and f16 widened as it packs them).
gtest_discover_tests(test_${name} DISCOVERY_MODE PRE_TEST TEST_PREFIX GemmIsaAvx2.
  PROPERTIES TIMEOUT 300 LABELS unit ENVIRONMENT HPU_KERNEL_ISA=avx2)
# And on the scalar level: OpenBLAS, 16-bit inputs widened by blocks, scalar
# conversions and epilogues.
gtest_discover_tests(test_${name} DISCOVERY_MODE PRE_TEST TEST_PREFIX GemmScalar.
  PROPERTIES TIMEOUT 300 LABELS unit ENVIRONMENT HPU_KERNEL_ISA=scalar)

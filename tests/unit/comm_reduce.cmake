set(white_box ON)
# The same tests where HPU_KERNEL_ISA asks for the scalar level: the
# collectives' reductions then run their scalar loops too.
gtest_discover_tests(test_${name} DISCOVERY_MODE PRE_TEST TEST_PREFIX CommReduceScalar.
  PROPERTIES TIMEOUT 300 LABELS unit ENVIRONMENT HPU_KERNEL_ISA=scalar)

# hpuDeviceGetProperties(3)'s kernel_isa where HPU_KERNEL_ISA lowers the level.
gtest_discover_tests(test_${name} DISCOVERY_MODE PRE_TEST TEST_PREFIX DeviceScalar.
  TEST_FILTER Device.PropertiesNameTheKernelIsa
  PROPERTIES TIMEOUT 60 LABELS unit ENVIRONMENT HPU_KERNEL_ISA=scalar)
gtest_discover_tests(test_${name} DISCOVERY_MODE PRE_TEST TEST_PREFIX DeviceAvx2.
  TEST_FILTER Device.PropertiesNameTheKernelIsa
  PROPERTIES TIMEOUT 60 LABELS unit ENVIRONMENT HPU_KERNEL_ISA=avx2)

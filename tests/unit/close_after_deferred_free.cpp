// Regression: a free deferred behind work on another device's stream must not
// make the last close of its own device fail with HPU_ERROR_BUSY (found by the
// find_package consumer in tests/abi, which closes two devices from two threads).
#include <hpu/hpu.h>

#include <gtest/gtest.h>

TEST(CloseAfterDeferredFree, LastCloseWaitsForTheWorkTheFreeWaitsFor) {
  hpuDevice_t d0, d1;
  hpuStream_t s1;
  void *small, *big;
  const size_t big_bytes = size_t(64) << 20;
  ASSERT_EQ(hpuDeviceOpen(&d0, 0), HPU_SUCCESS);
  ASSERT_EQ(hpuDeviceOpen(&d1, 1), HPU_SUCCESS);
  ASSERT_EQ(hpuStreamCreate(&s1, d1), HPU_SUCCESS);
  ASSERT_EQ(hpuMemAlloc(&small, d0, 4096), HPU_SUCCESS);
  ASSERT_EQ(hpuMemAlloc(&big, d1, big_bytes), HPU_SUCCESS);
  // Keep device 1 busy, then free device 0's memory while that work is queued:
  // the free is deferred behind it.
  for (int i = 0; i < 16; ++i) ASSERT_EQ(hpuMemsetAsync(s1, big, i, big_bytes), HPU_SUCCESS);
  ASSERT_EQ(hpuMemFree(small), HPU_SUCCESS);
  // Whether or not device 1 has finished by now, device 0 holds no memory.
  EXPECT_EQ(hpuDeviceClose(d0), HPU_SUCCESS) << hpuGetLastErrorMessage();
  ASSERT_EQ(hpuStreamSynchronize(s1), HPU_SUCCESS);
  ASSERT_EQ(hpuMemFree(big), HPU_SUCCESS);
  ASSERT_EQ(hpuStreamDestroy(s1), HPU_SUCCESS);
  EXPECT_EQ(hpuDeviceClose(d1), HPU_SUCCESS) << hpuGetLastErrorMessage();
}

// A test fixture over device 0 with the tensor helpers several test files
// use: a f32 tensor from host values, its values back, the device's InUse.
#pragma once

#include <gtest/gtest.h>
#include <hpu/hpu.h>

#include <vector>

#include "expect.hpp"

namespace hpu_test {

class TensorFixture : public testing::Test {
 protected:
  void SetUp() override { ASSERT_HPU_OK(hpuDeviceOpen(&dev, 0)); }
  void TearDown() override { EXPECT_HPU_OK(hpuDeviceClose(dev)); }

  hpuTensor_t from(std::vector<float> v, std::vector<int64_t> shape) {
    hpuTensor_t t = nullptr;
    EXPECT_HPU_OK(hpuTensorCreateFromHost(&t, dev, HPU_FLOAT32, static_cast<int>(shape.size()), shape.data(), v.data()));
    return t;
  }
  std::vector<float> host(hpuTensor_t t) {
    int64_t n = 0;
    EXPECT_HPU_OK(hpuTensorGetNumel(t, &n));
    std::vector<float> out(static_cast<size_t>(n));
    EXPECT_HPU_OK(hpuTensorCopyToHost(nullptr, t, out.data(), out.size() * sizeof(float)));
    return out;
  }
  uint64_t in_use() {
    hpuMemStats_t s = HPU_MEM_STATS_INIT;
    EXPECT_HPU_OK(hpuMemStats(dev, &s));
    return s.in_use;
  }

  hpuDevice_t dev = nullptr;
};

}  // namespace hpu_test

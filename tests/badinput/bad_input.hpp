// Support for the generated bad-input test (gen.py): live handles of every
// kind, closed ones, device memory live, freed and of a closed device, shapes
// and row lists that overflow, a scratch buffer for plausible pointers, and
// the check.
#pragma once

#include <gtest/gtest.h>
#include <hpu/hpu.h>
#include <hpu/trainer.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

// The size of the fixture's device allocations.
constexpr size_t kDevBytes = 1 << 16;

struct Fixture {
  hpuDevice_t device = nullptr, stale_device = nullptr;
  hpuStream_t stream = nullptr, stale_stream = nullptr;
  hpuEvent_t event = nullptr, stale_event = nullptr;
  hpuTensor_t tensor = nullptr, stale_tensor = nullptr;
  hpuComm_t comm = nullptr, stale_comm = nullptr;
  hpuDevice_t other_device = nullptr;
  // kDevBytes on `device`; kDevBytes on another open device; 1536 bytes
  // (a size no call of the table allocates) freed on `device`; kDevBytes freed
  // on a device that was then closed.
  void *dev_mem = nullptr, *other_mem = nullptr, *freed_mem = nullptr, *closed_mem = nullptr;
  // Geometry (8 entries each, the largest rank) and row lists.
  int64_t shape4[8] = {4, 4, 4, 4, 4, 4, 4, 4};
  int64_t dims_max[8], dims_min[8], dims_negative[8], dims_2p32[8], dims_2p61[8];
  int64_t rows_huge[2] = {int64_t(1) << 40, 0}, rows_negative[2] = {-1, 0};

  Fixture() { setup(); }

  // The message of the call with every argument plausible ("" if it succeeded).
  std::string baseline_message;
  void baseline(hpuStatus_t status) {
    baseline_message = status == HPU_SUCCESS || status == HPU_ERROR_NOT_READY ? "" : hpuGetLastErrorMessage();
  }

  void setup() {
    hpuSetLogLevel(HPU_LOG_OFF);
    const int64_t shape[2] = {2, 2};
    ASSERT_EQ(hpuDeviceOpen(&stale_device, 4), HPU_SUCCESS);  // a device no call of the table opens
    ASSERT_EQ(hpuDeviceClose(stale_device), HPU_SUCCESS);
    ASSERT_EQ(hpuDeviceOpen(&device, 0), HPU_SUCCESS);
    ASSERT_EQ(hpuStreamCreate(&stale_stream, device), HPU_SUCCESS);
    ASSERT_EQ(hpuStreamDestroy(stale_stream), HPU_SUCCESS);
    ASSERT_EQ(hpuStreamCreate(&stream, device), HPU_SUCCESS);
    ASSERT_EQ(hpuEventCreate(&stale_event), HPU_SUCCESS);
    ASSERT_EQ(hpuEventDestroy(stale_event), HPU_SUCCESS);
    ASSERT_EQ(hpuEventCreate(&event), HPU_SUCCESS);
    ASSERT_EQ(hpuTensorCreate(&stale_tensor, device, HPU_FLOAT32, 2, shape), HPU_SUCCESS);
    ASSERT_EQ(hpuTensorRelease(stale_tensor), HPU_SUCCESS);
    ASSERT_EQ(hpuTensorCreate(&tensor, device, HPU_FLOAT32, 2, shape), HPU_SUCCESS);
    ASSERT_EQ(hpuCommInitAll(&stale_comm, 1, &device), HPU_SUCCESS);
    ASSERT_EQ(hpuCommDestroy(stale_comm), HPU_SUCCESS);
    ASSERT_EQ(hpuCommInitAll(&comm, 1, &device), HPU_SUCCESS);
    ASSERT_EQ(hpuMemAlloc(&dev_mem, device, kDevBytes), HPU_SUCCESS);
    ASSERT_EQ(hpuMemAlloc(&freed_mem, device, 1536), HPU_SUCCESS);
    ASSERT_EQ(hpuMemFree(device, freed_mem), HPU_SUCCESS);
    ASSERT_EQ(hpuDeviceOpen(&other_device, 3), HPU_SUCCESS);
    ASSERT_EQ(hpuMemAlloc(&other_mem, other_device, kDevBytes), HPU_SUCCESS);
    hpuDevice_t closing = nullptr;
    ASSERT_EQ(hpuDeviceOpen(&closing, 2), HPU_SUCCESS);
    ASSERT_EQ(hpuMemAlloc(&closed_mem, closing, kDevBytes), HPU_SUCCESS);
    ASSERT_EQ(hpuMemFree(closing, closed_mem), HPU_SUCCESS);
    ASSERT_EQ(hpuDeviceClose(closing), HPU_SUCCESS);
    for (int i = 0; i < 8; ++i) {
      dims_max[i] = INT64_MAX;
      dims_min[i] = INT64_MIN;
      dims_negative[i] = -2;
      dims_2p32[i] = int64_t(1) << 32;
      dims_2p61[i] = int64_t(1) << 61;
    }
  }
};

// A zeroed buffer that plausible pointer arguments point at.
inline void *scratch() {
  alignas(64) static unsigned char buffer[2 * kDevBytes];
  std::memset(buffer, 0, sizeof buffer);
  return buffer;
}

inline void quiet_log(hpuLogLevel_t, const char *, void *) {}

// What a bad value's call may do: kMustFail (its message must name the
// argument); kMayFail (a huge or odd number that may be valid; a failure must
// name an argument, this one or the one whose check it tripped); kDocumented (a
// NULL the function's page documents as valid).
enum Rule { kMustFail, kMayFail, kDocumented };

// Every failure must leave a message that starts with the function's name.
// When another (merely plausible) argument fails first, the message is the
// baseline's. `params` lists every parameter of the function, space-separated.
inline void check(Fixture &fx, const char *fn, const char *param, const char *what, Rule rule, const char *params,
                  hpuStatus_t status) {
  SCOPED_TRACE(std::string(fn) + " with " + param + " = " + what);
  EXPECT_STRNE(hpuGetErrorName(status), "HPU_STATUS_UNKNOWN") << "returned " << static_cast<int>(status);
  if (rule == kMustFail) {
    EXPECT_NE(status, HPU_SUCCESS) << "bad input was accepted";
  }
  if (status == HPU_SUCCESS || status == HPU_ERROR_NOT_READY) return;
  std::string msg = hpuGetLastErrorMessage();
  EXPECT_EQ(msg.rfind(std::string(fn) + ": ", 0), 0u) << "message: " << msg;
  if (msg == fx.baseline_message || rule == kDocumented) return;
  bool named = msg.find(param) != std::string::npos;
  if (rule == kMayFail) {
    std::string all = params, name;
    for (size_t i = 0; i <= all.size() && !named; ++i) {
      if (i == all.size() || all[i] == ' ') {
        named = !name.empty() && msg.find(name) != std::string::npos;
        name.clear();
      } else {
        name += all[i];
      }
    }
  }
  EXPECT_TRUE(named) << "the message does not name " << (rule == kMayFail ? "an argument" : param) << ": " << msg;
}

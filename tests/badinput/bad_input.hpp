// Support for the generated bad-input test (gen.py): live handles of every
// kind, closed ones, a scratch buffer for plausible pointers, and the check.
#pragma once

#include <gtest/gtest.h>
#include <hpu/hpu.h>
#include <hpu/trainer.h>

#include <cmath>
#include <cstring>
#include <string>

struct Fixture {
  hpuDevice_t device = nullptr, stale_device = nullptr;
  hpuStream_t stream = nullptr, stale_stream = nullptr;
  hpuEvent_t event = nullptr, stale_event = nullptr;
  hpuTensor_t tensor = nullptr, stale_tensor = nullptr;
  hpuComm_t comm = nullptr, stale_comm = nullptr;

  Fixture() { setup(); }

  // The message of the call with every argument plausible ("" if it succeeded).
  std::string baseline_message;
  void baseline(hpuStatus_t status) {
    baseline_message = status == HPU_SUCCESS || status == HPU_ERROR_NOT_READY ? "" : hpuGetLastErrorMessage();
  }

  void setup() {
    hpuSetLogLevel(HPU_LOG_OFF);
    const int64_t shape[2] = {2, 2};
    ASSERT_EQ(hpuDeviceOpen(&stale_device, 1), HPU_SUCCESS);
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
  }
};

// A zeroed buffer that plausible pointer arguments point at.
inline void *scratch() {
  alignas(64) static unsigned char buffer[1 << 16];
  std::memset(buffer, 0, sizeof buffer);
  return buffer;
}

inline void quiet_log(hpuLogLevel_t, const char *, void *) {}

// `strict`: the call must fail. Every failure must leave a message that starts
// with the function's name; a strict one must name the argument.
inline void check(Fixture &fx, const char *fn, const char *param, const char *what, bool strict, hpuStatus_t status) {
  SCOPED_TRACE(std::string(fn) + " with " + param + " = " + what);
  EXPECT_STRNE(hpuGetErrorName(status), "HPU_STATUS_UNKNOWN") << "returned " << static_cast<int>(status);
  if (strict) {
    EXPECT_NE(status, HPU_SUCCESS) << "bad input was accepted";
  }
  if (status == HPU_SUCCESS || status == HPU_ERROR_NOT_READY) return;
  std::string msg = hpuGetLastErrorMessage();
  EXPECT_EQ(msg.rfind(std::string(fn) + ": ", 0), 0u) << "message: " << msg;
  // When another (merely plausible) argument fails first, the message is the
  // baseline's; otherwise it must name the bad argument.
  if (strict && msg != fx.baseline_message) {
    EXPECT_NE(msg.find(param), std::string::npos) << "the message does not name " << param << ": " << msg;
  }
}

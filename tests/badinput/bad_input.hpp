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

  // Plausible arguments that a call needs to succeed (gen.py's PLAUSIBLE and
  // STRUCTS): an event that has completed, tensors of the shapes and types
  // the ops' other plausible arguments need, filled structs, a unique id.
  hpuEvent_t recorded_event = nullptr;
  hpuTensor_t vec2 = nullptr, t12 = nullptr, t3 = nullptr, target = nullptr, mask = nullptr;
  const char *op_names[1] = {"mm"};
  hpuDeviceProperties_t props = HPU_DEVICE_PROPERTIES_INIT;
  hpuMemStats_t stats = HPU_MEM_STATS_INIT;
  hpuSgdOptions_t sgd = HPU_SGD_OPTIONS_INIT;
  hpuAdamwOptions_t adamw = HPU_ADAMW_OPTIONS_INIT;
  hpuMatmulOptions_t matmul = HPU_MATMUL_OPTIONS_INIT;
  hpuLossOptions_t loss = {sizeof(hpuLossOptions_t), HPU_REDUCTION_NONE, -100, 0.0};  // a loss per sample: vec2
  hpuLayerNormOptions_t layer_norm = HPU_LAYER_NORM_OPTIONS_INIT;
  hpuTrainerPredictOptions_t trainer_predict = HPU_TRAINER_PREDICT_OPTIONS_INIT;
  hpuRandomState_t random_state = HPU_RANDOM_STATE_INIT;
  hpuUniqueId_t unique_id;

  // A new DLPack export of `tensor`, for an import to take (each successful
  // import takes its own).
  DLManagedTensor *exported() {
    DLManagedTensor *m = nullptr;
    EXPECT_EQ(hpuTensorToDLPack(nullptr, tensor, &m), HPU_SUCCESS);
    return m;
  }
  DLManagedTensorVersioned *exported_versioned() {
    DLManagedTensorVersioned *m = nullptr;
    EXPECT_EQ(hpuTensorToDLPackVersioned(nullptr, tensor, &m), HPU_SUCCESS);
    return m;
  }

  // A new allocation of 512 bytes on `device`, for hpuMemFree to free.
  void *fresh_allocation() {
    void *p = nullptr;
    EXPECT_EQ(hpuMemAlloc(&p, device, 512), HPU_SUCCESS);
    return p;
  }

  // The call with every argument plausible: it must succeed unless gen.py
  // lists it in BASELINE_FAILS. Its message ("" if it succeeded) is what a
  // bad argument's call gives when a plausible argument fails first.
  std::string baseline_message;
  void baseline(bool must_succeed, hpuStatus_t status) {
    bool ok = status == HPU_SUCCESS || status == HPU_ERROR_NOT_READY;
    baseline_message = ok ? "" : hpuGetLastErrorMessage();
    if (must_succeed) {
      EXPECT_TRUE(ok) << "the call with every argument plausible failed: " << baseline_message;
    }
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
    // Right after dev_mem; freed last, so that no later allocation of the
    // setup reuses it: freed_mem and the byte past dev_mem's end stay free.
    ASSERT_EQ(hpuMemAlloc(&freed_mem, device, 1536), HPU_SUCCESS);
    ASSERT_EQ(hpuDeviceOpen(&other_device, 3), HPU_SUCCESS);
    ASSERT_EQ(hpuMemAlloc(&other_mem, other_device, kDevBytes), HPU_SUCCESS);
    hpuDevice_t closing = nullptr;
    ASSERT_EQ(hpuDeviceOpen(&closing, 2), HPU_SUCCESS);
    ASSERT_EQ(hpuMemAlloc(&closed_mem, closing, kDevBytes), HPU_SUCCESS);
    ASSERT_EQ(hpuMemFree(closed_mem), HPU_SUCCESS);
    ASSERT_EQ(hpuDeviceClose(closing), HPU_SUCCESS);
    ASSERT_EQ(hpuEventCreate(&recorded_event), HPU_SUCCESS);
    ASSERT_EQ(hpuEventRecord(stream, recorded_event), HPU_SUCCESS);
    ASSERT_EQ(hpuEventSynchronize(recorded_event), HPU_SUCCESS);
    const float zeros[8] = {};
    const int64_t classes[2] = {0, 1}, n2[1] = {2}, s12[2] = {1, 2}, s3[3] = {2, 2, 2};
    const uint8_t ones[4] = {1, 1, 1, 1};
    ASSERT_EQ(hpuTensorCreateFromHost(&vec2, device, HPU_FLOAT32, 1, n2, zeros), HPU_SUCCESS);
    ASSERT_EQ(hpuTensorCreateFromHost(&t12, device, HPU_FLOAT32, 2, s12, zeros), HPU_SUCCESS);
    ASSERT_EQ(hpuTensorCreateFromHost(&t3, device, HPU_FLOAT32, 3, s3, zeros), HPU_SUCCESS);
    ASSERT_EQ(hpuTensorCreateFromHost(&target, device, HPU_INT64, 1, n2, classes), HPU_SUCCESS);
    ASSERT_EQ(hpuTensorCreateFromHost(&mask, device, HPU_UINT8, 2, shape, ones), HPU_SUCCESS);
    ASSERT_EQ(hpuGetUniqueId(&unique_id), HPU_SUCCESS);
    for (int i = 0; i < 8; ++i) {
      dims_max[i] = INT64_MAX;
      dims_min[i] = INT64_MIN;
      dims_negative[i] = -2;
      dims_2p32[i] = int64_t(1) << 32;
      dims_2p61[i] = int64_t(1) << 61;
    }
    ASSERT_EQ(hpuMemFree(freed_mem), HPU_SUCCESS);
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
// `what` describes the bad value; a number's is its decimal value.
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
  // A number (`what` is then its decimal value) is named with its value.
  bool number = what[0] == '-' || (what[0] >= '0' && what[0] <= '9');
  if (number && msg.find(param) != std::string::npos) {
    EXPECT_NE(msg.find(what), std::string::npos) << "the message does not give " << param << "'s value " << what << ": " << msg;
  }
}

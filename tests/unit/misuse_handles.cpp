// Stateful misuse of handles and events: a destroyed handle stays dead however
// many objects come after it (the registry's generations, white-box), and
// hpuEventElapsedTime of one event, never recorded or not yet completed.
#include <gtest/gtest.h>
#include <hpu/hpu.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "core/registry.hpp"
#include "expect.hpp"

namespace {

using hpu::Registry;

// The slot and generation a registry handle carries (registry.hpp's layout).
uint32_t slot_of(const void *h) { return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(h) & 0xFFFFFFFFu); }
uint32_t generation_of(const void *h) {
  return static_cast<uint32_t>((reinterpret_cast<uintptr_t>(h) >> 32) & 0xFFFFFF);
}

// Destroying a stale handle fails with HPU_ERROR_INVALID_HANDLE.
void expect_dead(Registry<int> &r, const void *h) {
  try {
    r.remove(h);
    ADD_FAILURE() << h << " was accepted";
  } catch (const hpu::Error &e) {
    EXPECT_EQ(e.status(), HPU_ERROR_INVALID_HANDLE) << e.what();
  }
}

// A slot whose generation reaches the last one is retired instead of wrapping
// to 0 (which would, 2^24 cycles later, give a destroyed handle's bits to a
// live object): create/destroy cycles across that point never hand out a
// generation a slot had before, stale handles are rejected and the live
// object survives their destruction.
TEST(Misuse, HandleGenerationNeverWraps) {
  Registry<int> r(hpu::HandleKind::event, "event", Registry<int>::kLastGeneration - 2);
  std::vector<void *> dead;
  for (int i = 0; i < 6; ++i) {
    void *h = reinterpret_cast<void *>(r.add(std::make_shared<int>(i)));
    for (void *d : dead) {
      if (slot_of(d) == slot_of(h)) {
        EXPECT_GT(generation_of(h), generation_of(d)) << h << " after " << d;
      }
    }
    r.remove(h);
    dead.push_back(h);
  }
  auto live = std::make_shared<int>(42);
  void *h = reinterpret_cast<void *>(r.add(live));
  for (void *d : dead) {
    EXPECT_NE(d, h);
    expect_dead(r, d);
  }
  EXPECT_EQ(r.get(h), live);
  EXPECT_EQ(r.remove(h), live);
}

// The same event as start and end: 0 once its record completed, the documented
// errors before.
TEST(Misuse, ElapsedTimeOfOneEvent) {
  hpuDevice_t devs[2];
  for (int i = 0; i < 2; ++i) ASSERT_HPU_OK(hpuDeviceOpen(&devs[i], i));
  hpuEvent_t e;
  ASSERT_HPU_OK(hpuEventCreate(&e));
  float ms = 42;
  EXPECT_HPU_FAIL(hpuEventElapsedTime(e, e, &ms), HPU_ERROR_INVALID_USAGE, "start event has never been recorded");
  EXPECT_EQ(ms, 42);

  hpuStream_t s;
  ASSERT_HPU_OK(hpuDeviceGetDefaultStream(devs[0], &s));
  ASSERT_HPU_OK(hpuEventRecord(s, e));
  ASSERT_HPU_OK(hpuEventSynchronize(e));
  EXPECT_HPU_OK(hpuEventElapsedTime(e, e, &ms));
  EXPECT_EQ(ms, 0.0f);

  // Recorded again behind an allreduce that waits for its second rank: the
  // latest record has not completed until that rank joins.
  hpuComm_t comms[2];
  ASSERT_HPU_OK(hpuCommInitAll(comms, 2, devs));
  void *buf[2];
  for (int i = 0; i < 2; ++i) ASSERT_HPU_OK(hpuMemAlloc(&buf[i], devs[i], 64));
  ASSERT_HPU_OK(hpuAllreduce(s, comms[0], buf[0], buf[0], 16, HPU_FLOAT32, HPU_SUM));
  ASSERT_HPU_OK(hpuEventRecord(s, e));
  ms = 42;
  EXPECT_HPU_FAIL(hpuEventElapsedTime(e, e, &ms), HPU_ERROR_NOT_READY, "start event has not completed");
  EXPECT_EQ(ms, 42);
  hpuStream_t s1;
  ASSERT_HPU_OK(hpuDeviceGetDefaultStream(devs[1], &s1));
  ASSERT_HPU_OK(hpuAllreduce(s1, comms[1], buf[1], buf[1], 16, HPU_FLOAT32, HPU_SUM));
  ASSERT_HPU_OK(hpuEventSynchronize(e));
  EXPECT_HPU_OK(hpuEventElapsedTime(e, e, &ms));
  EXPECT_EQ(ms, 0.0f);

  ASSERT_HPU_OK(hpuStreamSynchronize(s1));
  for (int i = 0; i < 2; ++i) {
    EXPECT_HPU_OK(hpuCommDestroy(comms[i]));
    EXPECT_HPU_OK(hpuMemFree(buf[i]));
  }
  EXPECT_HPU_OK(hpuEventDestroy(e));
  for (hpuDevice_t d : devs) EXPECT_HPU_OK(hpuDeviceClose(d));
}

}  // namespace

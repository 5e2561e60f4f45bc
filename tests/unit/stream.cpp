// Streams and events through the public API: in-order execution, destroy
// waiting for queued work, events (record, query, synchronize, elapsed time),
// waits across streams and devices, and bad input to each function.
#include <gtest/gtest.h>
#include <hpu/hpu.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "expect.hpp"

using hpu_test::ptr_text;

namespace {

constexpr size_t MiB = size_t(1) << 20;

class Streams : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_HPU_OK(hpuDeviceOpen(&dev, 0)); }
  void TearDown() override {
    for (void *p : allocations) EXPECT_HPU_OK(hpuMemFree(p));
    EXPECT_HPU_OK(hpuDeviceClose(dev));
  }
  char *alloc(size_t bytes) {
    void *p = nullptr;
    EXPECT_HPU_OK(hpuMemAlloc(&p, dev, bytes));
    allocations.push_back(p);
    return static_cast<char *>(p);
  }
  // True when all `bytes` of device memory at p hold `value`.
  bool holds(const void *p, size_t bytes, int value) {
    std::vector<unsigned char> host(bytes);
    EXPECT_HPU_OK(hpuMemcpy(host.data(), p, bytes, HPU_MEMCPY_DEVICE_TO_HOST));
    return std::all_of(host.begin(), host.end(), [&](unsigned char c) { return c == value; });
  }

  hpuDevice_t dev = nullptr;
  std::vector<void *> allocations;
};

}  // namespace

TEST_F(Streams, WorkRunsInTheOrderQueued) {
  const size_t n = 4 * MiB;
  char *a = alloc(n), *b = alloc(n), *c = alloc(n);
  hpuStream_t s;
  ASSERT_HPU_OK(hpuStreamCreate(&s, dev));
  for (int round = 1; round <= 3; ++round) {
    ASSERT_HPU_OK(hpuMemsetAsync(s, a, round, n));
    ASSERT_HPU_OK(hpuMemcpyAsync(s, b, a, n, HPU_MEMCPY_DEVICE_TO_DEVICE));
    ASSERT_HPU_OK(hpuMemsetAsync(s, a, round + 100, n));
    ASSERT_HPU_OK(hpuMemcpyAsync(s, c, a, n, HPU_MEMCPY_DEVICE_TO_DEVICE));
    ASSERT_HPU_OK(hpuMemsetAsync(s, a, round + 200, n));
    ASSERT_HPU_OK(hpuStreamSynchronize(s));
    EXPECT_HPU_OK(hpuStreamQuery(s));
    EXPECT_TRUE(holds(b, n, round));
    EXPECT_TRUE(holds(c, n, round + 100));
    EXPECT_TRUE(holds(a, n, round + 200));
  }
  EXPECT_HPU_OK(hpuStreamDestroy(s));
}

TEST_F(Streams, HostCopiesOnAStreamKeepTheirOrder) {
  const size_t n = 4 * MiB;
  char *d = alloc(n);
  std::vector<unsigned char> in1(n, 1), in2(n, 2), out1(n), out2(n);
  hpuStream_t s;
  ASSERT_HPU_OK(hpuStreamCreate(&s, dev));
  ASSERT_HPU_OK(hpuMemcpyAsync(s, d, in1.data(), n, HPU_MEMCPY_HOST_TO_DEVICE));
  ASSERT_HPU_OK(hpuMemcpyAsync(s, out1.data(), d, n, HPU_MEMCPY_DEVICE_TO_HOST));
  ASSERT_HPU_OK(hpuMemcpyAsync(s, d, in2.data(), n, HPU_MEMCPY_HOST_TO_DEVICE));
  ASSERT_HPU_OK(hpuMemcpyAsync(s, out2.data(), d, n, HPU_MEMCPY_DEVICE_TO_HOST));
  ASSERT_HPU_OK(hpuStreamSynchronize(s));
  EXPECT_EQ(out1, in1);
  EXPECT_EQ(out2, in2);
  EXPECT_HPU_OK(hpuStreamDestroy(s));
}

TEST_F(Streams, DestroyWaitsForQueuedWork) {
  const size_t n = 4 * MiB;
  const int parts = 16;
  char *d = alloc(n * parts);
  hpuStream_t s;
  ASSERT_HPU_OK(hpuStreamCreate(&s, dev));
  for (int i = 0; i < parts; ++i) ASSERT_HPU_OK(hpuMemsetAsync(s, d + i * n, 0x40 + i, n));
  ASSERT_HPU_OK(hpuStreamDestroy(s));
  for (int i = 0; i < parts; ++i) EXPECT_TRUE(holds(d + i * n, n, 0x40 + i)) << "part " << i;
}

TEST_F(Streams, StreamBadInput) {
  hpuStream_t s = reinterpret_cast<hpuStream_t>(0x1);
  EXPECT_HPU_FAIL(hpuStreamCreate(nullptr, dev), HPU_ERROR_INVALID_ARGUMENT, "stream is NULL");
  EXPECT_HPU_FAIL(hpuStreamCreate(&s, nullptr), HPU_ERROR_INVALID_HANDLE, "dev is NULL");
  EXPECT_EQ(s, reinterpret_cast<hpuStream_t>(0x1));
  EXPECT_HPU_OK(hpuStreamDestroy(nullptr));
  EXPECT_HPU_FAIL(hpuStreamSynchronize(nullptr), HPU_ERROR_INVALID_HANDLE, "stream is NULL");
  EXPECT_HPU_FAIL(hpuStreamQuery(nullptr), HPU_ERROR_INVALID_HANDLE, "stream is NULL");
  ASSERT_HPU_OK(hpuStreamCreate(&s, dev));
  ASSERT_HPU_OK(hpuStreamDestroy(s));
  std::string v = ptr_text(s);
  EXPECT_HPU_FAIL(hpuStreamDestroy(s), HPU_ERROR_INVALID_HANDLE, v.c_str(), "not a live stream handle");
  EXPECT_HPU_FAIL(hpuStreamSynchronize(s), HPU_ERROR_INVALID_HANDLE, v.c_str());
  EXPECT_HPU_FAIL(hpuStreamQuery(s), HPU_ERROR_INVALID_HANDLE, v.c_str());
  hpuEvent_t e;
  ASSERT_HPU_OK(hpuEventCreate(&e));
  EXPECT_HPU_FAIL(hpuStreamWaitEvent(s, e), HPU_ERROR_INVALID_HANDLE, v.c_str());
  EXPECT_HPU_FAIL(hpuEventRecord(s, e), HPU_ERROR_INVALID_HANDLE, v.c_str());
  EXPECT_HPU_FAIL(hpuMemsetAsync(s, alloc(512), 0, 512), HPU_ERROR_INVALID_HANDLE, v.c_str());
  // Handles of another kind.
  hpuStream_t wrong = reinterpret_cast<hpuStream_t>(e);
  EXPECT_HPU_FAIL(hpuStreamSynchronize(wrong), HPU_ERROR_INVALID_HANDLE, ptr_text(wrong).c_str());
  EXPECT_HPU_FAIL(hpuStreamDestroy(reinterpret_cast<hpuStream_t>(dev)), HPU_ERROR_INVALID_HANDLE,
                  ptr_text(dev).c_str());
  int on_stack;
  EXPECT_HPU_FAIL(hpuStreamQuery(reinterpret_cast<hpuStream_t>(&on_stack)), HPU_ERROR_INVALID_HANDLE,
                  ptr_text(&on_stack).c_str());
  EXPECT_HPU_OK(hpuEventDestroy(e));
}

TEST_F(Streams, EventsRecordQueryAndSynchronize) {
  hpuEvent_t e;
  ASSERT_HPU_OK(hpuEventCreate(&e));
  // A never-recorded event is complete.
  EXPECT_HPU_OK(hpuEventQuery(e));
  EXPECT_HPU_OK(hpuEventSynchronize(e));
  const size_t n = 8 * MiB;
  char *d = alloc(n);
  hpuStream_t s;
  ASSERT_HPU_OK(hpuStreamCreate(&s, dev));
  for (int i = 0; i < 4; ++i) ASSERT_HPU_OK(hpuMemsetAsync(s, d, i + 1, n));
  ASSERT_HPU_OK(hpuEventRecord(s, e));
  ASSERT_HPU_OK(hpuEventSynchronize(e));
  EXPECT_HPU_OK(hpuEventQuery(e));
  // Everything queued before the record has run.
  EXPECT_TRUE(holds(d, n, 4));
  // Recording again moves the marker; the default stream works too.
  hpuStream_t def;
  ASSERT_HPU_OK(hpuDeviceGetDefaultStream(dev, &def));
  ASSERT_HPU_OK(hpuMemsetAsync(def, d, 9, n));
  ASSERT_HPU_OK(hpuEventRecord(def, e));
  ASSERT_HPU_OK(hpuEventSynchronize(e));
  EXPECT_TRUE(holds(d, n, 9));
  EXPECT_HPU_OK(hpuStreamDestroy(s));
  EXPECT_HPU_OK(hpuEventDestroy(e));
}

TEST_F(Streams, ElapsedTime) {
  hpuEvent_t start, end, never;
  ASSERT_HPU_OK(hpuEventCreate(&start));
  ASSERT_HPU_OK(hpuEventCreate(&end));
  ASSERT_HPU_OK(hpuEventCreate(&never));
  const size_t n = 64 * MiB;
  char *d = alloc(n);
  hpuStream_t s;
  ASSERT_HPU_OK(hpuStreamCreate(&s, dev));
  ASSERT_HPU_OK(hpuEventRecord(s, start));
  for (int i = 0; i < 4; ++i) ASSERT_HPU_OK(hpuMemsetAsync(s, d, i, n));
  ASSERT_HPU_OK(hpuEventRecord(s, end));
  ASSERT_HPU_OK(hpuEventSynchronize(end));
  float ms = -1, back = 1;
  ASSERT_HPU_OK(hpuEventElapsedTime(start, end, &ms));
  EXPECT_TRUE(std::isfinite(ms));
  EXPECT_GT(ms, 0.0f) << "four 64 MiB memsets took no time";
  ASSERT_HPU_OK(hpuEventElapsedTime(end, start, &back));
  EXPECT_FLOAT_EQ(back, -ms);

  float untouched = 42;
  EXPECT_HPU_FAIL(hpuEventElapsedTime(start, never, &untouched), HPU_ERROR_INVALID_USAGE,
                  "end event has never been recorded");
  EXPECT_HPU_FAIL(hpuEventElapsedTime(never, end, &untouched), HPU_ERROR_INVALID_USAGE,
                  "start event has never been recorded");
  EXPECT_HPU_FAIL(hpuEventElapsedTime(start, end, nullptr), HPU_ERROR_INVALID_ARGUMENT, "ms is NULL");
  EXPECT_HPU_FAIL(hpuEventElapsedTime(nullptr, end, &untouched), HPU_ERROR_INVALID_HANDLE, "start is NULL");
  EXPECT_HPU_FAIL(hpuEventElapsedTime(start, nullptr, &untouched), HPU_ERROR_INVALID_HANDLE, "end is NULL");
  EXPECT_EQ(untouched, 42);
  EXPECT_HPU_OK(hpuStreamDestroy(s));
  for (hpuEvent_t e : {start, end, never}) EXPECT_HPU_OK(hpuEventDestroy(e));
}

TEST_F(Streams, EventBadInput) {
  EXPECT_HPU_FAIL(hpuEventCreate(nullptr), HPU_ERROR_INVALID_ARGUMENT, "event is NULL");
  EXPECT_HPU_OK(hpuEventDestroy(nullptr));
  hpuStream_t s;
  ASSERT_HPU_OK(hpuDeviceGetDefaultStream(dev, &s));
  EXPECT_HPU_FAIL(hpuEventRecord(s, nullptr), HPU_ERROR_INVALID_HANDLE, "event is NULL");
  EXPECT_HPU_FAIL(hpuEventSynchronize(nullptr), HPU_ERROR_INVALID_HANDLE, "event is NULL");
  EXPECT_HPU_FAIL(hpuEventQuery(nullptr), HPU_ERROR_INVALID_HANDLE, "event is NULL");
  EXPECT_HPU_FAIL(hpuStreamWaitEvent(s, nullptr), HPU_ERROR_INVALID_HANDLE, "event is NULL");
  hpuEvent_t e;
  ASSERT_HPU_OK(hpuEventCreate(&e));
  EXPECT_HPU_FAIL(hpuEventRecord(nullptr, e), HPU_ERROR_INVALID_HANDLE, "stream is NULL");
  EXPECT_HPU_FAIL(hpuStreamWaitEvent(nullptr, e), HPU_ERROR_INVALID_HANDLE, "stream is NULL");
  ASSERT_HPU_OK(hpuEventDestroy(e));
  std::string v = ptr_text(e);
  EXPECT_HPU_FAIL(hpuEventDestroy(e), HPU_ERROR_INVALID_HANDLE, v.c_str(), "not a live event handle");
  EXPECT_HPU_FAIL(hpuEventRecord(s, e), HPU_ERROR_INVALID_HANDLE, v.c_str());
  EXPECT_HPU_FAIL(hpuEventQuery(e), HPU_ERROR_INVALID_HANDLE, v.c_str());
  EXPECT_HPU_FAIL(hpuEventSynchronize(e), HPU_ERROR_INVALID_HANDLE, v.c_str());
  EXPECT_HPU_FAIL(hpuStreamWaitEvent(s, e), HPU_ERROR_INVALID_HANDLE, v.c_str());
  hpuEvent_t wrong = reinterpret_cast<hpuEvent_t>(s);
  EXPECT_HPU_FAIL(hpuEventQuery(wrong), HPU_ERROR_INVALID_HANDLE, ptr_text(wrong).c_str());
}

TEST_F(Streams, WaitAcrossStreamsOrdersTheirWork) {
  const size_t n = 16 * MiB;
  char *x = alloc(n), *y = alloc(n);
  hpuStream_t producer, consumer;
  ASSERT_HPU_OK(hpuStreamCreate(&producer, dev));
  ASSERT_HPU_OK(hpuStreamCreate(&consumer, dev));
  hpuEvent_t ready;
  ASSERT_HPU_OK(hpuEventCreate(&ready));
  for (int round = 1; round <= 3; ++round) {
    ASSERT_HPU_OK(hpuMemsetAsync(producer, x, 0, n));
    ASSERT_HPU_OK(hpuMemsetAsync(producer, x, round, n));
    ASSERT_HPU_OK(hpuEventRecord(producer, ready));
    ASSERT_HPU_OK(hpuStreamWaitEvent(consumer, ready));
    ASSERT_HPU_OK(hpuMemcpyAsync(consumer, y, x, n, HPU_MEMCPY_DEVICE_TO_DEVICE));
    ASSERT_HPU_OK(hpuStreamSynchronize(consumer));
    EXPECT_TRUE(holds(y, n, round)) << "round " << round;
  }
  EXPECT_HPU_OK(hpuEventDestroy(ready));  // queued waits keep what they need alive
  EXPECT_HPU_OK(hpuStreamDestroy(producer));
  EXPECT_HPU_OK(hpuStreamDestroy(consumer));
}

TEST_F(Streams, WaitAcrossDevices) {
  hpuDevice_t other;
  ASSERT_HPU_OK(hpuDeviceOpen(&other, 1));
  const size_t n = 16 * MiB;
  char *x = alloc(n);
  void *y;
  ASSERT_HPU_OK(hpuMemAlloc(&y, other, n));
  hpuStream_t s0, s1;
  ASSERT_HPU_OK(hpuStreamCreate(&s0, dev));
  ASSERT_HPU_OK(hpuStreamCreate(&s1, other));
  hpuEvent_t e;
  ASSERT_HPU_OK(hpuEventCreate(&e));
  ASSERT_HPU_OK(hpuMemsetAsync(s0, x, 0x3C, n));
  ASSERT_HPU_OK(hpuEventRecord(s0, e));
  ASSERT_HPU_OK(hpuStreamWaitEvent(s1, e));
  ASSERT_HPU_OK(hpuMemcpyAsync(s1, y, x, n, HPU_MEMCPY_DEVICE_TO_DEVICE));
  ASSERT_HPU_OK(hpuStreamSynchronize(s1));
  EXPECT_TRUE(holds(y, n, 0x3C));
  EXPECT_HPU_OK(hpuEventDestroy(e));
  EXPECT_HPU_OK(hpuStreamDestroy(s0));
  EXPECT_HPU_OK(hpuStreamDestroy(s1));
  EXPECT_HPU_OK(hpuMemFree(y));
  EXPECT_HPU_OK(hpuDeviceClose(other));
}

TEST_F(Streams, FreeWhileWorkIsQueuedKeepsTheMemoryUntilItRuns) {
  const size_t n = 16 * MiB;
  void *src = alloc(n);
  void *dst;
  ASSERT_HPU_OK(hpuMemAlloc(&dst, dev, n));
  hpuStream_t s;
  ASSERT_HPU_OK(hpuStreamCreate(&s, dev));
  for (int i = 0; i < 8; ++i) ASSERT_HPU_OK(hpuMemcpyAsync(s, dst, src, n, HPU_MEMCPY_DEVICE_TO_DEVICE));
  // Whatever the worker has done by now, the free must not pull the memory
  // from under the queued copies, and the figures settle once they ran.
  ASSERT_HPU_OK(hpuMemFree(dst));
  ASSERT_HPU_OK(hpuStreamSynchronize(s));
  hpuMemStats_t st = HPU_MEM_STATS_INIT;
  ASSERT_HPU_OK(hpuMemStats(dev, &st));
  EXPECT_EQ(st.in_use, n);
  EXPECT_EQ(st.num_frees, 1u);
  EXPECT_HPU_OK(hpuStreamDestroy(s));
}

// Stream behaviour that needs an operation which fails or blocks on command:
// sticky errors and how every call reports them, work discarded after a
// failure, deferred frees, events and waits on a blocked stream, NOT_READY, and
// the process-wide compute budget. Queues such operations through the internal
// Stream API (see stream_internal.cmake); checks results through the C API.
#include <gtest/gtest.h>
#include <hpu/hpu.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <new>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "device/device.hpp"
#include "expect.hpp"

namespace {

constexpr size_t MiB = size_t(1) << 20;

std::shared_ptr<hpu::Stream> internal(hpuStream_t s) { return hpu::stream_registry().get(s); }

// Holds a stream at one point of its queue until opened.
class Gate {
 public:
  explicit Gate(hpuStream_t s) : future_(promise_.get_future().share()) {
    internal(s)->enqueue([f = future_] { f.wait(); }, hpu::OpKind::wait);
  }
  ~Gate() { open(); }
  void open() {
    if (!opened_.exchange(true)) promise_.set_value();
  }

 private:
  std::promise<void> promise_;
  std::shared_future<void> future_;
  std::atomic<bool> opened_{false};
};

void enqueue_failure(hpuStream_t s, hpuStatus_t status, const char *message) {
  internal(s)->enqueue([=] { hpu::fail(status, "%s", message); });
}

class StreamInternal : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_HPU_OK(hpuDeviceOpen(&dev, 0));
    ASSERT_HPU_OK(hpuStreamCreate(&stream, dev));
  }
  void TearDown() override {
    EXPECT_HPU_OK(hpuStreamDestroy(stream));
    EXPECT_HPU_OK(hpuDeviceClose(dev));
  }
  hpuDevice_t dev = nullptr;
  hpuStream_t stream = nullptr;
};

}  // namespace

TEST_F(StreamInternal, FailureIsStickyAndReportedByEveryCall) {
  void *buf;
  ASSERT_HPU_OK(hpuMemAlloc(&buf, dev, MiB));
  std::atomic<bool> later_ran{false};
  {
    Gate gate(stream);
    enqueue_failure(stream, HPU_ERROR_IO, "disk on fire");
    internal(stream)->enqueue([&] { later_ran = true; });  // queued before the failure happens
    EXPECT_EQ(hpuStreamQuery(stream), HPU_ERROR_NOT_READY);
  }
  EXPECT_HPU_FAIL(hpuStreamSynchronize(stream), HPU_ERROR_IO, "disk on fire");
  EXPECT_FALSE(later_ran) << "work queued behind a failed operation ran";
  EXPECT_HPU_FAIL(hpuStreamQuery(stream), HPU_ERROR_IO, "disk on fire");
  EXPECT_HPU_FAIL(hpuStreamSynchronize(stream), HPU_ERROR_IO, "disk on fire");
  EXPECT_HPU_FAIL(hpuMemsetAsync(stream, buf, 1, MiB), HPU_ERROR_IO, "disk on fire");
  std::vector<char> host(MiB);
  EXPECT_HPU_FAIL(hpuMemcpyAsync(stream, buf, host.data(), MiB, HPU_MEMCPY_HOST_TO_DEVICE), HPU_ERROR_IO,
                  "disk on fire");
  EXPECT_HPU_FAIL(hpuDeviceSynchronize(dev), HPU_ERROR_IO, "disk on fire");
  // Event records still complete, so nobody waits forever on them.
  hpuEvent_t e;
  ASSERT_HPU_OK(hpuEventCreate(&e));
  EXPECT_HPU_OK(hpuEventRecord(stream, e));
  EXPECT_HPU_OK(hpuEventSynchronize(e));
  EXPECT_HPU_OK(hpuEventQuery(e));
  // A wait on a failed stream is refused like any other work.
  EXPECT_HPU_FAIL(hpuStreamWaitEvent(stream, e), HPU_ERROR_IO, "disk on fire");
  // Other streams of the device are unaffected.
  hpuStream_t other;
  ASSERT_HPU_OK(hpuStreamCreate(&other, dev));
  EXPECT_HPU_OK(hpuMemsetAsync(other, buf, 2, MiB));
  EXPECT_HPU_OK(hpuStreamSynchronize(other));
  EXPECT_HPU_OK(hpuStreamDestroy(other));
  // The error dies with its stream.
  EXPECT_HPU_OK(hpuStreamDestroy(stream));
  EXPECT_HPU_OK(hpuDeviceSynchronize(dev));
  ASSERT_HPU_OK(hpuStreamCreate(&stream, dev));
  EXPECT_HPU_OK(hpuEventDestroy(e));
  EXPECT_HPU_OK(hpuMemFree(buf));
}

TEST_F(StreamInternal, EveryKindOfExceptionBecomesAStatus) {
  internal(stream)->enqueue([] { throw std::runtime_error("kaboom"); });
  EXPECT_HPU_FAIL(hpuStreamSynchronize(stream), HPU_ERROR_INTERNAL, "kaboom");
  hpuStream_t s2;
  ASSERT_HPU_OK(hpuStreamCreate(&s2, dev));
  internal(s2)->enqueue([] { throw std::bad_alloc(); });
  EXPECT_HPU_FAIL(hpuStreamSynchronize(s2), HPU_ERROR_OUT_OF_MEMORY, "host memory");
  EXPECT_HPU_OK(hpuStreamDestroy(s2));
}

TEST_F(StreamInternal, DefaultStreamErrorEndsWithTheLastClose) {
  hpuStream_t def;
  ASSERT_HPU_OK(hpuDeviceGetDefaultStream(dev, &def));
  void *buf;
  ASSERT_HPU_OK(hpuMemAlloc(&buf, dev, 4096));
  std::vector<char> host(4096, 7);
  enqueue_failure(def, HPU_ERROR_UNSUPPORTED, "no such kernel");
  // Synchronous copies and sets run on the default stream: they report it.
  EXPECT_HPU_FAIL(hpuMemcpy(buf, host.data(), 4096, HPU_MEMCPY_HOST_TO_DEVICE), HPU_ERROR_UNSUPPORTED,
                  "no such kernel");
  EXPECT_HPU_FAIL(hpuMemset(buf, 0, 4096), HPU_ERROR_UNSUPPORTED, "no such kernel");
  EXPECT_HPU_FAIL(hpuMemcpyAsync(nullptr, buf, host.data(), 4096, HPU_MEMCPY_HOST_TO_DEVICE), HPU_ERROR_UNSUPPORTED,
                  "no such kernel");
  EXPECT_HPU_OK(hpuMemFree(buf));
  EXPECT_HPU_OK(hpuStreamDestroy(stream));
  stream = nullptr;
  EXPECT_HPU_OK(hpuDeviceClose(dev));
  ASSERT_HPU_OK(hpuDeviceOpen(&dev, 0));
  ASSERT_HPU_OK(hpuMemAlloc(&buf, dev, 4096));
  EXPECT_HPU_OK(hpuMemcpy(buf, host.data(), 4096, HPU_MEMCPY_HOST_TO_DEVICE));
  EXPECT_HPU_OK(hpuMemFree(buf));
}

TEST_F(StreamInternal, FreeIsDeferredWhileQueuedWorkMayUseTheMemory) {
  void *buf;
  ASSERT_HPU_OK(hpuMemAlloc(&buf, dev, MiB));
  hpuMemStats_t s = HPU_MEM_STATS_INIT;
  {
    Gate gate(stream);
    ASSERT_HPU_OK(hpuMemsetAsync(stream, buf, 0x77, MiB));
    ASSERT_HPU_OK(hpuMemFree(buf));  // returns at once
    ASSERT_HPU_OK(hpuMemStats(dev, &s));
    EXPECT_EQ(s.in_use, MiB) << "memory released while queued work may still use it";
    EXPECT_EQ(s.num_frees, 0u);
    EXPECT_HPU_FAIL(hpuMemFree(buf), HPU_ERROR_INVALID_HANDLE, "already been freed");
    // The pending block is not handed out again.
    void *other;
    ASSERT_HPU_OK(hpuMemAlloc(&other, dev, MiB));
    EXPECT_NE(other, buf);
    ASSERT_HPU_OK(hpuMemFree(other));
  }
  ASSERT_HPU_OK(hpuStreamSynchronize(stream));
  ASSERT_HPU_OK(hpuMemStats(dev, &s));
  EXPECT_EQ(s.in_use, 0u);
  EXPECT_EQ(s.num_frees, 2u);
  EXPECT_EQ(s.num_allocs, 2u);
}

TEST_F(StreamInternal, BlockedStreamIsNotReady) {
  hpuEvent_t start, end;
  ASSERT_HPU_OK(hpuEventCreate(&start));
  ASSERT_HPU_OK(hpuEventCreate(&end));
  ASSERT_HPU_OK(hpuEventRecord(stream, start));
  {
    Gate gate(stream);
    ASSERT_HPU_OK(hpuEventRecord(stream, end));
    EXPECT_EQ(hpuStreamQuery(stream), HPU_ERROR_NOT_READY);
    EXPECT_EQ(hpuEventQuery(end), HPU_ERROR_NOT_READY);
    ASSERT_HPU_OK(hpuEventSynchronize(start));
    float ms = 42;
    EXPECT_HPU_FAIL(hpuEventElapsedTime(start, end, &ms), HPU_ERROR_NOT_READY, "end event has not completed");
    EXPECT_EQ(ms, 42);
  }
  EXPECT_HPU_OK(hpuEventSynchronize(end));
  EXPECT_HPU_OK(hpuEventQuery(end));
  EXPECT_HPU_OK(hpuStreamSynchronize(stream));  // the record has run; its stream may still be finishing it
  EXPECT_HPU_OK(hpuStreamQuery(stream));
  EXPECT_HPU_OK(hpuEventDestroy(start));
  EXPECT_HPU_OK(hpuEventDestroy(end));
}

TEST_F(StreamInternal, WaitEventHoldsTheWaitingStream) {
  hpuStream_t waiter;
  ASSERT_HPU_OK(hpuStreamCreate(&waiter, dev));
  hpuEvent_t e;
  ASSERT_HPU_OK(hpuEventCreate(&e));
  std::atomic<bool> ran{false};
  {
    Gate gate(stream);
    ASSERT_HPU_OK(hpuEventRecord(stream, e));
    ASSERT_HPU_OK(hpuStreamWaitEvent(waiter, e));
    internal(waiter)->enqueue([&] { ran = true; });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(ran);
    EXPECT_EQ(hpuStreamQuery(waiter), HPU_ERROR_NOT_READY);
  }
  EXPECT_HPU_OK(hpuStreamSynchronize(waiter));
  EXPECT_TRUE(ran);
  EXPECT_HPU_OK(hpuEventDestroy(e));
  EXPECT_HPU_OK(hpuStreamDestroy(waiter));
}

TEST_F(StreamInternal, EventSynchronizeBlocksUntilTheRecordRuns) {
  hpuEvent_t e;
  ASSERT_HPU_OK(hpuEventCreate(&e));
  auto gate = std::make_unique<Gate>(stream);
  ASSERT_HPU_OK(hpuEventRecord(stream, e));
  std::atomic<bool> returned{false};
  std::thread t([&] {
    EXPECT_HPU_OK(hpuEventSynchronize(e));
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(returned);
  gate->open();
  t.join();
  EXPECT_TRUE(returned);
  EXPECT_HPU_OK(hpuEventDestroy(e));
}

TEST_F(StreamInternal, AnOperationMustNotSynchronizeItsOwnStream) {
  hpuStatus_t seen = HPU_SUCCESS;
  hpuStream_t self = stream;
  internal(stream)->enqueue([&seen, self] { seen = hpuStreamSynchronize(self); });
  ASSERT_HPU_OK(hpuStreamSynchronize(stream));
  EXPECT_EQ(seen, HPU_ERROR_INVALID_USAGE);
}

TEST(StreamBudget, EightDevicesShareOneComputeBudget) {
  setenv("HPU_NUM_THREADS", "2", 1);
  std::atomic<int> running{0}, peak{0};
  std::vector<hpuDevice_t> devs(8);
  std::vector<hpuStream_t> streams(8);
  for (int i = 0; i < 8; ++i) {
    ASSERT_HPU_OK(hpuDeviceOpen(&devs[i], i));
    ASSERT_HPU_OK(hpuDeviceGetDefaultStream(devs[i], &streams[i]));
  }
  auto op = [&] {
    int now = ++running;
    int p = peak.load();
    while (now > p && !peak.compare_exchange_weak(p, now)) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    --running;
  };
  for (int round = 0; round < 4; ++round)
    for (int i = 0; i < 8; ++i) internal(streams[i])->enqueue(op, hpu::OpKind::compute);
  for (int i = 0; i < 8; ++i) ASSERT_HPU_OK(hpuStreamSynchronize(streams[i]));
  EXPECT_LE(peak.load(), 2) << "more compute operations ran at once than the budget allows";
  EXPECT_GE(peak.load(), 1);
  // Waits hold no token: eight blocked streams do not stop compute elsewhere.
  {
    std::vector<std::unique_ptr<Gate>> gates;
    for (int i = 0; i < 7; ++i) gates.push_back(std::make_unique<Gate>(streams[i]));
    std::atomic<bool> ran{false};
    internal(streams[7])->enqueue([&] { ran = true; }, hpu::OpKind::compute);
    ASSERT_HPU_OK(hpuStreamSynchronize(streams[7]));
    EXPECT_TRUE(ran);
  }
  for (int i = 0; i < 8; ++i) ASSERT_HPU_OK(hpuDeviceClose(devs[i]));
}

// Misuse of device memory, one case per finding of issue 21 (items 1, 3, 5):
// every function that takes device memory checks that the range lies inside
// one live allocation of an open device and writes nothing otherwise; memory
// that a tensor handle wraps cannot be freed; row numbers of a gather are
// checked for every kind; a close racing an allocation on another thread
// never lets both succeed.
#include <gtest/gtest.h>
#include <hpu/hpu.h>

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

#include "expect.hpp"

using hpu_test::ptr_text;

namespace {

constexpr size_t KiB = 1024;
const hpuMemcpyKind_t H2D = HPU_MEMCPY_HOST_TO_DEVICE, D2H = HPU_MEMCPY_DEVICE_TO_HOST,
                      D2D = HPU_MEMCPY_DEVICE_TO_DEVICE;

hpuDevice_t open_device(int ordinal) {
  hpuDevice_t dev = nullptr;
  EXPECT_HPU_OK(hpuDeviceOpen(&dev, ordinal));
  return dev;
}

hpuStream_t default_stream(hpuDevice_t dev) {
  hpuStream_t s = nullptr;
  EXPECT_HPU_OK(hpuDeviceGetDefaultStream(dev, &s));
  return s;
}

// Frees `blocks` of dev, then closes it.
void free_and_close(hpuDevice_t dev, std::initializer_list<void *> blocks) {
  for (void *p : blocks) EXPECT_HPU_OK(hpuMemFree(p));
  EXPECT_HPU_OK(hpuDeviceClose(dev));
}

char *alloc(hpuDevice_t dev, size_t bytes) {
  void *p = nullptr;
  EXPECT_HPU_OK(hpuMemAlloc(&p, dev, bytes));
  return static_cast<char *>(p);
}

void fill(void *d, unsigned char value, size_t bytes) { EXPECT_HPU_OK(hpuMemset(d, value, bytes)); }

// The bytes of device memory.
std::vector<unsigned char> read(const void *d, size_t bytes) {
  std::vector<unsigned char> out(bytes);
  EXPECT_HPU_OK(hpuMemcpy(out.data(), d, bytes, D2H));
  return out;
}

bool all_equal(const std::vector<unsigned char> &v, unsigned char value) {
  for (unsigned char c : v)
    if (c != value) return false;
  return true;
}

// A bad device range, and what every function taking it must answer.
struct BadRange {
  const char *what;
  char *ptr;
  size_t bytes;
  hpuStatus_t status;
  std::string piece;  // in the message, after "<arg> <ptr> (+<bytes> bytes) "
};

// Each copy and fill on r (as dst, and as src where a side may be device
// memory) fails with r's status and a message naming the argument, pointer
// and bytes; `other` is a good device range of r.bytes, `s` a stream.
void expect_copies_refuse(const BadRange &r, char *other, hpuStream_t s) {
  SCOPED_TRACE(r.what);
  std::vector<char> host(r.bytes, 1);
  auto named = [&](const char *arg) {
    return std::string(arg) + " " + ptr_text(r.ptr) + " (+" + std::to_string(r.bytes) + " bytes) " + r.piece;
  };
  const std::string dst = named("dst"), src = named("src");
  EXPECT_HPU_FAIL(hpuMemcpy(r.ptr, host.data(), r.bytes, H2D), r.status, dst.c_str());
  EXPECT_HPU_FAIL(hpuMemcpyAsync(s, r.ptr, host.data(), r.bytes, H2D), r.status, dst.c_str());
  EXPECT_HPU_FAIL(hpuMemcpy(r.ptr, other, r.bytes, D2D), r.status, dst.c_str());
  EXPECT_HPU_FAIL(hpuMemcpyAsync(s, r.ptr, other, r.bytes, D2D), r.status, dst.c_str());
  EXPECT_HPU_FAIL(hpuMemcpy(host.data(), r.ptr, r.bytes, D2H), r.status, src.c_str());
  EXPECT_HPU_FAIL(hpuMemcpyAsync(s, host.data(), r.ptr, r.bytes, D2H), r.status, src.c_str());
  EXPECT_HPU_FAIL(hpuMemcpyAsync(s, other, r.ptr, r.bytes, D2D), r.status, src.c_str());
  EXPECT_HPU_FAIL(hpuMemset(r.ptr, 0xEE, r.bytes), r.status, dst.c_str());
  EXPECT_HPU_FAIL(hpuMemsetAsync(s, r.ptr, 0xEE, r.bytes), r.status, dst.c_str());
  EXPECT_HPU_OK(hpuStreamSynchronize(s));
  for (char c : host) EXPECT_EQ(c, 1);  // nothing read into host memory either
}

}  // namespace

// 65,536 + 512 bytes into a 64 KiB allocation used to succeed and overwrite
// the next allocation.
TEST(Misuse, CopyPastTheEndOfAnAllocationLeavesItsNeighbourAlone) {
  hpuDevice_t dev = open_device(0);
  hpuStream_t s = default_stream(dev);
  char *a = alloc(dev, 64 * KiB), *b = alloc(dev, 64 * KiB), *other = alloc(dev, 64 * KiB + 512);
  fill(a, 0x11, 64 * KiB);
  fill(b, 0x22, 64 * KiB);
  const std::string end = "runs 512 bytes past the end of its 65536-byte allocation at " + ptr_text(a);
  expect_copies_refuse({"64 KiB + 512", a, 64 * KiB + 512, HPU_ERROR_INVALID_ARGUMENT, end}, other, s);
  EXPECT_TRUE(all_equal(read(a, 64 * KiB), 0x11));
  EXPECT_TRUE(all_equal(read(b, 64 * KiB), 0x22));
  free_and_close(dev, {a, b, other});
}

// The end is the byte count asked for, not the rounded size the allocator
// holds: one past it, and ranges that run over it (from the start or from
// inside), are refused.
TEST(Misuse, OnePastTheEndAndOverrunsOfTheRequestedBytes) {
  hpuDevice_t dev = open_device(0);
  hpuStream_t s = default_stream(dev);
  char *p = alloc(dev, 1000), *other = alloc(dev, 2048);  // p: 1024 bytes held
  fill(p, 0x33, 1000);
  expect_copies_refuse({"one past the end", p + 1000, 1, HPU_ERROR_INVALID_HANDLE,
                        "is not in a live allocation of device 0"},
                       other, s);
  expect_copies_refuse({"the rounding", p, 1024, HPU_ERROR_INVALID_ARGUMENT,
                        "runs 24 bytes past the end of its 1000-byte allocation"},
                       other, s);
  expect_copies_refuse({"from inside", p + 500, 600, HPU_ERROR_INVALID_ARGUMENT,
                        "runs 100 bytes past the end of its 1000-byte allocation at " + ptr_text(p)},
                       other, s);
  EXPECT_TRUE(all_equal(read(p, 1000), 0x33));
  // The same ranges within the allocation are fine.
  EXPECT_HPU_OK(hpuMemset(p + 999, 0x44, 1));
  EXPECT_HPU_OK(hpuMemcpy(other, p + 500, 500, D2D));
  free_and_close(dev, {p, other});
}

// Freed memory that the allocator still caches is not live.
TEST(Misuse, FreedMemoryIsRefused) {
  hpuDevice_t dev = open_device(0);
  hpuStream_t s = default_stream(dev);
  // p between two live blocks: once freed and merged into the free pool, the
  // 8 KiB request below cannot take its place.
  char *before = alloc(dev, 4 * KiB), *p = alloc(dev, 4 * KiB), *after = alloc(dev, 4 * KiB);
  EXPECT_HPU_OK(hpuMemFree(p));
  char *other = alloc(dev, 8 * KiB);  // a size of its own: the freed block goes back to the pool
  ASSERT_FALSE(p >= other && p < other + 8 * KiB);
  expect_copies_refuse({"freed", p, 4 * KiB, HPU_ERROR_INVALID_HANDLE, "is not in a live allocation of device 0"},
                       other, s);
  expect_copies_refuse({"freed, inside", p + 100, 16, HPU_ERROR_INVALID_HANDLE, "is not in a live allocation"}, other,
                       s);
  free_and_close(dev, {before, after, other});
}

// A freed block is parked for the next request of its size: until then it is
// not live, and nothing is written to it; the next request of the same
// rounded size gets it back with its own byte count.
TEST(Misuse, ParkedMemoryIsRefusedUntilAllocatedAgain) {
  hpuDevice_t dev = open_device(0);
  hpuStream_t s = default_stream(dev);
  char *other = alloc(dev, 64 * KiB);
  char *p = alloc(dev, 4 * KiB);
  fill(p, 0x55, 4 * KiB);
  EXPECT_HPU_OK(hpuMemFree(p));
  expect_copies_refuse({"parked", p, 4 * KiB, HPU_ERROR_INVALID_HANDLE, "is not in a live allocation of device 0"},
                       other, s);
  char *q = alloc(dev, 4000);  // rounded to 4 KiB: the parked block
  ASSERT_EQ(q, p);
  EXPECT_TRUE(all_equal(read(q, 4000), 0x55));  // the refused fills wrote nothing
  expect_copies_refuse({"parked, reused smaller", q, 4 * KiB, HPU_ERROR_INVALID_ARGUMENT,
                        "runs 96 bytes past the end of its 4000-byte allocation"},
                       other, s);
  EXPECT_HPU_OK(hpuMemset(q, 0, 4000));
  free_and_close(dev, {q, other});
}

// Memory freed with work still queued stops being live at once, although the
// allocator keeps it until the work is done.
TEST(Misuse, MemoryWhoseFreeWaitsForQueuedWorkIsRefused) {
  hpuDevice_t dev = open_device(0);
  hpuStream_t s;
  ASSERT_HPU_OK(hpuStreamCreate(&s, dev));
  const size_t big = size_t(64) << 20;
  char *busy = alloc(dev, big), *p = alloc(dev, 4 * KiB), *other = alloc(dev, 4 * KiB);
  for (int i = 0; i < 8; ++i) ASSERT_HPU_OK(hpuMemsetAsync(s, busy, i, big));
  EXPECT_HPU_OK(hpuMemFree(p));  // deferred behind the fills, or done at once if they are over
  expect_copies_refuse({"freed, waiting", p, 4 * KiB, HPU_ERROR_INVALID_HANDLE, "is not in a live allocation"}, other,
                       s);
  EXPECT_HPU_FAIL(hpuMemFree(p), HPU_ERROR_INVALID_HANDLE, ptr_text(p).c_str());
  EXPECT_HPU_OK(hpuStreamSynchronize(s));
  EXPECT_HPU_OK(hpuStreamDestroy(s));
  free_and_close(dev, {busy, other});
}

// Memory of a closed device, queued on a stream of an open one, used to be
// accepted (the segment is still cached).
TEST(Misuse, MemoryOfAClosedDeviceOnAnotherDevicesStream) {
  hpuDevice_t d0 = open_device(0), d1 = open_device(1);
  hpuStream_t s0;
  ASSERT_HPU_OK(hpuStreamCreate(&s0, d0));
  char *other = alloc(d0, 4 * KiB);
  char *p = alloc(d1, 4 * KiB);
  EXPECT_HPU_OK(hpuMemFree(p));
  ASSERT_HPU_OK(hpuDeviceClose(d1));
  expect_copies_refuse(
      {"closed device", p, 4 * KiB, HPU_ERROR_INVALID_HANDLE, "is memory of device 1, which is closed"}, other, s0);
  EXPECT_HPU_OK(hpuStreamDestroy(s0));
  free_and_close(d0, {other});
}

// hpuAllreduce on a one-device communicator checks both buffers the same way
// and writes nothing when one is bad.
TEST(Misuse, CollectiveBuffersLieInOneLiveAllocation) {
  hpuDevice_t dev = open_device(0), d1 = open_device(1);
  hpuComm_t comm;
  ASSERT_HPU_OK(hpuCommInitAll(&comm, 1, &dev));
  hpuStream_t s = default_stream(dev);
  const size_t n = 16 * KiB;  // floats: 64 KiB
  char *send = alloc(dev, n * 4), *recv = alloc(dev, n * 4), *next = alloc(dev, 64 * KiB);
  fill(send, 0x01, n * 4);
  fill(recv, 0x02, n * 4);
  fill(next, 0x03, 64 * KiB);
  EXPECT_HPU_FAIL(hpuAllreduce(s, comm, send, recv, n + 128, HPU_FLOAT32, HPU_SUM), HPU_ERROR_INVALID_ARGUMENT,
                  ("send " + ptr_text(send) +
                   " (+66048 bytes) runs 512 bytes past the end of its 65536-byte "
                   "allocation")
                      .c_str());
  EXPECT_HPU_FAIL(hpuAllreduce(s, comm, recv, recv, n + 128, HPU_FLOAT32, HPU_SUM), HPU_ERROR_INVALID_ARGUMENT,
                  ("send " + ptr_text(recv) + " (+66048 bytes) runs 512 bytes").c_str());
  EXPECT_HPU_FAIL(hpuAllreduce(s, comm, send, recv + 4, n, HPU_FLOAT32, HPU_SUM), HPU_ERROR_INVALID_ARGUMENT,
                  ("recv " + ptr_text(recv + 4) + " (+65536 bytes) runs 4 bytes past the end").c_str());
  char *freed = alloc(dev, n * 4);
  EXPECT_HPU_OK(hpuMemFree(freed));  // parked
  EXPECT_HPU_FAIL(hpuAllreduce(s, comm, send, freed, n, HPU_FLOAT32, HPU_SUM), HPU_ERROR_INVALID_HANDLE,
                  ("recv " + ptr_text(freed) + " (+65536 bytes) is not in a live allocation").c_str());
  char *closed = alloc(d1, n * 4);
  EXPECT_HPU_FAIL(hpuAllreduce(s, comm, closed, recv, n, HPU_FLOAT32, HPU_SUM), HPU_ERROR_INVALID_HANDLE,
                  ("send " + ptr_text(closed) + " (+65536 bytes) is memory of device 1, not of device 0").c_str());
  EXPECT_HPU_OK(hpuMemFree(closed));
  ASSERT_HPU_OK(hpuDeviceClose(d1));
  EXPECT_HPU_FAIL(hpuAllreduce(s, comm, closed, recv, n, HPU_FLOAT32, HPU_SUM), HPU_ERROR_INVALID_HANDLE,
                  ("send " + ptr_text(closed) + " (+65536 bytes) is memory of device 1, which is closed").c_str());
  EXPECT_HPU_OK(hpuStreamSynchronize(s));
  EXPECT_TRUE(all_equal(read(recv, n * 4), 0x02));
  EXPECT_TRUE(all_equal(read(next, 64 * KiB), 0x03));
  // The same buffers, within their allocations, are fine.
  EXPECT_HPU_OK(hpuAllreduce(s, comm, send, recv, n, HPU_FLOAT32, HPU_SUM));
  EXPECT_HPU_OK(hpuStreamSynchronize(s));
  EXPECT_TRUE(all_equal(read(recv, n * 4), 0x01));
  EXPECT_HPU_OK(hpuCommDestroy(comm));
  free_and_close(dev, {send, recv, next});
}

// hpuTensorWrap: the elements lie in one live allocation of an open device.
TEST(Misuse, TensorWrapTakesOnlyLiveAllocations) {
  hpuDevice_t dev = open_device(0), d1 = open_device(1);
  char *p = alloc(dev, 64 * KiB);
  hpuTensor_t t = nullptr;
  const int64_t fits[] = {16 * 1024}, over[] = {16 * 1024 + 128};
  EXPECT_HPU_FAIL(hpuTensorWrap(&t, p, HPU_FLOAT32, 1, over, nullptr), HPU_ERROR_INVALID_ARGUMENT,
                  ("data " + ptr_text(p) + " (+66048 bytes) runs 512 bytes past the end of its 65536-byte "
                   "allocation").c_str());
  EXPECT_HPU_FAIL(hpuTensorWrap(&t, p + 4, HPU_FLOAT32, 1, fits, nullptr), HPU_ERROR_INVALID_ARGUMENT,
                  "runs 4 bytes past the end");
  char *freed = alloc(dev, 64 * KiB);
  EXPECT_HPU_OK(hpuMemFree(freed));
  EXPECT_HPU_FAIL(hpuTensorWrap(&t, freed, HPU_FLOAT32, 1, fits, nullptr), HPU_ERROR_INVALID_HANDLE,
                  ("data " + ptr_text(freed) + " (+65536 bytes) is not in a live allocation").c_str());
  char *closed = alloc(d1, 64 * KiB);
  EXPECT_HPU_OK(hpuMemFree(closed));
  ASSERT_HPU_OK(hpuDeviceClose(d1));
  EXPECT_HPU_FAIL(hpuTensorWrap(&t, closed, HPU_FLOAT32, 1, fits, nullptr), HPU_ERROR_INVALID_HANDLE,
                  "is memory of device 1, which is closed");
  EXPECT_EQ(t, nullptr);
  EXPECT_HPU_OK(hpuTensorWrap(&t, p, HPU_FLOAT32, 1, fits, nullptr));
  EXPECT_HPU_OK(hpuTensorRelease(t));
  EXPECT_HPU_OK(hpuMemFree(p));
  EXPECT_HPU_OK(hpuDeviceClose(dev));
}

// Memory that a tensor handle wraps cannot be freed (the tensor would write
// freed memory): HPU_ERROR_BUSY until the tensor and every view of it are
// released; queued work on it does not hold the memory (the free waits for it).
TEST(Misuse, FreeingWrappedMemoryIsBusyUntilEveryHandleIsReleased) {
  hpuDevice_t dev = open_device(0);
  char *p = alloc(dev, 64 * KiB);
  hpuTensor_t t, view;
  const int64_t shape[] = {16 * 1024};
  ASSERT_HPU_OK(hpuTensorWrap(&t, p, HPU_FLOAT32, 1, shape, nullptr));
  ASSERT_HPU_OK(hpuTensorSlice(&view, t, 0, 0, 8, 1));
  EXPECT_HPU_FAIL(hpuMemFree(p), HPU_ERROR_BUSY, ("ptr " + ptr_text(p)).c_str(), "2 live tensor handles");
  EXPECT_HPU_OK(hpuTensorRetain(t));
  EXPECT_HPU_OK(hpuTensorRelease(t));  // one reference left: still wrapped
  EXPECT_HPU_FAIL(hpuMemFree(p), HPU_ERROR_BUSY, "2 live tensor handles");
  EXPECT_HPU_OK(hpuTensorRelease(t));
  EXPECT_HPU_FAIL(hpuMemFree(p), HPU_ERROR_BUSY, "1 live tensor handle");
  EXPECT_HPU_FAIL(hpuDeviceClose(dev), HPU_ERROR_BUSY, "1 allocation");
  EXPECT_HPU_OK(hpuTensorFill(nullptr, view, 2.0));  // queued; the view is then released
  EXPECT_HPU_OK(hpuTensorRelease(view));
  EXPECT_HPU_OK(hpuMemFree(p));
  EXPECT_HPU_FAIL(hpuMemFree(p), HPU_ERROR_INVALID_HANDLE, ptr_text(p).c_str());
  EXPECT_HPU_OK(hpuDeviceClose(dev));
}

// A row number of 2^40 used to crash the gather from host memory (the worker
// read far outside the host buffer) and was blamed on src for device memory.
TEST(Misuse, RowGatherRowNumberOf2To40ForEveryKind) {
  hpuDevice_t dev = open_device(0);
  hpuStream_t s = default_stream(dev);
  const size_t row = 16, n = 64;
  char *dst = alloc(dev, n * row), *src = alloc(dev, n * row);
  fill(dst, 0x66, n * row);
  std::vector<char> host_src(n * row, 7), host_dst(n * row, 8);
  const int64_t rows[] = {1, int64_t(1) << 40, 2};
  const char *named = "rows[1] is 1099511627776";
  EXPECT_HPU_FAIL(hpuMemcpyRowsAsync(s, dst, host_src.data(), row, rows, 3, H2D), HPU_ERROR_INVALID_ARGUMENT, named,
                  "not memory of this process");
  EXPECT_HPU_FAIL(hpuMemcpyRowsAsync(s, host_dst.data(), src, row, rows, 3, D2H), HPU_ERROR_INVALID_ARGUMENT, named,
                  ("src " + ptr_text(src) + " holds 64 rows of row_bytes 16").c_str());
  EXPECT_HPU_FAIL(hpuMemcpyRowsAsync(s, dst, src, row, rows, 3, D2D), HPU_ERROR_INVALID_ARGUMENT, named,
                  "holds 64 rows");
  // Row numbers in range, but past the end of a device src's allocation.
  const int64_t one_past[] = {64}, inside[] = {63};
  EXPECT_HPU_FAIL(hpuMemcpyRowsAsync(s, dst, src, row, one_past, 1, D2D), HPU_ERROR_INVALID_ARGUMENT,
                  "rows[0] is 64, but src");
  EXPECT_HPU_FAIL(hpuMemcpyRowsAsync(s, dst, src + row, row, inside, 1, D2D), HPU_ERROR_INVALID_ARGUMENT,
                  "rows[0] is 63, but src", "holds 63 rows");
  EXPECT_HPU_OK(hpuStreamSynchronize(s));
  EXPECT_TRUE(all_equal(read(dst, n * row), 0x66));
  for (char c : host_dst) EXPECT_EQ(c, 8);
  EXPECT_HPU_OK(hpuMemcpyRowsAsync(s, dst, src, row, inside, 1, D2D));
  EXPECT_HPU_OK(hpuStreamSynchronize(s));
  free_and_close(dev, {dst, src});
}

// hpuDeviceClose racing hpuMemAlloc (and hpuMemFree) on the same device from
// another thread: never both succeed; an allocation that succeeds makes the
// close fail with HPU_ERROR_BUSY, and a close that succeeds leaves the device
// with nothing allocated.
TEST(Misuse, CloseRacingAllocOnTheSameDevice) {
  int both = 0, alloc_won = 0, close_won = 0;
  for (int i = 0; i < 2000; ++i) {
    hpuDevice_t dev = open_device(2);
    void *held = alloc(dev, 512);  // freed by the racing thread
    std::atomic<int> ready{0};
    void *p = nullptr;
    hpuStatus_t alloc_status = HPU_SUCCESS, free_status = HPU_SUCCESS, close_status = HPU_SUCCESS;
    std::string alloc_message;
    auto start = [&] {
      ready.fetch_add(1);
      while (ready.load() < 2) {
      }
    };
    std::thread other([&] {
      start();
      free_status = hpuMemFree(held);
      alloc_status = hpuMemAlloc(&p, dev, 4096);
      if (alloc_status != HPU_SUCCESS) alloc_message = hpuGetLastErrorMessage();
    });
    start();
    close_status = hpuDeviceClose(dev);
    other.join();
    ASSERT_EQ(free_status, HPU_SUCCESS) << hpuGetErrorName(free_status);
    if (alloc_status == HPU_SUCCESS && close_status == HPU_SUCCESS) ++both;
    if (close_status == HPU_SUCCESS) {
      ++close_won;
      EXPECT_EQ(alloc_status, HPU_ERROR_INVALID_HANDLE) << hpuGetErrorName(alloc_status);
      EXPECT_NE(alloc_message.find("dev " + ptr_text(dev)), std::string::npos) << alloc_message;
      EXPECT_EQ(p, nullptr);
      hpuDevice_t again = open_device(2);  // nothing survived the close
      hpuMemStats_t st = HPU_MEM_STATS_INIT;
      EXPECT_HPU_OK(hpuMemStats(again, &st));
      EXPECT_EQ(st.in_use, 0u);
      EXPECT_HPU_OK(hpuDeviceClose(again));
    } else {
      ++alloc_won;
      ASSERT_EQ(close_status, HPU_ERROR_BUSY) << hpuGetErrorName(close_status);
      ASSERT_EQ(alloc_status, HPU_SUCCESS);
      EXPECT_HPU_OK(hpuMemFree(p));
      EXPECT_HPU_OK(hpuDeviceClose(dev));
    }
    if (both) break;
  }
  EXPECT_EQ(both, 0);
  std::printf("close first %d times, alloc first %d times\n", close_won, alloc_won);
}

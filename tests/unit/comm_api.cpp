// Bad input to every communicator and collective function: a status and a
// message naming the argument and its value; out-pointers untouched.
#include <chrono>
#include <cmath>
#include <thread>

#include "comm_harness.hpp"
#include "expect.hpp"

using namespace comm_test;

namespace {

hpuComm_t bogus_comm() { return reinterpret_cast<hpuComm_t>(uintptr_t(0xC000000100000007ull)); }

}  // namespace

TEST(CommApi, UniqueIdAndInit) {
  EXPECT_HPU_FAIL(hpuGetUniqueId(nullptr), HPU_ERROR_INVALID_ARGUMENT, "id is NULL");
  hpuUniqueId_t id;
  EXPECT_HPU_OK(hpuGetUniqueId(&id));
  hpuDevice_t dev;
  ASSERT_HPU_OK(hpuDeviceOpen(&dev, 0));
  hpuComm_t comm = bogus_comm();
  EXPECT_HPU_FAIL(hpuCommInitRank(nullptr, dev, 1, &id, 0), HPU_ERROR_INVALID_ARGUMENT, "comm is NULL");
  EXPECT_HPU_FAIL(hpuCommInitRank(&comm, nullptr, 1, &id, 0), HPU_ERROR_INVALID_HANDLE, "dev is NULL");
  EXPECT_HPU_FAIL(hpuCommInitRank(&comm, dev, 0, &id, 0), HPU_ERROR_INVALID_ARGUMENT, "nranks 0");
  EXPECT_HPU_FAIL(hpuCommInitRank(&comm, dev, 100000, &id, 0), HPU_ERROR_INVALID_ARGUMENT, "nranks 100000");
  EXPECT_HPU_FAIL(hpuCommInitRank(&comm, dev, 1, nullptr, 0), HPU_ERROR_INVALID_ARGUMENT, "id is NULL");
  EXPECT_HPU_FAIL(hpuCommInitRank(&comm, dev, 2, &id, 2), HPU_ERROR_INVALID_ARGUMENT, "rank 2", "nranks 2");
  EXPECT_HPU_FAIL(hpuCommInitRank(&comm, dev, 2, &id, -1), HPU_ERROR_INVALID_ARGUMENT, "rank -1");
  hpuUniqueId_t junk;
  std::memset(&junk, 0x5A, sizeof junk);
  EXPECT_HPU_FAIL(hpuCommInitRank(&comm, dev, 1, &junk, 0), HPU_ERROR_INVALID_ARGUMENT, "id is not a unique id");
  EXPECT_EQ(comm, bogus_comm());  // untouched

  hpuComm_t comms[2] = {bogus_comm(), bogus_comm()};
  hpuDevice_t devs[2] = {dev, dev};
  EXPECT_HPU_FAIL(hpuCommInitAll(nullptr, 1, devs), HPU_ERROR_INVALID_ARGUMENT, "comms is NULL");
  EXPECT_HPU_FAIL(hpuCommInitAll(comms, 0, devs), HPU_ERROR_INVALID_ARGUMENT, "ndev 0");
  EXPECT_HPU_FAIL(hpuCommInitAll(comms, 1, nullptr), HPU_ERROR_INVALID_ARGUMENT, "devs is NULL");
  EXPECT_HPU_FAIL(hpuCommInitAll(comms, 2, devs), HPU_ERROR_INVALID_ARGUMENT, "devs[0] and devs[1]");
  hpuDevice_t closed_devs[1] = {reinterpret_cast<hpuDevice_t>(uintptr_t(0xD100000500000001ull))};
  EXPECT_HPU_FAIL(hpuCommInitAll(comms, 1, closed_devs), HPU_ERROR_INVALID_HANDLE, "devs[0]");
  EXPECT_EQ(comms[0], bogus_comm());

  // Two ranks that disagree on the group size.
  hpuDevice_t dev1;
  ASSERT_HPU_OK(hpuDeviceOpen(&dev1, 1));
  hpuComm_t a = nullptr;
  hpuStatus_t sa = HPU_SUCCESS;
  std::thread t([&] { sa = hpuCommInitRank(&a, dev, 2, &id, 0); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  hpuComm_t b = nullptr;
  EXPECT_HPU_FAIL(hpuCommInitRank(&b, dev1, 3, &id, 1), HPU_ERROR_INVALID_USAGE, "nranks 3", "nranks 2");
  hpuComm_t c = nullptr;
  EXPECT_HPU_OK(hpuCommInitRank(&c, dev1, 2, &id, 1));
  t.join();
  EXPECT_EQ(sa, HPU_SUCCESS);
  EXPECT_HPU_OK(hpuCommDestroy(a));
  EXPECT_HPU_OK(hpuCommDestroy(c));
  EXPECT_HPU_OK(hpuDeviceClose(dev1));
  EXPECT_HPU_OK(hpuDeviceClose(dev));
}

TEST(CommApi, Lifecycle) {
  EXPECT_HPU_OK(hpuCommDestroy(nullptr));
  EXPECT_HPU_OK(hpuCommAbort(nullptr));
  EXPECT_HPU_FAIL(hpuCommDestroy(bogus_comm()), HPU_ERROR_INVALID_HANDLE, "comm");
  EXPECT_HPU_FAIL(hpuCommAbort(bogus_comm()), HPU_ERROR_INVALID_HANDLE, "comm");
  hpuStatus_t err = HPU_ERROR_INTERNAL;
  int n = -5;
  double t = -5;
  EXPECT_HPU_FAIL(hpuCommGetAsyncError(nullptr, &err), HPU_ERROR_INVALID_HANDLE, "comm is NULL");
  EXPECT_HPU_FAIL(hpuCommCount(bogus_comm(), &n), HPU_ERROR_INVALID_HANDLE, "not a live comm handle");
  EXPECT_HPU_FAIL(hpuCommUserRank(nullptr, &n), HPU_ERROR_INVALID_HANDLE, "comm is NULL");
  EXPECT_HPU_FAIL(hpuCommSetTimeout(nullptr, 1), HPU_ERROR_INVALID_HANDLE, "comm is NULL");
  EXPECT_HPU_FAIL(hpuCommGetTimeout(nullptr, &t), HPU_ERROR_INVALID_HANDLE, "comm is NULL");
  EXPECT_EQ(err, HPU_ERROR_INTERNAL);
  EXPECT_EQ(n, -5);

  Group g(2);
  EXPECT_HPU_FAIL(hpuCommGetAsyncError(g.comm(0), nullptr), HPU_ERROR_INVALID_ARGUMENT, "error is NULL");
  EXPECT_HPU_FAIL(hpuCommCount(g.comm(0), nullptr), HPU_ERROR_INVALID_ARGUMENT, "count is NULL");
  EXPECT_HPU_FAIL(hpuCommUserRank(g.comm(0), nullptr), HPU_ERROR_INVALID_ARGUMENT, "rank is NULL");
  EXPECT_HPU_FAIL(hpuCommGetTimeout(g.comm(0), nullptr), HPU_ERROR_INVALID_ARGUMENT, "seconds is NULL");
  EXPECT_HPU_FAIL(hpuCommSetTimeout(g.comm(0), -1), HPU_ERROR_INVALID_ARGUMENT, "seconds -1");
  EXPECT_HPU_FAIL(hpuCommSetTimeout(g.comm(0), NAN), HPU_ERROR_INVALID_ARGUMENT, "seconds nan");
  EXPECT_HPU_FAIL(hpuCommSetTimeout(g.comm(0), 1e9), HPU_ERROR_INVALID_ARGUMENT, "seconds 1e+09");
  // A device handle is not a communicator.
  EXPECT_HPU_FAIL(hpuCommCount(reinterpret_cast<hpuComm_t>(g.dev(0)), &n), HPU_ERROR_INVALID_HANDLE,
                  "not a live comm handle");
  // A destroyed communicator is rejected, never used.
  hpuComm_t extra[2];
  hpuDevice_t devs[2] = {g.dev(0), g.dev(1)};
  ASSERT_HPU_OK(hpuCommInitAll(extra, 2, devs));
  EXPECT_HPU_OK(hpuCommDestroy(extra[0]));
  EXPECT_HPU_OK(hpuCommDestroy(extra[1]));
  EXPECT_HPU_FAIL(hpuCommCount(extra[0], &n), HPU_ERROR_INVALID_HANDLE, "not a live comm handle");
  EXPECT_HPU_FAIL(hpuAllreduce(nullptr, extra[1], nullptr, nullptr, 0, HPU_FLOAT32, HPU_SUM), HPU_ERROR_INVALID_HANDLE,
                  "not a live comm handle");
}

TEST(CommApi, Collectives) {
  Group g(2);
  hpuComm_t c = g.comm(0);
  Buffer a(g.dev(0), 4096), b(g.dev(0), 4096), other(g.dev(1), 4096);
  char host[64];
  void *A = a.ptr(), *B = b.ptr();
  const auto ptr_of = [](const void *p) { return hpu_test::ptr_text(p); };

  // Handles.
  EXPECT_HPU_FAIL(hpuAllreduce(nullptr, nullptr, A, B, 4, HPU_FLOAT32, HPU_SUM), HPU_ERROR_INVALID_HANDLE,
                  "comm is NULL");
  EXPECT_HPU_FAIL(hpuBroadcast(nullptr, bogus_comm(), A, B, 4, HPU_FLOAT32, 0), HPU_ERROR_INVALID_HANDLE, "comm");
  EXPECT_HPU_FAIL(hpuReduce(nullptr, nullptr, A, B, 4, HPU_FLOAT32, HPU_SUM, 0), HPU_ERROR_INVALID_HANDLE, "comm");
  EXPECT_HPU_FAIL(hpuAllgather(nullptr, nullptr, A, B, 4, HPU_FLOAT32), HPU_ERROR_INVALID_HANDLE, "comm");
  EXPECT_HPU_FAIL(hpuReduceScatter(nullptr, nullptr, A, B, 4, HPU_FLOAT32, HPU_SUM), HPU_ERROR_INVALID_HANDLE, "comm");
  EXPECT_HPU_FAIL(hpuAlltoall(nullptr, nullptr, A, B, 4, HPU_FLOAT32), HPU_ERROR_INVALID_HANDLE, "comm");
  EXPECT_HPU_FAIL(hpuBarrier(nullptr, nullptr), HPU_ERROR_INVALID_HANDLE, "comm is NULL");
  EXPECT_HPU_FAIL(hpuSend(nullptr, nullptr, A, 4, HPU_FLOAT32, 1), HPU_ERROR_INVALID_HANDLE, "comm");
  EXPECT_HPU_FAIL(hpuRecv(nullptr, nullptr, A, 4, HPU_FLOAT32, 1), HPU_ERROR_INVALID_HANDLE, "comm");
  EXPECT_HPU_FAIL(
      hpuAllreduce(reinterpret_cast<hpuStream_t>(uintptr_t(0x5E00000100000009ull)), c, A, B, 4, HPU_FLOAT32, HPU_SUM),
      HPU_ERROR_INVALID_HANDLE, "stream");
  EXPECT_HPU_FAIL(hpuAllreduce(g.stream(1), c, A, B, 4, HPU_FLOAT32, HPU_SUM), HPU_ERROR_INVALID_ARGUMENT,
                  "belongs to device 1", "device 0");
  EXPECT_HPU_FAIL(hpuBarrier(g.stream(1), c), HPU_ERROR_INVALID_ARGUMENT, "belongs to device 1");

  // Types and operations.
  auto bad_t = static_cast<hpuDataType_t>(11);
  auto bad_op = static_cast<hpuRedOp_t>(5);
  EXPECT_HPU_FAIL(hpuAllreduce(nullptr, c, A, B, 4, bad_t, HPU_SUM), HPU_ERROR_INVALID_ARGUMENT, "dtype 11");
  EXPECT_HPU_FAIL(hpuAllreduce(nullptr, c, A, B, 4, HPU_FLOAT32, bad_op), HPU_ERROR_INVALID_ARGUMENT, "op 5");
  EXPECT_HPU_FAIL(hpuAllreduce(nullptr, c, A, B, 4, HPU_FLOAT32, static_cast<hpuRedOp_t>(-1)),
                  HPU_ERROR_INVALID_ARGUMENT, "op -1");
  EXPECT_HPU_FAIL(hpuAllreduce(nullptr, c, A, B, 4, HPU_BOOL, HPU_AVG), HPU_ERROR_UNSUPPORTED, "HPU_AVG", "HPU_BOOL");
  EXPECT_HPU_FAIL(hpuBroadcast(nullptr, c, A, B, 4, bad_t, 0), HPU_ERROR_INVALID_ARGUMENT, "dtype 11");
  EXPECT_HPU_FAIL(hpuReduce(nullptr, c, A, B, 4, HPU_INT8, bad_op, 0), HPU_ERROR_INVALID_ARGUMENT, "op 5");
  EXPECT_HPU_FAIL(hpuAllgather(nullptr, c, A, B, 4, bad_t), HPU_ERROR_INVALID_ARGUMENT, "dtype 11");
  EXPECT_HPU_FAIL(hpuReduceScatter(nullptr, c, A, B, 4, HPU_FLOAT64, bad_op), HPU_ERROR_INVALID_ARGUMENT, "op 5");
  EXPECT_HPU_FAIL(hpuAlltoall(nullptr, c, A, B, 4, bad_t), HPU_ERROR_INVALID_ARGUMENT, "dtype 11");
  EXPECT_HPU_FAIL(hpuSend(nullptr, c, A, 4, bad_t, 1), HPU_ERROR_INVALID_ARGUMENT, "dtype 11");
  EXPECT_HPU_FAIL(hpuRecv(nullptr, c, A, 4, bad_t, 1), HPU_ERROR_INVALID_ARGUMENT, "dtype 11");

  // Roots and peers.
  EXPECT_HPU_FAIL(hpuBroadcast(nullptr, c, A, B, 4, HPU_FLOAT32, 2), HPU_ERROR_INVALID_ARGUMENT, "root 2", "2 ranks");
  EXPECT_HPU_FAIL(hpuReduce(nullptr, c, A, B, 4, HPU_FLOAT32, HPU_SUM, -1), HPU_ERROR_INVALID_ARGUMENT, "root -1");
  EXPECT_HPU_FAIL(hpuSend(nullptr, c, A, 4, HPU_FLOAT32, 2), HPU_ERROR_INVALID_ARGUMENT, "peer 2");
  EXPECT_HPU_FAIL(hpuRecv(nullptr, c, A, 4, HPU_FLOAT32, -3), HPU_ERROR_INVALID_ARGUMENT, "peer -3");

  // Buffers: NULL, host memory, another device's memory, too short, overlapping.
  EXPECT_HPU_FAIL(hpuAllreduce(nullptr, c, nullptr, B, 4, HPU_FLOAT32, HPU_SUM), HPU_ERROR_INVALID_ARGUMENT,
                  "send is NULL");
  EXPECT_HPU_FAIL(hpuAllreduce(nullptr, c, A, nullptr, 4, HPU_FLOAT32, HPU_SUM), HPU_ERROR_INVALID_ARGUMENT,
                  "recv is NULL");
  EXPECT_HPU_FAIL(hpuAllreduce(nullptr, c, host, B, 4, HPU_FLOAT32, HPU_SUM), HPU_ERROR_INVALID_HANDLE,
                  ("send " + ptr_of(host)).c_str(), "not device memory");
  EXPECT_HPU_FAIL(hpuAllreduce(nullptr, c, A, other.ptr(), 4, HPU_FLOAT32, HPU_SUM), HPU_ERROR_INVALID_HANDLE,
                  ("recv " + ptr_of(other.ptr())).c_str());
  EXPECT_HPU_FAIL(hpuAllreduce(nullptr, c, A, B, size_t(1) << 22, HPU_FLOAT32, HPU_SUM), HPU_ERROR_INVALID_ARGUMENT,
                  "send", "+16777216 bytes", "past the end of its");
  EXPECT_HPU_FAIL(hpuAllreduce(nullptr, c, A, a.ptr() + 4, 4, HPU_FLOAT32, HPU_SUM), HPU_ERROR_INVALID_ARGUMENT,
                  "overlap", "send == recv");
  EXPECT_HPU_FAIL(hpuAllreduce(nullptr, c, A, B, SIZE_MAX / 2, HPU_FLOAT32, HPU_SUM), HPU_ERROR_INVALID_ARGUMENT,
                  "count", "too large");
  EXPECT_HPU_FAIL(hpuBroadcast(nullptr, c, nullptr, B, 4, HPU_FLOAT32, 0), HPU_ERROR_INVALID_ARGUMENT, "send is NULL");
  EXPECT_HPU_FAIL(hpuBroadcast(nullptr, c, A, host, 4, HPU_FLOAT32, 1), HPU_ERROR_INVALID_HANDLE, "recv");
  EXPECT_HPU_FAIL(hpuReduce(nullptr, c, host, B, 4, HPU_FLOAT32, HPU_SUM, 1), HPU_ERROR_INVALID_HANDLE, "send");
  EXPECT_HPU_FAIL(hpuReduce(nullptr, c, A, nullptr, 4, HPU_FLOAT32, HPU_SUM, 0), HPU_ERROR_INVALID_ARGUMENT,
                  "recv is NULL");
  EXPECT_HPU_FAIL(hpuAllgather(nullptr, c, A, host, 4, HPU_FLOAT32), HPU_ERROR_INVALID_HANDLE, "recv", "+32 bytes");
  EXPECT_HPU_FAIL(hpuAllgather(nullptr, c, a.ptr() + 4, A, 4, HPU_FLOAT32), HPU_ERROR_INVALID_ARGUMENT, "overlap",
                  "send == recv + rank * sendcount");
  // send of reduce-scatter holds recvcount x ranks elements.
  EXPECT_HPU_FAIL(hpuReduceScatter(nullptr, c, A, B, size_t(3) << 20, HPU_FLOAT32, HPU_SUM), HPU_ERROR_INVALID_ARGUMENT,
                  "send", "+25165824 bytes", "past the end of its");
  EXPECT_HPU_FAIL(hpuReduceScatter(nullptr, c, A, a.ptr() + 4, 4, HPU_FLOAT32, HPU_SUM), HPU_ERROR_INVALID_ARGUMENT,
                  "recv == send + rank * recvcount");
  EXPECT_HPU_FAIL(hpuAlltoall(nullptr, c, A, a.ptr() + 8, 4, HPU_FLOAT32), HPU_ERROR_INVALID_ARGUMENT, "overlap");
  EXPECT_HPU_FAIL(hpuSend(nullptr, c, host, 4, HPU_FLOAT32, 1), HPU_ERROR_INVALID_HANDLE, "send");
  EXPECT_HPU_FAIL(hpuRecv(nullptr, c, nullptr, 4, HPU_FLOAT32, 1), HPU_ERROR_INVALID_ARGUMENT, "recv is NULL");

  // Groups.
  EXPECT_HPU_FAIL(hpuGroupEnd(), HPU_ERROR_INVALID_USAGE, "no group is open");
  EXPECT_HPU_OK(hpuGroupStart());
  EXPECT_HPU_FAIL(hpuAllreduce(nullptr, c, nullptr, B, 4, HPU_FLOAT32, HPU_SUM), HPU_ERROR_INVALID_ARGUMENT,
                  "send is NULL");
  EXPECT_HPU_OK(hpuGroupEnd());  // nothing was recorded

  // Nothing above was queued: the communicators still work together.
  for (int r = 0; r < 2; ++r) EXPECT_HPU_OK(hpuBarrier(nullptr, g.comm(r)));
  for (auto s : g.sync()) EXPECT_EQ(s, HPU_SUCCESS);
}

// After a failure the communicator's error is sticky: every later call fails
// at once with it, until hpuCommDestroy.
TEST(CommApi, StickyErrorFailsLaterCalls) {
  Group g(2);
  Buffer a(g.dev(0), 64);
  EXPECT_HPU_OK(hpuCommAbort(g.comm(0)));
  EXPECT_HPU_FAIL(hpuAllreduce(nullptr, g.comm(0), a.ptr(), a.ptr(), 4, HPU_FLOAT32, HPU_SUM), HPU_ERROR_ABORTED,
                  "hpuCommAbort was called on rank 0");
  EXPECT_HPU_FAIL(hpuBarrier(nullptr, g.comm(1)), HPU_ERROR_REMOTE, "rank 0 aborted");
  EXPECT_HPU_OK(hpuCommAbort(g.comm(0)));  // again: harmless
}

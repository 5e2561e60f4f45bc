// Determinism and faults: the same allreduce with ranks delayed at random gives
// the same bits everywhere; mismatched calls, abort from another thread, a rank
// that never arrives, and process exit with a blocked communicator.
#include <chrono>
#include <random>
#include <thread>

#include "child.hpp"
#include "comm_harness.hpp"

using namespace comm_test;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Random floats (not integers: rounding depends on the order of combination).
std::vector<uint8_t> random_input(hpuDataType_t t, size_t count, int rank) {
  std::mt19937 gen(1234u + static_cast<unsigned>(rank));
  std::uniform_real_distribution<double> dist(-1000.0, 1000.0);
  std::vector<double> v(count);
  for (auto &x : v) x = dist(gen) * (1.0 + 1e-7 * dist(gen));
  return encode(t, v);
}

}  // namespace

// 20 runs with each rank's call delayed at random: every rank of every run
// holds the same bits. Small (gather_allreduce) and large (direct) sizes, 3
// and 8 ranks, f32 and bf16 sums.
TEST(CommFaults, DeterministicUnderRandomDelays) {
  std::mt19937 delays(42);
  for (int n : {3, 8}) {
    Group g(n);
    for (hpuDataType_t t : {HPU_FLOAT32, HPU_BFLOAT16}) {
      for (size_t count : {size_t(1001), size_t(300007)}) {
        const size_t bytes = count * dtype_size(t);
        std::vector<std::unique_ptr<Buffer>> send, recv;
        for (int r = 0; r < n; ++r) {
          send.push_back(std::make_unique<Buffer>(g.dev(r), bytes));
          send.back()->upload(random_input(t, count, r));
          recv.push_back(std::make_unique<Buffer>(g.dev(r), bytes));
        }
        std::vector<uint8_t> first;
        for (int run = 0; run < 20; ++run) {
          std::vector<int> wait_us(static_cast<size_t>(n));
          for (auto &w : wait_us) w = static_cast<int>(delays() % 2000);
          std::vector<std::thread> threads;
          std::vector<hpuStatus_t> st(static_cast<size_t>(n));
          for (int r = 0; r < n; ++r)
            threads.emplace_back([&, r] {
              std::this_thread::sleep_for(std::chrono::microseconds(wait_us[static_cast<size_t>(r)]));
              st[static_cast<size_t>(r)] =
                  hpuAllreduce(g.stream(r), g.comm(r), send[r]->ptr(), recv[r]->ptr(), count, t, HPU_SUM);
              if (st[static_cast<size_t>(r)] == HPU_SUCCESS) st[static_cast<size_t>(r)] = hpuStreamSynchronize(g.stream(r));
            });
          for (auto &th : threads) th.join();
          for (int r = 0; r < n; ++r) ASSERT_EQ(st[static_cast<size_t>(r)], HPU_SUCCESS) << r;
          for (int r = 0; r < n; ++r) {
            auto got = recv[r]->download();
            if (first.empty()) first = got;
            ASSERT_EQ(got, first) << "n=" << n << " " << dtype_name(t) << " count=" << count << " run " << run
                                  << " rank " << r;
          }
        }
      }
    }
  }
}

// Two ranks calling different collectives, counts or roots fail with
// HPU_ERROR_INVALID_USAGE on both ranks, naming both calls, instead of hanging.
TEST(CommFaults, MismatchedCalls) {
  struct Mismatch {
    const char *what;
    size_t count1;
    bool broadcast1;
  };
  for (Mismatch m : {Mismatch{"count", 12, false}, Mismatch{"collective", 10, true}}) {
    SCOPED_TRACE(m.what);
    Group g(2);
    Buffer a(g.dev(0), 64), b(g.dev(1), 64);
    auto t0 = Clock::now();
    HPU_OK(hpuAllreduce(g.stream(0), g.comm(0), a.ptr(), a.ptr(), 10, HPU_INT32, HPU_SUM));
    if (m.broadcast1)
      HPU_OK(hpuBroadcast(g.stream(1), g.comm(1), b.ptr(), b.ptr(), 10, HPU_INT32, 0));
    else
      HPU_OK(hpuAllreduce(g.stream(1), g.comm(1), b.ptr(), b.ptr(), m.count1, HPU_INT32, HPU_SUM));
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(hpuStreamSynchronize(g.stream(r)), HPU_ERROR_INVALID_USAGE) << r;
      std::string msg = hpuGetLastErrorMessage();
      EXPECT_NE(msg.find("mismatched calls"), std::string::npos) << msg;
      EXPECT_NE(msg.find("rank 0 called allreduce #1 (count 10"), std::string::npos) << msg;
      EXPECT_NE(msg.find(m.broadcast1 ? "rank 1 called broadcast #1" : "rank 1 called allreduce #1 (count 12"),
                std::string::npos)
          << msg;
      hpuStatus_t err;
      HPU_OK(hpuCommGetAsyncError(g.comm(r), &err));
      EXPECT_EQ(err, HPU_ERROR_INVALID_USAGE);
    }
    EXPECT_LT(seconds_since(t0), 10.0);  // detected, not timed out (30 s)
    // The error is sticky: the next call fails at once.
    EXPECT_EQ(hpuAllreduce(g.stream(0), g.comm(0), a.ptr(), a.ptr(), 10, HPU_INT32, HPU_SUM), HPU_ERROR_INVALID_USAGE);
  }
}

// A point-to-point receive of the wrong size fails on both sides.
TEST(CommFaults, MismatchedSendRecv) {
  Group g(2);
  Buffer a(g.dev(0), 64), b(g.dev(1), 64);
  HPU_OK(hpuSend(g.stream(0), g.comm(0), a.ptr(), 8, HPU_FLOAT32, 1));
  HPU_OK(hpuRecv(g.stream(1), g.comm(1), b.ptr(), 16, HPU_FLOAT32, 0));
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(hpuStreamSynchronize(g.stream(r)), HPU_ERROR_INVALID_USAGE) << r;
    EXPECT_NE(std::string(hpuGetLastErrorMessage()).find("mismatched calls"), std::string::npos)
        << hpuGetLastErrorMessage();
  }
}

// hpuCommAbort from another thread wakes the rank waiting for a peer that
// never comes (HPU_ERROR_ABORTED), and the peers waiting on it learn at once
// (HPU_ERROR_REMOTE), long before the 30 s deadline.
TEST(CommFaults, AbortFromAnotherThread) {
  Group g(3);
  std::vector<std::unique_ptr<Buffer>> buf;
  for (int r = 0; r < 3; ++r) buf.push_back(std::make_unique<Buffer>(g.dev(r), 4096));
  for (int r = 0; r < 2; ++r)  // rank 2 never calls
    HPU_OK(hpuAllreduce(g.stream(r), g.comm(r), buf[r]->ptr(), buf[r]->ptr(), 1024, HPU_FLOAT32, HPU_SUM));
  auto t0 = Clock::now();
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(hpuCommAbort(g.comm(0)), HPU_SUCCESS);
  });
  EXPECT_EQ(hpuStreamSynchronize(g.stream(0)), HPU_ERROR_ABORTED) << hpuGetLastErrorMessage();
  EXPECT_EQ(hpuStreamSynchronize(g.stream(1)), HPU_ERROR_REMOTE) << hpuGetLastErrorMessage();
  EXPECT_NE(std::string(hpuGetLastErrorMessage()).find("rank 0 aborted"), std::string::npos)
      << hpuGetLastErrorMessage();
  killer.join();
  double took = seconds_since(t0);
  EXPECT_GE(took, 0.15);
  EXPECT_LT(took, 10.0);
  hpuStatus_t err;
  HPU_OK(hpuCommGetAsyncError(g.comm(0), &err));
  EXPECT_EQ(err, HPU_ERROR_ABORTED);
  HPU_OK(hpuCommGetAsyncError(g.comm(2), &err));
  EXPECT_EQ(err, HPU_ERROR_REMOTE);
}

// A rank that never arrives: the others fail with HPU_ERROR_TIMEOUT at their
// (per-communicator) deadline, naming what they waited for.
TEST(CommFaults, RankNeverArrives) {
  Group g(3);
  for (int r = 0; r < 3; ++r) HPU_OK(hpuCommSetTimeout(g.comm(r), 0.5));
  std::vector<std::unique_ptr<Buffer>> buf;
  for (int r = 0; r < 3; ++r) buf.push_back(std::make_unique<Buffer>(g.dev(r), 4096));
  auto t0 = Clock::now();
  for (int r = 0; r < 2; ++r)
    HPU_OK(hpuAllreduce(g.stream(r), g.comm(r), buf[r]->ptr(), buf[r]->ptr(), 1024, HPU_FLOAT32, HPU_SUM));
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(hpuStreamSynchronize(g.stream(r)), HPU_ERROR_TIMEOUT) << r;
    std::string msg = hpuGetLastErrorMessage();
    EXPECT_NE(msg.find("timed out waiting for"), std::string::npos) << msg;
    EXPECT_NE(msg.find("allreduce #1"), std::string::npos) << msg;
  }
  double took = seconds_since(t0);
  EXPECT_GE(took, 0.45);
  EXPECT_LT(took, 5.0);
  hpuStatus_t err;
  HPU_OK(hpuCommGetAsyncError(g.comm(1), &err));
  EXPECT_EQ(err, HPU_ERROR_TIMEOUT);
}

// A rank that never joins: hpuCommInitRank gives up at HPU_COMM_TIMEOUT,
// naming the missing rank.
TEST(CommFaults, InitTimesOut) {
  setenv("HPU_COMM_TIMEOUT", "300ms", 1);
  hpuUniqueId_t id;
  HPU_OK(hpuGetUniqueId(&id));
  hpuDevice_t dev;
  HPU_OK(hpuDeviceOpen(&dev, 0));
  hpuComm_t comm = reinterpret_cast<hpuComm_t>(0x1234);
  auto t0 = Clock::now();
  EXPECT_EQ(hpuCommInitRank(&comm, dev, 2, &id, 0), HPU_ERROR_TIMEOUT);
  std::string msg = hpuGetLastErrorMessage();
  EXPECT_NE(msg.find("missing: 1"), std::string::npos) << msg;
  EXPECT_EQ(comm, reinterpret_cast<hpuComm_t>(0x1234));  // untouched on failure
  double took = seconds_since(t0);
  EXPECT_GE(took, 0.25);
  EXPECT_LT(took, 5.0);
  HPU_OK(hpuDeviceClose(dev));
}

// A process that exits while a rank waits for a peer that never comes does
// not hang: the shutdown hook aborts the communicator.
TEST(CommFaults, ExitWithBlockedCommunicator) {
  auto t0 = Clock::now();
  auto res = hpu_test::run_child({}, [] {
    hpuDevice_t devs[2];
    hpuComm_t comms[2];
    for (int i = 0; i < 2; ++i)
      if (hpuDeviceOpen(&devs[i], i) != HPU_SUCCESS) return 1;
    if (hpuCommInitAll(comms, 2, devs) != HPU_SUCCESS) return 2;
    void *p;
    if (hpuMemAlloc(&p, devs[0], 4096) != HPU_SUCCESS) return 3;
    if (hpuAllreduce(nullptr, comms[0], p, p, 1024, HPU_FLOAT32, HPU_SUM) != HPU_SUCCESS) return 4;
    return 0;  // exit with rank 0 blocked in its allreduce
  });
  EXPECT_EQ(res.exit_code, 0) << res.output;
  EXPECT_LT(seconds_since(t0), 10.0);
}

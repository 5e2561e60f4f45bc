// Allreduces between processes of one host meet in the shm transport's
// shared area (algorithms/shared_memory.cpp): up to 16 KiB in one meeting,
// larger ones chunk by chunk (512 KiB per rank), each rank combining its piece.
// Through the public API, with ranks forked before the library starts (each a
// process with a device of its own), 2 to 4 of them (where every rank combines
// every small input) and 6 (where one rank combines them for all): every data
// type and reduction at sizes on both sides of the small path's limit and over
// several chunks (counts that no rank count divides), queued back to back so
// that calls switch between the paths, in place and not, against the
// references; random floats with the bits of rank order at every size; mismatched counts fail every rank at once, also when they take
// different paths. comm_proc kills and stops a process of three mid-allreduce
// on both paths.
#include <gtest/gtest.h>
#include <hpu/hpu.h>

#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "comm_harness.hpp"
#include "ports.hpp"

using namespace comm_test;

namespace {

// What the ranks report: the first failure of each.
struct Page {
  char message[JobPage::kMaxRanks][512];
};

struct Rank {
  int rank = -1, n = 0;
  hpuDevice_t dev = nullptr;
  hpuComm_t comm = nullptr;
  hpuStream_t stream = nullptr;
};

#define RANK_CHECK(cond, ...)                                             \
  do {                                                                    \
    if (!(cond)) {                                                        \
      snprintf(page->message[self.rank], sizeof page->message[0], __VA_ARGS__); \
      return 1;                                                           \
    }                                                                     \
  } while (0)

// Forks n ranks that join one group over shm and run body; each must return 0.
void run_ranks(int n, const std::function<int(Rank &, Page *)> &body) {
  auto *page = static_cast<Page *>(mmap(nullptr, sizeof(Page), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(page, MAP_FAILED);
  std::memset(page, 0, sizeof *page);
  const int port = hpu_test::free_port();
  auto pids = fork_ranks(n, [&](int r) {
    setenv("HPU_TRANSPORT", "shm", 1);
    setenv("HPU_RANK", std::to_string(r).c_str(), 1);
    setenv("HPU_LOCAL_RANK", std::to_string(r).c_str(), 1);
    setenv("HPU_WORLD_SIZE", std::to_string(n).c_str(), 1);
    setenv("HPU_COMM_ID", ("127.0.0.1:" + std::to_string(port)).c_str(), 1);
    setenv("HPU_COMM_TIMEOUT", "20", 1);
    Rank self;
    self.rank = r;
    self.n = n;
    RANK_CHECK(hpuDeviceOpen(&self.dev, 0) == HPU_SUCCESS && hpuCommInitFromEnv(&self.comm, 1, &self.dev) == HPU_SUCCESS &&
                   hpuDeviceGetDefaultStream(self.dev, &self.stream) == HPU_SUCCESS,
               "setup: %s", hpuGetLastErrorMessage());
    int code = body(self, page);
    hpuCommDestroy(self.comm);
    hpuDeviceClose(self.dev);
    return code;
  });
  auto codes = reap(pids);
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(codes[static_cast<size_t>(r)], 0) << "rank " << r << " of " << n << ": " << page->message[r];
  munmap(page, sizeof *page);
}

// Device buffers of one queued allreduce.
struct Call {
  size_t count = 0;
  bool in_place = false;
  void *send = nullptr, *recv = nullptr;
  std::vector<uint8_t> want;
};

// Every type and reduction: per pair, allreduces of each count queued back to
// back (16 KiB and less in one meeting, the others chunk by chunk: 140001
// elements are 3 chunks of 8-byte ones and 2 of 4-byte ones, the last a part), in place and not, checked
// after one synchronize.
int every_type_and_reduction(Rank &self, Page *page) {
  const size_t counts[] = {1, 7, 1021, 16, 4096, 4097, 20000, 2048, 140001, 3};
  for (int t = 0; t < HPU_NUM_DATA_TYPES; ++t)
    for (int o = 0; o < HPU_NUM_RED_OPS; ++o) {
      auto dt = static_cast<hpuDataType_t>(t);
      auto op = static_cast<hpuRedOp_t>(o);
      if (dt == HPU_BOOL && op == HPU_AVG) continue;
      const size_t e = dtype_size(dt);
      std::vector<Call> calls;
      for (size_t i = 0; i < sizeof counts / sizeof counts[0]; ++i) {
        Call c;
        c.count = counts[i];
        c.in_place = (i + static_cast<size_t>(t + o)) % 2 == 0;
        calls.push_back(c);
      }
      for (Call &c : calls) {
        auto in = encode(dt, inputs(dt, op, self.rank, c.count));
        RANK_CHECK(hpuMemAlloc(&c.recv, self.dev, c.count * e) == HPU_SUCCESS, "alloc");
        c.send = c.recv;
        if (!c.in_place) RANK_CHECK(hpuMemAlloc(&c.send, self.dev, c.count * e) == HPU_SUCCESS, "alloc");
        hpuMemcpy(c.send, in.data(), in.size(), HPU_MEMCPY_HOST_TO_DEVICE);
        c.want = reference(dt, op, self.n, c.count);
      }
      for (Call &c : calls)
        RANK_CHECK(hpuAllreduce(self.stream, self.comm, c.send, c.recv, c.count, dt, op) == HPU_SUCCESS, "%s",
                   hpuGetLastErrorMessage());
      RANK_CHECK(hpuStreamSynchronize(self.stream) == HPU_SUCCESS, "%s %s: %s", dtype_name(dt), op_name(op),
                 hpuGetLastErrorMessage());
      for (Call &c : calls) {
        std::vector<uint8_t> got(c.want.size());
        hpuMemcpy(got.data(), c.recv, got.size(), HPU_MEMCPY_DEVICE_TO_HOST);
        RANK_CHECK(got == c.want, "%s %s count %zu %s: wrong result", dtype_name(dt), op_name(op), c.count,
                   c.in_place ? "in place" : "out of place");
        if (c.send != c.recv) hpuMemFree(c.send);
        hpuMemFree(c.recv);
      }
    }
  return 0;
}

TEST(CommShmAllreduce, EveryTypeAndReductionTwoRanks) { run_ranks(2, every_type_and_reduction); }
TEST(CommShmAllreduce, EveryTypeAndReductionThreeRanks) { run_ranks(3, every_type_and_reduction); }
TEST(CommShmAllreduce, EveryTypeAndReductionFourRanks) { run_ranks(4, every_type_and_reduction); }
TEST(CommShmAllreduce, EveryTypeAndReductionSixRanks) { run_ranks(6, every_type_and_reduction); }

// 600 allreduces queued back to back, each of other values and sizes cycling
// through both paths (70001 floats are one chunk), so that a rank that reads
// a bank too early or too late gets another call's numbers.
int many_calls(Rank &self, Page *page) {
  const size_t counts[] = {1021, 5000, 13, 70001, 4096, 1};
  const size_t kinds = sizeof counts / sizeof counts[0];
  const int calls = 600;
  std::vector<void *> buf(calls);
  for (int i = 0; i < calls; ++i) {
    size_t count = counts[i % kinds];
    std::vector<float> v(count);
    for (size_t j = 0; j < count; ++j) v[j] = static_cast<float>((self.rank * 7 + i * 3 + static_cast<int>(j)) % 101);
    RANK_CHECK(hpuMemAlloc(&buf[i], self.dev, count * 4) == HPU_SUCCESS, "alloc");
    hpuMemcpy(buf[i], v.data(), count * 4, HPU_MEMCPY_HOST_TO_DEVICE);
  }
  for (int i = 0; i < calls; ++i)
    RANK_CHECK(
        hpuAllreduce(self.stream, self.comm, buf[i], buf[i], counts[i % kinds], HPU_FLOAT32, HPU_SUM) == HPU_SUCCESS,
        "%s", hpuGetLastErrorMessage());
  RANK_CHECK(hpuStreamSynchronize(self.stream) == HPU_SUCCESS, "%s", hpuGetLastErrorMessage());
  for (int i = 0; i < calls; ++i) {
    size_t count = counts[i % kinds];
    std::vector<float> got(count);
    hpuMemcpy(got.data(), buf[i], count * 4, HPU_MEMCPY_DEVICE_TO_HOST);
    for (size_t j = 0; j < count; ++j) {
      float want = 0;
      for (int q = 0; q < self.n; ++q) want += static_cast<float>((q * 7 + i * 3 + static_cast<int>(j)) % 101);
      RANK_CHECK(got[j] == want, "call %d element %zu: %g, want %g", i, j, got[j], want);
    }
    hpuMemFree(buf[i]);
  }
  return 0;
}

TEST(CommShmAllreduce, ManyCallsBackToBackTwoRanks) { run_ranks(2, many_calls); }
TEST(CommShmAllreduce, ManyCallsBackToBackFourRanks) { run_ranks(4, many_calls); }
TEST(CommShmAllreduce, ManyCallsBackToBackSixRanks) { run_ranks(6, many_calls); }

// Random floats whose sum depends on the order: every rank gets the bits of
// rank order (what every layout gives), 2 to 4 ranks and 6, in one meeting
// and chunk by chunk (200003 floats are 2 chunks, bf16 1).
int bits_follow_rank_order(Rank &self, Page *page) {
  std::mt19937 gen(11);
  for (hpuDataType_t t : {HPU_FLOAT32, HPU_BFLOAT16})
    for (size_t count : {size_t(1000), (size_t(16) << 10) / dtype_size(t), size_t(200003)}) {
      auto x = random_floats(t, self.n, count, gen);  // the same on every rank
      auto want = rank_order_sum(t, x);
      auto in = encode_floats(t, x[static_cast<size_t>(self.rank)]);
      void *buf = nullptr;
      RANK_CHECK(hpuMemAlloc(&buf, self.dev, in.size()) == HPU_SUCCESS, "alloc");
      hpuMemcpy(buf, in.data(), in.size(), HPU_MEMCPY_HOST_TO_DEVICE);
      RANK_CHECK(hpuAllreduce(self.stream, self.comm, buf, buf, count, t, HPU_SUM) == HPU_SUCCESS &&
                     hpuStreamSynchronize(self.stream) == HPU_SUCCESS,
                 "%s", hpuGetLastErrorMessage());
      std::vector<uint8_t> got(in.size());
      hpuMemcpy(got.data(), buf, got.size(), HPU_MEMCPY_DEVICE_TO_HOST);
      hpuMemFree(buf);
      RANK_CHECK(got == want, "%s count %zu: not the bits of rank order", dtype_name(t), count);
    }
  return 0;
}

TEST(CommShmAllreduce, BitsFollowRankOrderTwoRanks) { run_ranks(2, bits_follow_rank_order); }
TEST(CommShmAllreduce, BitsFollowRankOrderThreeRanks) { run_ranks(3, bits_follow_rank_order); }
TEST(CommShmAllreduce, BitsFollowRankOrderFourRanks) { run_ranks(4, bits_follow_rank_order); }
TEST(CommShmAllreduce, BitsFollowRankOrderSixRanks) { run_ranks(6, bits_follow_rank_order); }

// Rank 0 reduces `small` floats, the others `large`: every rank fails with
// HPU_ERROR_INVALID_USAGE naming the calls, well before the deadline (20 s),
// and the group stays failed.
int mismatched_counts(Rank &self, Page *page, size_t small, size_t large) {
  const size_t count = self.rank == 0 ? small : large;
  void *buf = nullptr;
  RANK_CHECK(hpuMemAlloc(&buf, self.dev, large * 4) == HPU_SUCCESS, "alloc");
  // A rank that comes late may find the group failed already (a peer saw the
  // mismatch first): then its enqueue reports the sticky error.
  const auto start = std::chrono::steady_clock::now();
  hpuStatus_t s = hpuAllreduce(self.stream, self.comm, buf, buf, count, HPU_FLOAT32, HPU_SUM);
  if (s == HPU_SUCCESS) s = hpuStreamSynchronize(self.stream);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string message = hpuGetLastErrorMessage();
  hpuMemFree(buf);
  RANK_CHECK(s == HPU_ERROR_INVALID_USAGE, "status %s: %s", hpuGetErrorName(s), message.c_str());
  RANK_CHECK(message.find("count " + std::to_string(small)) != std::string::npos &&
                 message.find("count " + std::to_string(large)) != std::string::npos,
             "the message names both calls: %s", message.c_str());
  RANK_CHECK(seconds < 10, "the mismatch took %.1f s to fail", seconds);
  hpuStatus_t async = HPU_SUCCESS;
  RANK_CHECK(hpuCommGetAsyncError(self.comm, &async) == HPU_SUCCESS && async == HPU_ERROR_INVALID_USAGE,
             "the error is sticky: %s", hpuGetErrorName(async));
  return 0;
}

TEST(CommShmAllreduce, MismatchedCountsFailEveryRank) {
  run_ranks(3, [](Rank &self, Page *page) { return mismatched_counts(self, page, 100, 200); });
}
// Rank 0's call meets once, the others' chunk by chunk.
TEST(CommShmAllreduce, CountsOnBothSidesOfTheLimitFailEveryRank) {
  run_ranks(3, [](Rank &self, Page *page) { return mismatched_counts(self, page, 1000, 8000); });
}
// Both chunk by chunk, rank 0 in fewer chunks than the others.
TEST(CommShmAllreduce, MismatchedCountsOfChunksFailEveryRank) {
  run_ranks(3, [](Rank &self, Page *page) { return mismatched_counts(self, page, 100000, 300000); });
}

}  // namespace
